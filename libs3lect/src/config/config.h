/* SPDX-License-Identifier: Apache-2.0 */
/* config.h - the configuration handle's layout (internal). */
#ifndef S3LECT_CONFIG_H
#define S3LECT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "s3lect.h"

/* Shared, refcounted custom-store binding (userdata_free runs exactly once). */
typedef struct cfg_custom {
    int refs; /* atomic */
    s3lect_store_get_fn get;
    s3lect_store_put_fn put;
    void *userdata;
    s3lect_free_fn userdata_free;
} cfg_custom;

typedef struct cfg_blob {
    char *data; /* NUL-terminated copy */
    size_t len;
} cfg_blob;

struct s3lect_config {
    char *lock;
    char *server_id;
    char *server_addr;
    int64_t lease_timeout;
    int64_t renew_interval;
    int64_t renew_deadline;
    int64_t frequent_interval;
    int64_t infrequent_interval;
    int64_t max_clock_skew;
    int64_t peer_timeout;
    int64_t request_timeout;
    int64_t max_lease_timeout; /* 0: 4 × lease_timeout */
    int64_t leader_hold;       /* 0: renew_deadline (el_params.hold) */
    int64_t new_lock_wait;     /* -1: lease_timeout, at least leader_hold */
    int64_t priority;          /* el_params.priority */
    int64_t max_hold;          /* 0: never */
    int64_t max_connections;   /* shared runtime: connections per store endpoint */
    int64_t worker_threads;    /* shared runtime: threads for blocking stores */
    int64_t callback_threads;  /* shared runtime: base number of callback threads */
    int peer_mode;
    int poll_mode;
    int release_on_stop;
    int path_style; /* -1 auto, 0 off, 1 on */
    char *peer_health_path;
    char *endpoint;
    char *region;
    char *ca_file;
    char *access_key_id;
    char *secret_access_key;
    char *session_token;
    char *profile;
    char *peer_listen;
    cfg_blob peer_cert, peer_key, peer_ca, peer_client_cert;
    cfg_custom *custom;
    /* s3lect_config_set_clock (runtime/vclock.c): a virtual clock, or NULL.
     * No reference: each elector made on it takes its own. */
    s3lect_clock *vclock;
    uint64_t set; /* bit 1 << opt: option opt was set (s3lect_config_is_set) */
    char errmsg[512];
};

/* Sets cfg->errmsg (printf-style) and returns code. */
int cfg_fail(struct s3lect_config *cfg, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Validates the timing options only (used by update_config), after checking
 * the range of the values cfg_derive_timing derived. */
int cfg_validate_timing(struct s3lect_config *cfg);
/* Derives the timings that were not set from those that were (the rule is
 * at its definition in config.c and in s3lect.h at s3lect_config_is_set). */
void cfg_derive_timing(struct s3lect_config *cfg);
/* 1 if r looks like a region name: 1..64 of [A-Za-z0-9_-] (it goes into the
 * SigV4 credential scope and the endpoint's host name). */
int cfg_region_valid(const char *r);

/* The peer endpoint's default path (s3lect.h's peer_health_path), once. */
#define CFG_DEFAULT_PEER_HEALTH_PATH "/health/leadership"
/* The largest leaseMs a record is trusted with: max_lease_timeout, else 4
 * leases (s3lect.h). The one place of the rule in the library. */
static inline int64_t cfg_max_lease_of(int64_t max_lease, int64_t lease)
{
    return max_lease > 0 ? max_lease : 4 * lease;
}
/* How long a new lock's first writer waits (s3lect.h's new_lock_wait):
 * new_lock_wait, else (-1) one lease, at least leader_hold. The one place
 * of the rule. */
static inline int64_t cfg_new_lock_wait_of(int64_t wait, int64_t lease, int64_t hold)
{
    return wait >= 0 ? wait : hold > lease ? hold : lease;
}
/* cfg's peer_health_path, or the default when unset. */
const char *cfg_peer_health_path(const struct s3lect_config *cfg);
void cfg_custom_release(cfg_custom *c);

#endif

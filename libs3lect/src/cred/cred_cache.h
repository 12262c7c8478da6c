/* SPDX-License-Identifier: Apache-2.0 */
/* cred_cache.h - the credential cache and its refresher (cred_cache.c), as
 * a provider chain sees it: AWS's (cred_chain.c) and the token providers of
 * the layers above aws (gcp, azure), which use it as is.
 *
 * A chain resolves which of its providers applies and hands the cache a new
 * entry (cred_entry_new): for static keys with ops NULL, cur filled and
 * have set; otherwise with the provider's ops and state, a key (equal keys
 * share one entry, so it names everything the fetch depends on) and desc.
 * cred_cache_open then shares, fetches, refreshes, backs off and reports
 * (aws_chain_get, cred_cache_describe, cred_cache_stale) the same way for
 * every provider. What is cached is an cred_fetched.
 *
 * How a bearer-token provider (an OAuth2 access token: GCP, Azure AD) plugs
 * in, from its own layer:
 *
 *   static int my_fetch(const void *state, int first, const _Atomic int *abort,
 *                       cred_fetched *out, char *err, size_t errlen)
 *   {   ... out->bearer = the token (allocated), out->expires_ms = wall ms,
 *       out->principal = "sa@project.iam.gserviceaccount.com" or "";
 *       return 0, S3LECT_EAUTH (refused: err says what to fix) or
 *       S3LECT_ETRANSIENT (no answer: retried with back-off). Blocks at most
 *       its own timeout; gives up early when *abort becomes non-zero. Never
 *       puts a token, key or assertion into err. }
 *   static const cred_ops my_ops = {my_fetch, my_free_state, NULL};
 *
 *   struct cred_cache *e = cred_entry_new(&my_ops);   // NULL ops: static token
 *   e->state = st;                                   // freed by my_free_state
 *   e->key = u_strdup("gcp-sa\n/path/key.json\n..."); // unique per source:
 *                                   // prefix it with the provider's name
 *   snprintf(e->desc, sizeof e->desc, "service account key file %s", path);
 *   (static: e->cur.bearer = token, e->cur.principal, e->have = 1; no key)
 *   rc = cred_cache_open(e, 0 or CRED_CACHE_NOWAIT, &chain, err, errlen);
 *
 * then per request cred_cache_bearer (a copy of the current token, never
 * waiting for a fetch) and cred_cache_refresh_warning; after a 401
 * cred_cache_stale; cred_cache_describe for whoami; cred_cache_release at the
 * end. aws_chain_get (AWS keys) refuses a bearer-token entry.
 */
#ifndef S3LECT_CRED_CACHE_H
#define S3LECT_CRED_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* ---- what a provider fetched: the value the cache holds ---- */
/* Credentials as a provider fetched them. Strings are allocated; wipe and
 * free with cred_fetched_clear(). */
typedef struct cred_fetched {
    char *access_key_id;
    char *secret_access_key;
    char *session_token; /* NULL when none */
    /* A bearer token (an OAuth2 access token: GCP, Azure AD) for token
     * providers, which leave the three AWS fields NULL; NULL for AWS. */
    char *bearer;
    int64_t expires_ms;  /* wall-clock ms since the epoch; 0: does not expire */
    char principal[256]; /* role ARN, service account e-mail etc. where known; "" otherwise */
} cred_fetched;

/* Wipes the secrets (explicit_bzero-like) and frees; leaves *f zeroed. Safe on
 * a zeroed struct. */
void cred_fetched_clear(cred_fetched *f);

/* ---- the cache, as its users see it ---- */

typedef struct cred_cache cred_cache; /* a reference to one cache entry */

enum {
    CRED_CACHE_NOWAIT = 1 /* do not fetch on the caller's thread: the refresher does */
};

/* The current AWS keys (access key id, secret, session token) copied into
 * out (wipe and free with cred_fetched_clear), without blocking on anything
 * but a mutex; *gen (may be NULL) receives their generation. Returns 0,
 * S3LECT_ETRANSIENT when there are none yet or they have expired (err
 * names the source and why the refresh failed), S3LECT_EAUTH when the
 * entry holds a bearer token, or S3LECT_ENOMEM. (aws_chain_get hands them
 * out as aws_creds.) */
int cred_cache_keys(cred_cache *c, cred_fetched *out, uint64_t *gen, char *err, size_t errlen);

/* Drops the reference; the last one frees the entry (and, when no entry is
 * left, stops the refresher thread). */
void cred_cache_release(cred_cache *c);

/* A server refused credentials of generation gen as expired or invalid:
 * refresh once, now, in the background (static sources: nothing to do,
 * see cred_cache_is_static). */
void cred_cache_stale(cred_cache *c, uint64_t gen);

/* The current bearer token, allocated into *token (wipe and free with
 * u_wipe_free), without blocking on anything but a mutex; *gen (may be
 * NULL) receives its generation for cred_cache_stale. Returns 0,
 * S3LECT_ETRANSIENT when there is none yet or it has expired (err names
 * the source and why the refresh failed), S3LECT_EAUTH when the entry
 * holds AWS keys, or S3LECT_ENOMEM. */
int cred_cache_bearer(cred_cache *c, char **token, uint64_t *gen, char *err, size_t errlen);

/* A refresh failed while the current credentials are still valid: the
 * warning to hand the runtime (allocated; the caller frees), at most once
 * per every_ms, else NULL. *seen (failures already reported) and
 * *warned_at (mono ms of the last warning) are the caller's, zero at
 * first. Costs a counter read when there is nothing new. */
char *cred_cache_refresh_warning(cred_cache *c, uint64_t *seen, int64_t *warned_at,
                                 int64_t every_ms);

/* 1 when the source hands out long-lived keys that are never refreshed
 * (config, environment, static profile keys). */
int cred_cache_is_static(const cred_cache *c);

/* What a user may see about the credentials: never a secret. */
typedef struct cred_cache_info {
    char source[320];        /* "profile 'x' (credential_process) in /home/u/.aws/config" */
    char principal[256];     /* role ARN etc.; "" when unknown */
    int64_t expires_ms;      /* wall ms; 0 when they do not expire */
    int64_t fetched_ms;      /* wall ms of the last successful fetch */
    int64_t next_refresh_ms; /* wall ms; 0 when none is scheduled */
    uint64_t refreshes;      /* successful fetches */
    uint64_t failures;       /* failed fetches */
    char last_error[512];    /* the last failure, "" when the last fetch worked */
} cred_cache_info;
void cred_cache_describe(cred_cache *c, cred_cache_info *out);
/* Failed fetches so far (cred_cache_info.failures), without the copy: cheap
 * enough for every request. */
uint64_t cred_cache_failures(cred_cache *c);
/* Successful and failed credential fetches of every chain of the process
 * since it started (static keys count one fetch each). */
void cred_fetch_totals(uint64_t *ok, uint64_t *failed);
/* Test seam: 0 restores the default refresh schedule. Otherwise refreshes
 * happen at this fraction (in 1/1000) of the lifetime, without jitter. */
void cred_cache_test_refresh_permille(int permille);

/* ---- the cache, as a provider plugs into it ---- */

/* How the cache fetches an entry's credentials: what a provider that hands
 * out temporary credentials supplies (static keys have none). */
typedef struct cred_ops {
    /* Fetches fresh credentials (no lock held); first: the fetch at open. */
    int (*fetch)(const void *state, int first, const _Atomic int *abort, cred_fetched *out,
                 char *err, size_t errlen);
    void (*free_state)(void *state);
    /* The chain's last resort only (else NULL): the message when its first
     * fetch fails at open, which then fails even when the source did not
     * answer. */
    void (*open_failed)(const char *desc, const char *last, char *err, size_t errlen);
} cred_ops;

struct cred_cache {
    /* Immutable after creation. */
    const cred_ops *ops; /* NULL: static keys, never fetched */
    void *state;         /* the provider's, for ops->fetch */
    int shared;          /* in the registry (else a private static entry) */
    char *key;
    char desc[320];

    pthread_mutex_t fetch_mu; /* serialises fetches of this entry */

    pthread_mutex_t mu; /* guards what follows */
    cred_fetched cur;
    int have;
    uint64_t gen, stale_gen;
    int64_t fetched_wall, due_wall; /* due 0: nothing scheduled */
    int urgent;
    int last_rc, fail_streak;
    int64_t fetch_ms; /* how long the last fetch took (mono ms) */
    uint64_t refreshes, failures;
    char last_err[512];
    u_rng rng;

    /* Registry (reg_mu). */
    int users, refs;
    struct cred_cache *next;
};

/* A new entry (NULL on out of memory) and its end (frees the state too). */
struct cred_cache *cred_entry_new(const cred_ops *ops);
void cred_entry_free(struct cred_cache *e);
/* Takes a reference to the cache entry for e (consumed; see cred_cache.c). */
int cred_cache_open(struct cred_cache *e, int flags, cred_cache **out, char *err, size_t errlen);

#endif

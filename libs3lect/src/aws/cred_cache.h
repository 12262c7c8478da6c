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
 * (aws_chain_get, aws_chain_describe, aws_chain_stale) the same way for
 * every provider. What is cached is an aws_fetched.
 *
 * How a bearer-token provider (an OAuth2 access token: GCP, Azure AD) plugs
 * in, from its own layer:
 *
 *   static int my_fetch(const void *state, int first, const _Atomic int *abort,
 *                       aws_fetched *out, char *err, size_t errlen)
 *   {   ... out->bearer = the token (allocated), out->expires_ms = wall ms,
 *       out->principal = "sa@project.iam.gserviceaccount.com" or "";
 *       return 0, S3LECT_EAUTH (refused: err says what to fix) or
 *       S3LECT_ETRANSIENT (no answer: retried with back-off). Blocks at most
 *       its own timeout; gives up early when *abort becomes non-zero. Never
 *       puts a token, key or assertion into err. }
 *   static const cred_ops my_ops = {my_fetch, my_free_state, NULL};
 *
 *   struct aws_chain *e = cred_entry_new(&my_ops);   // NULL ops: static token
 *   e->state = st;                                   // freed by my_free_state
 *   e->key = u_strdup("gcp-sa\n/path/key.json\n..."); // unique per source:
 *                                   // prefix it with the provider's name
 *   snprintf(e->desc, sizeof e->desc, "service account key file %s", path);
 *   (static: e->cur.bearer = token, e->cur.principal, e->have = 1; no key)
 *   rc = cred_cache_open(e, 0 or AWS_CHAIN_NOWAIT, &chain, err, errlen);
 *
 * then per request aws_chain_bearer (a copy of the current token, never
 * waiting for a fetch) and aws_chain_refresh_warning; after a 401
 * aws_chain_stale; aws_chain_describe for whoami; aws_chain_release at the
 * end. aws_chain_get (AWS keys) refuses a bearer-token entry.
 */
#ifndef S3LECT_CRED_CACHE_H
#define S3LECT_CRED_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "aws_creds.h"
#include "cred_sources.h"
#include "util.h"

/* How the cache fetches an entry's credentials: what a provider that hands
 * out temporary credentials supplies (static keys have none). */
typedef struct cred_ops {
    /* Fetches fresh credentials (no lock held); first: the fetch at open. */
    int (*fetch)(const void *state, int first, const _Atomic int *abort, aws_fetched *out,
                 char *err, size_t errlen);
    void (*free_state)(void *state);
    /* The chain's last resort only (else NULL): the message when its first
     * fetch fails at open, which then fails even when the source did not
     * answer. */
    void (*open_failed)(const char *desc, const char *last, char *err, size_t errlen);
} cred_ops;

struct aws_chain {
    /* Immutable after creation. */
    const cred_ops *ops; /* NULL: static keys, never fetched */
    void *state;         /* the provider's, for ops->fetch */
    int shared;          /* in the registry (else a private static entry) */
    char *key;
    char desc[320];

    pthread_mutex_t fetch_mu; /* serialises fetches of this entry */

    pthread_mutex_t mu; /* guards what follows */
    aws_fetched cur;
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
    struct aws_chain *next;
};

/* A new entry (NULL on out of memory) and its end (frees the state too). */
struct aws_chain *cred_entry_new(const cred_ops *ops);
void cred_entry_free(struct aws_chain *e);
/* Takes a reference to the cache entry for e (consumed; see cred_cache.c). */
int cred_cache_open(struct aws_chain *e, int flags, aws_chain **out, char *err, size_t errlen);

#endif

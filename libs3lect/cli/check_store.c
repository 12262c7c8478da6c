/* SPDX-License-Identifier: Apache-2.0 */
/* check_store.c - `s3lect check-store URL`: proves that a store really
 * enforces conditional writes before anyone trusts it with leadership.
 *
 * S3-compatible servers exist that accept If-None-Match / If-Match and then
 * ignore them; on such a store two nodes would both "win". The probes run on
 * a scratch key next to the lock (never the lock itself) and print a table.
 * With --data URL it checks a location of fenced writes' objects too
 * (docs/fencing.md): the store's conditions there and the fence on them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws_creds.h"
#include "cli.h"
#include "crypto.h"
#include "store.h"
#include "proc.h"
#include "util.h"

#define CMD "check-store"
#define TIMEOUT_MS 10000
#define MAX_RACERS 64
#define MAX_ROUNDS 100

static const char HELP[] =
    "usage: s3lect check-store URL [--data DATA_URL] [--racers N] [--rounds N] [S3 options]\n"
    "       s3lect check-store --data DATA_URL [S3 options]\n"
    "\n"
    "Checks that the store at URL enforces conditional writes, which s3lect's\n"
    "safety rests on. On a scratch key next to the lock (URL's key plus\n"
    "'.s3lect-check-<random>'; the lock itself is not touched) it checks that:\n"
    "  - a create-if-absent write (If-None-Match: *) creates the object,\n"
    "  - a second create-if-absent is refused,\n"
    "  - the object reads back with the ETag the write returned,\n"
    "  - a write with the current ETag (If-Match) succeeds,\n"
    "  - a write with a stale ETag is refused and changes nothing,\n"
    "  - If-Match on a missing key is refused and creates nothing,\n"
    "  - N racing writers with the same ETag: exactly one wins, each round.\n"
    "URL is any lock URL: s3://, gs://, az://, etcd://, redis://, dynamodb://, postgres://,\n"
    "route53:// (the scratch record there is 's3lect-check-<random>.' in front of the\n"
    "name) or a file path; the checks are the same, in each store's own terms.\n"
    "It prints a pass/fail table. The scratch object is left in place (s3lect\n"
    "needs no delete permission); remove it when you like.\n"
    "\n"
    "With --data DATA_URL (an object where fenced writes will go: s3://, gs://,\n"
    "az://, file; docs/fencing.md) it checks, on a scratch object next to it\n"
    "(DATA_URL plus '.s3lect-check-<random>'), that:\n"
    "  - a create-if-absent creates it, and If-None-Match on it is refused,\n"
    "  - If-Match with the current version succeeds, with a stale one is refused,\n"
    "  - a fenced write stores its envelope ('s3lect-fenced/1 ...') and reads back,\n"
    "  - identical bytes written twice, fenced, get two versions,\n"
    "  - a fenced read-modify-write over a stale version is refused,\n"
    "  - an older term's writes after a newer term's are fenced,\n"
    "  - a fenced delete reads as not found and an older term cannot re-create it,\n"
    "  - a second holder of a term is fenced after the first wrote.\n"
    "It says whether the store gives identical bytes the same version (S3's ETag\n"
    "is their MD5: why fenced writes carry a nonce). The scratch object is left\n"
    "in place as a fenced delete's tombstone. The store API s3lect uses has no\n"
    "user metadata, so none is checked.\n"
    "\n"
    "options:\n"
    "  --data DATA_URL         also (or, without URL, only) check this data location\n"
    "  --racers N              concurrent writers per round (default 8, 2..64)\n"
    "  --rounds N              racing rounds (default 5, 1..100)\n"
    "\n"
    "S3 options:\n"
    "  --endpoint URL          S3 endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS)\n"
    "  --region REGION         S3 region (default: AWS_REGION, AWS_DEFAULT_REGION, us-east-1)\n"
    "  --path-style            path-style S3 addressing (automatic for IPs and localhost)\n"
    "  --ca-file FILE          PEM CA bundle for HTTPS\n"
    "credentials: the AWS SDKs' chain (environment, web identity, ~/.aws profiles with\n"
    "roles, SSO and credential_process, container and EC2 instance metadata; docs/s3.md),\n"
    "never flags; the report names the source it used.\n"
    "\n"
    "exit codes: 0 every check passed, 1 a check failed or the store could not be\n"
    "reached, 2 usage error.\n";

typedef struct checker {
    s3lect_config *cfg;
    st_store *store;
    char *key;     /* the lock key */
    char *scratch; /* the scratch key */
    int passed, failed;
    int created; /* the scratch object exists */
    int stopped; /* a store cannot be used as configured */
} checker;

static void report(checker *c, int ok, const char *what, const char *detail)
{
    if (ok)
        c->passed++;
    else
        c->failed++;
    printf("  %s  %s%s%s\n", ok ? "PASS" : "FAIL", what, detail && *detail ? ": " : "",
           detail ? detail : "");
    fflush(stdout);
}

static const char *outcome_name(int o)
{
    switch (o) {
    case ST_OK:
        return "accepted";
    case ST_NOT_FOUND:
        return "not found";
    case ST_PRECONDITION:
        return "refused (precondition failed)";
    case ST_AUTH:
        return "permission error";
    case ST_TRANSIENT:
        return "temporary error";
    default:
        return "configuration error";
    }
}

/* "accepted" or "refused (...)", plus the store's message for errors. */
static void describe(const st_result *r, char *buf, size_t len)
{
    if (r->outcome == ST_OK || r->outcome == ST_PRECONDITION || r->outcome == ST_NOT_FOUND ||
        !r->message)
        snprintf(buf, len, "%s", outcome_name(r->outcome));
    else
        snprintf(buf, len, "%s: %s", outcome_name(r->outcome), r->message);
}

/* An error that means the store cannot be checked at all (bad credentials,
 * bucket, endpoint): stop instead of failing every later probe the same way. */
static int unreachable(const st_result *r)
{
    return r->outcome == ST_AUTH || r->outcome == ST_FATAL;
}

/* The credentials' source, principal and expiry (the store holds a
 * reference to the same cache entry, so this fetches nothing new). */
static void print_credentials(const s3lect_config *cfg)
{
    char err[600];
    int n = s3lect_config_get_str(cfg, S3LECT_OPT_LOCK, NULL, 0);
    char *lock = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!lock)
        return;
    s3lect_config_get_str(cfg, S3LECT_OPT_LOCK, lock, (size_t)n + 1);
    cred_cache_info in;
    int no_token = 0;
    int cr = cli_credentials_info(cfg, lock, 0, &in, &no_token, err, sizeof err);
    free(lock);
    if (cr != CLI_CRED_OK)
        return;
    if (no_token)
        printf("  credentials: %s\n", in.source);
    else
        cli_print_credentials(&in, "  ", stdout);
}

/* ---- the racing writers ---- */

/* All writers of a round wait here and are released together. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

typedef struct racer {
    st_store *store;
    const char *key;
    const char *etag;
    gate *start;
    char body[96];
    st_result res;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    pthread_mutex_lock(&r->start->mu);
    while (!r->start->open)
        pthread_cond_wait(&r->start->cv, &r->start->mu);
    pthread_mutex_unlock(&r->start->mu);
    st_put(r->store, r->key, r->body, strlen(r->body), r->etag, TIMEOUT_MS, &r->res);
    return NULL;
}

/* Opens one store per racer (each has its own connection), then runs the
 * rounds; passes when every round had exactly one winner. */
static void check_races(checker *c, int nracers, int rounds)
{
    racer rs[MAX_RACERS];
    pthread_t th[MAX_RACERS];
    char detail[1024] = "";
    int ok = 1;
    memset(rs, 0, sizeof rs);
    for (int i = 0; i < nracers; i++) {
        char *key = NULL;
        char err[512];
        if (st_open_config(c->cfg, &rs[i].store, &key, err, sizeof err) != 0) {
            snprintf(detail, sizeof detail, "cannot open store for writer %d: %s", i + 1, err);
            ok = 0;
            nracers = i;
            break;
        }
        free(key);
    }
    for (int round = 1; ok && round <= rounds; round++) {
        st_result cur = {0};
        st_get(c->store, c->scratch, TIMEOUT_MS, &cur);
        if (cur.outcome != ST_OK) {
            char d[600];
            describe(&cur, d, sizeof d);
            snprintf(detail, sizeof detail, "round %d: reading the scratch key: %s", round, d);
            st_result_clear(&cur);
            ok = 0;
            break;
        }
        gate start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        int started = 0;
        for (int i = 0; i < nracers; i++) {
            rs[i].key = c->scratch;
            rs[i].etag = cur.etag;
            rs[i].start = &start;
            snprintf(rs[i].body, sizeof rs[i].body,
                     "{\"s3lectCheck\":\"race\",\"round\":%d,\"writer\":%d}", round, i + 1);
            memset(&rs[i].res, 0, sizeof rs[i].res);
            if (u_thread_create(&th[i], NULL, race, &rs[i]) != 0)
                break;
            started++;
        }
        pthread_mutex_lock(&start.mu);
        start.open = 1;
        pthread_cond_broadcast(&start.cv);
        pthread_mutex_unlock(&start.mu);
        int winners = 0, refused = 0, winner = -1;
        char other[600] = "";
        for (int i = 0; i < started; i++) {
            pthread_join(th[i], NULL);
            if (rs[i].res.outcome == ST_OK) {
                winners++;
                winner = i;
            } else if (rs[i].res.outcome == ST_PRECONDITION) {
                refused++;
            } else if (!other[0]) {
                describe(&rs[i].res, other, sizeof other);
            }
        }
        st_result_clear(&cur);
        if (started < nracers) {
            snprintf(detail, sizeof detail, "round %d: could only start %d of %d threads", round,
                     started, nracers);
            ok = 0;
        } else if (winners != 1) {
            snprintf(detail, sizeof detail,
                     "round %d: %d of %d writers with the same If-Match won (want exactly 1)%s%s",
                     round, winners, nracers, other[0] ? "; other answers: " : "", other);
            ok = 0;
        } else if (refused != nracers - 1) {
            snprintf(detail, sizeof detail,
                     "round %d: 1 winner but only %d of %d losers were refused; other: %s", round,
                     refused, nracers - 1, other);
            ok = 0;
        } else {
            /* The stored object must be the winner's write. */
            st_result after = {0};
            st_get(c->store, c->scratch, TIMEOUT_MS, &after);
            if (after.outcome != ST_OK || !after.body || strcmp(after.body, rs[winner].body) != 0 ||
                !after.etag || !rs[winner].res.etag ||
                strcmp(after.etag, rs[winner].res.etag) != 0) {
                snprintf(detail, sizeof detail,
                         "round %d: the object after the race is not the winner's write", round);
                ok = 0;
            }
            st_result_clear(&after);
        }
        for (int i = 0; i < nracers; i++)
            st_result_clear(&rs[i].res);
    }
    for (int i = 0; i < nracers; i++)
        st_destroy(rs[i].store);
    char what[128];
    snprintf(what, sizeof what, "%d racing writers x %d rounds: exactly one wins each round",
             nracers, rounds);
    report(c, ok, what, detail);
}

/* ---- the sequential probes ---- */

#define V_CREATE "{\"s3lectCheck\":\"create\"}"
#define V_UPDATE "{\"s3lectCheck\":\"update\"}"
#define V_STALE "{\"s3lectCheck\":\"stale\"}"

/* A second create is refused, and the first write reads back as written,
 * with the etag its PUT returned (r1). */
static void check_second_create(checker *c, const st_result *r1)
{
    char d[700];
    st_result r2 = {0}, rd = {0};
    st_put(c->store, c->scratch, V_STALE, strlen(V_STALE), NULL, TIMEOUT_MS, &r2);
    describe(&r2, d, sizeof d);
    report(c, r2.outcome == ST_PRECONDITION, "a second create-if-absent is refused",
           r2.outcome == ST_PRECONDITION ? "" : d);

    st_get(c->store, c->scratch, TIMEOUT_MS, &rd);
    describe(&rd, d, sizeof d);
    int body_ok = rd.outcome == ST_OK && rd.body && strcmp(rd.body, V_CREATE) == 0;
    int etag_ok = rd.outcome == ST_OK && rd.etag && strcmp(rd.etag, r1->etag) == 0;
    if (rd.outcome == ST_OK && r2.outcome == ST_OK)
        snprintf(d, sizeof d, "the object was overwritten by the refused write");
    else if (rd.outcome == ST_OK && !body_ok)
        snprintf(d, sizeof d, "read back different content");
    else if (rd.outcome == ST_OK && !etag_ok)
        snprintf(d, sizeof d, "GET's ETag %s differs from the ETag %s the PUT returned",
                 rd.etag ? rd.etag : "(none)", r1->etag);
    int ok = body_ok && etag_ok;
    report(c, ok, "reads back the first write with the ETag the PUT returned", ok ? "" : d);
    st_result_clear(&r2);
    st_result_clear(&rd);
}

/* A write with the current etag succeeds with a new one; then one with the
 * stale etag (r1's) is refused and changes nothing. */
static void check_if_match(checker *c, const st_result *r1)
{
    char d[700];
    st_result r3 = {0}, r4 = {0}, rd2 = {0};
    st_put(c->store, c->scratch, V_UPDATE, strlen(V_UPDATE), r1->etag, TIMEOUT_MS, &r3);
    describe(&r3, d, sizeof d);
    int fresh = r3.outcome == ST_OK && r3.etag && strcmp(r3.etag, r1->etag) != 0;
    if (r3.outcome == ST_OK && r3.etag && !fresh)
        snprintf(d, sizeof d, "the new write kept the old ETag %s", r1->etag);
    report(c, fresh, "a write with the current ETag (If-Match) succeeds with a new ETag",
           fresh ? "" : d);

    const char *what = "a write with a stale ETag is refused and changes nothing";
    if (r3.outcome != ST_OK) {
        report(c, 0, what, "not checked: the If-Match write before it failed");
        st_result_clear(&r3);
        return;
    }
    st_put(c->store, c->scratch, V_STALE, strlen(V_STALE), r1->etag, TIMEOUT_MS, &r4);
    st_get(c->store, c->scratch, TIMEOUT_MS, &rd2);
    describe(&r4, d, sizeof d);
    int unchanged = rd2.outcome == ST_OK && rd2.body && strcmp(rd2.body, V_UPDATE) == 0;
    if (r4.outcome == ST_PRECONDITION && rd2.outcome == ST_OK && rd2.body && !unchanged)
        snprintf(d, sizeof d, "refused, but the object changed anyway");
    int ok = r4.outcome == ST_PRECONDITION && unchanged;
    report(c, ok, what, ok ? "" : d);
    st_result_clear(&r3);
    st_result_clear(&r4);
    st_result_clear(&rd2);
}

/* If-Match on a key that does not exist is refused and creates nothing. */
static void check_missing(checker *c)
{
    char d[700];
    char *missing = u_asprintf("%s-missing", c->scratch);
    if (!missing)
        return;
    st_result rm = {0}, rmg = {0};
    const char *fake_etag = "\"00000000000000000000000000000000\"";
    st_put(c->store, missing, V_STALE, strlen(V_STALE), fake_etag, TIMEOUT_MS, &rm);
    st_get(c->store, missing, TIMEOUT_MS, &rmg);
    describe(&rm, d, sizeof d);
    int refused = rm.outcome == ST_PRECONDITION || rm.outcome == ST_NOT_FOUND;
    if (refused && rmg.outcome != ST_NOT_FOUND)
        snprintf(d, sizeof d, "refused, but the key exists afterwards");
    int ok = refused && rmg.outcome == ST_NOT_FOUND;
    report(c, ok, "If-Match on a missing key is refused and creates nothing", ok ? "" : d);
    free(missing);
    st_result_clear(&rm);
    st_result_clear(&rmg);
}

static int run_checks(checker *c, int nracers, int rounds)
{
    char d[700];
    st_result r1 = {0};
    st_put(c->store, c->scratch, V_CREATE, strlen(V_CREATE), NULL, TIMEOUT_MS, &r1);
    describe(&r1, d, sizeof d);
    int ok = r1.outcome == ST_OK && r1.etag;
    report(c, ok, "create-if-absent (If-None-Match: *) creates the object", ok ? "" : d);
    if (!ok) {
        /* Nothing else can be checked without the scratch object. */
        int stop = unreachable(&r1);
        st_result_clear(&r1);
        return stop ? -1 : 0;
    }
    c->created = 1;
    check_second_create(c, &r1);
    check_if_match(c, &r1);
    check_missing(c);
    st_result_clear(&r1);
    check_races(c, nracers, rounds);
    return 0;
}

/* ---- the data location (--data): the store's conditions and the fence ---- */

#define D_BYTES "{\"s3lectCheck\":\"data\"}"
#define D_UPDATE "{\"s3lectCheck\":\"data-update\"}"
#define D_HOLDER "s3lect-check-store"
#define D_OTHER_HOLDER "s3lect-check-store-other"

typedef struct data_checker {
    checker *c;
    s3lect_config *cfg;
    st_store *store;
    char *key;     /* the data URL's key */
    char *scratch; /* the scratch object's key */
    char *url;     /* and its URL, for the fence */
    /* Fences of term 1 and of term 2, and of term 2 with another holder
     * (tokens made here: no elector leads anything). */
    s3lect_fence *older, *newer, *second;
    int created;
} data_checker;

/* A fence token "s3lect-fence.1.TERM.HOLDER.LOCK" (s3lect.h), HOLDER and
 * LOCK in unpadded base64url. Allocated; NULL when out of memory. */
static char *make_token(int64_t term, const char *holder, const char *lock)
{
    char *h = u_base64_dup(holder, strlen(holder), U_B64_URL | U_B64_NOPAD);
    char *l = u_base64_dup(lock, strlen(lock), U_B64_URL | U_B64_NOPAD);
    char *t = h && l ? u_asprintf("s3lect-fence.1.%lld.%s.%s", (long long)term, h, l) : NULL;
    free(h);
    free(l);
    return t;
}

/* "what: the code's name (the fence's message)", for a fenced call's answer. */
static void fence_detail(s3lect_fence *f, int rc, const char *what, char *buf, size_t len)
{
    char msg[512] = "";
    if (rc != S3LECT_OK)
        s3lect_fence_errmsg(f, msg, sizeof msg);
    snprintf(buf, len, "%s: %s%s%s%s", what, rc == S3LECT_OK ? "accepted" : s3lect_strerror(rc),
             msg[0] ? " (" : "", msg, msg[0] ? ")" : "");
}

/* The store's own conditions at the data location, on the scratch object.
 * 0 to go on to the fence's checks, 1 to skip them (no scratch object), -1
 * when the store cannot be used as configured. */
static int data_conditions(data_checker *d)
{
    checker *c = d->c;
    char det[700] = "";
    st_result r1 = {0}, r2 = {0}, r3 = {0}, r4 = {0}, r5 = {0}, rd = {0};
    st_put(d->store, d->scratch, D_BYTES, strlen(D_BYTES), NULL, TIMEOUT_MS, &r1);
    describe(&r1, det, sizeof det);
    int ok = r1.outcome == ST_OK && r1.etag;
    report(c, ok, "data: create-if-absent (If-None-Match: *) creates the scratch object",
           ok ? "" : det);
    if (!ok) {
        int stop = unreachable(&r1);
        st_result_clear(&r1);
        return stop ? -1 : 1;
    }
    d->created = 1;

    st_put(d->store, d->scratch, D_BYTES, strlen(D_BYTES), NULL, TIMEOUT_MS, &r2);
    describe(&r2, det, sizeof det);
    ok = r2.outcome == ST_PRECONDITION;
    report(c, ok, "data: If-None-Match on an existing object is refused (412)", ok ? "" : det);

    /* The same bytes again over the current version. */
    st_put(d->store, d->scratch, D_BYTES, strlen(D_BYTES), r1.etag, TIMEOUT_MS, &r3);
    describe(&r3, det, sizeof det);
    ok = r3.outcome == ST_OK && r3.etag;
    report(c, ok, "data: a write with the current version (If-Match) succeeds", ok ? "" : det);
    if (ok && strcmp(r1.etag, r3.etag) == 0)
        printf("  info  identical bytes written again kept their version %s: this store's "
               "version is a hash of the bytes (an S3 ETag is their MD5), so a version alone "
               "cannot tell two writes apart; fenced writes put a nonce in every write\n",
               r3.etag);
    else if (ok)
        printf("  info  identical bytes written again got a new version (%s, then %s)\n", r1.etag,
               r3.etag);

    /* A stale version: r1's, once other bytes went over the current one. */
    const char *what = "data: a write with a stale version (If-Match) is refused (412) and "
                       "changes nothing";
    if (!ok) {
        report(c, 0, what, "not checked: the If-Match write before it failed");
    } else {
        st_put(d->store, d->scratch, D_UPDATE, strlen(D_UPDATE), r3.etag, TIMEOUT_MS, &r4);
        if (r4.outcome != ST_OK) {
            describe(&r4, det, sizeof det);
            char w[760];
            snprintf(w, sizeof w, "not checked: an If-Match write with the current version: %s",
                     det);
            report(c, 0, what, w);
        } else {
            st_put(d->store, d->scratch, V_STALE, strlen(V_STALE), r1.etag, TIMEOUT_MS, &r5);
            st_get(d->store, d->scratch, TIMEOUT_MS, &rd);
            describe(&r5, det, sizeof det);
            int same = rd.outcome == ST_OK && rd.body && strcmp(rd.body, D_UPDATE) == 0;
            if (r5.outcome == ST_PRECONDITION && !same)
                snprintf(det, sizeof det, "refused, but the object changed anyway");
            ok = r5.outcome == ST_PRECONDITION && same;
            report(c, ok, what, ok ? "" : det);
        }
    }
    st_result_clear(&r1);
    st_result_clear(&r2);
    st_result_clear(&r3);
    st_result_clear(&r4);
    st_result_clear(&r5);
    st_result_clear(&rd);
    return 0;
}

/* Reads the scratch object through fence f: its rc, and *version, *term
 * (the body must be bytes: else rc is S3LECT_ECORRUPT). */
static int fenced_read(data_checker *d, s3lect_fence *f, const char *bytes, char **version,
                       int64_t *term)
{
    char *body = NULL;
    size_t len = 0;
    *version = NULL;
    *term = 0;
    int rc = s3lect_fenced_get(f, d->url, &body, &len, version, term);
    if (rc == S3LECT_OK && bytes && (len != strlen(bytes) || memcmp(body, bytes, len) != 0))
        rc = S3LECT_ECORRUPT;
    s3lect_free(body);
    return rc;
}

/* A fenced write: its envelope is what the store holds, and reads back.
 * *v1: its version. */
static void fence_check_envelope(data_checker *d, char **v1)
{
    checker *c = d->c;
    char det[900] = "";
    int64_t term = 0;
    int rc = s3lect_fenced_put(d->older, d->url, D_BYTES, strlen(D_BYTES));
    st_result raw = {0};
    st_get(d->store, d->scratch, TIMEOUT_MS, &raw);
    int g = fenced_read(d, d->older, D_BYTES, v1, &term);
    int ok = 0;
    if (rc != S3LECT_OK)
        fence_detail(d->older, rc, "the fenced put", det, sizeof det);
    else if (raw.outcome != ST_OK || !raw.body ||
             strncmp(raw.body, "s3lect-fenced/1 ", strlen("s3lect-fenced/1 ")) != 0)
        snprintf(det, sizeof det, "the stored bytes do not begin with 's3lect-fenced/1 '");
    else if (g != S3LECT_OK || term != 1)
        fence_detail(d->older, g, "reading it back", det, sizeof det);
    else
        ok = 1;
    report(c, ok, "data: a fenced write stores its envelope (s3lect-fenced/1 ...) and reads back",
           ok ? "" : det);
    st_result_clear(&raw);
}

/* The same bytes again, fenced: a version of their own (*v2). */
static void fence_check_identical(data_checker *d, const char *v1, char **v2)
{
    char det[900] = "";
    int64_t term = 0;
    int rc = s3lect_fenced_put(d->older, d->url, D_BYTES, strlen(D_BYTES));
    int g = fenced_read(d, d->older, D_BYTES, v2, &term);
    int ok = rc == S3LECT_OK && g == S3LECT_OK && v1 && *v2 && strcmp(v1, *v2) != 0;
    if (rc != S3LECT_OK)
        fence_detail(d->older, rc, "the second fenced put", det, sizeof det);
    else if (g != S3LECT_OK)
        fence_detail(d->older, g, "reading it back", det, sizeof det);
    else if (!ok)
        snprintf(det, sizeof det, "both writes have version %s: a zombie's If-Match would match",
                 *v2 ? *v2 : "(none)");
    report(d->c, ok, "data: identical bytes written twice, fenced, get two versions",
           ok ? "" : det);
}

/* A read-modify-write over a stale version (v1; v2 is current). */
static void fence_check_stale(data_checker *d, const char *v1, const char *v2)
{
    char det[900] = "";
    int64_t term = 0;
    int rc =
        v1 ? s3lect_fenced_cas(d->older, d->url, D_UPDATE, strlen(D_UPDATE), v1) : S3LECT_EINVAL;
    char *now = NULL;
    int g = fenced_read(d, d->older, D_BYTES, &now, &term);
    int ok = rc == S3LECT_EPRECONDITION && g == S3LECT_OK && now && v2 && strcmp(now, v2) == 0;
    if (rc != S3LECT_EPRECONDITION)
        fence_detail(d->older, rc, "the cas over the first version", det, sizeof det);
    else if (!ok)
        snprintf(det, sizeof det, "refused, but the object changed anyway");
    report(d->c, ok, "data: a fenced read-modify-write over a stale version is refused",
           ok ? "" : det);
    s3lect_free(now);
}

/* A newer term writes the same bytes; the older term's writes, one over
 * the version it read (v2), are fenced. */
static void fence_check_newer(data_checker *d, const char *v2)
{
    char det[900] = "", *v3 = NULL;
    int64_t term = 0;
    int rc = s3lect_fenced_put(d->newer, d->url, D_BYTES, strlen(D_BYTES));
    int zp = s3lect_fenced_put(d->older, d->url, D_UPDATE, strlen(D_UPDATE));
    int zc =
        v2 ? s3lect_fenced_cas(d->older, d->url, D_UPDATE, strlen(D_UPDATE), v2) : S3LECT_EINVAL;
    int g = fenced_read(d, d->newer, D_BYTES, &v3, &term);
    int ok = rc == S3LECT_OK && zp == S3LECT_EFENCED && zc == S3LECT_EFENCED && g == S3LECT_OK &&
             term == 2;
    if (rc != S3LECT_OK)
        fence_detail(d->newer, rc, "the newer term's put", det, sizeof det);
    else if (zp != S3LECT_EFENCED)
        fence_detail(d->older, zp, "the older term's put", det, sizeof det);
    else if (zc != S3LECT_EFENCED)
        fence_detail(d->older, zc, "the older term's cas over the version it read", det,
                     sizeof det);
    else if (!ok)
        snprintf(det, sizeof det, "the newer term's bytes are not there any more");
    report(d->c, ok,
           "data: an older term's put and read-modify-write after a newer term wrote the same "
           "bytes are fenced",
           ok ? "" : det);
    s3lect_free(v3);
}

/* A fenced delete: a tombstone the older term cannot write over. */
static void fence_check_delete(data_checker *d)
{
    char det[900] = "", *v3 = NULL;
    int64_t term = 0;
    int rc = s3lect_fenced_delete(d->newer, d->url);
    int g = fenced_read(d, d->newer, NULL, &v3, &term);
    int zp = s3lect_fenced_put(d->older, d->url, D_UPDATE, strlen(D_UPDATE));
    int zc = s3lect_fenced_cas(d->older, d->url, D_UPDATE, strlen(D_UPDATE), NULL);
    s3lect_free(v3);
    int g2 = fenced_read(d, d->newer, NULL, &v3, &term);
    int ok = rc == S3LECT_OK && g == S3LECT_ENOTFOUND && zp == S3LECT_EFENCED &&
             zc == S3LECT_EFENCED && g2 == S3LECT_ENOTFOUND;
    if (rc != S3LECT_OK)
        fence_detail(d->newer, rc, "the fenced delete", det, sizeof det);
    else if (g != S3LECT_ENOTFOUND)
        fence_detail(d->newer, g, "reading it after the delete", det, sizeof det);
    else if (zp != S3LECT_EFENCED)
        fence_detail(d->older, zp, "the older term's re-create (put)", det, sizeof det);
    else if (zc != S3LECT_EFENCED)
        fence_detail(d->older, zc, "the older term's create-only cas", det, sizeof det);
    else if (!ok)
        snprintf(det, sizeof det, "the object is there again after the delete");
    report(d->c, ok,
           "data: a fenced delete reads as not found, and an older term cannot create it again",
           ok ? "" : det);
    s3lect_free(v3);
}

/* The fence on the scratch object: envelope, versions, terms, tombstones,
 * a second holder. */
static void data_fence(data_checker *d)
{
    char det[900] = "", *v1 = NULL, *v2 = NULL;
    fence_check_envelope(d, &v1);
    fence_check_identical(d, v1, &v2);
    fence_check_stale(d, v1, v2);
    fence_check_newer(d, v2);
    fence_check_delete(d);
    /* Another holder of the newer term, after the first wrote. */
    int rc = s3lect_fenced_put(d->second, d->url, D_UPDATE, strlen(D_UPDATE));
    int ok = rc == S3LECT_EFENCED;
    fence_detail(d->second, rc, "its put", det, sizeof det);
    report(d->c, ok, "data: a second holder of a term is fenced after the first wrote",
           ok ? "" : det);
    s3lect_free(v1);
    s3lect_free(v2);
}

/* The scratch object's URL: the data URL with tag after its key (before a
 * query), when that URL names the store's sibling key; NULL otherwise. */
static char *data_scratch_url(const char *data, const char *scratch, const char *tag)
{
    size_t at = strcspn(data, "?#");
    char *url = u_asprintf("%.*s%s%s", (int)at, data, tag, data + at);
    st_location loc;
    char err[512];
    if (!url || st_location_parse(url, &loc, err, sizeof err) != 0) {
        free(url);
        return NULL;
    }
    int same = loc.key && strcmp(loc.key, scratch) == 0;
    st_location_clear(&loc);
    if (!same) {
        free(url);
        return NULL;
    }
    return url;
}

static void data_clear(data_checker *d)
{
    s3lect_fence_free(d->older);
    s3lect_fence_free(d->newer);
    s3lect_fence_free(d->second);
    st_destroy(d->store);
    free(d->key);
    free(d->scratch);
    free(d->url);
    s3lect_config_free(d->cfg);
}

/* Checks the data location of --data. An exit code when it cannot be
 * checked at all (usage, setup), else -1; c->stopped when the store cannot
 * be used as configured. */
static int check_data(checker *c, const cli_opts *o, const char *data)
{
    data_checker d = {0};
    d.c = c;
    cli_opts od = *o;
    od.lock = data;
    d.cfg = cli_config(CMD, &od);
    if (!d.cfg)
        return CLI_EXIT_USAGE;
    char err[512];
    int rc = st_open_config(d.cfg, &d.store, &d.key, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "s3lect %s: --data: %s\n", CMD, err);
        data_clear(&d);
        return rc == S3LECT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
    }
    uint8_t rnd[4];
    char hex[9], tag[32];
    if (cr_random(rnd, sizeof rnd) != 0)
        memset(rnd, 0xa5, sizeof rnd);
    cr_hex(rnd, sizeof rnd, hex);
    snprintf(tag, sizeof tag, ".s3lect-check-%s", hex);
    d.scratch = st_sibling_key(d.store, d.key, tag);
    d.url = d.scratch ? data_scratch_url(data, d.scratch, tag) : NULL;
    if (!d.url) {
        cli_usage_error(CMD,
                        "--data: no scratch object can be named next to '%.200s': give an "
                        "object URL (s3://BUCKET/KEY, gs://, az://, a file)",
                        data);
        data_clear(&d);
        return CLI_EXIT_USAGE;
    }
    /* The tokens' lock names no object: a fence refuses to write the lock
     * it names and the objects next to it, and the scratch object is next
     * to the data URL. */
    char *lock = u_strdup("s3lect check-store --data");
    char *t1 = lock ? make_token(1, D_HOLDER, lock) : NULL;
    char *t2 = lock ? make_token(2, D_HOLDER, lock) : NULL;
    char *t3 = lock ? make_token(2, D_OTHER_HOLDER, lock) : NULL;
    rc = t1 && t2 && t3 ? s3lect_fence_new_token(d.cfg, t1, &d.older) : S3LECT_ENOMEM;
    if (rc == S3LECT_OK)
        rc = s3lect_fence_new_token(d.cfg, t2, &d.newer);
    if (rc == S3LECT_OK)
        rc = s3lect_fence_new_token(d.cfg, t3, &d.second);
    free(lock);
    free(t1);
    free(t2);
    free(t3);
    if (rc != S3LECT_OK) {
        fprintf(stderr, "s3lect %s: --data: cannot make a fence for '%.200s': %s\n", CMD, data,
                s3lect_strerror(rc));
        data_clear(&d);
        return CLI_EXIT_ERROR;
    }

    char *shown = st_lock_display(d.url);
    printf("data location %s\n  scratch object: %s\n", data, shown ? shown : "");
    free(shown);
    fflush(stdout);
    int r = data_conditions(&d);
    if (r == 0)
        data_fence(&d);
    else if (r < 0)
        c->stopped = 1;
    if (d.created) {
        shown = st_lock_display(d.url);
        printf("note: the scratch object %s was left in place (the store API s3lect uses has no "
               "delete); delete it when you like\n",
               shown ? shown : d.scratch);
        free(shown);
    }
    data_clear(&d);
    return -1;
}

/* ---- arguments ---- */

static int parse_count(const char *flag, const char *v, int lo, int hi, int *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < lo || n > hi) {
        cli_usage_error(CMD, "%s: '%s' is not a number from %d to %d", flag, v, lo, hi);
        return -1;
    }
    *out = (int)n;
    return 0;
}

/* Accepts only the lock and S3 options of the common set. */
static int is_s3_option(const char *a)
{
    static const char *const names[] = {"--lock", "--endpoint", "--region", "--ca-file",
                                        "--path-style"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(a, names[k], n) == 0 && (a[n] == '\0' || a[n] == '='))
            return 1;
    }
    return 0;
}

static int count_opt(int argc, char **argv, int *i, const char *flag, int lo, int hi, int *out)
{
    const char *a = argv[*i];
    size_t n = strlen(flag);
    if (strncmp(a, flag, n) == 0 && a[n] == '=')
        return parse_count(flag, a + n + 1, lo, hi, out) ? -1 : 1;
    if (strcmp(a, flag) != 0)
        return 0;
    if (*i + 1 >= argc) {
        cli_usage_error(CMD, "option %s needs a value", flag);
        return -1;
    }
    return parse_count(flag, argv[++*i], lo, hi, out) ? -1 : 1;
}

/* The arguments of check-store (nracers and rounds given) and init-store
 * (NULL): the lock URL, the store options and --help. Returns -1 to go on,
 * else the exit code. */
static int parse_args(const char *cmd, const char *help, const char *example, int argc, char **argv,
                      cli_opts *o, int *nracers, int *rounds, const char **data)
{
    cli_opts_init(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(help, stdout);
            return CLI_EXIT_OK;
        }
        if (data && (strcmp(a, "--data") == 0 || strncmp(a, "--data=", 7) == 0)) {
            if (*data) {
                cli_usage_error(cmd, "more than one --data URL");
                return CLI_EXIT_USAGE;
            }
            if (!a[6] && i + 1 >= argc) {
                cli_usage_error(cmd, "option --data needs a value");
                return CLI_EXIT_USAGE;
            }
            *data = a[6] ? a + 7 : argv[++i];
            if (!**data) {
                cli_usage_error(cmd, "--data: empty URL");
                return CLI_EXIT_USAGE;
            }
            continue;
        }
        int r = nracers ? count_opt(argc, argv, &i, "--racers", 2, MAX_RACERS, nracers) : 0;
        if (r == 0 && rounds)
            r = count_opt(argc, argv, &i, "--rounds", 1, MAX_ROUNDS, rounds);
        if (r == 0 && is_s3_option(a))
            r = cli_common_opt(cmd, argc, argv, &i, o);
        if (r < 0)
            return CLI_EXIT_USAGE;
        if (r > 0)
            continue;
        if (a[0] == '-') {
            static const char *const own[] = {"--racers", "--rounds", "--data", NULL};
            cli_unknown_option(cmd, a, nracers ? own : NULL);
            return CLI_EXIT_USAGE;
        }
        if (o->lock) {
            cli_usage_error(cmd, "more than one lock URL");
            return CLI_EXIT_USAGE;
        }
        o->lock = a;
    }
    if (!o->lock && !(data && *data)) {
        cli_usage_error(cmd, "missing lock URL, e.g. s3lect %s %s", cmd, example);
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* Checks the lock location of o->lock. An exit code when it cannot be
 * checked at all, else -1; c->stopped when the store cannot be used as
 * configured. */
static int check_lock(checker *c, const cli_opts *o, int nracers, int rounds)
{
    c->cfg = cli_config(CMD, o);
    if (!c->cfg)
        return CLI_EXIT_USAGE;
    char err[512];
    int rc = st_open_config(c->cfg, &c->store, &c->key, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "s3lect %s: %s\n", CMD, err);
        return rc == S3LECT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
    }
    uint8_t rnd[4];
    char hex[9];
    if (cr_random(rnd, sizeof rnd) != 0)
        memset(rnd, 0x5a, sizeof rnd);
    cr_hex(rnd, sizeof rnd, hex);
    char tag[32];
    snprintf(tag, sizeof tag, ".s3lect-check-%s", hex);
    c->scratch = st_sibling_key(c->store, c->key, tag);
    if (!c->scratch) {
        fprintf(stderr, "s3lect %s: out of memory\n", CMD);
        return CLI_EXIT_ERROR;
    }

    char *shown = st_lock_display(o->lock);
    printf("s3lect check-store %s\n  scratch key: %s\n", shown ? shown : "", c->scratch);
    free(shown);
    print_credentials(c->cfg);
    fflush(stdout);
    if (run_checks(c, nracers, rounds) < 0)
        c->stopped = 1;
    return -1;
}

int cli_check_store(int argc, char **argv)
{
    cli_opts o;
    int nracers = 8, rounds = 5;
    const char *data = NULL;
    int pr =
        parse_args(CMD, HELP, "s3://bucket/leader.json", argc, argv, &o, &nracers, &rounds, &data);
    if (pr >= 0)
        return pr;

    checker c = {0};
    int rc = o.lock ? check_lock(&c, &o, nracers, rounds) : -1;
    if (rc < 0 && data && !c.stopped)
        rc = check_data(&c, &o, data);
    if (rc < 0) {
        /* One verdict, whatever the stores. */
        const char *what = !data    ? "this store enforces conditional writes"
                           : o.lock ? "this store enforces conditional writes, and fenced writes "
                                      "hold at the data location"
                                    : "the data location enforces conditional writes, and "
                                      "fenced writes hold there";
        if (c.stopped) {
            printf("stopped: the store cannot be used as configured (see the message above)\n");
        } else if (c.failed == 0) {
            printf("all %d checks passed: %s\n", c.passed, what);
            const st_scheme *sc = o.lock ? st_scheme_of(o.lock) : NULL;
            if (sc && sc->caveat)
                printf("%s: %s\n", sc->name, sc->caveat);
        } else if (o.lock) {
            printf("%d of %d checks FAILED: this store does not reliably enforce conditional "
                   "writes; do not use it for s3lect\n",
                   c.failed, c.passed + c.failed);
        } else {
            printf("%d of %d checks FAILED: the data location does not reliably enforce "
                   "conditional writes; do not use it for fenced writes\n",
                   c.failed, c.passed + c.failed);
        }
        if (c.created)
            printf("note: the scratch object %s was left in place; delete it when you like\n",
                   c.scratch);
        rc = c.failed > 0 || c.stopped ? CLI_EXIT_ERROR : CLI_EXIT_OK;
    }
    st_destroy(c.store);
    free(c.scratch);
    free(c.key);
    s3lect_config_free(c.cfg);
    return rc;
}

/* ---- init-store ---- */

static const char INIT_HELP[] =
    "usage: s3lect init-store URL [store options]\n"
    "\n"
    "Creates what a lock URL needs on stores that keep locks in a table, and\n"
    "checks it when it is already there:\n"
    "  dynamodb://TABLE/KEY     the table (on-demand capacity, the URL's partition\n"
    "                           key and sort key, type String); waits until ACTIVE\n"
    "  postgres://.../DB?key=K  the table (CREATE TABLE IF NOT EXISTS)\n"
    "S3 buckets, Route 53 hosted zones and file directories are not created:\n"
    "make them with your usual tools. Electors never create anything by\n"
    "themselves; this command is the only one that does.\n"
    "\n"
    "store options:\n"
    "  --endpoint URL          endpoint (AWS stores; default: AWS_ENDPOINT_URL_<SERVICE>,\n"
    "                          AWS_ENDPOINT_URL, AWS)\n"
    "  --region REGION         region (default: AWS_REGION, AWS_DEFAULT_REGION, us-east-1)\n"
    "  --ca-file FILE          PEM CA bundle for HTTPS\n"
    "\n"
    "exit codes: 0 created or already there, 1 error, 2 usage error.\n";

int cli_init_store(int argc, char **argv)
{
    static const char *const ICMD = "init-store";
    cli_opts o;
    int pr =
        parse_args(ICMD, INIT_HELP, "dynamodb://locks/leader", argc, argv, &o, NULL, NULL, NULL);
    if (pr >= 0)
        return pr;
    s3lect_config *cfg = cli_config(ICMD, &o);
    if (!cfg)
        return CLI_EXIT_USAGE;
    st_store *store;
    char *key;
    char err[512];
    int rc = st_open_config(cfg, &store, &key, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "s3lect %s: %s\n", ICMD, err);
        s3lect_config_free(cfg);
        return rc == S3LECT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
    }
    int exit_code = CLI_EXIT_OK;
    if (!store->vt->init) {
        const st_scheme *sc = st_scheme_of(o.lock);
        if (sc && sc->home)
            fprintf(stderr,
                    "s3lect %s: the %s store keeps its locks in %s; s3lect creates nothing "
                    "there: make it with your usual tools\n",
                    ICMD, store->vt->name, sc->home);
        else
            fprintf(stderr,
                    "s3lect %s: the %s store needs nothing made: a lock's first write creates "
                    "it\n",
                    ICMD, store->vt->name);
        exit_code = CLI_EXIT_ERROR;
    } else {
        st_result r = {0};
        store->vt->init(store, key, TIMEOUT_MS, &r);
        if (r.outcome == ST_OK) {
            printf("%s\n", r.message ? r.message : "done");
        } else {
            fprintf(stderr, "s3lect %s: %s\n", ICMD, r.message ? r.message : "failed");
            exit_code = CLI_EXIT_ERROR;
        }
        st_result_clear(&r);
    }
    st_destroy(store);
    free(key);
    s3lect_config_free(cfg);
    return exit_code;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c - s3lect_metrics_text: the Prometheus text exposition (format
 * 0.0.4) of electors' counters (docs/metrics.md). Each family's HELP and
 * TYPE once, then one sample per elector (labels lock and id), so that one
 * scrape can serve every elector of a process. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws_creds.h"
#include "elector.h"
#include "peer.h"
#include "s3lect.h"
#include "util.h"

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->len + (size_t)n)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* A label value: backslash, double quote and line feed escaped. */
static void put_label(buf *b, const char *v)
{
    for (const char *c = v ? v : ""; *c; c++) {
        if (*c == '\\')
            put(b, "\\\\");
        else if (*c == '"')
            put(b, "\\\"");
        else if (*c == '\n')
            put(b, "\\n");
        else
            put(b, "%c", *c);
    }
}

typedef struct snap {
    char *lock, *id;
    int leader, peer;
    int64_t term;
    int64_t refused_since; /* el_refused_since: boot ms, 0 if the last write was not refused */
    rt_metrics m;
    uint64_t peer_fails[PEER_FAIL_NCLASSES];
} snap;

static void labels(buf *b, const snap *s)
{
    put(b, "lock=\"");
    put_label(b, s->lock);
    put(b, "\",id=\"");
    put_label(b, s->id);
    put(b, "\"");
}

static void family(buf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static const char *const outcome_names[6] = {"ok",   "not_found", "precondition",
                                             "auth", "transient", "fatal"};

int s3lect_metrics_text(s3lect_elector *const *electors, size_t n, char **out)
{
    if (!out || (n && !electors))
        return S3LECT_EINVAL;
    *out = NULL;
    snap *ss = n ? calloc(n, sizeof *ss) : NULL;
    if (n && !ss)
        return S3LECT_ENOMEM;
    int64_t now = u_mono_ms();
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        s3lect_elector *e = electors[i];
        if (!e) {
            rc = S3LECT_EINVAL;
            break;
        }
        s3lect_status *st = NULL;
        if (s3lect_get_status(e, &st) != 0 || !st) {
            rc = S3LECT_ENOMEM;
            break;
        }
        ss[i].leader = s3lect_status_is_leader(st);
        ss[i].term = s3lect_status_term(st);
        s3lect_status_free(st);
        pthread_mutex_lock(&e->mu);
        ss[i].lock = u_strdup(e->lock_label);
        ss[i].id = u_strdup(e->cfg->server_id ? e->cfg->server_id : "");
        ss[i].peer = e->cfg->peer_mode;
        ss[i].m = e->metrics;
        ss[i].refused_since = el_refused_since(&e->eng);
        memcpy(ss[i].peer_fails, e->peer_fails.count, sizeof ss[i].peer_fails);
        pthread_mutex_unlock(&e->mu);
        if (!ss[i].lock || !ss[i].id)
            rc = S3LECT_ENOMEM;
    }
    buf b = {0};
    if (!rc) {
        family(&b, "s3lect_leader", "gauge", "1 while this elector holds a valid lease.");
        for (size_t i = 0; i < n; i++) {
            put(&b, "s3lect_leader{");
            labels(&b, &ss[i]);
            put(&b, "} %d\n", ss[i].leader);
        }
        family(&b, "s3lect_term", "gauge",
               "The term (fencing token) of the leadership this elector last saw.");
        for (size_t i = 0; i < n; i++) {
            put(&b, "s3lect_term{");
            labels(&b, &ss[i]);
            put(&b, "} %lld\n", (long long)ss[i].term);
        }
        family(&b, "s3lect_leadership_transitions_total", "counter",
               "Leadership acquired, and lost by reason.");
        for (size_t i = 0; i < n; i++) {
            put(&b, "s3lect_leadership_transitions_total{");
            labels(&b, &ss[i]);
            put(&b, ",reason=\"acquired\"} %llu\n", (unsigned long long)ss[i].m.acquired);
            for (int r = 1; r < 8; r++) {
                const char *name = s3lect_lost_reason_str(r);
                if (!name || !*name || strcmp(name, "none") == 0)
                    continue;
                put(&b, "s3lect_leadership_transitions_total{");
                labels(&b, &ss[i]);
                put(&b, ",reason=\"lost_%s\"} %llu\n", name, (unsigned long long)ss[i].m.lost[r]);
            }
        }
        family(&b, "s3lect_store_requests_total", "counter",
               "Store requests by operation and outcome.");
        for (size_t i = 0; i < n; i++)
            for (int op = 0; op < 2; op++)
                for (int o = 0; o < 6; o++) {
                    put(&b, "s3lect_store_requests_total{");
                    labels(&b, &ss[i]);
                    put(&b, ",op=\"%s\",outcome=\"%s\"} %llu\n", op ? "put" : "get",
                        outcome_names[o], (unsigned long long)ss[i].m.req[op][o]);
                }
        family(&b, "s3lect_store_request_duration_seconds", "histogram",
               "Time from a store request's start (including a wait for a pooled connection) "
               "to its answer.");
        static const double bounds[RT_LAT_NBUCKETS] = RT_LAT_BOUNDS;
        for (size_t i = 0; i < n; i++)
            for (int op = 0; op < 2; op++) {
                uint64_t cum = 0;
                for (int k = 0; k < RT_LAT_NBUCKETS; k++) {
                    cum += ss[i].m.lat_bucket[op][k];
                    put(&b, "s3lect_store_request_duration_seconds_bucket{");
                    labels(&b, &ss[i]);
                    put(&b, ",op=\"%s\",le=\"%g\"} %llu\n", op ? "put" : "get", bounds[k],
                        (unsigned long long)cum);
                }
                put(&b, "s3lect_store_request_duration_seconds_bucket{");
                labels(&b, &ss[i]);
                put(&b, ",op=\"%s\",le=\"+Inf\"} %llu\n", op ? "put" : "get",
                    (unsigned long long)ss[i].m.lat_count[op]);
                put(&b, "s3lect_store_request_duration_seconds_sum{");
                labels(&b, &ss[i]);
                put(&b, ",op=\"%s\"} %.6f\n", op ? "put" : "get", ss[i].m.lat_sum[op]);
                put(&b, "s3lect_store_request_duration_seconds_count{");
                labels(&b, &ss[i]);
                put(&b, ",op=\"%s\"} %llu\n", op ? "put" : "get",
                    (unsigned long long)ss[i].m.lat_count[op]);
            }
        family(&b, "s3lect_seconds_since_last_renewal", "gauge",
               "While leading: seconds since this elector's last successful write.");
        for (size_t i = 0; i < n; i++) {
            if (!ss[i].leader || !ss[i].m.written_at)
                continue;
            put(&b, "s3lect_seconds_since_last_renewal{");
            labels(&b, &ss[i]);
            put(&b, "} %.3f\n", (double)(now - ss[i].m.written_at) / 1000.0);
        }
        family(&b, "s3lect_writes_refused_seconds", "gauge",
               "Seconds since the first of an unbroken run of this elector's writes answered 412 "
               "(precondition failed) with no live leader seen in between; 0 when its last "
               "write was not refused. Above 30: another writer, or a store that does not honour "
               "conditional writes (s3lect check-store).");
        for (size_t i = 0; i < n; i++) {
            put(&b, "s3lect_writes_refused_seconds{");
            labels(&b, &ss[i]);
            put(&b, "} %.3f\n",
                ss[i].refused_since ? (double)(now - ss[i].refused_since) / 1000.0 : 0.0);
        }
        family(&b, "s3lect_peer_checks_total", "counter",
               "Peer mode: checks of the leader's endpoint answered by the leader (answer), "
               "answered 'not the leader' (not_leader), or failed (failed: this follower read "
               "the store instead).");
        for (size_t i = 0; i < n; i++) {
            uint64_t failed = 0;
            for (int c = PEER_FAIL_NONE + 1; c < PEER_FAIL_NCLASSES; c++)
                failed += ss[i].peer_fails[c];
            const char *res[3] = {"answer", "not_leader", "failed"};
            uint64_t v[3] = {ss[i].m.peer_answers, ss[i].m.peer_not_leader, failed};
            for (int k = 0; k < 3; k++) {
                put(&b, "s3lect_peer_checks_total{");
                labels(&b, &ss[i]);
                put(&b, ",result=\"%s\"} %llu\n", res[k], (unsigned long long)v[k]);
            }
        }
        family(&b, "s3lect_peer_fallbacks_total", "counter",
               "Peer mode: failed checks by class (docs/peer.md); each sent this follower to "
               "the store.");
        for (size_t i = 0; i < n; i++)
            for (int c = PEER_FAIL_NONE + 1; c < PEER_FAIL_NCLASSES; c++) {
                put(&b, "s3lect_peer_fallbacks_total{");
                labels(&b, &ss[i]);
                put(&b, ",class=\"%s\"} %llu\n", peer_fail_name(c),
                    (unsigned long long)ss[i].peer_fails[c]);
            }
        uint64_t fok = 0, ffail = 0;
        cred_fetch_totals(&fok, &ffail);
        family(&b, "s3lect_credential_fetches_total", "counter",
               "AWS credential fetches and refreshes of the process, by result.");
        put(&b, "s3lect_credential_fetches_total{result=\"ok\"} %llu\n", (unsigned long long)fok);
        put(&b, "s3lect_credential_fetches_total{result=\"failed\"} %llu\n",
            (unsigned long long)ffail);
        uint64_t fcred = 0, fconf = 0;
        aws_file_error_totals(&fcred, &fconf);
        family(&b, "s3lect_credential_file_errors_total", "counter",
               "Reads of the AWS shared credentials or config file that found it unreadable "
               "or malformed, by file.");
        put(&b, "s3lect_credential_file_errors_total{file=\"credentials\"} %llu\n",
            (unsigned long long)fcred);
        put(&b, "s3lect_credential_file_errors_total{file=\"config\"} %llu\n",
            (unsigned long long)fconf);
        if (b.oom)
            rc = S3LECT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        free(ss[i].lock);
        free(ss[i].id);
    }
    free(ss);
    if (rc) {
        free(b.p);
        return rc;
    }
    *out = b.p ? b.p : u_strdup("");
    return *out ? 0 : S3LECT_ENOMEM;
}

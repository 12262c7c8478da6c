/* SPDX-License-Identifier: Apache-2.0 */
/* s3lect_metrics_text: the Prometheus exposition of two file electors on
 * one lock, checked sample by sample against what the electors did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "s3lect.h"
#include "store.h"
#include "testutil.h"
#include "util.h"

/* The value of the sample whose line starts with `prefix` (name{labels}),
 * or -1 when there is none. */
static double sample(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
            return atof(p + n + 1);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

static int count_lines(const char *text, const char *needle)
{
    int k = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        k++;
    return k;
}

/* One lock, one label: every spelling of a lock gives the same string, and
 * none shows a password (issue 26 item 11). */
static void test_canonical_lock(void)
{
    char cwd[4096];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    char want_rel[4200];
    snprintf(want_rel, sizeof want_rel, "file://%s/locks/l.json", cwd);
    const char *same[][4] = {
        {"s3://my-bucket/a/leader.json", "S3://my-bucket/a/leader.json",
         "s3://my-bucket/a/leader.json", "s3://my-bucket/a/leader.json"},
        {"/var/lib/x/l.json", "file:///var/lib/x/l.json", "FILE:///var/lib/x/l.json",
         "file:///var/lib/x/l.json"},
        {"locks/l.json", "./locks/l.json", "locks/../locks//l.json", want_rel},
        {"dynamodb://Tab/k1?sort_value=v&sort_key=S", "DynamoDB://Tab/k1?sort_key=S&sort_value=v",
         "dynamodb://Tab/k1?partition_key=LockID&sort_key=S&sort_value=v",
         "dynamodb://Tab/k1?partition_key=LockID&sort_key=S&sort_value=v"},
        {"route53://Z123/Leader.Example.com", "ROUTE53://Z123/leader.example.com.",
         "route53://Z123/leader.example.com", "route53://Z123/leader.example.com."},
        {"postgres://u:secret@db:5432/app?table=t&key=k1",
         "postgres://u:other@db:5432/app?key=k1&table=t",
         "POSTGRES://u:x@db:5432/app?key=k1&table=t",
         "postgres://u:***@db:5432/app?key=k1&table=t"},
        /* Redis: the server and key, not the user (one lock for every user). */
        {"redis://u:secret@h:6379/locks/a?db=2", "REDIS://h/locks/a?db=2",
         "redis://other:other@h:6379/locks/%61?db=2", "redis://h:6379/locks/a?db=2"},
        {"redis://h/k", "redis://h:6379/k?db=0", "redis://u@h:6379/k", "redis://h:6379/k"},
        {"rediss://[::1]/k", "rediss://:secret@[::1]:6379/k", "REDISS://[::1]/k",
         "rediss://[::1]:6379/k"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        for (int j = 0; j < 3; j++) {
            char *c = st_lock_canonical(same[i][j]);
            CHECK(c && strcmp(c, same[i][3]) == 0, "canonical '%s' = '%s', want '%s'", same[i][j],
                  c ? c : "(null)", same[i][3]);
            CHECK(c && !strstr(c, "secret") && !strstr(c, "other"), "no password in '%s'",
                  c ? c : "");
            free(c);
        }
    char *c = st_lock_canonical("postgres:///app?key=k&password=hunter2");
    CHECK(c && !strstr(c, "hunter2"), "password= parameter hidden: %s", c ? c : "");
    free(c);
    c = st_lock_canonical("s3://b/k?x"); /* does not parse: shown as typed */
    CHECK(c && strcmp(c, "s3://b/k?x") == 0, "unparsable lock as shown: %s", c ? c : "");
    free(c);
}

int main(void)
{
    test_canonical_lock();
    char *dir = t_tmpdir("metrics");
    char lock[600], other_spelling[700];
    snprintf(lock, sizeof lock, "file://%s/lock.json", dir);
    /* The same lock spelled as a plain path: one label for both. */
    snprintf(other_spelling, sizeof other_spelling, "%s/.//lock.json", dir);
    /* An id with a quote and a backslash: both must be escaped in labels. */
    s3lect_elector *a = t_fast_elector(lock, "a\"\\1"), *b = t_fast_elector(other_spelling, "b");
    char *text = NULL;
    CHECK(s3lect_metrics_text(NULL, 0, &text) == 0 && text, "no electors: process families");
    CHECK(text && strstr(text, "s3lect_credential_fetches_total{result=\"ok\"}") &&
              !strstr(text, "lock=\""),
          "process families only: %s", text ? text : "");
    s3lect_free(text);
    s3lect_elector *none[1] = {NULL};
    CHECK(s3lect_metrics_text(none, 1, &text) == S3LECT_EINVAL, "NULL elector: EINVAL");
    CHECK(s3lect_metrics_text(NULL, 1, &text) == S3LECT_EINVAL, "NULL array: EINVAL");

    CHECK(s3lect_start(a) == 0 && s3lect_wait_for_leadership(a, 5000) == 0, "a leads");
    CHECK(s3lect_start(b) == 0, "b starts");
    t_sleep_ms(1500); /* renewals and follower reads */
    s3lect_elector *both[2] = {a, b};
    CHECK(s3lect_metrics_text(both, 2, &text) == 0 && text, "metrics of two electors");
    const char *la = "lock=\"", *esc = "id=\"a\\\"\\\\1\"";
    char pa[900], pb[900], key[1200];
    snprintf(pa, sizeof pa, "%s%s\",%s", la, lock, esc);
    snprintf(pb, sizeof pb, "%s%s\",id=\"b\"", la, lock);
    CHECK(strstr(text, esc) != NULL, "quote and backslash escaped in the id label");
    snprintf(key, sizeof key, "s3lect_leader{%s}", pa);
    CHECK(sample(text, key) == 1, "a: s3lect_leader 1");
    snprintf(key, sizeof key, "s3lect_leader{%s}", pb);
    CHECK(sample(text, key) == 0, "b: s3lect_leader 0");
    snprintf(key, sizeof key, "s3lect_term{%s}", pa);
    CHECK(sample(text, key) == (double)s3lect_term(a), "a: term %lld", (long long)s3lect_term(a));
    snprintf(key, sizeof key, "s3lect_leadership_transitions_total{%s,reason=\"acquired\"}", pa);
    CHECK(sample(text, key) == 1, "a acquired once");
    snprintf(key, sizeof key, "s3lect_store_requests_total{%s,op=\"put\",outcome=\"ok\"}", pa);
    double puts = sample(text, key);
    CHECK(puts >= 3, "a renewed: %g PUTs", puts);
    snprintf(key, sizeof key, "s3lect_store_request_duration_seconds_count{%s,op=\"put\"}", pa);
    double cnt = sample(text, key);
    snprintf(key, sizeof key,
             "s3lect_store_request_duration_seconds_bucket{%s,op=\"put\",le=\"+Inf\"}", pa);
    CHECK(cnt >= puts && sample(text, key) == cnt, "histogram count %g = +Inf bucket >= %g PUTs",
          cnt, puts);
    snprintf(key, sizeof key, "s3lect_store_requests_total{%s,op=\"get\",outcome=\"ok\"}", pb);
    CHECK(sample(text, key) >= 1, "b read the lock");
    snprintf(key, sizeof key, "s3lect_seconds_since_last_renewal{%s}", pa);
    double since = sample(text, key);
    CHECK(since >= 0 && since < 1.0, "a renewed %g s ago (renew interval 0.3 s)", since);
    snprintf(key, sizeof key, "s3lect_seconds_since_last_renewal{%s}", pb);
    CHECK(sample(text, key) == -1, "no renewal gauge for a follower");
    CHECK(count_lines(text, "# TYPE s3lect_leader gauge") == 1 &&
              count_lines(text, "# TYPE s3lect_store_request_duration_seconds histogram") == 1,
          "one HELP/TYPE per family");
    s3lect_free(text);

    s3lect_stop(a);
    CHECK(s3lect_wait_for_leadership(b, 5000) == 0, "b takes over");
    CHECK(s3lect_metrics_text(both, 2, &text) == 0, "metrics after the handover");
    snprintf(key, sizeof key, "s3lect_leadership_transitions_total{%s,reason=\"lost_stopped\"}",
             pa);
    CHECK(sample(text, key) == 1, "a lost leadership once, stopped");
    snprintf(key, sizeof key, "s3lect_leader{%s}", pb);
    CHECK(sample(text, key) == 1, "b leads now");
    s3lect_free(text);
    s3lect_stop(b);
    s3lect_free_elector(a);
    s3lect_free_elector(b);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(dir);
    return t_done("metrics");
}

/* SPDX-License-Identifier: Apache-2.0 */
/* examples/basic.c - the README's C tour: run for a few seconds as a
 * candidate on a lock, print transitions, then stop (releasing if leader).
 *
 *   cc basic.c $(pkg-config --cflags --libs s3lect) -o basic
 *   ./basic file:///tmp/leader.json node-a
 */
#include <s3lect.h>
#include <stdio.h>
#include <unistd.h>

static void on_acquired(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    (void)ud;
    printf("acquired leadership, term %lld\n", (long long)s3lect_event_term(ev));
}

static void on_lost(s3lect_elector *e, const s3lect_event *ev, void *ud)
{
    (void)e;
    (void)ud;
    printf("lost leadership: %s\n", s3lect_lost_reason_str(s3lect_event_reason(ev)));
}

int main(int argc, char **argv)
{
    const char *lock = argc > 1 ? argv[1] : "file:///tmp/s3lect-example.json";
    const char *id = argc > 2 ? argv[2] : "example";
    s3lect_config *cfg = s3lect_config_new();
    s3lect_config_set_str(cfg, S3LECT_OPT_LOCK, lock);
    s3lect_config_set_str(cfg, S3LECT_OPT_SERVER_ID, id);
    s3lect_config_set_int(cfg, S3LECT_OPT_LEASE_TIMEOUT, 3000); /* ms */
    s3lect_config_set_int(cfg, S3LECT_OPT_RENEW_INTERVAL, 1000);
    s3lect_config_set_int(cfg, S3LECT_OPT_RENEW_DEADLINE, 2000);

    s3lect_elector *el;
    if (s3lect_new(cfg, &el) != S3LECT_OK) {
        char msg[512];
        s3lect_config_errmsg(cfg, msg, sizeof msg);
        fprintf(stderr, "s3lect: %s\n", msg);
        return 1;
    }
    s3lect_config_free(cfg); /* the elector keeps its own copy */
    s3lect_set_callback(el, S3LECT_EVENT_ACQUIRED, on_acquired, NULL, NULL);
    s3lect_set_callback(el, S3LECT_EVENT_LOST, on_lost, NULL, NULL);
    s3lect_start(el);

    if (s3lect_wait_for_leadership(el, 10000) == S3LECT_OK)
        printf("leader now? %s (term %lld)\n", s3lect_is_leader(el) ? "yes" : "no",
               (long long)s3lect_term(el));
    sleep(2);
    s3lect_free_elector(el); /* stops, releases the lock if leader, joins threads */
    return 0;
}

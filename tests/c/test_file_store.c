/* SPDX-License-Identifier: Apache-2.0 */
/* File store: conditional writes hold across processes on one host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store.h"
#include "testutil.h"

#define PROCS 8
#define ROUNDS 60

/* st_file_open on a location naming a lock in dir. */
static int file_open_dir(const char *dir, st_store **out, char *err, size_t errlen)
{
    st_location loc = {.bucket = (char *)dir, .key = (char *)"leader.json"};
    return st_file_open(NULL, &loc, out, err, errlen);
}

static st_store *open_dir(const char *dir)
{
    st_store *s;
    char err[256];
    if (file_open_dir(dir, &s, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(2);
    }
    return s;
}

/* Each child increments a counter with read + If-Match; returns its wins. */
static int child_increment(const char *dir)
{
    st_store *s = open_dir(dir);
    int wins = 0;
    for (int i = 0; i < ROUNDS; i++) {
        st_result r = {0};
        st_get(s, "counter", 5000, &r);
        if (r.outcome == ST_TRANSIENT) {
            /* As for the PUT below: the lock file stayed busy for the whole
             * timeout (eight processes, a loaded machine: fsyncs of seconds
             * under a CI's other suites); the engine would retry. */
            st_result_clear(&r);
            continue;
        }
        if (r.outcome != ST_OK) {
            fprintf(stderr, "child: GET: outcome %d: %s\n", r.outcome, r.message ? r.message : "");
            _exit(100);
        }
        int n = atoi(r.body);
        char buf[32];
        int len = snprintf(buf, sizeof buf, "%d", n + 1);
        st_result w = {0};
        st_put(s, "counter", buf, (size_t)len, r.etag, 5000, &w);
        /* TRANSIENT: the lock file stayed busy for the whole timeout (eight
         * processes on a loaded machine); the engine would retry, so does this. */
        if (w.outcome == ST_OK)
            wins++;
        else if (w.outcome != ST_PRECONDITION && w.outcome != ST_TRANSIENT)
            _exit(101);
        st_result_clear(&r);
        st_result_clear(&w);
    }
    st_destroy(s);
    return wins;
}

static int child_create(const char *dir, int round)
{
    st_store *s = open_dir(dir);
    char key[32];
    snprintf(key, sizeof key, "race-%d", round);
    st_result w = {0};
    st_put(s, key, "x", 1, NULL, 5000, &w);
    int won = w.outcome == ST_OK;
    st_result_clear(&w);
    st_destroy(s);
    return won;
}

int main(void)
{
    char *dir = t_tmpdir("filestore");
    st_store *s = open_dir(dir);
    st_result r = {0};

    st_get(s, "counter", 1000, &r);
    CHECK(r.outcome == ST_NOT_FOUND, "missing key is NOT_FOUND (%d)", r.outcome);
    st_result_clear(&r);
    st_put(s, "counter", "0", 1, "\"0-nope\"", 1000, &r);
    CHECK(r.outcome == ST_NOT_FOUND, "If-Match on a missing key is NOT_FOUND (%d)", r.outcome);
    st_result_clear(&r);
    st_put(s, "counter", "0", 1, NULL, 1000, &r);
    CHECK(r.outcome == ST_OK && r.etag, "create");
    char first[64];
    snprintf(first, sizeof first, "%s", r.etag);
    st_result_clear(&r);
    st_put(s, "counter", "0", 1, NULL, 1000, &r);
    CHECK(r.outcome == ST_PRECONDITION, "second create fails");
    st_result_clear(&r);
    st_put(s, "counter", "0", 1, first, 1000, &r);
    CHECK(r.outcome == ST_OK && strcmp(r.etag, first) != 0, "same bytes, new etag");
    st_result_clear(&r);
    st_put(s, "counter", "0", 1, first, 1000, &r);
    CHECK(r.outcome == ST_PRECONDITION, "stale If-Match fails");
    st_result_clear(&r);

    /* Racing increments across processes: no lost update. */
    int pipes[PROCS][2];
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        if (pipe(pipes[i]) != 0)
            return 2;
        pids[i] = fork();
        if (pids[i] == 0) {
            close(pipes[i][0]);
            int w = child_increment(dir);
            if (write(pipes[i][1], &w, sizeof w) != sizeof w)
                _exit(102);
            _exit(0);
        }
        /* Only the child writes: a child that dies without writing then
         * gives EOF below, not a read that waits for ever. */
        close(pipes[i][1]);
    }
    int total = 0;
    for (int i = 0; i < PROCS; i++) {
        int w = 0, status;
        CHECK(read(pipes[i][0], &w, sizeof w) == sizeof w, "child %d reported", i);
        waitpid(pids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d exit %d signal %d", i,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        close(pipes[i][0]);
        total += w;
    }
    st_get(s, "counter", 1000, &r);
    CHECK(r.outcome == ST_OK && atoi(r.body) == total,
          "counter %s equals the number of successful CAS writes %d (no lost update)",
          r.body ? r.body : "?", total);
    CHECK(total >= ROUNDS, "progress: %d wins", total);
    st_result_clear(&r);

    /* Create-if-absent races: exactly one winner each round. */
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < PROCS; i++) {
            pids[i] = fork();
            if (pids[i] == 0)
                _exit(child_create(dir, round));
        }
        int winners = 0;
        for (int i = 0; i < PROCS; i++) {
            int status;
            waitpid(pids[i], &status, 0);
            winners += WIFEXITED(status) && WEXITSTATUS(status) == 1;
        }
        CHECK(winners == 1, "round %d: %d winners of create-if-absent", round, winners);
    }

    char err[256];
    st_store *bad;
    CHECK(file_open_dir("/nonexistent/dir", &bad, err, sizeof err) == S3LECT_EFATAL &&
              strstr(err, "does not exist"),
          "missing directory: %s", err);
    st_destroy(s);
    free(dir);
    return t_done("file store");
}

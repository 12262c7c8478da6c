/* SPDX-License-Identifier: Apache-2.0 */
/* test_fence.c - fenced writes (docs/fencing.md): the envelope, the rule and
 * the token (engine/fence.h), then the API on the file store with real
 * electors: a leader's writes, a deposed leader's refused, and the three
 * pitfalls closed (identical bytes, a delete then a re-create, a second
 * holder of one term). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fence.h"
#include "s3lect.h"
#include "testutil.h"

static void t_envelope(void)
{
    fn_header h = {.term = 7, .holder = "node-a", .lock = "s3://b/lock"};
    size_t n1 = 0, n2 = 0;
    char *a = fn_encode(&h, "hello", 5, &n1), *b = fn_encode(&h, "hello", 5, &n2);
    CHECK(a && b && (n1 != n2 || memcmp(a, b, n1) != 0),
          "two writes of the same bytes in one term store different bytes (the nonce)");
    fn_header g;
    const char *body;
    size_t len;
    CHECK(a && fn_parse(a, n1, &g, &body, &len) == FN_FENCED, "an envelope parses");
    CHECK(g.term == 7 && g.holder && !strcmp(g.holder, "node-a") && g.lock &&
              !strcmp(g.lock, "s3://b/lock") && !g.deleted,
          "term, holder and lock come back");
    CHECK(len == 5 && body && !memcmp(body, "hello", 5), "the body comes back stripped");
    fn_header_clear(&g);
    free(a);
    free(b);

    /* Terms up to 2^53 - 1 read back exactly (cJSON would print 15 digits). */
    fn_header big_term = {.term = FN_MAX_TERM - 1, .holder = "n", .lock = ""};
    a = fn_encode(&big_term, "", 0, &n1);
    CHECK(a && fn_parse(a, n1, &g, &body, &len) == FN_FENCED && g.term == FN_MAX_TERM - 1,
          "term 2^53 - 1 reads back: %lld", (long long)g.term);
    fn_header_clear(&g);
    free(a);

    h.deleted = 1;
    a = fn_encode(&h, "", 0, &n1);
    CHECK(a && fn_parse(a, n1, &g, &body, &len) == FN_FENCED && g.deleted && len == 0,
          "a tombstone");
    fn_header_clear(&g);
    free(a);

    /* A plain object is term 0; bytes that begin like an envelope but are
     * none are refused, never overwritten. */
    CHECK(fn_parse("{\"x\":1}", 7, &g, &body, &len) == FN_PLAIN && g.term == 0 && len == 7,
          "plain bytes: term 0, read as they are");
    fn_header_clear(&g);
    static const char *const bad[] = {
        FN_MAGIC "{\"term\":1,\"holder\":\"a\",\"lock\":\"\",\"nonce\":\"n\"}", /* no newline */
        FN_MAGIC "{\"term\":0,\"holder\":\"a\",\"lock\":\"\",\"nonce\":\"n\"}\n",
        FN_MAGIC "{\"term\":1.5,\"holder\":\"a\",\"lock\":\"\",\"nonce\":\"n\"}\n",
        FN_MAGIC "{\"term\":-3,\"holder\":\"a\",\"lock\":\"\",\"nonce\":\"n\"}\n",
        FN_MAGIC "{\"term\":1e300,\"holder\":\"a\",\"lock\":\"\",\"nonce\":\"n\"}\n",
        FN_MAGIC "{\"term\":\"1\",\"holder\":\"a\",\"lock\":\"\",\"nonce\":\"n\"}\n",
        FN_MAGIC "{\"term\":1,\"holder\":\"\",\"lock\":\"\",\"nonce\":\"n\"}\n",
        FN_MAGIC "{\"term\":1,\"holder\":\"a\\u0001\",\"lock\":\"\",\"nonce\":\"n\"}\n",
        FN_MAGIC "{\"term\":1,\"holder\":\"a\",\"lock\":\"\"}\n",
        FN_MAGIC "{\"term\":1,\"holder\":\"a\",\"lock\":\"\",\"nonce\":\"n\",\"deleted\":1}\n",
        FN_MAGIC "[1]\n",
        FN_MAGIC "\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(fn_parse(bad[i], strlen(bad[i]), &g, &body, &len) == FN_BAD && g.term == 0,
              "not an envelope: %s", bad[i]);
        fn_header_clear(&g);
    }
    char *big = malloc(FN_MAX_HEADER + 64);
    if (big) {
        memset(big, 'x', FN_MAX_HEADER + 63);
        memcpy(big, FN_MAGIC, strlen(FN_MAGIC));
        big[FN_MAX_HEADER + 10] = '\n';
        CHECK(fn_parse(big, FN_MAX_HEADER + 63, &g, &body, &len) == FN_BAD,
              "a header line longer than its bound");
        fn_header_clear(&g);
        free(big);
    }
}

static void t_rule(void)
{
    fn_header none = {0}, t5 = {.term = 5, .holder = "a"};
    CHECK(fn_may_write(1, "a", &none), "an absent or plain object: any term writes");
    CHECK(!fn_may_write(0, "a", &none), "term 0 never writes");
    CHECK(fn_may_write(6, "b", &t5), "a newer term writes over an older one");
    CHECK(fn_may_write(5, "a", &t5), "the same term, the same holder: writes again");
    CHECK(!fn_may_write(5, "b", &t5), "the same term, another holder: fenced");
    CHECK(!fn_may_write(4, "a", &t5), "an older term: fenced");
}

static void t_token(void)
{
    char *tok = fn_token_encode(42, "host:7.x", "s3://bucket/a.b/lock?x=1");
    int64_t term = 0;
    char *holder = NULL, *lock = NULL;
    CHECK(tok && fn_token_parse(tok, &term, &holder, &lock) == 0 && term == 42 && holder &&
              !strcmp(holder, "host:7.x") && lock && !strcmp(lock, "s3://bucket/a.b/lock?x=1"),
          "a token round-trips: %s", tok ? tok : "(none)");
    free(holder);
    free(lock);
    free(tok);
    static const char *const bad[] = {
        "",
        "s3lect-fence.1.",
        "s3lect-fence.2.1.YQ.cw",
        "s3lect-fence.1.0.YQ.cw",
        "s3lect-fence.1.-1.YQ.cw",
        "s3lect-fence.1.1x.YQ.cw",
        "s3lect-fence.1.99999999999999999.YQ.cw",
        "s3lect-fence.1.1..cw",
        "s3lect-fence.1.1.YQ",
        "s3lect-fence.1.1.YQ.cw.x",
        "s3lect-fence.1.1.Y Q.cw",
        "s3lect-fence.1.1.AQ.cw", /* a control character in the holder */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        holder = lock = NULL;
        CHECK(fn_token_parse(bad[i], &term, &holder, &lock) == -1 && !holder && !lock,
              "not a token: '%s'", bad[i]);
    }
    CHECK(fn_token_encode(0, "a", "l") == NULL, "no token of term 0");
}

/* Waits until e leads (file store, fast timings). */
static int lead(s3lect_elector *e)
{
    return s3lect_wait_for_leadership(e, 10000) == 0 && s3lect_is_leader(e);
}

static void t_api(void)
{
    char dir[512], lock[600], obj[640], other[640];
    char *tmp = t_tmpdir("fence");
    snprintf(dir, sizeof dir, "%s", tmp);
    free(tmp);
    snprintf(lock, sizeof lock, "file://%s/lock.json", dir);
    snprintf(obj, sizeof obj, "file://%s/state.json", dir);
    snprintf(other, sizeof other, "file://%s/other.json", dir);

    s3lect_elector *a = t_fast_elector(lock, "node-a");
    s3lect_fence *fa = NULL, *fz = NULL;
    CHECK(s3lect_fence_new(a, &fa) == 0, "a fence for the elector");
    char *body = NULL, *ver = NULL, buf[512];
    size_t len = 0;
    int64_t term = -1;
    CHECK(s3lect_fenced_put(fa, obj, "x", 1) == S3LECT_ENOTLEADER,
          "not started: refused before anything is sent");
    CHECK(s3lect_fenced_get(fa, obj, &body, &len, &ver, &term) == S3LECT_ENOTFOUND && !body &&
              !ver && term == 0,
          "nothing there yet");
    CHECK(s3lect_start(a) == 0 && lead(a), "a leads");
    int64_t ta = s3lect_term(a);
    char tok_a[512];
    CHECK(s3lect_fence_token(a, tok_a, sizeof tok_a) > 0, "a's token: %s", tok_a);

    CHECK(s3lect_fenced_put(fa, lock, "x", 1) == S3LECT_EINVAL,
          "the lock itself is never written as a fenced object");
    char roster[700];
    snprintf(roster, sizeof roster, "%s.s3lect-roster", lock);
    CHECK(s3lect_fenced_delete(fa, roster) == S3LECT_EINVAL,
          "nor an object s3lect keeps next to it");
    CHECK(s3lect_is_leader(a), "a still leads after the refused writes");
    CHECK(s3lect_fenced_put(fa, obj, "v1", 2) == 0, "a writes");
    CHECK(s3lect_fenced_get(fa, obj, &body, &len, &ver, &term) == 0 && len == 2 &&
              !memcmp(body, "v1", 2) && ver && term == ta,
          "a reads its bytes back, in its term");
    CHECK(s3lect_fenced_cas(fa, obj, "v2", 2, ver) == 0, "a's read-modify-write");
    CHECK(s3lect_fenced_cas(fa, obj, "v3", 2, ver) == S3LECT_EPRECONDITION,
          "a stale version: the precondition fails, nothing written");
    s3lect_free(body);
    s3lect_free(ver);
    body = ver = NULL;
    CHECK(s3lect_fenced_cas(fa, other, "new", 3, NULL) == 0, "create-only where there is none");
    CHECK(s3lect_fenced_cas(fa, other, "new", 3, NULL) == S3LECT_EPRECONDITION,
          "create-only where there is one");

    /* The zombie: a process that still holds a's token after b took over
     * (a's tree frozen past its lease, say). */
    CHECK(s3lect_fence_new_token(NULL, tok_a, &fz) == 0, "a fence from a's token");
    char *zv = NULL;
    CHECK(s3lect_fenced_get(fz, obj, &body, &len, &zv, &term) == 0 && zv, "the zombie reads");
    s3lect_free(body);
    body = NULL;
    CHECK(s3lect_stop_no_release(a) == 0, "a stops without releasing (as a frozen host)");
    s3lect_elector *b = t_fast_elector(lock, "node-b");
    s3lect_fence *fb = NULL;
    CHECK(s3lect_start(b) == 0 && lead(b) && s3lect_term(b) > ta, "b leads, in a newer term");
    CHECK(s3lect_fence_new(b, &fb) == 0, "b's fence");
    CHECK(s3lect_fenced_put(fb, obj, "v2", 2) == 0, "b writes the same bytes a wrote last");
    CHECK(s3lect_fenced_cas(fz, obj, "zombie", 6, zv) == S3LECT_EFENCED,
          "the zombie's read-modify-write over a's version: fenced (identical bytes do not "
          "help it)");
    s3lect_fence_errmsg(fz, buf, sizeof buf);
    CHECK(strstr(buf, "newer than ours") != NULL, "it says why: %s", buf);
    CHECK(s3lect_fenced_put(fz, obj, "zombie", 6) == S3LECT_EFENCED, "the zombie's put: fenced");
    CHECK(s3lect_fenced_get(fb, obj, &body, &len, NULL, &term) == 0 && len == 2 &&
              !memcmp(body, "v2", 2) && term == s3lect_term(b),
          "b's bytes are there");
    s3lect_free(body);
    body = NULL;

    /* A delete then a zombie re-create. */
    CHECK(s3lect_fenced_delete(fb, other) == 0, "b deletes");
    CHECK(s3lect_fenced_get(fb, other, &body, &len, &ver, &term) == S3LECT_ENOTFOUND && ver &&
              term == s3lect_term(b),
          "deleted: not found, the tombstone's version and term given");
    CHECK(s3lect_fenced_cas(fz, other, "again", 5, NULL) == S3LECT_EFENCED,
          "the zombie's create-only over b's tombstone: fenced");
    CHECK(s3lect_fenced_put(fz, other, "again", 5) == S3LECT_EFENCED,
          "the zombie's re-create: fenced");
    CHECK(s3lect_fenced_cas(fb, other, "back", 4, ver) == 0, "b creates it again over it");
    s3lect_free(ver);
    ver = NULL;

    /* A second holder of b's term (an anomaly terms forbid: shown here by
     * a forged token) cannot write after b. */
    char tok_b[512], forged[512];
    CHECK(s3lect_fence_token(b, tok_b, sizeof tok_b) > 0, "b's token");
    const char *dot = strchr(tok_b + strlen("s3lect-fence.1."), '.');
    const char *lockpart = dot ? strchr(dot + 1, '.') : NULL;
    snprintf(forged, sizeof forged, "%.*s.Yy1vdGhlcg%s", dot ? (int)(dot - tok_b) : 0, tok_b,
             lockpart ? lockpart : "");
    s3lect_fence *ff = NULL;
    CHECK(s3lect_fence_new_token(NULL, forged, &ff) == 0, "a second holder of b's term: %s",
          forged);
    CHECK(s3lect_fenced_put(ff, obj, "second", 6) == S3LECT_EFENCED,
          "the first writer of a term keeps it");
    s3lect_fence *fg = (s3lect_fence *)1;
    CHECK(s3lect_fence_new_token(NULL, "not a token", &fg) == S3LECT_EINVAL && fg == NULL,
          "garbage is no token");
    CHECK(s3lect_fenced_put(fa, obj, "late", 4) == S3LECT_ENOTLEADER,
          "a's own fence after a stopped: refused before sending");

    /* Foreign bytes that begin like an envelope are never overwritten. */
    char path[700];
    snprintf(path, sizeof path, "%s/odd.json", dir);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(FN_MAGIC "not json\n", fp);
        fclose(fp);
    }
    char odd[720];
    snprintf(odd, sizeof odd, "file://%s", path);
    CHECK(s3lect_fenced_put(fb, odd, "x", 1) == S3LECT_ECORRUPT, "not overwritten");

    /* The store's read limit: a write that could not be read back whole is
     * refused; an object larger than the store reads is never taken for one. */
    char *large = calloc(1, 70000);
    CHECK(large && s3lect_fenced_put(fb, obj, large, 70000) == S3LECT_EINVAL,
          "70000 bytes on a file store: refused before writing");
    snprintf(path, sizeof path, "%s/large.json", dir);
    fp = fopen(path, "w");
    if (fp && large) {
        fwrite(large, 1, 70000, fp);
        fclose(fp);
    }
    snprintf(odd, sizeof odd, "file://%s", path);
    CHECK(s3lect_fenced_get(fb, odd, &body, &len, NULL, NULL) == S3LECT_ECORRUPT && !body,
          "a file larger than the store reads: not read as a fenced object");
    CHECK(s3lect_fenced_put(fb, odd, "x", 1) == S3LECT_ECORRUPT, "nor overwritten");
    free(large);

    s3lect_fence_free(ff);
    s3lect_fence_free(fz);
    s3lect_fence_free(fb);
    s3lect_fence_free(fa);
    s3lect_free(zv);
    s3lect_stop(b);
    s3lect_free_elector(b);
    s3lect_free_elector(a);
}

int main(void)
{
    t_envelope();
    t_rule();
    t_token();
    t_api();
    return t_done("fence");
}

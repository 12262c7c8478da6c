/* SPDX-License-Identifier: Apache-2.0 */
/* Record codec: round trip, Go s3lect records, and corrupt inputs never crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "s3lect.h"
#include "testutil.h"
#include "util.h"

static int parse(const char *s, rec *r)
{
    char err[200];
    return rec_parse(s, strlen(s), r, err, sizeof err);
}

static void roundtrip(void)
{
    rec r = {0};
    r.leader_id = "node-a";
    r.leader_addr = "10.0.0.1:8443";
    r.last_updated_ms = 1763780000123;
    r.term = 42;
    r.lease_ms = 15000;
    r.incarnation = "abcd";
    char *s = rec_encode(&r);
    CHECK(s != NULL, "encode");
    CHECK(strstr(s, "\"lastUpdated\":\"2025-11-22T02:53:20.123Z\"") != NULL, "time format: %s", s);
    rec back;
    CHECK(parse(s, &back) == 0, "parse own output: %s", s);
    CHECK(strcmp(back.leader_id, "node-a") == 0 && back.term == 42 && back.lease_ms == 15000 &&
              back.last_updated_ms == 1763780000123 && !back.zero_time &&
              strcmp(back.incarnation, "abcd") == 0,
          "round trip fields");
    CHECK(!rec_released(&back), "not released");
    rec_clear(&back);
    free(s);

    rec rel = {0};
    rel.zero_time = 1;
    rel.term = 7;
    s = rec_encode(&rel);
    CHECK(strstr(s, "0001-01-01T00:00:00Z") != NULL, "released time: %s", s);
    CHECK(parse(s, &back) == 0 && rec_released(&back) && back.term == 7, "released round trip");
    rec_clear(&back);
    free(s);
}

static void go_compat(void)
{
    rec r;
    /* A record as Go s3lect writes it: nanoseconds, no term/lease/incarnation. */
    const char *go = "{\"leaderID\":\"go-1\",\"leaderAddr\":\"\",\"lastUpdated\":"
                     "\"2025-11-22T02:53:20.123456789Z\"}";
    CHECK(parse(go, &r) == 0, "Go record parses");
    CHECK(r.term == 0 && r.lease_ms == 0 && r.last_updated_ms == 1763780000123 &&
              strcmp(r.incarnation, "") == 0,
          "Go record fields");
    rec_clear(&r);
    const char *zone = "{\"leaderID\":\"x\",\"lastUpdated\":\"2025-11-22T04:53:20+02:00\"}";
    CHECK(parse(zone, &r) == 0 && r.last_updated_ms == 1763780000000, "offset time");
    rec_clear(&r);
    const char *goreleased = "{\"leaderID\":\"\",\"leaderAddr\":\"\",\"lastUpdated\":"
                             "\"0001-01-01T00:00:00Z\"}";
    CHECK(parse(goreleased, &r) == 0 && rec_released(&r), "Go released record");
    rec_clear(&r);
    /* Go s3lect resigns by zeroing lastUpdated and keeping its leaderID. */
    const char *goresigned = "{\"leaderID\":\"go-1\",\"leaderAddr\":\"10.0.0.1:8993\","
                             "\"lastUpdated\":\"0001-01-01T00:00:00Z\"}";
    CHECK(parse(goresigned, &r) == 0 && rec_released(&r), "Go resignation record is released");
    rec_clear(&r);
    const char *extra = "{\"leaderID\":\"x\",\"lastUpdated\":\"2025-11-22T02:53:20Z\","
                        "\"future\":{\"a\":[1,2]}}";
    CHECK(parse(extra, &r) == 0, "unknown fields are accepted");
    rec_clear(&r);
}

static void corrupt(void)
{
    const char *bad[] = {
        "",
        "null",
        "[]",
        "{",
        "{\"leaderID\":1,\"lastUpdated\":\"2025-11-22T02:53:20Z\"}",
        "{\"lastUpdated\":\"2025-11-22T02:53:20Z\"}",
        "{\"leaderID\":\"a\"}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"yesterday\"}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-13-22T02:53:20Z\"}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20Z\",\"term\":-1}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20Z\",\"term\":1.5}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20Z\",\"term\":\"3\"}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20Z\",\"term\":1e300}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20Z\",\"leaseMs\":true}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20Z\",\"leaderAddr\":[]}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20.Z\"}",
        "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20Zjunk\"}",
        "\xff\xfe\x00garbage",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rec r;
        char err[200] = "";
        int rc = rec_parse(bad[i], strlen(bad[i]), &r, err, sizeof err);
        CHECK(rc == S3LECT_ECORRUPT, "input %zu must be corrupt (rc %d)", i, rc);
        CHECK(strncmp(err, "corrupt lock record: ", 21) == 0, "message for %zu: %s", i, err);
    }
    /* Over 64 KiB. */
    size_t n = REC_MAX_SIZE + 10;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    big[n] = '\0';
    memcpy(big, "{\"leaderID\":\"a\",\"lastUpdated\":\"2025-11-22T02:53:20Z\"}", 53);
    rec r;
    char err[200];
    CHECK(rec_parse(big, n, &r, err, sizeof err) == S3LECT_ECORRUPT && strstr(err, "64 KiB"),
          "oversized record: %s", err);
    free(big);
    /* Random bytes never crash. */
    u_rng g;
    u_rng_seed(&g, 1);
    char buf[256];
    for (int i = 0; i < 20000; i++) {
        size_t len = u_rng_next(&g) % sizeof buf;
        for (size_t k = 0; k < len; k++)
            buf[k] = "{}[]\":,0123456789.eE-+ leaderIDlastUpdatedtermZT"[u_rng_next(&g) % 48];
        if (rec_parse(buf, len, &r, err, sizeof err) == 0)
            rec_clear(&r);
    }
}

/* term and leaseMs of 2^53 or more cannot be exact in JSON: said so, not
 * "is not a non-negative integer" (which they are). */
static void huge_numbers(void)
{
    const char *cases[][2] = {
        {"{\"leaderID\":\"a\",\"lastUpdated\":\"2024-01-01T00:00:00Z\",\"term\":9007199254740992}",
         "term is 2^53 or more"},
        {"{\"leaderID\":\"a\",\"lastUpdated\":\"2024-01-01T00:00:00Z\",\"leaseMs\":1e300}",
         "leaseMs is 2^53 or more"},
        {"{\"leaderID\":\"a\",\"lastUpdated\":\"2024-01-01T00:00:00Z\",\"term\":-1}",
         "term is not a non-negative integer"},
        {"{\"leaderID\":\"a\",\"lastUpdated\":\"2024-01-01T00:00:00Z\",\"leaseMs\":1.5}",
         "leaseMs is not a non-negative integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rec r;
        char err[160] = "";
        int rc = rec_parse(cases[i][0], strlen(cases[i][0]), &r, err, sizeof err);
        CHECK(rc == S3LECT_ECORRUPT && strstr(err, cases[i][1]), "%s -> [%s], want [%s]",
              cases[i][0], err, cases[i][1]);
        rec_clear(&r);
    }
    rec r;
    const char *ok = "{\"leaderID\":\"a\",\"lastUpdated\":\"2024-01-01T00:00:00Z\","
                     "\"term\":9007199254740991,\"leaseMs\":15000}";
    char err[160];
    CHECK(rec_parse(ok, strlen(ok), &r, err, sizeof err) == 0 && r.term == 9007199254740991LL,
          "2^53 - 1 is still a term");
    rec_clear(&r);
}

static void times(void)
{
    int64_t ms;
    CHECK(u_parse_rfc3339("1970-01-01T00:00:00Z", &ms) == 0 && ms == 0, "epoch");
    CHECK(u_parse_rfc3339("2000-02-29T12:00:00.5Z", &ms) == 0 && ms == 951825600500, "leap day");
    char out[40];
    u_format_rfc3339(951825600500, out, sizeof out);
    CHECK(strcmp(out, "2000-02-29T12:00:00.500Z") == 0, "format: %s", out);
    CHECK(u_parse_rfc3339("0001-01-01T00:00:00Z", &ms) == 0 && ms < 0, "year 1");
}

/* The zero-config peer key fingerprint: written only when set, read back,
 * and anything malformed reads as absent (never a corrupt record). */
static void peer_key(void)
{
    static const char pin[] = "kaz0fw8EFO+f0MnvsTMezIU5mz2elgPaRXKYuqcB9n8=";
    rec r = {0};
    r.leader_id = "node-a";
    r.leader_addr = "10.0.0.1:8443";
    r.last_updated_ms = 1763780000123;
    r.term = 3;
    r.incarnation = "abcd";
    char *plain = rec_encode(&r);
    CHECK(plain && !strstr(plain, "peerKeySha256"), "no field without a key: %s", plain);
    r.peer_key = (char *)pin;
    char *s = rec_encode(&r);
    CHECK(s && strstr(s, "\"peerKeySha256\":\"kaz0fw8EFO+f0MnvsTMezIU5mz2elgPaRXKYuqcB9n8=\""),
          "key written: %s", s);
    rec back;
    CHECK(parse(s, &back) == 0 && strcmp(back.peer_key, pin) == 0, "key read back");
    rec_clear(&back);
    CHECK(parse(plain, &back) == 0 && back.peer_key && back.peer_key[0] == '\0',
          "absent key reads as empty");
    rec_clear(&back);
    free(plain);
    free(s);
    static const char *const bad[] = {
        "\"peerKeySha256\":42",
        "\"peerKeySha256\":null",
        "\"peerKeySha256\":\"\"",
        "\"peerKeySha256\":\"kaz0fw8EFO+f0MnvsTMezIU5mz2elgPaRXKYuqcB9n8\"",   /* 43 */
        "\"peerKeySha256\":\"kaz0fw8EFO+f0MnvsTMezIU5mz2elgPaRXKYuqcB9n8==\"", /* 45 */
        "\"peerKeySha256\":\"kaz0fw8EFO-f0MnvsTMezIU5mz2elgPaRXKYuqcB9n8=\"",  /* url alphabet */
        "\"peerKeySha256\":\"kaz0fw8EFO f0MnvsTMezIU5mz2elgPaRXKYuqcB9n8=\"",
        "\"peerKeySha256\":\"sha256//kaz0fw8EFO+f0MnvsTMezIU5mz2elgPaRXKYuqc=\"",
        "\"peerKeySha256\":{\"a\":1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[400];
        snprintf(body, sizeof body,
                 "{\"leaderID\":\"a\",\"leaderAddr\":\"h:1\",\"lastUpdated\":"
                 "\"2025-11-22T02:53:20.123Z\",\"term\":1,%s}",
                 bad[i]);
        CHECK(parse(body, &back) == 0 && back.peer_key && back.peer_key[0] == '\0',
              "malformed key ignored, record kept: %s", bad[i]);
        rec_clear(&back);
    }
    CHECK(rec_peer_key_valid(pin) && !rec_peer_key_valid("") && !rec_peer_key_valid(NULL),
          "validity check");
    /* base64 itself: test_base64.c */
}

int main(void)
{
    huge_numbers();
    roundtrip();
    go_compat();
    corrupt();
    times();
    peer_key();
    return t_done("record");
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_peer_batch.c - the follower's side of a batched long poll
 * (peer_batch.c): the request body, and the reading of answers, above all
 * the answers that must not count (an incarnation not asked for, one answered
 * twice, a record of another incarnation or another leader, bad statuses).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"
#include "testutil.h"

#define INC_A "0123456789abcdef0123456789abcdef"
#define INC_B "fedcba9876543210fedcba9876543210"
#define INC_C "00000000000000000000000000000001"

static const peer_batch_lock ents[3] = {
    {INC_A, 7, "\"etag-a\"", "node1", NULL},
    {INC_B, 0, "", "node2", NULL},
    {INC_C, 3, "e\\c", NULL, NULL},
};

static void test_request(void)
{
    size_t len = 0;
    char *body = peer_batch_request(ents, 3, 25000, &len);
    CHECK(body && len == strlen(body), "a body (%zu bytes)", len);
    cJSON *root = cJSON_Parse(body);
    CHECK(cJSON_IsObject(root), "the body is a JSON object: %s", body);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "wait")) == 25000, "wait 25000");
    const cJSON *locks = cJSON_GetObjectItem(root, "locks");
    CHECK(cJSON_GetArraySize(locks) == 3, "three locks");
    const cJSON *l0 = cJSON_GetArrayItem(locks, 0), *l2 = cJSON_GetArrayItem(locks, 2);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(l0, "incarnation")), INC_A) == 0,
          "incarnation first");
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(l0, "term")) == 7, "term 7");
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(l0, "etag")), "\"etag-a\"") == 0,
          "the etag with its quotes, escaped in JSON");
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(l2, "etag")), "e\\c") == 0,
          "a backslash survives");
    for (int i = 0; i < 3; i++) {
        char *one = cJSON_PrintUnformatted(cJSON_GetArrayItem(locks, i));
        CHECK(one && peer_batch_lock_size(&ents[i]) >= strlen(one) + 1,
              "the size bound holds for entry %d", i);
        free(one);
    }
    cJSON_Delete(root);
    free(body);

    body = peer_batch_request(ents, 0, -5, &len);
    CHECK(body && strcmp(body, "{\"locks\":[],\"wait\":0}") == 0, "empty, negative wait: %s",
          body ? body : "(null)");
    free(body);

    /* A full batch stays under the server's 1 MiB with the longest etags. */
    char etag[161];
    memset(etag, 'x', 160);
    etag[160] = '\0';
    peer_batch_lock big = {INC_A, 9007199254740991LL, etag, "n", NULL};
    CHECK(64 + PEER_BATCH_SEND_LOCKS * peer_batch_lock_size(&big) > PEER_BATCH_SEND_BODY,
          "the size bound (not the entry cap) limits batches of long etags");
    peer_batch_lock *many = calloc(PEER_BATCH_SEND_LOCKS, sizeof *many);
    for (size_t i = 0; i < PEER_BATCH_SEND_LOCKS; i++)
        many[i] = (peer_batch_lock){INC_A, 5, "\"0123456789abcdef0123456789abcdef\"", "n", NULL};
    body = peer_batch_request(many, PEER_BATCH_SEND_LOCKS, 60000, &len);
    CHECK(body && len < PEER_BATCH_SEND_BODY, "1024 usual entries: %zu bytes", len);
    free(body);
    free(many);
    char *tb = peer_batch_request(&big, 1, 1, &len);
    CHECK(tb && strstr(tb, "\"term\":9007199254740991"), "the largest term is exact: %s", tb);
    free(tb);
}

static int parse(const char *answer, peer_batch_result *ans, char *why)
{
    return peer_batch_read(answer, strlen(answer), ents, 3, ans, why, 120);
}

#define REC_A                                                                                      \
    "{\"leaderID\":\"node1\",\"leaderAddr\":\"h:1\",\"incarnation\":\"" INC_A                      \
    "\",\"term\":8,\"etag\":\"\\\"e2\\\"\"}"

static void test_answers(void)
{
    peer_batch_result ans[3];
    char why[120];
    int rc = parse("{\"locks\":[{\"incarnation\":\"" INC_A "\",\"status\":200,\"record\":" REC_A
                   "},{\"incarnation\":\"" INC_C "\",\"status\":404}]}",
                   ans, why);
    CHECK(rc == 0, "a good answer parses (%s)", why);
    CHECK(ans[0].status == 200 && ans[0].etag && strcmp(ans[0].etag, "\"e2\"") == 0,
          "entry A: 200 with its etag");
    CHECK(ans[0].body && ans[0].body_len == strlen(ans[0].body) && strstr(ans[0].body, INC_A) &&
              strstr(ans[0].body, "\"leaderID\":\"node1\""),
          "entry A's record: %s", ans[0].body ? ans[0].body : "(null)");
    CHECK(ans[1].status == 0 && !ans[1].body, "entry B not answered: sent again");
    CHECK(ans[2].status == 404 && !ans[2].body, "entry C: not the leader");
    peer_batch_results_clear(ans, 3);

    /* Entries need not be in the order they were asked in. */
    rc = parse("{\"locks\":[{\"incarnation\":\"" INC_C
               "\",\"status\":404},{\"incarnation\":\"" INC_B "\",\"status\":404}],\"extra\":1}",
               ans, why);
    CHECK(rc == 0 && ans[1].status == 404 && ans[2].status == 404 && ans[0].status == 0,
          "any order, unknown fields ignored (%s)", why);
    peer_batch_results_clear(ans, 3);

    /* "yield" (one successor, docs/peer.md): true only where it says true. */
    rc = parse("{\"locks\":[{\"incarnation\":\"" INC_C
               "\",\"status\":404,\"yield\":true},{\"incarnation\":\"" INC_B
               "\",\"status\":404,\"yield\":1}]}",
               ans, why);
    CHECK(rc == 0 && ans[2].yield == 1 && ans[1].yield == 0 && ans[1].status == 404,
          "yield read from true only (%s): %d %d", why, ans[2].yield, ans[1].yield);
    peer_batch_results_clear(ans, 3);

    /* The successor's released record: only a released one with an etag,
     * never beside "yield"; anything else is ignored (the store is read). */
    rc = parse("{\"locks\":[{\"incarnation\":\"" INC_A
               "\",\"status\":404,\"released\":{\"leaderID\":\"\",\"term\":8,\"etag\":\"r1\"}},"
               "{\"incarnation\":\"" INC_B
               "\",\"status\":404,\"yield\":true,\"released\":{\"leaderID\":\"\",\"etag\":\"r2\"}},"
               "{\"incarnation\":\"" INC_C
               "\",\"status\":404,\"released\":{\"leaderID\":\"node1\",\"etag\":\"r3\"}}]}",
               ans, why);
    CHECK(rc == 0 && ans[0].released && ans[0].etag && strcmp(ans[0].etag, "r1") == 0 &&
              ans[0].body && strstr(ans[0].body, "\"term\":8"),
          "a released record for the successor (%s)", why);
    CHECK(!ans[1].released && !ans[1].body && ans[1].yield, "none beside yield");
    CHECK(!ans[2].released && !ans[2].body && ans[2].status == 404,
          "a record that names a leader is no released record");
    peer_batch_results_clear(ans, 3);
    rc = parse("{\"locks\":[{\"incarnation\":\"" INC_A
               "\",\"status\":404,\"released\":{\"leaderID\":\"\",\"etag\":\"\"}},"
               "{\"incarnation\":\"" INC_B "\",\"status\":404,\"released\":[1]}]}",
               ans, why);
    CHECK(rc == 0 && !ans[0].released && !ans[1].released,
          "an empty etag or a non-object: ignored (%s)", why);
    peer_batch_results_clear(ans, 3);

    /* Each of these must fail the whole batch: nothing of it counts. */
    static const struct {
        const char *answer, *why;
    } bad[] = {
        {"", "not JSON"},
        {"[]", "not an object"},
        {"{\"locks\":{}}", "locks is not an array"},
        {"{\"locks\":[]}", "no entry"},
        {"{\"locks\":[{\"incarnation\":\"" INC_C "\",\"status\":404},{\"incarnation\":"
         "\"99999999999999999999999999999999\",\"status\":404}]}",
         "an incarnation not asked for"},
        {"{\"locks\":[{\"incarnation\":\"" INC_C "\",\"status\":404},{\"incarnation\":\"" INC_C
         "\",\"status\":404}]}",
         "an incarnation twice"},
        {"{\"locks\":[{\"incarnation\":\"" INC_A "\",\"status\":200,\"record\":" REC_A
         "},{\"incarnation\":\"" INC_A "\",\"status\":404}]}",
         "an incarnation twice, 200 then 404 (the record must not leak)"},
        {"{\"locks\":[{\"incarnation\":\"" INC_C "\",\"status\":500}]}", "status 500"},
        {"{\"locks\":[{\"incarnation\":\"" INC_C "\",\"status\":\"404\"}]}", "status a string"},
        {"{\"locks\":[{\"incarnation\":\"" INC_C "\"}]}", "no status"},
        {"{\"locks\":[{\"status\":404}]}", "no incarnation"},
        {"{\"locks\":[7]}", "an entry not an object"},
        {"{\"locks\":[{\"incarnation\":\"" INC_A "\",\"status\":200}]}", "200 without a record"},
        {"{\"locks\":[{\"incarnation\":\"" INC_A
         "\",\"status\":200,\"record\":{\"leaderID\":\"node2\",\"incarnation\":\"" INC_A
         "\",\"etag\":\"x\"}}]}",
         "a record naming another leader id than the record the follower read"},
        {"{\"locks\":[{\"incarnation\":\"" INC_A
         "\",\"status\":200,\"record\":{\"leaderID\":\"node1\",\"incarnation\":\"" INC_B
         "\",\"etag\":\"x\"}}]}",
         "the record of another lock's elector"},
        {"{\"locks\":[{\"incarnation\":\"" INC_A
         "\",\"status\":200,\"record\":{\"leaderID\":\"node1\",\"etag\":\"x\"}}]}",
         "a record without incarnation"},
        {"{\"locks\":[{\"incarnation\":\"" INC_A
         "\",\"status\":200,\"record\":{\"leaderID\":\"node1\",\"incarnation\":\"" INC_A
         "\",\"etag\":\"\"}}]}",
         "an empty etag"},
        {"{\"locks\":[{\"incarnation\":\"" INC_A
         "\",\"status\":200,\"record\":{\"leaderID\":\"node1\",\"incarnation\":\"" INC_A "\"}}]}",
         "no etag"},
        {"{\"locks\":[{\"incarnation\":\"" INC_A "\",\"status\":200,\"record\":" REC_A "}",
         "truncated"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(ans, 0x5a, sizeof ans);
        why[0] = '\0';
        rc = parse(bad[i].answer, ans, why);
        CHECK(rc == -1 && why[0], "malformed: %s (got %d)", bad[i].why, rc);
        for (int k = 0; k < 3; k++)
            CHECK(ans[k].status == 0 && !ans[k].body && !ans[k].etag,
                  "malformed (%s): entry %d left empty", bad[i].why, k);
    }

    /* Entry C names no expected leader id: any holder's record counts for
     * it, still only for its own incarnation. */
    rc = parse("{\"locks\":[{\"incarnation\":\"" INC_C
               "\",\"status\":200,\"record\":{\"leaderID\":\"anyone\",\"incarnation\":\"" INC_C
               "\",\"etag\":\"z\"}}]}",
               ans, why);
    CHECK(rc == 0 && ans[2].status == 200, "no expected id (%s)", why);
    peer_batch_results_clear(ans, 3);
}

int main(void)
{
    test_request();
    test_answers();
    return t_done("peer_batch");
}

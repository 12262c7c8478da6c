/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_peer_answer.c - a batched check's answer (peer_batch.c) on arbitrary
 * bytes, for three asked locks.
 *
 * Properties:
 * - peer_batch_read never crashes and never reads past len;
 * - on failure every slot is empty (nothing of a malformed batch counts);
 * - on success at least one entry is answered, each status is 200 or 404, a
 *   200 carries a non-empty etag and a record that parses as JSON, names the
 *   entry's own incarnation and, where one is expected, the expected leader.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "peer.h"

static const peer_batch_lock ents[3] = {
    {"0123456789abcdef0123456789abcdef", 7, "\"a\"", "node1", NULL},
    {"fedcba9876543210fedcba9876543210", 0, "", "node2", NULL},
    {"00000000000000000000000000000001", 3, "c", NULL, NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    peer_batch_result ans[3];
    char why[120];
    int rc = peer_batch_read((const char *)data, size, ents, 3, ans, why, sizeof why);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && why[0], "failure without a reason");
        for (int i = 0; i < 3; i++)
            FUZZ_CHECK(ans[i].status == 0 && !ans[i].body && !ans[i].etag,
                       "a malformed batch left entry %d", i);
        return 0;
    }
    int answered = 0;
    for (int i = 0; i < 3; i++) {
        if (!ans[i].status)
            continue;
        answered++;
        FUZZ_CHECK(ans[i].status == 200 || ans[i].status == 404, "status %d", ans[i].status);
        if (ans[i].status == 404) {
            FUZZ_CHECK(!ans[i].body && !ans[i].etag, "a 404 with a record");
            continue;
        }
        FUZZ_CHECK(ans[i].etag && ans[i].etag[0], "a 200 without an etag");
        FUZZ_CHECK(ans[i].body && strlen(ans[i].body) == ans[i].body_len, "body length");
        cJSON *rec = cJSON_Parse(ans[i].body);
        FUZZ_CHECK(cJSON_IsObject(rec), "the record is not an object");
        const char *inc =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "incarnation"));
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "leaderID"));
        const char *etag = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "etag"));
        FUZZ_CHECK(inc && strcmp(inc, ents[i].incarnation) == 0, "another incarnation's record");
        FUZZ_CHECK(id && (!ents[i].expect_id || strcmp(id, ents[i].expect_id) == 0),
                   "another leader's record");
        FUZZ_CHECK(etag && strcmp(etag, ans[i].etag) == 0, "etag differs from the record's");
        cJSON_Delete(rec);
    }
    FUZZ_CHECK(answered > 0, "success with no entry answered");
    peer_batch_results_clear(ans, 3);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_peer_batch.c - the peer endpoint's batch body parser (peer_http.c).
 *
 * Properties:
 * - peer_parse_batch never crashes and never reads past len (the body is
 *   a buffer of exactly len bytes, not NUL-terminated);
 * - it returns 0, -400 or -413 (-500 only without memory);
 * - on 0: 1 to PEER_MAX_BATCH_LOCKS entries, wait within [0,
 *   PEER_MAX_WAIT_MS], every incarnation 1 to PEER_INC_MAX hex digits,
 *   every etag NUL-terminated without control bytes, every term >= 0;
 *   otherwise nothing is left allocated (n 0, e NULL);
 * - peer_batch_answer over the parsed entries is JSON that parses back,
 *   with as many entries.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "peer.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *b = malloc(size ? size : 1);
    FUZZ_CHECK(b != NULL, "oom");
    memcpy(b, data, size);
    peer_batch batch;
    int rc = peer_parse_batch(b, size, &batch);
    free(b);
    FUZZ_CHECK(rc == 0 || rc == -400 || rc == -413 || rc == -500, "returned %d", rc);
    if (rc != 0) {
        FUZZ_CHECK(batch.n == 0 && batch.e == NULL, "an error left %zu entries", batch.n);
        return 0;
    }
    FUZZ_CHECK(batch.n >= 1 && batch.n <= PEER_MAX_BATCH_LOCKS, "%zu entries", batch.n);
    FUZZ_CHECK(batch.wait_ms >= 0 && batch.wait_ms <= PEER_MAX_WAIT_MS, "wait %lld",
               (long long)batch.wait_ms);
    peer_batch_item *items = calloc(batch.n, sizeof *items);
    FUZZ_CHECK(items != NULL, "oom");
    for (size_t i = 0; i < batch.n; i++) {
        const peer_batch_entry *e = &batch.e[i];
        size_t il = strnlen(e->incarnation, sizeof e->incarnation);
        FUZZ_CHECK(il >= 1 && il <= PEER_INC_MAX, "incarnation of %zu bytes", il);
        for (size_t k = 0; k < il; k++)
            FUZZ_CHECK(u_hexval((unsigned char)e->incarnation[k]) >= 0, "incarnation not hex");
        size_t el = strnlen(e->etag, sizeof e->etag);
        FUZZ_CHECK(el < sizeof e->etag, "etag not terminated");
        for (size_t k = 0; k < el; k++)
            FUZZ_CHECK((unsigned char)e->etag[k] >= 0x20 && e->etag[k] != 0x7f, "control in etag");
        FUZZ_CHECK(e->term >= 0, "term %lld", (long long)e->term);
        items[i].incarnation = e->incarnation;
        items[i].status = i % 2 ? 404 : 200;
        items[i].record = i % 2 ? NULL : "{\"term\":1}";
    }
    char *out = peer_batch_answer(items, batch.n);
    FUZZ_CHECK(out != NULL, "oom");
    cJSON *o = cJSON_Parse(out);
    const cJSON *locks = cJSON_GetObjectItemCaseSensitive(o, "locks");
    FUZZ_CHECK(cJSON_IsArray(locks) && (size_t)cJSON_GetArraySize(locks) == batch.n,
               "the answer does not parse back: %.200s", out);
    cJSON_Delete(o);
    free(out);
    free(items);
    peer_batch_free(&batch);
    return 0;
}

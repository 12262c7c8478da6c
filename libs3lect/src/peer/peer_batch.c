/* SPDX-License-Identifier: Apache-2.0 */
/* peer_batch.c - the follower's side of a batched long poll (docs/peer.md
 * "Batched follower checks"): the POST body that names the locks, and the
 * reading of the answer. Pure (no I/O, no clock), so it is unit-tested and
 * fuzzed directly.
 *
 * The answer is attacker-influenced bytes from the network; an entry counts
 * only for the lock whose incarnation it names, and only when the record it
 * carries is that incarnation's and names the leader the follower expects.
 * Anything else about the answer makes the whole batch malformed: every
 * follower of it then goes back to the store.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"
#include "s3lect.h"
#include "util.h"

char *peer_batch_request(const peer_batch_lock *ents, size_t n, int64_t wait_ms, size_t *len)
{
    if (len)
        *len = 0;
    cJSON *root = cJSON_CreateObject();
    cJSON *locks = root ? cJSON_AddArrayToObject(root, "locks") : NULL;
    /* Numbers as integers: cJSON would print a term above 10^15 rounded. */
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)(wait_ms < 0 ? 0 : wait_ms));
    if (!locks || !cJSON_AddRawToObject(root, "wait", num)) {
        cJSON_Delete(root);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (o && !cJSON_AddItemToArray(locks, o)) {
            cJSON_Delete(o);
            o = NULL;
        }
        /* o belongs to root from here */
        snprintf(num, sizeof num, "%lld", (long long)(ents[i].term < 0 ? 0 : ents[i].term));
        if (!o || !cJSON_AddStringToObject(o, "incarnation", ents[i].incarnation) ||
            !cJSON_AddRawToObject(o, "term", num) ||
            !cJSON_AddStringToObject(o, "etag", ents[i].etag ? ents[i].etag : "") ||
            (ents[i].proof && ents[i].proof[0] &&
             !cJSON_AddStringToObject(o, "proof", ents[i].proof))) {
            cJSON_Delete(root);
            return NULL;
        }
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (s && len)
        *len = strlen(s);
    return s;
}

size_t peer_batch_lock_size(const peer_batch_lock *ent)
{
    /* {"incarnation":"","term":,"etag":"","proof":""}, with every etag
     * byte escaped as \u00XX at worst, and a 16-digit term. */
    size_t etag = ent->etag ? strlen(ent->etag) : 0;
    size_t proof = ent->proof && ent->proof[0] ? 11 + strlen(ent->proof) : 0;
    return 48 + strlen(ent->incarnation) + 16 + 6 * etag + proof;
}

int peer_released_record(const cJSON *rel, char **body, char **etag)
{
    *body = *etag = NULL;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(rel, "leaderID");
    const cJSON *et = cJSON_GetObjectItemCaseSensitive(rel, "etag");
    if (!cJSON_IsObject(rel) || !cJSON_IsString(id) || id->valuestring[0] || !cJSON_IsString(et) ||
        !et->valuestring[0])
        return 0;
    *body = cJSON_PrintUnformatted(rel);
    *etag = u_strdup(et->valuestring);
    if (!*body || !*etag) {
        free(*body);
        free(*etag);
        *body = *etag = NULL;
        return 0;
    }
    return 1;
}

void peer_batch_results_clear(peer_batch_result *ans, size_t n)
{
    for (size_t i = 0; ans && i < n; i++) {
        free(ans[i].body);
        free(ans[i].etag);
        memset(&ans[i], 0, sizeof ans[i]);
    }
}

/* The asked incarnations, sorted, to find an answered entry's. */
typedef struct inc_ref {
    const char *inc;
    size_t idx;
} inc_ref;

static int by_ref(const void *a, const void *b)
{
    return strcmp(((const inc_ref *)a)->inc, ((const inc_ref *)b)->inc);
}

/* Sets why to a short description and returns -1. */
static int malformed(char *why, size_t cap, const char *what)
{
    if (why && cap)
        snprintf(why, cap, "%s", what);
    return -1;
}

int peer_batch_read(const char *body, size_t len, const peer_batch_lock *ents, size_t n,
                    peer_batch_result *ans, char *why, size_t whylen)
{
    if (why && whylen)
        why[0] = '\0';
    for (size_t i = 0; i < n; i++)
        memset(&ans[i], 0, sizeof ans[i]);
    inc_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (!refs)
        return malformed(why, whylen, "out of memory");
    for (size_t i = 0; i < n; i++) {
        refs[i].inc = ents[i].incarnation ? ents[i].incarnation : "";
        refs[i].idx = i;
    }
    qsort(refs, n, sizeof *refs, by_ref);
    int rc = 0;
    cJSON *root = cJSON_ParseWithLength(body ? body : "", body ? len : 0);
    const cJSON *locks = cJSON_GetObjectItemCaseSensitive(root, "locks");
    const cJSON *it;
    size_t answered = 0;
    if (!cJSON_IsObject(root) || !cJSON_IsArray(locks)) {
        rc = malformed(why, whylen, "not a JSON object with a \"locks\" array");
        goto out;
    }
    cJSON_ArrayForEach(it, locks)
    {
        const cJSON *inc = cJSON_GetObjectItemCaseSensitive(it, "incarnation");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(it, "status");
        if (!cJSON_IsObject(it) || !cJSON_IsString(inc) || !cJSON_IsNumber(st)) {
            rc = malformed(why, whylen, "an entry without incarnation and status");
            goto out;
        }
        inc_ref key = {inc->valuestring, 0};
        const inc_ref *r = n ? bsearch(&key, refs, n, sizeof *refs, by_ref) : NULL;
        if (!r) {
            rc = malformed(why, whylen, "an entry names an incarnation that was not asked for");
            goto out;
        }
        peer_batch_result *a = &ans[r->idx];
        if (a->status) {
            rc = malformed(why, whylen, "an incarnation is answered twice");
            goto out;
        }
        if (st->valuedouble == 404) {
            a->status = 404;
            a->yield = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "yield"));
            const cJSON *rel = cJSON_GetObjectItemCaseSensitive(it, "released");
            if (rel && !a->yield && peer_released_record(rel, &a->body, &a->etag)) {
                a->body_len = strlen(a->body);
                a->released = 1;
            }
            answered++;
            continue;
        }
        if (st->valuedouble != 200) {
            rc = malformed(why, whylen, "an entry's status is neither 200 nor 404");
            goto out;
        }
        const peer_batch_lock *want = &ents[r->idx];
        const cJSON *rec = cJSON_GetObjectItemCaseSensitive(it, "record");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(rec, "leaderID");
        const cJSON *rinc = cJSON_GetObjectItemCaseSensitive(rec, "incarnation");
        const cJSON *etag = cJSON_GetObjectItemCaseSensitive(rec, "etag");
        if (!cJSON_IsObject(rec) || !cJSON_IsString(id) || !cJSON_IsString(rinc) ||
            !cJSON_IsString(etag) || !etag->valuestring[0]) {
            rc = malformed(why, whylen, "an entry's record lacks leaderID, incarnation or etag");
            goto out;
        }
        if (strcmp(rinc->valuestring, want->incarnation) != 0) {
            rc = malformed(why, whylen, "an entry's record is another incarnation's");
            goto out;
        }
        if (want->expect_id && strcmp(id->valuestring, want->expect_id) != 0) {
            rc = malformed(why, whylen, "an entry's record names another leader id");
            goto out;
        }
        a->body = cJSON_PrintUnformatted(rec);
        a->etag = u_strdup(etag->valuestring);
        if (!a->body || !a->etag) {
            a->status = 200; /* so that it is freed below */
            rc = malformed(why, whylen, "out of memory");
            goto out;
        }
        a->body_len = strlen(a->body);
        a->status = 200;
        answered++;
    }
    if (answered == 0 && n > 0)
        rc = malformed(why, whylen, PEER_BATCH_NONE_ANSWERED);
out:
    if (rc != 0)
        peer_batch_results_clear(ans, n);
    cJSON_Delete(root);
    free(refs);
    return rc;
}

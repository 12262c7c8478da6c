/* SPDX-License-Identifier: Apache-2.0 */
#include "record.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"
#include "util.h"

static const char ZERO_TIME[] = "0001-01-01T00:00:00Z";
#define FIRST_MS_OF_YEAR_2 (-62104060800000LL) /* 0002-01-01T00:00:00Z */
#define LAST_MS_OF_9999 253402300799999LL      /* 9999-12-31T23:59:59.999Z */

void rec_clear(rec *r)
{
    free(r->leader_id);
    free(r->leader_addr);
    free(r->incarnation);
    free(r->peer_key);
    free(r->succ_key);
    free(r->xfer_to);
    free(r->xfer_n);
    free(r->xfer_ack_id);
    free(r->xfer_ack_inc);
    free(r->xfer_ack_proc);
    free(r->xfer_err);
    free(r->xfer_why);
    free(r->to_id);
    free(r->to_inc);
    free(r->to_proc);
    memset(r, 0, sizeof *r);
}

int rec_succ_key_valid(const char *s)
{
    if (!s || strlen(s) != REC_SUCC_KEY_LEN)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

int rec_peer_key_valid(const char *s)
{
    if (!s || strlen(s) != REC_PEER_KEY_LEN || s[REC_PEER_KEY_LEN - 1] != '=')
        return 0;
    for (int i = 0; i < REC_PEER_KEY_LEN - 1; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return 0;
    }
    return 1;
}

int rec_released(const rec *r)
{
    return r->zero_time || !r->leader_id || !r->leader_id[0];
}

static int corrupt(rec *r, char *err, size_t errlen, const char *why)
{
    rec_clear(r);
    snprintf(err, errlen, "corrupt lock record: %s", why);
    return S3LECT_ECORRUPT;
}

/* An optional string field: absent → "", present must be a string. */
static int get_str(const cJSON *root, const char *name, int required, char **out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!it || cJSON_IsNull(it)) {
        if (required)
            return -1;
        *out = u_strdup("");
        return *out ? 0 : -2;
    }
    if (!cJSON_IsString(it) || !it->valuestring)
        return -1;
    *out = u_strdup(it->valuestring);
    return *out ? 0 : -2;
}

/* An optional integer field: absent → 0; present must be a whole number in
 * [min, 2^53): -1 when it is not, -2 when it is 2^53 or more (JSON numbers
 * past 2^53 cannot be told apart from their neighbours). */
static int get_int(const cJSON *root, const char *name, int64_t min, int64_t *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = 0;
    if (!it)
        return 0;
    if (!cJSON_IsNumber(it))
        return -1;
    double v = it->valuedouble;
    if (isfinite(v) && v >= 9007199254740992.0)
        return -2;
    if (!isfinite(v) || v != floor(v) || v < (double)min)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* An auxiliary string: a string of at most max bytes with no control
 * character, else "" (absent). -2 on OOM. */
static int aux_str(const cJSON *root, const char *name, size_t max, char **out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
    const char *v = cJSON_IsString(it) && it->valuestring ? it->valuestring : "";
    size_t n = strlen(v);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20)
            n = max + 1;
    *out = u_strdup(n <= max ? v : "");
    return *out ? 0 : -2;
}

/* An auxiliary integer in [lo, hi], else 0. */
static int64_t aux_int(const cJSON *root, const char *name, int64_t lo, int64_t hi)
{
    int64_t v = 0;
    if (get_int(root, name, lo, &v) != 0 || v > hi)
        return 0;
    return v;
}

/* The transfer fields: every one auxiliary (malformed reads as absent). */
static int parse_xfer(const cJSON *root, rec *out)
{
    out->prio = aux_int(root, "prio", 0, REC_PRIO_MAX);
    out->xfer_ack_prio = aux_int(root, "xferAckPrio", 0, REC_PRIO_MAX);
    out->to_until = aux_int(root, "toUntil", 0, LAST_MS_OF_9999);
    if (aux_str(root, "xferTo", 256, &out->xfer_to) || aux_str(root, "xferN", 64, &out->xfer_n) ||
        aux_str(root, "xferAckId", 256, &out->xfer_ack_id) ||
        aux_str(root, "xferAckInc", 64, &out->xfer_ack_inc) ||
        aux_str(root, "xferAckProc", 64, &out->xfer_ack_proc) ||
        aux_str(root, "xferErr", 512, &out->xfer_err) ||
        aux_str(root, "xferWhy", 16, &out->xfer_why) || aux_str(root, "toId", 256, &out->to_id) ||
        aux_str(root, "toInc", 64, &out->to_inc) || aux_str(root, "toProc", 64, &out->to_proc))
        return -2;
    return 0;
}

int rec_parse(const char *body, size_t len, rec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!body || len == 0)
        return corrupt(out, err, errlen, "empty object");
    if (len > REC_MAX_SIZE)
        return corrupt(out, err, errlen, "larger than 64 KiB");
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root)
        return corrupt(out, err, errlen, "not valid JSON");
    int rc = 0;
    const char *why = NULL;
    char *lu = NULL;
    if (!cJSON_IsObject(root)) {
        why = "not a JSON object";
    } else if ((rc = get_str(root, "leaderID", 1, &out->leader_id)) != 0) {
        why = "leaderID missing or not a string";
    } else if ((rc = get_str(root, "leaderAddr", 0, &out->leader_addr)) != 0) {
        why = "leaderAddr is not a string";
    } else if ((rc = get_str(root, "lastUpdated", 1, &lu)) != 0) {
        why = "lastUpdated missing or not a string";
    } else if ((rc = get_str(root, "incarnation", 0, &out->incarnation)) != 0) {
        why = "incarnation is not a string";
    } else if ((rc = get_int(root, "term", 0, &out->term)) != 0) {
        why = rc == -2 ? "term is 2^53 or more: too large to be exact in JSON"
                       : "term is not a non-negative integer";
        rc = 0;
    } else if ((rc = get_int(root, "leaseMs", 0, &out->lease_ms)) != 0) {
        why = rc == -2 ? "leaseMs is 2^53 or more: too large to be exact in JSON"
                       : "leaseMs is not a non-negative integer";
        rc = 0;
    } else if (u_parse_rfc3339(lu, &out->last_updated_ms) != 0) {
        why = "lastUpdated is not an RFC 3339 time";
    } else if (out->last_updated_ms > LAST_MS_OF_9999) {
        why = "lastUpdated is after the year 9999";
    } else {
        /* Go's zero time.Time marks a released record; any instant in year 1
         * counts (or before it, through a UTC offset). Judged on the instant in
         * UTC, as rec_encode writes it, so that a record reads back the same. */
        out->zero_time = out->last_updated_ms < FIRST_MS_OF_YEAR_2;
    }
    if (!why && !rc) {
        /* An auxiliary field: anything but a well-formed key reads as absent
         * (the follower then verifies the leader as without it, and a failed
         * check only sends it back to the store). */
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(root, "peerKeySha256");
        const char *v =
            cJSON_IsString(pk) && rec_peer_key_valid(pk->valuestring) ? pk->valuestring : "";
        if (!(out->peer_key = u_strdup(v)))
            rc = -2;
        /* Auxiliary too: anything but a non-negative integer reads as
         * absent, which only costs the follower its store-clock credit. */
        int64_t hold = 0;
        if (get_int(root, "holdMs", 0, &hold) == 0)
            out->hold_ms = hold;
        const cJSON *sk = cJSON_GetObjectItemCaseSensitive(root, "succKey");
        const char *k =
            cJSON_IsString(sk) && rec_succ_key_valid(sk->valuestring) ? sk->valuestring : "";
        if (!(out->succ_key = u_strdup(k)))
            rc = -2;
        if (!rc && parse_xfer(root, out) != 0)
            rc = -2;
    }
    free(lu);
    cJSON_Delete(root);
    if (rc == -2) {
        rec_clear(out);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (why) {
        int big = strstr(why, "term is 2^53") == why;
        corrupt(out, err, errlen, why);
        out->term_too_large = big;
        return S3LECT_ECORRUPT;
    }
    return 0;
}

static int add_aux_str(cJSON *o, const char *name, const char *v)
{
    return !v || !v[0] || cJSON_AddStringToObject(o, name, v) ? 0 : -1;
}

static int add_aux_int(cJSON *o, const char *name, int64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)v);
    return v == 0 || cJSON_AddRawToObject(o, name, num) ? 0 : -1;
}

/* Only the fields that are set: a record without a transfer reads as before. */
static int encode_xfer(cJSON *o, const rec *r)
{
    return add_aux_int(o, "prio", r->prio) | add_aux_str(o, "xferTo", r->xfer_to) |
           add_aux_str(o, "xferN", r->xfer_n) | add_aux_str(o, "xferAckId", r->xfer_ack_id) |
           add_aux_str(o, "xferAckInc", r->xfer_ack_inc) |
           add_aux_str(o, "xferAckProc", r->xfer_ack_proc) |
           add_aux_int(o, "xferAckPrio", r->xfer_ack_prio) |
           add_aux_str(o, "xferErr", r->xfer_err) | add_aux_str(o, "xferWhy", r->xfer_why) |
           add_aux_str(o, "toId", r->to_id) | add_aux_str(o, "toInc", r->to_inc) |
           add_aux_str(o, "toProc", r->to_proc) | add_aux_int(o, "toUntil", r->to_until);
}

char *rec_encode(const rec *r)
{
    char lu[40];
    if (r->term < 0 || r->term > REC_TERM_MAX)
        return NULL;
    if (r->zero_time)
        snprintf(lu, sizeof lu, "%s", ZERO_TIME);
    else
        u_format_rfc3339(r->last_updated_ms, lu, sizeof lu);
    /* Integers as integers: cJSON prints doubles with 15 significant digits
     * when that reads back within an epsilon, which changes values near 2^53. */
    char term[24], lease[24], hold[24];
    snprintf(term, sizeof term, "%lld", (long long)r->term);
    snprintf(lease, sizeof lease, "%lld", (long long)r->lease_ms);
    snprintf(hold, sizeof hold, "%lld", (long long)r->hold_ms);
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char *s = NULL;
    if (cJSON_AddStringToObject(o, "leaderID", r->leader_id ? r->leader_id : "") &&
        cJSON_AddStringToObject(o, "leaderAddr", r->leader_addr ? r->leader_addr : "") &&
        cJSON_AddStringToObject(o, "lastUpdated", lu) && cJSON_AddRawToObject(o, "term", term) &&
        cJSON_AddRawToObject(o, "leaseMs", lease) &&
        (r->hold_ms <= 0 || cJSON_AddRawToObject(o, "holdMs", hold)) &&
        (!r->succ_key || !r->succ_key[0] || cJSON_AddStringToObject(o, "succKey", r->succ_key)) &&
        cJSON_AddStringToObject(o, "incarnation", r->incarnation ? r->incarnation : "") &&
        (!r->peer_key || !r->peer_key[0] ||
         cJSON_AddStringToObject(o, "peerKeySha256", r->peer_key)) &&
        encode_xfer(o, r) == 0)
        s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* store_dynamodb.c - the DynamoDB store (docs/stores.md): one item per lock,
 * the record in attribute s3lectRecord, a random version token in
 * s3lectVersion as the etag.
 *
 *   read    GetItem, ConsistentRead (strongly consistent)
 *   create  PutItem if attribute_not_exists(partition key)
 *   write   PutItem if s3lectVersion = the version read
 *
 * Requests are SigV4-signed JSON POSTs (X-Amz-Target DynamoDB_20120810.*),
 * blocking on the store's own handle (the CLI) or prepared on a handle of the
 * runtime's shared libcurl multi (begin/finish), like the S3 store. The
 * version is a fresh random token on every write, so a row deleted and made
 * again never brings an old version back (no ABA).
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aws_http.h"
#include "crypto.h"
#include "store.h"
#include "util.h"

#define DDB_DEFAULT_TIMEOUT_MS 10000
#define DDB_RECORD_ATTR "s3lectRecord"
#define DDB_VERSION_ATTR "s3lectVersion"
#define DDB_TABLE_WAIT_MS 120000

typedef struct ddb_store {
    st_store base;
    ah_service v; /* endpoint, region, credentials, the blocking calls' handle */
    char *table, *pk, *sk, *sv;
    char *path; /* "/" or the endpoint's base path */
} ddb_store;

enum { OP_GET, OP_PUT, OP_TABLE };

struct st_xfer {
    int op;
    const char *action; /* "GetItem" ... */
    char *key;
    char *if_match;   /* PUT: the version written over, NULL to create */
    char version[33]; /* PUT: the new version */
    int64_t timeout_ms;
    ah_call call;
};

static void xfer_free(st_xfer *x)
{
    if (!x)
        return;
    ah_call_release(&x->call);
    free(x->key);
    free(x->if_match);
    free(x);
}

/* ---- request bodies ---- */

static cJSON *str_value(const char *s)
{
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "S", s)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Adds "name": {"S": value} to obj. */
static int add_str(cJSON *obj, const char *name, const char *value)
{
    cJSON *v = str_value(value);
    if (!v || !cJSON_AddItemToObject(obj, name, v)) {
        cJSON_Delete(v);
        return -1;
    }
    return 0;
}

/* The lock's key attributes, "pk": {"S": key} [, "sk": {"S": sv}], into obj
 * (a GetItem's Key, a PutItem's Item). */
static int add_key_attrs(const ddb_store *s, cJSON *obj, const char *key)
{
    return obj && add_str(obj, s->pk, key) == 0 && (!s->sk || add_str(obj, s->sk, s->sv) == 0) ? 0
                                                                                               : -1;
}

static char *get_body(const ddb_store *s, const char *key)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *names = o ? cJSON_AddObjectToObject(o, "ExpressionAttributeNames") : NULL;
    char *out = NULL;
    if (names && cJSON_AddStringToObject(o, "TableName", s->table) &&
        add_key_attrs(s, cJSON_AddObjectToObject(o, "Key"), key) == 0 &&
        cJSON_AddTrueToObject(o, "ConsistentRead") &&
        cJSON_AddStringToObject(o, "ProjectionExpression", "#r, #v") &&
        cJSON_AddStringToObject(names, "#r", DDB_RECORD_ATTR) &&
        cJSON_AddStringToObject(names, "#v", DDB_VERSION_ATTR))
        out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}

static char *put_body(const ddb_store *s, const char *key, const char *data, const char *if_match,
                      const char *version)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *item = o ? cJSON_AddObjectToObject(o, "Item") : NULL;
    cJSON *names = o ? cJSON_AddObjectToObject(o, "ExpressionAttributeNames") : NULL;
    char *out = NULL;
    int ok = item && names && cJSON_AddStringToObject(o, "TableName", s->table) &&
             add_key_attrs(s, item, key) == 0 && add_str(item, DDB_RECORD_ATTR, data) == 0 &&
             add_str(item, DDB_VERSION_ATTR, version) == 0;
    if (ok && !if_match) {
        ok = cJSON_AddStringToObject(o, "ConditionExpression", "attribute_not_exists(#k)") &&
             cJSON_AddStringToObject(names, "#k", s->pk);
    } else if (ok) {
        cJSON *vals = cJSON_AddObjectToObject(o, "ExpressionAttributeValues");
        ok = vals && add_str(vals, ":v", if_match) == 0 &&
             cJSON_AddStringToObject(o, "ConditionExpression", "#v = :v") &&
             cJSON_AddStringToObject(names, "#v", DDB_VERSION_ATTR);
    }
    if (ok)
        out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}

/* ---- requests ---- */

static st_xfer *ddb_start(ddb_store *s, void *easy, int op, const char *action, const char *key,
                          char *json, const char *if_match, int64_t timeout_ms, st_result *out)
{
    st_xfer *x = calloc(1, sizeof *x);
    if (!x || !json || !(x->key = u_strdup(key)) ||
        (if_match && !(x->if_match = u_strdup(if_match)))) {
        xfer_free(x);
        free(json);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    x->op = op;
    x->action = action;
    x->timeout_ms = timeout_ms > 0 ? timeout_ms : s->v.default_timeout_ms;
    if (ah_signer_creds(&s->v.signer, out) != 0) {
        free(json);
        xfer_free(x);
        return NULL;
    }
    char target[64];
    snprintf(target, sizeof target, "DynamoDB_20120810.%s", action);
    sigv4_header h[] = {{"Content-Type", "application/x-amz-json-1.0"}, {"X-Amz-Target", target}};
    ah_request rq = {.method = "POST",
                     .origin = s->v.origin,
                     .host = s->v.host,
                     .path = s->path,
                     .service = "dynamodb",
                     .region = s->v.region,
                     .headers = h,
                     .nheaders = 2,
                     .body = json,
                     .body_len = strlen(json),
                     .timeout_ms = x->timeout_ms,
                     .ca_file = s->v.ca_file};
    int rc = ah_call_prepare(&x->call, easy, &s->v.signer, &rq, out);
    memset(json, 0, strlen(json));
    free(json);
    if (rc != 0) {
        xfer_free(x);
        return NULL;
    }
    return x;
}

static st_xfer *ddb_begin(st_store *st, void *easy, const char *key, int put, const void *body,
                          size_t len, const char *if_match, int64_t timeout_ms, st_result *out)
{
    ddb_store *s = (ddb_store *)st;
    memset(out, 0, sizeof *out);
    if (!key || !*key) {
        st_result_setf(out, ST_FATAL, "empty DynamoDB key: use dynamodb://%s/KEY", s->table);
        return NULL;
    }
    if (!put)
        return ddb_start(s, easy, OP_GET, "GetItem", key, get_body(s, key), NULL, timeout_ms, out);
    char version[33];
    char *data = malloc(len + 1);
    if (!data || cr_random_token(version) != 0) {
        free(data);
        st_result_setf(out, ST_TRANSIENT, "out of memory or no randomness");
        return NULL;
    }
    memcpy(data, body ? body : "", len);
    data[len] = '\0';
    char *json = put_body(s, key, data, if_match, version);
    free(data);
    st_xfer *x = ddb_start(s, easy, OP_PUT, "PutItem", key, json, if_match, timeout_ms, out);
    if (x)
        memcpy(x->version, version, sizeof version);
    return x;
}

/* The error's short name ("ConditionalCheckFailedException") and message. */
static void error_fields(const cJSON *j, const char **type, const char **msg)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "__type");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
    if (!cJSON_IsString(m))
        m = cJSON_GetObjectItemCaseSensitive(j, "Message");
    *type = "";
    *msg = "";
    if (cJSON_IsString(t) && t->valuestring) {
        const char *hash = strrchr(t->valuestring, '#');
        *type = hash ? hash + 1 : t->valuestring;
    }
    if (cJSON_IsString(m) && m->valuestring)
        *msg = m->valuestring;
}

static int classify(long status, const char *type)
{
    static const char *const transient[] = {"ProvisionedThroughputExceededException",
                                            "ThrottlingException",
                                            "RequestLimitExceeded",
                                            "TransactionConflictException",
                                            "LimitExceededException",
                                            "InternalServerError",
                                            "ServiceUnavailable",
                                            "ItemCollectionSizeLimitExceededException"};
    static const char *const auth[] = {
        "AccessDeniedException",     "UnrecognizedClientException",
        "InvalidSignatureException", "MissingAuthenticationToken",
        "ExpiredTokenException",     "IncompleteSignature",
        "InvalidClientTokenId",      "MissingAuthenticationTokenException"};
    if (status >= 200 && status < 300)
        return ST_OK;
    /* A conditional write, or a CreateTable (init-store), refused because
     * what it would create exists. */
    if (strcmp(type, "ConditionalCheckFailedException") == 0 ||
        strcmp(type, "ResourceInUseException") == 0)
        return ST_PRECONDITION;
    for (size_t i = 0; i < sizeof transient / sizeof *transient; i++)
        if (strcmp(type, transient[i]) == 0)
            return ST_TRANSIENT;
    for (size_t i = 0; i < sizeof auth / sizeof *auth; i++)
        if (strcmp(type, auth[i]) == 0)
            return ST_AUTH;
    if (status == 401 || status == 403)
        return ST_AUTH;
    if (status >= 500 || status == 408 || status == 429 || status == 0)
        return ST_TRANSIENT;
    return ST_FATAL;
}

static void set_failure(ddb_store *s, const st_xfer *x, long status, const char *type,
                        const char *msg, int outcome, st_result *out)
{
    char detail[600];
    snprintf(detail, sizeof detail, "HTTP %ld%s%.100s%s%.300s", status, type[0] ? " " : "", type,
             msg[0] ? ": " : "", msg);
    const char *key = x->key;
    switch (outcome) {
    case ST_PRECONDITION:
        if (x->if_match)
            st_result_setf(out, outcome,
                           "dynamodb://%s/%s changed since version %s: another writer won (%s)",
                           s->table, key, x->if_match, detail);
        else
            st_result_setf(out, outcome, "dynamodb://%s/%s already exists: another writer won (%s)",
                           s->table, key, detail);
        break;
    case ST_AUTH:
        st_result_setf(out, outcome,
                       "DynamoDB refused dynamodb:%s on table '%s' for the credentials from %s "
                       "(access key id %s) (%s): grant dynamodb:GetItem and dynamodb:PutItem on "
                       "the table (docs/stores.md), or fix the credentials",
                       x->action, s->table, s->v.signer.creds.source,
                       s->v.signer.creds.access_key_id ? s->v.signer.creds.access_key_id : "?",
                       detail);
        break;
    case ST_FATAL:
        if (strcmp(type, "ResourceNotFoundException") == 0)
            st_result_setf(out, outcome,
                           "DynamoDB table '%s' does not exist at %s (%s): create it with "
                           "'s3lect init-store dynamodb://%s/%s' or fix the lock URL (and the "
                           "region, now %s)",
                           s->table, s->v.endpoint_desc, detail, s->table, key, s->v.region);
        else if (strcmp(type, "ValidationException") == 0)
            st_result_setf(out, outcome,
                           "DynamoDB refused %s on table '%s' (%s): the table's key must be "
                           "partition key '%s'%s%s%s of type String; set ?partition_key= (and "
                           "?sort_key=&sort_value= when the table has a sort key)",
                           x->action, s->table, detail, s->pk, s->sk ? " and sort key '" : "",
                           s->sk ? s->sk : "", s->sk ? "'" : "");
        else
            st_result_setf(out, outcome, "DynamoDB %s on dynamodb://%s/%s failed at %s (%s)",
                           x->action, s->table, key, s->v.endpoint_desc, detail);
        break;
    default:
        st_result_setf(out, outcome,
                       "DynamoDB %s on dynamodb://%s/%s: temporary failure at %s (%s); will "
                       "retry",
                       x->action, s->table, key, s->v.endpoint_desc, detail);
        break;
    }
}

/* The attribute's string value in item, or NULL. */
static const char *item_string(const cJSON *item, const char *name)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(item, name);
    const cJSON *v = a ? cJSON_GetObjectItemCaseSensitive(a, "S") : NULL;
    return v && cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Parses a finished request's answer; returns the parsed JSON (caller
 * deletes) when the call worked, else NULL with out set. */
static cJSON *ddb_answer(ddb_store *s, st_xfer *x, int curl_code, st_result *out)
{
    long status = st_http_finish_start(x->call.easy, out);
    if (ah_call_transport_failed(&x->call, curl_code)) {
        char what[400];
        snprintf(what, sizeof what, "DynamoDB %s on dynamodb://%s/%.200s", x->action, s->table,
                 x->key);
        st_transport_failure(curl_code, x->call.errbuf, what, s->v.endpoint_desc, x->timeout_ms,
                             out);
        return NULL;
    }
    const ah_response *r = &x->call.resp;
    cJSON *j = r->data.body && !r->data.too_large ? cJSON_ParseWithLength(r->data.body, r->data.len)
                                                  : NULL;
    if (status >= 200 && status < 300) {
        if (!j)
            st_result_setf(out, ST_TRANSIENT,
                           "DynamoDB %s at %s: the answer is not JSON; will retry", x->action,
                           s->v.endpoint_desc);
        return j;
    }
    const char *type = "", *msg = "";
    if (j)
        error_fields(j, &type, &msg);
    int outcome = classify(status, type);
    set_failure(s, x, status, type, msg, outcome, out);
    if (outcome == ST_AUTH)
        ah_signer_refused(&s->v.signer);
    cJSON_Delete(j);
    return NULL;
}

static void ddb_finish(st_store *st, st_xfer *x, int curl_code, st_result *out)
{
    ddb_store *s = (ddb_store *)st;
    cJSON *j = ddb_answer(s, x, curl_code, out);
    if (!j) {
        xfer_free(x);
        return;
    }
    if (x->op == OP_PUT) {
        if (st_result_set_etag(out, x->version) != 0)
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        else
            out->outcome = ST_OK;
    } else {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(j, "Item");
        const char *rec = item ? item_string(item, DDB_RECORD_ATTR) : NULL;
        const char *ver = item ? item_string(item, DDB_VERSION_ATTR) : NULL;
        if (!item) {
            st_result_setf(out, ST_NOT_FOUND, "dynamodb://%s/%s does not exist", s->table, x->key);
        } else if (!rec || !ver || !*ver) {
            st_result_setf(out, ST_FATAL,
                           "dynamodb://%s/%s: the item exists but has no string attributes "
                           "%s and %s: it was not written by s3lect; use another key or "
                           "delete the item",
                           s->table, x->key, DDB_RECORD_ATTR, DDB_VERSION_ATTR);
        } else if (st_result_set_etag(out, ver) != 0 ||
                   st_result_set_body(out, rec, strlen(rec)) != 0) {
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        } else {
            out->outcome = ST_OK;
        }
    }
    cJSON_Delete(j);
    xfer_free(x);
}

/* A table-level call (CreateTable, DescribeTable): the parsed answer, or
 * NULL with out set. */
static cJSON *ddb_table_call(ddb_store *s, const char *action, char *json, int64_t timeout_ms,
                             st_result *out)
{
    memset(out, 0, sizeof *out);
    CURL *h = st_easy(&s->base, out);
    st_xfer *x = h ? ddb_start(s, h, OP_TABLE, action, "", json, NULL, timeout_ms, out) : NULL;
    if (!h)
        free(json);
    if (!x)
        return NULL;
    cJSON *j = ddb_answer(s, x, curl_easy_perform(h), out);
    xfer_free(x);
    if (j)
        out->outcome = ST_OK;
    return j;
}

static char *table_only(const ddb_store *s)
{
    cJSON *o = cJSON_CreateObject();
    char *out =
        o && cJSON_AddStringToObject(o, "TableName", s->table) ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return out;
}

static char *create_body(const ddb_store *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *defs = o ? cJSON_AddArrayToObject(o, "AttributeDefinitions") : NULL;
    cJSON *schema = o ? cJSON_AddArrayToObject(o, "KeySchema") : NULL;
    char *out = NULL;
    int ok = defs && schema && cJSON_AddStringToObject(o, "TableName", s->table) &&
             cJSON_AddStringToObject(o, "BillingMode", "PAY_PER_REQUEST");
    for (int i = 0; ok && i < (s->sk ? 2 : 1); i++) {
        cJSON *d = cJSON_CreateObject(), *k = cJSON_CreateObject();
        const char *name = i ? s->sk : s->pk;
        ok = d && k && cJSON_AddStringToObject(d, "AttributeName", name) &&
             cJSON_AddStringToObject(d, "AttributeType", "S") &&
             cJSON_AddStringToObject(k, "AttributeName", name) &&
             cJSON_AddStringToObject(k, "KeyType", i ? "RANGE" : "HASH");
        if (ok) {
            cJSON_AddItemToArray(defs, d);
            cJSON_AddItemToArray(schema, k);
        } else {
            cJSON_Delete(d);
            cJSON_Delete(k);
        }
    }
    if (ok)
        out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}

/* Does the described table have our key schema? Writes what differs. */
static int schema_matches(const ddb_store *s, const cJSON *table, char *why, size_t len)
{
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(table, "KeySchema");
    const char *hash = NULL, *range = NULL;
    const cJSON *k;
    cJSON_ArrayForEach(k, ks)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(k, "AttributeName");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(k, "KeyType");
        if (cJSON_IsString(n) && cJSON_IsString(t)) {
            if (strcmp(t->valuestring, "HASH") == 0)
                hash = n->valuestring;
            else if (strcmp(t->valuestring, "RANGE") == 0)
                range = n->valuestring;
        }
    }
    if (!hash || strcmp(hash, s->pk) != 0 || !range != !s->sk ||
        (range && strcmp(range, s->sk) != 0)) {
        snprintf(
            why, len,
            "its key is partition key '%.100s'%s%.100s%s, the lock URL says '%.100s'%s%.100s%s "
            "(set ?partition_key=, ?sort_key=&sort_value=)",
            hash ? hash : "?", range ? " + sort key '" : "", range ? range : "", range ? "'" : "",
            s->pk, s->sk ? " + sort key '" : "", s->sk ? s->sk : "", s->sk ? "'" : "");
        return 0;
    }
    return 1;
}

static void ddb_init(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    ddb_store *s = (ddb_store *)st;
    (void)key;
    st_result r;
    cJSON_Delete(ddb_table_call(s, "CreateTable", create_body(s), timeout_ms, &r));
    int created = r.outcome == ST_OK;
    if (!created && r.outcome != ST_PRECONDITION) { /* PRECONDITION: the table exists */
        *out = r;
        return;
    }
    st_result_clear(&r);
    /* Wait (bounded) until the table is ACTIVE, and check its key. */
    int64_t deadline = u_mono_ms() + DDB_TABLE_WAIT_MS;
    for (;;) {
        cJSON *j = ddb_table_call(s, "DescribeTable", table_only(s), timeout_ms, &r);
        if (!j) {
            *out = r;
            return;
        }
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "Table");
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(t, "TableStatus");
        char why[600] = "";
        int match = t && schema_matches(s, t, why, sizeof why);
        int active = cJSON_IsString(status) && strcmp(status->valuestring, "ACTIVE") == 0;
        cJSON_Delete(j);
        st_result_clear(&r);
        memset(out, 0, sizeof *out);
        if (!match) {
            st_result_setf(out, ST_FATAL, "DynamoDB table '%s' exists at %s but %s", s->table,
                           s->v.endpoint_desc, why);
            return;
        }
        if (active) {
            out->outcome = ST_OK;
            out->message = u_asprintf(
                "%s DynamoDB table '%s' at %s (on-demand capacity, partition key '%s'%s%s%s)",
                created ? "created" : "already there:", s->table, s->v.endpoint_desc, s->pk,
                s->sk ? ", sort key '" : "", s->sk ? s->sk : "", s->sk ? "'" : "");
            return;
        }
        if (u_mono_ms() > deadline) {
            st_result_setf(out, ST_TRANSIENT,
                           "DynamoDB table '%s' is not ACTIVE after %d s; run init-store again "
                           "later",
                           s->table, DDB_TABLE_WAIT_MS / 1000);
            return;
        }
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

static const char *ddb_pool(const st_store *st)
{
    return ((const ddb_store *)st)->v.origin;
}

static void ddb_destroy(st_store *st)
{
    ddb_store *s = (ddb_store *)st;
    if (!s)
        return;
    ah_service_clear(&s->v);
    free(s->table);
    free(s->pk);
    free(s->sk);
    free(s->sv);
    free(s->path);
    free(s);
}

static const st_vtable ddb_vtable = {.name = "dynamodb",
                                     .destroy = ddb_destroy,
                                     .begin = ddb_begin,
                                     .finish = ddb_finish,
                                     .pool = ddb_pool,
                                     .init = ddb_init};

int st_dynamodb_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                     char *err, size_t errlen)
{
    *out = NULL;
    ddb_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &ddb_vtable;
    int rc = ah_service_init(&s->v, cfg, NULL, DDB_DEFAULT_TIMEOUT_MS, err, errlen);
    if (rc) {
        free(s);
        return rc;
    }
    s->table = u_strdup(loc->bucket);
    s->pk = u_strdup(loc->opt1); /* st_location_parse's default: LockID */
    s->sk = loc->opt2 ? u_strdup(loc->opt2) : NULL;
    s->sv = loc->opt3 ? u_strdup(loc->opt3) : NULL;
    int oom = 0;
    char *url = aws_service_endpoint_resolve(cfg, "DYNAMODB", "dynamodb", &oom);
    const char *china = strncmp(s->v.region, "cn-", 3) == 0 ? ".cn" : "";
    char *aws_url = u_asprintf("https://dynamodb.%s.amazonaws.com%s", s->v.region, china);
    char *aws_desc = u_asprintf("AWS DynamoDB (%s)", s->v.region);
    if (!s->table || !s->pk || (loc->opt2 && !s->sk) || (loc->opt3 && !s->sv) || oom || !aws_url ||
        !aws_desc) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    }
    if (rc == 0)
        rc = ah_service_endpoint(&s->v, url, aws_url, "DynamoDB endpoint", aws_desc, err, errlen);
    if (rc == 0 && !(s->path = u_strdup(s->v.base_path[0] ? s->v.base_path : "/"))) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    }
    if (rc == 0)
        rc = ah_signer_open(&s->v.signer, cfg, err, errlen);
    free(url);
    free(aws_url);
    free(aws_desc);
    if (rc) {
        ddb_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

#define DDB_USAGE                                                                                  \
    "dynamodb://TABLE/KEY, optionally ?partition_key=ATTR (default LockID) and "                   \
    "&sort_key=ATTR&sort_value=VALUE"

int st_dynamodb_parse(const char *url, const char *b, st_location *out, char *err, size_t errlen)
{
    if (strchr(b, '#')) {
        snprintf(err, errlen, "lock URL '%.200s' has a fragment ('#'); write %s", url, DDB_USAGE);
        return S3LECT_EINVAL;
    }
    const char *q = strchr(b, '?');
    size_t pl = q ? (size_t)(q - b) : strlen(b);
    const char *slash = memchr(b, '/', pl);
    if (!slash || slash == b || slash + 1 == b + pl) {
        snprintf(err, errlen, "lock URL '%.200s' needs a table and a key: %s", url, DDB_USAGE);
        return S3LECT_EINVAL;
    }
    int bad = 0, rc;
    out->bucket = u_asprintf("%.*s", (int)(slash - b), b);
    out->key = st_pct_decode(slash + 1, (size_t)(b + pl - slash - 1), &bad);
    if (bad) {
        snprintf(err, errlen, "lock URL '%.200s': the key has a malformed %%-escape", url);
        return S3LECT_EINVAL;
    }
    if (!out->bucket || !out->key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    size_t tl = strlen(out->bucket);
    if (tl < 3 || tl > 255 || !st_only_chars(out->bucket, "_.-")) {
        snprintf(err, errlen,
                 "lock URL '%.200s': '%.100s' is not a DynamoDB table name (3 to 255 of a-z, "
                 "A-Z, 0-9, '_', '-', '.')",
                 url, out->bucket);
        return S3LECT_EINVAL;
    }
    if ((rc = st_check_text(url, "key", out->key, 2048, err, errlen)) != 0)
        return rc;
    st_qparam ps[] = {
        {"partition_key", &out->opt1}, {"sort_key", &out->opt2}, {"sort_value", &out->opt3}};
    if ((rc = st_parse_query(url, DDB_USAGE, q ? q + 1 : NULL, ps, 3, NULL, err, errlen)) != 0)
        return rc;
    if (!out->opt1 && !(out->opt1 = u_strdup("LockID"))) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (!out->opt2 != !out->opt3) {
        snprintf(err, errlen,
                 "lock URL '%.200s': sort_key and sort_value go together (the table's sort key "
                 "attribute and the value the lock's item has in it)",
                 url);
        return S3LECT_EINVAL;
    }
    const char *names[] = {out->opt1, out->opt2};
    for (int i = 0; i < 2; i++) {
        if (names[i] && (strlen(names[i]) > 255 || !st_only_chars(names[i], "_.-"))) {
            snprintf(err, errlen,
                     "lock URL '%.200s': attribute name '%.100s' must have 1 to 255 of a-z, A-Z, "
                     "0-9, '_', '-', '.'",
                     url, names[i]);
            return S3LECT_EINVAL;
        }
    }
    if (out->opt2 && strcmp(out->opt1, out->opt2) == 0) {
        snprintf(err, errlen,
                 "lock URL '%.200s': partition_key and sort_key are the same attribute", url);
        return S3LECT_EINVAL;
    }
    if (out->opt3 && (rc = st_check_text(url, "sort_value", out->opt3, 1024, err, errlen)) != 0)
        return rc;
    return 0;
}

int st_dynamodb_canonical(const st_location *loc, char **out)
{
    int rc = st_canon_add(out, "dynamodb://", loc->bucket, 0) ||
             st_canon_add(out, "/", loc->key, 1) ||
             st_canon_add(out, "?partition_key=", loc->opt1, 1);
    if (loc->opt2 && loc->opt3)
        rc = rc || st_canon_add(out, "&sort_key=", loc->opt2, 1) ||
             st_canon_add(out, "&sort_value=", loc->opt3, 1);
    return rc;
}

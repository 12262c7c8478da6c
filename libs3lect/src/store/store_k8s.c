/* SPDX-License-Identifier: Apache-2.0 */
/* store_k8s.c - the Kubernetes Lease store (k8s://NAMESPACE/NAME, a
 * coordination.k8s.io/v1 Lease), over the API server's REST API with the
 * credentials of cred/kube_creds.h (in-cluster, kubeconfig, exec plugins).
 *
 *   read:    GET  /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME
 *            the record (below); metadata.resourceVersion is the etag
 *   create:  POST /apis/coordination.k8s.io/v1/namespaces/NS/leases
 *            409 AlreadyExists: another writer won
 *   replace: PUT  .../leases/NAME with metadata.resourceVersion = the etag
 *            (the release too); 409 Conflict: another writer won
 *
 * The record travels in the annotation s3lect.io/record, byte for byte as
 * the engine wrote it; the spec carries what client-go's leaderelection
 * reads (holderIdentity, leaseDurationSeconds rounded up from the larger
 * of leaseMs and holdMs, acquireTime, renewTime, leaseTransitions), and
 * the annotation s3lect.io/stamp ("RENEWTIME HOLDER") says which spec the
 * record was written with. A Lease whose spec does not match its stamp
 * (client-go wrote the spec: it keeps annotations it does not know) or
 * that has no record is a foreign holder's: it reads as a record like Go
 * s3lect's (leaderID, lastUpdated, leaseMs = leaseDurationSeconds; the
 * term of a stale record kept), which followers count from their own
 * first sight of each resourceVersion, as client-go counts from its own
 * observation (docs/stores.md "Kubernetes Lease").
 *
 * No store clock: renewTime is a client's clock and the API server stamps
 * nothing on a Lease at a resolution worth trusting (server_now_ms stays
 * 0, as for etcd, which holds the Lease underneath).
 *
 * A blocking store (as etcd's): a replace whose Lease this store has not
 * read at that version reads it first, and a 401 re-reads a token file and
 * tries once more, both inside one call.
 *
 * Messages never hold the token or a key.
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http_store.h"
#include "config.h"
#include "http.h"
#include "kube_creds.h"
#include "store.h"
#include "util.h"

#define K8S_DEFAULT_TIMEOUT_MS 10000
#define K8S_MAX_BODY (1024 * 1024)
#define K8S_TOKEN_REREAD_MS 60000
#define K8S_CACHE 4
#define K8S_ANN_RECORD "s3lect.io/record"
#define K8S_ANN_STAMP "s3lect.io/stamp"
#define K8S_API "/apis/coordination.k8s.io/v1"
#define K8S_DOC "docs/stores.md#kubernetes-lease"
/* 0002-01-01T00:00:00Z: Go's zero time (a released record) is before it */
#define FIRST_MS_OF_YEAR_2 (-62104060800000LL)

typedef struct lease_slot {
    char *name;
    char *rv;
    cJSON *obj;
    uint64_t used;
} lease_slot;

typedef struct k8s_store {
    st_store base;
    char *ns;
    kube_target t;
    char *url_base;   /* server + the namespace's leases collection */
    char *connect_to; /* tls-server-name: "NAME:PORT:HOST:PORT" */
    char *ca_file;    /* the config's, when the kubeconfig names no CA */
    int64_t default_timeout_ms;
    /* a token file: re-read every minute and after a 401 */
    char *file_token;
    int64_t file_token_at; /* mono ms; 0: read it */
    st_bearer bearer;      /* an exec plugin through the shared cache */
    lease_slot cache[K8S_CACHE];
    uint64_t tick;
    u_rng rng;
} k8s_store;

/* ---- the record <-> Lease mapping ---- */

static const cJSON *obj_item(const cJSON *o, const char *name)
{
    return o && cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, name) : NULL;
}

static const char *obj_str(const cJSON *o, const char *name)
{
    const cJSON *v = obj_item(o, name);
    return v && cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A whole number >= 0 (a JSON number), else -1. */
static int64_t obj_int(const cJSON *o, const char *name)
{
    const cJSON *v = obj_item(o, name);
    if (!v || !cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740991.0 ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return -1;
    return (int64_t)v->valuedouble;
}

static char *stamp_of(const char *renew, const char *holder)
{
    return u_asprintf("%s %s", renew ? renew : "", holder ? holder : "");
}

/* The body a Lease reads as: the record it carries when its spec is the
 * one written with it, else a foreign holder's record. */
static int lease_to_body(const cJSON *lease, char **body, char **rv, int *foreign, char *err,
                         size_t errlen)
{
    *body = *rv = NULL;
    *foreign = 0;
    const cJSON *meta = obj_item(lease, "metadata");
    const char *version = obj_str(meta, "resourceVersion");
    if (!version || !*version) {
        snprintf(err, errlen, "the Lease has no metadata.resourceVersion");
        return -1;
    }
    const cJSON *ann = obj_item(meta, "annotations");
    const char *rec = obj_str(ann, K8S_ANN_RECORD), *stamp = obj_str(ann, K8S_ANN_STAMP);
    const cJSON *spec = obj_item(lease, "spec");
    const char *holder = obj_str(spec, "holderIdentity");
    const char *renew = obj_str(spec, "renewTime"), *acquire = obj_str(spec, "acquireTime");
    if (!holder)
        holder = "";
    char *want = stamp_of(renew, holder);
    if (!want || !(*rv = u_strdup(version))) {
        free(want);
        snprintf(err, errlen, "out of memory");
        return -2;
    }
    int own = rec && stamp && strcmp(stamp, want) == 0;
    free(want);
    if (own) {
        *body = u_strdup(rec);
        if (!*body) {
            snprintf(err, errlen, "out of memory");
            return -2;
        }
        return 0;
    }
    /* A foreign holder (client-go) wrote the spec last, or nobody wrote a
     * record: a record like Go s3lect's, with the term of a stale record
     * of ours kept so that fencing tokens keep growing. */
    *foreign = 1;
    int64_t term = -1;
    if (rec) {
        cJSON *old = cJSON_Parse(rec);
        term = obj_int(old, "term");
        cJSON_Delete(old);
    }
    int64_t dur = obj_int(spec, "leaseDurationSeconds");
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    if (!*holder) {
        ok = ok && cJSON_AddStringToObject(o, "leaderID", "") &&
             cJSON_AddStringToObject(o, "lastUpdated", "0001-01-01T00:00:00Z");
    } else {
        int64_t ms;
        const char *when = renew && u_parse_rfc3339(renew, &ms) == 0       ? renew
                           : acquire && u_parse_rfc3339(acquire, &ms) == 0 ? acquire
                                                                           : "1970-01-01T00:00:00Z";
        ok = ok && cJSON_AddStringToObject(o, "leaderID", holder) &&
             cJSON_AddStringToObject(o, "lastUpdated", when) &&
             (dur <= 0 || cJSON_AddNumberToObject(o, "leaseMs", (double)(dur * 1000)));
    }
    ok = ok && (term < 0 || cJSON_AddNumberToObject(o, "term", (double)term)) &&
         cJSON_AddStringToObject(o, "k8sHolder", holder);
    *body = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!*body) {
        snprintf(err, errlen, "out of memory");
        return -2;
    }
    return 0;
}

/* RFC 3339 with microseconds, "2026-12-07T01:02:03.123456Z" (what client-go
 * writes); usec adds to the milliseconds' last three digits. */
static void micro_time(int64_t ms, int usec, char *out, size_t n)
{
    char t[40];
    u_format_rfc3339(ms, t, sizeof t); /* "....:03.123Z" */
    size_t l = strlen(t);
    if (l > 1 && t[l - 1] == 'Z')
        t[l - 1] = '\0';
    snprintf(out, n, "%s%03dZ", t, usec % 1000);
}

/* The Lease to write for body: prev (the Lease as read, NULL for a
 * create) with its spec and annotations replaced. */
static cJSON *body_to_lease(const cJSON *prev, const char *ns, const char *name, const char *body,
                            size_t len, int64_t now_ms, int usec, char *err, size_t errlen)
{
    if (memchr(body, '\0', len)) {
        snprintf(err, errlen, "the record has a NUL byte: a Lease annotation holds text only");
        return NULL;
    }
    char *text = malloc(len + 1);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    memcpy(text, body, len);
    text[len] = '\0';
    cJSON *rec = cJSON_ParseWithLength(body, len);
    const char *leader = obj_str(rec, "leaderID"), *lu = obj_str(rec, "lastUpdated");
    int is_record = leader && lu;
    int64_t lu_ms = 0;
    int released =
        is_record && (!*leader || (u_parse_rfc3339(lu, &lu_ms) == 0 && lu_ms < FIRST_MS_OF_YEAR_2));
    const char *holder = is_record && !released ? leader : "";
    int64_t lease = obj_int(rec, "leaseMs"), hold = obj_int(rec, "holdMs");
    int64_t most = lease > hold ? lease : hold;
    const cJSON *pspec = obj_item(prev, "spec");
    const char *prev_holder = obj_str(pspec, "holderIdentity");
    int64_t prev_trans = obj_int(pspec, "leaseTransitions");
    int64_t prev_dur = obj_int(pspec, "leaseDurationSeconds");
    const char *prev_acq = obj_str(pspec, "acquireTime");
    if (!prev_holder)
        prev_holder = "";
    /* client-go's leaseDurationSeconds: whole seconds, rounded up, so that a
     * client-go follower waits at least as long as the lease and the
     * leader's hold; 1 for a released Lease (what client-go's release
     * writes); a scratch object keeps what it had. */
    int64_t dur = released    ? 1
                  : is_record ? (most > 0 ? (most + 999) / 1000 : 1)
                              : (prev_dur > 0 ? prev_dur : 1);
    char renew[48];
    micro_time(now_ms, usec, renew, sizeof renew);
    int changed = strcmp(holder, prev_holder) != 0;
    int64_t trans = prev_trans < 0 ? 0 : prev_trans;
    if (prev && changed && *holder)
        trans++;
    cJSON *lease_obj = prev ? cJSON_Duplicate(prev, 1) : cJSON_CreateObject();
    char *stamp = stamp_of(renew, holder);
    int ok = lease_obj && stamp;
    cJSON *meta = NULL, *ann = NULL, *spec = NULL;
    if (ok && !prev)
        ok = cJSON_AddStringToObject(lease_obj, "apiVersion", "coordination.k8s.io/v1") &&
             cJSON_AddStringToObject(lease_obj, "kind", "Lease") &&
             (meta = cJSON_AddObjectToObject(lease_obj, "metadata")) &&
             cJSON_AddStringToObject(meta, "name", name) &&
             cJSON_AddStringToObject(meta, "namespace", ns);
    if (ok && prev) {
        meta = cJSON_GetObjectItemCaseSensitive(lease_obj, "metadata");
        ok = cJSON_IsObject(meta);
        if (ok)
            cJSON_DeleteItemFromObjectCaseSensitive(meta, "managedFields");
    }
    if (ok) {
        ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
        if (!cJSON_IsObject(ann)) {
            cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
            ann = cJSON_AddObjectToObject(meta, "annotations");
        }
        ok = ann != NULL;
    }
    if (ok) {
        cJSON_DeleteItemFromObjectCaseSensitive(ann, K8S_ANN_RECORD);
        cJSON_DeleteItemFromObjectCaseSensitive(ann, K8S_ANN_STAMP);
        ok = cJSON_AddStringToObject(ann, K8S_ANN_RECORD, text) &&
             cJSON_AddStringToObject(ann, K8S_ANN_STAMP, stamp);
    }
    if (ok) {
        spec = cJSON_GetObjectItemCaseSensitive(lease_obj, "spec");
        if (!cJSON_IsObject(spec)) {
            cJSON_DeleteItemFromObjectCaseSensitive(lease_obj, "spec");
            spec = cJSON_AddObjectToObject(lease_obj, "spec");
        }
        ok = spec != NULL;
    }
    if (ok) {
        static const char *const fields[] = {"holderIdentity", "leaseDurationSeconds",
                                             "acquireTime", "renewTime", "leaseTransitions"};
        for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
            cJSON_DeleteItemFromObjectCaseSensitive(spec, fields[i]);
        const char *acq = (!changed && prev_acq) ? prev_acq : renew;
        ok = cJSON_AddStringToObject(spec, "holderIdentity", holder) &&
             cJSON_AddNumberToObject(spec, "leaseDurationSeconds", (double)dur) &&
             cJSON_AddStringToObject(spec, "acquireTime", acq) &&
             cJSON_AddStringToObject(spec, "renewTime", renew) &&
             cJSON_AddNumberToObject(spec, "leaseTransitions", (double)trans);
    }
    free(stamp);
    free(text);
    cJSON_Delete(rec);
    if (!ok) {
        cJSON_Delete(lease_obj);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return lease_obj;
}

int st_k8s_lease_read(const char *lease_json, size_t len, char **body, char **rv, int *foreign,
                      char *err, size_t errlen)
{
    cJSON *j = cJSON_ParseWithLength(lease_json, len);
    if (!j) {
        *body = *rv = NULL;
        snprintf(err, errlen, "not JSON");
        return -1;
    }
    int rc = lease_to_body(j, body, rv, foreign, err, errlen);
    cJSON_Delete(j);
    return rc;
}

char *st_k8s_lease_write(const char *prev_json, const char *ns, const char *name, const char *body,
                         size_t len, int64_t now_ms, char *err, size_t errlen)
{
    cJSON *prev = prev_json ? cJSON_Parse(prev_json) : NULL;
    if (prev_json && !prev) {
        snprintf(err, errlen, "prev is not JSON");
        return NULL;
    }
    cJSON *o = body_to_lease(prev, ns, name, body, len, now_ms, 0, err, errlen);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    cJSON_Delete(prev);
    return s;
}

/* ---- the last Lease seen, per name ---- */

static lease_slot *slot_find(k8s_store *s, const char *name)
{
    for (size_t i = 0; i < K8S_CACHE; i++)
        if (s->cache[i].name && strcmp(s->cache[i].name, name) == 0)
            return &s->cache[i];
    return NULL;
}

static void slot_clear(lease_slot *l)
{
    free(l->name);
    free(l->rv);
    cJSON_Delete(l->obj);
    memset(l, 0, sizeof *l);
}

/* Keeps obj (taken) as name's Lease at version rv. */
static void slot_put(k8s_store *s, const char *name, const char *rv, cJSON *obj)
{
    lease_slot *l = slot_find(s, name);
    if (!l) {
        l = &s->cache[0];
        for (size_t i = 1; i < K8S_CACHE; i++)
            if (s->cache[i].used < l->used)
                l = &s->cache[i];
    }
    slot_clear(l);
    l->name = u_strdup(name);
    l->rv = u_strdup(rv);
    l->obj = obj;
    l->used = ++s->tick;
    if (!l->name || !l->rv)
        slot_clear(l);
}

/* ---- requests ---- */

typedef struct k8s_resp {
    long status;
    http_body data;
    char errbuf[CURL_ERROR_SIZE];
} k8s_resp;

/* The credentials of the next request: a token (allocated, NULL: none) and
 * a certificate from an exec plugin (*hold: the cache's value they point
 * into; wipe and free it). -1 with out set. */
static int take_creds(k8s_store *s, int reread, char **token, char **hold, char **cert, char **key,
                      st_result *out)
{
    *token = *hold = *cert = *key = NULL;
    char err[600];
    if (s->t.auth == KUBE_AUTH_TOKEN_FILE) {
        int64_t now = u_mono_ms();
        if (reread || !s->file_token || now - s->file_token_at >= K8S_TOKEN_REREAD_MS) {
            char *tok = NULL;
            int rc = kube_read_token_file(s->t.token_file, &tok, err, sizeof err);
            if (rc == 0) {
                u_wipe_free(s->file_token);
                s->file_token = tok;
                s->file_token_at = now;
            } else if (!s->file_token) {
                st_result_setf(out, rc == S3LECT_ENOMEM ? ST_TRANSIENT : ST_AUTH,
                               "%s (%s); will retry", err, s->t.source);
                return -1;
            } else {
                /* keep the token read last; try the file again soon */
                s->file_token_at = now - K8S_TOKEN_REREAD_MS + 5000;
                if (!out->warning)
                    out->warning = u_asprintf("%s; the token read before is still used", err);
            }
        }
        *token = u_strdup(s->file_token);
    } else if (s->t.auth == KUBE_AUTH_TOKEN) {
        *token = u_strdup(s->t.token);
    } else if (s->t.auth == KUBE_AUTH_EXEC) {
        char *b;
        if (st_bearer_take(&s->bearer, &b, out) != 0)
            return -1;
        char *tk, *c, *k;
        kube_bearer_split(b, &tk, &c, &k);
        *hold = b;
        *cert = c;
        *key = k;
        if (tk && !(*token = u_strdup(tk))) {
            u_wipe_free(b);
            *hold = NULL;
            st_result_setf(out, ST_TRANSIENT, "out of memory");
            return -1;
        }
        return 0;
    } else if (s->t.token) {
        *token = u_strdup(s->t.token); /* a certificate with a token */
    }
    if ((s->t.auth == KUBE_AUTH_TOKEN || s->t.auth == KUBE_AUTH_TOKEN_FILE) && !*token) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return -1;
    }
    return 0;
}

static void set_blob(CURL *e, CURLoption opt, const char *pem, size_t len)
{
    struct curl_blob b = {.data = (void *)pem, .len = len, .flags = CURL_BLOB_COPY};
    curl_easy_setopt(e, opt, &b);
}

/* One exchange on the store's handle; the caller judges the status.
 * -1 with out set when no request could be made. */
static int exchange(k8s_store *s, const char *method, const char *url, const char *body,
                    int64_t timeout_ms, int reread, k8s_resp *r, st_result *out)
{
    CURL *e = st_easy(&s->base, out);
    if (!e)
        return -1;
    char *token, *hold, *cert, *key;
    if (take_creds(s, reread, &token, &hold, &cert, &key, out) != 0)
        return -1;
    struct curl_slist *hl = NULL;
    int oom = 0;
    http_header_add(&hl, &oom, "Expect", NULL);
    http_header_add(&hl, &oom, "Accept", "application/json");
    if (body)
        http_header_add(&hl, &oom, "Content-Type", "application/json");
    if (token) {
        char *auth = u_asprintf("Bearer %s", token);
        if (auth)
            http_header_add(&hl, &oom, "Authorization", auth);
        else
            oom = 1;
        u_wipe_free(auth);
    }
    u_wipe_free(token);
    if (oom) {
        http_headers_free(hl);
        u_wipe_free(hold);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return -1;
    }
    memset(r, 0, sizeof *r);
    r->data.max = K8S_MAX_BODY;
    curl_easy_reset(e);
    http_easy_common(e, url, (long)timeout_ms, (long)timeout_ms, r->errbuf, &r->data);
    http_easy_request(e, hl, NULL, NULL, method, body, body ? strlen(body) : 0);
    if (s->t.insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (s->t.ca_pem) {
        set_blob(e, CURLOPT_CAINFO_BLOB, s->t.ca_pem, s->t.ca_pem_len);
    } else {
        http_set_ca(e, s->t.ca_file ? s->t.ca_file : s->ca_file);
    }
    if (s->connect_to) {
        struct curl_slist one = {.data = s->connect_to, .next = NULL};
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, &one);
    }
    if (cert && key) {
        set_blob(e, CURLOPT_SSLCERT_BLOB, cert, strlen(cert));
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        set_blob(e, CURLOPT_SSLKEY_BLOB, key, strlen(key));
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (s->t.cert_pem) {
        set_blob(e, CURLOPT_SSLCERT_BLOB, s->t.cert_pem, s->t.cert_pem_len);
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        set_blob(e, CURLOPT_SSLKEY_BLOB, s->t.key_pem, s->t.key_pem_len);
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (s->t.cert_file) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, s->t.cert_file);
        curl_easy_setopt(e, CURLOPT_SSLKEY, s->t.key_file);
    }
    CURLcode cc = curl_easy_perform(e);
    u_wipe_free(hold);
    r->status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
    /* the copied key and certificate blobs go with the next reset */
    curl_easy_setopt(e, CURLOPT_CONNECT_TO, NULL);
    http_headers_free(hl);
    if (http_transport_failed(cc, &r->data)) {
        char what[700];
        snprintf(what, sizeof what, "%s k8s://%s", method, s->ns);
        st_transport_failure(cc, r->errbuf, what, s->t.server, timeout_ms, out);
        if (out->outcome == ST_FATAL)
            st_result_setf(out, ST_FATAL,
                           "%s: cannot talk to the API server %s (%s): check the server and its CA "
                           "(%s)",
                           what, s->t.server, r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc),
                           s->t.source);
        http_body_clear(&r->data);
        return -1;
    }
    out->http_status = (int)r->status;
    return 0;
}

/* One request, once more after a 401 when the token comes from a file
 * (it may have rotated) or the exec plugin (asked to run again). */
static int request(k8s_store *s, const char *method, const char *url, const char *body,
                   int64_t timeout_ms, k8s_resp *r, st_result *out)
{
    int64_t deadline = u_mono_ms() + timeout_ms;
    if (exchange(s, method, url, body, timeout_ms, 0, r, out) != 0)
        return -1;
    if (r->status == 401 && s->t.auth == KUBE_AUTH_TOKEN_FILE) {
        int64_t left = deadline - u_mono_ms();
        if (left > 0) {
            http_body_clear(&r->data);
            return exchange(s, method, url, body, left, 1, r, out);
        }
    }
    if (r->status == 401 && s->t.auth == KUBE_AUTH_EXEC)
        st_bearer_refused(&s->bearer);
    return 0;
}

/* The Status body's reason, message and details.kind. */
static void status_of(const http_body *b, char *reason, size_t rn, char *msg, size_t mn, char *kind,
                      size_t kn)
{
    reason[0] = msg[0] = kind[0] = '\0';
    cJSON *j = b->body ? cJSON_ParseWithLength(b->body, b->len) : NULL;
    const char *rs = obj_str(j, "reason"), *ms = obj_str(j, "message");
    const char *ks = obj_str(obj_item(j, "details"), "kind");
    snprintf(reason, rn, "%s", rs ? rs : "");
    snprintf(msg, mn, "%s", ms ? ms : "");
    snprintf(kind, kn, "%s", ks ? ks : "");
    cJSON_Delete(j);
}

int st_k8s_outcome(long status, const char *reason, const char *kind, const char *verb)
{
    if (status == 401 || status == 403)
        return ST_AUTH;
    if (status == 404)
        return strcmp(kind, "namespaces") == 0 ? ST_FATAL
               : strcmp(verb, "update") == 0   ? ST_PRECONDITION /* deleted: another writer */
               : strcmp(verb, "get") == 0      ? ST_NOT_FOUND
                                               : ST_FATAL;
    if (status == 409 && (strcmp(reason, "AlreadyExists") == 0 || strcmp(reason, "Conflict") == 0))
        return ST_PRECONDITION;
    if (status == 408 || status == 429 || status >= 500 || status == 409)
        return ST_TRANSIENT;
    return ST_FATAL;
}

/* An error answer: the outcome (st_k8s_outcome) and a message. verb: the
 * RBAC verb of the request (get, create, update). */
static void failure(k8s_store *s, const char *verb, const char *name, const k8s_resp *r,
                    st_result *out)
{
    char reason[64], msg[400], kind[64], detail[520];
    status_of(&r->data, reason, sizeof reason, msg, sizeof msg, kind, sizeof kind);
    st_http_detail(&r->data, r->status, msg[0] ? msg : NULL, detail, sizeof detail);
    long st = r->status;
    int outcome = st_k8s_outcome(st, reason, kind, verb);
    if (st == 401) {
        st_result_setf(out, outcome,
                       "%s k8s://%s/%s: the API server refused the credentials (%s; %s): %s; "
                       "will retry",
                       verb, s->ns, name, s->t.source, s->t.auth_desc, detail);
    } else if (st == 403) {
        st_result_setf(out, outcome,
                       "%s k8s://%s/%s refused (%s): grant verb %s on leases "
                       "(coordination.k8s.io) in namespace %s to %s (%s)",
                       verb, s->ns, name, detail, verb, s->ns, s->t.user, K8S_DOC);
    } else if (st == 404) {
        if (strcmp(kind, "namespaces") == 0)
            st_result_setf(out, outcome,
                           "namespace '%s' does not exist at %s (%s): create it or fix the lock "
                           "URL",
                           s->ns, s->t.server, detail);
        else if (strcmp(verb, "update") == 0)
            st_result_setf(out, outcome, "k8s://%s/%s was deleted: another writer won (%s)", s->ns,
                           name, detail);
        else if (strcmp(verb, "get") == 0)
            st_result_setf(out, outcome, "k8s://%s/%s does not exist", s->ns, name);
        else
            st_result_setf(out, outcome,
                           "%s k8s://%s/%s: %s answered 404 (%s): is this a Kubernetes API "
                           "server with coordination.k8s.io/v1?",
                           verb, s->ns, name, s->t.server, detail);
    } else if (st == 409 &&
               (strcmp(reason, "AlreadyExists") == 0 || strcmp(reason, "Conflict") == 0)) {
        st_result_setf(out, outcome, "k8s://%s/%s %s: another writer won (%s)", s->ns, name,
                       strcmp(reason, "AlreadyExists") == 0 ? "already exists"
                                                            : "changed since it was read",
                       detail);
    } else if (st == 408 || st == 429 || st >= 500 || st == 409) {
        st_result_setf(out, outcome, "%s k8s://%s/%s: temporary failure at %s (%s); will retry",
                       verb, s->ns, name, s->t.server, detail);
    } else {
        st_result_setf(out, outcome, "%s k8s://%s/%s failed at %s (%s)", verb, s->ns, name,
                       s->t.server, detail);
    }
}

/* DNS-1123 subdomain: what a Lease's name must be. */
static int dns_subdomain(const char *n)
{
    size_t l = strlen(n);
    if (l == 0 || l > 253)
        return 0;
    for (size_t i = 0; i < l; i++) {
        char c = n[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && c != '.')
            return 0;
        if (!alnum && (i == 0 || i == l - 1 || n[i - 1] == '.' || (c == '.' && n[i - 1] == '-')))
            return 0;
    }
    return 1;
}

/* GET name: *obj (the Lease) when 200, else out set (NOT_FOUND on 404). */
static int fetch_lease(k8s_store *s, const char *name, int64_t timeout_ms, cJSON **obj,
                       st_result *out)
{
    *obj = NULL;
    char *url = u_asprintf("%s/%s", s->url_base, name);
    if (!url) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return -1;
    }
    k8s_resp r;
    int rc = request(s, "GET", url, NULL, timeout_ms, &r, out);
    free(url);
    if (rc)
        return -1;
    if (r.status != 200) {
        failure(s, "get", name, &r, out);
        http_body_clear(&r.data);
        return -1;
    }
    *obj = r.data.body ? cJSON_ParseWithLength(r.data.body, r.data.len) : NULL;
    http_body_clear(&r.data);
    if (!*obj || !cJSON_IsObject(*obj)) {
        cJSON_Delete(*obj);
        *obj = NULL;
        st_result_setf(out, ST_TRANSIENT,
                       "GET k8s://%s/%s: the answer of %s is not a JSON object; will retry", s->ns,
                       name, s->t.server);
        return -1;
    }
    return 0;
}

static void k8s_get(st_store *st, const char *key, int64_t timeout_ms, st_result *out)
{
    k8s_store *s = (k8s_store *)st;
    memset(out, 0, sizeof *out);
    if (!key || !dns_subdomain(key)) {
        st_result_setf(out, ST_FATAL,
                       "'%.260s' is not a Lease name (lower-case letters, digits, '-' and '.', "
                       "at most 253)",
                       key ? key : "");
        return;
    }
    if (timeout_ms <= 0)
        timeout_ms = s->default_timeout_ms;
    cJSON *obj;
    if (fetch_lease(s, key, timeout_ms, &obj, out) != 0)
        return;
    char *body, *rv, err[200];
    int foreign;
    int rc = lease_to_body(obj, &body, &rv, &foreign, err, sizeof err);
    if (rc) {
        cJSON_Delete(obj);
        st_result_setf(out, rc == -2 ? ST_TRANSIENT : ST_FATAL, "GET k8s://%s/%s: %s", s->ns, key,
                       err);
        return;
    }
    slot_put(s, key, rv, obj);
    size_t bl = strlen(body);
    if (st_result_set_etag(out, rv) != 0 ||
        st_result_set_body(out, body, bl > ST_MAX_OBJECT ? ST_MAX_OBJECT + 1 : bl) != 0)
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    else
        out->outcome = ST_OK;
    free(body);
    free(rv);
}

static void k8s_put(st_store *st, const char *key, const void *data, size_t len,
                    const char *if_match, int64_t timeout_ms, st_result *out)
{
    k8s_store *s = (k8s_store *)st;
    memset(out, 0, sizeof *out);
    if (!key || !dns_subdomain(key)) {
        st_result_setf(out, ST_FATAL,
                       "'%.260s' is not a Lease name (lower-case letters, digits, '-' and '.', "
                       "at most 253)",
                       key ? key : "");
        return;
    }
    if (timeout_ms <= 0)
        timeout_ms = s->default_timeout_ms;
    int64_t deadline = u_mono_ms() + timeout_ms;
    const cJSON *prev = NULL;
    if (if_match) {
        lease_slot *l = slot_find(s, key);
        if (!l || !l->obj || strcmp(l->rv, if_match) != 0) {
            /* Not read at that version by this store: read it (a PUT must
             * carry the whole object). */
            cJSON *obj;
            if (fetch_lease(s, key, timeout_ms, &obj, out) != 0) {
                if (out->outcome == ST_NOT_FOUND)
                    st_result_setf(out, ST_PRECONDITION,
                                   "k8s://%s/%s does not exist: version %.40s is gone", s->ns, key,
                                   if_match);
                return;
            }
            const char *rv = obj_str(obj_item(obj, "metadata"), "resourceVersion");
            if (!rv || strcmp(rv, if_match) != 0) {
                st_result_setf(out, ST_PRECONDITION,
                               "k8s://%s/%s changed since version %.40s: another writer won", s->ns,
                               key, if_match);
                if (rv)
                    slot_put(s, key, rv, obj);
                else
                    cJSON_Delete(obj);
                return;
            }
            slot_put(s, key, rv, obj);
            l = slot_find(s, key);
            if (!l) {
                st_result_setf(out, ST_TRANSIENT, "out of memory");
                return;
            }
        }
        prev = l->obj;
    }
    char err[300];
    int usec = (int)(u_rng_next(&s->rng) % 1000);
    cJSON *lease = body_to_lease(prev, s->ns, key, data ? data : "", data ? len : 0, u_wall_ms(),
                                 usec, err, sizeof err);
    if (!lease) {
        st_result_setf(out, strstr(err, "memory") ? ST_TRANSIENT : ST_FATAL, "k8s://%s/%s: %s",
                       s->ns, key, err);
        return;
    }
    if (if_match) {
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(lease, "metadata");
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
        if (!cJSON_AddStringToObject(meta, "resourceVersion", if_match)) {
            cJSON_Delete(lease);
            st_result_setf(out, ST_TRANSIENT, "out of memory");
            return;
        }
    }
    char *json = cJSON_PrintUnformatted(lease);
    cJSON_Delete(lease);
    char *url = if_match ? u_asprintf("%s/%s", s->url_base, key) : u_strdup(s->url_base);
    if (!json || !url) {
        free(json);
        free(url);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return;
    }
    int64_t left = deadline - u_mono_ms();
    k8s_resp r;
    int rc = request(s, if_match ? "PUT" : "POST", url, json, left > 0 ? left : 1, &r, out);
    free(url);
    free(json);
    if (rc)
        return;
    if (r.status != 200 && r.status != 201) {
        failure(s, if_match ? "update" : "create", key, &r, out);
        http_body_clear(&r.data);
        return;
    }
    cJSON *obj = r.data.body ? cJSON_ParseWithLength(r.data.body, r.data.len) : NULL;
    http_body_clear(&r.data);
    const char *rv = obj_str(obj_item(obj, "metadata"), "resourceVersion");
    if (!rv || !*rv) {
        cJSON_Delete(obj);
        st_result_setf(out, ST_TRANSIENT,
                       "%s k8s://%s/%s: the answer has no resourceVersion; whether it landed is "
                       "unknown: will read back",
                       if_match ? "PUT" : "POST", s->ns, key);
        return;
    }
    if (st_result_set_etag(out, rv) != 0) {
        cJSON_Delete(obj);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return;
    }
    out->outcome = ST_OK;
    char *rvc = u_strdup(rv);
    if (rvc)
        slot_put(s, key, rvc, obj);
    else
        cJSON_Delete(obj);
    free(rvc);
}

static const char *k8s_pool(const st_store *st)
{
    return ((const k8s_store *)st)->t.server;
}

static void k8s_destroy(st_store *st)
{
    k8s_store *s = (k8s_store *)st;
    if (!s)
        return;
    for (size_t i = 0; i < K8S_CACHE; i++)
        slot_clear(&s->cache[i]);
    st_bearer_clear(&s->bearer);
    kube_target_clear(&s->t);
    u_wipe_free(s->file_token);
    free(s->ns);
    free(s->url_base);
    free(s->connect_to);
    free(s->ca_file);
    free(s);
}

static const st_vtable k8s_vtable = {
    .name = "k8s", .get = k8s_get, .put = k8s_put, .destroy = k8s_destroy, .pool = k8s_pool};

/* tls-server-name: the URL names it and CONNECT_TO sends the connection
 * to the server's own host (certificate checked against the name). */
static int tls_name_route(k8s_store *s, char *err, size_t errlen)
{
    st_endpoint ep;
    int rc = st_endpoint_parse(s->t.server, "the kubeconfig's cluster server", &ep, err, errlen);
    if (rc)
        return rc;
    const char *a = ep.authority;
    const char *close = a[0] == '[' ? strchr(a, ']') : NULL;
    const char *colon = strrchr(close ? close : a, ':');
    const char *port = colon ? colon + 1 : (ep.https ? "443" : "80");
    int v6 = strchr(ep.host, ':') != NULL;
    s->connect_to = u_asprintf("%s:%s:%s%s%s:%s", s->t.tls_server_name, port, v6 ? "[" : "",
                               ep.host, v6 ? "]" : "", port);
    char *server = u_asprintf("%s://%s:%s%s", ep.https ? "https" : "http", s->t.tls_server_name,
                              port, ep.base_path);
    st_endpoint_clear(&ep);
    if (!s->connect_to || !server) {
        free(server);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    free(s->t.server);
    s->t.server = server;
    return 0;
}

int st_k8s_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
                size_t errlen)
{
    *out = NULL;
    int rc = http_global_init(err, errlen);
    if (rc)
        return rc;
    k8s_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &k8s_vtable;
    s->default_timeout_ms =
        cfg->request_timeout > 0 ? cfg->request_timeout : K8S_DEFAULT_TIMEOUT_MS;
    u_rng_seed(&s->rng, (uint64_t)u_wall_ms() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)s);
    if (!(s->ns = u_strdup(loc->bucket)) ||
        (cfg->ca_file && !(s->ca_file = u_strdup(cfg->ca_file)))) {
        k8s_destroy(&s->base);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    rc = kube_resolve(loc->opt1, loc->opt2, &s->t, err, errlen);
    if (!rc && s->t.tls_server_name)
        rc = tls_name_route(s, err, errlen);
    if (!rc &&
        !(s->url_base = u_asprintf("%s" K8S_API "/namespaces/%s/leases", s->t.server, s->ns))) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    }
    if (!rc && s->t.auth == KUBE_AUTH_EXEC)
        rc = kube_exec_open(&s->t, 0, &s->bearer.chain, err, errlen); /* run it now */
    if (rc) {
        k8s_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

int st_k8s_whoami(const st_location *loc, int fetch, char *source, size_t sn, char *principal,
                  size_t pn, int64_t *expires_ms, char *err, size_t errlen)
{
    *expires_ms = 0;
    kube_target t;
    int rc = kube_resolve(loc->opt1, loc->opt2, &t, err, errlen);
    if (rc)
        return rc;
    snprintf(source, sn, "%s: %s", t.source, t.auth_desc);
    snprintf(principal, pn, "%s", t.user ? t.user : "");
    if (fetch && t.auth == KUBE_AUTH_TOKEN_FILE) {
        char *tok = NULL;
        rc = kube_read_token_file(t.token_file, &tok, err, errlen);
        u_wipe_free(tok);
    } else if (fetch && t.auth == KUBE_AUTH_EXEC) {
        cred_cache *c = NULL;
        rc = kube_exec_open(&t, 0, &c, err, errlen);
        if (!rc) {
            cred_cache_info in;
            cred_cache_describe(c, &in);
            *expires_ms = in.expires_ms;
            char *b = NULL;
            rc = cred_cache_bearer(c, &b, NULL, err, errlen);
            if (!rc) {
                char *tk, *ce, *k;
                kube_bearer_split(b, &tk, &ce, &k);
                size_t l = strlen(source);
                snprintf(source + l, sn - l, " (it handed out %s)",
                         ce ? (tk ? "a client certificate and a token" : "a client certificate")
                            : "a token");
            }
            u_wipe_free(b);
            cred_cache_release(c);
        }
    } else if (fetch && (t.cert_file || t.key_file)) {
        if (!t.cert_file || !t.key_file || access(t.cert_file, R_OK) != 0 ||
            access(t.key_file, R_OK) != 0) {
            snprintf(err, errlen, "cannot read the client certificate %.300s or its key %.300s",
                     t.cert_file ? t.cert_file : "(none given)",
                     t.key_file ? t.key_file : "(none given)");
            rc = S3LECT_EAUTH;
        }
    }
    kube_target_clear(&t);
    return rc;
}

/* ---- the lock URL ---- */

static int usage(const char *url, const char *what, char *err, size_t errlen)
{
    char *shown = st_lock_display(url);
    for (unsigned char *p = (unsigned char *)shown; p && *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
    snprintf(err, errlen,
             "lock URL '%.200s': %s; write k8s://NAMESPACE/NAME[?context=CTX&kubeconfig=PATH] "
             "(" K8S_DOC ")",
             shown ? shown : "", what);
    free(shown);
    return S3LECT_EINVAL;
}

int st_k8s_parse(const char *url, const char *rest, st_location *out, char *err, size_t errlen)
{
    if (strchr(url, '#'))
        return usage(url, "lock URLs take no fragment ('#')", err, errlen);
    size_t nl = strcspn(rest, "/?");
    if (rest[nl] != '/')
        return usage(url, "it needs a namespace and a Lease name", err, errlen);
    const char *name = rest + nl + 1;
    size_t ml = strcspn(name, "?");
    char nsbuf[80];
    if (nl == 0)
        return usage(url, "the namespace is empty", err, errlen);
    if (nl > 63)
        return usage(url, "the namespace is longer than 63 characters", err, errlen);
    memcpy(nsbuf, rest, nl);
    nsbuf[nl] = '\0';
    if (!dns_subdomain(nsbuf) || strchr(nsbuf, '.'))
        return usage(url,
                     "the namespace is not a DNS-1123 label (lower-case letters, digits and '-', "
                     "starting and ending with a letter or digit)",
                     err, errlen);
    if (ml == 0)
        return usage(url, "the Lease name is empty", err, errlen);
    if (memchr(name, '/', ml))
        return usage(url, "the Lease name has a '/': k8s://NAMESPACE/NAME has exactly two parts",
                     err, errlen);
    if (ml > 253)
        return usage(url, "the Lease name is longer than 253 characters", err, errlen);
    out->bucket = u_strdup(nsbuf);
    out->key = u_asprintf("%.*s", (int)ml, name);
    if (!out->bucket || !out->key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (!dns_subdomain(out->key))
        return usage(url,
                     "the Lease name is not a DNS-1123 subdomain (lower-case letters, digits, '-' "
                     "and '.', starting and ending with a letter or digit)",
                     err, errlen);
    if (name[ml] == '?') {
        const st_qparam qp[] = {{"context", &out->opt1}, {"kubeconfig", &out->opt2}};
        int rc = st_parse_query(url, "k8s://NAMESPACE/NAME?context=CTX&kubeconfig=PATH",
                                name + ml + 1, qp, 2, NULL, err, errlen);
        if (rc)
            return rc;
        if ((out->opt1 && st_find_control(out->opt1)) || (out->opt2 && st_find_control(out->opt2)))
            return usage(url, "a parameter has a control character", err, errlen);
    }
    return 0;
}

int st_k8s_canonical(const st_location *loc, char **out)
{
    if (st_canon_add(out, "k8s://", loc->bucket, 0) || st_canon_add(out, "/", loc->key, 0))
        return -1;
    const char *sep = "?";
    if (loc->opt1) {
        if (st_canon_add(out, "?context=", loc->opt1, 1))
            return -1;
        sep = "&";
    }
    if (loc->opt2 &&
        st_canon_add(out, sep[0] == '?' ? "?kubeconfig=" : "&kubeconfig=", loc->opt2, 1))
        return -1;
    return 0;
}

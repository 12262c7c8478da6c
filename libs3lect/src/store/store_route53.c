/* SPDX-License-Identifier: Apache-2.0 */
/* store_route53.c - the Route 53 store (docs/stores.md): the lock is a TXT
 * record set in a hosted zone.
 *
 *   read    ListResourceRecordSets from the record's name, type TXT, one set
 *   create  ChangeResourceRecordSets [CREATE]: fails if the name has a TXT set
 *   write   ChangeResourceRecordSets [DELETE the exact old set, CREATE the
 *           new one]: one batch, applied atomically or not at all; it fails
 *           when the old value is gone (another writer won)
 *
 * The record (JSON) is base64-encoded and split into quoted strings of at
 * most 255 characters (TXT's limit), so no escaping is ever needed. The
 * etag is "TTL|value" exactly as read: a DELETE must name both.
 *
 * Reads are eventually consistent: a follower may see an old value for a
 * while. That only delays takeovers (its timer starts when it sees a change,
 * and a write over a stale value is refused by the batch); it never gives
 * two leaders. docs/stores.md gives the lease it needs.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aws_http.h"
#include "cred_parse.h"
#include "store.h"
#include "util.h"

#define R53_DEFAULT_TIMEOUT_MS 10000
#define R53_TTL 60
#define R53_API "/2013-04-01"

typedef struct r53_store {
    st_store base;
    ah_service v; /* endpoint, region, credentials, the blocking calls' handle */
    char *zone;
} r53_store;

struct st_xfer {
    int put;
    char *key;
    char *if_match;
    char *new_etag; /* PUT */
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
    free(x->new_etag);
    free(x);
}

/* ---- values ---- */

/* The TXT value for data: "chunk" "chunk" ... of base64, 255 per string. */
static char *encode_value(const void *data, size_t len)
{
    char *b64 = u_base64_dup(data, len, 0);
    if (!b64)
        return NULL;
    size_t b64len = strlen(b64);
    size_t chunks = b64len ? (b64len + 254) / 255 : 1;
    char *out = malloc(b64len + chunks * 3 + 1), *o = out;
    if (out) {
        for (size_t i = 0; i < chunks; i++) {
            size_t n = b64len - i * 255 < 255 ? b64len - i * 255 : 255;
            if (i)
                *o++ = ' ';
            *o++ = '"';
            memcpy(o, b64 + i * 255, n);
            o += n;
            *o++ = '"';
        }
        *o = '\0';
    }
    free(b64);
    return out;
}

/* Decodes a value made by encode_value into out (allocated, NUL-ended).
 * Returns the length, or -1 when the value is not one of ours. */
static long decode_value(const char *v, char **out)
{
    size_t n = strlen(v);
    char *b64 = malloc(n + 1), *b = b64;
    *out = NULL;
    if (!b64)
        return -1;
    /* Strings: "..." separated by spaces; no escapes in ours. */
    for (const char *p = v; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        const char *close = *p == '"' ? strchr(p + 1, '"') : NULL;
        if (!close) {
            free(b64);
            return -1;
        }
        memcpy(b, p + 1, (size_t)(close - p - 1));
        b += close - p - 1;
        p = close + 1;
    }
    size_t bl = (size_t)(b - b64);
    char *dec = malloc(U_UNBASE64_MAX(bl) + 1);
    long len = dec ? u_unbase64(b64, bl, U_B64_STRICT, (uint8_t *)dec) : -1;
    free(b64);
    if (len < 0) {
        free(dec);
        return -1;
    }
    dec[len] = '\0';
    *out = dec;
    return len;
}

/* ---- XML ---- */

/* XML-escapes s (for element content). */
static char *xml_escape(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p; p++)
        n += *p == '&' ? 5 : *p == '<' || *p == '>' ? 4 : *p == '"' ? 6 : 1;
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = s; *p; p++) {
        const char *e = *p == '&'   ? "&amp;"
                        : *p == '<' ? "&lt;"
                        : *p == '>' ? "&gt;"
                        : *p == '"' ? "&quot;"
                                    : NULL;
        if (e) {
            memcpy(o, e, strlen(e));
            o += strlen(e);
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

/* ---- requests ---- */

static st_xfer *r53_start(r53_store *s, void *easy, int put, const char *key, char *body,
                          const char *if_match, int64_t timeout_ms, st_result *out)
{
    st_xfer *x = calloc(1, sizeof *x);
    if (!x || (put && !body) || !(x->key = u_strdup(key)) ||
        (if_match && !(x->if_match = u_strdup(if_match)))) {
        xfer_free(x);
        free(body);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    x->put = put;
    x->timeout_ms = timeout_ms > 0 ? timeout_ms : s->v.default_timeout_ms;
    if (ah_signer_creds(&s->v.signer, out) != 0) {
        free(body);
        xfer_free(x);
        return NULL;
    }
    char *path =
        u_asprintf("%s" R53_API "/hostedzone/%s/rrset%s", s->v.base_path, s->zone, put ? "/" : "");
    char *ename = put ? NULL : sigv4_uri_encode(key, strlen(key), 0);
    char *query = put ? NULL : ename ? u_asprintf("maxitems=1&name=%s&type=TXT", ename) : NULL;
    free(ename);
    if (!path || (!put && !query)) {
        free(path);
        free(query);
        free(body);
        xfer_free(x);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    sigv4_header h[] = {{"Content-Type", "text/xml"}};
    ah_request rq = {.method = put ? "POST" : "GET",
                     .origin = s->v.origin,
                     .host = s->v.host,
                     .path = path,
                     .query = query,
                     .service = "route53",
                     .region = s->v.region,
                     .headers = h,
                     .nheaders = put ? 1 : 0,
                     .body = body,
                     .body_len = body ? strlen(body) : 0,
                     .timeout_ms = x->timeout_ms,
                     .ca_file = s->v.ca_file};
    int rc = ah_call_prepare(&x->call, easy, &s->v.signer, &rq, out);
    free(path);
    free(query);
    free(body);
    if (rc != 0) {
        xfer_free(x);
        return NULL;
    }
    return x;
}

static char *change(const char *action, const char *name, long ttl, const char *value)
{
    char *ev = xml_escape(value);
    char *out = ev ? u_asprintf("<Change><Action>%s</Action><ResourceRecordSet><Name>%s</Name>"
                                "<Type>TXT</Type><TTL>%ld</TTL><ResourceRecords><ResourceRecord>"
                                "<Value>%s</Value></ResourceRecord></ResourceRecords>"
                                "</ResourceRecordSet></Change>",
                                action, name, ttl, ev)
                   : NULL;
    free(ev);
    return out;
}

static st_xfer *r53_begin(st_store *st, void *easy, const char *key, int put, const void *data,
                          size_t len, const char *if_match, int64_t timeout_ms, st_result *out)
{
    r53_store *s = (r53_store *)st;
    memset(out, 0, sizeof *out);
    if (!key || !*key) {
        st_result_setf(out, ST_FATAL, "empty Route 53 record name: use route53://%s/NAME", s->zone);
        return NULL;
    }
    if (!put)
        return r53_start(s, easy, 0, key, NULL, NULL, timeout_ms, out);
    long old_ttl = 0;
    const char *old_value = NULL;
    if (if_match) {
        char *bar;
        old_ttl = strtol(if_match, &bar, 10);
        if (*bar != '|' || old_ttl < 0) {
            st_result_setf(out, ST_PRECONDITION,
                           "route53: etag '%.40s' is not one this store made: read again",
                           if_match);
            return NULL;
        }
        old_value = bar + 1;
    }
    char *value = encode_value(data ? data : "", len);
    char *del = value && if_match ? change("DELETE", key, old_ttl, old_value) : NULL;
    char *cre = value ? change("CREATE", key, R53_TTL, value) : NULL;
    char *body = cre && (del || !if_match)
                     ? u_asprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                                  "<ChangeResourceRecordSetsRequest "
                                  "xmlns=\"https://route53.amazonaws.com/doc/2013-04-01/\">"
                                  "<ChangeBatch><Comment>s3lect</Comment><Changes>%s%s</Changes>"
                                  "</ChangeBatch></ChangeResourceRecordSetsRequest>",
                                  del ? del : "", cre)
                     : NULL;
    char *etag = value ? u_asprintf("%d|%s", R53_TTL, value) : NULL;
    free(value);
    free(del);
    free(cre);
    if (!etag) {
        free(body);
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return NULL;
    }
    st_xfer *x = r53_start(s, easy, 1, key, body, if_match, timeout_ms, out);
    if (x)
        x->new_etag = etag;
    else
        free(etag);
    return x;
}

/* The error of a Route 53 answer: its <Code> and whole <Message> (the
 * words classify() looks for may come after a 253-character name), and for
 * InvalidChangeBatch, which is sent as <InvalidChangeBatch><Messages>
 * <Message>... without a <Code>, the root element's name. Control
 * characters of the message become spaces. */
static void error_code(const ah_response *r, char *code, size_t cl, char *msg, size_t ml)
{
    const char *b = r->data.body ? r->data.body : "", *end = b + r->data.len;
    int oom = 0;
    char *c = aws_xml_text(b, end, "Code", NULL, &oom);
    char *m = aws_xml_text(b, end, "Message", NULL, &oom);
    snprintf(code, cl, "%s", c ? c : strstr(b, "<InvalidChangeBatch") ? "InvalidChangeBatch" : "");
    snprintf(msg, ml, "%s", m ? m : "");
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    free(c);
    free(m);
}

/* InvalidChangeBatch is also sent for a name outside the zone and other
 * mistakes; only a DELETE that does not match (AWS: "the values provided do
 * not match the current values", "but it was not found"; moto: InvalidInput
 * "... but found none in Change with [Action=DELETE") and a CREATE of an
 * existing set ("but it already exists") mean that another writer won. */
static int classify(long status, const char *code, const char *msg)
{
    if (status >= 200 && status < 300)
        return ST_OK;
    if ((strcmp(code, "InvalidChangeBatch") == 0 &&
         (strstr(msg, "do not match") || strstr(msg, "was not found") ||
          strstr(msg, "already exists"))) ||
        (strcmp(code, "InvalidInput") == 0 &&
         strstr(msg, "found none in Change with [Action=DELETE")))
        return ST_PRECONDITION;
    if (strcmp(code, "Throttling") == 0 || strcmp(code, "ThrottlingException") == 0 ||
        strcmp(code, "PriorRequestNotComplete") == 0 || strcmp(code, "ServiceUnavailable") == 0 ||
        strcmp(code, "RequestExpired") == 0)
        return ST_TRANSIENT;
    if (strcmp(code, "AccessDenied") == 0 || strcmp(code, "AccessDeniedException") == 0 ||
        strcmp(code, "InvalidClientTokenId") == 0 || strcmp(code, "SignatureDoesNotMatch") == 0 ||
        strcmp(code, "ExpiredToken") == 0 || strcmp(code, "IncompleteSignature") == 0 ||
        status == 401 || status == 403)
        return ST_AUTH;
    if (status >= 500 || status == 408 || status == 429)
        return ST_TRANSIENT;
    return ST_FATAL;
}

static void set_failure(r53_store *s, const st_xfer *x, long status, const char *code,
                        const char *msg, int outcome, st_result *out)
{
    char detail[500];
    snprintf(detail, sizeof detail, "HTTP %ld%s%.60s%s%.300s", status, code[0] ? " " : "", code,
             msg[0] ? ": " : "", msg);
    const char *what =
        x->put ? "route53:ChangeResourceRecordSets" : "route53:ListResourceRecordSets";
    switch (outcome) {
    case ST_PRECONDITION:
        st_result_setf(out, outcome, "route53://%s/%s %s: another writer won (%s)", s->zone, x->key,
                       x->if_match ? "changed since it was read" : "already exists", detail);
        break;
    case ST_AUTH:
        st_result_setf(out, outcome,
                       "Route 53 refused %s on hosted zone %s for the credentials from %s (%s): "
                       "grant route53:ListResourceRecordSets and route53:ChangeResourceRecordSets "
                       "on the zone (docs/stores.md), or fix the credentials",
                       what, s->zone, s->v.signer.creds.source, detail);
        break;
    case ST_FATAL:
        if (strcmp(code, "NoSuchHostedZone") == 0)
            st_result_setf(out, outcome,
                           "hosted zone %s does not exist at %s (%s): fix the lock URL "
                           "(route53://ZONE_ID/NAME, the id without /hostedzone/)",
                           s->zone, s->v.endpoint_desc, detail);
        else
            st_result_setf(out, outcome,
                           "%s on route53://%s/%s failed at %s (%s): is the name inside the "
                           "zone?",
                           what, s->zone, x->key, s->v.endpoint_desc, detail);
        break;
    default:
        st_result_setf(out, outcome,
                       "%s on route53://%s/%s: temporary failure at %s (%s); will retry", what,
                       s->zone, x->key, s->v.endpoint_desc, detail);
        break;
    }
}

/* Fills out from a ListResourceRecordSets answer for name. */
static void parse_list(r53_store *s, const st_xfer *x, const ah_response *r, st_result *out)
{
    const char *b = r->data.body ? r->data.body : "";
    const char *set = strstr(b, "<ResourceRecordSet>");
    const char *set_end = set ? strstr(set, "</ResourceRecordSet>") : NULL;
    if (!set || !set_end) {
        st_result_setf(out, ST_NOT_FOUND, "route53://%s/%s does not exist", s->zone, x->key);
        return;
    }
    int oom = 0;
    char *name = aws_xml_text(set, set_end, "Name", NULL, &oom);
    char *type = aws_xml_text(set, set_end, "Type", NULL, &oom);
    char *ttl = aws_xml_text(set, set_end, "TTL", NULL, &oom);
    const char *after = NULL;
    char *value = aws_xml_text(set, set_end, "Value", &after, &oom);
    char *second = value ? aws_xml_text(after, set_end, "Value", NULL, &oom) : NULL;
    /* Names come back lower case with the final dot (\NNN escapes for
     * other characters, which our names do not have). */
    int ours = name && type && strcasecmp(name, x->key) == 0 && strcmp(type, "TXT") == 0;
    if (oom) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    } else if (!ours) {
        st_result_setf(out, ST_NOT_FOUND, "route53://%s/%s does not exist", s->zone, x->key);
    } else if (!value || second) {
        st_result_setf(out, ST_FATAL,
                       "route53://%s/%s: the TXT record set has %s values; s3lect writes "
                       "exactly one: delete the record set or use another name",
                       s->zone, x->key, value ? "several" : "no");
    } else {
        char *etag = u_asprintf("%ld|%s", ttl ? strtol(ttl, NULL, 10) : 0L, value);
        char *data = NULL;
        long len = decode_value(value, &data);
        /* Not ours: handed on as it is; the engine reports a corrupt record
         * (and may take it over, as with any corrupt lock object). */
        int rc = etag ? st_result_set_etag(out, etag) : S3LECT_ENOMEM;
        if (rc == 0)
            rc = len >= 0 ? st_result_set_body(out, data, (size_t)len)
                          : st_result_set_body(out, value, strlen(value));
        if (rc != 0)
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        else
            out->outcome = ST_OK;
        free(etag);
        free(data);
    }
    free(name);
    free(type);
    free(ttl);
    free(value);
    free(second);
}

static void r53_finish(st_store *st, st_xfer *x, int curl_code, st_result *out)
{
    r53_store *s = (r53_store *)st;
    long status = st_http_finish_start(x->call.easy, out);
    if (ah_call_transport_failed(&x->call, curl_code)) {
        char what[400];
        snprintf(what, sizeof what, "%s route53://%s/%.200s", x->put ? "change" : "read", s->zone,
                 x->key);
        st_transport_failure(curl_code, x->call.errbuf, what, s->v.endpoint_desc, x->timeout_ms,
                             out);
    } else if (status < 200 || status >= 300) {
        char code[80], msg[1024];
        error_code(&x->call.resp, code, sizeof code, msg, sizeof msg);
        int outcome = classify(status, code, msg);
        set_failure(s, x, status, code, msg, outcome, out);
        if (outcome == ST_AUTH)
            ah_signer_refused(&s->v.signer);
    } else if (x->put) {
        if (st_result_set_etag(out, x->new_etag) != 0)
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        else
            out->outcome = ST_OK;
    } else {
        parse_list(s, x, &x->call.resp, out);
    }
    xfer_free(x);
}

/* check-store's scratch record: a label in front of the name, so that it
 * stays inside the zone. */
static char *r53_scratch(const char *key, const char *tag)
{
    return u_asprintf("%s.%s", tag[0] == '.' ? tag + 1 : tag, key);
}

static const char *r53_pool(const st_store *st)
{
    return ((const r53_store *)st)->v.origin;
}

static void r53_destroy(st_store *st)
{
    r53_store *s = (r53_store *)st;
    if (!s)
        return;
    ah_service_clear(&s->v);
    free(s->zone);
    free(s);
}

static const st_vtable r53_vtable = {.name = "route53",
                                     .destroy = r53_destroy,
                                     .begin = r53_begin,
                                     .finish = r53_finish,
                                     .pool = r53_pool,
                                     .scratch_key = r53_scratch};

int st_route53_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                    char *err, size_t errlen)
{
    *out = NULL;
    r53_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    s->base.vt = &r53_vtable;
    /* Route 53 is global: requests are signed for us-east-1 (cn-northwest-1
     * in China) whatever region the rest of the configuration names. */
    char *conf_region = aws_region_resolve(cfg);
    int china = conf_region && strncmp(conf_region, "cn-", 3) == 0;
    free(conf_region);
    int rc = ah_service_init(&s->v, cfg, china ? "cn-northwest-1" : "us-east-1",
                             R53_DEFAULT_TIMEOUT_MS, err, errlen);
    if (rc) {
        free(s);
        return rc;
    }
    int oom = 0;
    char *url = aws_service_endpoint_resolve(cfg, "ROUTE_53", "route_53", &oom);
    if (!(s->zone = u_strdup(loc->bucket)) || oom) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
    }
    if (rc == 0)
        rc = ah_service_endpoint(&s->v, url,
                                 china ? "https://route53.amazonaws.com.cn"
                                       : "https://route53.amazonaws.com",
                                 "Route 53 endpoint", "AWS Route 53", err, errlen);
    if (rc == 0)
        rc = ah_signer_open(&s->v.signer, cfg, err, errlen);
    free(url);
    if (rc) {
        r53_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

#define R53_USAGE "route53://HOSTED_ZONE_ID/RECORD.NAME.IN.THE.ZONE"

int st_route53_parse(const char *url, const char *b, st_location *out, char *err, size_t errlen)
{
    if (strpbrk(b, "?#")) {
        snprintf(err, errlen, "lock URL '%.200s' has a query or fragment; write %s", url,
                 R53_USAGE);
        return S3LECT_EINVAL;
    }
    const char *slash = strchr(b, '/');
    if (!slash || slash == b || !slash[1] || strchr(slash + 1, '/')) {
        snprintf(err, errlen, "lock URL '%.200s' needs a hosted zone id and a record name: %s", url,
                 R53_USAGE);
        return S3LECT_EINVAL;
    }
    size_t zl = (size_t)(slash - b);
    out->bucket = u_asprintf("%.*s", (int)zl, b);
    const char *name = slash + 1;
    size_t nl = strlen(name);
    if (nl && name[nl - 1] == '.')
        nl--;
    out->key = u_asprintf("%.*s.", (int)nl, name);
    if (!out->bucket || !out->key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    if (zl > 32 || !st_only_chars(out->bucket, "")) {
        snprintf(err, errlen,
                 "lock URL '%.200s': '%.60s' is not a hosted zone id (letters and digits, e.g. "
                 "Z0123456789ABCDEFGHIJ; without /hostedzone/)",
                 url, out->bucket);
        return S3LECT_EINVAL;
    }
    for (char *c = out->key; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    /* Labels of letters, digits, '-' and '_', 1 to 63 each, 253 in all. */
    int ok = nl >= 1 && nl <= 253 && st_only_chars(out->key, "-_.");
    for (const char *p = out->key; ok && *p;) {
        size_t ll = strcspn(p, ".");
        ok = ll >= 1 && ll <= 63;
        p += ll + 1;
    }
    if (!ok) {
        snprintf(err, errlen,
                 "lock URL '%.200s': '%.200s' is not a DNS record name (labels of 1 to 63 "
                 "letters, digits, '-' or '_', 253 in all); write %s",
                 url, name, R53_USAGE);
        return S3LECT_EINVAL;
    }
    return 0;
}

int st_route53_canonical(const st_location *loc, char **out)
{
    return st_canon_add(out, "route53://", loc->bucket, 0) || st_canon_add(out, "/", loc->key, 0);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_sigv4.c - the SigV4 signer against the AWS test suite.
 *
 * usage: test_sigv4 DATA_DIR [EXPECTED_V4_CASES]
 * DATA_DIR is tests/data/aws-sigv4. Every case folder of v4/ is signed from
 * its request.txt and context.json; the canonical request, string to sign
 * and signature are each compared with the expected files (header signing),
 * and so is the Authorization header of header-signed-request.txt. Then both
 * worked examples of s3-examples.json (S3: no path normalisation, signed
 * payload hash) are checked.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "s3_test.h"
#include "sigv4.h"

#define MAX_HEADERS 32

typedef struct parsed_request {
    char *text; /* owns the strings below */
    char *method, *path, *query;
    sigv4_header headers[MAX_HEADERS];
    char *values[MAX_HEADERS]; /* allocated (folded lines joined) */
    size_t nheaders;
    const char *body;
    size_t body_len;
} parsed_request;

static char *join_path(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 3;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s%s%s", a, b, *c ? "/" : "", c);
    return p;
}

static char *read_case_file(const char *dir, const char *name)
{
    char *p = join_path(dir, name, "");
    char *s = t_read_file(p, NULL);
    free(p);
    return s;
}

/* Parses the suite's raw request: "METHOD PATH[?QUERY] HTTP/1.1", header
 * lines (a line starting with whitespace continues the previous value), a
 * blank line, the body. Paths may contain spaces. Returns 0 or -1. */
static int parse_request(char *text, size_t len, parsed_request *r)
{
    memset(r, 0, sizeof *r);
    r->text = text;
    char *end = text + len;
    char *eol = strchr(text, '\n');
    if (!eol)
        eol = end;
    *eol = '\0';
    char *sp = strchr(text, ' ');
    char *proto = strstr(text, " HTTP/");
    if (!sp || !proto || proto < sp)
        return -1;
    *sp = '\0';
    *proto = '\0';
    r->method = text;
    r->path = sp + 1;
    char *q = strchr(r->path, '?');
    if (q) {
        *q = '\0';
        r->query = q + 1;
    }
    char *line = eol < end ? eol + 1 : end;
    while (line < end) {
        char *nl = strchr(line, '\n');
        char *lend = nl ? nl : end;
        if (lend == line) { /* blank line: body follows */
            r->body = line + 1 <= end ? line + 1 : end;
            r->body_len = (size_t)(end - r->body);
            break;
        }
        *lend = '\0';
        if ((*line == ' ' || *line == '\t') && r->nheaders > 0) {
            char *prev = r->values[r->nheaders - 1];
            size_t n = strlen(prev) + strlen(line) + 2;
            char *v = malloc(n);
            snprintf(v, n, "%s\n%s", prev, line);
            free(prev);
            r->values[r->nheaders - 1] = v;
            r->headers[r->nheaders - 1].value = v;
        } else {
            char *colon = strchr(line, ':');
            if (!colon || r->nheaders == MAX_HEADERS)
                return -1;
            *colon = '\0';
            r->values[r->nheaders] = strdup(colon + 1);
            r->headers[r->nheaders].name = line;
            r->headers[r->nheaders].value = r->values[r->nheaders];
            r->nheaders++;
        }
        line = lend + 1;
    }
    if (!r->body) {
        r->body = "";
        r->body_len = 0;
    }
    return 0;
}

static void free_request(parsed_request *r)
{
    for (size_t i = 0; i < r->nheaders; i++)
        free(r->values[i]);
    free(r->text);
}

/* "2015-08-30T12:36:00Z" -> "20150830T123600Z" */
static void iso_to_amz(const char *iso, char out[17])
{
    size_t j = 0;
    for (size_t i = 0; iso[i] && j < 16; i++)
        if (iso[i] != '-' && iso[i] != ':')
            out[j++] = iso[i];
    out[j] = '\0';
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jbool(const cJSON *o, const char *k)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* Returns the value of the Authorization line of a signed request. */
static char *authorization_of(char *signed_req)
{
    char *p = strstr(signed_req, "\nAuthorization:");
    if (!p)
        return NULL;
    p += strlen("\nAuthorization:");
    char *nl = strchr(p, '\n');
    if (nl)
        *nl = '\0';
    return p;
}

static int run_v4_case(const char *v4dir, const char *name)
{
    int before = t_failures;
    char *dir = join_path(v4dir, name, "");
    size_t reqlen = 0;
    char *reqpath = join_path(dir, "request.txt", "");
    char *reqtext = t_read_file(reqpath, &reqlen);
    char *ctxtext = read_case_file(dir, "context.json");
    char *want_creq = read_case_file(dir, "header-canonical-request.txt");
    char *want_sts = read_case_file(dir, "header-string-to-sign.txt");
    char *want_sig = read_case_file(dir, "header-signature.txt");
    char *want_signed = read_case_file(dir, "header-signed-request.txt");
    free(reqpath);
    CHECK(reqtext && ctxtext && want_creq && want_sts && want_sig && want_signed,
          "%s: a case file is missing", name);
    if (!(reqtext && ctxtext && want_creq && want_sts && want_sig && want_signed)) {
        free(reqtext);
        goto out;
    }

    parsed_request r;
    int prc = parse_request(reqtext, reqlen, &r);
    CHECK(prc == 0, "%s: cannot parse request.txt", name);
    cJSON *ctx = cJSON_Parse(ctxtext);
    CHECK(ctx != NULL, "%s: cannot parse context.json", name);
    if (prc == 0 && ctx) {
        const cJSON *cred = cJSON_GetObjectItemCaseSensitive(ctx, "credentials");
        char amz[17];
        iso_to_amz(jstr(ctx, "timestamp") ? jstr(ctx, "timestamp") : "", amz);
        sigv4_params p = {
            .access_key_id = jstr(cred, "access_key_id"),
            .secret_access_key = jstr(cred, "secret_access_key"),
            .session_token = jstr(cred, "token"),
            .region = jstr(ctx, "region"),
            .service = jstr(ctx, "service"),
            .amz_date = amz,
            .normalize_path = jbool(ctx, "normalize"),
            .sign_body = jbool(ctx, "sign_body"),
            .omit_session_token = jbool(ctx, "omit_session_token"),
        };
        sigv4_request req = {
            .method = r.method,
            .path = r.path,
            .query = r.query,
            .headers = r.headers,
            .nheaders = r.nheaders,
            .body = r.body,
            .body_len = r.body_len,
        };
        sigv4_result res;
        int rc = sigv4_sign(&req, &p, &res);
        CHECK(rc == 0, "%s: sigv4_sign failed", name);
        if (rc == 0) {
            char what[256];
            snprintf(what, sizeof what, "%s: canonical request", name);
            CHECK_STR(res.canonical_request, want_creq, what);
            snprintf(what, sizeof what, "%s: string to sign", name);
            CHECK_STR(res.string_to_sign, want_sts, what);
            snprintf(what, sizeof what, "%s: signature", name);
            CHECK_STR(res.signature, want_sig, what);
            snprintf(what, sizeof what, "%s: Authorization header", name);
            CHECK_STR(res.authorization, authorization_of(want_signed), what);
            sigv4_result_clear(&res);
        }
        free_request(&r);
    } else if (prc != 0) {
        free(reqtext);
    } else {
        free_request(&r);
    }
    cJSON_Delete(ctx);
out:
    free(ctxtext);
    free(want_creq);
    free(want_sts);
    free(want_sig);
    free(want_signed);
    free(dir);
    return t_failures == before;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_v4_suite(const char *datadir, int *passed)
{
    char *v4dir = join_path(datadir, "v4", "");
    DIR *d = opendir(v4dir);
    char *names[512];
    int n = 0;
    CHECK(d != NULL, "cannot open %s", v4dir);
    if (!d) {
        free(v4dir);
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)) && n < 512)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    *passed = 0;
    for (int i = 0; i < n; i++) {
        int ok = run_v4_case(v4dir, names[i]);
        *passed += ok;
        printf("  %-45s %s\n", names[i], ok ? "ok" : "FAIL");
        free(names[i]);
    }
    free(v4dir);
    return n;
}

static int run_s3_examples(const char *datadir, int *passed)
{
    char *path = join_path(datadir, "s3-examples.json", "");
    char *text = t_read_file(path, NULL);
    free(path);
    CHECK(text != NULL, "cannot read s3-examples.json");
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK(doc != NULL, "cannot parse s3-examples.json");
    if (!doc)
        return 0;
    const cJSON *cred = cJSON_GetObjectItemCaseSensitive(doc, "credentials");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
    const cJSON *c;
    int n = 0;
    *passed = 0;
    cJSON_ArrayForEach(c, cases)
    {
        int before = t_failures;
        const char *name = jstr(c, "name");
        sigv4_header hdrs[MAX_HEADERS];
        size_t nh = 0;
        const cJSON *h;
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(c, "headers"))
        {
            if (nh < MAX_HEADERS && cJSON_IsString(h))
                hdrs[nh++] = (sigv4_header){h->string, h->valuestring};
        }
        const char *body = jstr(c, "body") ? jstr(c, "body") : "";
        sigv4_params p = {
            .access_key_id = jstr(cred, "access_key_id"),
            .secret_access_key = jstr(cred, "secret_access_key"),
            .region = jstr(doc, "region"),
            .service = jstr(doc, "service"),
            .amz_date = jstr(doc, "timestamp"),
            .normalize_path = 0,
            .sign_body = 1,
        };
        sigv4_request req = {
            .method = jstr(c, "method"),
            .path = jstr(c, "path"),
            .query = jstr(c, "query"),
            .headers = hdrs,
            .nheaders = nh,
            .body = body,
            .body_len = strlen(body),
        };
        sigv4_result res;
        int rc = sigv4_sign(&req, &p, &res);
        CHECK(rc == 0, "%s: sigv4_sign failed", name ? name : "?");
        if (rc == 0) {
            char what[128];
            snprintf(what, sizeof what, "s3 %s: signed headers", name);
            CHECK_STR(res.signed_headers, jstr(c, "signed_headers"), what);
            snprintf(what, sizeof what, "s3 %s: signature", name);
            CHECK_STR(res.signature, jstr(c, "signature"), what);
            /* The signed payload hash is the body's SHA-256 as in the header. */
            snprintf(what, sizeof what, "s3 %s: payload hash", name);
            CHECK_STR(res.payload_hash,
                      jstr(cJSON_GetObjectItemCaseSensitive(c, "headers"), "x-amz-content-sha256"),
                      what);
            sigv4_result_clear(&res);
        }
        int ok = t_failures == before;
        *passed += ok;
        printf("  s3 %-42s %s\n", name ? name : "?", ok ? "ok" : "FAIL");
        n++;
    }
    cJSON_Delete(doc);
    return n;
}

/* The payload hash is computed from the body when not given, and a session
 * token is signed unless omitted; bad input is refused. */
static void test_api_edges(void)
{
    sigv4_header host = {"Host", "example.amazonaws.com"};
    sigv4_params p = {.access_key_id = "AKID",
                      .secret_access_key = "secret",
                      .session_token = "tok",
                      .region = "us-east-1",
                      .service = "s3",
                      .amz_date = "20240101T000000Z",
                      .sign_body = 1};
    sigv4_request req = {.method = "PUT",
                         .path = "/b/k",
                         .headers = &host,
                         .nheaders = 1,
                         .body = "Welcome to Amazon S3.",
                         .body_len = 21};
    sigv4_result res;
    CHECK(sigv4_sign(&req, &p, &res) == 0, "signing a minimal request");
    CHECK_STR(res.payload_hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
              "computed payload hash");
    CHECK_STR(res.signed_headers, "host;x-amz-content-sha256;x-amz-date;x-amz-security-token",
              "headers added by the signer");
    CHECK(strstr(res.authorization, "secret") == NULL, "the secret is not in the header");
    sigv4_result_clear(&res);

    p.amz_date = "2024-01-01";
    CHECK(sigv4_sign(&req, &p, &res) == -1, "a malformed date is refused");
    p.amz_date = "20240101T000000Z";
    req.nheaders = 0;
    CHECK(sigv4_sign(&req, &p, &res) == -1, "a request without host is refused");

    char *e = sigv4_uri_encode("a b/c$~é", strlen("a b/c$~é"), 1);
    CHECK_STR(e, "a%20b/c%24~%C3%A9", "uri encode keeping slashes");
    free(e);
    e = sigv4_uri_encode("a/b", 3, 0);
    CHECK_STR(e, "a%2Fb", "uri encode of a query component");
    free(e);

    char d[17];
    sigv4_amz_date(1440938160, d);
    CHECK_STR(d, "20150830T123600Z", "amz date formatting");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATA_DIR [EXPECTED_V4_CASES]\n", argv[0]);
        return 2;
    }
    int v4_ok = 0, s3_ok = 0;
    int v4_n = run_v4_suite(argv[1], &v4_ok);
    int s3_n = run_s3_examples(argv[1], &s3_ok);
    test_api_edges();
    CHECK(v4_n > 0, "the v4 suite has cases");
    if (argc > 2)
        CHECK_INT(v4_n, atoi(argv[2]), "number of v4 cases found");
    CHECK_INT(s3_n, 2, "number of S3 examples");
    printf("SigV4 vectors: %d/%d v4 cases passed, %d/%d S3 examples passed\n", v4_ok, v4_n, s3_ok,
           s3_n);
    return t_finish("test_sigv4");
}

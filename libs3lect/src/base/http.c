/* SPDX-License-Identifier: Apache-2.0 */
/* http.c - libcurl's global initialisation, the response-body accumulator
 * and the common easy-handle options (http.h). */
#include "http.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"
#include "util.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode init_rc = CURLE_FAILED_INIT;

static void init(void)
{
    init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int readable_file(const char *p)
{
    struct stat st;
    return p && *p && stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, R_OK) == 0;
}

static int readable_dir(const char *p)
{
    struct stat st;
    return p && *p && stat(p, &st) == 0 && S_ISDIR(st.st_mode) && access(p, R_OK | X_OK) == 0;
}

const char *http_pick_ca(const char *builtin_file, const char *builtin_dir, const char *env_file,
                         const char *const *cands, size_t n)
{
    if (readable_file(builtin_file) || readable_dir(builtin_dir))
        return NULL;
    if (readable_file(env_file))
        return env_file;
    for (size_t i = 0; i < n; i++)
        if (readable_file(cands[i]))
            return cands[i];
    return NULL;
}

static const char *system_ca;
static pthread_once_t system_ca_once = PTHREAD_ONCE_INIT;
static char system_ca_env[4096];

static void find_system_ca(void)
{
    static const char *const cands[] = {
        "/etc/ssl/certs/ca-certificates.crt",                /* Debian, Ubuntu, Alpine, Arch */
        "/etc/pki/tls/certs/ca-bundle.crt",                  /* RHEL, Fedora, Amazon Linux */
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* RHEL 7 and later */
        "/etc/ssl/ca-bundle.pem",                            /* SUSE */
        "/etc/ssl/cert.pem",                                 /* Alpine, BSDs */
    };
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    const char *env = getenv("SSL_CERT_FILE");
    if (env && strlen(env) < sizeof system_ca_env) {
        memcpy(system_ca_env, env, strlen(env) + 1);
        env = system_ca_env;
    } else {
        env = NULL;
    }
    system_ca = http_pick_ca(v ? v->cainfo : NULL, v ? v->capath : NULL, env, cands,
                             sizeof cands / sizeof cands[0]);
}

const char *http_system_ca(void)
{
    pthread_once(&system_ca_once, find_system_ca);
    return system_ca;
}

const char *http_ca(const char *ca_file)
{
    return ca_file ? ca_file : http_system_ca();
}

void http_set_ca(CURL *e, const char *ca_file)
{
    const char *ca = http_ca(ca_file);
    if (ca)
        curl_easy_setopt(e, CURLOPT_CAINFO, ca);
}

int http_global_init(char *err, size_t errlen)
{
    pthread_once(&once, init);
    if (init_rc == CURLE_OK)
        return 0;
    if (err && errlen)
        snprintf(err, errlen, "libcurl failed to initialise: %s", curl_easy_strerror(init_rc));
    return S3LECT_EIO;
}

void http_body_clear(http_body *b)
{
    if (b->body) {
        u_wipe(b->body, b->cap);
        free(b->body);
    }
    size_t max = b->max;
    memset(b, 0, sizeof *b);
    b->max = max;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    http_body *b = ud;
    size_t n = size * nmemb, take = n;
    if (take > b->max - b->len) {
        b->too_large = 1;
        take = b->max - b->len;
    }
    if (b->len + take + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + take + 1)
            cap *= 2;
        /* Grow by copy so that no unwiped old buffer is left behind. */
        char *p = malloc(cap);
        if (!p) {
            b->oom = 1;
            return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
        }
        if (b->body) {
            memcpy(p, b->body, b->len);
            u_wipe(b->body, b->cap);
            free(b->body);
        }
        b->body = p;
        b->cap = cap;
    }
    memcpy(b->body + b->len, data, take);
    b->len += take;
    b->body[b->len] = '\0';
    return b->too_large ? 0 : n;
}

void http_easy_common(CURL *e, const char *url, long total_ms, long connect_ms, char *errbuf,
                      http_body *body)
{
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, total_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "s3lect/" S3LECT_VERSION_STRING);
    if (errbuf) {
        errbuf[0] = '\0';
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    }
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
}

void http_easy_request(CURL *e, struct curl_slist *hl, curl_write_callback on_header, void *ud,
                       const char *method, const void *body, size_t len)
{
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    if (on_header) {
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, ud);
    }
    if (!method)
        return;
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        return;
    }
    if (strcmp(method, "POST") == 0)
        curl_easy_setopt(e, CURLOPT_POST, 1L);
    else
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body ? body : "");
}

int http_transport_failed(int curl_code, const http_body *b)
{
    return curl_code != CURLE_OK && !(curl_code == CURLE_WRITE_ERROR && b->too_large);
}

void http_header_add(struct curl_slist **hl, int *oom, const char *name, const char *value)
{
    if (*oom)
        return;
    char *line = value ? u_asprintf("%s: %s", name, value) : u_asprintf("%s:", name);
    struct curl_slist *l = line ? curl_slist_append(*hl, line) : NULL;
    u_wipe_free(line);
    if (l)
        *hl = l;
    else
        *oom = 1;
}

void http_headers_free(struct curl_slist *hl)
{
    for (struct curl_slist *l = hl; l; l = l->next)
        u_wipe(l->data, strlen(l->data));
    curl_slist_free_all(hl);
}

void http_header_value(const char *line, size_t n, size_t name_len, char *dst, size_t cap)
{
    const char *v = line + name_len, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t len = (size_t)(end - v);
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cred_metadata.c - what the container and instance-metadata credential
 * providers share (cred_metadata.h): the answer parser,
 * one bounded HTTP exchange with libcurl (on the pieces of cred_curl.h),
 * and wiping helpers.
 */
#include "cred_metadata.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cred_curl.h"
#include "cred_http.h"
#include "cred_parse.h"
#include "s3lect.h"
#include "util.h"

int aws_md_env_true(const char *name)
{
    const char *v = getenv(name);
    return v && strcasecmp(v, "true") == 0;
}

int aws_md_read_small_file(const char *path, size_t max, char **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        errno = EISDIR;
        return -1;
    }
    char *buf = malloc(max + 1);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, max + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            u_wipe(buf, n);
            free(buf);
            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            u_wipe(buf, n);
            free(buf);
            close(fd);
            return -2;
        }
    }
    close(fd);
    while (n > 0 &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) {
        buf[n - 1] = '\0';
        n--;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

/* ---- the answer parser ---- */

/* Wipes every string value of a cJSON tree (cJSON_Delete frees without). */
/* A credential value: printable ASCII without spaces, 1..max bytes. */
static int credential_chars_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return 0;
    return 1;
}

/* A display value (RoleArn, Code): printable ASCII, 1..max bytes. */
static int display_chars_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return 0;
    return 1;
}

/* The string member `name`: -1 absent or null, -2 not a string, 0 found. */
static int member_str(const cJSON *o, const char *name, const char **out)
{
    *out = NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!m || cJSON_IsNull(m))
        return -1;
    if (!cJSON_IsString(m) || !m->valuestring)
        return -2;
    *out = m->valuestring;
    return 0;
}

int aws_md_parse_creds(const char *body, size_t len, int flavour, cred_fetched *out, char *err,
                       size_t errlen)
{
    const char *who = flavour == AWS_MD_IMDS ? "instance metadata" : "container endpoint";
    memset(out, 0, sizeof *out);
    if (len > AWS_MD_MAX_BODY) {
        snprintf(err, errlen, "%s credentials answer is too large (%zu bytes)", who, len);
        return S3LECT_EAUTH;
    }
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!j) {
        snprintf(err, errlen, "%s credentials answer is not valid JSON", who);
        return S3LECT_EAUTH;
    }
    int rc = S3LECT_EAUTH;
    const char *akid, *secret, *token, *exp, *arn, *code;
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "%s credentials answer is not a JSON object", who);
        goto done;
    }
    if (flavour == AWS_MD_IMDS) {
        int c = member_str(j, "Code", &code);
        if (c == -2 || (c == 0 && strcmp(code, "Success") != 0)) {
            if (c == 0 && display_chars_ok(code, 64))
                snprintf(err, errlen, "%s credentials answer has Code \"%s\", not \"Success\"", who,
                         code);
            else
                snprintf(err, errlen, "%s credentials answer has a Code that is not \"Success\"",
                         who);
            goto done;
        }
    }
    int ra = member_str(j, "AccessKeyId", &akid);
    int rs = member_str(j, "SecretAccessKey", &secret);
    if (ra != 0 || rs != 0) {
        snprintf(err, errlen, "%s credentials answer has no %s", who,
                 ra != 0 ? "AccessKeyId string" : "SecretAccessKey string");
        goto done;
    }
    if (!credential_chars_ok(akid, 256)) {
        snprintf(err, errlen, "%s credentials answer has an invalid AccessKeyId", who);
        goto done;
    }
    if (!credential_chars_ok(secret, 1024)) {
        snprintf(err, errlen, "%s credentials answer has an invalid SecretAccessKey", who);
        goto done;
    }
    int rt = member_str(j, "Token", &token);
    if ((rt == -1 || (rt == 0 && !*token)) && flavour != AWS_MD_IMDS)
        token = NULL; /* long-term keys from a local credentials server; an empty
                       * Token is no token, as aws-sdk-go-v2 takes it */
    else if (rt != 0 || !credential_chars_ok(token, AWS_MD_MAX_TOKEN)) {
        snprintf(err, errlen, "%s credentials answer has %s Token", who,
                 rt == -1 ? "no" : "an invalid");
        goto done;
    }
    int re = member_str(j, "Expiration", &exp);
    int64_t expires = 0;
    if (re == -1 && flavour != AWS_MD_IMDS) {
        expires = 0; /* does not expire */
    } else if (re != 0) {
        snprintf(err, errlen, "%s credentials answer has %s Expiration", who,
                 re == -1 ? "no" : "a non-string");
        goto done;
    } else if (strlen(exp) > 64 || u_parse_rfc3339(exp, &expires) != 0 || expires <= 0) {
        snprintf(err, errlen,
                 "%s credentials answer has an Expiration that is not an RFC 3339 time", who);
        goto done;
    }
    if (member_str(j, "RoleArn", &arn) == 0 && display_chars_ok(arn, sizeof out->principal - 1))
        memcpy(out->principal, arn, strlen(arn) + 1);

    out->access_key_id = u_strdup(akid);
    out->secret_access_key = u_strdup(secret);
    out->session_token = token ? u_strdup(token) : NULL;
    out->expires_ms = expires;
    if (!out->access_key_id || !out->secret_access_key || (token && !out->session_token)) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        goto done;
    }
    rc = 0;
done:
    cred_json_wipe_delete(j);
    if (rc != 0)
        cred_fetched_clear(out);
    return rc;
}

static int role_char_ok(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           strchr("+=,.@_-", c) != NULL;
}

int aws_md_parse_role(const char *body, size_t len, char *role, size_t rolelen)
{
    if (rolelen)
        role[0] = '\0';
    size_t i = 0;
    while (i < len && (body[i] == '\n' || body[i] == '\r' || body[i] == ' ' || body[i] == '\t'))
        i++;
    size_t start = i;
    while (i < len && body[i] != '\n' && body[i] != '\r')
        i++;
    size_t end = i;
    while (end > start && (body[end - 1] == ' ' || body[end - 1] == '\t'))
        end--;
    size_t n = end - start;
    if (n == 0 || n > 128 || n + 1 > rolelen)
        return -1;
    for (size_t k = start; k < end; k++)
        if (body[k] == '\0' || !role_char_ok(body[k]))
            return -1;
    memcpy(role, body + start, n);
    role[n] = '\0';
    return 0;
}

/* ---- HTTP ---- */

void *aws_md_curl_new(void)
{
    if (http_global_init(NULL, 0) != 0)
        return NULL;
    return curl_easy_init();
}

void aws_md_curl_free(void *curl)
{
    if (curl)
        curl_easy_cleanup((CURL *)curl);
}

/* Hosts that are never reached through a proxy: the metadata endpoints and
 * loopback (a proxy would see the authorization and session tokens). */
static const char no_proxy_hosts[] =
    "169.254.169.254,169.254.170.2,169.254.170.23,fd00:ec2::254,fd00:ec2::23,127.0.0.1,::1,"
    "localhost";

static struct curl_slist *append_header(struct curl_slist *l, const char *name, const char *value,
                                        int *oom)
{
    if (!name || *oom)
        return l;
    size_t n = strlen(name) + strlen(value) + 3;
    char *line = malloc(n);
    if (!line) {
        *oom = 1;
        return l;
    }
    /* "Name:" with nothing after the colon removes a header libcurl adds. */
    snprintf(line, n, *value ? "%s: %s" : "%s:%s", name, value);
    struct curl_slist *nl = curl_slist_append(l, line);
    u_wipe(line, n);
    free(line);
    if (!nl) {
        *oom = 1;
        return l;
    }
    return nl;
}

int aws_md_http(void *curl, const aws_md_req *req, aws_md_resp *resp)
{
    CURL *e = curl;
    memset(resp, 0, sizeof *resp);
    int64_t left = req->deadline_ms - u_mono_ms();
    if (left <= 0) {
        resp->timed_out = 1;
        snprintf(resp->why, sizeof resp->why, "timed out");
        return -1;
    }
    int oom = 0;
    struct curl_slist *hl = NULL;
    hl = append_header(hl, req->header_name, req->header_value, &oom);
    hl = append_header(hl, req->header2_name, req->header2_value, &oom);
    if (req->put) {
        hl = append_header(hl, "Content-Type", "", &oom); /* "Content-Type:" removes it */
    }
    hl = append_header(hl, "Accept", "*/*", &oom);
    if (oom) {
        cred_curl_slist_wipe_free(hl);
        return S3LECT_ENOMEM;
    }
    http_body sink = {.max = req->max_body};

    curl_easy_reset(e);
    cred_curl_setup(e, req->url, (long)left, hl, &sink);
    curl_easy_setopt(e, CURLOPT_NOPROXY, no_proxy_hosts);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    const char *ca = getenv("AWS_CA_BUNDLE");
    http_set_ca(e, ca && *ca ? ca : NULL);
    if (req->put) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    long status;
    CURLcode cc = cred_curl_perform(e, hl, &status);

    if (sink.oom) {
        http_body_clear(&sink);
        return S3LECT_ENOMEM;
    }
    if (!sink.body) {
        sink.body = calloc(1, 1);
        if (!sink.body)
            return S3LECT_ENOMEM;
        sink.cap = 1;
    }
    resp->body = sink.body;
    resp->len = sink.len;
    resp->too_large = sink.too_large;
    if (cc == CURLE_OK) {
        resp->status = status;
        return 0;
    }
    resp->timed_out = cc == CURLE_OPERATION_TIMEDOUT;
    if (sink.too_large)
        snprintf(resp->why, sizeof resp->why, "answer larger than %zu bytes", req->max_body);
    else if (resp->timed_out)
        snprintf(resp->why, sizeof resp->why, "timed out");
    else
        /* The generic text: libcurl's error buffer may name the URL's path. */
        snprintf(resp->why, sizeof resp->why, "%s", curl_easy_strerror(cc));
    return -1;
}

void aws_md_resp_clear(aws_md_resp *resp)
{
    if (resp->body) {
        u_wipe(resp->body, resp->len);
        free(resp->body);
    }
    memset(resp, 0, sizeof *resp);
}

/* ---- URLs and hosts ---- */

/* 1 when host (as libcurl returns it: IPv6 in brackets) is a literal address
 * that plain http may reach for container credentials. */
static int http_host_allowed(const char *host)
{
    if (strcasecmp(host, "localhost") == 0)
        return 1;
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        uint32_t a = ntohl(a4.s_addr);
        return (a >> 24) == 127 || a == 0xA9FEAA02u /* 169.254.170.2 */ ||
               a == 0xA9FEAA17u /* 169.254.170.23 */;
    }
    size_t n = strlen(host);
    if (n >= 3 && host[0] == '[' && host[n - 1] == ']' && n - 2 < 64) {
        char b[64];
        memcpy(b, host + 1, n - 2);
        b[n - 2] = '\0';
        struct in6_addr a6, lo, eks;
        if (inet_pton(AF_INET6, b, &a6) != 1)
            return 0;
        inet_pton(AF_INET6, "::1", &lo);
        inet_pton(AF_INET6, "fd00:ec2::23", &eks);
        return memcmp(&a6, &lo, sizeof a6) == 0 || memcmp(&a6, &eks, sizeof a6) == 0;
    }
    return 0;
}

/* Splits url with libcurl's parser: scheme and host (allocated with
 * curl_free) and the display form scheme://host[:port]. Returns 0 or -1. */
static int url_parts(const char *url, char **scheme, char **host, char *display, size_t displaylen)
{
    *scheme = *host = NULL;
    CURLU *u = curl_url();
    if (!u)
        return -1;
    char *port = NULL;
    int rc = -1;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, host, 0) == CURLUE_OK) {
        if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK && port)
            snprintf(display, displaylen, "%s://%s:%s", *scheme, *host, port);
        else
            snprintf(display, displaylen, "%s://%s", *scheme, *host);
        rc = 0;
    }
    curl_free(port);
    curl_url_cleanup(u);
    if (rc != 0) {
        curl_free(*scheme);
        curl_free(*host);
        *scheme = *host = NULL;
    }
    return rc;
}

static int has_ctl_or_space(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s == 0x7f)
            return 1;
    return 0;
}

int aws_md_full_uri_allowed(const char *url, char *err, size_t errlen)
{
    char *scheme, *host, display[160];
    if (has_ctl_or_space(url) || url_parts(url, &scheme, &host, display, sizeof display) != 0) {
        snprintf(err, errlen, "AWS_CONTAINER_CREDENTIALS_FULL_URI is not a valid URL");
        return 0;
    }
    int ok = 0;
    if (strcmp(scheme, "https") == 0)
        ok = 1;
    else if (strcmp(scheme, "http") == 0)
        ok = http_host_allowed(host);
    if (!ok) {
        if (strcmp(scheme, "http") == 0)
            snprintf(err, errlen,
                     "AWS_CONTAINER_CREDENTIALS_FULL_URI %s is refused: plain http is allowed only "
                     "to loopback, 169.254.170.2 (ECS) and 169.254.170.23 or fd00:ec2::23 (EKS Pod "
                     "Identity) by address; use https for any other host",
                     display);
        else
            snprintf(err, errlen,
                     "AWS_CONTAINER_CREDENTIALS_FULL_URI %s is refused: only http and https URLs",
                     display);
    }
    curl_free(scheme);
    curl_free(host);
    return ok;
}

int aws_md_container_url(char **url, const char **var, char *display, size_t displaylen, char *err,
                         size_t errlen)
{
    *url = NULL;
    *var = NULL;
    if (displaylen)
        display[0] = '\0';
    const char *rel = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (rel && *rel) {
        *var = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";
        /* Must be a path: "@host/..." or "//host" would name another host. */
        if (rel[0] != '/' || rel[1] == '/' || has_ctl_or_space(rel) || strchr(rel, '@') ||
            strchr(rel, '\\')) {
            snprintf(err, errlen,
                     "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI must be a path starting with '/'");
            return S3LECT_EAUTH;
        }
        char *u = u_asprintf("http://169.254.170.2%s", rel);
        if (!u) {
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
        char *scheme, *host;
        if (url_parts(u, &scheme, &host, display, displaylen) != 0 ||
            strcmp(host, "169.254.170.2") != 0) {
            if (scheme) {
                curl_free(scheme);
                curl_free(host);
            }
            free(u);
            snprintf(err, errlen,
                     "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI does not form a valid URL under "
                     "http://169.254.170.2");
            return S3LECT_EAUTH;
        }
        curl_free(scheme);
        curl_free(host);
        *url = u;
        return 0;
    }
    if (full && *full) {
        *var = "AWS_CONTAINER_CREDENTIALS_FULL_URI";
        if (!aws_md_full_uri_allowed(full, err, errlen))
            return S3LECT_EAUTH;
        char *scheme, *host;
        if (url_parts(full, &scheme, &host, display, displaylen) == 0) {
            curl_free(scheme);
            curl_free(host);
        }
        *url = u_strdup(full);
        if (!*url) {
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
        return 0;
    }
    snprintf(
        err, errlen,
        "neither AWS_CONTAINER_CREDENTIALS_RELATIVE_URI nor AWS_CONTAINER_CREDENTIALS_FULL_URI "
        "is set");
    return S3LECT_EAUTH;
}

int aws_md_imds_endpoint(char *buf, size_t buflen, char *err, size_t errlen)
{
    const char *ep = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    if (ep && *ep) {
        char *scheme, *host, display[160];
        if (has_ctl_or_space(ep) || url_parts(ep, &scheme, &host, display, sizeof display) != 0) {
            snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT is not a valid URL");
            return S3LECT_EAUTH;
        }
        int ok = strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0;
        curl_free(scheme);
        curl_free(host);
        if (!ok) {
            snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT must be an http or https URL");
            return S3LECT_EAUTH;
        }
        size_t n = strlen(ep);
        while (n > 0 && ep[n - 1] == '/')
            n--;
        if (n + 1 > buflen) {
            snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT is too long");
            return S3LECT_EAUTH;
        }
        memcpy(buf, ep, n);
        buf[n] = '\0';
        return 0;
    }
    const char *mode = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
    const char *base;
    if (!mode || !*mode || strcasecmp(mode, "IPv4") == 0) {
        base = "http://169.254.169.254";
    } else if (strcasecmp(mode, "IPv6") == 0) {
        base = "http://[fd00:ec2::254]";
    } else {
        snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE must be IPv4 or IPv6");
        return S3LECT_EAUTH;
    }
    u_copyout(base, buf, buflen);
    return 0;
}

/* config.c - the configuration handle: defaults, typed setters, validation. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum { T_STR = 1, T_INT, T_BOOL, T_BLOB };

static int opt_type(int opt)
{
    switch (opt) {
    case S3LECT_OPT_LOCK:
    case S3LECT_OPT_SERVER_ID:
    case S3LECT_OPT_SERVER_ADDR:
    case S3LECT_OPT_PEER_HEALTH_PATH:
    case S3LECT_OPT_ENDPOINT:
    case S3LECT_OPT_REGION:
    case S3LECT_OPT_CA_FILE:
    case S3LECT_OPT_ACCESS_KEY_ID:
    case S3LECT_OPT_SECRET_ACCESS_KEY:
    case S3LECT_OPT_SESSION_TOKEN:
    case S3LECT_OPT_PROFILE:
    case S3LECT_OPT_PEER_LISTEN:
        return T_STR;
    case S3LECT_OPT_LEASE_TIMEOUT:
    case S3LECT_OPT_RENEW_INTERVAL:
    case S3LECT_OPT_RENEW_DEADLINE:
    case S3LECT_OPT_FREQUENT_INTERVAL:
    case S3LECT_OPT_INFREQUENT_INTERVAL:
    case S3LECT_OPT_MAX_CLOCK_SKEW:
    case S3LECT_OPT_PEER_TIMEOUT:
    case S3LECT_OPT_REQUEST_TIMEOUT:
    case S3LECT_OPT_MAX_LEASE_TIMEOUT:
        return T_INT;
    case S3LECT_OPT_PEER_MODE:
    case S3LECT_OPT_PATH_STYLE:
    case S3LECT_OPT_POLL_MODE:
    case S3LECT_OPT_RELEASE_ON_STOP:
        return T_BOOL;
    case S3LECT_OPT_PEER_CERT:
    case S3LECT_OPT_PEER_KEY:
    case S3LECT_OPT_PEER_CA:
    case S3LECT_OPT_PEER_CLIENT_CERT:
        return T_BLOB;
    default:
        return 0;
    }
}

static const char *opt_name(int opt)
{
    switch (opt) {
    case S3LECT_OPT_LOCK:
        return "lock";
    case S3LECT_OPT_SERVER_ID:
        return "server_id";
    case S3LECT_OPT_SERVER_ADDR:
        return "server_addr";
    case S3LECT_OPT_LEASE_TIMEOUT:
        return "lease_timeout";
    case S3LECT_OPT_RENEW_INTERVAL:
        return "renew_interval";
    case S3LECT_OPT_RENEW_DEADLINE:
        return "renew_deadline";
    case S3LECT_OPT_FREQUENT_INTERVAL:
        return "frequent_interval";
    case S3LECT_OPT_INFREQUENT_INTERVAL:
        return "infrequent_interval";
    case S3LECT_OPT_MAX_CLOCK_SKEW:
        return "max_clock_skew";
    case S3LECT_OPT_PEER_MODE:
        return "peer_mode";
    case S3LECT_OPT_PEER_HEALTH_PATH:
        return "peer_health_path";
    case S3LECT_OPT_PEER_TIMEOUT:
        return "peer_timeout";
    case S3LECT_OPT_ENDPOINT:
        return "endpoint";
    case S3LECT_OPT_REGION:
        return "region";
    case S3LECT_OPT_PATH_STYLE:
        return "path_style";
    case S3LECT_OPT_CA_FILE:
        return "ca_file";
    case S3LECT_OPT_ACCESS_KEY_ID:
        return "access_key_id";
    case S3LECT_OPT_SECRET_ACCESS_KEY:
        return "secret_access_key";
    case S3LECT_OPT_SESSION_TOKEN:
        return "session_token";
    case S3LECT_OPT_PROFILE:
        return "profile";
    case S3LECT_OPT_PEER_LISTEN:
        return "peer_listen";
    case S3LECT_OPT_PEER_CERT:
        return "peer_cert";
    case S3LECT_OPT_PEER_KEY:
        return "peer_key";
    case S3LECT_OPT_PEER_CA:
        return "peer_ca";
    case S3LECT_OPT_PEER_CLIENT_CERT:
        return "peer_client_cert";
    case S3LECT_OPT_REQUEST_TIMEOUT:
        return "request_timeout";
    case S3LECT_OPT_POLL_MODE:
        return "poll_mode";
    case S3LECT_OPT_RELEASE_ON_STOP:
        return "release_on_stop";
    case S3LECT_OPT_MAX_LEASE_TIMEOUT:
        return "max_lease_timeout";
    default:
        return "unknown option";
    }
}

int cfg_fail(s3lect_config *cfg, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cfg->errmsg, sizeof cfg->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

s3lect_config *s3lect_config_new(void)
{
    s3lect_config *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->lease_timeout = 15000;
    c->renew_interval = 5000;
    c->renew_deadline = 10000;
    c->frequent_interval = 5000;
    c->infrequent_interval = 30000;
    c->max_clock_skew = 0; /* the wall-clock takeover rule is opt-in */
    c->peer_timeout = 3000;
    c->request_timeout = 10000;
    c->release_on_stop = 1;
    c->path_style = -1;
    return c;
}

static char **str_slot(s3lect_config *c, int opt)
{
    switch (opt) {
    case S3LECT_OPT_LOCK:
        return &c->lock;
    case S3LECT_OPT_SERVER_ID:
        return &c->server_id;
    case S3LECT_OPT_SERVER_ADDR:
        return &c->server_addr;
    case S3LECT_OPT_PEER_HEALTH_PATH:
        return &c->peer_health_path;
    case S3LECT_OPT_ENDPOINT:
        return &c->endpoint;
    case S3LECT_OPT_REGION:
        return &c->region;
    case S3LECT_OPT_CA_FILE:
        return &c->ca_file;
    case S3LECT_OPT_ACCESS_KEY_ID:
        return &c->access_key_id;
    case S3LECT_OPT_SECRET_ACCESS_KEY:
        return &c->secret_access_key;
    case S3LECT_OPT_SESSION_TOKEN:
        return &c->session_token;
    case S3LECT_OPT_PROFILE:
        return &c->profile;
    case S3LECT_OPT_PEER_LISTEN:
        return &c->peer_listen;
    default:
        return NULL;
    }
}

static int64_t *int_slot(s3lect_config *c, int opt)
{
    switch (opt) {
    case S3LECT_OPT_LEASE_TIMEOUT:
        return &c->lease_timeout;
    case S3LECT_OPT_RENEW_INTERVAL:
        return &c->renew_interval;
    case S3LECT_OPT_RENEW_DEADLINE:
        return &c->renew_deadline;
    case S3LECT_OPT_FREQUENT_INTERVAL:
        return &c->frequent_interval;
    case S3LECT_OPT_INFREQUENT_INTERVAL:
        return &c->infrequent_interval;
    case S3LECT_OPT_MAX_CLOCK_SKEW:
        return &c->max_clock_skew;
    case S3LECT_OPT_PEER_TIMEOUT:
        return &c->peer_timeout;
    case S3LECT_OPT_REQUEST_TIMEOUT:
        return &c->request_timeout;
    case S3LECT_OPT_MAX_LEASE_TIMEOUT:
        return &c->max_lease_timeout;
    default:
        return NULL;
    }
}

static int *bool_slot(s3lect_config *c, int opt)
{
    switch (opt) {
    case S3LECT_OPT_PEER_MODE:
        return &c->peer_mode;
    case S3LECT_OPT_PATH_STYLE:
        return &c->path_style;
    case S3LECT_OPT_POLL_MODE:
        return &c->poll_mode;
    case S3LECT_OPT_RELEASE_ON_STOP:
        return &c->release_on_stop;
    default:
        return NULL;
    }
}

static cfg_blob *blob_slot(s3lect_config *c, int opt)
{
    switch (opt) {
    case S3LECT_OPT_PEER_CERT:
        return &c->peer_cert;
    case S3LECT_OPT_PEER_KEY:
        return &c->peer_key;
    case S3LECT_OPT_PEER_CA:
        return &c->peer_ca;
    case S3LECT_OPT_PEER_CLIENT_CERT:
        return &c->peer_client_cert;
    default:
        return NULL;
    }
}

static int set_blob(cfg_blob *b, const void *data, size_t len)
{
    char *copy = NULL;
    if (data) {
        copy = malloc(len + 1);
        if (!copy)
            return S3LECT_ENOMEM;
        memcpy(copy, data, len);
        copy[len] = '\0';
    }
    free(b->data);
    b->data = copy;
    b->len = data ? len : 0;
    return 0;
}

int s3lect_config_set_str(s3lect_config *cfg, s3lect_option opt, const char *value)
{
    if (!cfg)
        return S3LECT_EINVAL;
    int t = opt_type(opt);
    if (t == T_BLOB)
        return s3lect_config_set_bytes(cfg, opt, value, value ? strlen(value) : 0);
    if (t != T_STR)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %s (%d) does not take a string", opt_name(opt),
                        (int)opt);
    if (opt == S3LECT_OPT_REGION && value && value[0] && !cfg_region_valid(value))
        return cfg_fail(cfg, S3LECT_EINVAL,
                        "region '%.80s' is not a region name: letters, digits, '-' and '_', at "
                        "most 64, e.g. us-east-1",
                        value);
    if (opt == S3LECT_OPT_PEER_HEALTH_PATH && value && value[0] != '/')
        return cfg_fail(cfg, S3LECT_EINVAL, "peer_health_path must start with '/', got '%.100s'",
                        value);
    return u_setstr(str_slot(cfg, opt), value) ? S3LECT_ENOMEM : 0;
}

int s3lect_config_set_bytes(s3lect_config *cfg, s3lect_option opt, const void *data, size_t len)
{
    if (!cfg)
        return S3LECT_EINVAL;
    if (opt_type(opt) != T_BLOB)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %s (%d) does not take bytes", opt_name(opt),
                        (int)opt);
    return set_blob(blob_slot(cfg, opt), data, len);
}

int s3lect_config_set_int(s3lect_config *cfg, s3lect_option opt, int64_t value)
{
    if (!cfg)
        return S3LECT_EINVAL;
    int t = opt_type(opt);
    if (t == T_BOOL)
        return s3lect_config_set_bool(cfg, opt, value != 0);
    if (t != T_INT)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %s (%d) does not take an integer",
                        opt_name(opt), (int)opt);
    int64_t lo = opt == S3LECT_OPT_MAX_CLOCK_SKEW || opt == S3LECT_OPT_MAX_LEASE_TIMEOUT ? 0 : 10,
            hi = 86400000;
    if (opt == S3LECT_OPT_LEASE_TIMEOUT)
        lo = 100;
    if (opt == S3LECT_OPT_REQUEST_TIMEOUT) {
        lo = 100;
        hi = 600000;
    }
    if (value < lo || value > hi)
        return cfg_fail(cfg, S3LECT_EINVAL, "%s must be between %lld ms and %lld ms, got %lld ms",
                        opt_name(opt), (long long)lo, (long long)hi, (long long)value);
    *int_slot(cfg, opt) = value;
    return 0;
}

int s3lect_config_set_bool(s3lect_config *cfg, s3lect_option opt, int value)
{
    if (!cfg)
        return S3LECT_EINVAL;
    if (opt_type(opt) != T_BOOL)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %s (%d) does not take a boolean", opt_name(opt),
                        (int)opt);
    *bool_slot(cfg, opt) = value != 0;
    return 0;
}

int s3lect_config_get_int(const s3lect_config *cfg, s3lect_option opt, int64_t *out)
{
    s3lect_config *c = (s3lect_config *)cfg;
    if (!cfg || !out)
        return S3LECT_EINVAL;
    if (opt_type(opt) == T_INT) {
        *out = *int_slot(c, opt);
        return 0;
    }
    if (opt_type(opt) == T_BOOL) {
        *out = *bool_slot(c, opt);
        return 0;
    }
    return S3LECT_EINVAL;
}

int s3lect_config_get_str(const s3lect_config *cfg, s3lect_option opt, char *buf, size_t buflen)
{
    s3lect_config *c = (s3lect_config *)cfg;
    if (!cfg)
        return S3LECT_EINVAL;
    if (opt == S3LECT_OPT_SECRET_ACCESS_KEY || opt == S3LECT_OPT_SESSION_TOKEN)
        return (int)u_copyout("", buf, buflen);
    if (opt == S3LECT_OPT_PEER_HEALTH_PATH && !c->peer_health_path)
        return (int)u_copyout("/health/leadership", buf, buflen);
    if (opt_type(opt) == T_STR)
        return (int)u_copyout(*str_slot(c, opt), buf, buflen);
    if (opt_type(opt) == T_BLOB)
        return (int)u_copyout(blob_slot(c, opt)->data, buf, buflen);
    return S3LECT_EINVAL;
}

size_t s3lect_config_errmsg(const s3lect_config *cfg, char *buf, size_t buflen)
{
    return u_copyout(cfg ? cfg->errmsg : "NULL config", buf, buflen);
}

void cfg_custom_release(cfg_custom *c)
{
    if (!c)
        return;
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        if (c->userdata_free)
            c->userdata_free(c->userdata);
        free(c);
    }
}

int s3lect_config_set_custom_store(s3lect_config *cfg, s3lect_store_get_fn get,
                                   s3lect_store_put_fn put, void *userdata,
                                   s3lect_free_fn userdata_free)
{
    cfg_custom *c = NULL;
    if (!cfg || !get || !put) {
        if (userdata_free)
            userdata_free(userdata);
        return cfg ? cfg_fail(cfg, S3LECT_EINVAL, "custom store needs both get and put functions")
                   : S3LECT_EINVAL;
    }
    if (!(c = calloc(1, sizeof *c))) {
        if (userdata_free)
            userdata_free(userdata);
        return S3LECT_ENOMEM;
    }
    c->refs = 1;
    c->get = get;
    c->put = put;
    c->userdata = userdata;
    c->userdata_free = userdata_free;
    cfg_custom_release(cfg->custom);
    cfg->custom = c;
    return 0;
}

void s3lect_config_free(s3lect_config *c)
{
    if (!c)
        return;
    char **strs[] = {
        &c->lock,    &c->server_id,  &c->server_addr,   &c->peer_health_path,  &c->endpoint,
        &c->region,  &c->ca_file,    &c->access_key_id, &c->secret_access_key, &c->session_token,
        &c->profile, &c->peer_listen};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        free(*strs[i]);
    cfg_blob *blobs[] = {&c->peer_cert, &c->peer_key, &c->peer_ca, &c->peer_client_cert};
    for (size_t i = 0; i < 4; i++)
        free(blobs[i]->data);
    cfg_custom_release(c->custom);
    free(c);
}

s3lect_config *s3lect_config_dup(const s3lect_config *src)
{
    if (!src)
        return NULL;
    s3lect_config *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    *c = *src;
    char **strs[] = {
        &c->lock,    &c->server_id,  &c->server_addr,   &c->peer_health_path,  &c->endpoint,
        &c->region,  &c->ca_file,    &c->access_key_id, &c->secret_access_key, &c->session_token,
        &c->profile, &c->peer_listen};
    int oom = 0;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (*strs[i] && !(*strs[i] = u_strdup(*strs[i])))
            oom = 1;
    cfg_blob *blobs[] = {&c->peer_cert, &c->peer_key, &c->peer_ca, &c->peer_client_cert};
    for (size_t i = 0; i < 4; i++) {
        if (blobs[i]->data) {
            char *d = malloc(blobs[i]->len + 1);
            if (d)
                memcpy(d, blobs[i]->data, blobs[i]->len + 1);
            else
                oom = 1;
            blobs[i]->data = d;
        }
    }
    if (c->custom)
        __atomic_add_fetch(&c->custom->refs, 1, __ATOMIC_ACQ_REL);
    if (oom) {
        s3lect_config_free(c);
        return NULL;
    }
    return c;
}

static void fmt_ms(int64_t ms, char *out, size_t n)
{
    if (ms % 1000 == 0)
        snprintf(out, n, "%llds", (long long)(ms / 1000));
    else
        snprintf(out, n, "%lldms", (long long)ms);
}

int cfg_validate_timing(s3lect_config *c)
{
    char a[32], b[32];
    if (c->renew_interval >= c->renew_deadline) {
        fmt_ms(c->renew_interval, a, sizeof a);
        fmt_ms(c->renew_deadline, b, sizeof b);
        return cfg_fail(c, S3LECT_EINVAL,
                        "renew_interval (%s) must be less than renew_deadline (%s): lower "
                        "renew_interval or raise renew_deadline",
                        a, b);
    }
    if (c->renew_deadline >= c->lease_timeout) {
        fmt_ms(c->renew_deadline, a, sizeof a);
        fmt_ms(c->lease_timeout, b, sizeof b);
        return cfg_fail(c, S3LECT_EINVAL,
                        "renew_deadline (%s) must be less than lease_timeout (%s): the gap is the "
                        "safety margin; lower renew_deadline or raise lease_timeout",
                        a, b);
    }
    if (c->max_lease_timeout > 0 && c->max_lease_timeout < c->lease_timeout) {
        fmt_ms(c->max_lease_timeout, a, sizeof a);
        fmt_ms(c->lease_timeout, b, sizeof b);
        return cfg_fail(c, S3LECT_EINVAL,
                        "max_lease_timeout (%s) must not be less than lease_timeout (%s): it "
                        "bounds the lease other nodes may advertise, ours included",
                        a, b);
    }
    if (c->infrequent_interval < c->frequent_interval) {
        fmt_ms(c->infrequent_interval, a, sizeof a);
        fmt_ms(c->frequent_interval, b, sizeof b);
        return cfg_fail(c, S3LECT_EINVAL,
                        "infrequent_interval (%s) must not be less than frequent_interval (%s)", a,
                        b);
    }
    return 0;
}

int cfg_region_valid(const char *r)
{
    size_t n = r ? strlen(r) : 0;
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = r[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

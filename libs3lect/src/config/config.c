/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - the configuration handle: defaults, typed setters, validation. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The one table of options: name, type, the bounds s3lect_config_set_int
 * enforces, the default of a new configuration and where the value lives.
 * s3lect_option_info() publishes it; the setters, the getters,
 * s3lect_config_new/dup/free all read it. Indexed by s3lect_option; entry 0
 * is not an option. Ints are in ms; bools 0/1 (path_style -1: automatic). */
typedef struct opt_def {
    const char *name;
    int type; /* s3lect_option_type; 0: not an option */
    int64_t lo, hi, def;
    size_t off; /* offsetof the value in struct s3lect_config */
} opt_def;

#define DAY_MS 86400000
#define OFF(field) offsetof(struct s3lect_config, field)

/* clang-format off */
static const opt_def opt_defs[] = {
    /* [option] = {name, type, min, max, default (ints in ms), where it lives} */
    [S3LECT_OPT_LOCK] = {"lock", S3LECT_OPTION_STR, 0, 0, 0, OFF(lock)},
    [S3LECT_OPT_SERVER_ID] = {"server_id", S3LECT_OPTION_STR, 0, 0, 0, OFF(server_id)},
    [S3LECT_OPT_SERVER_ADDR] = {"server_addr", S3LECT_OPTION_STR, 0, 0, 0, OFF(server_addr)},
    [S3LECT_OPT_LEASE_TIMEOUT] = {"lease_timeout", S3LECT_OPTION_INT, 100, DAY_MS, 15000, OFF(lease_timeout)},
    [S3LECT_OPT_RENEW_INTERVAL] = {"renew_interval", S3LECT_OPTION_INT, 10, DAY_MS, 5000, OFF(renew_interval)},
    [S3LECT_OPT_RENEW_DEADLINE] = {"renew_deadline", S3LECT_OPTION_INT, 10, DAY_MS, 10000, OFF(renew_deadline)},
    [S3LECT_OPT_FREQUENT_INTERVAL] = {"frequent_interval", S3LECT_OPTION_INT, 10, DAY_MS, 5000, OFF(frequent_interval)},
    [S3LECT_OPT_INFREQUENT_INTERVAL] = {"infrequent_interval", S3LECT_OPTION_INT, 10, DAY_MS, 30000, OFF(infrequent_interval)},
    /* 0: the wall-clock takeover rule is off (opt-in) */
    [S3LECT_OPT_MAX_CLOCK_SKEW] = {"max_clock_skew", S3LECT_OPTION_INT, 0, DAY_MS, 0, OFF(max_clock_skew)},
    [S3LECT_OPT_PEER_MODE] = {"peer_mode", S3LECT_OPTION_BOOL, 0, 1, 0, OFF(peer_mode)},
    [S3LECT_OPT_PEER_HEALTH_PATH] = {"peer_health_path", S3LECT_OPTION_STR, 0, 0, 0, OFF(peer_health_path)},
    [S3LECT_OPT_PEER_TIMEOUT] = {"peer_timeout", S3LECT_OPTION_INT, 10, DAY_MS, 3000, OFF(peer_timeout)},
    [S3LECT_OPT_ENDPOINT] = {"endpoint", S3LECT_OPTION_STR, 0, 0, 0, OFF(endpoint)},
    [S3LECT_OPT_REGION] = {"region", S3LECT_OPTION_STR, 0, 0, 0, OFF(region)},
    /* -1: automatic (IP addresses, localhost) */
    [S3LECT_OPT_PATH_STYLE] = {"path_style", S3LECT_OPTION_BOOL, 0, 1, -1, OFF(path_style)},
    [S3LECT_OPT_CA_FILE] = {"ca_file", S3LECT_OPTION_STR, 0, 0, 0, OFF(ca_file)},
    [S3LECT_OPT_ACCESS_KEY_ID] = {"access_key_id", S3LECT_OPTION_STR, 0, 0, 0, OFF(access_key_id)},
    [S3LECT_OPT_SECRET_ACCESS_KEY] = {"secret_access_key", S3LECT_OPTION_STR, 0, 0, 0, OFF(secret_access_key)},
    [S3LECT_OPT_SESSION_TOKEN] = {"session_token", S3LECT_OPTION_STR, 0, 0, 0, OFF(session_token)},
    [S3LECT_OPT_PROFILE] = {"profile", S3LECT_OPTION_STR, 0, 0, 0, OFF(profile)},
    [S3LECT_OPT_PEER_LISTEN] = {"peer_listen", S3LECT_OPTION_STR, 0, 0, 0, OFF(peer_listen)},
    [S3LECT_OPT_PEER_CERT] = {"peer_cert", S3LECT_OPTION_BYTES, 0, 0, 0, OFF(peer_cert)},
    [S3LECT_OPT_PEER_KEY] = {"peer_key", S3LECT_OPTION_BYTES, 0, 0, 0, OFF(peer_key)},
    [S3LECT_OPT_PEER_CA] = {"peer_ca", S3LECT_OPTION_BYTES, 0, 0, 0, OFF(peer_ca)},
    [S3LECT_OPT_PEER_CLIENT_CERT] = {"peer_client_cert", S3LECT_OPTION_BYTES, 0, 0, 0, OFF(peer_client_cert)},
    [S3LECT_OPT_REQUEST_TIMEOUT] = {"request_timeout", S3LECT_OPTION_INT, 100, 600000, 10000, OFF(request_timeout)},
    [S3LECT_OPT_POLL_MODE] = {"poll_mode", S3LECT_OPTION_BOOL, 0, 1, 0, OFF(poll_mode)},
    [S3LECT_OPT_RELEASE_ON_STOP] = {"release_on_stop", S3LECT_OPTION_BOOL, 0, 1, 1, OFF(release_on_stop)},
    /* 0: 4 × lease_timeout */
    [S3LECT_OPT_MAX_LEASE_TIMEOUT] = {"max_lease_timeout", S3LECT_OPTION_INT, 0, DAY_MS, 0, OFF(max_lease_timeout)},
    /* Sizes of the process's shared runtime (counts, not ms) */
    [S3LECT_OPT_MAX_CONNECTIONS] = {"max_connections", S3LECT_OPTION_INT, 1, 1024, 64, OFF(max_connections)},
    [S3LECT_OPT_WORKER_THREADS] = {"worker_threads", S3LECT_OPTION_INT, 1, 64, 4, OFF(worker_threads)},
    [S3LECT_OPT_CALLBACK_THREADS] = {"callback_threads", S3LECT_OPTION_INT, 1, 64, 2, OFF(callback_threads)},
};
/* clang-format on */

#define N_OPT_DEFS ((int)(sizeof opt_defs / sizeof opt_defs[0]))

/* The option's entry, or NULL when opt is not an option. */
static const opt_def *opt_def_of(int opt)
{
    if (opt < 1 || opt >= N_OPT_DEFS || !opt_defs[opt].type)
        return NULL;
    return &opt_defs[opt];
}

static int opt_type(int opt)
{
    const opt_def *d = opt_def_of(opt);
    return d ? d->type : 0;
}

static const char *opt_name(int opt)
{
    const opt_def *d = opt_def_of(opt);
    return d ? d->name : "unknown option";
}

/* Where option opt's value lives in c (its type is opt_type(opt)). */
static void *opt_slot(const s3lect_config *c, int opt)
{
    return (char *)c + opt_defs[opt].off;
}

int s3lect_option_count(void)
{
    return N_OPT_DEFS - 1;
}

int s3lect_option_info(int opt, const char **name, int *type, int64_t *min, int64_t *max,
                       int64_t *default_value)
{
    const opt_def *d = opt_def_of(opt);
    if (!d)
        return S3LECT_EINVAL;
    if (name)
        *name = d->name;
    if (type)
        *type = d->type;
    if (min)
        *min = d->lo;
    if (max)
        *max = d->hi;
    if (default_value)
        *default_value = d->def;
    return S3LECT_OK;
}

int s3lect_option_by_name(const char *name)
{
    if (!name)
        return 0;
    for (int opt = 1; opt < N_OPT_DEFS; opt++)
        if (opt_defs[opt].type && strcmp(opt_defs[opt].name, name) == 0)
            return opt;
    return 0;
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
    for (int opt = 1; opt < N_OPT_DEFS; opt++) {
        if (opt_defs[opt].type == S3LECT_OPTION_INT)
            *(int64_t *)opt_slot(c, opt) = opt_defs[opt].def;
        else if (opt_defs[opt].type == S3LECT_OPTION_BOOL)
            *(int *)opt_slot(c, opt) = (int)opt_defs[opt].def;
    }
    return c;
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
    if (t == S3LECT_OPTION_BYTES)
        return s3lect_config_set_bytes(cfg, opt, value, value ? strlen(value) : 0);
    if (t != S3LECT_OPTION_STR)
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
    return u_setstr((char **)opt_slot(cfg, opt), value) ? S3LECT_ENOMEM : 0;
}

int s3lect_config_set_bytes(s3lect_config *cfg, s3lect_option opt, const void *data, size_t len)
{
    if (!cfg)
        return S3LECT_EINVAL;
    if (opt_type(opt) != S3LECT_OPTION_BYTES)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %s (%d) does not take bytes", opt_name(opt),
                        (int)opt);
    return set_blob((cfg_blob *)opt_slot(cfg, opt), data, len);
}

int s3lect_config_set_int(s3lect_config *cfg, s3lect_option opt, int64_t value)
{
    if (!cfg)
        return S3LECT_EINVAL;
    int t = opt_type(opt);
    if (t == S3LECT_OPTION_BOOL)
        return s3lect_config_set_bool(cfg, opt, value != 0);
    if (t != S3LECT_OPTION_INT)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %s (%d) does not take an integer",
                        opt_name(opt), (int)opt);
    int64_t lo = opt_defs[opt].lo, hi = opt_defs[opt].hi;
    int count = opt == S3LECT_OPT_MAX_CONNECTIONS || opt == S3LECT_OPT_WORKER_THREADS ||
                opt == S3LECT_OPT_CALLBACK_THREADS;
    const char *u = count ? "" : " ms";
    if (value < lo || value > hi)
        return cfg_fail(cfg, S3LECT_EINVAL, "%s must be between %lld%s and %lld%s, got %lld%s",
                        opt_name(opt), (long long)lo, u, (long long)hi, u, (long long)value, u);
    *(int64_t *)opt_slot(cfg, opt) = value;
    return 0;
}

int s3lect_config_set_bool(s3lect_config *cfg, s3lect_option opt, int value)
{
    if (!cfg)
        return S3LECT_EINVAL;
    if (opt_type(opt) != S3LECT_OPTION_BOOL)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %s (%d) does not take a boolean", opt_name(opt),
                        (int)opt);
    *(int *)opt_slot(cfg, opt) = value != 0;
    return 0;
}

int s3lect_config_get_int(const s3lect_config *cfg, s3lect_option opt, int64_t *out)
{
    s3lect_config *c = (s3lect_config *)cfg;
    if (!cfg || !out)
        return S3LECT_EINVAL;
    if (opt_type(opt) == S3LECT_OPTION_INT) {
        *out = *(int64_t *)opt_slot(c, opt);
        return 0;
    }
    if (opt_type(opt) == S3LECT_OPTION_BOOL) {
        *out = *(int *)opt_slot(c, opt);
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
    if (opt_type(opt) == S3LECT_OPTION_STR)
        return (int)u_copyout(*(char **)opt_slot(c, opt), buf, buflen);
    if (opt_type(opt) == S3LECT_OPTION_BYTES)
        return (int)u_copyout(((cfg_blob *)opt_slot(c, opt))->data, buf, buflen);
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
    for (int opt = 1; opt < N_OPT_DEFS; opt++) {
        if (opt_defs[opt].type == S3LECT_OPTION_STR)
            free(*(char **)opt_slot(c, opt));
        else if (opt_defs[opt].type == S3LECT_OPTION_BYTES)
            free(((cfg_blob *)opt_slot(c, opt))->data);
    }
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
    int oom = 0;
    for (int opt = 1; opt < N_OPT_DEFS; opt++) {
        if (opt_defs[opt].type == S3LECT_OPTION_STR) {
            char **str = opt_slot(c, opt);
            if (*str && !(*str = u_strdup(*str)))
                oom = 1;
        } else if (opt_defs[opt].type == S3LECT_OPTION_BYTES) {
            cfg_blob *blob = opt_slot(c, opt);
            if (blob->data) {
                char *d = malloc(blob->len + 1);
                if (d)
                    memcpy(d, blob->data, blob->len + 1);
                else
                    oom = 1;
                blob->data = d;
            }
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

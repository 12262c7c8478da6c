/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - the configuration handle: defaults, typed setters, validation. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "duration.h"
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
    /* The environment column: the S3LECT_* variable s3lect_config_set_from_env
     * reads for the option, and a shorter name it also takes (the CLI's flag,
     * --id for S3LECT_ID); NULL: none. Credentials have none (the store's own
     * variables, AWS_* and the like, are read where the store opens), nor has
     * poll_mode (a binding's choice, not a deployment's). */
    const char *env, *env_alias;
    int flags; /* s3lect_option_flag bits: unit, secret, run time, process-wide */
} opt_def;

#define DAY_MS 86400000
#define OFF(field) offsetof(struct s3lect_config, field)
/* The facts of s3lect_option_flags, short: a duration s3lect_update_config
 * applies, one it does not, a secret, a size of the shared runtime. */
#define TIMING (S3LECT_OPTION_UNIT_MS | S3LECT_OPTION_RUNTIME)
#define MS S3LECT_OPTION_UNIT_MS
#define SECRET S3LECT_OPTION_SECRET
#define RT_SIZE (S3LECT_OPTION_UNIT_COUNT | S3LECT_OPTION_PROCESS_WIDE)
#define ENV(var) var, NULL
#define ENV2(var, alias) var, alias
#define NO_ENV NULL, NULL

/* clang-format off */
static const opt_def opt_defs[] = {
    /* [option] = {name, type, min, max, default (ints in ms), where it lives, variable, facts} */
    [S3LECT_OPT_LOCK] = {"lock", S3LECT_OPTION_STR, 0, 0, 0, OFF(lock), ENV("S3LECT_LOCK"), 0},
    [S3LECT_OPT_SERVER_ID] = {"server_id", S3LECT_OPTION_STR, 0, 0, 0, OFF(server_id), ENV2("S3LECT_SERVER_ID", "S3LECT_ID"), 0},
    [S3LECT_OPT_SERVER_ADDR] = {"server_addr", S3LECT_OPTION_STR, 0, 0, 0, OFF(server_addr), ENV2("S3LECT_SERVER_ADDR", "S3LECT_ADDR"), 0},
    [S3LECT_OPT_LEASE_TIMEOUT] = {"lease_timeout", S3LECT_OPTION_INT, 100, DAY_MS, 15000, OFF(lease_timeout), ENV("S3LECT_LEASE_TIMEOUT"), TIMING},
    [S3LECT_OPT_RENEW_INTERVAL] = {"renew_interval", S3LECT_OPTION_INT, 10, DAY_MS, 5000, OFF(renew_interval), ENV("S3LECT_RENEW_INTERVAL"), TIMING},
    [S3LECT_OPT_RENEW_DEADLINE] = {"renew_deadline", S3LECT_OPTION_INT, 10, DAY_MS, 10000, OFF(renew_deadline), ENV("S3LECT_RENEW_DEADLINE"), TIMING},
    [S3LECT_OPT_FREQUENT_INTERVAL] = {"frequent_interval", S3LECT_OPTION_INT, 10, DAY_MS, 5000, OFF(frequent_interval), ENV("S3LECT_FREQUENT_INTERVAL"), TIMING},
    [S3LECT_OPT_INFREQUENT_INTERVAL] = {"infrequent_interval", S3LECT_OPTION_INT, 10, DAY_MS, 30000, OFF(infrequent_interval), ENV("S3LECT_INFREQUENT_INTERVAL"), TIMING},
    /* 0: the wall-clock takeover rule is off (opt-in) */
    [S3LECT_OPT_MAX_CLOCK_SKEW] = {"max_clock_skew", S3LECT_OPTION_INT, 0, DAY_MS, 0, OFF(max_clock_skew), ENV("S3LECT_MAX_CLOCK_SKEW"), TIMING},
    [S3LECT_OPT_PEER_MODE] = {"peer_mode", S3LECT_OPTION_BOOL, 0, 1, 0, OFF(peer_mode), ENV2("S3LECT_PEER_MODE", "S3LECT_PEER"), 0},
    [S3LECT_OPT_PEER_HEALTH_PATH] = {"peer_health_path", S3LECT_OPTION_STR, 0, 0, 0, OFF(peer_health_path), ENV("S3LECT_PEER_HEALTH_PATH"), 0},
    [S3LECT_OPT_PEER_TIMEOUT] = {"peer_timeout", S3LECT_OPTION_INT, 10, DAY_MS, 3000, OFF(peer_timeout), ENV("S3LECT_PEER_TIMEOUT"), TIMING},
    [S3LECT_OPT_ENDPOINT] = {"endpoint", S3LECT_OPTION_STR, 0, 0, 0, OFF(endpoint), ENV("S3LECT_ENDPOINT"), 0},
    [S3LECT_OPT_REGION] = {"region", S3LECT_OPTION_STR, 0, 0, 0, OFF(region), ENV("S3LECT_REGION"), 0},
    /* -1: automatic (IP addresses, localhost) */
    [S3LECT_OPT_PATH_STYLE] = {"path_style", S3LECT_OPTION_BOOL, 0, 1, -1, OFF(path_style), ENV("S3LECT_PATH_STYLE"), 0},
    [S3LECT_OPT_CA_FILE] = {"ca_file", S3LECT_OPTION_STR, 0, 0, 0, OFF(ca_file), ENV("S3LECT_CA_FILE"), 0},
    [S3LECT_OPT_ACCESS_KEY_ID] = {"access_key_id", S3LECT_OPTION_STR, 0, 0, 0, OFF(access_key_id), NO_ENV, 0},
    [S3LECT_OPT_SECRET_ACCESS_KEY] = {"secret_access_key", S3LECT_OPTION_STR, 0, 0, 0, OFF(secret_access_key), NO_ENV, SECRET},
    [S3LECT_OPT_SESSION_TOKEN] = {"session_token", S3LECT_OPTION_STR, 0, 0, 0, OFF(session_token), NO_ENV, SECRET},
    [S3LECT_OPT_PROFILE] = {"profile", S3LECT_OPTION_STR, 0, 0, 0, OFF(profile), NO_ENV, 0},
    [S3LECT_OPT_PEER_LISTEN] = {"peer_listen", S3LECT_OPTION_STR, 0, 0, 0, OFF(peer_listen), ENV("S3LECT_PEER_LISTEN"), 0},
    [S3LECT_OPT_PEER_CERT] = {"peer_cert", S3LECT_OPTION_BYTES, 0, 0, 0, OFF(peer_cert), ENV("S3LECT_PEER_CERT"), 0},
    [S3LECT_OPT_PEER_KEY] = {"peer_key", S3LECT_OPTION_BYTES, 0, 0, 0, OFF(peer_key), ENV("S3LECT_PEER_KEY"), SECRET},
    [S3LECT_OPT_PEER_CA] = {"peer_ca", S3LECT_OPTION_BYTES, 0, 0, 0, OFF(peer_ca), ENV("S3LECT_PEER_CA"), 0},
    [S3LECT_OPT_PEER_CLIENT_CERT] = {"peer_client_cert", S3LECT_OPTION_BYTES, 0, 0, 0, OFF(peer_client_cert), ENV("S3LECT_PEER_CLIENT_CERT"), SECRET},
    [S3LECT_OPT_REQUEST_TIMEOUT] = {"request_timeout", S3LECT_OPTION_INT, 100, 600000, 10000, OFF(request_timeout), ENV("S3LECT_REQUEST_TIMEOUT"), TIMING},
    [S3LECT_OPT_POLL_MODE] = {"poll_mode", S3LECT_OPTION_BOOL, 0, 1, 0, OFF(poll_mode), NO_ENV, 0},
    [S3LECT_OPT_RELEASE_ON_STOP] = {"release_on_stop", S3LECT_OPTION_BOOL, 0, 1, 1, OFF(release_on_stop), ENV("S3LECT_RELEASE_ON_STOP"), 0},
    /* 0: 4 × lease_timeout */
    [S3LECT_OPT_MAX_LEASE_TIMEOUT] = {"max_lease_timeout", S3LECT_OPTION_INT, 0, DAY_MS, 0, OFF(max_lease_timeout), ENV("S3LECT_MAX_LEASE_TIMEOUT"), MS},
    /* Sizes of the process's shared runtime (counts, not ms) */
    [S3LECT_OPT_MAX_CONNECTIONS] = {"max_connections", S3LECT_OPTION_INT, 1, 1024, 64, OFF(max_connections), ENV("S3LECT_MAX_CONNECTIONS"), RT_SIZE},
    [S3LECT_OPT_WORKER_THREADS] = {"worker_threads", S3LECT_OPTION_INT, 1, 64, 4, OFF(worker_threads), ENV("S3LECT_WORKER_THREADS"), RT_SIZE},
    [S3LECT_OPT_CALLBACK_THREADS] = {"callback_threads", S3LECT_OPTION_INT, 1, 64, 2, OFF(callback_threads), ENV("S3LECT_CALLBACK_THREADS"), RT_SIZE},
    /* 0: renew_deadline */
    [S3LECT_OPT_LEADER_HOLD] = {"leader_hold", S3LECT_OPTION_INT, 0, DAY_MS, 0, OFF(leader_hold), ENV("S3LECT_LEADER_HOLD"), TIMING},
    /* -1: lease_timeout, at least leader_hold */
    [S3LECT_OPT_NEW_LOCK_WAIT] = {"new_lock_wait", S3LECT_OPTION_INT, -1, DAY_MS, -1, OFF(new_lock_wait), ENV("S3LECT_NEW_LOCK_WAIT"), TIMING},
    [S3LECT_OPT_PRIORITY] = {"priority", S3LECT_OPTION_INT, 0, 1000000, 0, OFF(priority), ENV("S3LECT_PRIORITY"), S3LECT_OPTION_UNIT_COUNT},
    /* 0: never */
    [S3LECT_OPT_MAX_HOLD] = {"max_hold", S3LECT_OPTION_INT, 0, DAY_MS, 0, OFF(max_hold), ENV("S3LECT_MAX_HOLD"), MS},
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

int s3lect_option_flags(int opt)
{
    const opt_def *d = opt_def_of(opt);
    return d ? d->flags : S3LECT_EINVAL;
}

#define SET_BIT(opt) ((uint64_t)1 << (opt))

static void mark(s3lect_config *c, int opt, int set)
{
    if (set)
        c->set |= SET_BIT(opt);
    else
        c->set &= ~SET_BIT(opt);
}

static int was_set(const s3lect_config *c, int opt)
{
    return (c->set & SET_BIT(opt)) != 0;
}

int s3lect_config_is_set(const s3lect_config *cfg, s3lect_option opt)
{
    if (!cfg || !opt_def_of(opt))
        return S3LECT_EINVAL;
    return was_set(cfg, opt);
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

int s3lect_option_env(int opt, const char **name, const char **alias)
{
    const opt_def *d = opt_def_of(opt);
    if (!d)
        return S3LECT_EINVAL;
    if (name)
        *name = d->env;
    if (alias)
        *alias = d->env_alias;
    return S3LECT_OK;
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
    if (u_setstr((char **)opt_slot(cfg, opt), value))
        return S3LECT_ENOMEM;
    mark(cfg, opt, value != NULL);
    return 0;
}

int s3lect_config_set_bytes(s3lect_config *cfg, s3lect_option opt, const void *data, size_t len)
{
    if (!cfg)
        return S3LECT_EINVAL;
    if (opt_type(opt) != S3LECT_OPTION_BYTES)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %s (%d) does not take bytes", opt_name(opt),
                        (int)opt);
    int rc = set_blob((cfg_blob *)opt_slot(cfg, opt), data, len);
    if (!rc)
        mark(cfg, opt, data != NULL);
    return rc;
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
    const char *u = (opt_defs[opt].flags & S3LECT_OPTION_UNIT_MS) ? " ms" : "";
    if (value < lo || value > hi)
        return cfg_fail(cfg, S3LECT_EINVAL, "%s must be between %lld%s and %lld%s, got %lld%s",
                        opt_name(opt), (long long)lo, u, (long long)hi, u, (long long)value, u);
    *(int64_t *)opt_slot(cfg, opt) = value;
    mark(cfg, opt, 1);
    cfg_derive_timing(cfg);
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
    mark(cfg, opt, 1);
    return 0;
}

/* Variable `name`'s value in envp ("NAME=value" strings up to a NULL; the
 * last of a name wins, as a shell's would), or in the process's environment
 * when envp is NULL. NULL when it is not there. */
static const char *env_lookup(const char *const *envp, const char *name)
{
    if (!envp)
        return getenv(name);
    size_t n = strlen(name);
    const char *found = NULL;
    for (; *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            found = *envp + n + 1;
    return found;
}

/* A count as s3lect_config_set_text takes it: 1..9 decimal digits. */
static int parse_count(const char *t, int64_t *out)
{
    size_t n = strspn(t, "0123456789");
    if (n == 0 || n > 9 || t[n] != '\0')
        return -1;
    *out = strtoll(t, NULL, 10);
    return 0;
}

/* A bool as s3lect_config_set_text (and the CLI's flags) take it. */
static int parse_bool(const char *t, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no",
                                                                                "off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(t, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(t, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

int s3lect_config_set_text(s3lect_config *cfg, s3lect_option opt, const char *text)
{
    if (!cfg)
        return S3LECT_EINVAL;
    const opt_def *d = opt_def_of(opt);
    if (!d)
        return cfg_fail(cfg, S3LECT_EINVAL, "option %d is not an option", (int)opt);
    if (!text)
        return cfg_fail(cfg, S3LECT_EINVAL, "%s: no text given", d->name);
    if (d->type == S3LECT_OPTION_STR || d->type == S3LECT_OPTION_BYTES)
        return s3lect_config_set_str(cfg, opt, text);
    if (d->type == S3LECT_OPTION_BOOL) {
        int b;
        if (parse_bool(text, &b))
            return cfg_fail(cfg, S3LECT_EINVAL,
                            "%s '%.100s' is not a boolean; use 1 or 0 (true/false, yes/no, on/off)",
                            d->name, text);
        return s3lect_config_set_bool(cfg, opt, b);
    }
    int64_t v;
    if (d->flags & S3LECT_OPTION_UNIT_MS) {
        int rc = cfg_parse_duration(text, &v);
        if (rc)
            return cfg_fail(cfg, S3LECT_EINVAL, "%s '%.100s' %s", d->name, text,
                            cfg_duration_error(rc));
    } else if (parse_count(text, &v)) {
        return cfg_fail(cfg, S3LECT_EINVAL,
                        "%s '%.100s' is not a count; use a whole number from %lld to %lld", d->name,
                        text, (long long)d->lo, (long long)d->hi);
    }
    return s3lect_config_set_int(cfg, opt, v);
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
        return (int)u_copyout(CFG_DEFAULT_PEER_HEALTH_PATH, buf, buflen);
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

/* The one place where unset timings are derived from set ones, so that
 * lease_timeout alone (or one poll interval alone) is a valid configuration
 * in every front end. The ratios are the defaults' (15 s : 10 s : 5 s), which
 * keep the rules below: renew_interval < renew_deadline < lease_timeout
 * (deadline 2/3 L < L; renew min(L/3, deadline/2) < deadline) and
 * infrequent >= frequent. A value that was set is never changed. */
void cfg_derive_timing(s3lect_config *c)
{
    int lease = was_set(c, S3LECT_OPT_LEASE_TIMEOUT);
    int deadline = was_set(c, S3LECT_OPT_RENEW_DEADLINE);
    int freq = was_set(c, S3LECT_OPT_FREQUENT_INTERVAL);
    int infreq = was_set(c, S3LECT_OPT_INFREQUENT_INTERVAL);
    if (lease && !deadline)
        c->renew_deadline = c->lease_timeout * 2 / 3;
    if ((lease || deadline) && !was_set(c, S3LECT_OPT_RENEW_INTERVAL)) {
        int64_t a = c->lease_timeout / 3, b = c->renew_deadline / 2;
        c->renew_interval = a < b ? a : b;
    }
    int64_t def_freq = opt_defs[S3LECT_OPT_FREQUENT_INTERVAL].def;
    int64_t def_infreq = opt_defs[S3LECT_OPT_INFREQUENT_INTERVAL].def;
    if (freq && !infreq)
        c->infrequent_interval =
            c->frequent_interval > def_infreq ? c->frequent_interval : def_infreq;
    if (infreq && !freq)
        c->frequent_interval =
            c->infrequent_interval < def_freq ? c->infrequent_interval : def_freq;
}

/* A derived value out of its option's range names where it came from. */
static int check_derived(s3lect_config *c)
{
    static const struct {
        int opt;
        const char *from;
    } derived[] = {
        {S3LECT_OPT_RENEW_DEADLINE, "2/3 of lease_timeout"},
        {S3LECT_OPT_RENEW_INTERVAL, "min(lease_timeout/3, renew_deadline/2)"},
        {S3LECT_OPT_FREQUENT_INTERVAL, "infrequent_interval"},
        {S3LECT_OPT_INFREQUENT_INTERVAL, "frequent_interval"},
    };
    cfg_derive_timing(c);
    for (size_t k = 0; k < sizeof derived / sizeof derived[0]; k++) {
        int opt = derived[k].opt;
        int64_t v = *(int64_t *)opt_slot(c, opt);
        if (was_set(c, opt) || (v >= opt_defs[opt].lo && v <= opt_defs[opt].hi))
            continue;
        char a[32], lo[32], hi[32];
        fmt_ms(v, a, sizeof a);
        fmt_ms(opt_defs[opt].lo, lo, sizeof lo);
        fmt_ms(opt_defs[opt].hi, hi, sizeof hi);
        return cfg_fail(c, S3LECT_EINVAL,
                        "%s was not set and its value derived from %s, %s, is out of range (%s "
                        "to %s); set %s too or change the value it is derived from",
                        opt_defs[opt].name, derived[k].from, a, lo, hi, opt_defs[opt].name);
    }
    return 0;
}

int cfg_validate_timing(s3lect_config *c)
{
    char a[32], b[32];
    int rc = check_derived(c);
    if (rc)
        return rc;
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

const char *cfg_peer_health_path(const s3lect_config *cfg)
{
    return cfg && cfg->peer_health_path ? cfg->peer_health_path : CFG_DEFAULT_PEER_HEALTH_PATH;
}

int s3lect_config_set_from_env(s3lect_config *cfg, const char *const *envp)
{
    if (!cfg)
        return S3LECT_EINVAL;
    for (int opt = 1; opt < N_OPT_DEFS; opt++) {
        const opt_def *d = opt_def_of(opt);
        if (!d || !d->env)
            continue;
        const char *var = d->env, *v = env_lookup(envp, var);
        if ((!v || !*v) && d->env_alias && (v = env_lookup(envp, d->env_alias)) != NULL)
            var = d->env_alias;
        if (!v || !*v) /* an empty variable is unset, in every front end */
            continue;
        int rc = s3lect_config_set_text(cfg, opt, v);
        if (rc == S3LECT_EINVAL) {
            size_t n = strlen(cfg->errmsg);
            snprintf(cfg->errmsg + n, sizeof cfg->errmsg - n, " (from the environment: %s)", var);
        }
        if (rc)
            return rc;
    }
    return S3LECT_OK;
}

int s3lect_config_get_effective_int(const s3lect_config *cfg, s3lect_option opt, int64_t *out)
{
    int rc = s3lect_config_get_int(cfg, opt, out);
    if (rc)
        return rc;
    if (opt == S3LECT_OPT_MAX_LEASE_TIMEOUT)
        *out = cfg_max_lease_of(cfg->max_lease_timeout, cfg->lease_timeout);
    else if (opt == S3LECT_OPT_NEW_LOCK_WAIT)
        *out = cfg_new_lock_wait_of(cfg->new_lock_wait, cfg->lease_timeout, cfg->leader_hold);
    return S3LECT_OK;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_rds_token.c - IAM database authentication tokens (aws/rds_token.c):
 *
 *   - rds_token_build with fixed credentials and a fixed time gives exactly
 *     the tokens of tests/data/rds_token/expected.txt, which
 *     tests/data/rds_token/gen_expected.py computes with its own SigV4
 *     presign in Python (and checks against botocore where installed);
 *   - the shape rules of the AWS documentation: no scheme, HOST:PORT/?,
 *     Action=connect, DBUser (percent-encoded), X-Amz-Expires=900,
 *     X-Amz-SignedHeaders=host, X-Amz-Security-Token exactly when there is a
 *     session token, the signature last;
 *   - bad input refused;
 *   - rds_token_get over the AWS chain (environment keys): the region from
 *     the argument, an RDS endpoint's name, then AWS_REGION; a token reused
 *     within its window, a new one for new keys, another user or region;
 *     no credentials -> S3LECT_EAUTH with no secret in the message.
 *
 *   test_rds_token EXPECTED_TXT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "rds_token.h"
#include "s3lect.h"
#include "testutil.h"
#include "util.h"

typedef struct tcase {
    const char *name, *host;
    int port;
    const char *user, *region, *akid, *secret, *token;
    time_t now;
} tcase;

/* The inputs of gen_expected.py's CASES, in its order. */
static const tcase cases[] = {
    {"plain", "mydb.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com", 5432, "iam_user",
     "us-east-1", "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", NULL, 1704164645},
    {"session", "db.example.internal", 3306, "app-user", "eu-west-1", "ASIAEXAMPLEEXAMPLE",
     "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
     "FwoGZXIvYXdzEXAMPLE//token+with/special=chars==", 1735689599},
    {"special_user", "127.0.0.1", 54321, "j\xc3\xb6rg+ops/ro@example.com %&=?", "ap-southeast-2",
     "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", NULL, 946684800},
};

static char *build(const tcase *c)
{
    rds_token_params p = {.host = c->host,
                          .port = c->port,
                          .user = c->user,
                          .region = c->region,
                          .access_key_id = c->akid,
                          .secret_access_key = c->secret,
                          .session_token = c->token,
                          .now = c->now};
    return rds_token_build(&p);
}

/* The expected token of a case from the file, or NULL. */
static char *expected(const char *file, const char *name)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return NULL;
    char line[4096], *out = NULL;
    size_t n = strlen(name);
    while (!out && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, name, n) == 0 && line[n] == '\t')
            out = u_strdup(line + n + 1);
    }
    fclose(f);
    return out;
}

/* The value of query parameter name in a token, or NULL (allocated). */
static char *param(const char *tok, const char *name)
{
    const char *q = strchr(tok, '?');
    size_t n = strlen(name);
    for (const char *p = q; p; p = strchr(p + 1, '&'))
        if (strncmp(p + 1, name, n) == 0 && p[1 + n] == '=')
            return u_asprintf("%.*s", (int)strcspn(p + 2 + n, "&"), p + 2 + n);
    return NULL;
}

static void check_shape(const tcase *c, const char *tok)
{
    char *hp = u_asprintf("%s:%d/?Action=connect&DBUser=", c->host, c->port);
    CHECK(tok && hp && strncmp(tok, hp, strlen(hp)) == 0, "%s: starts with %s", c->name, hp);
    CHECK(tok && !strstr(tok, "://"), "%s: no scheme", c->name);
    free(hp);
    if (!tok)
        return;
    static const char *const order[] = {
        "Action",         "DBUser",        "X-Amz-Algorithm",     "X-Amz-Credential",
        "X-Amz-Date",     "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Security-Token",
        "X-Amz-Signature"};
    /* Parameters in the SDKs' order; the session token only with one. */
    const char *at = tok;
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        char *v = param(tok, order[i]);
        int want = strcmp(order[i], "X-Amz-Security-Token") != 0 || c->token;
        CHECK(!!v == want, "%s: %s %s", c->name, order[i], want ? "missing" : "present");
        if (v) {
            const char *p = strstr(tok, order[i]);
            CHECK(p && p >= at, "%s: %s out of order", c->name, order[i]);
            at = p ? p : at;
        }
        free(v);
    }
    char *v = param(tok, "Action");
    CHECK(v && strcmp(v, "connect") == 0, "%s: Action=%s", c->name, v ? v : "(none)");
    free(v);
    v = param(tok, "X-Amz-Expires");
    CHECK(v && strcmp(v, "900") == 0, "%s: X-Amz-Expires=%s", c->name, v ? v : "(none)");
    free(v);
    v = param(tok, "X-Amz-SignedHeaders");
    CHECK(v && strcmp(v, "host") == 0, "%s: X-Amz-SignedHeaders=%s", c->name, v ? v : "(none)");
    free(v);
    v = param(tok, "X-Amz-Algorithm");
    CHECK(v && strcmp(v, "AWS4-HMAC-SHA256") == 0, "%s: algorithm", c->name);
    free(v);
    /* DBUser and the credential scope percent-encoded: only unreserved bytes left. */
    v = param(tok, "DBUser");
    CHECK(v && strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%") ==
                   strlen(v),
          "%s: DBUser=%s is not percent-encoded", c->name, v ? v : "(none)");
    free(v);
    v = param(tok, "X-Amz-Credential");
    char *scope = u_asprintf("%s%%2F", c->akid);
    char *tail = u_asprintf("%%2F%s%%2Frds-db%%2Faws4_request", c->region);
    CHECK(v && strncmp(v, scope, strlen(scope)) == 0 && strlen(v) > strlen(tail) &&
              strcmp(v + strlen(v) - strlen(tail), tail) == 0,
          "%s: X-Amz-Credential=%s", c->name, v ? v : "(none)");
    free(v);
    free(scope);
    free(tail);
    v = param(tok, "X-Amz-Signature");
    CHECK(v && strlen(v) == 64 && strspn(v, "0123456789abcdef") == 64, "%s: signature", c->name);
    CHECK(strstr(tok, "&X-Amz-Signature=") == tok + strlen(tok) - 64 - 17, "%s: signature last",
          c->name);
    free(v);
    /* The secret appears nowhere. */
    CHECK(!strstr(tok, c->secret), "%s: the secret is in the token", c->name);
}

static void test_build(const char *file)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *tok = build(&cases[i]);
        char *want = expected(file, cases[i].name);
        CHECK(want, "%s: no expected value in %s", cases[i].name, file);
        CHECK(tok && want && strcmp(tok, want) == 0, "%s:\n  got  %s\n  want %s", cases[i].name,
              tok ? tok : "(null)", want ? want : "(null)");
        check_shape(&cases[i], tok);
        free(tok);
        free(want);
    }
    /* Two signing times: the same but for X-Amz-Date and the signature. */
    tcase later = cases[0];
    later.now += 1;
    char *a = build(&cases[0]), *b = build(&later);
    CHECK(a && b && strcmp(a, b) != 0, "a second later gives another token");
    free(a);
    free(b);
}

static void test_bad_input(void)
{
    const tcase good = cases[0];
    struct {
        tcase c;
        const char *what;
    } bad[] = {
        {good, "empty host"},      {good, "host with a path"}, {good, "host with a space"},
        {good, "port 0"},          {good, "port 65536"},       {good, "empty user"},
        {good, "newline in user"}, {good, "bad region"},       {good, "no key"},
        {good, "no secret"},
    };
    bad[0].c.host = "";
    bad[1].c.host = "h/x";
    bad[2].c.host = "h x";
    bad[3].c.port = 0;
    bad[4].c.port = 65536;
    bad[5].c.user = "";
    bad[6].c.user = "u\nx";
    bad[7].c.region = "us east";
    bad[8].c.akid = "";
    bad[9].c.secret = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *t = build(&bad[i].c);
        CHECK(!t, "%s: accepted", bad[i].what);
        free(t);
    }
    CHECK(!rds_token_build(NULL), "NULL params accepted");
}

static void clean_env(const char *home)
{
    static const char *const vars[] = {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
    setenv("HOME", home, 1);
    char path[600];
    snprintf(path, sizeof path, "%s/none-config", home);
    setenv("AWS_CONFIG_FILE", path, 1);
    snprintf(path, sizeof path, "%s/none-credentials", home);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
}

static char *get(const struct s3lect_config *cfg, const char *host, int port, const char *user,
                 const char *region, int want_rc)
{
    char *tok = NULL, err[512] = "";
    int rc = rds_token_get(cfg, host, port, user, region, &tok, err, sizeof err);
    CHECK(rc == want_rc, "rds_token_get(%s, %d, %s): rc %d, want %d (%s)", host, port, user, rc,
          want_rc, err);
    CHECK(!strstr(err, "tsecret") && !strstr(err, "X-Amz-Signature"), "a secret in '%s'", err);
    CHECK((rc == 0) == (tok != NULL), "token and rc disagree");
    return tok;
}

static int has_region(const char *tok, const char *region)
{
    char *want = u_asprintf("%%2F%s%%2Frds-db%%2F", region);
    int ok = tok && want && strstr(tok, want) != NULL;
    free(want);
    return ok;
}

static void test_get(void)
{
    char *home = t_tmpdir("rds_token");
    clean_env(home);
    free(home); /* setenv copied it */
    struct s3lect_config cfg = {0};
    rds_token_cache_clear();

    /* No credentials anywhere. */
    char *t = get(&cfg, "db.example", 5432, "u", "us-east-1", S3LECT_EAUTH);
    free(t);

    setenv("AWS_ACCESS_KEY_ID", "AKIDTEST1", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "tsecret-one", 1);
    setenv("AWS_REGION", "us-west-2", 1);
    char *a = get(&cfg, "db.example", 5432, "u", NULL, 0);
    CHECK(has_region(a, "us-west-2"), "AWS_REGION not used: %s", a ? a : "(null)");
    static const char head[] = "db.example:5432/?Action=connect&DBUser=u&";
    CHECK(a && strncmp(a, head, strlen(head)) == 0, "shape: %s", a ? a : "(null)");
    /* Reused: a second later the same token (a new one would have another X-Amz-Date). */
    t_sleep_ms(1100);
    char *b = get(&cfg, "db.example", 5432, "u", NULL, 0);
    CHECK(a && b && strcmp(a, b) == 0, "the token was not reused");
    /* Another user, port, region: other tokens. */
    char *c = get(&cfg, "db.example", 5432, "v", NULL, 0);
    CHECK(c && strstr(c, "DBUser=v&"), "user v");
    char *d = get(&cfg, "db.example", 5433, "u", NULL, 0);
    CHECK(d && strncmp(d, "db.example:5433/", 16) == 0, "port 5433");
    char *e = get(&cfg, "db.example", 5432, "u", "eu-north-1", 0);
    CHECK(has_region(e, "eu-north-1"), "region argument not used");
    free(b);
    free(c);
    free(d);
    free(e);
    /* An RDS endpoint's name says its region, over AWS_REGION. */
    e = get(&cfg, "mydb.c1a2b3c4d5e6.eu-central-1.rds.amazonaws.com", 5432, "u", NULL, 0);
    CHECK(has_region(e, "eu-central-1"), "the endpoint's region not used: %s", e ? e : "(null)");
    free(e);
    e = get(&cfg, "mydb.c1a2b3c4d5e6.eu-central-1.rds.amazonaws.com", 5432, "u", "us-east-2", 0);
    CHECK(has_region(e, "us-east-2"), "the region argument does not win over the endpoint's");
    free(e);
    /* New keys (a static source is looked up at each call): a new token. */
    setenv("AWS_SECRET_ACCESS_KEY", "tsecret-two", 1);
    b = get(&cfg, "db.example", 5432, "u", NULL, 0);
    CHECK(a && b && strcmp(a, b) != 0, "new keys gave the old token");
    free(b);
    setenv("AWS_SESSION_TOKEN", "tsecret-session", 1);
    b = get(&cfg, "db.example", 5432, "u", NULL, 0);
    CHECK(b && strstr(b, "&X-Amz-Security-Token=tsecret-session&"), "session token: %s",
          b ? b : "(null)");
    free(b);
    /* Explicit keys in the config win over the environment. */
    cfg.access_key_id = "AKIDCONFIG";
    cfg.secret_access_key = "tsecret-config";
    b = get(&cfg, "db.example", 5432, "u", NULL, 0);
    CHECK(b && strstr(b, "X-Amz-Credential=AKIDCONFIG%2F"), "config keys: %s", b ? b : "(null)");
    free(b);
    cfg.access_key_id = cfg.secret_access_key = NULL;
    /* Bad arguments. */
    free(get(&cfg, "", 5432, "u", NULL, S3LECT_EINVAL));
    free(get(&cfg, "db", 0, "u", NULL, S3LECT_EINVAL));
    free(get(&cfg, "db", 5432, "", NULL, S3LECT_EINVAL));
    free(get(&cfg, "db", 5432, NULL, NULL, S3LECT_EINVAL));
    free(get(&cfg, "db", 5432, "u", "not a region", S3LECT_EINVAL));
    free(a);
    rds_token_cache_clear();
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_rds_token tests/data/rds_token/expected.txt\n");
        return 2;
    }
    test_build(argv[1]);
    test_bad_input();
    test_get();
    return t_done("rds_token");
}

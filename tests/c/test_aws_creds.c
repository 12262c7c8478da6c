/* SPDX-License-Identifier: Apache-2.0 */
/* test_aws_creds.c - precedence of credentials, profile, region and endpoint
 * between config, environment and the shared files (temp files, setenv). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aws_creds.h"
#include "config.h"
#include "http.h"
#include "s3_test.h"

static char tmpdir[256];

static const char *const aws_vars[] = {
    "AWS_ACCESS_KEY_ID",   "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",   "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",     "AWS_REGION",
    "AWS_DEFAULT_REGION",  "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
};

static void clean_env(void)
{
    for (size_t i = 0; i < sizeof aws_vars / sizeof aws_vars[0]; i++)
        unsetenv(aws_vars[i]);
    setenv("HOME", tmpdir, 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1); /* no instance metadata probe */
}

static char *path_in_tmp(const char *rel)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, rel);
    return p;
}

static void write_file(const char *rel, const char *text)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/.aws", tmpdir);
    mkdir(dir, 0700);
    FILE *f = fopen(path_in_tmp(rel), "w");
    if (!f) {
        perror(rel);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static void remove_files(void)
{
    unlink(path_in_tmp(".aws/credentials"));
    unlink(path_in_tmp(".aws/config"));
    unlink(path_in_tmp("other-creds"));
    unlink(path_in_tmp("other-config"));
}

/* Resolves and checks the access key id (NULL: expect EAUTH whose message
 * contains want_err). */
static void expect_creds(const struct s3lect_config *cfg, const char *want_akid,
                         const char *want_secret, const char *want_token, const char *want_source,
                         const char *want_err, const char *what)
{
    aws_creds c;
    char err[512] = "";
    int rc = aws_creds_resolve(cfg, &c, err, sizeof err);
    if (!want_akid) {
        CHECK(rc == S3LECT_EAUTH, "%s: expected EAUTH, got %d", what, rc);
        CHECK(strstr(err, want_err) != NULL, "%s: message [%s] should mention [%s]", what, err,
              want_err);
        CHECK(c.access_key_id == NULL, "%s: nothing returned on failure", what);
        return;
    }
    CHECK(rc == 0, "%s: rc %d (%s)", what, rc, err);
    if (rc != 0)
        return;
    CHECK_STR(c.access_key_id, want_akid, what);
    CHECK_STR(c.secret_access_key, want_secret, what);
    if (want_token)
        CHECK_STR(c.session_token, want_token, what);
    else
        CHECK(c.session_token == NULL, "%s: no session token expected, got one", what);
    CHECK(strstr(c.source, want_source) != NULL, "%s: source [%s] should mention [%s]", what,
          c.source, want_source);
    CHECK(strstr(c.source, want_secret) == NULL, "%s: the source never shows the secret", what);
    aws_creds_clear(&c);
    CHECK(c.access_key_id == NULL && c.secret_access_key == NULL, "%s: cleared", what);
}

static void test_credentials(void)
{
    struct s3lect_config cfg = {0};
    clean_env();
    remove_files();
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "AWS_ACCESS_KEY_ID", "nothing configured");

    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "AWS_SECRET_ACCESS_KEY is not", "env key only");
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    expect_creds(&cfg, "ENVKEY", "envsecret", NULL, "environment", NULL, "environment");
    setenv("AWS_SESSION_TOKEN", "envtoken", 1);
    expect_creds(&cfg, "ENVKEY", "envsecret", "envtoken", "environment", NULL, "env + token");

    cfg.access_key_id = "CFGKEY";
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "set both", "config key without secret");
    cfg.secret_access_key = "cfgsecret";
    expect_creds(&cfg, "CFGKEY", "cfgsecret", NULL, "configuration", NULL, "config beats env");
    cfg.session_token = "cfgtoken";
    expect_creds(&cfg, "CFGKEY", "cfgsecret", "cfgtoken", "configuration", NULL, "config token");
    cfg.access_key_id = cfg.secret_access_key = cfg.session_token = NULL;

    write_file(".aws/credentials", "# comment\n[default]\naws_access_key_id = FILEKEY\n"
                                   "aws_secret_access_key=filesecret\r\n\n"
                                   "[dev]\nAWS_ACCESS_KEY_ID = DEVKEY \n"
                                   "aws_secret_access_key = devsecret\naws_session_token=devtok\n");
    expect_creds(&cfg, "ENVKEY", "envsecret", "envtoken", "environment", NULL, "env beats file");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    expect_creds(&cfg, "FILEKEY", "filesecret", NULL, "profile 'default'", NULL, "default file");
    setenv("AWS_PROFILE", "dev", 1);
    expect_creds(&cfg, "DEVKEY", "devsecret", "devtok", "profile 'dev'", NULL, "AWS_PROFILE");
    setenv("AWS_PROFILE", "nope", 1);
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "profile 'nope' not found", "missing profile");
    unsetenv("AWS_PROFILE");
    setenv("AWS_DEFAULT_PROFILE", "dev", 1);
    expect_creds(&cfg, "DEVKEY", "devsecret", "devtok", "profile 'dev'", NULL,
                 "AWS_DEFAULT_PROFILE");
    unsetenv("AWS_DEFAULT_PROFILE");

    /* A profile named in the config wins over environment credentials. */
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    cfg.profile = "dev";
    expect_creds(&cfg, "DEVKEY", "devsecret", "devtok", "profile 'dev'", NULL,
                 "explicit profile skips env");
    cfg.profile = NULL;
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");

    /* Other file locations. */
    write_file("other-creds", "[default]\naws_access_key_id=OTHERKEY\n"
                              "aws_secret_access_key=othersecret\n");
    setenv("AWS_SHARED_CREDENTIALS_FILE", path_in_tmp("other-creds"), 1);
    expect_creds(&cfg, "OTHERKEY", "othersecret", NULL, "other-creds", NULL,
                 "AWS_SHARED_CREDENTIALS_FILE");
    setenv("AWS_SHARED_CREDENTIALS_FILE", "~/other-creds", 1);
    expect_creds(&cfg, "OTHERKEY", "othersecret", NULL, "other-creds", NULL, "~ expanded");
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");

    /* Keys in the config file's [profile x] section when the credentials file lacks them. */
    write_file(".aws/config", "[default]\nregion = eu-west-1\n"
                              "[profile cfgonly]\naws_access_key_id = CFGFILEKEY\n"
                              "aws_secret_access_key = cfgfilesecret\n"
                              "[cfgonly]\naws_access_key_id = WRONG\n"
                              "[profile keyless]\nregion = ap-south-1\n");
    cfg.profile = "cfgonly";
    expect_creds(&cfg, "CFGFILEKEY", "cfgfilesecret", NULL, "config", NULL,
                 "config file [profile x]");
    cfg.profile = "keyless";
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "has no aws_access_key_id", "profile without keys");
    cfg.profile = NULL;
    remove_files();
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "no AWS credentials found", "files removed");
}

static void expect_region(const struct s3lect_config *cfg, const char *want, const char *what)
{
    char *r = aws_region_resolve(cfg);
    CHECK_STR(r, want, what);
    free(r);
}

static void test_region(void)
{
    struct s3lect_config cfg = {0};
    clean_env();
    remove_files();
    expect_region(&cfg, "us-east-1", "default region");
    write_file(".aws/config",
               "[default]\nregion = eu-west-1\n[profile dev]\nregion=eu-central-1\n");
    expect_region(&cfg, "eu-west-1", "profile region");
    setenv("AWS_PROFILE", "dev", 1);
    expect_region(&cfg, "eu-central-1", "AWS_PROFILE region");
    cfg.profile = "default";
    expect_region(&cfg, "eu-west-1", "config profile beats AWS_PROFILE");
    setenv("AWS_DEFAULT_REGION", "us-west-1", 1);
    expect_region(&cfg, "us-west-1", "AWS_DEFAULT_REGION beats profile");
    setenv("AWS_REGION", "us-west-2", 1);
    expect_region(&cfg, "us-west-2", "AWS_REGION beats AWS_DEFAULT_REGION");
    cfg.region = "auto";
    expect_region(&cfg, "auto", "config beats env");
    cfg.region = "";
    expect_region(&cfg, "us-west-2", "empty config region means unset");
    write_file("other-config", "[profile x]\nregion = sa-east-1\n");
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    setenv("AWS_CONFIG_FILE", path_in_tmp("other-config"), 1);
    cfg.profile = "x";
    expect_region(&cfg, "sa-east-1", "AWS_CONFIG_FILE");
}

static void expect_endpoint(const struct s3lect_config *cfg, const char *want, const char *what)
{
    int oom = 0;
    char *e = aws_endpoint_resolve(cfg, &oom);
    CHECK(!oom, "%s: no oom", what);
    if (want)
        CHECK_STR(e, want, what);
    else
        CHECK(e == NULL, "%s: expected no endpoint, got [%s]", what, e);
    free(e);
}

static void test_endpoint(void)
{
    struct s3lect_config cfg = {0};
    clean_env();
    remove_files();
    expect_endpoint(&cfg, NULL, "no endpoint: AWS");
    write_file(".aws/config", "[default]\nendpoint_url = http://profile:1\n"
                              "[profile s3sub]\nendpoint_url = http://generic:2\ns3 =\n"
                              "  endpoint_url = http://s3only:3\n  addressing_style = path\n"
                              "region = r\n");
    expect_endpoint(&cfg, "http://profile:1", "profile endpoint_url");
    cfg.profile = "s3sub";
    expect_endpoint(&cfg, "http://s3only:3", "s3 sub-section beats endpoint_url");
    setenv("AWS_ENDPOINT_URL", "http://envgeneric:4", 1);
    expect_endpoint(&cfg, "http://envgeneric:4", "AWS_ENDPOINT_URL beats profile");
    setenv("AWS_ENDPOINT_URL_S3", "http://envs3:5", 1);
    expect_endpoint(&cfg, "http://envs3:5", "AWS_ENDPOINT_URL_S3 beats AWS_ENDPOINT_URL");
    setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
    expect_endpoint(&cfg, NULL, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    cfg.endpoint = "http://cfg:6";
    expect_endpoint(&cfg, "http://cfg:6", "config always wins");
    unsetenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    expect_endpoint(&cfg, "http://cfg:6", "config beats env");
    remove_files();
}

/* A malformed or unreadable shared file is named, with what is wrong, and
 * counted; never a value from it (issue 26 item 9). */
static void test_bad_files(void)
{
    struct s3lect_config cfg = {0};
    char msg[800];
    uint64_t c0, k0, c1, k1;
    clean_env();
    remove_files();
    while (aws_file_problem_take(msg, sizeof msg)) /* whatever earlier tests left */
        ;
    aws_file_error_totals(&c0, &k0);

    /* Keys before any header: no [default] profile, and the error says why. */
    write_file(".aws/credentials", "aws_access_key_id = BADKEYVALUE\n"
                                   "aws_secret_access_key = SECRETVALUE\n");
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "line 1: 'key = value' before any [section]",
                 "keys without a header");
    expect_creds(&cfg, NULL, NULL, NULL, NULL, path_in_tmp(".aws/credentials"),
                 "the message names the file");
    aws_file_error_totals(&c1, &k1);
    CHECK(c1 > c0 && k1 == k0, "credentials errors %llu -> %llu, config %llu -> %llu",
          (unsigned long long)c0, (unsigned long long)c1, (unsigned long long)k0,
          (unsigned long long)k1);
    CHECK(aws_file_problem_take(msg, sizeof msg) == 1 && strstr(msg, "line 1") &&
              !strstr(msg, "VALUE"),
          "problem to report: [%s]", msg);
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "line 1", "again");
    CHECK(aws_file_problem_take(msg, sizeof msg) == 0, "the same problem reported twice a minute");

    /* A stray line inside the profile: the keys are still used, the problem
     * is named with its line, the error message never quotes the line. */
    write_file(".aws/credentials", "[default]\naws_access_key_id = FILEKEY\n"
                                   "this line has SECRETVALUE but no equals sign\n"
                                   "aws_secret_access_key = filesecret\n");
    expect_creds(&cfg, "FILEKEY", "filesecret", NULL, "credentials", NULL, "a stray line");
    CHECK(aws_file_problem_take(msg, sizeof msg) == 1 &&
              strstr(msg, "line 3: expected 'key = value'") &&
              strstr(msg, path_in_tmp(".aws/credentials")) && !strstr(msg, "SECRETVALUE"),
          "stray line: [%s]", msg);
    write_file(".aws/credentials", "[default\naws_access_key_id = A\n");
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "line 1: a [section] header without ']'",
                 "unclosed header");
    write_file(".aws/credentials", "[default]\n= SECRETVALUE\n");
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "line 2: '=' without a key", "no key");

    /* Unreadable (a directory: root reads any file), named with the reason. */
    unlink(path_in_tmp(".aws/credentials"));
    setenv("AWS_SHARED_CREDENTIALS_FILE", path_in_tmp(".aws"), 1);
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "cannot be read: Is a directory", "a directory");
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");

    /* The config file counts as config; a missing file is no problem. */
    aws_file_error_totals(&c0, &k0);
    write_file(".aws/config", "[profile dev]\nregion eu-west-1\n");
    setenv("AWS_PROFILE", "dev", 1);
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "config file", "config file");
    unsetenv("AWS_PROFILE");
    aws_file_error_totals(&c1, &k1);
    CHECK(k1 > k0 && c1 == c0, "config errors %llu -> %llu", (unsigned long long)k0,
          (unsigned long long)k1);
    remove_files();
    while (aws_file_problem_take(msg, sizeof msg))
        ;
    expect_creds(&cfg, NULL, NULL, NULL, NULL, "no AWS credentials found", "no files");
    CHECK(aws_file_problem_take(msg, sizeof msg) == 0, "a missing file is a problem: [%s]", msg);
}

/* The CA bundle a release build trusts when libcurl's built-in one is
 * missing (base/http.c http_pick_ca). */
static void test_system_ca(void)
{
    char have[600], none[600], dir[600];
    snprintf(have, sizeof have, "%s/bundle.pem", tmpdir);
    snprintf(none, sizeof none, "%s/missing.pem", tmpdir);
    snprintf(dir, sizeof dir, "%s", tmpdir);
    FILE *f = fopen(have, "w");
    CHECK(f != NULL, "write %s", have);
    if (f)
        fclose(f);
    const char *cands[] = {none, dir, have};
    CHECK(http_pick_ca(have, NULL, NULL, cands, 3) == NULL,
          "libcurl's built-in file is there: it is used (NULL)");
    CHECK(http_pick_ca(none, dir, NULL, cands, 3) == NULL,
          "libcurl's built-in directory is there: it is used (NULL)");
    const char *got = http_pick_ca(none, NULL, NULL, cands, 3);
    CHECK(got && strcmp(got, have) == 0,
          "built-in missing: the first readable candidate file (not a directory): %s",
          got ? got : "(null)");
    got = http_pick_ca(none, NULL, have, cands, 2);
    CHECK(got && strcmp(got, have) == 0, "SSL_CERT_FILE before the candidates: %s",
          got ? got : "(null)");
    CHECK(http_pick_ca(none, none, none, cands, 2) == NULL,
          "nothing readable: NULL (verification fails as before, never open)");
    CHECK(http_pick_ca(NULL, NULL, NULL, NULL, 0) == NULL, "no built-in, nothing given: NULL");
    unlink(have);
}

int main(void)
{
    char *dir0 = t_tmpdir("creds");
    snprintf(tmpdir, sizeof tmpdir, "%s", dir0);
    free(dir0);
    test_credentials();
    test_region();
    test_endpoint();
    test_bad_files();
    test_system_ca();
    remove_files();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/.aws", tmpdir);
    rmdir(dir);
    rmdir(tmpdir);
    return t_finish("test_aws_creds");
}

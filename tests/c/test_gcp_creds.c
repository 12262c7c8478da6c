/* SPDX-License-Identifier: Apache-2.0 */
/* test_gcp_creds.c - the GCP credential chain's parsing and resolution
 * (gcp/gcp_creds.c) without a network: token answers, which source the
 * chain picks, what it says when a file is missing or malformed, and that
 * no secret from a file reaches a message. The sources' fetches against
 * token fakes are tested end to end in tests/stores/test_gcs.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "cred_sources.h"
#include "gcp_creds.h"
#include "s3lect.h"
#include "testutil.h"

static char dir[512];

static void clean_env(void)
{
    const char *vars[] = {"GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN",
                          "CLOUDSDK_CONFIG", "GCE_METADATA_HOST", "STORAGE_EMULATOR_HOST"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("HOME", dir, 1);
}

static char *write_file(const char *name, const char *text)
{
    static char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void t_parse_token(void)
{
    cred_fetched f = {0};
    char err[300];
    const char *a = "{\"access_token\":\"ya29.abc\",\"expires_in\":3599,\"token_type\":\"Bearer\"}";
    CHECK(gcp_parse_token(a, strlen(a), 1000, &f, err, sizeof err) == 0, "oauth answer: %s", err);
    CHECK(f.bearer && strcmp(f.bearer, "ya29.abc") == 0, "token");
    CHECK(f.expires_ms == 1000 + 3599000, "expiry %lld", (long long)f.expires_ms);
    cred_fetched_clear(&f);
    const char *b = "{\"accessToken\":\"ya29.def\",\"expireTime\":\"2030-01-02T03:04:05Z\"}";
    CHECK(gcp_parse_token(b, strlen(b), 0, &f, err, sizeof err) == 0, "iam answer: %s", err);
    CHECK(f.bearer && strcmp(f.bearer, "ya29.def") == 0 && f.expires_ms == 1893553445000LL,
          "iam token and expiry %lld", (long long)f.expires_ms);
    cred_fetched_clear(&f);
    const char *bad[] = {"", "[]", "{\"expires_in\":5}", "{\"access_token\":\"ya29.secret\"}",
                         "{\"access_token\":\"ya29.secret\",\"expires_in\":0}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK(gcp_parse_token(bad[i], strlen(bad[i]), 0, &f, err, sizeof err) == S3LECT_EAUTH &&
                  !f.bearer && err[0],
              "bad answer %zu refused", i);
        CHECK(!strstr(err, "secret"), "no token in '%s'", err);
        cred_fetched_clear(&f);
    }
}

static s3lect_config *cfg(void)
{
    s3lect_config *c = s3lect_config_new();
    s3lect_config_set_text(c, S3LECT_OPT_REQUEST_TIMEOUT, "1s");
    return c;
}

/* The source does not answer: the chain opens (the refresher retries) and
 * hands out no token, saying why (want) and never a secret from the file. */
static void unreachable(s3lect_config *c, const char *want)
{
    cred_cache *ch = NULL;
    char err[700] = "";
    CHECK(gcp_chain_open(c, 0, &ch, err, sizeof err) == 0 && ch, "opens: %s", err);
    if (!ch)
        return;
    char *tok = NULL;
    CHECK(cred_cache_bearer(ch, &tok, NULL, err, sizeof err) == S3LECT_ETRANSIENT && !tok &&
              strstr(err, want) && !strstr(err, "SECRET"),
          "no token: %s", err);
    free(tok);
    cred_cache_release(ch);
}

static void t_chain(void)
{
    s3lect_config *c = cfg();
    char err[700];
    cred_cache *ch = NULL;
    clean_env();
    /* Nothing configured: optional gives none; a static token is used as is. */
    CHECK(gcp_chain_open(c, GCP_CHAIN_OPTIONAL, &ch, err, sizeof err) == 0 && !ch,
          "nothing configured: no chain");
    setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.static-secret", 1);
    CHECK(gcp_chain_open(c, GCP_CHAIN_OPTIONAL, &ch, err, sizeof err) == 0 && ch, "static: %s",
          err);
    if (ch) {
        char *tok = NULL;
        CHECK(cred_cache_bearer(ch, &tok, NULL, err, sizeof err) == 0 && tok &&
                  strcmp(tok, "ya29.static-secret") == 0,
              "static token handed out");
        free(tok);
        cred_cache_info in;
        cred_cache_describe(ch, &in);
        CHECK(strstr(in.source, "GOOGLE_OAUTH_ACCESS_TOKEN") && !strstr(in.source, "secret"),
              "source %s", in.source);
        CHECK(cred_cache_is_static(ch), "static");
        cred_cache_release(ch);
        ch = NULL;
    }
    unsetenv("GOOGLE_OAUTH_ACCESS_TOKEN");
    /* A missing, a malformed, a typeless key file: one line naming the file. */
    setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json", 1);
    CHECK(gcp_chain_open(c, 0, &ch, err, sizeof err) == S3LECT_EAUTH && !ch &&
              strstr(err, "/nonexistent/key.json") && strstr(err, "GOOGLE_APPLICATION_CREDENTIALS"),
          "missing file: %s", err);
    setenv("GOOGLE_APPLICATION_CREDENTIALS", write_file("bad.json", "{\"private_key\":"), 1);
    CHECK(gcp_chain_open(c, 0, &ch, err, sizeof err) == S3LECT_EAUTH && strstr(err, "JSON"),
          "malformed file: %s", err);
    /* A service account file whose key is not a key: the secret-looking
     * text never reaches the message. */
    setenv("GOOGLE_APPLICATION_CREDENTIALS",
           write_file("sa.json", "{\"type\":\"service_account\",\"client_email\":\"a@b.iam."
                                 "gserviceaccount.com\",\"private_key\":\"-----BEGIN PRIVATE "
                                 "KEY-----\\nTOPSECRETKEYTEXT\\n-----END PRIVATE KEY-----\\n\","
                                 "\"token_uri\":\"http://127.0.0.1:1/token\"}"),
           1);
    CHECK(gcp_chain_open(c, 0, &ch, err, sizeof err) == S3LECT_EAUTH && !ch &&
              strstr(err, "sa.json") && strstr(err, "private key") && !strstr(err, "TOPSECRET"),
          "bad key: %s", err);
    /* An unknown type. */
    setenv("GOOGLE_APPLICATION_CREDENTIALS", write_file("t.json", "{\"type\":\"gdch\"}"), 1);
    CHECK(gcp_chain_open(c, 0, &ch, err, sizeof err) == S3LECT_EAUTH && strstr(err, "'gdch'"),
          "unknown type: %s", err);
    unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
    /* gcloud's file: found through CLOUDSDK_CONFIG, described as such. */
    write_file("application_default_credentials.json",
               "{\"type\":\"authorized_user\",\"client_id\":\"c\",\"client_secret\":\"CSECRET\","
               "\"refresh_token\":\"RSECRET\",\"token_uri\":\"http://127.0.0.1:1/token\"}");
    setenv("CLOUDSDK_CONFIG", dir, 1);
    CHECK(gcp_chain_open(c, CRED_CACHE_NOWAIT, &ch, err, sizeof err) == 0 && ch, "adc: %s", err);
    if (ch) {
        cred_cache_info in;
        cred_cache_describe(ch, &in);
        CHECK(strstr(in.source, "gcloud application-default") &&
                  strstr(in.source, "authorized_user"),
              "adc source: %s", in.source);
        cred_cache_release(ch);
        ch = NULL;
    }
    /* A token endpoint that does not answer: a handle (the refresher
     * retries), and every request says why there is no token. */
    unreachable(c, "127.0.0.1:1/token");
    unsetenv("CLOUDSDK_CONFIG");
    /* The metadata server nobody configured, here a closed port: the chain
     * fails with what to set (never unauthenticated). */
    setenv("GCE_METADATA_HOST", "127.0.0.1:1", 1);
    unreachable(c, "metadata server at 127.0.0.1:1");
    s3lect_config_free(c);
    clean_env();
}

int main(void)
{
    char *d = t_tmpdir("gcpcreds");
    snprintf(dir, sizeof dir, "%s", d);
    free(d);
    t_parse_token();
    t_chain();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return t_done("gcp_creds");
}

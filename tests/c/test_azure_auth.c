/* SPDX-License-Identifier: Apache-2.0 */
/* test_azure_auth.c - the Shared Key string to sign and signature
 * (azure/az_auth.c) against vectors worked out by hand from the Storage
 * REST spec ("Authorize with Shared Key") and signed with Python's hmac;
 * the explicit credential sources (connection string, key, SAS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "az_auth.h"
#include "az_creds.h"
#include "s3lect.h"
#include "testutil.h"

/* Azurite's published development key (a throwaway, public test value). */
static const char dev_key[] =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

static void t_put_blob(void)
{
    az_header h[] = {
        {"x-ms-version", "2015-02-21"},
        {"X-MS-Date", "Fri, 26 Jun 2015 23:39:12 GMT"},
        {"Content-Type", "text/plain;  charset=UTF-8"}, /* a run of spaces folds to one */
        {"Content-Length", "11"},
        {"x-ms-blob-type", " BlockBlob "},
        {"If-None-Match", "*"},
        {"Authorization-Not-Signed", "x"},
    };
    char *sts = az_sharedkey_string("PUT", h, sizeof h / sizeof h[0], "myaccount",
                                    "/mycontainer/hello%20world.txt", NULL);
    const char *want = "PUT\n\n\n11\n\ntext/plain; charset=UTF-8\n\n\n\n*\n\n\n"
                       "x-ms-blob-type:BlockBlob\n"
                       "x-ms-date:Fri, 26 Jun 2015 23:39:12 GMT\n"
                       "x-ms-version:2015-02-21\n"
                       "/myaccount/mycontainer/hello%20world.txt";
    CHECK(sts && strcmp(sts, want) == 0, "string to sign:\n%s\nwant:\n%s", sts ? sts : "(null)",
          want);
    uint8_t key[64];
    az_creds c;
    setenv("AZURE_STORAGE_KEY", dev_key, 1);
    unsetenv("AZURE_STORAGE_ACCOUNT");
    unsetenv("AZURE_STORAGE_CONNECTION_STRING");
    unsetenv("AZURE_STORAGE_SAS_TOKEN");
    char err[512] = "";
    int rc = az_creds_resolve("myaccount", &c, err, sizeof err);
    CHECK(rc == 0 && c.kind == AZ_CRED_SHARED_KEY && c.key_len == sizeof key, "key: %s", err);
    char *auth =
        sts && rc == 0 ? az_sharedkey_authorization("myaccount", c.key, c.key_len, sts) : NULL;
    CHECK(auth && strcmp(auth, "SharedKey myaccount:WqQo1IwstWmjA4Q2At99vQQXXPHK+KNKb/"
                               "6FXzmKxx0=") == 0,
          "authorization %s", auth ? auth : "(null)");
    CHECK(strcmp(c.source, "AZURE_STORAGE_KEY") == 0, "source %s", c.source);
    free(auth);
    free(sts);
    az_creds_clear(&c);
    unsetenv("AZURE_STORAGE_KEY");
}

static void t_get_with_query(void)
{
    /* The spec's own example of the canonicalized resource with a query. */
    az_header h[] = {{"x-ms-date", "Sun, 11 Oct 2009 21:49:13 GMT"},
                     {"x-ms-version", "2009-09-19"},
                     {"Content-Length", "0"}};
    char *sts = az_sharedkey_string("GET", h, 3, "myaccount", "/mycontainer",
                                    "restype=container&comp=metadata");
    const char *want = "GET\n\n\n\n\n\n\n\n\n\n\n\n"
                       "x-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-version:2009-09-19\n"
                       "/myaccount/mycontainer\ncomp:metadata\nrestype:container";
    CHECK(sts && strcmp(sts, want) == 0, "string to sign:\n%s", sts ? sts : "(null)");
    free(sts);
    /* Values are decoded, names lower-cased. */
    sts = az_sharedkey_string("GET", h, 2, "a", "/c", "Comp=list&prefix=a%2Fb");
    CHECK(sts && strstr(sts, "/a/c\ncomp:list\nprefix:a/b") != NULL, "%s", sts ? sts : "(null)");
    free(sts);
}

static void t_sources(void)
{
    char err[512];
    az_creds c;
    unsetenv("AZURE_STORAGE_KEY");
    unsetenv("AZURE_STORAGE_SAS_TOKEN");
    unsetenv("AZURE_STORAGE_CONNECTION_STRING");
    CHECK(az_creds_resolve("acct", &c, err, sizeof err) == 0 && c.kind == AZ_CRED_NONE, "none");

    setenv("AZURE_STORAGE_SAS_TOKEN", "?sv=2020-12-06&sp=rcw&sig=abc%3D", 1);
    CHECK(az_creds_resolve("acct", &c, err, sizeof err) == 0 && c.kind == AZ_CRED_SAS &&
              strcmp(c.sas, "sv=2020-12-06&sp=rcw&sig=abc%3D") == 0,
          "sas");
    az_creds_clear(&c);
    setenv("AZURE_STORAGE_SAS_TOKEN", "not-a-sas", 1);
    err[0] = '\0';
    CHECK(az_creds_resolve("acct", &c, err, sizeof err) == S3LECT_EINVAL &&
              strstr(err, "AZURE_STORAGE_SAS_TOKEN") && !strstr(err, "not-a-sas"),
          "bad sas: %s", err);

    /* The key wins over the SAS; an account mismatch is named. */
    setenv("AZURE_STORAGE_KEY", dev_key, 1);
    setenv("AZURE_STORAGE_ACCOUNT", "other", 1);
    CHECK(az_creds_resolve("acct", &c, err, sizeof err) == S3LECT_EINVAL &&
              strstr(err, "'other'") && strstr(err, "'acct'") && !strstr(err, dev_key),
          "account mismatch: %s", err);
    unsetenv("AZURE_STORAGE_ACCOUNT");
    setenv("AZURE_STORAGE_KEY", "not base64!", 1);
    CHECK(az_creds_resolve("acct", &c, err, sizeof err) == S3LECT_EINVAL &&
              strstr(err, "not base64") && !strstr(err, "not base64!"),
          "bad key: %s", err);

    /* The connection string wins over both and gives the endpoint. */
    char cs[512];
    snprintf(cs, sizeof cs,
             "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=%s;"
             "BlobEndpoint=http://127.0.0.1:10000/acct;",
             dev_key);
    setenv("AZURE_STORAGE_CONNECTION_STRING", cs, 1);
    CHECK(az_creds_resolve("acct", &c, err, sizeof err) == 0 && c.kind == AZ_CRED_SHARED_KEY &&
              c.key_len == 64 && c.blob_endpoint &&
              strcmp(c.blob_endpoint, "http://127.0.0.1:10000/acct") == 0 &&
              strstr(c.source, "CONNECTION_STRING"),
          "connection string: %s", err);
    az_creds_clear(&c);
    setenv("AZURE_STORAGE_CONNECTION_STRING",
           "AccountName=acct;SharedAccessSignature=sv=1&sig=x;EndpointSuffix=core.chinacloudapi.cn",
           1);
    CHECK(az_creds_resolve("acct", &c, err, sizeof err) == 0 && c.kind == AZ_CRED_SAS &&
              strcmp(c.sas, "sv=1&sig=x") == 0 && c.blob_endpoint &&
              strcmp(c.blob_endpoint, "https://acct.blob.core.chinacloudapi.cn") == 0,
          "connection string with a SAS: %s", err);
    az_creds_clear(&c);
    CHECK(az_creds_resolve("bcct", &c, err, sizeof err) == S3LECT_EINVAL && strstr(err, "'acct'"),
          "connection string of another account: %s", err);
    setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=acct;BlobEndpoint=http://x", 1);
    CHECK(az_creds_resolve("acct", &c, err, sizeof err) == S3LECT_EINVAL &&
              strstr(err, "neither AccountKey nor SharedAccessSignature"),
          "connection string without a credential: %s", err);
    unsetenv("AZURE_STORAGE_CONNECTION_STRING");
    unsetenv("AZURE_STORAGE_KEY");
    unsetenv("AZURE_STORAGE_SAS_TOKEN");
}

static void t_date(void)
{
    char d[32];
    az_http_date(784111777, d);
    CHECK(strcmp(d, "Sun, 06 Nov 1994 08:49:37 GMT") == 0, "%s", d);
}

static void t_tokens(void)
{
    static const char tok[] = "eyJhbGciOiJSUzI1NiJ9."
                              "eyJhcHBpZCI6ICJhcHAtMSIsICJvaWQiOiAib2lkLTIiLCAiYXVkIjogIngifQ.c2ln";
    char body[512], err[256] = "";
    cred_fetched f;
    /* Entra ID's token endpoint: expires_in a number. */
    memset(&f, 0, sizeof f);
    snprintf(body, sizeof body,
             "{\"token_type\":\"Bearer\",\"expires_in\":3599,"
             "\"access_token\":\"%s\"}",
             tok);
    CHECK(az_parse_token(body, strlen(body), 1000000, &f, err, sizeof err) == 0 && f.bearer &&
              strcmp(f.bearer, tok) == 0 && f.expires_ms == 1000000 + 3599000 &&
              strcmp(f.principal, "appid app-1, oid oid-2") == 0,
          "token endpoint: %s / %s", err, f.principal);
    cred_fetched_clear(&f);
    /* IMDS and App Service: strings, expires_on in epoch seconds wins. */
    snprintf(body, sizeof body,
             "{\"access_token\":\"%s\",\"expires_in\":\"86399\",\"expires_on\":\"1700000000\","
             "\"resource\":\"https://storage.azure.com/\"}",
             tok);
    CHECK(az_parse_token(body, strlen(body), 5, &f, err, sizeof err) == 0 &&
              f.expires_ms == 1700000000000LL,
          "imds: %s", err);
    cred_fetched_clear(&f);
    /* An opaque token: no principal, still a token. */
    snprintf(body, sizeof body, "{\"access_token\":\"opaque\",\"expires_in\":60}");
    CHECK(az_parse_token(body, strlen(body), 0, &f, err, sizeof err) == 0 && !f.principal[0],
          "opaque");
    cred_fetched_clear(&f);
    snprintf(body, sizeof body, "{\"access_token\":\"sekrit-token\"}");
    CHECK(az_parse_token(body, strlen(body), 0, &f, err, sizeof err) == S3LECT_EAUTH &&
              strstr(err, "expires") && !strstr(err, "sekrit"),
          "no expiry: %s", err);
    cred_fetched_clear(&f);
    CHECK(az_parse_token("[]", 2, 0, &f, err, sizeof err) == S3LECT_EAUTH, "not an object");
}

int main(void)
{
    t_tokens();
    t_put_blob();
    t_get_with_query();
    t_sources();
    t_date();
    return t_done("azure_auth");
}

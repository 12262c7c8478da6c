/* SPDX-License-Identifier: Apache-2.0 */
/* s3_probe.c - one store operation from the command line, answer as JSON.
 *
 *   s3_probe get URL [options]
 *   s3_probe put URL (--body TEXT | --body-file FILE) [--if-match ETAG] [options]
 *   options: --endpoint URL --region R --path-style --timeout MS
 *
 * Prints {"outcome": "OK"|"NOT_FOUND"|..., "etag", "body", "message",
 * "http_status"} and exits 0; if the store cannot be opened, prints
 * {"open_error": code, "message"} and exits 3; usage errors exit 2. The
 * pytest suites use it to drive the S3 store against MinIO and moto.
 * Credentials come from the environment, as for the CLI.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_test.h"
#include "s3lect.h"
#include "store.h"

static const char *outcome_str(int o)
{
    static const char *const names[] = {"OK",   "NOT_FOUND", "PRECONDITION",
                                        "AUTH", "TRANSIENT", "FATAL"};
    return o >= 0 && o <= 5 ? names[o] : "?";
}

static int usage(const char *msg)
{
    fprintf(stderr,
            "s3_probe: %s\nusage: s3_probe get|put URL [--body TEXT | --body-file FILE] "
            "[--if-match ETAG] [--endpoint URL] [--region R] [--path-style] "
            "[--timeout MS]\n",
            msg);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage("need an operation and a URL");
    const char *op = argv[1], *url = argv[2];
    const char *body = NULL, *body_file = NULL, *if_match = NULL, *endpoint = NULL, *region = NULL;
    int path_style = 0;
    long timeout = 10000;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = strcmp(a, "--body") == 0        ? &body
                            : strcmp(a, "--body-file") == 0 ? &body_file
                            : strcmp(a, "--if-match") == 0  ? &if_match
                            : strcmp(a, "--endpoint") == 0  ? &endpoint
                            : strcmp(a, "--region") == 0    ? &region
                                                            : NULL;
        if (slot) {
            if (i + 1 >= argc)
                return usage("option needs a value");
            *slot = argv[++i];
        } else if (strcmp(a, "--path-style") == 0) {
            path_style = 1;
        } else if (strcmp(a, "--timeout") == 0 && i + 1 < argc) {
            timeout = strtol(argv[++i], NULL, 10);
        } else {
            return usage("unknown option");
        }
    }
    int put = strcmp(op, "put") == 0;
    if (!put && strcmp(op, "get") != 0)
        return usage("operation must be get or put");
    if (put && !body && !body_file)
        return usage("put needs --body or --body-file");

    s3lect_config *cfg = s3lect_config_new();
    s3lect_config_set_str(cfg, S3LECT_OPT_LOCK, url);
    s3lect_config_set_str(cfg, S3LECT_OPT_ENDPOINT, endpoint);
    s3lect_config_set_str(cfg, S3LECT_OPT_REGION, region);
    if (path_style)
        s3lect_config_set_bool(cfg, S3LECT_OPT_PATH_STYLE, 1);
    st_store *st = NULL;
    char *key = NULL;
    char err[512] = "";
    cJSON *out = cJSON_CreateObject();
    int rc = st_open_config(cfg, &st, &key, err, sizeof err);
    if (rc != 0) {
        cJSON_AddNumberToObject(out, "open_error", rc);
        cJSON_AddStringToObject(out, "message", err);
    } else {
        st_result r = {0};
        if (put) {
            size_t len = 0;
            char *data = body_file ? t_read_file(body_file, &len) : NULL;
            if (body_file && !data) {
                fprintf(stderr, "s3_probe: cannot read %s\n", body_file);
                return 2;
            }
            if (body)
                len = strlen(body);
            st_put(st, key, body ? body : data, len, if_match, timeout, &r);
            free(data);
        } else {
            st_get(st, key, timeout, &r);
        }
        cJSON_AddStringToObject(out, "outcome", outcome_str(r.outcome));
        if (r.etag)
            cJSON_AddStringToObject(out, "etag", r.etag);
        if (r.body)
            cJSON_AddStringToObject(out, "body", r.body);
        if (r.message)
            cJSON_AddStringToObject(out, "message", r.message);
        cJSON_AddNumberToObject(out, "http_status", r.http_status);
        st_result_clear(&r);
        st_destroy(st);
    }
    char *text = cJSON_PrintUnformatted(out);
    puts(text);
    free(text);
    cJSON_Delete(out);
    free(key);
    s3lect_config_free(cfg);
    return rc == 0 ? 0 : 3;
}

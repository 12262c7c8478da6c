/* SPDX-License-Identifier: Apache-2.0 */
/* gcp_aws.c - the AWS identity source of Google's workload identity
 * federation (gcp_aws.h), moved out of gcp_creds.c so that it is the one
 * file of gcp/ on AWS's credential sources and SigV4. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gcp_aws.h"

#include "aws_creds.h"
#include "config.h"
#include "cred_cache.h"
#include "cred_http.h"
#include "cred_sources.h"
#include "s3lect.h"
#include "sigv4.h"
#include "util.h"

/* The AWS credentials the way Google's libraries take them for this
 * source: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
 * else the container endpoint (ECS, EKS Pod Identity) when configured, else
 * EC2 instance metadata (IMDSv2). */
static int aws_identity(const char *path, int64_t timeout_ms, cred_fetched *out, char *err,
                        size_t errlen)
{
    const char *id = aws_env("AWS_ACCESS_KEY_ID"), *sec = aws_env("AWS_SECRET_ACCESS_KEY");
    if (id && sec) {
        const char *tok = aws_env("AWS_SESSION_TOKEN");
        out->access_key_id = u_strdup(id);
        out->secret_access_key = u_strdup(sec);
        out->session_token = tok ? u_strdup(tok) : NULL;
        if (!out->access_key_id || !out->secret_access_key || (tok && !out->session_token)) {
            cred_fetched_clear(out);
            snprintf(err, errlen, "out of memory");
            return S3LECT_ENOMEM;
        }
        return 0;
    }
    char e[400] = "";
    int rc = aws_container_configured() ? aws_container_fetch(timeout_ms, out, e, sizeof e)
                                        : aws_imds_fetch(timeout_ms, out, e, sizeof e);
    if (rc)
        snprintf(err, errlen,
                 "%s: no AWS credentials for the AWS identity source (set AWS_ACCESS_KEY_ID and "
                 "AWS_SECRET_ACCESS_KEY, or run with an instance or task role): %s",
                 path, e);
    return rc;
}

int gcp_aws_subject_token(const char *path, const char *vurl, const char *audience,
                          int64_t timeout_ms, char **tok, char *err, size_t errlen)
{
    *tok = NULL;
    if (!vurl)
        vurl = "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15";
    char *region =
        u_strdup(aws_env("AWS_REGION") ? aws_env("AWS_REGION") : aws_env("AWS_DEFAULT_REGION"));
    if (!region)
        region = aws_imds_region(AWS_IMDS_REGION_TIMEOUT_MS);
    if (!region || !cfg_region_valid(region)) {
        snprintf(err, errlen,
                 "%s: the AWS identity source needs the AWS region: set AWS_REGION (instance "
                 "metadata did not say)",
                 path);
        free(region);
        return S3LECT_EAUTH;
    }
    /* The URL with {region} filled in, split into host, path and query. */
    const char *ph = strstr(vurl, "{region}");
    char *url =
        ph ? u_asprintf("%.*s%s%s", (int)(ph - vurl), vurl, region, ph + 8) : u_strdup(vurl);
    cred_fetched creds = {0};
    char *json = NULL;
    int rc = url ? 0 : S3LECT_ENOMEM;
    const char *hp = url ? strstr(url, "://") : NULL;
    if (!rc && !hp) {
        snprintf(err, errlen, "%s: regional_cred_verification_url is not a URL", path);
        rc = S3LECT_EAUTH;
    }
    if (!rc)
        rc = aws_identity(path, timeout_ms, &creds, err, errlen);
    if (!rc) {
        hp += 3;
        size_t hl = strcspn(hp, "/?");
        char host[256];
        snprintf(host, sizeof host, "%.*s", (int)(hl < 255 ? hl : 255), hp);
        const char *rest = hp + hl;
        const char *q = strchr(rest, '?');
        char path[512];
        snprintf(path, sizeof path, "%.*s", (int)(q ? q - rest : (long)strlen(rest)),
                 *rest == '/' ? rest : "/");
        if (!path[0])
            snprintf(path, sizeof path, "/");
        char amz_date[17];
        sigv4_amz_date(time(NULL), amz_date);
        sigv4_header h[4] = {
            {"host", host}, {"x-amz-date", amz_date}, {"x-goog-cloud-target-resource", audience}};
        size_t nh = 3;
        if (creds.session_token)
            h[nh++] = (sigv4_header){"x-amz-security-token", creds.session_token};
        sigv4_request rq = {.method = "POST",
                            .path = path,
                            .query = q ? q + 1 : NULL,
                            .headers = h,
                            .nheaders = nh,
                            .body = "",
                            .body_len = 0};
        sigv4_params sp = {.access_key_id = creds.access_key_id,
                           .secret_access_key = creds.secret_access_key,
                           .session_token = creds.session_token,
                           .region = region,
                           .service = "sts",
                           .amz_date = amz_date,
                           .normalize_path = 1};
        sigv4_result sig;
        cJSON *j = cJSON_CreateObject(), *hs = cJSON_CreateArray();
        if (sigv4_sign(&rq, &sp, &sig) != 0) {
            snprintf(err, errlen, "cannot sign the GetCallerIdentity request");
            rc = S3LECT_EAUTH;
        } else {
            if (j && hs && cJSON_AddStringToObject(j, "url", url) &&
                cJSON_AddStringToObject(j, "method", "POST")) {
                cJSON_AddItemToObject(j, "headers", hs);
                hs = NULL;
                const char *names[] = {"Authorization", "host", "x-amz-date",
                                       "x-goog-cloud-target-resource", "x-amz-security-token"};
                const char *vals[] = {sig.authorization, host, amz_date, audience,
                                      creds.session_token};
                for (size_t i = 0; i < 5; i++) {
                    cJSON *o = vals[i] ? cJSON_CreateObject() : NULL;
                    if (!o)
                        continue;
                    cJSON_AddStringToObject(o, "key", names[i]);
                    cJSON_AddStringToObject(o, "value", vals[i]);
                    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(j, "headers"), o);
                }
                json = cJSON_PrintUnformatted(j);
            }
            sigv4_result_clear(&sig);
            if (!json || !(*tok = u_pct_encode(json, strlen(json), 0))) {
                snprintf(err, errlen, "out of memory");
                rc = S3LECT_ENOMEM;
            }
        }
        cred_json_wipe_delete(j);
        cJSON_Delete(hs);
    } else if (rc == S3LECT_ENOMEM) {
        snprintf(err, errlen, "out of memory");
    }
    if (json) {
        u_wipe(json, strlen(json));
        free(json);
    }
    cred_fetched_clear(&creds);
    free(url);
    free(region);
    return rc;
}

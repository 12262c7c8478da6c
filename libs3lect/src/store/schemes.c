/* SPDX-License-Identifier: Apache-2.0 */
/* schemes.c - the scheme table: lock URLs parsed by the store they name,
 * and opening the store a location names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "store.h"
#include "util.h"

/* "s3" in "s3://...": the length of a leading URI scheme (RFC 3986: a letter,
 * then letters, digits, '+', '-', '.') followed by ':', else 0. */
static size_t scheme_len(const char *url)
{
    const char *p = url;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return 0;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '+' || *p == '-' || *p == '.')
        p++;
    return *p == ':' ? (size_t)(p - url) : 0;
}

/* ---- the scheme table ---- */

#define REDIS_CAVEAT                                                                               \
    "verified on this server: it takes writes (a primary, not a replica), is not in Cluster "      \
    "mode (unless the ACL hides INFO), and runs s3lect's compare-and-set script atomically; not "  \
    "verifiable from here: replication is asynchronous and persistence is the server's setting "   \
    "(appendonly yes, appendfsync always): a failover or a restart that loses a write can give "   \
    "two leaders (docs/stores.md)"

#define MYSQL_CAVEAT                                                                               \
    "not verifiable from here: a replica that takes over from this server has every write it "     \
    "acknowledged only with synchronous replication (Galera, group replication); with "            \
    "asynchronous replication a failover that loses a write can give two leaders "                 \
    "(docs/stores.md)"

/* One row a store (rows with no noun only spell a store another way). What
 * the whole project knows of a store is here: the CLI's help, its error
 * lists, whoami, check-store, `s3lect stores`, the man page and the
 * completion read it (docs/architecture.md "Adding a store"). */
static const st_scheme schemes[] = {
    {.name = "s3",
     .parse = st_s3_parse,
     .open = st_s3_open,
     .canonical = st_s3_canonical,
     .form = "s3://bucket/key (two slashes)",
     .noun = "an S3 object (AWS or an S3-compatible server)",
     .usage = "s3://BUCKET/KEY",
     .cred = ST_CRED_AWS,
     .doc = "docs/stores.md#s3",
     .home = "a bucket"},
    {.name = "file",
     .parse = st_file_parse,
     .open = st_file_open,
     .canonical = st_file_canonical,
     .form = "file:///dir/key (three slashes) or a plain path",
     .flags = ST_SCHEME_PATHS,
     .noun = "a local file",
     .usage = "file:///DIR/KEY or a path",
     .cred = ST_CRED_NONE,
     .doc = "docs/stores.md#file-the-embedded-default",
     .home = "a directory"},
    {.name = "dynamodb",
     .parse = st_dynamodb_parse,
     .open = st_dynamodb_open,
     .canonical = st_dynamodb_canonical,
     .noun = "a DynamoDB item",
     .usage = "dynamodb://TABLE/KEY",
     .cred = ST_CRED_AWS,
     .doc = "docs/stores.md#dynamodb"},
    {.name = "postgres",
     .alias = "postgresql",
     .parse = st_postgres_parse,
     .open = st_postgres_open,
     .canonical = st_postgres_canonical,
     .noun = "a PostgreSQL row",
     .usage = "postgres://HOST/DB?key=NAME",
     .cred = ST_CRED_URL,
     .doc = "docs/stores.md#postgresql",
     .needs = "libpq.so.5 (libpq5), loaded when a postgres:// lock is used"},
    {.name = "mysql",
     .alias = "mariadb",
     .parse = st_mysql_parse,
     .open = st_mysql_open,
     .canonical = st_mysql_canonical,
     .form = "mysql://USER@HOST[:PORT]/DB?key=NAME (two slashes)",
     .noun = "a MySQL or MariaDB row",
     .usage = "mysql://USER@HOST[:PORT]/DB?key=NAME (mariadb:// too)",
     .cred = ST_CRED_URL,
     .doc = "docs/stores.md#mysql-and-mariadb",
     .needs = "libmariadb.so.3 (libmariadb3), loaded when a mysql:// lock is used",
     .caveat = MYSQL_CAVEAT},
    {.name = "route53",
     .parse = st_route53_parse,
     .open = st_route53_open,
     .canonical = st_route53_canonical,
     .noun = "a Route 53 record",
     .usage = "route53://ZONE_ID/NAME",
     .flags = ST_SCHEME_STALE_READS,
     .cred = ST_CRED_AWS,
     .doc = "docs/stores.md#route-53",
     .home = "a hosted zone"},
    {.name = "gs",
     .parse = st_gcs_parse,
     .open = st_gcs_open,
     .canonical = st_gcs_canonical,
     .form = "gs://bucket/object (two slashes)",
     .noun = "a Google Cloud Storage object",
     .usage = "gs://BUCKET/OBJECT",
     .cred = ST_CRED_GCP,
     .doc = "docs/stores.md#google-cloud-storage",
     .home = "a bucket"},
    {.name = "az",
     .parse = st_azure_parse,
     .open = st_azure_open,
     .canonical = st_azure_canonical,
     .form = "az://ACCOUNT/CONTAINER/BLOB (two slashes)",
     .noun = "an Azure blob",
     .usage = "az://ACCOUNT/CONTAINER/BLOB or https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB",
     .cred = ST_CRED_AZURE,
     .doc = "docs/stores.md#azure-blob-storage",
     .home = "a container"},
    {.name = "https",
     .parse = st_azure_https_parse,
     .open = st_azure_open,
     .canonical = st_azure_canonical,
     .cred = ST_CRED_AZURE,
     .doc = "docs/stores.md#azure-blob-storage",
     .home = "a container"},
    {.name = "etcd",
     .alias = "etcds",
     .parse = st_etcd_parse,
     .open = st_etcd_open,
     .canonical = st_etcd_canonical,
     .form = "etcd://HOST:PORT/KEY (two slashes)",
     .noun = "an etcd key",
     .usage = "etcd://HOST:PORT[,HOST:PORT...]/KEY (etcds:// for TLS)",
     .cred = ST_CRED_URL,
     .doc = "docs/stores.md#etcd"},
    {.name = "redis",
     .parse = st_redis_parse,
     .open = st_redis_open,
     .canonical = st_redis_canonical,
     .form = "redis://HOST:PORT/KEY",
     .noun = "a Redis key",
     .usage = "redis://[[USER]:PASSWORD@]HOST:PORT/KEY (rediss:// for TLS)",
     .cred = ST_CRED_URL,
     .doc = "docs/stores.md#redis",
     .compiled = st_redis_compiled,
     .caveat = REDIS_CAVEAT},
    {.name = "rediss",
     .parse = st_redis_parse,
     .open = st_redis_open,
     .canonical = st_redis_canonical,
     .form = "rediss://HOST:PORT/KEY",
     .cred = ST_CRED_URL,
     .doc = "docs/stores.md#redis",
     .compiled = st_redis_compiled,
     .caveat = REDIS_CAVEAT},
    {.name = "k8s",
     .alias = "kubernetes",
     .parse = st_k8s_parse,
     .open = st_k8s_open,
     .canonical = st_k8s_canonical,
     .form = "k8s://NAMESPACE/NAME (two slashes)",
     .noun = "a Kubernetes Lease (coordination.k8s.io/v1)",
     .usage = "k8s://NAMESPACE/NAME[?context=CTX&kubeconfig=PATH]",
     .cred = ST_CRED_KUBE,
     .doc = "docs/stores.md#kubernetes-lease",
     .home = "a namespace",
     .caveat = "client-go electors (leaderelection) may share the Lease: they count a holder's "
               "lease from their own observation of each change and s3lect writes "
               "leaseDurationSeconds no shorter than its lease; give both the same lease "
               "(docs/stores.md#kubernetes-lease)"},
    {.name = "mem",
     .parse = st_mem_parse,
     .open = st_mem_open,
     .canonical = st_mem_canonical,
     .form = "mem://NAME[/KEY] (two slashes)",
     .noun = "an in-memory object (tests only: one process)",
     .usage = "mem://NAME[/KEY]",
     .cred = ST_CRED_NONE,
     .doc = "docs/stores.md#mem-tests-only",
     .caveat = "tests only: the object lives in this process's memory, no other process sees "
               "it (docs/testing-your-code.md)"},
};
#define NSCHEMES (sizeof schemes / sizeof schemes[0])

/* Each credential kind: its name (`s3lect stores --json`) and what it is. */
static const struct {
    const char *name, *text;
} CREDS[] = {
    [ST_CRED_NONE] = {"none", "none"},
    [ST_CRED_AWS] = {"aws", "the AWS credential chain (s3lect whoami URL says which source)"},
    [ST_CRED_GCP] = {"gcp", "Google application-default credentials (s3lect whoami URL)"},
    [ST_CRED_AZURE] = {"azure", "a Shared Key or SAS, else Microsoft Entra ID (s3lect whoami URL)"},
    [ST_CRED_URL] = {"url", "in the lock URL or the store's own variables and files"},
    [ST_CRED_KUBE] = {"kube", "the pod's service account, else a kubeconfig: token, client "
                              "certificate or exec plugin (s3lect whoami URL)"},
};

const char *st_cred_name(int cred)
{
    return CREDS[cred >= 0 && cred <= ST_CRED_KUBE ? cred : ST_CRED_NONE].name;
}

const char *st_cred_text(int cred)
{
    return CREDS[cred >= 0 && cred <= ST_CRED_KUBE ? cred : ST_CRED_NONE].text;
}

const st_scheme *st_scheme_of(const char *lock)
{
    st_location loc;
    char err[16];
    if (!lock || st_location_parse(lock, &loc, err, sizeof err) != 0)
        return NULL;
    const st_scheme *sc = loc.scheme;
    st_location_clear(&loc);
    return sc;
}

int st_scheme_compiled(const st_scheme *sc)
{
    return sc && (!sc->compiled || sc->compiled());
}

size_t st_scheme_count(void)
{
    return NSCHEMES;
}

const st_scheme *st_scheme_at(size_t i)
{
    return i < NSCHEMES ? &schemes[i] : NULL;
}

/* The row whose name or alias is url[0..sl) (case-insensitive), or NULL. */
static const st_scheme *scheme_find(const char *url, size_t sl)
{
    for (size_t i = 0; i < NSCHEMES; i++) {
        const char *names[] = {schemes[i].name, schemes[i].alias};
        for (int k = 0; k < 2; k++)
            if (names[k] && strlen(names[k]) == sl && strncasecmp(url, names[k], sl) == 0)
                return &schemes[i];
    }
    return NULL;
}

char *st_location_canonical(const st_location *loc, const char *url)
{
    if (!loc->scheme || !loc->scheme->canonical)
        return st_lock_canonical(url);
    char *out = u_strdup("");
    if (out && loc->scheme->canonical(loc, &out)) {
        free(out);
        return NULL;
    }
    return out;
}

char *st_lock_canonical(const char *url)
{
    st_location loc;
    char err[512];
    if (!url || st_location_parse(url, &loc, err, sizeof err) != 0)
        return st_lock_display(url);
    char *out = st_location_canonical(&loc, url);
    st_location_clear(&loc);
    return out;
}

static int location_parse(const char *url, st_location *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!url || !url[0]) {
        snprintf(err, errlen, "empty lock location: use s3://bucket/key or file:///dir/key");
        return S3LECT_EINVAL;
    }
    size_t sl = scheme_len(url);
    const st_scheme *sc = NULL;
    const char *rest = NULL;
    if (sl == 0) {
        for (size_t i = 0; i < NSCHEMES && !sc; i++)
            if (schemes[i].flags & ST_SCHEME_PATHS)
                sc = &schemes[i];
    } else if ((sc = scheme_find(url, sl)) != NULL) {
        /* Schemes are case-insensitive (RFC 3986 3.1): S3:// is s3://. */
        if (strncmp(url + sl, "://", 3) == 0) {
            rest = url + sl + 3;
        } else if (sc->form) {
            snprintf(err, errlen, "lock URL '%.200s' is malformed: write %s", url, sc->form);
            return S3LECT_EINVAL;
        } else {
            sc = NULL;
        }
    }
    if (sc) {
        int rc = sc->parse(url, rest, out, err, errlen);
        if (rc)
            st_location_clear(out);
        else
            out->scheme = sc;
        return rc;
    }
    if (strncmp(url + sl, "://", 3) == 0 && ((sl == 4 && strncasecmp(url, "http", 4) == 0) ||
                                             (sl == 5 && strncasecmp(url, "https", 5) == 0)))
        snprintf(err, errlen,
                 "'%.200s' is a server's address, not a lock URL: for S3 or an S3-compatible "
                 "server (MinIO, Ceph, R2...) write --lock s3://BUCKET/KEY --endpoint "
                 "%.*s://HOST:PORT (the endpoint without the bucket and key)",
                 url, (int)sl, url);
    else {
        /* Every store's lock URL, from the table. */
        char list[1024];
        size_t n = 0;
        for (size_t i = 0; i < NSCHEMES; i++)
            if (schemes[i].usage && n < sizeof list) /* its first form: "az://A/C/B" */
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%.*s%s", n ? ", " : "",
                                      (int)strcspn(schemes[i].usage, " "), schemes[i].usage,
                                      schemes[i].flags & ST_SCHEME_PATHS ? " (or a path)" : "");
        if (strncmp(url + sl, "://", 3) == 0)
            snprintf(err, errlen, "unsupported lock URL scheme '%.*s:': use %s (docs/stores.md)",
                     (int)(sl < 20 ? sl : 20), url, list);
        else
            snprintf(err, errlen,
                     "unsupported lock URL scheme '%.*s:': use %s (for a file whose name has ':', "
                     "write ./%.100s)",
                     (int)(sl < 20 ? sl : 20), url, list, url);
    }
    return S3LECT_EINVAL;
}

int st_location_parse(const char *url, st_location *out, char *err, size_t errlen)
{
    int rc = location_parse(url, out, err, errlen);
    if (rc == 0 || !url)
        return rc;
    /* The message quotes the URL: when it holds a password, say the same of
     * the URL as shown (password replaced by ***) instead. */
    char *shown = st_lock_display(url);
    if (!shown || strcmp(shown, url) != 0) {
        st_location tmp;
        if (!shown || location_parse(shown, &tmp, err, errlen) == 0) {
            if (shown)
                st_location_clear(&tmp);
            snprintf(err, errlen, "lock URL '%.200s' is not valid", shown ? shown : "");
        }
    }
    free(shown);
    return rc;
}

int st_lock_location(const s3lect_config *cfg, st_location *out, char *err, size_t errlen)
{
    if (!cfg->custom)
        return st_location_parse(cfg->lock, out, err, errlen);
    /* The key is the lock string's key part, or the whole string without a scheme. */
    char *key = NULL;
    if (strstr(cfg->lock, "://") && st_location_parse(cfg->lock, out, err, errlen) == 0) {
        key = out->key;
        out->key = NULL;
        st_location_clear(out);
    } else {
        memset(out, 0, sizeof *out);
        key = u_strdup(cfg->lock);
    }
    if (!key) {
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    out->scheme = &st_custom_scheme;
    out->key = key;
    return 0;
}

int st_open(const s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
            size_t errlen)
{
    *out = NULL;
    return loc->scheme->open(cfg, loc, out, err, errlen);
}

int st_open_config(const s3lect_config *cfg, st_store **out, char **key_out, char *err,
                   size_t errlen)
{
    *out = NULL;
    *key_out = NULL;
    st_location loc;
    int rc = st_lock_location(cfg, &loc, err, errlen);
    if (rc)
        return rc;
    rc = st_open(cfg, &loc, out, err, errlen);
    if (rc == 0) {
        *key_out = loc.key;
        loc.key = NULL;
    }
    st_location_clear(&loc);
    return rc;
}

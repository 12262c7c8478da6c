/* SPDX-License-Identifier: Apache-2.0 */
/* kube_creds.c - the Kubernetes API server and its credentials
 * (kube_creds.h): the pod's service account, kubeconfig files (read with
 * base/yaml.h), and exec credential plugins run through the shared
 * credential cache.
 *
 * Kubeconfig merging, as client-go does it for the parts s3lect reads:
 * KUBECONFIG is a ':'-separated list of files (missing ones skipped); the
 * first non-empty current-context wins, and each named context, cluster
 * and user is taken from the first file that defines it. Relative paths
 * (certificate-authority, client-certificate, client-key, tokenFile, an
 * exec command with a '/') are relative to the file that names them.
 *
 * An exec plugin runs without a shell (command and args as given, the
 * command looked up in PATH when it has no '/'), with the kubeconfig's env
 * added to s3lect's, KUBERNETES_EXEC_INFO set, stdin /dev/null, stderr
 * passed through (its own messages reach the user; client-go does the
 * same), stdout read into memory (never logged, wiped), in a process group
 * of its own registered as the library's (base/proc.h), killed with its
 * group after S3LECT_K8S_EXEC_TIMEOUT (30 s).
 */
#include "kube_creds.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cred_http.h"
#include "proc.h"
#include "s3lect.h"
#include "util.h"
#include "yaml.h"

#define KUBECONFIG_MAX (4 * 1024 * 1024)
#define TOKEN_MAX (64 * 1024)
#define EXEC_OUTPUT_MAX (256 * 1024)
#define EXEC_TIMEOUT_MS 30000
#define MAX_KUBECONFIGS 16

/* unistd.h declares it only under _GNU_SOURCE */
extern char **environ; /* NOLINT(readability-redundant-declaration) */

/* ---- files ---- */

/* Reads path whole (at most max bytes) into *buf (NUL-terminated); 0, or
 * errno (EFBIG when larger). */
static int read_all(const char *path, size_t max, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    char *b = malloc(max + 1);
    if (!b) {
        close(fd);
        return ENOMEM;
    }
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, b + n, max + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            u_wipe(b, n);
            free(b);
            return e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            close(fd);
            u_wipe(b, n);
            free(b);
            return EFBIG;
        }
    }
    close(fd);
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

int kube_read_token_file(const char *path, char **token, char *err, size_t errlen)
{
    *token = NULL;
    char *b;
    size_t n;
    int e = read_all(path, TOKEN_MAX, &b, &n);
    if (e) {
        snprintf(err, errlen, "cannot read the token file %.300s: %s", path,
                 e == EFBIG ? "larger than 64 KiB" : strerror(e));
        return e == ENOMEM ? S3LECT_ENOMEM : S3LECT_EAUTH;
    }
    size_t s = 0;
    while (s < n && strchr(" \t\r\n", b[s]))
        s++;
    while (n > s && strchr(" \t\r\n", b[n - 1]))
        n--;
    int bad = n == s;
    for (size_t i = s; i < n && !bad; i++)
        bad = (unsigned char)b[i] < 0x21 || (unsigned char)b[i] > 0x7e;
    if (bad) {
        u_wipe(b, n);
        free(b);
        snprintf(err, errlen, "the token file %.300s is %s", path,
                 n == s ? "empty" : "not one token (it has spaces or control characters)");
        return S3LECT_EAUTH;
    }
    memmove(b, b + s, n - s);
    u_wipe(b + (n - s), s);
    b[n - s] = '\0';
    *token = b;
    return 0;
}

/* dir of path ("." when none), allocated. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return u_strdup(".");
    if (slash == path)
        return u_strdup("/");
    return u_asprintf("%.*s", (int)(slash - path), path);
}

/* A path as written in a kubeconfig: relative to its file's directory. */
static char *resolve_path(const char *dir, const char *p)
{
    if (p[0] == '/' || !dir)
        return u_strdup(p);
    return u_asprintf("%s/%s", dir, p);
}

/* ---- the target ---- */

static void exec_clear(kube_exec *x)
{
    free(x->command);
    for (size_t i = 0; i < x->nargs; i++)
        free(x->args[i]);
    free(x->args);
    for (size_t i = 0; i < x->nenv; i++)
        u_wipe_free(x->env[i]);
    free(x->env);
    free(x->api_version);
    free(x->dir);
    free(x->server);
    memset(x, 0, sizeof *x);
}

void kube_target_clear(kube_target *t)
{
    if (!t)
        return;
    free(t->server);
    free(t->ca_file);
    free(t->ca_pem);
    free(t->tls_server_name);
    u_wipe_free(t->token);
    free(t->token_file);
    free(t->cert_file);
    free(t->key_file);
    free(t->cert_pem);
    if (t->key_pem) {
        u_wipe(t->key_pem, t->key_pem_len);
        free(t->key_pem);
    }
    exec_clear(&t->exec);
    free(t->ns);
    free(t->user);
    memset(t, 0, sizeof *t);
}

#define OOM(err, errlen) (snprintf(err, errlen, "out of memory"), S3LECT_ENOMEM)

/* 1: not in a pod (or its token is not readable); 0: filled; else an error. */
static int in_cluster(kube_target *t, char *err, size_t errlen)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return 1;
    const char *dir = getenv("S3LECT_K8S_SA_DIR");
    if (!dir || !*dir)
        dir = KUBE_SA_DIR;
    char *tf = u_asprintf("%s/token", dir);
    if (!tf)
        return OOM(err, errlen);
    if (access(tf, R_OK) != 0) {
        free(tf);
        return 1;
    }
    if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5) {
        free(tf);
        snprintf(err, errlen, "KUBERNETES_SERVICE_PORT '%.20s' is not a port number", port);
        return S3LECT_EINVAL;
    }
    int v6 = strchr(host, ':') != NULL;
    t->server = u_asprintf("https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    t->token_file = tf;
    t->auth = KUBE_AUTH_TOKEN_FILE;
    char *ca = u_asprintf("%s/ca.crt", dir);
    if (ca && access(ca, R_OK) == 0)
        t->ca_file = ca;
    else
        free(ca);
    char *nsf = u_asprintf("%s/namespace", dir), *nb = NULL;
    size_t nl = 0;
    if (nsf && read_all(nsf, 1024, &nb, &nl) == 0) {
        while (nl && strchr(" \t\r\n", nb[nl - 1]))
            nb[--nl] = '\0';
        if (nl)
            t->ns = nb;
        else
            free(nb);
    }
    free(nsf);
    t->user = u_strdup("the pod's service account");
    if (!t->server || !t->user)
        return OOM(err, errlen);
    snprintf(t->source, sizeof t->source, "in-cluster service account (%s, server %s)", dir,
             t->server);
    snprintf(t->auth_desc, sizeof t->auth_desc, "token file %s (re-read as it rotates)",
             t->token_file);
    return 0;
}

typedef struct kdoc {
    char *path;
    char *dir;
    cJSON *root;
} kdoc;

static const char *jstr(const cJSON *o, const char *name)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, name) : NULL;
    return v && cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A boolean written as true/false or "true"/"false"; -1 when it is neither
 * (absent: 0). */
static int jbool(const cJSON *o, const char *name)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, name) : NULL;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v);
    if (cJSON_IsString(v) && strcmp(v->valuestring, "true") == 0)
        return 1;
    if (cJSON_IsString(v) && strcmp(v->valuestring, "false") == 0)
        return 0;
    return -1;
}

/* The entry named name of list (contexts, clusters, users) in the first
 * file that has one: its inner object (inner: "context", ...), and the
 * file. NULL when none. */
static const cJSON *find_named(const kdoc *docs, size_t n, const char *list, const char *inner,
                               const char *name, const kdoc **from)
{
    for (size_t i = 0; i < n; i++) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(docs[i].root, list);
        if (!cJSON_IsArray(l))
            continue;
        const cJSON *e;
        cJSON_ArrayForEach(e, l)
        {
            const char *nm = jstr(e, "name");
            if (nm && strcmp(nm, name) == 0) {
                *from = &docs[i];
                const cJSON *in = cJSON_GetObjectItemCaseSensitive(e, inner);
                return cJSON_IsObject(in) ? in : e;
            }
        }
    }
    return NULL;
}

/* base64 "…-data" into *out (allocated, NUL-terminated). */
static int b64_field(const cJSON *o, const char *name, const kdoc *d, char **out, size_t *len,
                     char *err, size_t errlen)
{
    const char *v = jstr(o, name);
    if (!v)
        return 0;
    size_t vl = strlen(v);
    uint8_t *b = malloc(U_UNBASE64_MAX(vl) + 1);
    if (!b)
        return OOM(err, errlen);
    long n = u_unbase64(v, vl, U_B64_STRICT, b);
    if (n <= 0) {
        free(b);
        snprintf(err, errlen, "kubeconfig %.300s: %s is not base64", d->path, name);
        return S3LECT_EINVAL;
    }
    b[n] = '\0';
    *out = (char *)b;
    *len = (size_t)n;
    return 0;
}

static int parse_exec(const cJSON *ex, const kdoc *d, const char *user, kube_target *t, char *err,
                      size_t errlen)
{
    kube_exec *x = &t->exec;
    const char *cmd = jstr(ex, "command");
    const char *ver = jstr(ex, "apiVersion");
    if (!cmd || !*cmd) {
        snprintf(err, errlen, "kubeconfig %.300s: user '%.100s': exec has no command", d->path,
                 user);
        return S3LECT_EINVAL;
    }
    if (!ver || (strcmp(ver, "client.authentication.k8s.io/v1") != 0 &&
                 strcmp(ver, "client.authentication.k8s.io/v1beta1") != 0)) {
        snprintf(err, errlen,
                 "kubeconfig %.300s: user '%.100s': exec apiVersion '%.80s' is not supported: "
                 "s3lect speaks client.authentication.k8s.io/v1 and v1beta1",
                 d->path, user, ver ? ver : "(none)");
        return S3LECT_EINVAL;
    }
    if (!(x->command = u_strdup(cmd)) || !(x->api_version = u_strdup(ver)) ||
        !(x->dir = u_strdup(d->dir)) || !(x->server = u_strdup(t->server)))
        return OOM(err, errlen);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(ex, "args");
    if (args && !cJSON_IsNull(args)) {
        if (!cJSON_IsArray(args)) {
            snprintf(err, errlen, "kubeconfig %.300s: user '%.100s': exec args is not a list",
                     d->path, user);
            return S3LECT_EINVAL;
        }
        int n = cJSON_GetArraySize(args);
        x->args = calloc((size_t)n + 1, sizeof *x->args);
        if (!x->args)
            return OOM(err, errlen);
        const cJSON *a;
        cJSON_ArrayForEach(a, args)
        {
            if (!cJSON_IsString(a)) {
                snprintf(err, errlen,
                         "kubeconfig %.300s: user '%.100s': an exec argument is not a string "
                         "(quote it)",
                         d->path, user);
                return S3LECT_EINVAL;
            }
            if (!(x->args[x->nargs++] = u_strdup(a->valuestring)))
                return OOM(err, errlen);
        }
    }
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(ex, "env");
    if (env && !cJSON_IsNull(env)) {
        if (!cJSON_IsArray(env)) {
            snprintf(err, errlen, "kubeconfig %.300s: user '%.100s': exec env is not a list",
                     d->path, user);
            return S3LECT_EINVAL;
        }
        int n = cJSON_GetArraySize(env);
        x->env = calloc((size_t)n + 1, sizeof *x->env);
        if (!x->env)
            return OOM(err, errlen);
        const cJSON *e;
        cJSON_ArrayForEach(e, env)
        {
            const char *nm = jstr(e, "name"), *v = jstr(e, "value");
            if (!nm || !*nm || strchr(nm, '=') || !v) {
                snprintf(err, errlen,
                         "kubeconfig %.300s: user '%.100s': an exec env entry needs a name and a "
                         "string value",
                         d->path, user);
                return S3LECT_EINVAL;
            }
            if (!(x->env[x->nenv++] = u_asprintf("%s=%s", nm, v)))
                return OOM(err, errlen);
        }
    }
    int pci = jbool(ex, "provideClusterInfo");
    x->cluster_info = pci == 1;
    t->auth = KUBE_AUTH_EXEC;
    snprintf(t->auth_desc, sizeof t->auth_desc, "exec plugin %.200s (%s)", cmd, ver);
    return 0;
}

static int parse_user(const cJSON *u, const kdoc *d, const char *user, kube_target *t, char *err,
                      size_t errlen)
{
    if (!u)
        return 0; /* no credentials: anonymous requests */
    if (cJSON_GetObjectItemCaseSensitive(u, "auth-provider")) {
        snprintf(err, errlen,
                 "kubeconfig %.300s: user '%.100s' uses an auth-provider (the legacy gcp/oidc "
                 "plugins), which s3lect does not support: use an exec credential plugin "
                 "(gke-gcloud-auth-plugin, kubelogin, aws eks get-token ...)",
                 d->path, user);
        return S3LECT_EINVAL;
    }
    if (jstr(u, "username") || jstr(u, "password")) {
        snprintf(err, errlen,
                 "kubeconfig %.300s: user '%.100s' uses a user name and password (basic "
                 "authentication), which s3lect does not support: use a token, a client "
                 "certificate or an exec plugin",
                 d->path, user);
        return S3LECT_EINVAL;
    }
    if (cJSON_GetObjectItemCaseSensitive(u, "as") ||
        cJSON_GetObjectItemCaseSensitive(u, "as-groups")) {
        snprintf(err, errlen,
                 "kubeconfig %.300s: user '%.100s' impersonates another ('as'), which s3lect "
                 "does not support",
                 d->path, user);
        return S3LECT_EINVAL;
    }
    int rc;
    const char *tok = jstr(u, "token"), *tf = jstr(u, "tokenFile");
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(u, "exec");
    int has_exec = ex && cJSON_IsObject(ex);
    if (has_exec && ((tok && *tok) || (tf && *tf))) {
        snprintf(err, errlen,
                 "kubeconfig %.300s: user '%.100s' has both a token and an exec plugin: keep one",
                 d->path, user);
        return S3LECT_EINVAL;
    }
    if (tf && *tf) {
        /* client-go: the file wins over a token written beside it */
        if (!(t->token_file = resolve_path(d->dir, tf)))
            return OOM(err, errlen);
        t->auth = KUBE_AUTH_TOKEN_FILE;
        snprintf(t->auth_desc, sizeof t->auth_desc, "token file %.300s (re-read as it rotates)",
                 t->token_file);
    } else if (tok && *tok) {
        if (!(t->token = u_strdup(tok)))
            return OOM(err, errlen);
        t->auth = KUBE_AUTH_TOKEN;
        snprintf(t->auth_desc, sizeof t->auth_desc, "the token in the kubeconfig");
    }
    const char *cf = jstr(u, "client-certificate"), *kf = jstr(u, "client-key");
    if ((rc = b64_field(u, "client-certificate-data", d, &t->cert_pem, &t->cert_pem_len, err,
                        errlen)) != 0 ||
        (rc = b64_field(u, "client-key-data", d, &t->key_pem, &t->key_pem_len, err, errlen)) != 0)
        return rc;
    if ((cf && *cf && !(t->cert_file = resolve_path(d->dir, cf))) ||
        (kf && *kf && !(t->key_file = resolve_path(d->dir, kf))))
        return OOM(err, errlen);
    int has_cert = t->cert_file || t->cert_pem, has_key = t->key_file || t->key_pem;
    if (has_cert != has_key) {
        snprintf(err, errlen,
                 "kubeconfig %.300s: user '%.100s' has a client %s without its %s: give both "
                 "(client-certificate[-data] and client-key[-data])",
                 d->path, user, has_cert ? "certificate" : "key", has_cert ? "key" : "certificate");
        return S3LECT_EINVAL;
    }
    if (has_cert) {
        char what[350];
        snprintf(what, sizeof what, "client certificate %.300s",
                 t->cert_file ? t->cert_file : "(client-certificate-data in the kubeconfig)");
        if (t->auth)
            snprintf(t->auth_desc + strlen(t->auth_desc),
                     sizeof t->auth_desc - strlen(t->auth_desc), " and %s", what);
        else
            snprintf(t->auth_desc, sizeof t->auth_desc, "%s", what);
        if (!t->auth)
            t->auth = KUBE_AUTH_CERT;
    }
    if (has_exec && (rc = parse_exec(ex, d, user, t, err, errlen)) != 0)
        return rc;
    return 0;
}

static int from_kubeconfig(const char *ctx_name, const char *explicit_path, kube_target *t,
                           char *err, size_t errlen)
{
    kdoc docs[MAX_KUBECONFIGS];
    size_t nd = 0;
    memset(docs, 0, sizeof docs);
    int rc = 0;
    char *list = NULL;
    const char *env = getenv("KUBECONFIG");
    const char *origin;
    if (explicit_path) {
        list = u_strdup(explicit_path);
        origin = "?kubeconfig=";
    } else if (env && *env) {
        list = u_strdup(env);
        origin = "KUBECONFIG";
    } else {
        char *home = u_home_dir();
        list = home ? u_asprintf("%s/.kube/config", home) : NULL;
        free(home);
        origin = "~/.kube/config";
        if (!list) {
            snprintf(err, errlen,
                     "no Kubernetes credentials: not in a pod (KUBERNETES_SERVICE_HOST is not "
                     "set) and no home directory for ~/.kube/config: set KUBECONFIG");
            return S3LECT_EAUTH;
        }
    }
    if (!list)
        return OOM(err, errlen);
    int multi = !explicit_path && env && *env;
    char tried[700] = "";
    for (char *save = NULL, *p = strtok_r(list, multi ? ":" : "", &save); p && !rc;
         p = strtok_r(NULL, multi ? ":" : "", &save)) {
        if (!*p)
            continue;
        if (nd == MAX_KUBECONFIGS) {
            snprintf(err, errlen, "KUBECONFIG names more than %d files", MAX_KUBECONFIGS);
            rc = S3LECT_EINVAL;
            break;
        }
        char *buf;
        size_t len;
        int e = read_all(p, KUBECONFIG_MAX, &buf, &len);
        if (e == ENOENT && multi) {
            snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%.200s",
                     tried[0] ? ", " : "", p);
            continue; /* client-go skips missing files of the list */
        }
        if (e) {
            if (e == ENOENT && !explicit_path && !multi)
                snprintf(err, errlen,
                         "no Kubernetes credentials: not in a pod (KUBERNETES_SERVICE_HOST is "
                         "not set, or no readable token in its service account directory) and "
                         "no kubeconfig (%.300s does not exist; set KUBECONFIG or "
                         "?kubeconfig=)",
                         p);
            else
                snprintf(err, errlen, "cannot read kubeconfig %.300s (%s): %s", p, origin,
                         e == EFBIG ? "larger than 4 MiB" : strerror(e));
            rc = e == ENOMEM ? S3LECT_ENOMEM : S3LECT_EAUTH;
            break;
        }
        char why[300];
        cJSON *root = u_yaml_parse(buf, len, why, sizeof why);
        u_wipe(buf, len);
        free(buf);
        if (!root || (!cJSON_IsObject(root) && !cJSON_IsNull(root))) {
            snprintf(err, errlen, "kubeconfig %.300s is not one the s3lect reader understands: %s",
                     p, root ? "not a mapping" : why);
            cJSON_Delete(root);
            rc = S3LECT_EINVAL;
            break;
        }
        docs[nd].root = root;
        docs[nd].path = u_strdup(p);
        docs[nd].dir = dir_of(p);
        nd++;
        if (!docs[nd - 1].path || !docs[nd - 1].dir)
            rc = OOM(err, errlen);
    }
    free(list);
    if (!rc && nd == 0) {
        snprintf(err, errlen,
                 "no Kubernetes credentials: not in a pod and none of KUBECONFIG's files exists "
                 "(%.400s)",
                 tried);
        rc = S3LECT_EAUTH;
    }
    const char *cur = ctx_name;
    const kdoc *cur_from = NULL;
    for (size_t i = 0; !rc && !cur && i < nd; i++) {
        const char *c = jstr(docs[i].root, "current-context");
        if (c && *c) {
            cur = c;
            cur_from = &docs[i];
        }
    }
    if (!rc && !cur) {
        snprintf(err, errlen,
                 "kubeconfig %.300s%s has no current-context: set one (kubectl config "
                 "use-context) or add ?context=NAME to the lock URL",
                 docs[0].path, nd > 1 ? " (and the other KUBECONFIG files)" : "");
        rc = S3LECT_EINVAL;
    }
    const kdoc *cd = NULL, *kd = NULL, *ud = NULL;
    const cJSON *ctx = NULL, *cl = NULL, *us = NULL;
    const char *cluster_name = NULL, *user_name = NULL;
    if (!rc) {
        ctx = find_named(docs, nd, "contexts", "context", cur, &cd);
        if (!ctx) {
            snprintf(err, errlen, "kubeconfig %.300s%s has no context '%.100s'%s",
                     cur_from ? cur_from->path : docs[0].path,
                     nd > 1 ? " (nor the other KUBECONFIG files)" : "", cur,
                     ctx_name ? " (?context=)" : " (its current-context)");
            rc = S3LECT_EINVAL;
        }
    }
    if (!rc) {
        cluster_name = jstr(ctx, "cluster");
        user_name = jstr(ctx, "user");
        const char *ns = jstr(ctx, "namespace");
        if (ns && *ns && !(t->ns = u_strdup(ns)))
            rc = OOM(err, errlen);
        if (!cluster_name || !*cluster_name ||
            !(cl = find_named(docs, nd, "clusters", "cluster", cluster_name, &kd))) {
            snprintf(err, errlen, "kubeconfig %.300s: context '%.100s' names %s%.100s%s", cd->path,
                     cur, cluster_name ? "cluster '" : "no cluster",
                     cluster_name ? cluster_name : "",
                     cluster_name ? "', which is not defined" : "");
            rc = S3LECT_EINVAL;
        }
    }
    if (!rc && user_name && *user_name) {
        us = find_named(docs, nd, "users", "user", user_name, &ud);
        if (!us) {
            snprintf(err, errlen,
                     "kubeconfig %.300s: context '%.100s' names user '%.100s', which is not "
                     "defined",
                     cd->path, cur, user_name);
            rc = S3LECT_EINVAL;
        }
    }
    if (!rc) {
        const char *server = jstr(cl, "server");
        if (!server ||
            (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)) {
            snprintf(err, errlen,
                     "kubeconfig %.300s: cluster '%.100s' has %s: it needs https://HOST[:PORT]",
                     kd->path, cluster_name,
                     server ? "a server that is not an http(s) URL" : "no server");
            rc = S3LECT_EINVAL;
        } else if (!(t->server = u_strdup(server))) {
            rc = OOM(err, errlen);
        } else {
            size_t sl = strlen(t->server);
            while (sl > 8 && t->server[sl - 1] == '/')
                t->server[--sl] = '\0';
        }
    }
    if (!rc && (jstr(cl, "proxy-url") && *jstr(cl, "proxy-url"))) {
        snprintf(err, errlen,
                 "kubeconfig %.300s: cluster '%.100s' has a proxy-url, which s3lect "
                 "does not support",
                 kd->path, cluster_name);
        rc = S3LECT_EINVAL;
    }
    if (!rc) {
        const char *caf = jstr(cl, "certificate-authority");
        int ins = jbool(cl, "insecure-skip-tls-verify");
        const char *sni = jstr(cl, "tls-server-name");
        if (ins < 0) {
            snprintf(err, errlen,
                     "kubeconfig %.300s: cluster '%.100s': insecure-skip-tls-verify is not true "
                     "or false",
                     kd->path, cluster_name);
            rc = S3LECT_EINVAL;
        }
        t->insecure = ins == 1;
        if (!rc)
            rc = b64_field(cl, "certificate-authority-data", kd, &t->ca_pem, &t->ca_pem_len, err,
                           errlen);
        if (!rc && !t->ca_pem && caf && *caf && !(t->ca_file = resolve_path(kd->dir, caf)))
            rc = OOM(err, errlen);
        if (!rc && sni && *sni && !(t->tls_server_name = u_strdup(sni)))
            rc = OOM(err, errlen);
    }
    if (!rc) {
        t->user = u_strdup(user_name && *user_name ? user_name : "(none)");
        if (!t->user)
            rc = OOM(err, errlen);
    }
    if (!rc)
        rc = parse_user(us, ud, t->user, t, err, errlen);
    if (!rc) {
        snprintf(t->source, sizeof t->source,
                 "kubeconfig %.300s context %.80s (cluster %.80s, user %.80s)",
                 (cur_from ? cur_from : cd)->path, cur, cluster_name, t->user);
        if (!t->auth)
            snprintf(t->auth_desc, sizeof t->auth_desc, "no credentials (anonymous requests)");
    }
    for (size_t i = 0; i < nd; i++) {
        cred_json_wipe_delete(docs[i].root); /* may hold tokens: copies were made */
        free(docs[i].path);
        free(docs[i].dir);
    }
    return rc;
}

int kube_resolve(const char *context, const char *kubeconfig, kube_target *out, char *err,
                 size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = 1;
    if (!context && !kubeconfig)
        rc = in_cluster(out, err, errlen);
    if (rc == 1) {
        kube_target_clear(out);
        rc = from_kubeconfig(context, kubeconfig, out, err, errlen);
    }
    if (rc)
        kube_target_clear(out);
    return rc;
}

/* ---- exec credential plugins ---- */

int64_t kube_exec_timeout_ms(void)
{
    const char *v = getenv("S3LECT_K8S_EXEC_TIMEOUT");
    if (v && *v) {
        char *end;
        double s = strtod(v, &end);
        if (end != v && *end == '\0' && s > 0 && s <= 3600)
            return (int64_t)(s * 1000);
    }
    return EXEC_TIMEOUT_MS;
}

void kube_bearer_split(char *bearer, char **token, char **cert, char **key)
{
    *token = *cert = *key = NULL;
    if (!bearer)
        return;
    if (bearer[0] != '\x01') {
        *token = bearer;
        return;
    }
    /* "\x01CERT\x01KEY\x01TOKEN" */
    char *c = bearer + 1;
    char *k = strchr(c, '\x01');
    if (!k)
        return;
    *k++ = '\0';
    char *t = strchr(k, '\x01');
    if (t)
        *t++ = '\0';
    *cert = c;
    *key = k;
    *token = t && *t ? t : NULL;
}

int kube_parse_exec_credential(const char *buf, size_t len, const char *api_version,
                               cred_fetched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    cJSON *j = cJSON_ParseWithLength(buf, len);
    int rc = S3LECT_EAUTH;
    if (!j || !cJSON_IsObject(j)) {
        snprintf(err, errlen, "its output is not a JSON object (an ExecCredential)");
        goto done;
    }
    const char *ver = jstr(j, "apiVersion"), *kind = jstr(j, "kind");
    if (!kind || strcmp(kind, "ExecCredential") != 0) {
        snprintf(err, errlen, "its output is not an ExecCredential (kind '%.40s')",
                 kind ? kind : "");
        goto done;
    }
    if (!ver || strcmp(ver, api_version) != 0) {
        snprintf(err, errlen,
                 "it answered with apiVersion '%.80s' but the kubeconfig asks for '%.80s'",
                 ver ? ver : "", api_version);
        goto done;
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
    if (!cJSON_IsObject(st)) {
        snprintf(err, errlen, "its ExecCredential has no status");
        goto done;
    }
    const char *tok = jstr(st, "token"), *cd = jstr(st, "clientCertificateData"),
               *kd = jstr(st, "clientKeyData"), *exp = jstr(st, "expirationTimestamp");
    if (tok && !*tok)
        tok = NULL;
    if ((cd && *cd) != (kd && *kd)) {
        snprintf(err, errlen, "its ExecCredential has %s without %s: a certificate needs both",
                 cd && *cd ? "clientCertificateData" : "clientKeyData",
                 cd && *cd ? "clientKeyData" : "clientCertificateData");
        goto done;
    }
    int cert = cd && *cd;
    if (!tok && !cert) {
        snprintf(err, errlen,
                 "its ExecCredential status has neither a token nor clientCertificateData and "
                 "clientKeyData");
        goto done;
    }
    if (tok && strpbrk(tok, "\r\n\x01")) {
        snprintf(err, errlen, "its token has a line break or a control character");
        goto done;
    }
    if (cert && (strchr(cd, '\x01') || strchr(kd, '\x01'))) {
        snprintf(err, errlen, "its certificate data has a control character");
        goto done;
    }
    if (exp && *exp && u_parse_rfc3339(exp, &out->expires_ms) != 0) {
        snprintf(err, errlen, "its expirationTimestamp '%.40s' is not an RFC 3339 time", exp);
        goto done;
    }
    out->bearer = cert ? u_asprintf("\x01%s\x01%s\x01%s", cd, kd, tok ? tok : "") : u_strdup(tok);
    if (!out->bearer) {
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        goto done;
    }
    rc = 0;
done:
    cred_json_wipe_delete(j); /* the token and key */
    if (rc)
        cred_fetched_clear(out);
    return rc;
}

typedef struct exec_state {
    kube_exec x;
    char desc[320];
} exec_state;

static void exec_state_free(void *p)
{
    exec_state *s = p;
    if (!s)
        return;
    exec_clear(&s->x);
    free(s);
}

/* The plugin's environment: s3lect's, the kubeconfig's env over it, and
 * KUBERNETES_EXEC_INFO. NULL when out of memory. */
static char **exec_env(const kube_exec *x)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + x->nenv + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = environ[i];
        size_t nl = strcspn(e, "=");
        int over = strncmp(e, "KUBERNETES_EXEC_INFO=", 21) == 0;
        for (size_t k = 0; k < x->nenv && !over; k++)
            over = strncmp(x->env[k], e, nl + 1) == 0;
        if (!over)
            env[o++] = (char *)e;
    }
    for (size_t k = 0; k < x->nenv; k++)
        env[o++] = x->env[k];
    cJSON *info = cJSON_CreateObject(), *spec = NULL;
    char *text = NULL;
    if (info && cJSON_AddStringToObject(info, "apiVersion", x->api_version) &&
        cJSON_AddStringToObject(info, "kind", "ExecCredential") &&
        (spec = cJSON_AddObjectToObject(info, "spec")) &&
        cJSON_AddBoolToObject(spec, "interactive", 0)) {
        cJSON *cl = x->cluster_info ? cJSON_AddObjectToObject(spec, "cluster") : NULL;
        if (!x->cluster_info || (cl && cJSON_AddStringToObject(cl, "server", x->server)))
            text = cJSON_PrintUnformatted(info);
    }
    cJSON_Delete(info);
    char *var = text ? u_asprintf("KUBERNETES_EXEC_INFO=%s", text) : NULL;
    free(text);
    if (!var) {
        free(env);
        return NULL;
    }
    env[o++] = var; /* freed by the caller: the last entry */
    env[o] = NULL;
    return env;
}

static int exec_fetch(const void *state, int first, const _Atomic int *abort, cred_fetched *out,
                      char *err, size_t errlen)
{
    (void)first;
    const exec_state *s = state;
    const kube_exec *x = &s->x;
    memset(out, 0, sizeof *out);
    char *path = strchr(x->command, '/') ? resolve_path(x->dir, x->command) : u_strdup(x->command);
    char **argv = calloc(x->nargs + 2, sizeof *argv);
    char **env = exec_env(x);
    if (!path || !argv || !env) {
        free(path);
        free(argv);
        if (env) {
            size_t k = 0;
            while (env[k + 1])
                k++;
            free(env[k]);
            free(env);
        }
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    argv[0] = x->command;
    for (size_t i = 0; i < x->nargs; i++)
        argv[i + 1] = x->args[i];
    int64_t timeout = kube_exec_timeout_ms();
    u_helper_result r;
    u_helper_run(path, argv, env, timeout, EXEC_OUTPUT_MAX, abort, &r);
    {
        size_t k = 0;
        while (env[k + 1])
            k++;
        free(env[k]); /* KUBERNETES_EXEC_INFO */
        free(env);
    }
    free(argv);
    free(path);
    int rc = S3LECT_EAUTH;
    switch (r.state) {
    case U_HELPER_NOSTART:
        snprintf(err, errlen, "%s cannot be started: %s%s", s->desc, strerror(r.code),
                 r.code == ENOENT ? " (is it installed and in PATH?)" : "");
        break;
    case U_HELPER_NOPIPE:
        snprintf(err, errlen, "%s: cannot create a pipe: %s", s->desc, strerror(r.code));
        rc = S3LECT_ETRANSIENT;
        break;
    case U_HELPER_NOMEM:
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        break;
    case U_HELPER_ABORTED:
        snprintf(err, errlen, "%s was cancelled (s3lect is stopping)", s->desc);
        rc = S3LECT_ETRANSIENT;
        break;
    case U_HELPER_TIMEOUT:
        snprintf(err, errlen,
                 "%s did not finish within %lld ms and was killed (S3LECT_K8S_EXEC_TIMEOUT "
                 "allows longer, in seconds)",
                 s->desc, (long long)timeout);
        rc = S3LECT_ETRANSIENT;
        break;
    case U_HELPER_TOO_BIG:
        snprintf(err, errlen, "%s printed more than %d bytes; it must print one ExecCredential",
                 s->desc, EXEC_OUTPUT_MAX);
        break;
    case U_HELPER_SIGNALED:
        snprintf(err, errlen, "%s was killed by signal %d", s->desc, r.code);
        break;
    default:
        if (r.code != 0) {
            snprintf(err, errlen, "%s exited with status %d (%s)", s->desc, r.code,
                     r.code == 127 ? "the command cannot be started: is it installed and in PATH?"
                                   : "its own messages are on stderr");
        } else {
            char why[300];
            rc = kube_parse_exec_credential(r.out, r.len, x->api_version, out, why, sizeof why);
            if (rc)
                snprintf(err, errlen, "%s: %s", s->desc, why);
        }
    }
    u_helper_result_clear(&r);
    return rc;
}

static const cred_ops exec_ops = {exec_fetch, exec_state_free, NULL};

static int copy_exec(const kube_exec *from, kube_exec *to)
{
    memset(to, 0, sizeof *to);
    if (!(to->command = u_strdup(from->command)) ||
        !(to->api_version = u_strdup(from->api_version)) || !(to->dir = u_strdup(from->dir)) ||
        !(to->server = u_strdup(from->server)) ||
        !(to->args = calloc(from->nargs + 1, sizeof *to->args)) ||
        !(to->env = calloc(from->nenv + 1, sizeof *to->env)))
        return -1;
    to->cluster_info = from->cluster_info;
    for (size_t i = 0; i < from->nargs; i++)
        if (!(to->args[to->nargs++] = u_strdup(from->args[i])))
            return -1;
    for (size_t i = 0; i < from->nenv; i++)
        if (!(to->env[to->nenv++] = u_strdup(from->env[i])))
            return -1;
    return 0;
}

int kube_exec_open(const kube_target *t, int flags, cred_cache **out, char *err, size_t errlen)
{
    *out = NULL;
    const kube_exec *x = &t->exec;
    exec_state *s = calloc(1, sizeof *s);
    if (!s || copy_exec(x, &s->x) != 0) {
        exec_state_free(s);
        return OOM(err, errlen);
    }
    snprintf(s->desc, sizeof s->desc, "exec plugin %.200s (user %.60s)", x->command, t->user);
    /* The key names everything the run depends on. */
    size_t kl =
        64 + strlen(x->command) + strlen(x->api_version) + strlen(x->dir) + strlen(x->server);
    for (size_t i = 0; i < x->nargs; i++)
        kl += strlen(x->args[i]) + 1;
    for (size_t i = 0; i < x->nenv; i++)
        kl += strlen(x->env[i]) + 1;
    char *key = calloc(1, kl);
    struct cred_cache *e = key ? cred_entry_new(&exec_ops) : NULL;
    if (!e) {
        free(key);
        exec_state_free(s);
        return OOM(err, errlen);
    }
    snprintf(key, kl, "kube-exec\n%s\n%s\n%s\n%s\n%d", x->api_version, x->command, x->dir,
             x->cluster_info ? x->server : "", (int)x->nargs);
    for (size_t i = 0; i < x->nargs; i++) {
        strcat(key, "\n");
        strcat(key, x->args[i]);
    }
    strcat(key, "\nenv");
    for (size_t i = 0; i < x->nenv; i++) {
        strcat(key, "\n");
        strcat(key, x->env[i]);
    }
    e->state = s;
    e->key = key;
    snprintf(e->desc, sizeof e->desc, "%s", s->desc);
    return cred_cache_open(e, flags, out, err, errlen);
}

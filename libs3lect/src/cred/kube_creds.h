/* SPDX-License-Identifier: Apache-2.0 */
/* kube_creds.h - where a Kubernetes API server is and how to authenticate
 * to it, in client-go's order (kube_creds.c): the pod's service account
 * (in-cluster), else a kubeconfig (KUBECONFIG's files, else
 * ~/.kube/config; ?kubeconfig= and ?context= of a k8s:// lock choose).
 * Tokens may come from the kubeconfig, a token file (re-read as it
 * rotates: the store does that) or an exec credential plugin, whose runs
 * go through the shared credential cache (cred_cache.h): electors of one
 * process that use the same plugin share one run per expiry.
 *
 * Nothing here puts a token or a key into a message.
 */
#ifndef S3LECT_KUBE_CREDS_H
#define S3LECT_KUBE_CREDS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cred_cache.h"

/* The service account directory of a pod; S3LECT_K8S_SA_DIR replaces it
 * (for tests). */
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* An exec credential plugin (a kubeconfig user's "exec"). */
typedef struct kube_exec {
    char *command; /* as written; resolved when it runs */
    char **args;   /* nargs */
    size_t nargs;
    char **env; /* "NAME=value", nenv */
    size_t nenv;
    char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
    char *dir;         /* the kubeconfig's directory: a relative command with a '/' is
                        * taken from there, as client-go does */
    char *server;      /* the cluster's server (KUBERNETES_EXEC_INFO with
                        * provideClusterInfo) */
    int cluster_info;  /* provideClusterInfo */
} kube_exec;

enum {
    KUBE_AUTH_NONE = 0,
    KUBE_AUTH_TOKEN,      /* token: a static bearer token */
    KUBE_AUTH_TOKEN_FILE, /* token_file: re-read every 60 s and after a 401 */
    KUBE_AUTH_CERT,       /* a client certificate (files or PEM in memory) */
    KUBE_AUTH_EXEC,       /* an exec plugin (a token or a certificate) */
};

typedef struct kube_target {
    char *server; /* "https://host:port[/path]", no trailing '/' */
    /* TLS trust: ca_file (a path), or ca_pem (certificate-authority-data,
     * decoded); insecure: insecure-skip-tls-verify. */
    char *ca_file;
    char *ca_pem;
    size_t ca_pem_len;
    int insecure;
    char *tls_server_name;
    int auth;    /* KUBE_AUTH_*; a certificate may come with a token */
    char *token; /* a secret: wiped when cleared */
    char *token_file;
    char *cert_file, *key_file;
    char *cert_pem, *key_pem; /* key_pem is a secret */
    size_t cert_pem_len, key_pem_len;
    kube_exec exec;
    char *ns;   /* the context's namespace, or the pod's; NULL when none */
    char *user; /* the kubeconfig user's name, or "system:serviceaccount" */
    /* For people (whoami, messages): "in-cluster service account (DIR)",
     * "kubeconfig /home/u/.kube/config context kind user admin" ... */
    char source[600];
    char auth_desc[400]; /* "token file PATH", "exec plugin CMD", ... */
} kube_target;

/* Resolves the server and credentials. context: ?context= (NULL: the
 * current one); kubeconfig: ?kubeconfig= (NULL: KUBECONFIG, else
 * ~/.kube/config). Without either, the pod's service account comes first
 * when KUBERNETES_SERVICE_HOST and _PORT are set and its token file is
 * readable. Returns 0, or S3LECT_EINVAL / S3LECT_EAUTH / S3LECT_ENOMEM with
 * a one-line message saying what to fix. */
int kube_resolve(const char *context, const char *kubeconfig, kube_target *out, char *err,
                 size_t errlen);
void kube_target_clear(kube_target *t);

/* Reads a token file: the token (allocated, a secret) without surrounding
 * white space. Returns 0, or S3LECT_EAUTH with err naming the file. */
int kube_read_token_file(const char *path, char **token, char *err, size_t errlen);

/* The shared cache entry of t's exec plugin (t->auth == KUBE_AUTH_EXEC):
 * cred_cache_bearer then hands out its token or certificate, as
 * kube_bearer_split splits it. flags: 0 (run it now: open fails with the
 * plugin's error) or CRED_CACHE_NOWAIT. */
int kube_exec_open(const kube_target *t, int flags, cred_cache **out, char *err, size_t errlen);

/* An ExecCredential (a plugin's output) into out: status.token as
 * out->bearer, or status.clientCertificateData and clientKeyData packed
 * into out->bearer (kube_bearer_split); status.expirationTimestamp as
 * out->expires_ms (0: none). api_version: the one the kubeconfig asked
 * for, which the answer must carry. 0, or S3LECT_EAUTH with err saying
 * what is wrong (never a secret). */
int kube_parse_exec_credential(const char *buf, size_t len, const char *api_version,
                               cred_fetched *out, char *err, size_t errlen);

/* Splits what the cache holds for an exec plugin (bearer, the caller's
 * own copy, which this edits): *token (NULL: none) and, for a client
 * certificate, *cert and *key (PEM; NULL: none), all pointing into bearer. */
void kube_bearer_split(char *bearer, char **token, char **cert, char **key);

/* How long an exec plugin may run: S3LECT_K8S_EXEC_TIMEOUT seconds, else
 * 30 s. */
int64_t kube_exec_timeout_ms(void);

#endif

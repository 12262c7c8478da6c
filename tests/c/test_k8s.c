/* SPDX-License-Identifier: Apache-2.0 */
/* test_k8s.c - the Kubernetes Lease store's pieces that need no server:
 * k8s:// lock URLs, the YAML subset reader (base/yaml.h), kubeconfig and
 * in-cluster resolution (cred/kube_creds.h), ExecCredential parsing, an
 * exec plugin run through the shared cache, and the Lease <-> record
 * mapping (client-go leases, released leases, a stale record under a
 * client-go holder). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube_creds.h"
#include "record.h"
#include "s3lect.h"
#include "store.h"
#include "testutil.h"
#include "util.h"
#include "yaml.h"

static int s_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* ---- lock URLs ---- */

static void url_ok(const char *url, const char *ns, const char *name, const char *ctx,
                   const char *kc, const char *canon)
{
    st_location loc;
    char err[600] = "";
    int rc = st_location_parse(url, &loc, err, sizeof err);
    CHECK(rc == 0, "%s: refused: %s", url, err);
    if (rc)
        return;
    CHECK(loc.scheme && strcmp(loc.scheme->name, "k8s") == 0, "%s: scheme %s", url,
          loc.scheme ? loc.scheme->name : "-");
    CHECK(s_eq(loc.bucket, ns), "%s: ns '%s'", url, loc.bucket);
    CHECK(s_eq(loc.key, name), "%s: name '%s'", url, loc.key);
    CHECK(s_eq(loc.opt1, ctx), "%s: context '%s'", url, loc.opt1 ? loc.opt1 : "(null)");
    CHECK(s_eq(loc.opt2, kc), "%s: kubeconfig '%s'", url, loc.opt2 ? loc.opt2 : "(null)");
    CHECK(loc.scheme && loc.scheme->cred == ST_CRED_KUBE, "%s: cred kind", url);
    st_location_clear(&loc);
    char *c = st_lock_canonical(url);
    CHECK(c && strcmp(c, canon) == 0, "%s: canonical '%s' want '%s'", url, c ? c : "(null)", canon);
    free(c);
}

static void url_bad(const char *url, const char *want)
{
    st_location loc;
    char err[600] = "";
    int rc = st_location_parse(url, &loc, err, sizeof err);
    CHECK(rc == S3LECT_EINVAL, "%s: accepted (rc %d)", url, rc);
    if (rc == 0)
        st_location_clear(&loc);
    CHECK(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", url, err, want);
    CHECK(strchr(err, '\n') == NULL, "%s: message has a newline", url);
}

static void urls(void)
{
    url_ok("k8s://default/my-app", "default", "my-app", NULL, NULL, "k8s://default/my-app");
    url_ok("kubernetes://kube-system/a.b-c", "kube-system", "a.b-c", NULL, NULL,
           "k8s://kube-system/a.b-c");
    url_ok("K8S://ns1/x", "ns1", "x", NULL, NULL, "k8s://ns1/x");
    url_ok("k8s://ns/l?context=kind-kind&kubeconfig=/tmp/k%20c", "ns", "l", "kind-kind", "/tmp/k c",
           "k8s://ns/l?context=kind-kind&kubeconfig=/tmp/k%20c");
    url_ok("k8s://ns/l?kubeconfig=/etc/kc", "ns", "l", NULL, "/etc/kc",
           "k8s://ns/l?kubeconfig=/etc/kc");
    char longname[300];
    memset(longname, 'a', 253);
    longname[253] = '\0';
    char u[400];
    snprintf(u, sizeof u, "k8s://ns/%s", longname);
    char cu[400];
    snprintf(cu, sizeof cu, "k8s://ns/%s", longname);
    url_ok(u, "ns", longname, NULL, NULL, cu);
    snprintf(u, sizeof u, "k8s://ns/%sa", longname);
    url_bad(u, "longer than 253");
    url_bad("k8s://ns", "needs a namespace and a Lease name");
    url_bad("k8s://ns/", "the Lease name is empty");
    url_bad("k8s:///name", "the namespace is empty");
    url_bad("k8s://Default/x", "not a DNS-1123 label");
    url_bad("k8s://a.b/x", "not a DNS-1123 label");
    url_bad("k8s://-ns/x", "not a DNS-1123 label");
    url_bad("k8s://0123456789012345678901234567890123456789012345678901234567890123/x",
            "longer than 63");
    url_bad("k8s://ns/My-Lease", "not a DNS-1123 subdomain");
    url_bad("k8s://ns/a_b", "not a DNS-1123 subdomain");
    url_bad("k8s://ns/a-", "not a DNS-1123 subdomain");
    url_bad("k8s://ns/a/b", "exactly two parts");
    url_bad("k8s://ns/a#frag", "no fragment");
    url_bad("k8s://ns/a?bogus=1", "bogus");
    url_bad("k8s://ns/a?context=", "context");
}

/* ---- YAML ---- */

static cJSON *yaml(const char *text, char *err, size_t errlen)
{
    return u_yaml_parse(text, strlen(text), err, errlen);
}

static void yaml_ok(const char *text, const char *json)
{
    char err[300] = "";
    cJSON *j = yaml(text, err, sizeof err);
    CHECK(j != NULL, "yaml refused: %s\n---\n%s", err, text);
    if (!j)
        return;
    char *got = cJSON_PrintUnformatted(j);
    CHECK(got && strcmp(got, json) == 0, "yaml:\n%s\ngot  %s\nwant %s", text, got, json);
    free(got);
    cJSON_Delete(j);
}

static void yaml_bad(const char *text, const char *want)
{
    char err[300] = "";
    cJSON *j = yaml(text, err, sizeof err);
    CHECK(j == NULL, "yaml accepted:\n%s", text);
    cJSON_Delete(j);
    CHECK(strstr(err, want) != NULL, "yaml error '%s' lacks '%s' for:\n%s", err, want, text);
}

static void yaml_tests(void)
{
    yaml_ok("a: b\n", "{\"a\":\"b\"}");
    yaml_ok("# c\n---\na: b # comment\nc: 'it''s'\nd: \"x\\ty\\u00e9\"\n",
            "{\"a\":\"b\",\"c\":\"it's\",\"d\":\"x\\ty\xc3\xa9\"}");
    yaml_ok(
        "a: true\nb: false\nc: null\nd: ~\ne:\nf: 12\ng: \"true\"\n",
        "{\"a\":true,\"b\":false,\"c\":null,\"d\":null,\"e\":null,\"f\":\"12\",\"g\":\"true\"}");
    yaml_ok("l:\n- a\n- b\nm: x\n", "{\"l\":[\"a\",\"b\"],\"m\":\"x\"}");
    yaml_ok("l:\n  - a\n  -   b\n", "{\"l\":[\"a\",\"b\"]}");
    /* kubectl's layout */
    yaml_ok("apiVersion: v1\n"
            "clusters:\n"
            "- cluster:\n"
            "    certificate-authority-data: QUJD\n"
            "    server: https://127.0.0.1:6443\n"
            "  name: kind\n"
            "contexts:\n"
            "- context:\n"
            "    cluster: kind\n"
            "    user: admin\n"
            "  name: kind\n"
            "current-context: kind\n"
            "kind: Config\n"
            "preferences: {}\n"
            "users:\n"
            "- name: admin\n"
            "  user:\n"
            "    exec:\n"
            "      apiVersion: client.authentication.k8s.io/v1\n"
            "      args: [\"--a\", b, 'c d']\n"
            "      command: plug\n"
            "      env:\n"
            "      - name: X\n"
            "        value: \"1\"\n"
            "      interactiveMode: Never\n",
            "{\"apiVersion\":\"v1\",\"clusters\":[{\"cluster\":{\"certificate-authority-data\":"
            "\"QUJD\",\"server\":\"https://127.0.0.1:6443\"},\"name\":\"kind\"}],\"contexts\":[{"
            "\"context\":{\"cluster\":\"kind\",\"user\":\"admin\"},\"name\":\"kind\"}],"
            "\"current-context\":\"kind\",\"kind\":\"Config\",\"preferences\":{},\"users\":[{"
            "\"name\":\"admin\",\"user\":{\"exec\":{\"apiVersion\":\"client.authentication.k8s."
            "io/v1\",\"args\":[\"--a\",\"b\",\"c d\"],\"command\":\"plug\",\"env\":[{\"name\":"
            "\"X\",\"value\":\"1\"}],\"interactiveMode\":\"Never\"}}}]}");
    yaml_ok("- - a\n  - b\n- c\n", "[[\"a\",\"b\"],\"c\"]");
    yaml_ok("-\n  a: 1\n", "[{\"a\":\"1\"}]");
    yaml_ok("f: {a: 1, b: [x, \"y\"],\n   c: {}}\n",
            "{\"f\":{\"a\":\"1\",\"b\":[\"x\",\"y\"],\"c\":{}}}");
    yaml_ok("{\"a\": [1, true]}", "{\"a\":[1,true]}"); /* JSON */
    yaml_ok("\xef\xbb\xbf"
            "a: b\r\nc: d\r\n",
            "{\"a\":\"b\",\"c\":\"d\"}");
    yaml_ok("\"quoted key\": v\n", "{\"quoted key\":\"v\"}");
    yaml_ok("url: http://x:1/a#b\n", "{\"url\":\"http://x:1/a#b\"}");
    yaml_ok("a: b\n...\n# after\n", "{\"a\":\"b\"}");
    yaml_ok("", "null");
    yaml_bad("a: |\n  text\n", "block scalars");
    yaml_bad("a: >\n  text\n", "block scalars");
    yaml_bad("a: &x 1\n", "anchors");
    yaml_bad("a: *x\n", "anchors");
    yaml_bad("a: !!str 1\n", "tags");
    yaml_bad("a: 1\na: 2\n", "line 2: duplicate key 'a'");
    yaml_bad("a:\n\tb: 1\n", "line 2: a tab");
    yaml_bad("a: 1\n  b: 2\n", "line 2");
    yaml_bad("a: \"open\n", "not closed");
    yaml_bad("a: [1, 2\n", "not closed");
    yaml_bad("a: b: c\n", "': '");
    yaml_bad("a: 1\n---\nb: 2\n", "second document");
    yaml_bad("a: \"\\q\"\n", "unknown escape");
    yaml_bad("a: plain\n  continued\n", "multi-line");
    yaml_bad("a: 1\n- b\n", "sequence item");
    /* deep nesting */
    char deep[400] = "";
    for (int i = 0; i < 70; i++)
        strcat(deep, "[");
    yaml_bad(deep, "nested more than 64");
}

/* ---- kubeconfig and in-cluster ---- */

static char *write_file(const char *dir, const char *name, const char *text)
{
    char *p = u_asprintf("%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

static void resolve_ok(const char *ctx, const char *kc, kube_target *t)
{
    char err[700] = "";
    int rc = kube_resolve(ctx, kc, t, err, sizeof err);
    CHECK(rc == 0, "resolve(%s, %s): %s", ctx ? ctx : "-", kc ? kc : "-", err);
}

static void resolve_bad(const char *ctx, const char *kc, const char *want)
{
    kube_target t;
    char err[700] = "";
    int rc = kube_resolve(ctx, kc, &t, err, sizeof err);
    CHECK(rc != 0, "resolve(%s, %s) accepted", ctx ? ctx : "-", kc ? kc : "-");
    if (rc == 0)
        kube_target_clear(&t);
    CHECK(strstr(err, want) != NULL, "resolve error '%s' lacks '%s'", err, want);
    CHECK(strstr(err, "s3cr3t") == NULL, "error shows a token: %s", err);
}

static void kubeconfig_tests(void)
{
    char *dir = t_tmpdir("k8s");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    /* "Q0EK" is "CA\n" */
    char *a = write_file(dir, "a.yaml",
                         "apiVersion: v1\n"
                         "kind: Config\n"
                         "current-context: one\n"
                         "clusters:\n"
                         "- name: c1\n"
                         "  cluster:\n"
                         "    server: https://127.0.0.1:6443/\n"
                         "    certificate-authority-data: Q0EK\n"
                         "    tls-server-name: kubernetes\n"
                         "- name: c2\n"
                         "  cluster:\n"
                         "    server: https://[::1]:7443\n"
                         "    certificate-authority: certs/ca.crt\n"
                         "    insecure-skip-tls-verify: false\n"
                         "contexts:\n"
                         "- name: one\n"
                         "  context: {cluster: c1, user: tok, namespace: team}\n"
                         "- name: two\n"
                         "  context: {cluster: c2, user: cert}\n"
                         "- name: three\n"
                         "  context: {cluster: c1, user: plug}\n"
                         "- name: four\n"
                         "  context: {cluster: c1, user: tf}\n"
                         "- name: legacy\n"
                         "  context: {cluster: c1, user: gcp}\n"
                         "- name: nouser\n"
                         "  context: {cluster: c1, user: ghost}\n"
                         "users:\n"
                         "- name: tok\n"
                         "  user:\n"
                         "    token: s3cr3t-token\n"
                         "- name: cert\n"
                         "  user:\n"
                         "    client-certificate: certs/u.crt\n"
                         "    client-key: /abs/u.key\n"
                         "- name: plug\n"
                         "  user:\n"
                         "    exec:\n"
                         "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                         "      command: ./bin/plug\n"
                         "      args: [\"--x\"]\n"
                         "      env: [{name: A, value: b}]\n"
                         "- name: tf\n"
                         "  user:\n"
                         "    tokenFile: tok.txt\n"
                         "- name: gcp\n"
                         "  user:\n"
                         "    auth-provider:\n"
                         "      name: gcp\n");
    kube_target t;
    resolve_ok(NULL, a, &t);
    CHECK(s_eq(t.server, "https://127.0.0.1:6443"), "server %s", t.server);
    CHECK(t.ca_pem && t.ca_pem_len == 3 && memcmp(t.ca_pem, "CA\n", 3) == 0, "ca data");
    CHECK(s_eq(t.tls_server_name, "kubernetes"), "tls-server-name");
    CHECK(t.auth == KUBE_AUTH_TOKEN && s_eq(t.token, "s3cr3t-token"), "token");
    CHECK(s_eq(t.ns, "team"), "namespace %s", t.ns ? t.ns : "-");
    CHECK(strstr(t.source, "context one") && strstr(t.source, "user tok") &&
              !strstr(t.source, "s3cr3t") && !strstr(t.auth_desc, "s3cr3t"),
          "source %s / %s", t.source, t.auth_desc);
    kube_target_clear(&t);
    resolve_ok("two", a, &t);
    char want[600];
    snprintf(want, sizeof want, "%s/certs/ca.crt", dir);
    CHECK(s_eq(t.server, "https://[::1]:7443") && s_eq(t.ca_file, want) && !t.insecure,
          "two: %s %s", t.server, t.ca_file ? t.ca_file : "-");
    snprintf(want, sizeof want, "%s/certs/u.crt", dir);
    CHECK(t.auth == KUBE_AUTH_CERT && s_eq(t.cert_file, want) && s_eq(t.key_file, "/abs/u.key"),
          "cert %s %s", t.cert_file ? t.cert_file : "-", t.key_file ? t.key_file : "-");
    kube_target_clear(&t);
    resolve_ok("three", a, &t);
    CHECK(t.auth == KUBE_AUTH_EXEC && s_eq(t.exec.command, "./bin/plug") && t.exec.nargs == 1 &&
              t.exec.nenv == 1 && s_eq(t.exec.env[0], "A=b") && s_eq(t.exec.dir, dir) &&
              s_eq(t.exec.api_version, "client.authentication.k8s.io/v1beta1"),
          "exec");
    kube_target_clear(&t);
    resolve_ok("four", a, &t);
    snprintf(want, sizeof want, "%s/tok.txt", dir);
    CHECK(t.auth == KUBE_AUTH_TOKEN_FILE && s_eq(t.token_file, want), "token file %s",
          t.token_file ? t.token_file : "-");
    kube_target_clear(&t);
    resolve_bad("legacy", a, "auth-provider");
    resolve_bad("legacy", a, "use an exec credential plugin");
    resolve_bad("nouser", a, "user 'ghost', which is not defined");
    resolve_bad("nope", a, "no context 'nope'");
    char *missing = u_asprintf("%s/none.yaml", dir);
    resolve_bad(NULL, missing, "cannot read kubeconfig");
    /* KUBECONFIG: a list, missing files skipped, the first current-context
     * and the first definition of each name win */
    char *b = write_file(dir, "b.yaml",
                         "current-context: bee\n"
                         "contexts:\n"
                         "- name: bee\n"
                         "  context:\n"
                         "    cluster: c1\n"
                         "    user: tok\n"
                         "users:\n"
                         "- name: tok\n"
                         "  user:\n"
                         "    token: first-wins\n");
    char *list = u_asprintf("%s:%s:%s", missing, b, a);
    setenv("KUBECONFIG", list, 1);
    resolve_ok(NULL, NULL, &t);
    CHECK(s_eq(t.token, "first-wins") && s_eq(t.server, "https://127.0.0.1:6443"), "merge: %s %s",
          t.token ? "token" : "-", t.server ? t.server : "-");
    CHECK(strstr(t.source, "b.yaml") && strstr(t.source, "context bee"), "merge source %s",
          t.source);
    kube_target_clear(&t);
    setenv("KUBECONFIG", missing, 1);
    resolve_bad(NULL, NULL, "none of KUBECONFIG's files exists");
    char *bad = write_file(dir, "bad.yaml", "users:\n- name: x\n  user:\n    token: |\n      s\n");
    setenv("KUBECONFIG", bad, 1);
    resolve_bad(NULL, NULL, "block scalars");
    /* in-cluster: the overridable directory */
    char *sa = u_asprintf("%s/sa", dir);
    mkdir(sa, 0700);
    free(write_file(sa, "token", "  pod-s3cr3t-1\n"));
    free(write_file(sa, "namespace", "apps\n"));
    setenv("S3LECT_K8S_SA_DIR", sa, 1);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    resolve_ok(NULL, NULL, &t);
    CHECK(s_eq(t.server, "https://[fd00::1]:443") && t.auth == KUBE_AUTH_TOKEN_FILE &&
              s_eq(t.ns, "apps") && strstr(t.source, "in-cluster") && !t.ca_file,
          "in-cluster: %s %s", t.server ? t.server : "-", t.source);
    char *tok = NULL, err[400];
    CHECK(kube_read_token_file(t.token_file, &tok, err, sizeof err) == 0 &&
              s_eq(tok, "pod-s3cr3t-1"),
          "token file: %s", err);
    u_wipe_free(tok);
    kube_target_clear(&t);
    /* ?context= chooses the kubeconfig even in a pod */
    unsetenv("KUBECONFIG");
    resolve_ok("two", a, &t);
    CHECK(s_eq(t.server, "https://[::1]:7443"), "explicit kubeconfig in a pod");
    kube_target_clear(&t);
    free(write_file(sa, "token", ""));
    CHECK(kube_read_token_file(t.token_file ? t.token_file : "", &tok, err, sizeof err) != 0,
          "empty");
    char *tf = u_asprintf("%s/token", sa);
    CHECK(kube_read_token_file(tf, &tok, err, sizeof err) == S3LECT_EAUTH && strstr(err, "empty"),
          "empty token file: %s", err);
    free(tf);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("S3LECT_K8S_SA_DIR");
    free(sa);
    free(bad);
    free(list);
    free(b);
    free(missing);
    free(a);
    free(dir);
}

/* ---- ExecCredential ---- */

static void exec_ok(const char *json, const char *ver, const char *token, const char *cert,
                    int64_t expires)
{
    cred_fetched f;
    char err[300] = "";
    int rc = kube_parse_exec_credential(json, strlen(json), ver, &f, err, sizeof err);
    CHECK(rc == 0, "exec credential refused: %s", err);
    if (rc)
        return;
    char *tk, *c, *k;
    kube_bearer_split(f.bearer, &tk, &c, &k);
    CHECK(s_eq(tk, token), "token '%s'", tk ? tk : "(null)");
    CHECK(s_eq(c, cert), "cert '%s'", c ? c : "(null)");
    CHECK(!cert || (k && strstr(k, "KEY")), "key");
    CHECK(f.expires_ms == expires, "expires %lld", (long long)f.expires_ms);
    cred_fetched_clear(&f);
}

static void exec_bad(const char *json, const char *ver, const char *want)
{
    cred_fetched f;
    char err[300] = "";
    int rc = kube_parse_exec_credential(json, strlen(json), ver, &f, err, sizeof err);
    CHECK(rc == S3LECT_EAUTH, "exec credential accepted: %s", json);
    CHECK(strstr(err, want) != NULL, "exec error '%s' lacks '%s'", err, want);
    CHECK(strstr(err, "s3cr3t") == NULL, "exec error shows the token: %s", err);
}

static void exec_tests(void)
{
    const char *v1 = "client.authentication.k8s.io/v1";
    exec_ok("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
            "\"status\":{\"token\":\"s3cr3t\",\"expirationTimestamp\":\"2030-01-01T00:00:00Z\"}}",
            v1, "s3cr3t", NULL, 1893456000000LL);
    exec_ok("{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
            "\"spec\":{},\"status\":{\"clientCertificateData\":\"-----BEGIN CERT\","
            "\"clientKeyData\":\"-----BEGIN KEY\"}}",
            "client.authentication.k8s.io/v1beta1", NULL, "-----BEGIN CERT", 0);
    exec_ok("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
            "\"status\":{\"clientCertificateData\":\"C\",\"clientKeyData\":\"KEY\","
            "\"token\":\"t2\"}}",
            v1, "t2", "C", 0);
    exec_bad("not json", v1, "not a JSON object");
    exec_bad("{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
             "\"status\":{\"token\":\"s3cr3t\"}}",
             v1, "apiVersion 'client.authentication.k8s.io/v1beta1'");
    exec_bad("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"Other\"}", v1,
             "not an ExecCredential");
    exec_bad("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\"}", v1,
             "no status");
    exec_bad("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
             "\"status\":{}}",
             v1, "neither a token");
    exec_bad("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
             "\"status\":{\"clientCertificateData\":\"C\"}}",
             v1, "needs both");
    exec_bad("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
             "\"status\":{\"token\":\"s3cr3t\",\"expirationTimestamp\":\"soon\"}}",
             v1, "not an RFC 3339 time");
}

/* An exec plugin run through the shared cache: two users of one plugin
 * share one run; KUBERNETES_EXEC_INFO and the env reach it. */
static void exec_run_tests(void)
{
    char *dir = t_tmpdir("k8s-exec");
    char *count = u_asprintf("%s/count", dir);
    char *script = u_asprintf(
        "#!/bin/sh\n"
        "echo run >> '%s'\n"
        "case \"$KUBERNETES_EXEC_INFO\" in *'\"interactive\":false'*) ;; *) exit 3;; esac\n"
        "[ \"$PLUG_ENV\" = yes ] || exit 4\n"
        "[ \"$1\" = --flag ] || exit 5\n"
        "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
        "\"status\":{\"token\":\"plug-s3cr3t\"}}'\n",
        count);
    char *path = write_file(dir, "plug", script);
    chmod(path, 0700);
    kube_target t;
    memset(&t, 0, sizeof t);
    t.auth = KUBE_AUTH_EXEC;
    t.user = u_strdup("u");
    t.server = u_strdup("https://127.0.0.1:1");
    t.exec.command = u_strdup("./plug");
    t.exec.dir = u_strdup(dir);
    t.exec.api_version = u_strdup("client.authentication.k8s.io/v1");
    t.exec.server = u_strdup(t.server);
    t.exec.args = calloc(2, sizeof(char *));
    t.exec.args[0] = u_strdup("--flag");
    t.exec.nargs = 1;
    t.exec.env = calloc(2, sizeof(char *));
    t.exec.env[0] = u_strdup("PLUG_ENV=yes");
    t.exec.nenv = 1;
    cred_cache *c1 = NULL, *c2 = NULL;
    char err[600] = "";
    int rc = kube_exec_open(&t, 0, &c1, err, sizeof err);
    CHECK(rc == 0, "exec open: %s", err);
    rc = kube_exec_open(&t, 0, &c2, err, sizeof err);
    CHECK(rc == 0, "exec open 2: %s", err);
    char *tok = NULL;
    if (c1 && cred_cache_bearer(c1, &tok, NULL, err, sizeof err) == 0)
        CHECK(s_eq(tok, "plug-s3cr3t"), "plugin token");
    else
        CHECK(0, "no token: %s", err);
    u_wipe_free(tok);
    FILE *f = fopen(count, "r");
    int runs = 0;
    char line[32];
    while (f && fgets(line, sizeof line, f))
        runs++;
    if (f)
        fclose(f);
    CHECK(runs == 1, "the plugin ran %d times for two users", runs);
    if (c1)
        cred_cache_release(c1);
    if (c2)
        cred_cache_release(c2);
    /* a failing plugin: its exit status, never its output */
    free(t.exec.env[0]);
    t.exec.env[0] = u_strdup("PLUG_ENV=no");
    rc = kube_exec_open(&t, 0, &c1, err, sizeof err);
    CHECK(rc == S3LECT_EAUTH && strstr(err, "exited with status 4"), "failing plugin: %d %s", rc,
          err);
    if (rc == 0)
        cred_cache_release(c1);
    free(t.exec.command);
    t.exec.command = u_strdup("s3lect-no-such-plugin");
    rc = kube_exec_open(&t, 0, &c1, err, sizeof err);
    /* posix_spawnp's ENOENT, or exit status 127 where it forks first */
    CHECK(rc != 0 && strstr(err, "cannot be started"), "missing plugin: %s", err);
    if (rc == 0)
        cred_cache_release(c1);
    kube_target_clear(&t);
    free(path);
    free(script);
    free(count);
    free(dir);
}

/* ---- the Lease <-> record mapping ---- */

static char *rec_json(const char *id, int64_t term, int64_t lease_ms, int64_t hold_ms)
{
    rec r;
    memset(&r, 0, sizeof r);
    r.leader_id = (char *)id;
    r.leader_addr = "";
    r.incarnation = "inc";
    r.last_updated_ms = 1800000000123LL;
    r.zero_time = !*id;
    r.term = term;
    r.lease_ms = lease_ms;
    r.hold_ms = hold_ms;
    return rec_encode(&r);
}

/* A Lease as the API server returns it: w plus a resourceVersion. */
static char *served(const char *w, const char *rv)
{
    cJSON *j = cJSON_Parse(w);
    cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "metadata");
    cJSON_DeleteItemFromObject(m, "resourceVersion");
    cJSON_AddStringToObject(m, "resourceVersion", rv);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static cJSON *spec_of(cJSON *lease)
{
    return cJSON_GetObjectItemCaseSensitive(lease, "spec");
}

static void lease_tests(void)
{
    char err[300] = "";
    /* an s3lect create: spec for client-go, the record in the annotation */
    char *body = rec_json("node-a", 7, 15000, 16200);
    char *w = st_k8s_lease_write(NULL, "ns", "lock", body, strlen(body), 1800000000123LL, err,
                                 sizeof err);
    CHECK(w != NULL, "write: %s", err);
    cJSON *j = cJSON_Parse(w);
    cJSON *sp = spec_of(j);
    CHECK(s_eq(cJSON_GetStringValue(cJSON_GetObjectItem(sp, "holderIdentity")), "node-a"),
          "holder");
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(sp, "leaseDurationSeconds")) == 17,
          "leaseDurationSeconds rounds max(lease, hold) up: %s", w);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(sp, "leaseTransitions")) == 0, "transitions");
    char renew[64];
    snprintf(renew, sizeof renew, "%s",
             cJSON_GetStringValue(cJSON_GetObjectItem(sp, "renewTime"))
                 ? cJSON_GetStringValue(cJSON_GetObjectItem(sp, "renewTime"))
                 : "");
    CHECK(strlen(renew) == strlen("2027-01-15T08:00:00.123000Z") &&
              strncmp(renew, "2027-01-15T08:00:00.123", 23) == 0,
          "renewTime microseconds: %s", renew);
    CHECK(s_eq(cJSON_GetStringValue(cJSON_GetObjectItem(sp, "acquireTime")), renew), "acquire");
    cJSON *meta = cJSON_GetObjectItem(j, "metadata");
    CHECK(s_eq(cJSON_GetStringValue(cJSON_GetObjectItem(meta, "name")), "lock") &&
              s_eq(cJSON_GetStringValue(cJSON_GetObjectItem(meta, "namespace")), "ns") &&
              !cJSON_GetObjectItem(meta, "resourceVersion"),
          "metadata");
    cJSON_Delete(j);
    /* read back: the exact bytes */
    char *v1 = served(w, "101");
    char *got = NULL, *rv = NULL;
    int foreign = -1;
    CHECK(st_k8s_lease_read(v1, strlen(v1), &got, &rv, &foreign, err, sizeof err) == 0, "read");
    CHECK(s_eq(got, body) && s_eq(rv, "101") && foreign == 0, "own record read back: %s", got);
    free(got);
    free(rv);
    /* a renewal by the same holder keeps acquireTime and transitions */
    char *body2 = rec_json("node-a", 7, 15000, 0);
    char *w2 = st_k8s_lease_write(v1, "ns", "lock", body2, strlen(body2), 1800000005000LL, err,
                                  sizeof err);
    j = cJSON_Parse(w2);
    sp = spec_of(j);
    CHECK(s_eq(cJSON_GetStringValue(cJSON_GetObjectItem(sp, "acquireTime")), renew),
          "renewal keeps acquireTime");
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(sp, "leaseDurationSeconds")) == 15, "15 s");
    CHECK(s_eq(cJSON_GetStringValue(
                   cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "resourceVersion")),
               "101"),
          "the PUT keeps the version read (the store sets it to if_match)");
    cJSON_Delete(j);
    /* client-go takes over: it rewrites spec, keeps our annotations */
    j = cJSON_Parse(v1);
    sp = spec_of(j);
    cJSON_ReplaceItemInObject(sp, "holderIdentity", cJSON_CreateString("go-pod-1"));
    cJSON_ReplaceItemInObject(sp, "renewTime", cJSON_CreateString("2027-01-15T08:01:00.000001Z"));
    cJSON_ReplaceItemInObject(sp, "leaseDurationSeconds", cJSON_CreateNumber(20));
    cJSON_ReplaceItemInObject(sp, "leaseTransitions", cJSON_CreateNumber(1));
    char *cg = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    char *cgv = served(cg, "102");
    CHECK(st_k8s_lease_read(cgv, strlen(cgv), &got, &rv, &foreign, err, sizeof err) == 0, "read");
    CHECK(foreign == 1, "a stale record under a client-go holder reads as foreign");
    rec r;
    CHECK(got && rec_parse(got, strlen(got), &r, err, sizeof err) == 0, "foreign parses: %s", err);
    CHECK(s_eq(r.leader_id, "go-pod-1") && r.lease_ms == 20000 && r.term == 7 && !r.zero_time &&
              !rec_released(&r) && r.hold_ms == 0,
          "foreign record: %s", got);
    rec_clear(&r);
    free(got);
    free(rv);
    /* s3lect takes it back: transitions + 1, acquireTime new */
    char *body3 = rec_json("node-b", 8, 15000, 0);
    char *w3 = st_k8s_lease_write(cgv, "ns", "lock", body3, strlen(body3), 1800000090000LL, err,
                                  sizeof err);
    j = cJSON_Parse(w3);
    sp = spec_of(j);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(sp, "leaseTransitions")) == 2, "transitions 2");
    CHECK(!s_eq(cJSON_GetStringValue(cJSON_GetObjectItem(sp, "acquireTime")), renew),
          "new acquireTime");
    cJSON_Delete(j);
    /* a Lease written only by client-go (no annotations) */
    const char *pure = "{\"metadata\":{\"name\":\"l\",\"namespace\":\"ns\",\"resourceVersion\":"
                       "\"5\"},\"spec\":{\"holderIdentity\":\"go-2\",\"leaseDurationSeconds\":15,"
                       "\"acquireTime\":\"2027-01-15T08:00:00.000000Z\",\"renewTime\":"
                       "\"2027-01-15T08:00:10.500000Z\",\"leaseTransitions\":3}}";
    CHECK(st_k8s_lease_read(pure, strlen(pure), &got, &rv, &foreign, err, sizeof err) == 0, "pure");
    CHECK(got && rec_parse(got, strlen(got), &r, err, sizeof err) == 0, "pure parses: %s", err);
    CHECK(foreign == 1 && s_eq(r.leader_id, "go-2") && r.lease_ms == 15000 && r.term == 0 &&
              r.last_updated_ms == 1800000010500LL,
          "pure client-go: %s", got);
    rec_clear(&r);
    free(got);
    free(rv);
    /* client-go's release (ReleaseOnCancel): holder "", duration 1 */
    const char *rel = "{\"metadata\":{\"name\":\"l\",\"resourceVersion\":\"6\"},\"spec\":{"
                      "\"holderIdentity\":\"\",\"leaseDurationSeconds\":1,\"leaseTransitions\":3,"
                      "\"renewTime\":\"2027-01-15T08:00:11.000000Z\"}}";
    CHECK(st_k8s_lease_read(rel, strlen(rel), &got, &rv, &foreign, err, sizeof err) == 0, "rel");
    CHECK(got && rec_parse(got, strlen(got), &r, err, sizeof err) == 0 && rec_released(&r),
          "client-go release reads as released: %s", got);
    rec_clear(&r);
    free(got);
    free(rv);
    /* an s3lect release: holder "", duration 1, transitions kept; reads back as written */
    char *relb = rec_json("", 8, 15000, 0);
    char *w4 =
        st_k8s_lease_write(cgv, "ns", "lock", relb, strlen(relb), 1800000099000LL, err, sizeof err);
    j = cJSON_Parse(w4);
    sp = spec_of(j);
    CHECK(s_eq(cJSON_GetStringValue(cJSON_GetObjectItem(sp, "holderIdentity")), "") &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(sp, "leaseDurationSeconds")) == 1 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(sp, "leaseTransitions")) == 1,
          "release spec: %s", w4);
    cJSON_Delete(j);
    char *w4v = served(w4, "110");
    CHECK(st_k8s_lease_read(w4v, strlen(w4v), &got, &rv, &foreign, err, sizeof err) == 0 &&
              s_eq(got, relb) && foreign == 0,
          "release read back");
    free(got);
    free(rv);
    /* other annotations and labels survive; managedFields is not sent back */
    const char *extra = "{\"metadata\":{\"name\":\"l\",\"resourceVersion\":\"9\",\"labels\":{"
                        "\"app\":\"x\"},\"annotations\":{\"keep\":\"me\"},\"managedFields\":[{}]},"
                        "\"spec\":{}}";
    char *w5 =
        st_k8s_lease_write(extra, "ns", "l", body, strlen(body), 1800000000000LL, err, sizeof err);
    CHECK(w5 && strstr(w5, "\"keep\":\"me\"") && strstr(w5, "\"app\":\"x\"") &&
              !strstr(w5, "managedFields"),
          "kept: %s", w5 ? w5 : err);
    /* a body that is not a record (the roster, check-store's data) */
    const char *other = "{\"members\":[1,2]}";
    char *w6 = st_k8s_lease_write(NULL, "ns", "l.s3lect-roster", other, strlen(other),
                                  1800000000000LL, err, sizeof err);
    char *w6v = w6 ? served(w6, "3") : NULL;
    CHECK(w6v && st_k8s_lease_read(w6v, strlen(w6v), &got, &rv, &foreign, err, sizeof err) == 0 &&
              s_eq(got, other) && foreign == 0,
          "other body read back");
    free(got);
    free(rv);
    CHECK(st_k8s_lease_write(NULL, "ns", "l", "a\0b", 3, 0, err, sizeof err) == NULL &&
              strstr(err, "NUL"),
          "NUL refused");
    const char *norv = "{\"metadata\":{\"name\":\"l\"}}";
    CHECK(st_k8s_lease_read(norv, strlen(norv), &got, &rv, &foreign, err, sizeof err) == -1 &&
              strstr(err, "resourceVersion"),
          "no resourceVersion");
    free(w6);
    free(w6v);
    free(w5);
    free(w4v);
    free(w4);
    free(relb);
    free(w3);
    free(body3);
    free(cgv);
    free(cg);
    free(w2);
    free(body2);
    free(v1);
    free(w);
    free(body);
}

int main(void)
{
    urls();
    yaml_tests();
    kubeconfig_tests();
    exec_tests();
    exec_run_tests();
    lease_tests();
    return t_done("k8s");
}

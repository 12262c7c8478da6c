# SPDX-License-Identifier: Apache-2.0
"""A real Kubernetes API server (kube-apiserver) on a free 127.0.0.1 port,
for the k8s:// store's tests and the client-go interop test.

The binary is built once from the Go module proxy by
scripts/kube-apiserver-install into
${S3LECT_CACHE:-~/.cache/s3lect}/bin/kube-apiserver-VERSION (about 13 minutes
on 2 cores; scripts/test starts it in the background at the start of a run,
scripts/lib/lanes.sh). The harness never builds it during a test:
kube_apiserver_binary() waits (bounded, S3LECT_KUBE_BUILD_WAIT seconds,
default 2700: a build at nice 19 beside the other suites is slower than alone) for a build that is under way, and fails saying where the
build's log is when it ended without the binary, or how to build it when no
build is running.

KubeApiServer runs it with its own etcd (tests/harness/etcd.py: Debian's
etcd-server, one member, its data in its own directory, so restart() keeps
every object and pause_etcd() leaves the API server without its storage):

  - TLS: a throwaway CA (tests/harness/pki.py) signs the serving certificate
    (127.0.0.1, localhost, kubernetes.default.svc) and the client
    certificates of client_cert(user, group) (CN = user, O = group); it is
    also the API server's --client-ca-file, so client certificates
    authenticate;
  - static tokens (--token-auth-file), throwaway, by name in self.tokens:
    "admin" (group system:masters), "s3lect" and "s3lect-2" (two tokens of
    user s3lect: a rotated service account token), "noupdate", "nobody";
  - RBAC (--authorization-mode=RBAC): in NAMESPACE (and any namespace made
    with add_namespace()), user s3lect may get, create and update leases
    (coordination.k8s.io), user noupdate only get and create, nobody
    nothing; the Roles and RoleBindings are made over REST (urllib, no
    kubectl);
  - a service-account signing key pair, --service-account-issuer;
  - audit=True: a metadata-level audit log of lease requests (audit_events()
    reads it), to tell which credentials a client sent.

For clients: kubeconfig(path, user=...) writes a kubeconfig for a user (a
token, or cert=True for a client certificate; server= another URL, such as
a proxy's); in_cluster(dir, user=...) writes a service account directory
(token, ca.crt, namespace) and returns the environment that names it
(KUBERNETES_SERVICE_HOST/PORT and S3LECT_K8S_SA_DIR, the store's override of
/var/run/secrets/kubernetes.io/serviceaccount, for tests); env() is what a
node of the s3lect user needs (KUBECONFIG) and S3LECT_TEST_LOCK_PREFIX=
k8s://NAMESPACE/. get_lease / put_lease / delete_lease act as the admin.

The life cycle is the harness's (servers.Server): start() (etcd first),
stop() (both, the directory removed), restart(hard=False) of the API server
on the same port (etcd keeps running), pause()/resume() of the API server
(SIGSTOP/SIGCONT), pause_etcd()/resume_etcd(). start_seconds is how long the
last start took until /readyz answered 200.

    python3 tests/harness/kube_apiserver.py            # start one, print its env, wait
    python3 tests/harness/kube_apiserver.py --binary   # the binary's path (waits for a build)
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.etcd import EtcdServer  # noqa: E402
    from harness.pki import issue, make_ca, openssl  # noqa: E402
    from harness.servers import REPO, Server, ServerStartError, cache_dir, free_port  # noqa: E402
else:
    from .etcd import EtcdServer
    from .pki import issue, make_ca, openssl
    from .servers import REPO, Server, ServerStartError, cache_dir, free_port

VERSION = os.environ.get("S3LECT_KUBE_VERSION", "v1.37.2")
NAMESPACE = "s3lect-test"
INSTALL = REPO / "scripts" / "kube-apiserver-install"
# Who may do what with leases in a test namespace (Role per user).
LEASE_VERBS = {"s3lect": ("get", "create", "update"), "noupdate": ("get", "create")}
# Token name -> (user, groups).
TOKEN_USERS = {
    "admin": ("admin", ("system:masters",)),
    "s3lect": ("s3lect", ()),
    "s3lect-2": ("s3lect", ()),
    "noupdate": ("noupdate", ()),
    "nobody": ("nobody", ()),
}
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
START_TIMEOUT_S = 90.0  # a first start on a loaded machine: its post-start hooks


# ---------------------------------------------------------------------------
# The binary


def binary_path() -> Path:
    return cache_dir() / "bin" / f"kube-apiserver-{VERSION}"


def _build_log() -> str:
    log = os.environ.get("S3LECT_KUBE_BUILD_LOG")
    if log:
        return log
    default = REPO / "build-logs" / "kube-build.log"
    return str(default) if default.exists() else "the output of scripts/kube-apiserver-install"


def build_running() -> bool:
    """Whether a scripts/kube-apiserver-install is building the binary now:
    it holds the lock BIN.lock while it builds (flock); a process running it
    counts too."""
    lock = Path(f"{binary_path()}.lock")
    if lock.exists():
        try:
            with open(lock, "rb") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                fcntl.flock(f, fcntl.LOCK_UN)
        except OSError:
            pass
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"kube-apiserver-install") for a in argv[:2]):
            return True
    return False


def kube_apiserver_binary(wait: float | None = None) -> str:
    """The cached kube-apiserver binary. While a build is running, waits for it
    (at most `wait` seconds, default S3LECT_KUBE_BUILD_WAIT or 2700); raises
    ServerStartError when it ends without the binary (naming its log), or
    when there is no binary and no build."""
    override = os.environ.get("S3LECT_KUBE_APISERVER")
    if override:
        if os.access(override, os.X_OK):
            return override
        raise ServerStartError(f"S3LECT_KUBE_APISERVER={override} is not an executable file")
    path = binary_path()
    if wait is None:
        wait = float(os.environ.get("S3LECT_KUBE_BUILD_WAIT", "2700"))
    deadline = time.monotonic() + wait
    waited = False
    while not os.access(path, os.X_OK):
        if not build_running():
            # (it may have finished between the two checks)
            if os.access(path, os.X_OK):
                break
            if waited:
                raise ServerStartError(
                    f"the kube-apiserver {VERSION} build ended without {path}: it failed; "
                    f"see {_build_log()}")
            raise ServerStartError(
                f"kube-apiserver {VERSION} is not built ({path} is missing) and no build is "
                f"running: run scripts/kube-apiserver-install (about 13 minutes on 2 cores, once; "
                f"scripts/test starts it in the background); log of an earlier build: "
                f"{_build_log()}")
        if time.monotonic() >= deadline:
            raise ServerStartError(
                f"kube-apiserver {VERSION} is still being built after waiting {wait:.0f} s "
                f"(S3LECT_KUBE_BUILD_WAIT); its log: {_build_log()}")
        waited = True
        time.sleep(2)
    return str(path)


# ---------------------------------------------------------------------------
# The server


def _yaml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a YAML double-quoted scalar


class KubeApiServer(Server):
    name = "kube-apiserver"

    def __init__(self, namespace: str = NAMESPACE, audit: bool = False,
                 binary: str | None = None, extra_args: list[str] | None = None):
        super().__init__("s3lect-unused")
        self.binary = binary or kube_apiserver_binary()
        self.namespace = namespace
        self.namespaces: list[str] = [namespace]
        self.audit = audit
        self.extra_args = list(extra_args or [])
        self.tokens = {name: secrets.token_hex(16) for name in TOKEN_USERS}
        self.etcd: EtcdServer | None = None
        self.start_seconds = 0.0
        self._set_up = False
        self.pki = self.workdir / "pki"
        self.pki.mkdir()
        try:
            self.ca_file, _ = make_ca(self.pki, "ca", subject="/CN=s3lect kube test ca")
            self.cert, self.key = issue(
                self.pki, "apiserver", "ca", subject="/CN=kube-apiserver", eku="serverAuth",
                san="IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                    "DNS:kubernetes.default.svc,IP:10.96.0.1")
            openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-out", "sa.key", cwd=self.pki)
            openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=self.pki)
        except RuntimeError as e:
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise ServerStartError(f"kube-apiserver certificates: {e}") from e
        lines = []
        for name, (user, groups) in TOKEN_USERS.items():
            uid = f"uid-{user}"
            lines.append(f'{self.tokens[name]},{user},{uid},"{",".join(groups)}"' if groups
                         else f"{self.tokens[name]},{user},{uid}")
        self.token_file = self.workdir / "tokens.csv"
        self.token_file.write_text("\n".join(lines) + "\n")
        self.token_file.chmod(0o600)
        self.audit_log = self.workdir / "audit.log"
        if audit:
            (self.workdir / "audit-policy.yaml").write_text(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                "rules:\n- level: Metadata\n  resources:\n  - group: coordination.k8s.io\n"
                "    resources: [leases]\n- level: None\n")

    # -- life cycle

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        assert self.etcd is not None
        cmd = [
            self.binary,
            f"--etcd-servers={self.etcd.endpoint}",
            f"--secure-port={self.port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--cert-dir={self.workdir / 'certs'}",
            f"--tls-cert-file={self.cert}",
            f"--tls-private-key-file={self.key}",
            f"--client-ca-file={self.ca_file}",
            f"--token-auth-file={self.token_file}",
            "--anonymous-auth=false",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={self.pki / 'sa.pub'}",
            f"--service-account-signing-key-file={self.pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--enable-priority-and-fairness=false",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            "--watch-cache=false",
        ]
        if self.audit:
            cmd += [f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                    f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
                    "--audit-log-mode=blocking"]
        return cmd + self.extra_args

    def process_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "S3LECT_K8S"))}
        env.pop("KUBECONFIG", None)
        return env

    def start(self) -> "KubeApiServer":
        t0 = time.monotonic()
        if self.etcd is None:
            self.etcd = EtcdServer()
            try:
                self.etcd.start()
            except ServerStartError as e:
                self.etcd.stop()
                self.etcd = None
                raise ServerStartError(f"kube-apiserver: its etcd did not start: {e}") from e
        errors = []
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = free_port()
            self._spawn()
            why = self._await_ready(START_TIMEOUT_S)
            if why is None:
                self.start_seconds = time.monotonic() - t0
                return self
            errors.append(why)
            self._halt()
        raise ServerStartError(
            f"{self.name} could not be started on 127.0.0.1 ({'; '.join(errors)}).\n"
            f"command: {' '.join(self.command())}\n--- {self.name} log ---\n{self.log_text()}")

    def restart(self, hard: bool = False) -> float:
        """The API server again on the same port (etcd, and so every Lease,
        kept): seconds until /readyz answers."""
        t0 = time.monotonic()
        self._halt(signal.SIGKILL if hard else None)
        self._spawn()
        why = self._await_ready(START_TIMEOUT_S)
        if why is not None:
            raise ServerStartError(
                f"{self.name} did not come back on port {self.port} after a restart ({why}).\n"
                f"--- {self.name} log ---\n{self.log_text()}")
        return time.monotonic() - t0

    def stop(self, keep_log: bool = False) -> None:
        self._halt()
        if self.etcd is not None:
            self.etcd.stop(keep_log=keep_log)
            self.etcd = None
        if not keep_log:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def pause_etcd(self) -> None:
        assert self.etcd is not None
        self.etcd.pause()

    def resume_etcd(self) -> None:
        assert self.etcd is not None
        self.etcd.resume()

    def log_text(self) -> str:
        text = super().log_text()
        if self.etcd is not None:
            text += f"\n--- its etcd's log ---\n{self.etcd.log_text()[-4000:]}"
        return text

    def ready(self) -> bool:
        try:
            status, _ = self.request("GET", "/readyz", timeout=2)
        except OSError:
            return False
        return status == 200

    def on_ready(self) -> None:
        if self._set_up:
            return
        for ns in self.namespaces:
            self._set_up_namespace(ns)
        self._set_up = True

    # -- REST as a user (urllib, the harness CA)

    def ssl_context(self, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if cert is not None:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        return ctx

    def request(self, method: str, path: str, body: dict | None = None, user: str = "admin",
                timeout: float = 10, cert: tuple[Path, Path] | None = None,
                token: str | None = None) -> tuple[int, dict]:
        """One request with the token named `user` (a key of self.tokens),
        or the literal `token`, or (cert, key) of a client certificate (no
        token): (HTTP status, JSON answer; {} when it is not JSON)."""
        headers = {"Accept": "application/json"}
        if cert is None:
            headers["Authorization"] = f"Bearer {token or self.tokens[user]}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.endpoint + path, data=data, headers=headers,
                                     method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_context(cert)) as r:
                raw, status = r.read(), r.status
        except urllib.error.HTTPError as e:
            raw, status = e.read(), e.code
        try:
            return status, json.loads(raw or b"{}")
        except ValueError:
            return status, {}

    def _must(self, method: str, path: str, body: dict | None = None,
              ok: tuple[int, ...] = (200, 201)) -> dict:
        status, ans = self.request(method, path, body)
        if status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {status} {ans.get('message', ans)}")
        return ans

    def _set_up_namespace(self, ns: str) -> None:
        self._must("POST", "/api/v1/namespaces",
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                   ok=(201, 409))
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
        for user, verbs in LEASE_VERBS.items():
            role = f"s3lect-test-leases-{user}"
            self._must("POST", f"{rbac}/roles", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": role, "namespace": ns},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                           "verbs": list(verbs)}]}, ok=(201, 409))
            self._must("POST", f"{rbac}/rolebindings", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": role, "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                              "name": user}]}, ok=(201, 409))

    def add_namespace(self, ns: str) -> None:
        """Another namespace with the same Roles (kept across restarts)."""
        if ns not in self.namespaces:
            self.namespaces.append(ns)
        self._set_up_namespace(ns)

    # -- Leases, as the admin

    def get_lease(self, name: str, ns: str | None = None) -> dict | None:
        status, ans = self.request("GET", f"{LEASES.format(ns=ns or self.namespace)}/{name}")
        if status == 404:
            return None
        if status != 200:
            raise RuntimeError(f"GET lease {name}: HTTP {status} {ans.get('message', ans)}")
        return ans

    def put_lease(self, name: str, spec: dict, ns: str | None = None,
                  annotations: dict[str, str] | None = None) -> dict:
        """Creates the Lease, or replaces its spec (and annotations, when
        given) unconditionally (the current resourceVersion): the new object."""
        ns = ns or self.namespace
        base = LEASES.format(ns=ns)
        for _ in range(5):
            cur = self.get_lease(name, ns)
            meta: dict = {"name": name, "namespace": ns}
            if cur is not None:
                meta["resourceVersion"] = cur["metadata"]["resourceVersion"]
                meta["annotations"] = cur["metadata"].get("annotations", {})
            if annotations is not None:
                meta["annotations"] = annotations
            obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                   "spec": spec}
            if cur is None:
                status, ans = self.request("POST", base, obj)
            else:
                status, ans = self.request("PUT", f"{base}/{name}", obj)
            if status in (200, 201):
                return ans
            if status != 409:
                raise RuntimeError(f"writing lease {name}: HTTP {status} {ans.get('message')}")
        raise RuntimeError(f"writing lease {name}: conflicts five times in a row")

    def delete_lease(self, name: str, ns: str | None = None) -> bool:
        """True if it existed."""
        status, ans = self.request("DELETE", f"{LEASES.format(ns=ns or self.namespace)}/{name}")
        if status not in (200, 202, 404):
            raise RuntimeError(f"DELETE lease {name}: HTTP {status} {ans.get('message')}")
        return status != 404

    def audit_events(self) -> list[dict]:
        """The audit log's events (audit=True), oldest first."""
        try:
            text = self.audit_log.read_text(errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    # -- credentials for clients

    def client_cert(self, user: str, group: str | None = None) -> tuple[Path, Path]:
        """A client certificate (and key) the API server takes for user
        (CN), in group (O) when given."""
        name = f"client-{user}-{secrets.token_hex(3)}"
        subject = f"/CN={user}" + (f"/O={group}" if group else "")
        return issue(self.pki, name, "ca", san=f"DNS:{user}", subject=subject, eku="clientAuth")

    def kubeconfig(self, path: Path, user: str = "s3lect", cert: bool = False,
                   server: str | None = None, namespace: str | None = None,
                   context: str = "s3lect-test") -> Path:
        """Writes a kubeconfig (YAML, as kubectl writes them) whose current
        context reaches this server (or `server`) as `user`: with its token
        (a key of self.tokens), or a client certificate for it (cert=True)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if cert:
            crt, key = self.client_cert(TOKEN_USERS.get(user, (user,))[0])
            creds = [f"    client-certificate: {_yaml_str(str(crt))}",
                     f"    client-key: {_yaml_str(str(key))}"]
        else:
            creds = [f"    token: {_yaml_str(self.tokens[user])}"]
        lines = [
            "apiVersion: v1",
            "kind: Config",
            "clusters:",
            "- name: s3lect-test",
            "  cluster:",
            f"    server: {_yaml_str(server or self.endpoint)}",
            f"    certificate-authority: {_yaml_str(str(self.ca_file))}",
            "users:",
            f"- name: {user}",
            "  user:",
            *creds,
            "contexts:",
            f"- name: {context}",
            "  context:",
            "    cluster: s3lect-test",
            f"    user: {user}",
            f"    namespace: {namespace or self.namespace}",
            f"current-context: {context}",
            "",
        ]
        path.write_text("\n".join(lines))
        path.chmod(0o600)
        return path

    def in_cluster(self, d: Path, user: str = "s3lect",
                   namespace: str | None = None) -> dict[str, str]:
        """Writes a service account directory (token, ca.crt, namespace) for
        user's token into d and returns the environment of a pod that has
        it: KUBERNETES_SERVICE_HOST/PORT and S3LECT_K8S_SA_DIR=d."""
        d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        (d / "token").write_text(self.tokens[user])
        (d / "token").chmod(0o600)
        shutil.copyfile(self.ca_file, d / "ca.crt")
        (d / "namespace").write_text(namespace or self.namespace)
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                "KUBERNETES_SERVICE_PORT": str(self.port),
                "S3LECT_K8S_SA_DIR": str(d)}

    def lock_prefix(self) -> str:
        return f"k8s://{self.namespace}/"

    def env(self) -> dict[str, str]:
        """KUBECONFIG (the s3lect user's token) and S3LECT_TEST_LOCK_PREFIX."""
        kc = self.workdir / "kubeconfig-s3lect"
        if not kc.exists():
            self.kubeconfig(kc)
        return {"KUBECONFIG": str(kc), "S3LECT_TEST_LOCK_PREFIX": self.lock_prefix()}


def main(argv: list[str]) -> int:
    if "--binary" in argv:
        try:
            print(kube_apiserver_binary())
        except ServerStartError as e:
            print(f"kube_apiserver: {e}", file=sys.stderr)
            return 1
        return 0
    try:
        srv = KubeApiServer()
        srv.start()
    except ServerStartError as e:
        print(f"kube_apiserver: {e}", file=sys.stderr)
        return 1
    try:
        print(f"kube-apiserver at {srv.endpoint} (ready in {srv.start_seconds:.1f} s)", flush=True)
        for k, v in srv.env().items():
            print(f"{k}={v}", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        srv.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

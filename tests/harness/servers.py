# SPDX-License-Identifier: Apache-2.0
"""Real S3 servers for the tests: MinIO and moto on free 127.0.0.1 ports.

Each server is started fresh with throwaway credentials, waited for with a
deadline, given the test bucket, and always stopped. If it cannot start, the
error carries the server's log: suites fail with it, they never skip.

Also a command line used by scripts/with-minio and scripts/with-moto:

    python3 tests/harness/servers.py with-minio|with-moto -- CMD [ARGS...]

starts the server, exports S3LECT_TEST_ENDPOINT, S3LECT_TEST_BUCKET,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION=us-east-1, runs CMD,
stops the server (even on failure or a signal) and exits with CMD's status.
The same with the other stores' servers (the "with-" is optional).

Every with-STORE also exports S3LECT_TEST_LOCK_PREFIX, a lock URL prefix to
which a key name is appended to name a lock on that server
("${S3LECT_TEST_LOCK_PREFIX}mykey"), with everything the CLI needs to reach
it in the environment; a table the store needs (DynamoDB, PostgreSQL) is
made first with `s3lect init-store` (the CLI: $S3LECT_CLI, else
$S3LECT_BUILD_DIR/bin/s3lect, else build/bin/s3lect).

    python3 tests/harness/servers.py with-dynamodb -- CMD   # DynamoDB Local (dynamodb_local.py):
        AWS_ENDPOINT_URL_DYNAMODB, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION
    python3 tests/harness/servers.py with-postgres -- CMD   # PostgreSQL (pgserver.py):
        PGHOST, PGPORT, PGUSER, PGDATABASE, S3LECT_PG_DSN
    python3 tests/harness/servers.py with-gcs -- CMD        # fake-gcs-server (fake_gcs.py):
        STORAGE_EMULATOR_HOST, S3LECT_TEST_GCS_ENDPOINT, S3LECT_TEST_BUCKET,
        S3LECT_TEST_LOCK_PREFIX=gs://BUCKET/
    python3 tests/harness/servers.py with-azure -- CMD      # Azurite (azurite.py):
        AZURE_STORAGE_CONNECTION_STRING, S3LECT_TEST_LOCK_PREFIX=az://devstoreaccount1/s3lect-test/
    python3 tests/harness/servers.py with-etcd -- CMD       # etcd (etcd.py, Debian's etcd-server):
        S3LECT_TEST_ETCD_ENDPOINT, S3LECT_TEST_LOCK_PREFIX=etcd://127.0.0.1:PORT/s3lect-test/
    python3 tests/harness/servers.py with-redis -- CMD      # redis-server (redis_server.py):
        S3LECT_REDIS_PASSWORD (the ACL user's), S3LECT_TEST_LOCK_PREFIX=
        redis://s3lect@127.0.0.1:PORT/s3lect/
    python3 tests/harness/servers.py with-k8s -- CMD        # kube-apiserver (kube_apiserver.py):
        KUBECONFIG (the s3lect user's token), S3LECT_TEST_LOCK_PREFIX=k8s://s3lect-test/

Every server can also be restart()ed on the same port and data, and paused
(SIGSTOP) and resume()d, for tests of an unavailable or restarting backend.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.s3client import S3Client  # noqa: E402
else:
    from .s3client import S3Client

REPO = Path(__file__).resolve().parent.parent.parent
DEFAULT_BUCKET = "s3lect-test"
START_TIMEOUT_S = 60.0


class ServerStartError(RuntimeError):
    """A server did not come up; the message includes its log."""


def cache_dir() -> Path:
    return Path(os.environ.get("S3LECT_CACHE", str(Path.home() / ".cache" / "s3lect")))


def wait_stopped(pid: int, timeout: float = 5.0) -> bool:
    """Waits (bounded) until every thread of pid is stopped (state T or t);
    False if it did not happen in time or the process is gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = []
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            return False
        if states and all(st in ("T", "t") for st in states):
            return True
        time.sleep(0.01)
    return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(make):
    """For a pytest fixture, `yield from serve(lambda: SomeServer(...))`: makes
    the server (which may fetch or build it) and starts it, failing the test
    with the server's log when either cannot (ServerStartError), yields it,
    and stops it when the fixture ends, even after a failure."""
    import pytest

    try:
        server = make()
        server.start()
    except ServerStartError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        server.stop()

def stop_process_group(p: subprocess.Popen | None) -> None:
    """Stops a process started with start_new_session=True, with its whole
    group: SIGTERM (and SIGCONT, should the group be stopped), then SIGKILL
    when it has not exited within 10 s."""
    if p is not None and p.poll() is None:
        for sig in (signal.SIGTERM, signal.SIGCONT):  # SIGCONT: a paused group gets its SIGTERM
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


class S3Access:
    """How a test reaches an S3 server: endpoint, bucket and credentials."""

    name = "s3"
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str
    region: str

    def env(self) -> dict[str, str]:
        """Environment for a process that should use this server."""
        return {
            "S3LECT_TEST_ENDPOINT": self.endpoint,
            "S3LECT_TEST_BUCKET": self.bucket,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
        }

    def client(self, secret_key: str | None = None) -> S3Client:
        return S3Client(self.endpoint, self.access_key, secret_key or self.secret_key, self.region)


class ExternalServer(S3Access):
    """A server started outside the tests (S3LECT_TEST_ENDPOINT and friends)."""

    def __init__(self, name: str, endpoint: str, bucket: str, access_key: str, secret_key: str,
                 region: str = "us-east-1"):
        self.name = name
        self.endpoint = endpoint
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region

    def log_text(self) -> str:
        return "(server started outside the tests)"


class Server(S3Access):
    """Common life cycle: start a process, wait until it answers, stop it."""

    name = "server"

    def __init__(self, bucket: str = DEFAULT_BUCKET):
        self.bucket = bucket
        self.access_key = "s3lect-" + secrets.token_hex(6)
        self.secret_key = secrets.token_hex(20)
        self.region = "us-east-1"
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix=f"s3lect-{self.name}-"))
        self.log_path = self.workdir / f"{self.name}.log"
        self._log = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return "(no log)"

    # Subclasses provide these.
    def command(self) -> list[str]:
        raise NotImplementedError

    def process_env(self) -> dict[str, str]:
        return dict(os.environ)

    def ready(self) -> bool:
        raise NotImplementedError

    def on_ready(self) -> None:
        """Called once ready() is true: the S3 servers create the test bucket.
        OSError or RuntimeError here fails the start."""
        try:
            self.client().create_bucket(self.bucket)
        except (OSError, RuntimeError) as e:
            raise RuntimeError(f"creating bucket {self.bucket}: {e}") from e

    def _spawn(self) -> None:
        """Starts command() on self.port in its own process group, logging to log_path."""
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.command(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.process_env(),
            start_new_session=True,
        )

    def _await_ready(self, timeout: float = START_TIMEOUT_S) -> str | None:
        """Waits (bounded) until the process answers and on_ready() passed:
        None, or why not."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.ready():
                try:
                    self.on_ready()
                    return None
                except (OSError, RuntimeError) as e:
                    return str(e)
            time.sleep(0.1)
        if self.proc.poll() is None:
            return f"{self.name} did not answer within {timeout:.0f}s"
        return f"{self.name} exited with status {self.proc.returncode}"

    def _halt(self, sig: int | None = None) -> None:
        """Ends the process group but keeps workdir (data and log): with
        stop_process_group, or with sig (e.g. SIGKILL) sent to the whole group."""
        p, self.proc = self.proc, None
        if p is not None and sig is not None and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
                os.killpg(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        stop_process_group(p)
        if self._log:
            self._log.close()
            self._log = None

    def start(self) -> "Server":
        errors = []
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = free_port()
            self._spawn()
            why = self._await_ready()
            if why is None:
                return self
            errors.append(why)
            self.stop(keep_log=True)
        raise ServerStartError(
            f"{self.name} could not be started on 127.0.0.1 ({'; '.join(errors)}).\n"
            f"command: {' '.join(self.command())}\n--- {self.name} log ---\n{self.log_text()}"
        )

    def restart(self, hard: bool = False) -> float:
        """Stops the server (SIGTERM, or SIGKILL with hard=True) and starts it
        again on the same port and data; returns the seconds taken until it
        answers again. Raises ServerStartError if it does not come back."""
        t0 = time.monotonic()
        self._halt(signal.SIGKILL if hard else None)
        self._spawn()
        why = self._await_ready()
        if why is not None:
            raise ServerStartError(
                f"{self.name} did not come back on port {self.port} after a restart ({why}).\n"
                f"--- {self.name} log ---\n{self.log_text()}"
            )
        return time.monotonic() - t0

    def pause(self) -> None:
        """SIGSTOP to the server's whole process group: it stops answering
        (connections are accepted by the kernel but never served). Returns
        once every thread of the server is stopped: kill() returns before a
        busy multi-threaded process has stopped, and on a loaded machine a
        request sent at once was seen answered."""
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGSTOP)
            wait_stopped(self.proc.pid)

    def resume(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self, keep_log: bool = False) -> None:
        self._halt()
        if not keep_log:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def http_status(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    """The HTTP status of a GET of url (a POST of data when given), 0 when
    nothing answers: a server's readiness probe."""
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return 0


class MinioServer(Server):
    name = "minio"

    def __init__(self, bucket: str = DEFAULT_BUCKET, binary: str | None = None,
                 listen_host: str = "127.0.0.1"):
        """listen_host "": every address (only for a network namespace that
        has nothing but loopback, such as bench/lib/netcut.py's)."""
        super().__init__(bucket)
        self.binary = binary or ensure_minio()
        self.listen_host = listen_host

    def command(self) -> list[str]:
        return [
            self.binary,
            "server",
            "--quiet",
            "--address",
            f"{self.listen_host}:{self.port}",
            str(self.workdir / "data"),
        ]

    def process_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            MINIO_UPDATE="off",
            MINIO_BROWSER="off",
            MINIO_ROOT_USER=self.access_key,
            MINIO_ROOT_PASSWORD=self.secret_key,
            MINIO_CI_CD="1",
        )
        return env

    def ready(self) -> bool:
        return http_status(f"{self.endpoint}/minio/health/live") == 200


class MotoServer(Server):
    """moto's S3 (Python): checks no signatures, so never the only server."""

    name = "moto"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def start(self) -> "Server":
        ensure_moto()
        return super().start()

    def ready(self) -> bool:
        return http_status(f"{self.endpoint}/moto-api/") in (200, 404)


def ensure_minio() -> str:
    """Path of the MinIO binary, installing it with scripts/minio-install if needed."""
    out = subprocess.run(
        [str(REPO / "scripts" / "minio-install")], stdout=subprocess.PIPE, text=True
    )
    path = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not path or not os.access(path, os.X_OK):
        raise ServerStartError(
            "MinIO is not installed and scripts/minio-install failed (see its output above); "
            "it needs Go >= 1.24 and the Go module proxy"
        )
    return path


def ensure_moto() -> None:
    """Installs moto's server from the Python package index if it is missing."""
    try:
        import moto.server  # noqa: F401
        import flask  # noqa: F401
        import flask_cors  # noqa: F401

        return
    except ImportError:
        pass
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "moto[server]"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if r.returncode != 0:
        raise ServerStartError(f"pip install 'moto[server]' failed:\n{r.stdout[-4000:]}")


KINDS = ("minio", "moto", "dynamodb", "postgres", "gcs", "azure", "etcd", "redis", "k8s")


def make_server(kind: str):
    """A not yet started server of kind (one of KINDS)."""
    if kind == "minio":
        return MinioServer()
    if kind == "moto":
        return MotoServer()
    if kind == "dynamodb":
        if __package__ in (None, ""):
            from harness.dynamodb_local import DynamoDBLocal
        else:
            from .dynamodb_local import DynamoDBLocal
        return DynamoDBLocal()
    if kind == "postgres":
        if __package__ in (None, ""):
            from harness.pgserver import PostgresServer
        else:
            from .pgserver import PostgresServer
        return PostgresServer()
    if kind == "gcs":
        if __package__ in (None, ""):
            from harness.fake_gcs import FakeGCS
        else:
            from .fake_gcs import FakeGCS
        return FakeGCS()
    if kind == "azure":
        if __package__ in (None, ""):
            from harness.azurite import AzuriteServer
        else:
            from .azurite import AzuriteServer
        return AzuriteServer()
    if kind == "etcd":
        if __package__ in (None, ""):
            from harness.etcd import EtcdServer
        else:
            from .etcd import EtcdServer
        return EtcdServer()
    if kind == "redis":
        if __package__ in (None, ""):
            from harness.redis_server import RedisServer
        else:
            from .redis_server import RedisServer
        return RedisServer()
    if kind == "k8s":
        if __package__ in (None, ""):
            from harness.kube_apiserver import KubeApiServer
        else:
            from .kube_apiserver import KubeApiServer
        return KubeApiServer()
    raise ValueError(f"unknown server kind {kind!r}")


# The lock URL prefix with_server exports as S3LECT_TEST_LOCK_PREFIX: a key
# name appended to it names a lock of that server (docs/testing.md, "The
# servers").
DYNAMODB_TABLE = "s3lect-test-locks"


def lock_prefix(kind: str, server) -> str:
    if kind == "postgres":
        return f"{server.dsn}?key="
    if kind == "dynamodb":
        return f"dynamodb://{DYNAMODB_TABLE}/"
    if kind == "gcs":
        return f"gs://{server.bucket}/"
    if kind in ("azure", "etcd", "k8s"):
        return server.lock_prefix()
    if kind == "redis":
        return server.lock_prefix
    return f"s3://{server.bucket}/"


def default_cli() -> str | None:
    """The s3lect CLI to run init-store with: S3LECT_CLI, else the build's."""
    cli = os.environ.get("S3LECT_CLI")
    if cli:
        return cli
    build = Path(os.environ.get("S3LECT_BUILD_DIR", REPO / "build"))
    return str(build / "bin" / "s3lect") if (build / "bin" / "s3lect").is_file() else None


def init_store(kind: str, env: dict[str, str], cli: str | None) -> None:
    """Creates what a lock of the prefix needs (DynamoDB's table, PostgreSQL's)
    with `s3lect init-store`; nothing for the object stores."""
    if kind not in ("dynamodb", "postgres"):
        return
    if not cli:
        raise ServerStartError(f"with-{kind}: init-store needs the s3lect CLI: build it "
                               "(scripts/build) or set S3LECT_CLI")
    full = dict(os.environ)
    full.update(env)
    r = subprocess.run([cli, "init-store", env["S3LECT_TEST_LOCK_PREFIX"] + "x"], env=full,
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise ServerStartError(f"with-{kind}: s3lect init-store failed (exit {r.returncode}): "
                               f"{r.stderr.strip()}")


def server_env(kind: str, server) -> tuple[dict[str, str], str]:
    """What with_server exports for kind, and a line describing the server."""
    env = dict(server.env())
    env["S3LECT_TEST_LOCK_PREFIX"] = lock_prefix(kind, server)
    if kind == "postgres":
        env["S3LECT_PG_DSN"] = server.dsn
        return env, f"{server.name} at {server.dsn}"
    if kind in ("dynamodb", "etcd", "redis", "k8s"):
        return env, f"{server.name} at {server.endpoint}"
    if kind == "azure":
        return env, f"{server.name} at {server.blob_endpoint}, container {server.container}"
    return env, f"{server.name} at {server.endpoint}, bucket {server.bucket}"


def run_child(tag: str, cmd: list[str], env: dict[str, str]) -> int:
    """Runs cmd with env, forwarding SIGTERM/SIGINT/SIGHUP to it, and returns
    its exit status (127 if it cannot be run)."""
    child = None

    def forward(signum, _frame):
        if child and child.poll() is None:
            child.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        try:
            child = subprocess.Popen(cmd, env=env)
        except OSError as e:
            print(f"{tag}: cannot run {cmd[0]}: {e}", file=sys.stderr)
            return 127
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                continue
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def with_server(kind: str, cmd: list[str]) -> int:
    try:
        server = make_server(kind)
        server.start()
    except ServerStartError as e:
        print(f"with-{kind}: {e}", file=sys.stderr)
        return 1
    try:
        env = dict(os.environ)
        exported, what = server_env(kind, server)
        try:
            init_store(kind, exported, default_cli())
        except (ServerStartError, OSError, subprocess.SubprocessError) as e:
            print(f"with-{kind}: {e}", file=sys.stderr)
            return 1
        env.update(exported)
        print(f"with-{kind}: {what}", file=sys.stderr)
        return run_child(f"with-{kind}", cmd, env)
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    kind = argv[0].removeprefix("with-") if argv else ""
    if len(argv) < 3 or kind not in KINDS or argv[1] != "--":
        print(f"usage: servers.py [with-]{'|'.join(KINDS)} -- CMD [ARGS...]\n"
              "  CMD gets S3LECT_TEST_LOCK_PREFIX (append a key name for a lock on the "
              "server) and what the CLI needs to reach it", file=sys.stderr)
        return 2
    return with_server(kind, argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

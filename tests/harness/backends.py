# SPDX-License-Identifier: Apache-2.0
"""The one family of lock store backends (issue 40 item 1), used by the
store suite (tests/stores/conftest.py: its backend, cas_backend and cas_impl
fixtures), the chaos run (tests/chaos/test_chaos.py), the bench
(bench/lib/cost_stores.py) and the bindings' store tests (through
tests/harness/store_servers.py).

Per store of the registry (tests/harness/stores.py; FAMILY is keyed by its
kind): its server (started, stopped, restarted for the store-restart fault,
with the fault's kind), the lock URL a node reaches it by through a proxy of
its own, the options and environment `s3lect` needs for it, what creates a
lock's table, the proxies' "slow down" answer, what a request to it is
called (the bench counts by it) and how to read a lock's record back; and
for clients that reach the server directly (the store suite's nodes, the
bindings' electors): the endpoint, the environment and the library options
they need, and a fresh lock URL. tests/cli/test_store_lists.py fails when a
registry store has no backend here.
"""

from __future__ import annotations

import random
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .servers import MinioServer, ServerStartError

_SLOWDOWN_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                  b"<Message>Please reduce your request rate.</Message>"
                  b"<RequestId>chaos-proxy</RequestId></Error>")
SLOWDOWN_RESPONSE = (b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                     b"Content-Length: " + str(len(_SLOWDOWN_BODY)).encode() +
                     b"\r\nConnection: close\r\n\r\n" + _SLOWDOWN_BODY)


_THROTTLE_BODY = (b'{"__type":"com.amazonaws.dynamodb.v20120810#'
                  b'ProvisionedThroughputExceededException","message":"Rate exceeded"}')
# DynamoDB's throttling answer (its "slow down"), in place of S3's 503 SlowDown.
THROTTLE_RESPONSE = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\n"
                     b"x-amzn-RequestId: chaos-proxy\r\n"
                     b"Content-Length: " + str(len(_THROTTLE_BODY)).encode() +
                     b"\r\nConnection: close\r\n\r\n" + _THROTTLE_BODY)


_GCS_THROTTLE_BODY = (b'{"error":{"code":429,"message":"The object exceeded the rate limit for '
                      b'object mutation operations.","errors":[{"reason":"rateLimitExceeded"}]}}')
# Cloud Storage's rate limit answer (its "slow down").
GCS_THROTTLE_RESPONSE = (b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(_GCS_THROTTLE_BODY)).encode() +
                         b"\r\nConnection: close\r\n\r\n" + _GCS_THROTTLE_BODY)

# What etcd's v3 gateway answers while its cluster has no leader (an etcd
# election): 503, gRPC code 14 (Unavailable).
_ETCD_NO_LEADER_BODY = (b'{"error":"etcdserver: no leader","message":"etcdserver: no leader",'
                        b'"code":14}')
ETCD_NO_LEADER_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json"
                           b"\r\nContent-Length: " + str(len(_ETCD_NO_LEADER_BODY)).encode() +
                           b"\r\nConnection: close\r\n\r\n" + _ETCD_NO_LEADER_BODY)

_BUSY_BODY = (b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
              b"<Message>The server is busy.</Message></Error>")
# Azure Storage's throttling answer (its "slow down").
BUSY_RESPONSE = (b"HTTP/1.1 503 Server Busy\r\nContent-Type: application/xml\r\n"
                 b"x-ms-error-code: ServerBusy\r\n"
                 b"Content-Length: " + str(len(_BUSY_BODY)).encode() +
                 b"\r\nConnection: close\r\n\r\n" + _BUSY_BODY)


# ---------------------------------------------------------------------------
# MinIO that survives restarts (same port, same data, same credentials)


class RestartableMinio(MinioServer):
    """A MinIO for one test that can be stopped and started again on the same
    port and data directory (the shared `minio` fixture is per session and
    may be an outside server, so it cannot be restarted)."""

    name = "minio"

    def stop_process(self) -> None:
        """Stops MinIO but keeps its data, port and credentials."""
        self.stop(keep_log=True)

    def restart(self, timeout: float = 60.0) -> float:
        """Starts MinIO again on the same port and data; returns when it is ready.
        Returns the time it took."""
        assert self.proc is None, "MinIO is still running"
        t0 = time.monotonic()
        deadline = t0 + timeout
        while True:  # the port may be briefly unavailable after the stop
            self._log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=self.process_env(), start_new_session=True)
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self.ready():
                    return time.monotonic() - t0
                time.sleep(0.1)
            if time.monotonic() >= deadline:
                self.stop(keep_log=True)
                raise ServerStartError(
                    f"MinIO did not restart on port {self.port} within {timeout:.0f}s\n"
                    f"--- minio log ---\n{self.log_text()}")
            self.stop(keep_log=True)  # exited (port busy?): try again
            time.sleep(0.5)

    def destroy(self) -> None:
        self.stop(keep_log=False)


# ---------------------------------------------------------------------------
# The lock stores


class Backend:
    """A lock store: its server, how a node reaches it through a proxy of its
    own, and its faults.

    kind:         the registry's kind (tests/harness/stores.py)
    name:         its name in the chaos run (the registry's chaos column, else kind)
    restart_kind: the chaos run's fault kind of a store restart ("": none)
    answer:       (stats name, bytes) a fault proxy answers a flaky request
                  with instead of forwarding it, or None (binary protocol)
    protocol:     what a proxy in front of it carries: "http", "postgres", "redis"
    url_port:     the lock URL names the server's port (no --endpoint option)
    aws:          AWS credentials and --region
    cas:          the test server enforces compare-and-set (moto's Route 53
                  does not: start nodes one after the other on it)
    folder, suffix: what lock names are put under (path-like keys) and the
                  suffix of object names (the chaos run: "chaos/", ".json")
    fixture:      the session fixture of tests/conftest.py that runs its
                  server, which the store suite shares ("": the store suite
                  starts one of its own with make_server())

    server: pass one to use a running server (not stopped by destroy()),
    else the backend makes its own (make_server()) and start() starts it.
    """

    kind = ""
    name = ""
    restart_kind = ""
    answer: tuple[str, bytes] | None = None
    protocol = "http"
    url_port = False
    aws = False
    cas = True
    objects = False  # keys are object names (folder and suffix apply)
    paths = False  # keys are paths (folder applies)
    fixture = ""

    def __init__(self, server=None, folder: str = "", suffix: str = "") -> None:
        self.owned = server is None
        self.server = self.make_server() if server is None else server
        self.folder, self.suffix = folder, suffix

    def make_server(self):
        raise NotImplementedError

    @property
    def port(self) -> int:
        """The server's port, which the proxies forward to."""
        return self.server.port

    @property
    def region(self) -> str:
        return getattr(self.server, "region", "us-east-1")

    def start(self) -> None:
        """Raises ServerStartError saying why it cannot."""
        if self.owned:
            self.server.start()

    def destroy(self, save_log_to: Path | None = None) -> None:
        """Stops the server and removes its data; its log goes to save_log_to."""
        if save_log_to is not None:
            try:
                shutil.copyfile(self.server.log_path, save_log_to / f"{self.name}-server.log")
            except OSError:
                pass
        if self.owned:
            self.server.stop()

    def _key(self, key: str) -> str:
        if self.objects:
            return f"{self.folder}{key}{self.suffix}"
        return f"{self.folder}{key}" if self.paths else key

    def env(self) -> dict[str, str]:
        """What every s3lect on this store needs in its environment (credentials)."""
        return {}

    def lock_url(self, key: str, port) -> str:
        """The lock URL of key for a node whose proxy listens on port."""
        raise NotImplementedError

    def node_lock(self, key: str, proxy_port: int) -> str:
        return self.lock_url(key, proxy_port)

    def node_args(self, proxy_port: int) -> list[str]:
        """s3lect options that send a node's requests to proxy_port."""
        return [] if self.url_port else ["--endpoint", f"http://127.0.0.1:{proxy_port}"]

    def status_args(self, key: str) -> list[str]:
        """`s3lect status` arguments that read the lock directly (no proxy)."""
        ep = self.direct_endpoint()
        return [self.lock_url(key, self.port), *(["--endpoint", ep] if ep else [])]

    # -- clients that reach the server directly (no proxy)

    def direct_endpoint(self) -> str | None:
        """The endpoint setting that reaches the server itself (None: the
        lock URL names it)."""
        return None if self.url_port else f"http://127.0.0.1:{self.port}"

    def direct_env(self) -> dict[str, str]:
        """The variables that send an `s3lect` (or tests/c/s3_probe, which
        takes no endpoint from S3LECT_ENDPOINT) straight to the server, with
        its credentials: the server's own env() by default."""
        return dict(self.server.env())

    def new_lock(self, name: str) -> str:
        """A lock URL of the server itself no other call returned: name and a
        random suffix."""
        return self.lock_url(f"{name}-{secrets.token_hex(4)}", self.port)

    def elector(self) -> tuple[dict[str, str], dict[str, str]]:
        """What a binding's elector needs beyond its lock URL, in a process
        that talks to other stores too (scripts/with-minio's AWS_* are
        MinIO's): (options, by the library's option names, as strings: the
        endpoint and the AWS credentials and region; variables the store
        reads from the process's environment, whose names are its own)."""
        options, env = {}, {}
        for name, value in self.env().items():
            if name in _AWS_OPTIONS:
                options[_AWS_OPTIONS[name]] = value
            elif not name.startswith("AWS_ENDPOINT_URL"):  # the endpoint option says it
                env[name] = value
        ep = self.direct_endpoint()
        if ep:
            options["endpoint"] = ep
        return options, env

    def for_suite(self, kind: str, bin_: Path, base_env: dict[str, str]) -> SuiteBackend:
        """Starts what the backend starts (a Route 53 zone, ...; its server
        too if it owns it), creates what its locks need (init) and returns the
        store suite's view, whose nodes get base_env with direct_env()."""
        env = {**base_env, **self.direct_env()}
        self.start()
        self.init(bin_, f"init-{secrets.token_hex(4)}", env)
        return SuiteBackend(kind, env, self.new_lock, self.server, self.cas, self)

    def init(self, bin_: Path, key: str, env: dict[str, str], timeout: float = 60) -> None:
        """Creates what the lock needs (directly, not through a proxy)."""

    def restart(self, rng: random.Random, sleep) -> str:
        """The store-restart fault: the server goes down and comes back with
        its data (same port). sleep(s) waits while the test keeps watching
        the nodes. Returns a word on how (for the summary). Raises
        ServerStartError if it does not come back."""
        raise NotImplementedError(f"{self.kind}: no restart fault")

    def classify(self, method: str, path: str, headers: dict[str, str]) -> str:
        """What an HTTP request to the store is (the bench counts by it)."""
        return method

    def version(self) -> str:
        return self.kind

    def record(self, key: str) -> bytes | None:
        """The lock's stored record (direct), or None."""
        return None

    def _init_store(self, bin_: Path, lock: str, env: dict[str, str], args: list[str],
                    timeout: float = 60) -> None:
        r = subprocess.run([str(bin_), "init-store", lock, *args], env=env, capture_output=True,
                           text=True, timeout=timeout)
        if r.returncode != 0:
            raise ServerStartError(f"s3lect init-store {lock} failed (status {r.returncode}): "
                                   f"{r.stderr.strip()}")


# AWS variables that are library options (no S3LECT_ variable holds them).
_AWS_OPTIONS = {"AWS_ACCESS_KEY_ID": "access_key_id", "AWS_SECRET_ACCESS_KEY": "secret_access_key",
                "AWS_SESSION_TOKEN": "session_token", "AWS_REGION": "region",
                "AWS_DEFAULT_REGION": "region"}


def _version(argv: list[str], default: str) -> str:
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return default
    return out.splitlines()[0].strip() if out.strip() else default


class MinioBackend(Backend):
    """MinIO, stopped for 0.5-3 s and started again on the same port and data."""

    kind = "s3"
    name = "minio"
    restart_kind = "minio_restart"
    answer = ("slowdown", SLOWDOWN_RESPONSE)
    aws = True
    objects = True
    fixture = "minio"

    def make_server(self):
        return RestartableMinio()

    def destroy(self, save_log_to: Path | None = None) -> None:
        if save_log_to is not None:
            try:
                shutil.copyfile(self.server.log_path, save_log_to / "minio-server.log")
            except OSError:
                pass
        if self.owned:
            self.server.destroy()

    def env(self) -> dict[str, str]:
        m = self.server
        return dict(AWS_ACCESS_KEY_ID=m.access_key, AWS_SECRET_ACCESS_KEY=m.secret_key,
                    AWS_REGION=m.region)

    def lock_url(self, key: str, port) -> str:  # noqa: ARG002
        return f"s3://{self.server.bucket}/{self._key(key)}"

    def restart(self, rng: random.Random, sleep) -> str:
        self.server.stop_process()
        sleep(rng.uniform(0.5, 3.0))
        self.server.restart()
        return "stop+start"

    def version(self) -> str:
        # A MinIO built by `go install` says "DEVELOPMENT.GOGET"; its module
        # version is in the binary's build information.
        try:
            out = subprocess.run(["go", "version", "-m", self.server.binary], capture_output=True,
                                 text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 3 and f[:2] == ["mod", "github.com/minio/minio"]:
                return f"MinIO {f[2]}"
        v = _version([self.server.binary, "--version"], "MinIO")  # "minio version RELEASE..."
        return "MinIO " + v.split()[2] if v.startswith("minio version ") else v

    def record(self, key: str) -> bytes | None:
        return self.server.client().get(self.server.bucket, self._key(key)).body


class DynamoDBBackend(Backend):
    """DynamoDB Local (file database: a restart keeps the table and items);
    the proxies answer a flaky request with DynamoDB's throttling error
    (400 ProvisionedThroughputExceededException)."""

    kind = name = "dynamodb"
    restart_kind = "dynamodb_restart"
    answer = ("throttle", THROTTLE_RESPONSE)
    aws = True
    fixture = "dynamodb_local"

    def make_server(self):
        from .dynamodb_local import DynamoDBLocal
        return DynamoDBLocal()  # fetches it on first use (ServerStartError)

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.table = "s3lect-" + secrets.token_hex(4)

    def env(self) -> dict[str, str]:
        # No AWS_ENDPOINT_URL_DYNAMODB: each node gets its proxy's (node_args).
        return {k: v for k, v in self.server.env().items() if k != "AWS_ENDPOINT_URL_DYNAMODB"}

    def direct_env(self) -> dict[str, str]:
        # (The server may be moto's, whose env() names its S3 endpoint only.)
        return dict(self.server.env(), AWS_ENDPOINT_URL_DYNAMODB=self.server.endpoint)

    def lock_url(self, key: str, port) -> str:  # noqa: ARG002
        return f"dynamodb://{self.table}/{key}"

    def init(self, bin_: Path, key: str, env: dict[str, str], timeout: float = 60) -> None:
        self._init_store(bin_, self.lock_url(key, 0), env, self.node_args(self.port), timeout)

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        # SIGTERM, then the JVM again on the same port and -dbPath (down for
        # as long as the JVM takes to start, ~1.5-5 s).
        self.server.restart(hard=False)
        return "restart"

    def classify(self, method, path, headers):
        target = headers.get("x-amz-target", "")
        return target.rsplit(".", 1)[-1] if target else f"{method} (no X-Amz-Target)"

    def version(self) -> str:
        from .dynamodb_local import DYNAMODB_LOCAL_VERSION
        return f"DynamoDB Local {DYNAMODB_LOCAL_VERSION}"

    def item(self, key: str) -> dict | None:
        """The lock's item (strongly consistent read), or None."""
        return self.server.client().get_item(TableName=self.table, Key={"LockID": {"S": key}},
                                             ConsistentRead=True).get("Item")

    def record(self, key: str) -> bytes | None:
        item = self.item(key)
        return item["s3lectRecord"]["S"].encode() if item and "s3lectRecord" in item else None


class PostgresBackend(Backend):
    """A throwaway PostgreSQL. A restart is, at random, a crash (SIGKILL of
    every server process, or an immediate shutdown) followed at once by
    recovery, or a fast shutdown with the server down for 0.5-3 s; always
    the same port and data, and every commit survives (synchronous_commit
    stays on). Each node's lock URL names its own proxy's port; no "slow
    down" answer (binary protocol)."""

    kind = name = "postgres"
    restart_kind = "postgres_restart"
    answer = None
    protocol = "postgres"
    url_port = True
    fixture = "postgres"

    def make_server(self):
        from .pgserver import PostgresServer
        return PostgresServer()

    def lock_url(self, key: str, port) -> str:
        from .pgserver import DATABASE, USER
        return f"postgres://{USER}@127.0.0.1:{port}/{DATABASE}?key={key}"

    def init(self, bin_: Path, key: str, env: dict[str, str], timeout: float = 60) -> None:
        self._init_store(bin_, self.lock_url(key, self.port), env, [], timeout)

    def direct_env(self) -> dict[str, str]:
        return {}  # the lock URL says everything (no PG* variable)

    def restart(self, rng: random.Random, sleep) -> str:
        how = rng.choice(["SIGKILL", "immediate", "down"])
        if how == "down":
            self.server.stop(keep_dir=True)
            sleep(rng.uniform(0.5, 3.0))
        self.server.restart(hard=how == "SIGKILL")  # (after a stop: just starts it)
        return how

    def version(self) -> str:
        return _version([str(self.server.bindir / "postgres"), "--version"], "PostgreSQL")

    def record(self, key: str) -> bytes | None:
        out = self.server.psql(f"SELECT record FROM s3lect_locks WHERE name = '{key}'").strip()
        return out.encode() if out else None


class MySQLBackend(Backend):
    """A throwaway MariaDB (tests/harness/mariadb_server.py; Debian's
    mariadb-server), the store's user's password in MYSQL_PWD. A restart is,
    at random, a crash (SIGKILL: InnoDB recovers every commit, the log is
    flushed at each), a clean shutdown (SIGTERM) or the server down for
    0.5-3 s; always the same port and data. Each node's lock URL names its
    own proxy's port; no "slow down" answer (binary protocol)."""

    kind = name = "mysql"
    restart_kind = "mysql_restart"
    answer = None
    protocol = "mysql"
    url_port = True

    def make_server(self):
        from .mariadb_server import MariaDBServer
        return MariaDBServer()  # ServerStartError without mariadb-server

    def env(self) -> dict[str, str]:
        return {"MYSQL_PWD": self.server.password}

    def lock_url(self, key: str, port) -> str:
        from .mariadb_server import DATABASE, USER
        return f"mysql://{USER}@127.0.0.1:{port}/{DATABASE}?key={key}"

    def init(self, bin_: Path, key: str, env: dict[str, str], timeout: float = 60) -> None:
        self._init_store(bin_, self.lock_url(key, self.port), env, [], timeout)

    def restart(self, rng: random.Random, sleep) -> str:
        how = rng.choice(["SIGKILL", "SIGTERM", "down"])
        if how == "down":
            self.server.stop(keep_dir=True)
            sleep(rng.uniform(0.5, 3.0))
        self.server.restart(hard=how == "SIGKILL")  # (after a stop: just starts it)
        return how

    def version(self) -> str:
        return _version([self.server.bin["mariadbd"], "--version"], "MariaDB")

    def record(self, key: str) -> bytes | None:
        from .mariadb_server import DATABASE
        k = key.replace("\\", "\\\\").replace("'", "''")
        out = self.server.sql(f"SELECT record FROM {DATABASE}.s3lect_locks WHERE name = '{k}'")
        return out.rstrip("\n").encode() if out.strip() else None


R53_NS = "{https://route53.amazonaws.com/doc/2013-04-01/}"


def create_hosted_zone(endpoint: str, name: str, timeout: float = 15.0) -> str:
    """Creates hosted zone `name` in moto's Route 53 at endpoint and returns
    its id (the last element of HostedZone.Id). Plain urllib, so that it
    needs no boto3: moto checks no signature, but picks the service from
    the credential scope of the Authorization header, hence the dummy one."""
    if not name.endswith("."):
        name += "."
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<CreateHostedZoneRequest xmlns="https://route53.amazonaws.com/doc/2013-04-01/">'
        f"<Name>{name}</Name><CallerReference>s3lect-{secrets.token_hex(8)}</CallerReference>"
        "</CreateHostedZoneRequest>"
    ).encode()
    req = urllib.request.Request(
        endpoint.rstrip("/") + "/2013-04-01/hostedzone",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/xml",
            "Authorization": "AWS4-HMAC-SHA256 Credential=s3lecttest/20260101/us-east-1/route53/"
            "aws4_request, SignedHeaders=host, Signature=00",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read()
    except urllib.error.HTTPError as e:
        raise RuntimeError(
            f"CreateHostedZone {name} at {endpoint}: HTTP {e.code}: {e.read()[:2000]!r}"
        ) from e
    zid = ET.fromstring(text).findtext(f"{R53_NS}HostedZone/{R53_NS}Id")
    if not zid:
        raise RuntimeError(f"CreateHostedZone {name} at {endpoint}: no HostedZone.Id in {text[:2000]!r}")
    return zid.rsplit("/", 1)[-1]


class Route53Backend(Backend):
    """Route 53 on moto's server, a hosted zone created at start. moto does
    not enforce compare-and-set (it accepts a CREATE of a TXT name that
    already has another value and keeps both record sets), so nodes are
    started one after the other on it (cas), and it is in no chaos run."""

    kind = name = "route53"
    aws = True
    cas = False
    fixture = "moto"

    def make_server(self):
        from .servers import MotoServer
        return MotoServer(bucket="s3lect-unused")

    def start(self) -> None:
        super().start()
        self.zone_name = f"s3lect-{secrets.token_hex(4)}.example.com."
        try:
            self.zone_id = create_hosted_zone(self.server.endpoint, self.zone_name)
        except (OSError, RuntimeError) as e:
            raise ServerStartError(f"moto: {e}") from e

    def env(self) -> dict[str, str]:
        s = self.server
        return dict(AWS_ACCESS_KEY_ID=s.access_key, AWS_SECRET_ACCESS_KEY=s.secret_key,
                    AWS_REGION=s.region)

    def direct_env(self) -> dict[str, str]:
        return dict(self.server.env(), AWS_ENDPOINT_URL_ROUTE_53=self.server.endpoint)

    def record_name(self, key: str) -> str:
        # Lock keys have slashes and dots; a DNS label of letters, digits, '-'.
        label = "".join(ch if ch.isalnum() else "-" for ch in key.rsplit("/", 1)[-1])[:63]
        return f"{label.strip('-')}.{self.zone_name}"

    def lock_url(self, key: str, port) -> str:  # noqa: ARG002
        return f"route53://{self.zone_id}/{self.record_name(key)}"

    def classify(self, method, path, headers):
        p = path.split("?", 1)[0]
        if method == "GET" and p.endswith("/rrset"):
            return "ListResourceRecordSets"
        if method == "POST" and p.endswith("/rrset/"):
            return "ChangeResourceRecordSets"
        return f"{method} {p}"

    def version(self) -> str:
        import moto
        return f"moto {moto.__version__} (server mode)"

    def record(self, key: str) -> bytes | None:
        import boto3
        s = self.server
        r53 = boto3.client("route53", endpoint_url=s.endpoint, region_name=s.region,
                           aws_access_key_id=s.access_key, aws_secret_access_key=s.secret_key)
        name = self.record_name(key)
        sets = r53.list_resource_record_sets(HostedZoneId=self.zone_id, StartRecordName=name,
                                             StartRecordType="TXT",
                                             MaxItems="1")["ResourceRecordSets"]
        sets = [s for s in sets if s["Name"] == name and s["Type"] == "TXT"]
        return "".join(r["Value"] for r in sets[0]["ResourceRecords"]).encode() if sets else None


class GcsBackend(Backend):
    """fake-gcs-server (filesystem backend: a restart keeps the bucket, the
    objects and their generations); the proxies answer a flaky request with
    Cloud Storage's 429. No token: the nodes' endpoints are http on loopback
    (an emulator). Objects' reads are Class B operations, uploads Class A."""

    kind = name = "gcs"
    restart_kind = "gcs_restart"
    answer = ("throttle", GCS_THROTTLE_RESPONSE)
    objects = True
    fixture = "fake_gcs"

    def make_server(self):
        from .fake_gcs import FakeGCS
        return FakeGCS()  # builds it on first use (ServerStartError)

    def lock_url(self, key: str, port) -> str:  # noqa: ARG002
        return f"gs://{self.server.bucket}/{self._key(key)}"

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        self.server.restart(hard=rng.random() < 0.5)
        return "restart"

    def classify(self, method, path, headers):
        p = path.split("?", 1)[0]
        if method == "GET" and "/o/" in p:
            return "objects.get"
        if method == "POST" and p.startswith("/upload/"):
            return "objects.insert"
        if method == "DELETE":
            return "objects.delete"
        return f"{method} {p}"

    def version(self) -> str:
        from .fake_gcs import FAKE_GCS_VERSION
        return f"fake-gcs-server {FAKE_GCS_VERSION}"

    def record(self, key: str) -> bytes | None:
        status, body, _gen = self.server.get_object(self._key(key))
        return body if status == 200 else None


class AzureBackend(Backend):
    """Azurite (tests/harness/azurite.py; its data survives a restart), with
    Shared Key from AZURE_STORAGE_KEY; each node's --endpoint is its proxy
    (http://127.0.0.1:PORT, to which the store adds /ACCOUNT, Azurite's
    path-style); the proxies answer a flaky request with 503 ServerBusy.
    A restart is a SIGTERM or a SIGKILL and the server again on the same
    port and data. Get Blob is a read operation, Put Blob a write operation."""

    kind = name = "azure"
    restart_kind = "azure_restart"
    answer = ("busy", BUSY_RESPONSE)
    objects = True
    fixture = "azurite"

    def make_server(self):
        from .azurite import AzuriteServer
        return AzuriteServer()  # installs Azurite on first use

    def env(self) -> dict[str, str]:
        return dict(AZURE_STORAGE_KEY=self.server.account_key,
                    AZURE_STORAGE_ACCOUNT=self.server.account)

    def lock_url(self, key: str, port) -> str:  # noqa: ARG002
        return f"{self.server.lock_prefix()}{self._key(key)}"

    def direct_endpoint(self) -> str | None:
        return self.server.blob_endpoint

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        hard = rng.random() < 0.5
        self.server.restart(hard=hard)
        return "SIGKILL" if hard else "restart"

    def classify(self, method, path, headers):
        if method == "GET":
            return "GetBlob"
        if method == "PUT" and headers.get("x-ms-blob-type"):
            return "PutBlob"
        return f"{method} {path.split('?', 1)[0]}"

    def version(self) -> str:
        from .azurite import AZURITE_VERSION
        return f"Azurite {AZURITE_VERSION}"

    def record(self, key: str) -> bytes | None:
        body, _etag = self.server.client().get_blob(self.server.container, self._key(key))
        return body


class EtcdBackend(Backend):
    """Debian's etcd, one member (a restart keeps the keys and their
    revisions), no authentication; each node's etcd:// URL names its own
    proxy's port; the proxies answer a flaky request with etcd's 503 "no
    leader". Requests are named by path (kv/range a read, kv/txn a
    conditional write, auth/authenticate a token)."""

    kind = name = "etcd"
    restart_kind = "etcd_restart"
    answer = ("no_leader", ETCD_NO_LEADER_RESPONSE)
    url_port = True
    paths = True
    fixture = "etcd_server"

    def make_server(self):
        from .etcd import EtcdServer
        return EtcdServer()

    def lock_url(self, key: str, port) -> str:
        return f"etcd://127.0.0.1:{port}/{self._key(key)}"

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        hard = rng.random() < 0.5
        self.server.restart(hard=hard)
        return "SIGKILL" if hard else "restart"

    def classify(self, method, path, headers):
        p = path.split("?", 1)[0]
        for op in ("kv/range", "kv/txn", "auth/authenticate"):
            if p == f"/v3/{op}":
                return op
        return f"{method} {p}"

    def version(self) -> str:
        from .etcd import etcd_binary
        return _version([etcd_binary(), "--version"], "etcd")

    def record(self, key: str) -> bytes | None:
        value, _rev = self.server.get_key(self._key(key))
        return value


class RedisBackend(Backend):
    """redis-server with its append-only file fsynced on every write (a
    restart, SIGTERM or SIGKILL, keeps every acknowledged write; docs/stores.md
    says why it must) and the store's ACL user, its password in
    S3LECT_REDIS_PASSWORD. Each node's redis:// URL names its own proxy's
    port; no "slow down" answer (binary protocol). One Lua script per read
    and per write."""

    kind = name = "redis"
    restart_kind = "redis_restart"
    answer = None
    protocol = "redis"
    url_port = True
    paths = True
    fixture = "redis"

    def make_server(self):
        from .redis_server import RedisServer
        return RedisServer(aof=True)  # ServerStartError without redis-server

    def env(self) -> dict[str, str]:
        return {"S3LECT_REDIS_PASSWORD": self.server.password}

    def lock_url(self, key: str, port) -> str:
        from .redis_server import KEY_PREFIX
        return f"redis://{self.server.user}@127.0.0.1:{port}/{KEY_PREFIX}{self._key(key)}"

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        hard = rng.random() < 0.5
        self.server.restart(hard=hard)
        return "SIGKILL" if hard else "SIGTERM"

    def version(self) -> str:
        return _version([self.server.binary, "--version"], "redis-server").split(" sha=")[0]

    def record(self, key: str) -> bytes | None:
        from .redis_server import KEY_PREFIX
        return self.server.call("HGET", KEY_PREFIX + self._key(key), "r")


class K8sBackend(Backend):
    """A real kube-apiserver with its own etcd (tests/harness/kube_apiserver.py:
    static tokens, RBAC: the s3lect user may get, create and update leases in
    the test namespace). Nodes get KUBECONFIG (a kubeconfig with the s3lect
    user's token); a node behind a proxy of its own gets a kubeconfig whose
    server is that proxy, named by the lock URL (?kubeconfig=PATH). The
    proxies forward the TLS stream as it is (no "slow down" answer: they
    cannot read it). A restart is the API server stopped (SIGTERM or
    SIGKILL) and started again on the same port; etcd, and so every Lease,
    is kept."""

    kind = name = "k8s"
    restart_kind = "k8s_restart"
    answer = None
    protocol = "tls"
    url_port = True
    fixture = "kube_apiserver"

    def make_server(self):
        from .kube_apiserver import KubeApiServer
        return KubeApiServer()  # waits for a running build of the binary

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._kubeconfigs: dict[int, str] = {}

    def kubeconfig(self, port: int) -> str:
        """A kubeconfig of the s3lect user whose server is 127.0.0.1:port."""
        if port not in self._kubeconfigs:
            path = Path(self.server.workdir) / f"kubeconfig-s3lect-{port}"
            self._kubeconfigs[port] = str(self.server.kubeconfig(
                path, server=f"https://127.0.0.1:{port}"))
        return self._kubeconfigs[port]

    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": self.kubeconfig(self.port)}

    def direct_env(self) -> dict[str, str]:
        return self.env()

    def _key(self, key: str) -> str:
        # A Lease's name is a DNS subdomain: lower case letters, digits, '-', '.'.
        name = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in key.lower())
        return name.strip("-.")[:253] or "lock"

    def lock_url(self, key: str, port) -> str:
        url = f"k8s://{self.server.namespace}/{self._key(key)}"
        return url if port == self.port else f"{url}?kubeconfig={self.kubeconfig(port)}"

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        hard = rng.random() < 0.5
        self.server.restart(hard=hard)
        return "SIGKILL" if hard else "SIGTERM"

    def classify(self, method, path, headers):
        """A Lease request by verb (GET, PUT, POST), anything else by path."""
        p = path.split("?", 1)[0]
        return method if "/leases" in p else f"{method} {p}"

    def version(self) -> str:
        return _version([self.server.binary, "--version"], "kube-apiserver")

    def record(self, key: str) -> bytes | None:
        """s3lect's record, from the Lease's annotation (under s3lect's own
        domain), or None."""
        lease = self.server.get_lease(self._key(key))
        notes = (lease or {}).get("metadata", {}).get("annotations") or {}
        found = [v for k, v in sorted(notes.items()) if "s3lect" in k and k.endswith("record")]
        return found[0].encode() if found else None


# By the registry's kind (tests/harness/stores.py).
FAMILY: dict[str, type[Backend]] = {b.kind: b for b in (
    MinioBackend, DynamoDBBackend, PostgresBackend, MySQLBackend, Route53Backend, GcsBackend,
    AzureBackend, EtcdBackend, RedisBackend, K8sBackend)}


def _chaos() -> dict[str, type[Backend]]:
    from .stores import STORES
    # (A registry store without a backend fails tests/cli/test_store_lists.py.)
    return {s.chaos: FAMILY[s.kind] for s in STORES if "chaos" in s.suites and s.kind in FAMILY}


# The chaos run's, by its names ("minio", "dynamodb", ...): the registry's
# stores of suite "chaos".
BACKENDS: dict[str, type[Backend]] = _chaos()

# ---------------------------------------------------------------------------
# The store suite's view (tests/stores/conftest.py)


@dataclass
class SuiteBackend:
    """What the store suite's tests read of a backend whose nodes reach its
    server directly (no proxy): its kind, the environment its nodes need,
    how to make a fresh lock URL, and the server behind it (for
    restart/pause). tests/stores/conftest.py makes them with
    Backend.for_suite()."""

    kind: str
    env: dict[str, str]
    new_lock: Callable[[str], str]
    server: object
    # Whether the server really enforces compare-and-set (Backend.cas). moto's
    # Route 53 does not (it lets a second CREATE and every DELETE of a value
    # the name ever had through), so on it nodes must never race: the cluster
    # fixture starts one node, waits until it leads, then the others, and a
    # takeover has a single candidate.
    enforces_cas: bool
    backend: Backend

# SPDX-License-Identifier: Apache-2.0
"""The lock stores as the chaos run drives them (issue 40 item 1): per store
its server (restartable for the store-restart fault), the lock URL a node
reaches it by through its own proxy, the environment, the proxies' "slow
down" answer, and the restart fault with its kind. Moved unchanged from
tests/chaos/chaos_lib.py.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from pathlib import Path

from .dynamodb_local import DynamoDBLocal
from .pgserver import PostgresServer
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
# The lock stores of the five-node run


class Backend:
    """A lock store for the five-node chaos run: its server (started and
    destroyed by the test, restartable for the store-restart fault), how a
    node reaches it through its own proxy, and the proxy's "slow down" answer.

    name:         "minio", "dynamodb", "postgres", "gcs", "azure", "etcd" or "redis" (the
                  test's parameter)
    restart_kind: the fault kind of a store restart
    answer:       (stats name, bytes) the proxies answer a flaky request with
                  instead of forwarding it, or None (binary protocol)
    port:         the server's port, which the proxies forward to
    """

    name = ""
    restart_kind = ""
    answer: tuple[str, bytes] | None = None
    server: "MinioServer | DynamoDBLocal | PostgresServer"

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> None:
        """Raises ServerStartError saying why it cannot."""
        self.server.start()

    def destroy(self, save_log_to: Path | None = None) -> None:
        """Stops the server and removes its data; its log goes to save_log_to."""
        if save_log_to is not None:
            try:
                shutil.copyfile(self.server.log_path, save_log_to / f"{self.name}-server.log")
            except OSError:
                pass
        self.server.stop()

    def env(self) -> dict[str, str]:
        """What every s3lect of this test needs in its environment (credentials)."""
        return {}

    def node_lock(self, key: str, proxy_port: int) -> str:
        """The lock URL of a node whose proxy listens on proxy_port."""
        raise NotImplementedError

    def node_args(self, proxy_port: int) -> list[str]:
        """s3lect options that send a node's requests to proxy_port."""
        return ["--endpoint", f"http://127.0.0.1:{proxy_port}"]

    def status_args(self, key: str) -> list[str]:
        """`s3lect status` arguments that read the lock directly (no proxy)."""
        raise NotImplementedError

    def init(self, bin_: Path, key: str, env: dict[str, str]) -> None:
        """Creates what the lock needs (directly, not through a proxy)."""

    def restart(self, rng: random.Random, sleep) -> str:
        """The store-restart fault: the server goes down and comes back with
        its data (same port). sleep(s) waits while the test keeps watching
        the nodes. Returns a word on how (for the summary). Raises
        ServerStartError if it does not come back."""
        raise NotImplementedError

    def _init_store(self, bin_: Path, lock: str, env: dict[str, str], args: list[str]) -> None:
        r = subprocess.run([str(bin_), "init-store", lock, *args], env=env, capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise ServerStartError(f"s3lect init-store {lock} failed (status {r.returncode}): "
                                   f"{r.stderr.strip()}")


class MinioBackend(Backend):
    """MinIO, stopped for 0.5-3 s and started again on the same port and data."""

    name = "minio"
    restart_kind = "minio_restart"
    answer = ("slowdown", SLOWDOWN_RESPONSE)

    def __init__(self) -> None:
        self.server = RestartableMinio()

    def destroy(self, save_log_to: Path | None = None) -> None:
        if save_log_to is not None:
            try:
                shutil.copyfile(self.server.log_path, save_log_to / "minio-server.log")
            except OSError:
                pass
        self.server.destroy()

    def env(self) -> dict[str, str]:
        m = self.server
        return dict(AWS_ACCESS_KEY_ID=m.access_key, AWS_SECRET_ACCESS_KEY=m.secret_key,
                    AWS_REGION=m.region)

    def node_lock(self, key: str, proxy_port: int) -> str:  # noqa: ARG002
        return f"s3://{self.server.bucket}/chaos/{key}.json"

    def status_args(self, key: str) -> list[str]:
        return [self.node_lock(key, 0), "--endpoint", self.server.endpoint]

    def restart(self, rng: random.Random, sleep) -> str:
        self.server.stop_process()
        sleep(rng.uniform(0.5, 3.0))
        self.server.restart()
        return "stop+start"


class DynamoDBBackend(Backend):
    """DynamoDB Local (file database: a restart keeps the table and items);
    the proxies answer a flaky request with DynamoDB's throttling error
    (400 ProvisionedThroughputExceededException)."""

    name = "dynamodb"
    restart_kind = "dynamodb_restart"
    answer = ("throttle", THROTTLE_RESPONSE)
    TABLE = "s3lect-chaos"

    def __init__(self) -> None:
        self.server = DynamoDBLocal()  # fetches it on first use (ServerStartError)

    def env(self) -> dict[str, str]:
        # No AWS_ENDPOINT_URL_DYNAMODB: each node gets its proxy's (node_args).
        return {k: v for k, v in self.server.env().items() if k != "AWS_ENDPOINT_URL_DYNAMODB"}

    def node_lock(self, key: str, proxy_port: int) -> str:  # noqa: ARG002
        return f"dynamodb://{self.TABLE}/{key}"

    def status_args(self, key: str) -> list[str]:
        return [self.node_lock(key, 0), "--endpoint", self.server.endpoint]

    def init(self, bin_: Path, key: str, env: dict[str, str]) -> None:
        self._init_store(bin_, self.node_lock(key, 0), env, ["--endpoint", self.server.endpoint])

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        # SIGTERM, then the JVM again on the same port and -dbPath (down for
        # as long as the JVM takes to start, ~1.5-5 s).
        self.server.restart(hard=False)
        return "restart"


class PostgresBackend(Backend):
    """A throwaway PostgreSQL. A restart is, at random, a crash (SIGKILL of
    every server process, or an immediate shutdown) followed at once by
    recovery, or a fast shutdown with the server down for 0.5-3 s; always
    the same port and data, and every commit survives (synchronous_commit
    stays on). Each node's lock URL names its own proxy's port; no "slow
    down" answer (binary protocol)."""

    name = "postgres"
    restart_kind = "postgres_restart"
    answer = None

    def __init__(self) -> None:
        self.server = PostgresServer()

    def node_lock(self, key: str, proxy_port: int) -> str:
        return f"postgres://s3lect@127.0.0.1:{proxy_port}/s3lect?key={key}"

    def node_args(self, proxy_port: int) -> list[str]:  # noqa: ARG002
        return []

    def status_args(self, key: str) -> list[str]:
        return [self.node_lock(key, self.server.port)]

    def init(self, bin_: Path, key: str, env: dict[str, str]) -> None:
        self._init_store(bin_, self.node_lock(key, self.server.port), env, [])

    def restart(self, rng: random.Random, sleep) -> str:
        how = rng.choice(["SIGKILL", "immediate", "down"])
        if how == "down":
            self.server.stop(keep_dir=True)
            sleep(rng.uniform(0.5, 3.0))
        self.server.restart(hard=how == "SIGKILL")  # (after a stop: just starts it)
        return how


class GcsBackend(Backend):
    """fake-gcs-server (filesystem backend: a restart keeps the bucket, the
    objects and their generations); the proxies answer a flaky request with
    Cloud Storage's 429. No token: the nodes' endpoints are http on loopback
    (an emulator)."""

    name = "gcs"
    restart_kind = "gcs_restart"
    answer = ("throttle", GCS_THROTTLE_RESPONSE)

    def __init__(self) -> None:
        from harness.fake_gcs import FakeGCS
        self.server = FakeGCS()  # builds it on first use (ServerStartError)

    def node_lock(self, key: str, proxy_port: int) -> str:  # noqa: ARG002
        return f"gs://{self.server.bucket}/chaos/{key}.json"

    def status_args(self, key: str) -> list[str]:
        return [self.node_lock(key, 0), "--endpoint", self.server.endpoint]

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        self.server.restart(hard=rng.random() < 0.5)
        return "restart"


class AzureBackend(Backend):
    """Azurite (tests/harness/azurite.py; its data survives a restart), with
    Shared Key from AZURE_STORAGE_KEY; each node's --endpoint is its proxy
    (http://127.0.0.1:PORT, to which the store adds /ACCOUNT, Azurite's
    path-style); the proxies answer a flaky request with 503 ServerBusy.
    A restart is a SIGTERM or a SIGKILL and the server again on the same
    port and data."""

    name = "azure"
    restart_kind = "azure_restart"
    answer = ("busy", BUSY_RESPONSE)

    def __init__(self) -> None:
        from harness.azurite import AzuriteServer
        self.server = AzuriteServer()  # installs Azurite on first use

    def env(self) -> dict[str, str]:
        return dict(AZURE_STORAGE_KEY=self.server.account_key,
                    AZURE_STORAGE_ACCOUNT=self.server.account)

    def node_lock(self, key: str, proxy_port: int) -> str:  # noqa: ARG002
        return f"{self.server.lock_prefix()}chaos/{key}.json"

    def status_args(self, key: str) -> list[str]:
        return [self.node_lock(key, 0), "--endpoint", self.server.blob_endpoint]

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        hard = rng.random() < 0.5
        self.server.restart(hard=hard)
        return "SIGKILL" if hard else "restart"


class EtcdBackend(Backend):
    """Debian's etcd, one member (a restart keeps the keys and their
    revisions); each node's etcd:// URL names its own proxy's port; the proxies
    answer a flaky request with etcd's 503 "no leader"."""

    name = "etcd"
    restart_kind = "etcd_restart"
    answer = ("no_leader", ETCD_NO_LEADER_RESPONSE)

    def __init__(self) -> None:
        from harness.etcd import EtcdServer
        self.server = EtcdServer()

    def node_lock(self, key: str, proxy_port: int) -> str:
        return f"etcd://127.0.0.1:{proxy_port}/chaos/{key}"

    def node_args(self, proxy_port: int) -> list[str]:  # noqa: ARG002
        return []

    def status_args(self, key: str) -> list[str]:
        return [self.node_lock(key, self.server.port)]

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        hard = rng.random() < 0.5
        self.server.restart(hard=hard)
        return "SIGKILL" if hard else "restart"


class RedisBackend(Backend):
    """redis-server with its append-only file fsynced on every write (a
    restart, SIGTERM or SIGKILL, keeps every acknowledged write; docs/stores.md
    says why it must) and the store's ACL user, its password in
    S3LECT_REDIS_PASSWORD. Each node's redis:// URL names its own proxy's
    port; no "slow down" answer (binary protocol)."""

    name = "redis"
    restart_kind = "redis_restart"
    answer = None

    def __init__(self) -> None:
        from harness.redis_server import RedisServer
        self.server = RedisServer(aof=True)  # ServerStartError without redis-server

    def env(self) -> dict[str, str]:
        return {"S3LECT_REDIS_PASSWORD": self.server.password}

    def node_lock(self, key: str, proxy_port: int) -> str:
        from harness.redis_server import KEY_PREFIX
        return f"redis://{self.server.user}@127.0.0.1:{proxy_port}/{KEY_PREFIX}chaos/{key}"

    def node_args(self, proxy_port: int) -> list[str]:  # noqa: ARG002
        return []

    def status_args(self, key: str) -> list[str]:
        return [self.node_lock(key, self.server.port)]

    def restart(self, rng: random.Random, sleep) -> str:  # noqa: ARG002
        hard = rng.random() < 0.5
        self.server.restart(hard=hard)
        return "SIGKILL" if hard else "SIGTERM"


BACKENDS = {b.name: b for b in (MinioBackend, DynamoDBBackend, PostgresBackend, GcsBackend,
                                       AzureBackend, EtcdBackend, RedisBackend)}

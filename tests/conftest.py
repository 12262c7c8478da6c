# SPDX-License-Identifier: Apache-2.0
"""Shared pytest fixtures: the build, the s3lect CLI, and real S3 servers.

- ``build_dir``: the CMake build directory, from S3LECT_BUILD_DIR (default
  <repo>/build).
- ``s3lect_bin``: <build>/bin/s3lect; ``s3_probe_bin``: <build>/tests/c/s3_probe
  (one S3-store operation as JSON, for store-level tests).
- ``minio``: a MinIO on a free 127.0.0.1 port with throwaway credentials and
  bucket ``s3lect-test``, started once per session and always stopped; if
  S3LECT_TEST_ENDPOINT is set (e.g. under scripts/with-minio), that server is
  used instead. ``moto``: the same with moto's server.
- ``s3server``: parametrised over both, for tests every S3 server must pass.
- ``dynamodb_local``: DynamoDB Local (harness/dynamodb_local.py; fetched once
  into ~/.cache/s3lect) on a free 127.0.0.1 port, file database, restartable.
- ``postgres``: a throwaway PostgreSQL (harness/pgserver.py) on a free
  127.0.0.1 port, user and database ``s3lect``, trust authentication.
  Both are session-scoped and started only when a test asks for them.

A server that cannot start fails the tests that need it, with its log.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Iterator

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

# Every test elects on a lock name of its own that never existed: no leader of
# it can be running, so its nodes may create it at once instead of waiting the
# lease that protects a lock deleted under a running leader (new_lock_wait,
# docs/algorithm.md "A lock that vanishes"). Every `s3lect` a test starts
# inherits this; the tests of that wait (tests/cli/test_cli_vanish.py,
# tests/stores/test_new_lock.py, the simulation) take it out again.
os.environ.setdefault("S3LECT_NEW_LOCK_WAIT", "0")


def _interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    """SIGTERM (an interrupted scripts/test stops its side-by-side lane with
    it; CI stops a job with it) ends the session as Ctrl-C does: the
    fixtures' teardown still runs and stops every server and node they
    started, which live in sessions of their own."""
    signal.signal(signal.SIGTERM, _interrupt)
    config.addinivalue_line(
        "markers", "second_session: scripts/test runs it in the second of its suite's two pytest "
        "sessions (pytest_pair in scripts/lib/lanes.sh: -m second_session, the first "
        "-m 'not second_session', over the same paths)")


from harness.dynamodb_local import DynamoDBLocal  # noqa: E402
from harness.pgserver import PostgresServer  # noqa: E402
from harness.servers import (  # noqa: E402
    ExternalServer,
    MinioServer,
    MotoServer,
    Server,
    serve,
)


@pytest.fixture(scope="session")
def build_dir() -> Path:
    d = Path(os.environ.get("S3LECT_BUILD_DIR", str(REPO / "build"))).resolve()
    if not d.is_dir():
        pytest.fail(
            f"build directory {d} does not exist: build first (cmake -S . -B build -G Ninja && "
            "ninja -C build) or set S3LECT_BUILD_DIR"
        )
    return d


def _built(path: Path, what: str) -> Path:
    if not os.access(path, os.X_OK):
        pytest.fail(f"{what} not found at {path}: build it (ninja -C {path.parents[1]})")
    return path


@pytest.fixture(scope="session")
def s3lect_bin(build_dir: Path) -> Path:
    return _built(build_dir / "bin" / "s3lect", "the s3lect CLI")


@pytest.fixture(scope="session")
def s3_probe_bin(build_dir: Path) -> Path:
    return _built(build_dir / "tests" / "c" / "s3_probe", "tests/c/s3_probe")


@pytest.fixture(scope="session")
def minio() -> Iterator[Server | ExternalServer]:
    ep = os.environ.get("S3LECT_TEST_ENDPOINT")
    if ep:
        missing = [v for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if not os.environ.get(v)]
        if missing:
            pytest.fail(f"S3LECT_TEST_ENDPOINT is set but {', '.join(missing)} is not")
        srv = ExternalServer(
            name="minio",
            endpoint=ep,
            bucket=os.environ.get("S3LECT_TEST_BUCKET", "s3lect-test"),
            access_key=os.environ["AWS_ACCESS_KEY_ID"],
            secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            region=os.environ.get("AWS_REGION", "us-east-1"),
        )
        srv.client().create_bucket(srv.bucket)
        yield srv
        return
    yield from serve(MinioServer)


@pytest.fixture(scope="session")
def moto() -> Iterator[Server]:
    yield from serve(MotoServer)


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    yield from serve(DynamoDBLocal)  # fetches it on first use


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    yield from serve(PostgresServer)


@pytest.fixture(scope="session")
def azurite():
    """Azurite (tests/harness/azurite.py), installed from npm on first use."""
    from harness.azurite import AzuriteServer
    yield from serve(AzuriteServer)


@pytest.fixture(scope="session")
def fake_gcs():
    """fake-gcs-server (tests/harness/fake_gcs.py), built on first use."""
    from harness.fake_gcs import FakeGCS
    yield from serve(FakeGCS)


@pytest.fixture(scope="session")
def etcd_server():
    """etcd (tests/harness/etcd.py, Debian's etcd-server), plain HTTP, no auth."""
    from harness.etcd import EtcdServer
    yield from serve(EtcdServer)


@pytest.fixture(scope="session")
def kube_apiserver():
    """kube-apiserver (tests/harness/kube_apiserver.py) with its own etcd,
    static tokens, RBAC for the test namespace and a CA for client
    certificates; the binary is the cached build of scripts/kube-apiserver-
    install (waited for while a build runs; a failure without it)."""
    from harness.kube_apiserver import KubeApiServer
    yield from serve(KubeApiServer)


@pytest.fixture(scope="session")
def redis():
    """redis-server (tests/harness/redis_server.py): append-only file fsynced
    on every write, the store's ACL user, password in S3LECT_REDIS_PASSWORD."""
    from harness.redis_server import RedisServer
    yield from serve(RedisServer)


@pytest.fixture(params=["minio", "moto"])
def s3server(request: pytest.FixtureRequest) -> Server | ExternalServer:
    return request.getfixturevalue(request.param)


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """The environment without any AWS or S3LECT_TEST settings, HOME in a temp dir
    (no ~/.aws files), for child processes that must get settings explicitly."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and not k.startswith("S3LECT_TEST_")
    }
    home = tmp_path / "home"
    home.mkdir()
    env["HOME"] = str(home)
    return env


@pytest.fixture
def sighup_default():
    """SIGHUP at its default for the nodes a test starts. A run started
    under nohup (or any parent that ignores SIGHUP) passes the ignored
    disposition down: s3lect run gives its command the dispositions it was
    started with, so the command would rightly survive a forwarded SIGHUP
    and s3lect run keep leading: not what the signal tests are about."""
    old = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGHUP, old)

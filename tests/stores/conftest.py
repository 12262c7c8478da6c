# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the native-store tests: one Backend per store, on the real
servers the harness starts (DynamoDB Local, PostgreSQL, moto's Route 53,
fake-gcs-server, Azurite, etcd, redis-server)."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from harness.cli import Node, run  # noqa: E402
from harness.stores import kinds  # noqa: E402
from harness.backends import SuiteBackend as Backend, make_backend, moto_dynamodb_backend  # noqa: E402,F401
from storeutil import ddb_env as _ddb_env, pg_env as _pg_env  # noqa: E402


@pytest.fixture(scope="module")
def ddb_table(dynamodb_local, s3lect_bin) -> str:
    table = f"s3lect-{secrets.token_hex(4)}"
    env = _ddb_env(dynamodb_local)
    r = run([str(s3lect_bin), "init-store", f"dynamodb://{table}/x"], env, timeout=120)
    assert r.returncode == 0, r.stderr
    return table


@pytest.fixture(scope="module")
def pg_ready(postgres, s3lect_bin) -> str:
    r = run([str(s3lect_bin), "init-store", f"{postgres.dsn}?key=x"], _pg_env(postgres), timeout=60)
    assert r.returncode == 0, r.stderr
    return postgres.dsn


@pytest.fixture(scope="module")
def r53_zone(moto) -> str:
    from harness.backends import _r53_zone
    return _r53_zone(moto)


@pytest.fixture(scope="module")
def moto_ddb_table(moto, s3lect_bin) -> str:
    table = f"s3lect-{secrets.token_hex(4)}"
    env = dict(_ddb_env(moto), AWS_ENDPOINT_URL_DYNAMODB=moto.endpoint)
    r = run([str(s3lect_bin), "init-store", f"dynamodb://{table}/x"], env, timeout=120)
    assert r.returncode == 0, r.stderr
    return table


@pytest.fixture(params=kinds("cas")[:1] + ["dynamodb-moto"] + kinds("cas")[1:])
def cas_impl(request) -> Backend:
    """Every server that enforces compare-and-set, moto's DynamoDB included."""
    if request.param == "dynamodb-moto":
        return moto_dynamodb_backend(request)
    return make_backend(request.param, request)


@pytest.fixture(params=kinds("stores"))
def backend(request) -> Backend:
    return make_backend(request.param, request)


@pytest.fixture(params=kinds("cas"))
def cas_backend(request) -> Backend:
    """The stores whose test server enforces compare-and-set."""
    return make_backend(request.param, request)


@pytest.fixture
def cluster(s3lect_bin, tmp_path):
    nodes: list[Node] = []

    def start(lock: str, env: dict[str, str], n: int = 3, extra=None,
              serial: bool = False) -> list[Node]:
        if serial:  # no racing writers: one leader first, then one follower
            from harness.cli import wait_for
            first = Node(s3lect_bin, tmp_path, lock, f"n{len(nodes)}", env, extra)
            nodes.append(first)
            wait_for(first.leading, 30, "the first node to lead")
            n = min(n, 2) - 1
        for _ in range(n):
            nodes.append(Node(s3lect_bin, tmp_path, lock, f"n{len(nodes)}", env, extra))
        return nodes

    yield start
    for node in nodes:
        node.stop()

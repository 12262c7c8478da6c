# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the native-store tests: one Backend per store, on the real
servers the harness starts (DynamoDB Local, PostgreSQL, moto's Route 53,
fake-gcs-server, Azurite, etcd, redis-server)."""

from __future__ import annotations

import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from harness.cli import Node, run  # noqa: E402
from harness.stores import kinds  # noqa: E402
from storeutil import _base as _base_env, ddb_env as _ddb_env, gcs_env as _gcs_env, pg_env as _pg_env  # noqa: E402
from storeutil import redis_env as _redis_env  # noqa: E402


@dataclass
class Backend:
    """A store under test: its kind, the environment its nodes need, how to
    make a fresh lock URL, and the server behind it (for restart/pause)."""

    kind: str
    env: dict[str, str]
    new_lock: Callable[[str], str]
    server: object
    # Whether the server really enforces compare-and-set. moto's Route 53 does
    # not (it lets a second CREATE and every DELETE of a value the name ever
    # had through), so on it nodes must never race: the cluster fixture
    # starts one node, waits until it leads, then the others, and a takeover
    # has a single candidate.
    enforces_cas: bool = True
    notes: list[str] = field(default_factory=list)


def _r53_zone(moto) -> str:
    import boto3
    c = boto3.client("route53", endpoint_url=moto.endpoint, region_name="us-east-1",
                     aws_access_key_id=moto.access_key, aws_secret_access_key=moto.secret_key)
    z = c.create_hosted_zone(Name="stores.example.com.", CallerReference=secrets.token_hex(8))
    return z["HostedZone"]["Id"].split("/")[-1]


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
    return _r53_zone(moto)


def make_backend(kind: str, request: pytest.FixtureRequest) -> Backend:
    if kind == "azure":
        az = request.getfixturevalue("azurite")
        env = _base_env()
        env.update(az.env())
        return Backend(kind, env,
                       lambda name: f"{az.lock_prefix()}{name}-{secrets.token_hex(4)}.json", az)
    if kind == "dynamodb":
        ddb = request.getfixturevalue("dynamodb_local")
        table = request.getfixturevalue("ddb_table")
        return Backend(kind, _ddb_env(ddb),
                       lambda name: f"dynamodb://{table}/{name}-{secrets.token_hex(4)}", ddb)
    if kind == "postgres":
        pg = request.getfixturevalue("postgres")
        dsn = request.getfixturevalue("pg_ready")
        return Backend(kind, _pg_env(pg),
                       lambda name: f"{dsn}?key={name}-{secrets.token_hex(4)}", pg)
    if kind == "gcs":
        gcs = request.getfixturevalue("fake_gcs")
        return Backend(kind, _gcs_env(gcs),
                       lambda name: f"gs://{gcs.bucket}/{name}-{secrets.token_hex(4)}", gcs)
    if kind == "etcd":
        etcd = request.getfixturevalue("etcd_server")
        return Backend(kind, _gcs_env(etcd),  # the base environment and the server's
                       lambda name: f"{etcd.lock_prefix()}{name}-{secrets.token_hex(4)}", etcd)
    if kind == "redis":
        rd = request.getfixturevalue("redis")
        return Backend(kind, _redis_env(rd),
                       lambda name: f"{rd.lock_prefix}{name}-{secrets.token_hex(4)}", rd,
                       notes=["a single primary, append-only file fsynced on every write"])
    moto = request.getfixturevalue("moto")
    zone = request.getfixturevalue("r53_zone")
    env = dict(_ddb_env(moto), AWS_ENDPOINT_URL_ROUTE_53=moto.endpoint)
    return Backend(kind, env,
                   lambda name: f"route53://{zone}/{name}-{secrets.token_hex(4)}.stores.example.com",
                   moto, enforces_cas=False,
                   notes=["moto accepts a DELETE of a value the record no longer holds"])


@pytest.fixture(scope="module")
def moto_ddb_table(moto, s3lect_bin) -> str:
    table = f"s3lect-{secrets.token_hex(4)}"
    env = dict(_ddb_env(moto), AWS_ENDPOINT_URL_DYNAMODB=moto.endpoint)
    r = run([str(s3lect_bin), "init-store", f"dynamodb://{table}/x"], env, timeout=120)
    assert r.returncode == 0, r.stderr
    return table


def moto_dynamodb_backend(request) -> Backend:
    """moto's DynamoDB: a second implementation of the same API."""
    moto = request.getfixturevalue("moto")
    table = request.getfixturevalue("moto_ddb_table")
    env = dict(_ddb_env(moto), AWS_ENDPOINT_URL_DYNAMODB=moto.endpoint)
    return Backend("dynamodb-moto", env,
                   lambda name: f"dynamodb://{table}/{name}-{secrets.token_hex(4)}", moto)


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

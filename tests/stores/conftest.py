# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the native-store tests, on the real servers the harness starts
(DynamoDB Local, PostgreSQL, moto's Route 53, fake-gcs-server, Azurite, etcd,
redis-server). The stores and what their nodes need come from the one family
of backends, tests/harness/backends.py (FAMILY, by the registry's kind): no
store has code here."""

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

from harness.backends import FAMILY, SuiteBackend  # noqa: E402
from harness.cli import Node, run  # noqa: E402
from harness.servers import ServerStartError  # noqa: E402
from harness.stores import kinds  # noqa: E402
from storeutil import _base as _base_env, ddb_env as _ddb_env, pg_env as _pg_env  # noqa: E402

# Second implementations of a store's API the suite runs too: its name ->
# (the registry's kind, the session fixture of tests/conftest.py serving it).
VARIANTS = {"dynamodb-moto": ("dynamodb", "moto")}


@pytest.fixture(scope="session")
def suite_servers():
    """The servers this suite starts itself, by kind: those of the backends
    that name no fixture of tests/conftest.py (Backend.fixture)."""
    started: dict[str, object] = {}
    yield started
    for server in started.values():
        server.stop()


@pytest.fixture(scope="module")
def suite_backends() -> dict[str, SuiteBackend]:
    """The backends of a test module, made once (a table, a zone) by kind."""
    return {}


def make_backend(kind: str, request: pytest.FixtureRequest) -> SuiteBackend:
    """The store suite's backend of kind (the registry's, or a VARIANTS name)
    on the session's server, its lock's table or zone made once per module."""
    made = request.getfixturevalue("suite_backends")
    if kind in made:
        return made[kind]
    family_kind, fixture = VARIANTS.get(kind, (kind, ""))
    cls = FAMILY[family_kind]
    fixture = fixture or cls.fixture
    try:
        if fixture:
            server = request.getfixturevalue(fixture)
        else:
            own = request.getfixturevalue("suite_servers")
            if kind not in own:
                server = cls().server
                server.start()
                own[kind] = server
            server = own[kind]
        made[kind] = cls(server=server).for_suite(kind, request.getfixturevalue("s3lect_bin"),
                                                  _base_env())
    except ServerStartError as e:
        pytest.fail(f"{kind}: {e}", pytrace=False)
    return made[kind]


def moto_dynamodb_backend(request) -> SuiteBackend:
    """moto's DynamoDB: a second implementation of the same API."""
    return make_backend("dynamodb-moto", request)


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
    """A hosted zone stores.example.com in moto (the throttling test's)."""
    import boto3
    c = boto3.client("route53", endpoint_url=moto.endpoint, region_name="us-east-1",
                     aws_access_key_id=moto.access_key, aws_secret_access_key=moto.secret_key)
    z = c.create_hosted_zone(Name="stores.example.com.", CallerReference=secrets.token_hex(8))
    return z["HostedZone"]["Id"].split("/")[-1]


@pytest.fixture(params=kinds("cas")[:1] + list(VARIANTS) + kinds("cas")[1:])
def cas_impl(request) -> SuiteBackend:
    """Every server that enforces compare-and-set, moto's DynamoDB included."""
    return make_backend(request.param, request)


@pytest.fixture(params=kinds("stores"))
def backend(request) -> SuiteBackend:
    return make_backend(request.param, request)


@pytest.fixture(params=kinds("cas"))
def cas_backend(request) -> SuiteBackend:
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

# SPDX-License-Identifier: Apache-2.0
"""Elections on the DynamoDB, PostgreSQL, Route 53, GCS, Azure, etcd and Redis stores, from Python.

The binding hands the lock URL to libs3lect unchanged; these tests prove that
the stores chosen by dynamodb://, postgres:// and route53:// URLs elect
through it. Real servers from tests/conftest.py: DynamoDB Local
(``dynamodb_local``), PostgreSQL (``postgres``) and moto's Route 53
(``moto``; moto does not enforce Route 53's DELETE-must-match rule, so
only the functional behaviour is tested there, not the compare-and-set
safety). Tables are made with ``s3lect init-store`` (the CLI of
S3LECT_BUILD_DIR), as the documentation says.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import s3lect
from pyutil import wait_until

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from harness.backends import create_hosted_zone  # noqa: E402
from harness.stores import kinds  # noqa: E402

STORES = kinds("python")
#: Timings asked for by these tests (seconds), as in pyutil.FAST.
TIMINGS = dict(lease_timeout=3.0, renew_deadline=2.0, renew_interval=0.5,
               frequent_interval=0.5, infrequent_interval=1.0, request_timeout=5.0)
TAKEOVER_BOUND_S = 6.0


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def init_store(cli: Path, url: str, env: Dict[str, str]) -> str:
    """Runs `s3lect init-store URL`; fails the test with its output if it fails."""
    r = subprocess.run([str(cli), "init-store", url], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=90)
    assert r.returncode == 0, f"s3lect init-store {url} failed ({r.returncode}): {r.stderr}{r.stdout}"
    return r.stdout


def _aws_env(access_key: str, secret_key: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=access_key, AWS_SECRET_ACCESS_KEY=secret_key,
               AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    return env


@pytest.fixture(scope="module")
def r53_zone(moto: Any) -> Tuple[str, str]:
    """A hosted zone in moto's Route 53: (zone id, domain)."""
    domain = _unique("s3lect-py") + ".example.com"
    return create_hosted_zone(moto.endpoint, domain), domain


@pytest.fixture(scope="module")
def mariadb() -> Any:
    """A throwaway MariaDB for the mysql:// store (tests/harness/mariadb_server.py)."""
    from harness.mariadb_server import MariaDBServer
    from harness.servers import ServerStartError
    try:
        srv = MariaDBServer().start()
    except ServerStartError as e:
        pytest.fail(f"mysql: {e}", pytrace=False)
    yield srv
    srv.stop()


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, s3lect_bin: Path) -> Tuple[str, str, Dict[str, Any]]:
    """(kind, lock URL, elector settings) on a fresh lock of the parametrised
    store, its table made by `s3lect init-store`."""
    kind = request.param
    if kind == "dynamodb":
        ddb = request.getfixturevalue("dynamodb_local")
        table = _unique("s3lect-py")
        url = f"dynamodb://{table}/leader"
        env = _aws_env(ddb.access_key, ddb.secret_key)
        env["AWS_ENDPOINT_URL_DYNAMODB"] = ddb.endpoint
        out = init_store(s3lect_bin, url, env)
        assert table in out, f"init-store did not name table {table}: {out!r}"
        return kind, url, dict(endpoint=ddb.endpoint, access_key_id=ddb.access_key,
                               secret_access_key=ddb.secret_key, region="us-east-1")
    if kind == "postgres":
        pg = request.getfixturevalue("postgres")
        table = _unique("locks").replace("-", "_")
        url = f"{pg.dsn}?key={_unique('leader')}&table={table}"
        init_store(s3lect_bin, url, dict(os.environ))
        # The table is really there, with the columns the store documents.
        cols = pg.psql(f"SELECT column_name FROM information_schema.columns "
                       f"WHERE table_name = '{table}' ORDER BY column_name").split()
        assert cols == ["name", "record", "updated_at", "version"], cols
        return kind, url, {}
    if kind == "mysql":
        # A throwaway MariaDB (this module's); the library reads the user's
        # password from MYSQL_PWD.
        my = request.getfixturevalue("mariadb")
        table = _unique("locks").replace("-", "_")
        url = my.url(_unique("leader"), extra=f"table={table}")
        mp = request.getfixturevalue("monkeypatch")
        mp.setenv("MYSQL_PWD", my.password)
        init_store(s3lect_bin, url, dict(os.environ))
        cols = my.sql(f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_NAME = "
                      f"'{table}' ORDER BY COLUMN_NAME").split()
        assert cols == ["name", "record", "updated_at", "version"], cols
        return kind, url, {}
    if kind == "redis":
        # redis-server with the store's ACL user; the library reads its
        # password from S3LECT_REDIS_PASSWORD.
        rd = request.getfixturevalue("redis")
        os.environ["S3LECT_REDIS_PASSWORD"] = rd.password
        request.addfinalizer(lambda: os.environ.pop("S3LECT_REDIS_PASSWORD", None))
        return kind, f"{rd.lock_prefix}{_unique('py')}", {}
    if kind == "gcs":
        # fake-gcs-server; an http:// loopback endpoint needs no token.
        gcs = request.getfixturevalue("fake_gcs")
        return kind, f"gs://{gcs.bucket}/{_unique('py')}", dict(endpoint=gcs.endpoint)
    if kind == "azure":
        # Azurite; the library reads the connection string (Shared Key and
        # the blob endpoint) from the environment when the elector opens.
        az = request.getfixturevalue("azurite")
        mp = request.getfixturevalue("monkeypatch")
        for k, v in az.env().items():
            mp.setenv(k, v)
        return kind, f"{az.lock_prefix()}{_unique('py')}.json", {}
    if kind == "etcd":
        etcd = request.getfixturevalue("etcd_server")
        return kind, f"{etcd.lock_prefix()}{_unique('py')}", {}
    if kind == "k8s":
        # A real kube-apiserver; the library reads the s3lect user's
        # kubeconfig from KUBECONFIG when the elector opens.
        kube = request.getfixturevalue("kube_apiserver")
        mp = request.getfixturevalue("monkeypatch")
        mp.setenv("KUBECONFIG", kube.env()["KUBECONFIG"])
        for k in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
            mp.delenv(k, raising=False)
        return kind, f"{kube.lock_prefix()}{_unique('py')}", {}
    moto = request.getfixturevalue("moto")
    zone, domain = request.getfixturevalue("r53_zone")
    url = f"route53://{zone}/{_unique('lock')}.{domain}"
    return kind, url, dict(endpoint=moto.endpoint, access_key_id=moto.access_key,
                           secret_access_key=moto.secret_key, region="us-east-1")


def leaders(els: List[s3lect.Elector]) -> List[s3lect.Elector]:
    return [e for e in els if e.is_leader]


def test_two_electors_one_leader_then_graceful_handover(electors, store):
    kind, lock, settings = store
    seen: Dict[str, List[Tuple[str, int]]] = {"a": [], "b": []}
    lost: Dict[str, List[Tuple[int, Any]]] = {"a": [], "b": []}
    mu = threading.Lock()

    def make(sid: str) -> s3lect.Elector:
        def on_change(leader_id: str, _addr: str, term: int) -> None:
            with mu:
                seen[sid].append((leader_id, term))

        def on_lose(term: int, reason: Any) -> None:
            with mu:
                lost[sid].append((term, reason))

        return electors(lock, server_id=sid, on_leader_change=on_change, on_lose=on_lose,
                        **TIMINGS, **settings)

    els = [make("a"), make("b")]
    if kind == "route53":
        # moto accepts a CREATE of a TXT name that already exists (Route 53
        # refuses it), so two electors creating the record at once would
        # both win there: b starts once a leads, and finds a's record.
        els[0].start()
        assert els[0].wait_for_leadership(timeout=30), f"a did not lead {lock}: {els[0].last_error}"
        els[1].start()
    else:
        for e in els:  # both race to create the lock item / row
            e.start()
    first = wait_until(lambda: leaders(els), 30, f"one of two electors to lead {lock}")
    assert len(first) == 1, f"two leaders at once: {[e.server_id for e in first]}"
    leader = first[0]
    follower = els[1] if leader is els[0] else els[0]
    term = leader.term
    assert term >= 1, f"leader term {term}"
    assert leader.leader_id == leader.server_id

    # The follower learns who leads (getter and callback), and stays follower
    # through several renewals and polls: never two leaders.
    wait_until(lambda: follower.leader_id == leader.server_id, 15,
               f"{follower.server_id} to see {leader.server_id} as leader")
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        now = leaders(els)
        assert now == [leader], f"leaders while nothing disturbed them: {[e.server_id for e in now]}"
        time.sleep(0.05)
    assert follower.term == term, f"follower sees term {follower.term}, leader has {term}"
    with mu:
        assert (leader.server_id, term) in seen[follower.server_id], \
            f"{follower.server_id}'s on_leader_change calls: {seen[follower.server_id]}"

    # Graceful stop: the lock is released and the follower takes over quickly.
    t0 = time.monotonic()
    leader.stop()
    assert not leader.is_leader
    with mu:
        assert lost[leader.server_id] == [(term, s3lect.LostReason.STOPPED)], lost
    assert follower.wait_for_leadership(timeout=TAKEOVER_BOUND_S + 4), \
        f"{follower.server_id} did not take over {lock}: {follower.last_error}"
    took = time.monotonic() - t0
    print(f"{kind}: {follower.server_id} took over {took:.2f} s after {leader.server_id} stopped")
    assert took < TAKEOVER_BOUND_S, f"takeover after a graceful stop took {took:.1f} s"
    assert follower.term == term + 1, f"term after handover {follower.term}, before {term}"
    assert follower.leader_id == follower.server_id
    status = follower.status()
    assert status.is_leader and status.leader_id == follower.server_id, status
    with mu:
        assert lost[follower.server_id] == [], lost


@pytest.mark.parametrize("kind", ["dynamodb", "postgres", "mysql"])
def test_missing_table_is_a_clear_fatal_error(electors, kind, request):
    """A lock on a table nobody made: wait_for_leadership gives up at once
    with FatalStoreError naming the table and `s3lect init-store`."""
    table = _unique("nosuch").replace("-", "_")
    if kind == "dynamodb":
        ddb = request.getfixturevalue("dynamodb_local")
        lock = f"dynamodb://{table}/leader"
        settings = dict(endpoint=ddb.endpoint, access_key_id=ddb.access_key,
                        secret_access_key=ddb.secret_key, region="us-east-1")
    elif kind == "mysql":
        my = request.getfixturevalue("mariadb")
        request.getfixturevalue("monkeypatch").setenv("MYSQL_PWD", my.password)
        lock = my.url("leader", extra=f"table={table}")
        settings = {}
    else:
        pg = request.getfixturevalue("postgres")
        lock = f"{pg.dsn}?key=leader&table={table}"
        settings = {}
    el = electors(lock, server_id="a", **TIMINGS, **settings)
    el.start()
    t0 = time.monotonic()
    with pytest.raises(s3lect.FatalStoreError) as info:
        el.wait_for_leadership(timeout=20)
    assert time.monotonic() - t0 < 15, "the missing table was reported only after a long wait"
    msg = str(info.value)
    assert table in msg and "init-store" in msg, msg
    assert not el.is_leader


def test_postgres_pool_waits_without_spinning(electors, postgres, s3lect_bin):
    """Twelve electors of one process on a PostgreSQL server that stops
    answering: four calls hold the pool's four connections until their
    deadline, the others wait for a free connection. Waiting must sleep (a
    condition variable on the monotonic clock), not spin: the process uses
    well under a second of CPU over four seconds."""
    table = _unique("pool").replace("-", "_")
    init_store(s3lect_bin, f"{postgres.dsn}?key=x&table={table}", dict(os.environ))
    els = [electors(f"{postgres.dsn}?key=k{i}&table={table}", server_id=f"n{i}", **TIMINGS).start()
           for i in range(12)]
    wait_until(lambda: all(e.is_leader for e in els), 30, "each elector to lead its own lock")
    postgres.pause()
    try:
        time.sleep(1.0)  # every elector is now inside a call or waiting for one
        t0, c0 = time.monotonic(), time.process_time()
        time.sleep(4.0)
        cpu = time.process_time() - c0
        wall = time.monotonic() - t0
    finally:
        postgres.resume()
    assert cpu < 1.0, f"{cpu:.2f} s of CPU in {wall:.1f} s while waiting for connections"
    wait_until(lambda: all(e.is_leader for e in els), 40, "every elector to lead again")

# SPDX-License-Identifier: Apache-2.0
"""s3lect.recipes against the real servers: the application's own write,
in the database that also holds the lock, commits only while its term holds
(docs/fencing.md, "Where the lock lives in a database the application also
writes").

For PostgreSQL, DynamoDB Local, etcd and Redis (the fixtures of
tests/conftest.py): two electors on one lock; the leader's recipe write
commits; another holder's is refused; once the leader is deposed (stopped
without releasing, as a crash, and the other elector takes over with a
newer term) its old term's write is refused and writes nothing; the new
leader's commits; after a release, no term's does. PostgreSQL also: while
the application's transaction holds the lock row FOR SHARE, the other
elector cannot take over, and does once it commits. DynamoDB: term 12 does
not match a record of term 123. etcd: a renewal between the check and the
Txn fails the Txn, and etcd_fenced_write reads again.

No client packages beyond the suite's: PostgreSQL through a minimal
protocol-3 client below (trust authentication, simple queries: a DB-API
cursor's execute/fetchone for s3lect.recipes.postgres_fence), DynamoDB
through the harness's boto3 client, etcd through the harness's HTTP
requests, Redis through the harness's RESP calls. Every wait is bounded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest

import s3lect
from s3lect import recipes
from pyutil import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.myclient import MyConn  # noqa: E402
from harness.pgclient import PgConn  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

KINDS = ["postgres", "mysql", "dynamodb", "etcd", "redis"]
#: FAST's timings (pyutil), spelled out: the takeover bounds below follow from them.
TIMINGS = dict(lease_timeout=3.0, renew_deadline=2.0, renew_interval=0.5,
               frequent_interval=0.5, infrequent_interval=1.0, request_timeout=5.0)
#: A deposed leader (stopped without a release) is taken over after its
#: lease, 3 s, and the follower's next poll: 15 s is generous.
TAKEOVER_BOUND_S = 15.0


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------------------
# One application per store: write(term, holder, value) through the recipe
# ---------------------------------------------------------------------------


class App:
    kind = ""
    lock = ""
    settings: Dict[str, Any] = {}

    def write(self, term: int, holder: str, value: str) -> None:
        raise NotImplementedError

    def read(self) -> Optional[str]:
        raise NotImplementedError

    def record(self) -> Optional[str]:
        """The lock record as the store holds it."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class PostgresApp(App):
    kind = "postgres"

    def __init__(self, pg: Any, s3lect_bin: Path) -> None:
        self.pg = pg
        self.table = _unique("locks").replace("-", "_")
        self.name = _unique("leader")
        self.app_table = _unique("app").replace("-", "_")
        self.lock = f"{pg.dsn}?key={self.name}&table={self.table}"
        r = subprocess.run([str(s3lect_bin), "init-store", self.lock], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, f"s3lect init-store failed: {r.stderr}{r.stdout}"
        pg.psql(f"CREATE TABLE {self.app_table} (k text PRIMARY KEY, v text NOT NULL)")
        self.conn = self.connect()

    def connect(self) -> PgConn:
        return PgConn(self.pg.host, self.pg.port, "s3lect", "s3lect")

    def begin_fenced(self, conn: PgConn, term: int, holder: str, value: str) -> None:
        """BEGIN, the fence, the application's write; the caller commits."""
        conn.query("BEGIN")
        cur = conn.cursor()
        try:
            recipes.postgres_fence(cur, self.table, self.name, term, holder)
            cur.execute(f"INSERT INTO {self.app_table} (k, v) VALUES ('state', %s) "
                        "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v", (value,))
        except BaseException:
            conn.query("ROLLBACK")
            raise

    def write(self, term: int, holder: str, value: str) -> None:
        self.begin_fenced(self.conn, term, holder, value)
        self.conn.query("COMMIT")

    def read(self) -> Optional[str]:
        out = self.pg.psql(f"SELECT v FROM {self.app_table} WHERE k = 'state'").strip()
        return out or None

    def record(self) -> Optional[str]:
        out = self.pg.psql(f"SELECT record FROM {self.table} WHERE name = '{self.name}'").strip()
        return out or None

    def close(self) -> None:
        self.conn.close()


class MySQLApp(App):
    """A MariaDB of the module (tests/harness/mariadb_server.py), the lock
    table made by init-store, the application's table beside it, reached
    through the minimal client harness/myclient.py."""

    kind = "mysql"

    def __init__(self, srv: Any, s3lect_bin: Path, monkeypatch: Any) -> None:
        self.srv = srv
        self.table = _unique("locks").replace("-", "_")
        self.name = _unique("leader")
        self.app_table = _unique("app").replace("-", "_")
        self.lock = srv.url(self.name, extra=f"table={self.table}")
        monkeypatch.setenv("MYSQL_PWD", srv.password)  # the electors' password
        env = {k: v for k, v in os.environ.items() if not k.startswith("S3LECT_")}
        r = subprocess.run([str(s3lect_bin), "init-store", self.lock], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=90, env=env)
        assert r.returncode == 0, f"s3lect init-store failed: {r.stderr}{r.stdout}"
        srv.sql(f"CREATE TABLE s3lect.{self.app_table} (k VARCHAR(20) PRIMARY KEY, "
                "v TEXT NOT NULL) ENGINE=InnoDB")
        self.conn = self.connect()

    def connect(self) -> MyConn:
        from harness.mariadb_server import DATABASE, USER
        return MyConn(self.srv.host, self.srv.port, USER, self.srv.password, DATABASE)

    def begin_fenced(self, conn: MyConn, term: int, holder: str, value: str) -> None:
        """BEGIN, the fence, the application's write; the caller commits."""
        conn.query("BEGIN")
        cur = conn.cursor()
        try:
            recipes.mysql_fence(cur, self.table, self.name, term, holder)
            cur.execute(f"INSERT INTO {self.app_table} (k, v) VALUES ('state', %s) "
                        "ON DUPLICATE KEY UPDATE v = VALUES(v)", (value,))
        except BaseException:
            conn.query("ROLLBACK")
            raise

    def write(self, term: int, holder: str, value: str) -> None:
        self.begin_fenced(self.conn, term, holder, value)
        self.conn.query("COMMIT")

    def read(self) -> Optional[str]:
        out = self.srv.sql(f"SELECT v FROM s3lect.{self.app_table} WHERE k = 'state'").strip()
        return out or None

    def record(self) -> Optional[str]:
        out = self.srv.sql(f"SELECT record FROM s3lect.{self.table} "
                           f"WHERE name = '{self.name}'").strip()
        return out or None

    def close(self) -> None:
        self.conn.close()


class DynamoApp(App):
    kind = "dynamodb"

    def __init__(self, ddb: Any) -> None:
        self.client = ddb.client()
        self.table = _unique("s3lect-py-fence")
        self.app_table = _unique("s3lect-py-app")
        ddb.create_table(self.table)  # partition key LockID, as init-store makes it
        ddb.create_table(self.app_table, pk="id")
        self.key = _unique("leader")
        self.lock = f"dynamodb://{self.table}/{self.key}"
        self.settings = dict(endpoint=ddb.endpoint, access_key_id=ddb.access_key,
                             secret_access_key=ddb.secret_key, region="us-east-1")

    def put_item(self, value: str) -> Dict[str, Any]:
        return {"Put": {"TableName": self.app_table,
                        "Item": {"id": {"S": "state"}, "v": {"S": value}}}}

    def write(self, term: int, holder: str, value: str) -> None:
        recipes.dynamodb_transact_write(self.client, [self.put_item(value)], self.table,
                                        self.key, term, holder)

    def read(self) -> Optional[str]:
        item = self.client.get_item(TableName=self.app_table, Key={"id": {"S": "state"}},
                                    ConsistentRead=True).get("Item")
        return item["v"]["S"] if item else None

    def record(self) -> Optional[str]:
        item = self.client.get_item(TableName=self.table, Key={"LockID": {"S": self.key}},
                                    ConsistentRead=True).get("Item")
        return item[recipes.DYNAMODB_RECORD_ATTR]["S"] if item else None


class EtcdApp(App):
    kind = "etcd"

    def __init__(self, etcd: Any) -> None:
        self.etcd = etcd
        name = _unique("py-fence")
        self.lock = f"{etcd.lock_prefix()}{name}"
        self.key = f"s3lect-test/{name}"  # the lock URL's path (harness.etcd.PREFIX)
        self.app_key = f"app/{name}/state"

    def post(self, path: str, body: Dict[str, Any]) -> Dict[str, Any]:
        status, ans = self.etcd.request(path, body)
        if status != 200:
            raise RuntimeError(f"etcd {path}: HTTP {status} {ans}")
        return ans

    def write(self, term: int, holder: str, value: str) -> None:
        recipes.etcd_fenced_write(self.post, self.key, term, holder, puts=[(self.app_key, value)])

    def read(self) -> Optional[str]:
        v, _ = self.etcd.get_key(self.app_key)
        return v.decode() if v is not None else None

    def record(self) -> Optional[str]:
        v, _ = self.etcd.get_key(self.key)
        return v.decode() if v is not None else None


class RespClient:
    """execute_command(*args) as redis-py has it, over the harness's RESP
    calls (as the server's admin user)."""

    def __init__(self, rd: Any) -> None:
        self.rd = rd

    def execute_command(self, *args: Any) -> Any:
        return self.rd.call(*args)


class RedisApp(App):
    kind = "redis"

    def __init__(self, rd: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rd = rd
        monkeypatch.setenv("S3LECT_REDIS_PASSWORD", rd.password)
        name = _unique("py-fence")
        self.lock = f"{rd.lock_prefix}{name}"
        self.key = f"s3lect/{name}"  # the lock URL's path (harness.redis_server.KEY_PREFIX)
        self.app_key = f"app:{name}"
        self.client = RespClient(rd)

    def write(self, term: int, holder: str, value: str) -> None:
        reply = recipes.redis_fenced_call(self.client, self.key, term, holder,
                                          ["SET", self.app_key, value], keys=[self.app_key])
        assert reply == "OK", reply

    def read(self) -> Optional[str]:
        v = self.rd.call("GET", self.app_key)
        return v.decode() if v is not None else None

    def record(self) -> Optional[str]:
        v = self.rd.call("HGET", self.key, "r")
        return v.decode() if v is not None else None


@pytest.fixture(scope="module")
def mariadb() -> Any:
    """A throwaway MariaDB for the mysql:// lock and the application's table."""
    from harness.mariadb_server import MariaDBServer
    from harness.servers import ServerStartError
    try:
        srv = MariaDBServer().start()
    except ServerStartError as e:
        pytest.fail(f"mysql: {e}", pytrace=False)
    yield srv
    srv.stop()


@pytest.fixture(params=KINDS)
def app(request: pytest.FixtureRequest) -> Any:
    kind = request.param
    if kind == "postgres":
        a: App = PostgresApp(request.getfixturevalue("postgres"),
                             request.getfixturevalue("s3lect_bin"))
    elif kind == "mysql":
        a = MySQLApp(request.getfixturevalue("mariadb"), request.getfixturevalue("s3lect_bin"),
                     request.getfixturevalue("monkeypatch"))
    elif kind == "dynamodb":
        a = DynamoApp(request.getfixturevalue("dynamodb_local"))
    elif kind == "etcd":
        a = EtcdApp(request.getfixturevalue("etcd_server"))
    else:
        a = RedisApp(request.getfixturevalue("redis"), request.getfixturevalue("monkeypatch"))
    yield a
    a.close()


def _fenced(app: App, term: int, holder: str, value: str) -> str:
    with pytest.raises(s3lect.FencedError) as ei:
        app.write(term, holder, value)
    return str(ei.value)


def _lead(electors: Any, app: App) -> Tuple[s3lect.Elector, s3lect.Elector]:
    """a leads, b follows: a starts first on the fresh lock."""
    a = electors(app.lock, server_id="a", **TIMINGS, **app.settings).start()
    assert a.wait_for_leadership(timeout=30), f"a did not lead {app.lock}: {a.last_error}"
    b = electors(app.lock, server_id="b", **TIMINGS, **app.settings).start()
    wait_until(lambda: b.leader_id == "a", 15, "b to see a as the leader")
    assert not b.is_leader
    return a, b


# ---------------------------------------------------------------------------
# Every store
# ---------------------------------------------------------------------------


def test_write_commits_only_while_its_term_holds(electors, app):
    a, b = _lead(electors, app)
    ta = a.term
    # The record is as the helpers read it (record.c's field order).
    rec = app.record()
    assert rec is not None and rec.startswith('{"leaderID":"a",'), rec
    assert f'"term":{ta},' in rec, rec

    app.write(ta, "a", "from-a")
    assert app.read() == "from-a"
    # Another holder of the same term, and a term the lock never had: refused.
    _fenced(app, ta, "b", "wrong-holder")
    _fenced(app, ta + 1, "a", "wrong-term")
    assert app.read() == "from-a"

    # a is deposed as by a crash (no release): b takes over with a newer term.
    t0 = time.monotonic()
    a.stop(release=False)
    assert b.wait_for_leadership(timeout=TAKEOVER_BOUND_S), \
        f"b did not take over {app.lock}: {b.last_error}"
    print(f"{app.kind}: b took over {time.monotonic() - t0:.2f} s after a stopped")
    tb = b.term
    assert tb > ta, (ta, tb)
    wait_until(lambda: f'"term":{tb},' in (app.record() or ""), 10, "the record of b's term")

    # The zombie's write of its old term is refused, and writes nothing.
    why = _fenced(app, ta, "a", "zombie")
    print(f"{app.kind}: refused: {why}")
    assert app.read() == "from-a"
    app.write(tb, "b", "from-b")
    assert app.read() == "from-b"
    _fenced(app, ta, "a", "zombie-again")
    assert app.read() == "from-b"

    # A released lock names no holder: no term's write commits.
    b.stop()
    wait_until(lambda: (app.record() or "").startswith('{"leaderID":"",'), 10,
               "the released record")
    _fenced(app, tb, "b", "after-release")
    assert app.read() == "from-b"


# ---------------------------------------------------------------------------
# PostgreSQL: FOR SHARE makes a takeover wait for the application's commit
# ---------------------------------------------------------------------------


def test_postgres_takeover_waits_for_the_fenced_transaction(electors, postgres, s3lect_bin):
    app = PostgresApp(postgres, s3lect_bin)
    try:
        a, b = _lead(electors, app)
        ta = a.term
        # a is deposed without a release; a transaction of its term checks the
        # lock (it still names term ta of a) and writes, then stays open.
        a.stop(release=False)
        conn = app.connect()
        try:
            app.begin_fenced(conn, ta, "a", "late-commit")
            opened = time.monotonic()
            # Without the share lock b would lead after a's lease (3 s) and a
            # poll; hold the transaction for more than twice that.
            hold_s = 2 * TIMINGS["lease_timeout"] + 2.0
            while time.monotonic() - opened < hold_s:
                assert not b.is_leader, \
                    f"b took over {time.monotonic() - opened:.2f} s into the open transaction"
                time.sleep(0.05)
            assert app.read() is None, "an uncommitted write is visible"
            conn.query("COMMIT")
            committed = time.monotonic()
        finally:
            conn.close()
        assert app.read() == "late-commit"
        # Now the takeover goes through, after the commit.
        assert b.wait_for_leadership(timeout=TAKEOVER_BOUND_S), \
            f"b did not take over once the transaction committed: {b.last_error}"
        print(f"postgres: b took over {time.monotonic() - committed:.2f} s after the commit "
              f"(the transaction was open {committed - opened:.1f} s)")
        assert b.term > ta
        # From then on, term ta's transactions are refused.
        _fenced(app, ta, "a", "too-late")
        assert app.read() == "late-commit"
        app.write(b.term, "b", "from-b")
        assert app.read() == "from-b"
    finally:
        app.close()


def test_postgres_fence_refuses_a_missing_row_and_a_bad_table(postgres, s3lect_bin):
    app = PostgresApp(postgres, s3lect_bin)
    try:
        # No elector ever wrote this lock: no row, fenced.
        _fenced(app, 1, "a", "nobody-leads")
        assert app.read() is None
        with pytest.raises(s3lect.ConfigError):
            recipes.postgres_fence(app.conn.cursor(), 'x"; DROP TABLE y; --', app.name, 1, "a")
        sql = recipes.postgres_fence_sql("myschema.Locks")
        assert sql.startswith('SELECT 1 FROM "myschema"."Locks" WHERE name = %s'), sql
        assert sql.endswith("FOR SHARE"), sql
    finally:
        app.close()


# ---------------------------------------------------------------------------
# MySQL: LOCK IN SHARE MODE makes a takeover wait for the application's commit
# ---------------------------------------------------------------------------


def test_mysql_takeover_waits_for_the_fenced_transaction(electors, mariadb, s3lect_bin,
                                                         monkeypatch):
    app = MySQLApp(mariadb, s3lect_bin, monkeypatch)
    try:
        a, b = _lead(electors, app)
        ta = a.term
        # a is deposed without a release; a transaction of its term checks the
        # lock (it still names term ta of a) and writes, then stays open.
        a.stop(release=False)
        conn = app.connect()
        try:
            app.begin_fenced(conn, ta, "a", "late-commit")
            opened = time.monotonic()
            # Without the share lock b would lead after a's lease (3 s) and a
            # poll; hold the transaction for more than twice that (b's UPDATE
            # waits for the row lock, times out after innodb_lock_wait_timeout
            # and is retried).
            hold_s = 2 * TIMINGS["lease_timeout"] + 2.0
            while time.monotonic() - opened < hold_s:
                assert not b.is_leader, \
                    f"b took over {time.monotonic() - opened:.2f} s into the open transaction"
                time.sleep(0.05)
            assert app.read() is None, "an uncommitted write is visible"
            conn.query("COMMIT")
            committed = time.monotonic()
        finally:
            conn.close()
        assert app.read() == "late-commit"
        assert b.wait_for_leadership(timeout=TAKEOVER_BOUND_S), \
            f"b did not take over once the transaction committed: {b.last_error}"
        print(f"mysql: b took over {time.monotonic() - committed:.2f} s after the commit "
              f"(the transaction was open {committed - opened:.1f} s)")
        assert b.term > ta
        _fenced(app, ta, "a", "too-late")
        assert app.read() == "late-commit"
        app.write(b.term, "b", "from-b")
        assert app.read() == "from-b"
    finally:
        app.close()


def test_mysql_fence_refuses_a_missing_row_and_a_bad_table(mariadb, s3lect_bin, monkeypatch):
    app = MySQLApp(mariadb, s3lect_bin, monkeypatch)
    try:
        _fenced(app, 1, "a", "nobody-leads")
        assert app.read() is None
        with pytest.raises(s3lect.ConfigError):
            recipes.mysql_fence(app.conn.cursor(), "x`; DROP TABLE y; --", app.name, 1, "a")
        sql = recipes.mysql_fence_sql("Locks_2")
        assert sql.startswith("SELECT 1 FROM `Locks_2` WHERE name = %s"), sql
        assert sql.endswith("LOCK IN SHARE MODE"), sql
    finally:
        app.close()


# ---------------------------------------------------------------------------
# DynamoDB: the condition's exact pieces
# ---------------------------------------------------------------------------


def test_dynamodb_condition_tells_term_12_from_123_and_holders_apart(dynamodb_local):
    app = DynamoApp(dynamodb_local)
    # A record as record.c writes it, put by hand.
    record = ('{"leaderID":"h","leaderAddr":"","lastUpdated":"2026-01-01T00:00:00.000Z",'
              '"term":123,"leaseMs":3000,"incarnation":"i"}')
    app.client.put_item(TableName=app.table, Item={
        "LockID": {"S": app.key}, recipes.DYNAMODB_RECORD_ATTR: {"S": record},
        "s3lectVersion": {"S": "v1"}})
    for term, holder in ((12, "h"), (1, "h"), (23, "h"), (123, "hx"), (123, "x")):
        _fenced(app, term, holder, f"{term}-{holder}")
        assert app.read() is None, (term, holder)
    app.write(123, "h", "ok")
    assert app.read() == "ok"
    # A holder with a quote is matched escaped, as the record has it.
    record_q = record.replace('"leaderID":"h"', '"leaderID":"h\\"q"')
    app.client.put_item(TableName=app.table, Item={
        "LockID": {"S": app.key}, recipes.DYNAMODB_RECORD_ATTR: {"S": record_q},
        "s3lectVersion": {"S": "v2"}})
    _fenced(app, 123, "h", "unescaped")
    app.write(123, 'h"q', "quoted")
    assert app.read() == "quoted"
    # The item's sort key, when the lock URL names one.
    cc = recipes.dynamodb_condition_check("t", "k", 5, "n", partition_key="pk", sort_key="sk",
                                          sort_value="sv")["ConditionCheck"]
    assert cc["Key"] == {"pk": {"S": "k"}, "sk": {"S": "sv"}}
    assert cc["ExpressionAttributeValues"][":s3lectTerm"] == {"S": '"term":5,'}


# ---------------------------------------------------------------------------
# etcd: check, then a Txn on the lock's mod_revision
# ---------------------------------------------------------------------------


def test_etcd_txn_fails_after_a_renewal_and_the_helper_reads_again(electors, etcd_server):
    app = EtcdApp(etcd_server)
    el = electors(app.lock, server_id="a", **TIMINGS).start()
    assert el.wait_for_leadership(timeout=30), el.last_error
    term = el.term
    rev = recipes.etcd_check_lock(app.post("/v3/kv/range", recipes.etcd_range_request(app.key)),
                                  term, "a")
    # The leader renews (every 0.5 s): the lock's mod_revision moves on.
    wait_until(lambda: etcd_server.get_key(app.key)[1] > rev, 10, "a renewal of the lock")
    ans = app.post("/v3/kv/txn", recipes.etcd_fenced_txn(app.key, rev, [(app.app_key, "stale")]))
    assert not ans.get("succeeded"), ans
    assert app.read() is None
    # The helper reads the renewed record (same term and holder) and commits.
    app.write(term, "a", "fresh")
    assert app.read() == "fresh"


# ---------------------------------------------------------------------------
# Redis: the command's own reply comes back
# ---------------------------------------------------------------------------


def test_redis_fenced_call_returns_the_commands_reply(electors, redis, monkeypatch):
    app = RedisApp(redis, monkeypatch)
    el = electors(app.lock, server_id="a", **TIMINGS).start()
    assert el.wait_for_leadership(timeout=30), el.last_error
    term = el.term
    call = recipes.redis_fenced_call
    assert call(app.client, app.key, term, "a", ["GET", app.app_key], keys=[app.app_key]) is None
    assert call(app.client, app.key, term, "a", ["INCR", app.app_key], keys=[app.app_key]) == 1
    assert call(app.client, app.key, term, "a", ["INCRBY", app.app_key, 4],
                keys=[app.app_key]) == 5
    # A lock key with no s3lect record: fenced, nothing run.
    with pytest.raises(s3lect.FencedError, match="no lock record"):
        call(app.client, app.key + "-none", term, "a", ["INCR", app.app_key], keys=[app.app_key])
    assert app.read() == "5"


def test_helpers_refuse_what_names_no_leadership():
    """Arguments that cannot name a leadership are refused before anything
    is sent (no server: nothing to send to)."""
    for term, holder in ((True, "a"), (-1, "a"), (2**53, "a"), ("7", "a"), (7, ""), (7, None)):
        with pytest.raises(s3lect.ConfigError):
            recipes.dynamodb_condition_check("t", "k", term, holder)
    with pytest.raises(s3lect.ConfigError):
        recipes.etcd_fenced_txn("lock", 5)  # nothing to write
    with pytest.raises(s3lect.ConfigError):
        recipes.redis_fenced_call(object(), "lock", 7, "a", [])
    # The record check itself: exact term and holder, a released record matches nobody.
    rec = '{"leaderID":"a","leaderAddr":"","lastUpdated":"x","term":123,"leaseMs":1}'
    assert recipes.record_holds(rec, 123, "a")
    assert not recipes.record_holds(rec, 12, "a")
    assert not recipes.record_holds(rec, 123, "b")
    assert not recipes.record_holds(rec.replace('"a"', '""', 1), 123, "a")
    assert not recipes.record_holds("not json", 123, "a")
    assert not recipes.record_holds(None, 123, "a")

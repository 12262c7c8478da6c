# SPDX-License-Identifier: Apache-2.0
"""The mysql:// store beyond the shared store tests (test_stores_cli.py runs
election, kill -9, SIGTERM handover, peer mode, compare-and-set,
check-store, restart and a paused server on it): init-store's table, the
missing table, database and grants, the password sources (URL,
password_env=, MYSQL_PWD, ~/.my.cnf), TLS modes against a server with
certificates from harness/pki.py and one without, connections killed by
the server, a read-only server, the server's clock, timeout=, a paused
server with several electors, and no password in any output.

Every server is Debian's MariaDB started by tests/harness/mariadb_server.py
on a free 127.0.0.1 port (its user `s3lect`, password in MYSQL_PWD unless a
test says otherwise).
"""

from __future__ import annotations

import json
import os
import secrets
import time
import urllib.parse
from pathlib import Path

import pytest

from harness.cli import FAST, only_leader, run, started_lines, status_json, wait_for
from harness.mariadb_server import DATABASE, USER, MariaDBServer
from storeutil import _base

pytestmark = pytest.mark.second_session

LEASE_S = 3.0


@pytest.fixture(scope="module")
def mdb():
    srv = MariaDBServer().start()
    yield srv
    srv.stop()


def _env(srv: MariaDBServer | None = None, **add: str) -> dict[str, str]:
    """The nodes' environment: no MYSQL_* of the machine, HOME as it is
    (tests that need their own ~/.my.cnf give HOME), the server's MYSQL_PWD."""
    env = {k: v for k, v in _base().items() if not k.startswith("MYSQL")}
    if srv is not None:
        env.update(srv.env())
    env.update(add)
    return env


def _one_line(r, *wants: str) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, (r.returncode, r.stdout, r.stderr)
    for w in wants:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def ready(mdb, s3lect_bin) -> MariaDBServer:
    """The server with the default table made."""
    r = run([str(s3lect_bin), "init-store", mdb.url("x")], _env(mdb))
    assert r.returncode == 0, r.stderr
    return mdb


# ---- init-store and what is missing ----

def test_init_store_makes_the_table_once(mdb, s3lect_bin):
    table = f"init_{secrets.token_hex(3)}"
    url = mdb.url("k", extra=f"table={table}")
    for _ in range(2):
        r = run([str(s3lect_bin), "init-store", url], _env(mdb))
        assert r.returncode == 0, r.stderr
        assert f"table {table} is ready in MySQL database '{DATABASE}'" in r.stdout + r.stderr
    ddl = mdb.sql(f"SHOW CREATE TABLE {DATABASE}.{table}")
    for want in ("`name` varbinary(1536) NOT NULL", "`record` mediumtext", "utf8mb4_bin",
                 "`version` varchar(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL",
                 "`updated_at` datetime(6) NOT NULL", "PRIMARY KEY (`name`)", "ENGINE=InnoDB"):
        assert want in ddl, (want, ddl)
    # Lock names are byte strings: case and trailing spaces make other locks.
    for key in ("Lock", "lock", "lock%20"):
        r = run([str(s3lect_bin), "run", "--lock", mdb.url(key, extra=f"table={table}"), "--id",
                 "a", *FAST, "--", "true"], _env(mdb), timeout=60)
        assert r.returncode == 0, r.stderr
    names = sorted(mdb.sql(f"SELECT HEX(name) FROM {DATABASE}.{table}").split())
    assert names == sorted(x.encode().hex().upper() for x in ("Lock", "lock", "lock ")), names


def test_missing_table_and_database_are_one_line(mdb, s3lect_bin):
    r = run([str(s3lect_bin), "status", mdb.url("k", extra="table=no_such_table")], _env(mdb))
    assert r.returncode == 1
    _one_line(r, "table no_such_table does not exist", "s3lect init-store")
    url = f"mysql://{USER}@127.0.0.1:{mdb.port}/no_such_db?key=k"
    r = run([str(s3lect_bin), "status", url], _env(mdb))
    assert r.returncode == 1
    _one_line(r, "no_such_db")


def test_missing_grants_are_named(mdb, s3lect_bin, tmp_path):
    """A user that may only read: reads answer, the first write is refused
    with the grants it needs (auth), and init-store says it needs CREATE."""
    pw = secrets.token_hex(8)
    mdb.sql(f"CREATE USER IF NOT EXISTS 'reader'@'%' IDENTIFIED BY '{pw}'; "
            f"GRANT SELECT ON {DATABASE}.* TO 'reader'@'%'")
    r = run([str(s3lect_bin), "init-store", mdb.url("x")], _env(mdb))
    assert r.returncode == 0, r.stderr
    url = f"mysql://reader@127.0.0.1:{mdb.port}/{DATABASE}?key=ro"
    env = _env(MYSQL_PWD=pw)
    r = run([str(s3lect_bin), "status", url], env)
    assert r.returncode == 3, r.stderr  # no record yet: the read worked
    from harness.cli import Node
    node = Node(s3lect_bin, tmp_path, url, "a", env)
    try:
        line = node.wait_log("refused INSERT on table s3lect_locks", 30)
        assert "GRANT SELECT, INSERT, UPDATE ON s3lect_locks" in line, line
        assert not node.leading()
    finally:
        node.stop()
    r = run([str(s3lect_bin), "init-store", f"{url[:-len('?key=ro')]}?key=ro&table=other"], env)
    assert r.returncode == 1
    _one_line(r, "refused CREATE TABLE other", "GRANT CREATE")


# ---- credentials ----

def test_password_sources_in_order(mdb, s3lect_bin, tmp_path):
    """The URL's password, password_env=, MYSQL_PWD, then ~/.my.cnf's
    [client] password; a wrong password is one line naming the user, never
    the password."""
    pw = "p@ss:w/rd#1 'q\"" + secrets.token_hex(4)
    sql_pw = pw.replace("\\", "\\\\").replace("'", "\\'")
    mdb.sql(f"CREATE USER IF NOT EXISTS 'pwuser'@'%' IDENTIFIED BY '{sql_pw}'; "
            f"GRANT SELECT, INSERT, UPDATE ON {DATABASE}.* TO 'pwuser'@'%'")
    r = run([str(s3lect_bin), "init-store", mdb.url("x")], _env(mdb))
    assert r.returncode == 0, r.stderr
    home = tmp_path / "home"
    home.mkdir()
    base = f"127.0.0.1:{mdb.port}/{DATABASE}?key=pw"
    plain = f"mysql://pwuser@{base}"
    ok = (0, 3)

    def status(url, **env):
        return run([str(s3lect_bin), "status", url], _env(HOME=str(home), **env))

    # 1. In the URL (percent-encoded), over a wrong MYSQL_PWD.
    r = status(f"mysql://pwuser:{urllib.parse.quote(pw, safe='')}@{base}", MYSQL_PWD="wrong")
    assert r.returncode in ok, r.stderr
    # 2. password_env= over a wrong MYSQL_PWD; unset: one line naming it.
    r = status(f"{plain}&password_env=APP_DB_PW", APP_DB_PW=pw, MYSQL_PWD="wrong")
    assert r.returncode in ok, r.stderr
    r = status(f"{plain}&password_env=APP_DB_PW", MYSQL_PWD=pw)
    assert r.returncode == 2
    _one_line(r, "password_env=APP_DB_PW names a variable that is not set")
    # 3. MYSQL_PWD over ~/.my.cnf.
    cnf = home / ".my.cnf"
    cnf.write_text("[client]\npassword = wrong\n")
    cnf.chmod(0o600)
    r = status(plain, MYSQL_PWD=pw)
    assert r.returncode in ok, r.stderr
    # 4. ~/.my.cnf: [client]'s password (quoted, with escapes), not another group's.
    esc = pw.replace("\\", "\\\\").replace('"', '\\"')
    cnf.write_text(f"# s3lect test\n[mysqld]\npassword=nope\n[client]\nuser=ignored\n"
                   f'password = "{esc}"\n[mysqldump]\npassword=nope2\n')
    r = status(plain)
    assert r.returncode in ok, r.stderr
    # A world-writable option file is ignored, as mysql does: no password.
    cnf.chmod(0o666)
    r = status(plain)
    assert r.returncode == 1
    line = _one_line(r, "refused the login", "pwuser")
    cnf.chmod(0o600)
    # A wrong password: one line, the user named, the password nowhere.
    r = status(f"mysql://pwuser:hunter2-{secrets.token_hex(3)}@{base}")
    assert r.returncode == 1
    line = _one_line(r, "refused the login", "Access denied for user 'pwuser'")
    assert "hunter2" not in line and pw not in line


def test_password_never_shown(ready, s3lect_bin, tmp_path):
    """A password in the URL appears in no log line, status output, error
    or metrics label: *** in its place."""
    srv = ready
    secret = srv.password
    url = f"mysql://{USER}:{secret}@127.0.0.1:{srv.port}/{DATABASE}?key=shown"
    env = _env()  # no MYSQL_PWD: the URL's password is the one
    from harness.cli import Node
    node = Node(s3lect_bin, tmp_path, url, "a", env, metrics=True)
    try:
        wait_for(node.leading, 30, "the node to lead")
        metrics = wait_for(lambda: _try(node.metrics_text), 10, "metrics")
        r1 = run([str(s3lect_bin), "status", url, "--json"], env)
        r2 = run([str(s3lect_bin), "status", url.replace("key=shown", "key=x&table=nope")], env)
        assert r1.returncode == 0 and r2.returncode == 1
        for text in (node.text(), metrics, r1.stdout, r1.stderr, r2.stderr):
            assert secret not in text, text
        assert f"mysql://{USER}@127.0.0.1:{srv.port}/{DATABASE}?key=shown&table=s3lect_locks" \
            in metrics, metrics
        assert "table nope does not exist" in r2.stderr, r2.stderr
    finally:
        node.stop()


def _try(f):
    try:
        return f()
    except OSError:
        return None


# ---- TLS ----

@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """A MariaDB with TLS (a certificate for 127.0.0.1 from a CA made here),
    whose user `s3lect` must use it (REQUIRE SSL); a second CA that signed
    nothing."""
    from harness.pki import issue, make_ca
    d = tmp_path_factory.mktemp("mytls")
    for ca in ("ca", "other-ca"):
        make_ca(d, ca, key="rsa")
    issue(d, "server", "ca", san="IP:127.0.0.1", subject="/CN=127.0.0.1", key="rsa")
    srv = MariaDBServer(tls=(d / "ca.pem", d / "server.pem", d / "server.key")).start()
    try:
        assert srv.sql("SELECT @@have_ssl").strip() == "YES", srv.log_text()
        srv.sql(f"ALTER USER '{USER}'@'%' REQUIRE SSL")
        yield srv, d
    finally:
        srv.stop()


def test_tls_modes(tls_server, s3lect_bin):
    srv, d = tls_server
    env = _env(srv)
    good = srv.url("tls", extra=f"tls=verify-full&ca={d / 'ca.pem'}")
    r = run([str(s3lect_bin), "init-store", good], env)
    assert r.returncode == 0, r.stderr
    from harness.cli import CHECK_STORE_PASSED, check_store_verdict
    r = run([str(s3lect_bin), "check-store", good, "--racers", "4", "--rounds", "2"], env,
            timeout=120)
    assert r.returncode == 0 and check_store_verdict(r.stdout) == CHECK_STORE_PASSED, r.stdout
    # The user may only log in over TLS, so these logging in is TLS.
    for mode in ("preferred", "required", f"verify-ca&ca={d / 'ca.pem'}"):
        r = run([str(s3lect_bin), "status", srv.url("tls", extra=f"tls={mode}")], env)
        assert r.returncode in (0, 3), (mode, r.stderr)
    # verify-ca does not check the name; verify-full does (localhost is not in the certificate).
    r = run([str(s3lect_bin), "status",
             srv.url("tls", host="localhost", extra=f"tls=verify-ca&ca={d / 'ca.pem'}")], env)
    assert r.returncode in (0, 3), r.stderr
    r = run([str(s3lect_bin), "status",
             srv.url("tls", host="localhost", extra=f"tls=verify-full&ca={d / 'ca.pem'}")], env)
    assert r.returncode == 1
    _one_line(r, "cannot use MySQL", "fix the lock URL")
    # Another CA: refused, one line, a configuration error.
    r = run([str(s3lect_bin), "status",
             srv.url("tls", extra=f"tls=verify-full&ca={d / 'other-ca.pem'}")], env)
    assert r.returncode == 1
    _one_line(r, "cannot use MySQL", "fix the lock URL")
    # Plain TCP: the server refuses the user (REQUIRE SSL).
    r = run([str(s3lect_bin), "status", srv.url("tls", extra="tls=disable")], env)
    assert r.returncode == 1
    _one_line(r, "refused the login")
    # A CA file that is not there.
    r = run([str(s3lect_bin), "status", srv.url("tls", extra="tls=verify-full&ca=/nonexistent")],
            env)
    assert r.returncode in (1, 2)
    _one_line(r, "ca=/nonexistent cannot be read")


def test_tls_required_against_a_server_without_tls(mdb, s3lect_bin):
    """libmariadb would go on in plain TCP; the store checks the session is
    encrypted. The default (preferred) works without TLS."""
    env = _env(mdb)
    r = run([str(s3lect_bin), "status", mdb.url("plain", extra="tls=required")], env)
    assert r.returncode == 1
    _one_line(r, "did not start TLS, which tls=required requires")
    r = run([str(s3lect_bin), "status", mdb.url("plain")], env)
    assert r.returncode in (0, 3), r.stderr


# ---- the server misbehaves ----

def test_killed_connections_are_made_again(ready, cluster):
    """The server kills every connection of the store's user (KILL
    CONNECTION) three times: the leader's next statement fails, the
    connection is made again, leadership and its term are kept."""
    nodes = cluster(ready.url(f"killed-{secrets.token_hex(3)}"), _env(ready), n=1)
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    term = leader.terms()[-1]
    killed = 0
    for _ in range(3):
        killed += ready.kill_connections()
        time.sleep(1.2)
    assert killed >= 3, killed
    time.sleep(LEASE_S)
    assert leader.leading() and leader.terms()[-1] == term, leader.text()
    assert ready.connection_ids(), "the node has connected again"


def test_read_only_server_stops_the_leader_with_a_clear_error(ready, cluster, s3lect_bin,
                                                              tmp_path):
    url = ready.url(f"ro-{secrets.token_hex(3)}")
    env = _env(ready)
    nodes = cluster(url, env, n=2)
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    ready.set_read_only(True)
    try:
        wait_for(lambda: not any(n.leading() for n in nodes), LEASE_S + 5,
                 "the leader to stop (its renewals are refused)")
        line = leader.wait_log("is read-only", 10)
        assert "point the lock URL at the primary" in line, line
        time.sleep(LEASE_S + 1)
        assert not any(n.leading() for n in nodes), "nobody leads on a read-only server"
        # Reads work: status answers.
        rc, st = status_json(s3lect_bin, url, env)
        assert st["leaderID"] == leader.id
    finally:
        ready.set_read_only(False)
    wait_for(lambda: only_leader(nodes), 30 + LEASE_S, "a leader once the server takes writes")
    terms = [t for _, t in started_lines(tmp_path / "cmd.log")]
    assert terms == sorted(terms), terms


def test_paused_server_with_many_electors_in_one_process_then_back(ready, cluster):
    """SIGSTOP of mariadbd: the leader stops its command by its renew
    deadline (no two leaders meanwhile), and a leader is back within a bound
    once it resumes (connections cut short at their deadlines are dropped)."""
    nodes = cluster(ready.url(f"pause-{secrets.token_hex(3)}"), _env(ready), n=3)
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    wait_for(leader.cmd_wrote_start, 10, "its command")
    ready.pause()
    try:
        t0 = time.monotonic()
        wait_for(lambda: not leader.leading(), LEASE_S + 3, "the leader to stop its command")
        took = time.monotonic() - t0
        assert took <= LEASE_S + 3, took
        end = time.monotonic() + 4
        while time.monotonic() < end:
            assert sum(n.leading() for n in nodes) <= 1
            time.sleep(0.2)
    finally:
        ready.resume()
    t1 = time.monotonic()
    wait_for(lambda: only_leader(nodes), 30, "a leader after the server came back")
    print(f"mysql pause: leader stopped {took:.2f} s after SIGSTOP, a leader "
          f"{time.monotonic() - t1:.2f} s after SIGCONT")


def test_url_timeout_bounds_a_call_to_a_paused_server(ready, s3lect_bin):
    url = ready.url("slow", extra="timeout=1s")
    env = _env(ready)
    r = run([str(s3lect_bin), "status", url], env)
    assert r.returncode in (0, 3), r.stderr  # a connection to reuse
    ready.pause()
    try:
        t0 = time.monotonic()
        r = run([str(s3lect_bin), "status", url], env, timeout=60)
        took = time.monotonic() - t0
    finally:
        ready.resume()
    assert r.returncode == 1, r.stderr
    assert "timed out" in r.stderr, r.stderr
    assert took < 6, f"status took {took:.1f} s with timeout=1s"


# ---- the server's clock ----

def test_takeover_counts_from_the_write_by_the_servers_clock(ready, cluster, s3lect_bin):
    """The follower judges the dead leader's record by the server's clock
    (UTC_TIMESTAMP(6) against the server-stamped updated_at): started 5 s
    after the kill, it takes over about L after the leader's last write, not
    L after its own first read; status reports the age by the store's
    clock."""
    lease, renew, wait = 8.0, 1.0, 5.0
    timing = ["--lease-timeout", "8s", "--renew-interval", "1s", "--renew-deadline", "3s",
              "--frequent-interval", "500ms", "--infrequent-interval", "1s",
              "--max-clock-skew", "0"]
    env = _env(ready)
    lock = ready.url(f"clock-{time.monotonic_ns()}")
    [a] = cluster(lock, env, n=1, extra=timing)
    wait_for(a.leading, 30, "a to lead")
    time.sleep(2 * renew)
    r = run([str(s3lect_bin), "status", lock, "--json"], env)
    st = json.loads(r.stdout)
    assert st.get("ageClock") == "store", st
    # The row's stamp is the server's: updated_at is within a renewal of UTC_TIMESTAMP(6).
    age_ms = float(ready.sql(
        "SELECT TIMESTAMPDIFF(MICROSECOND, updated_at, UTC_TIMESTAMP(6)) / 1000 "
        f"FROM {DATABASE}.s3lect_locks WHERE name = '{lock.rsplit('=', 1)[1]}'").strip())
    assert 0 <= age_ms <= renew * 1000 + 500, age_ms
    a.kill9()
    killed = time.monotonic()
    time.sleep(wait)
    b = cluster(lock, env, n=1, extra=timing)[-1]
    wait_for(lambda: "acquired leadership" in b.text(), wait + lease + 15, "b to take over")
    took = time.monotonic() - killed
    assert took >= lease - renew - 0.5, (took, b.text())
    assert took <= lease + 2.0, (f"took over {took:.2f} s after the kill: counted from the first "
                                 f"read ({wait + lease:g} s), not from the write", b.text())


# ---- the URL ----

@pytest.mark.parametrize("url,want", [
    ("mysql://127.0.0.1/db?key=k", "names no user"),
    ("mysql://u@127.0.0.1/db", "add ?key=NAME"),
    ("mysql://u@127.0.0.1?key=k", "names no database"),
    ("mysql://u@127.0.0.1/db?key=k&table=a-b", "letters, digits and '_'"),
    ("mysql://u@127.0.0.1/db?key=k&tls=yes", "tls=yes is not a mode"),
    ("mysql://u@127.0.0.1/db?key=k&tls=verify-ca", "needs ca=FILE"),
    ("mysql://u@127.0.0.1/db?key=k&timeout=10", "is not a duration"),
    ("mysql://u@127.0.0.1/db?key=k&sslmode=require", "unknown parameter 'sslmode'"),
    ("mysql://u@127.0.0.1/db?key=k&auth=aws-iam&tls=disable", "auth=aws-iam needs TLS"),
    ("mysql://u:hunter2@127.0.0.1/db?key=k&auth=aws-iam", "remove the password"),
])
def test_bad_urls_are_one_clear_line(s3lect_bin, clean_env, url, want):
    for cmd in (["status", url], ["run", "--lock", url, "--", "true"], ["init-store", url]):
        r = run([str(s3lect_bin), *cmd], clean_env)
        assert r.returncode == 2, (cmd, r.returncode, r.stderr)
        line = _one_line(r, want)
        assert "hunter2" not in line

# SPDX-License-Identifier: Apache-2.0
"""IAM database authentication (?auth=aws-iam) of the postgres:// and
mysql:// stores, end to end through the CLI against loopback stand-ins for
Amazon RDS (tests/harness/rds_iam.py: test doubles, labelled as such): the
server asks for a cleartext password over TLS as RDS does for IAM users
(PostgreSQL: AuthenticationCleartextPassword; MySQL: an AuthSwitchRequest to
mysql_clear_password), verifies the
token it gets with its own SigV4 code against the throwaway secret key, and
refuses the login with a message that says whether the token verified. So
each test checks what the server saw (a valid token for the right host,
port, user and region, over TLS) and what s3lect said (the auth failure in
one clear line, never the token, the secret or the session token).

The AWS credentials are throwaway values in the environment, or a
credential_process that hands out new short-lived keys on every run (the
refresh test: one `s3lect run` process, the same token reused while its keys
last, a new one after the chain refreshed them).
"""

from __future__ import annotations

import ctypes
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from harness.cli import FAST, run  # noqa: E402
from harness.credtest import no_secrets  # noqa: E402
from harness.pki import make_ca  # noqa: E402
from harness.rds_iam import FakeRdsMysql, FakeRdsPostgres  # noqa: E402

REGION = "us-west-2"
AKID = "AKIDRDSTHROWAWAY"
SECRET = "tsecret-" + secrets.token_hex(8)
SESSION = "tsession-" + secrets.token_hex(8)


def _loads(lib: str) -> bool:
    try:
        ctypes.CDLL(lib)
        return True
    except OSError:
        return False


needs_libpq = pytest.mark.skipif(not _loads("libpq.so.5"), reason="libpq.so.5 is not installed "
                                 "(libpq5): postgres:// locks cannot connect without it")
needs_libmariadb = pytest.mark.skipif(not _loads("libmariadb.so.3"), reason="libmariadb.so.3 is "
                                      "not installed (libmariadb3): mysql:// locks cannot "
                                      "connect without it")
pytestmark = needs_libpq


def _env(home: Path, **add: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "PG", "S3LECT_")) or k == "S3LECT_NEW_LOCK_WAIT"}
    env.update(HOME=str(home), AWS_EC2_METADATA_DISABLED="true",
               AWS_CONFIG_FILE=str(home / "no-config"),
               AWS_SHARED_CREDENTIALS_FILE=str(home / "no-credentials"))
    env.update(add)
    return env


def _keys_env(home: Path, **add: str) -> dict[str, str]:
    return _env(home, AWS_ACCESS_KEY_ID=AKID, AWS_SECRET_ACCESS_KEY=SECRET,
                AWS_SESSION_TOKEN=SESSION, AWS_REGION=REGION, **add)


@pytest.fixture
def rds(tmp_path):
    srv = FakeRdsPostgres(tmp_path / "rds", {AKID: SECRET}, REGION).start()
    yield srv
    srv.stop()


def _lock(srv: FakeRdsPostgres, extra: str = "", user: str = "iam_user") -> str:
    return f"postgres://{user}@127.0.0.1:{srv.port}/app?key=leader&auth=aws-iam{extra}"


def _outputs_clean(r: subprocess.CompletedProcess, srv: FakeRdsPostgres) -> None:
    tokens = [a.token for a in srv.snapshot()]
    sigs = [t.rsplit("X-Amz-Signature=", 1)[-1] for t in tokens if "X-Amz-Signature=" in t]
    no_secrets([r.stdout, r.stderr], [SECRET, SESSION, *tokens, *sigs])
    assert "X-Amz-" not in r.stdout + r.stderr


def test_token_verified_over_tls_and_refusal_reported_cleanly(rds, s3lect_bin, tmp_path):
    r = run([str(s3lect_bin), "status", _lock(rds)], _keys_env(tmp_path), timeout=60)
    seen = rds.snapshot()
    assert seen, f"the server saw no login; s3lect said: {r.stderr}"
    for a in seen:
        assert a.verified, f"the server could not verify the token: {a.why}"
        assert a.tls, "the token was sent without TLS"
        assert (a.user, a.database) == ("iam_user", "app")
        assert a.access_key_id == AKID and a.session_token == SESSION
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "refused the IAM token" in err and "rds-db:connect" in err and "rds_iam" in err, err
    assert "test server: token verified" in err, err
    _outputs_clean(r, rds)


def test_region_parameter_wins(tmp_path, s3lect_bin):
    srv = FakeRdsPostgres(tmp_path / "rds", {AKID: SECRET}, "eu-west-1").start()
    try:
        r = run([str(s3lect_bin), "status", _lock(srv, "&region=eu-west-1")],
                _keys_env(tmp_path), timeout=60)
        seen = srv.snapshot()
        assert seen and all(a.verified for a in seen), [a.why for a in seen] or r.stderr
        # Without it the token is signed for AWS_REGION, which this server refuses.
        r2 = run([str(s3lect_bin), "status", _lock(srv)], _keys_env(tmp_path), timeout=60)
        later = srv.snapshot()[len(seen):]
        assert later and not any(a.verified for a in later)
        assert "credential scope" in later[0].why
        assert "token NOT verified" in r2.stderr
        _outputs_clean(r, srv)
        _outputs_clean(r2, srv)
    finally:
        srv.stop()


def test_verify_full_checks_the_server_before_sending_the_token(rds, s3lect_bin, tmp_path):
    ok = _lock(rds, f"&sslmode=verify-full&sslrootcert={rds.ca}")
    r = run([str(s3lect_bin), "status", ok], _keys_env(tmp_path), timeout=60)
    seen = rds.snapshot()
    assert seen and all(a.verified and a.tls for a in seen), r.stderr
    # Another CA: the server's certificate is refused, no token leaves.
    make_ca(tmp_path, "other-ca")
    bad = _lock(rds, f"&sslmode=verify-full&sslrootcert={tmp_path / 'other-ca.pem'}")
    r2 = run([str(s3lect_bin), "status", bad], _keys_env(tmp_path), timeout=60)
    assert r2.returncode != 0
    assert len(rds.snapshot()) == len(seen), "a token went to a server that failed verification"
    assert "certificate" in r2.stderr, r2.stderr
    _outputs_clean(r2, rds)


@pytest.mark.parametrize("mode", ["disable", "allow", "prefer"])
def test_tls_cannot_be_turned_off(rds, s3lect_bin, tmp_path, mode):
    r = run([str(s3lect_bin), "status", _lock(rds, f"&sslmode={mode}")], _keys_env(tmp_path))
    assert r.returncode in (1, 2), r.stdout + r.stderr
    assert "RDS requires TLS" in r.stderr and f"sslmode={mode}" in r.stderr, r.stderr
    assert rds.snapshot() == [], "the store connected although the URL was refused"


def test_password_in_url_refused(rds, s3lect_bin, tmp_path):
    url = f"postgres://iam_user:hunter2@127.0.0.1:{rds.port}/app?key=k&auth=aws-iam"
    r = run([str(s3lect_bin), "status", url], _keys_env(tmp_path))
    assert r.returncode in (1, 2) and "takes no password" in r.stderr, r.stderr
    assert "hunter2" not in r.stdout + r.stderr
    assert rds.snapshot() == []


# ---- MySQL (RDS MySQL, Aurora MySQL) ----


@pytest.fixture
def rds_mysql(tmp_path):
    srv = FakeRdsMysql(tmp_path / "rds-mysql", {AKID: SECRET}, REGION).start()
    yield srv
    srv.stop()


def _mysql_lock(srv: FakeRdsMysql, extra: str = "") -> str:
    return f"mysql://iam_user@127.0.0.1:{srv.port}/app?key=leader&auth=aws-iam{extra}"


@needs_libmariadb
def test_mysql_token_verified_over_tls_and_refusal_reported_cleanly(rds_mysql, s3lect_bin,
                                                                    tmp_path):
    r = run([str(s3lect_bin), "status", _mysql_lock(rds_mysql)], _keys_env(tmp_path), timeout=60)
    seen = rds_mysql.snapshot()
    assert seen, f"the server saw no login; s3lect said: {r.stderr}"
    for a in seen:
        assert a.verified, f"the server could not verify the token: {a.why}"
        assert a.tls, "the token was sent without TLS"
        assert (a.user, a.database) == ("iam_user", "app")
        assert a.access_key_id == AKID and a.session_token == SESSION
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "IAM" in err and "rds-db:connect" in err and "test server: token verified" in err, err
    _outputs_clean(r, rds_mysql)


@needs_libmariadb
def test_mysql_whoami_names_the_aws_chain(rds_mysql, s3lect_bin, tmp_path):
    r = run([str(s3lect_bin), "whoami", _mysql_lock(rds_mysql)], _keys_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the environment (AWS_ACCESS_KEY_ID" in r.stdout, r.stdout
    no_secrets([r.stdout, r.stderr], [SECRET, SESSION])


# ---- both ----


def test_no_credentials_is_a_clear_error_and_nothing_is_sent(rds, s3lect_bin, tmp_path):
    r = run([str(s3lect_bin), "status", _lock(rds)], _env(tmp_path, AWS_REGION=REGION))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no IAM database authentication token" in r.stderr, r.stderr
    assert "AWS_ACCESS_KEY_ID" in r.stderr, r.stderr  # says what to set
    assert rds.snapshot() == []


def test_whoami_names_the_aws_chain(rds, s3lect_bin, tmp_path):
    r = run([str(s3lect_bin), "whoami", _lock(rds)], _keys_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the environment (AWS_ACCESS_KEY_ID" in r.stdout, r.stdout
    no_secrets([r.stdout, r.stderr], [SECRET, SESSION])
    # Without auth=aws-iam a postgres:// lock takes no cloud credentials.
    plain = f"postgres://u@127.0.0.1:{rds.port}/app?key=k"
    r2 = run([str(s3lect_bin), "whoami", plain], _keys_env(tmp_path))
    assert r2.returncode == 2, r2.stderr
    assert "postgres://, mysql://" in r2.stderr and "from the lock URL" in r2.stderr, r2.stderr


REFRESH_S = 6  # the keys' lifetime: the chain refreshes them about 2 s before expiry


def _write_process_profile(d: Path) -> Path:
    """Profile 'rds' in d/config: a credential_process that hands out keys
    ASIATEST<n> / tsecret-<n> / tsession-<n> (n counts its runs, in
    d/count), expiring REFRESH_S seconds later."""
    script = d / "creds.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat '{d}/count' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{d}/count'\n"
        f"exp=$(date -u -d '+{REFRESH_S} seconds' +%Y-%m-%dT%H:%M:%SZ)\n"
        "printf '{\"Version\":1,\"AccessKeyId\":\"ASIATEST%s\",\"SecretAccessKey\":\"tsecret-%s\","
        "\"SessionToken\":\"tsession-%s\",\"Expiration\":\"%s\"}' $n $n $n $exp\n"
    )
    script.chmod(0o700)
    cfg = d / "config"
    cfg.write_text(f"[profile rds]\ncredential_process = {script}\nregion = {REGION}\n")
    return cfg


@pytest.mark.parametrize("store", ["postgres", pytest.param("mysql", marks=needs_libmariadb)])
def test_refreshed_credentials_give_a_new_token_in_one_process(tmp_path, s3lect_bin, store):
    def secret_of(akid: str):
        return "tsecret-" + akid[len("ASIATEST"):] if akid.startswith("ASIATEST") else None

    cls = FakeRdsPostgres if store == "postgres" else FakeRdsMysql
    srv = cls(tmp_path / "rds", secret_of, REGION).start()
    lock = _lock(srv) if store == "postgres" else _mysql_lock(srv)
    cfg = _write_process_profile(tmp_path)
    env = _env(tmp_path, AWS_CONFIG_FILE=str(cfg), AWS_PROFILE="rds")
    log = tmp_path / "node.log"
    with open(log, "w") as out:
        p = subprocess.Popen([str(s3lect_bin), "run", lock, "--id", "n1", *FAST, "--",
                              "sleep", "100"], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 4 * REFRESH_S
        while time.monotonic() < deadline:
            if len({a.access_key_id for a in srv.snapshot()}) >= 3:
                break
            time.sleep(0.2)
    finally:
        p.terminate()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)
        srv.stop()
    seen = srv.snapshot()
    text = log.read_text()
    assert all(a.verified and a.tls for a in seen), [a.why for a in seen if not a.verified]
    by_key: dict[str, set[str]] = {}
    for a in seen:
        by_key.setdefault(a.access_key_id, set()).add(a.token)
    keys = sorted(by_key, key=lambda k: int(k[len("ASIATEST"):]))
    assert len(keys) >= 3, f"the keys were not refreshed in {4 * REFRESH_S} s: {keys}\n{text}"
    # One token per set of keys (reconnects reuse it), a new one for new keys,
    # each with its own session token.
    for k in keys:
        assert len(by_key[k]) == 1, f"{k}: {len(by_key[k])} tokens for one set of keys"
    assert len({t for ts in by_key.values() for t in ts}) == len(keys)
    assert all(a.session_token == "tsession-" + a.access_key_id[len("ASIATEST"):] for a in seen)
    assert sum(len([a for a in seen if a.access_key_id == k]) for k in keys) > len(keys), \
        "no reconnect reused a token"
    assert "IAM" in text and "rds-db:connect" in text, text
    no_secrets([text], [t for ts in by_key.values() for t in ts] +
               [f"tsecret-{k[len('ASIATEST'):]}" for k in keys] +
               [f"tsession-{k[len('ASIATEST'):]}" for k in keys])

# SPDX-License-Identifier: Apache-2.0
"""CLI input that used to be accepted and then misbehaved (issue 14 item 12, item 5's CLI part).

Each bad input must end in exit 2 with exactly one line on stderr that names the
problem, for every subcommand that takes it, and (for s3:// locks) before any
request: the S3 endpoint is a loopback listener that counts connections, and
must see none. Every process has a timeout, so an input that makes the CLI loop
(e.g. `watch --interval 0` before the fix) fails the test instead of hanging it.

The cases in ISSUE_CASES (and the tests that say so) failed on the code before
the change (commit 8dbb7ba); HOSTILE_CASES also cover inputs some of which were
already refused, so that they stay refused with one line.
"""
from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
TIMEOUT = 8  # s per command; a correct refusal takes milliseconds


@dataclass
class Result:
    rc: int | None  # None: still running at the timeout (killed)
    stdout: str
    stderr: str

    def lines(self) -> list[str]:
        return self.stderr.splitlines()


class Listener:
    """A TCP listener on 127.0.0.1 that counts connections and closes them."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() at once
        except OSError:
            pass
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def endpoint():
    lst = Listener()
    try:
        yield lst
    finally:
        lst.close()


@pytest.fixture
def env(tmp_path, endpoint):
    """No AWS settings from the caller; throwaway credentials; S3 at the counting listener."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_")) or k == "S3LECT_NEW_LOCK_WAIT"}
    e.update(HOME=str(tmp_path), AWS_ACCESS_KEY_ID="AKIDTESTONLY",
             AWS_SECRET_ACCESS_KEY="throwaway-test-secret", AWS_REGION="us-east-1",
             AWS_ENDPOINT_URL=f"http://127.0.0.1:{endpoint.port}")
    return e


def cli(env, *args: str, timeout: float = TIMEOUT) -> Result:
    """Runs s3lect in env's scratch directory (relative lock paths land there)."""
    p = subprocess.Popen([str(BIN), *args], env=env, cwd=env["HOME"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, errors="replace",
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return Result(p.returncode, out, err)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=10)
        return Result(None, out, err)


def invoke(sub: str, lock: str, *opts: str) -> list[str]:
    """argv for one subcommand with a lock and options."""
    if sub == "run":
        return ["run", "--lock", lock, *opts, "--", "true"]
    return [sub, lock, *opts]


def assert_usage_error(r: Result, *needles: str) -> None:
    assert r.rc == 2, f"exit {r.rc} (None: still running after {TIMEOUT}s), stderr: {r.stderr!r}"
    lines = r.lines()
    assert len(lines) == 1, f"want exactly one stderr line, got {len(lines)}: {r.stderr!r}"
    for n in needles:
        assert n.lower() in lines[0].lower(), f"{n!r} not in {lines[0]!r}"


ALL = ["run", "status", "watch", "check-store"]
TIMED = ["run", "status", "watch"]

# (subcommands, lock, extra options, words the error line must contain)
ISSUE_CASES = [
    # --region with a space and a slash: MinIO then complained about the date for ever.
    (ALL, "s3://bucket/leader.json", ["--region", "x y/z"], ["--region", "region name"]),
    # keys with '..': sent to S3, a 400 on every poll.
    (ALL, "s3://bucket/a/../leader.json", [], ["'..' segment"]),
    (ALL, "s3://bucket/./leader.json", [], ["'.' segment"]),
    (ALL, "s3://bucket/a//leader.json", [], ["empty segment"]),
    (ALL, "s3://bucket//leader.json", [], ["empty segment"]),
    (ALL, "s3://bucket/a\x01b", [], ["control character"]),
    (ALL, "s3://bucket/a\u0085b", [], ["control character"]),
    (ALL, "s3://bucket/" + "k" * 1025, [], ["1025 bytes", "1024"]),
    # s3:/bucket/key was taken for a file path; other near misses too.
    (ALL, "s3:/bucket/leader.json", [], ["s3://bucket/key"]),
    (ALL, "s3:bucket/leader.json", [], ["s3://bucket/key"]),
    (ALL, "file:TMP/leader.json", [], ["file:///"]),
    (ALL, "leader:1.json", [], ["scheme", "./leader:1.json"]),
    # bucket names by S3's rules
    (ALL, "s3://my bucket/leader.json", [], ["invalid character"]),
    (ALL, "s3://my*bucket/leader.json", [], ["invalid character"]),
    (ALL, "s3://ab/leader.json", [], ["3 to 63"]),
    (ALL, "s3://" + "b" * 64 + "/leader.json", [], ["3 to 63"]),
    (ALL, "s3://B" + "b" * 255 + "/leader.json", [], ["bucket name is 256 characters"]),
    (ALL, "s3://-bucket/leader.json", [], ["start and end"]),
    (ALL, "s3://a..b/leader.json", [], ["'..'"]),
    (ALL, "s3://10.0.0.1/leader.json", [], ["ip address", "--endpoint"]),
    # query strings and fragments are not part of a lock
    (ALL, "s3://bucket/leader.json?versionId=3", [], ["query or fragment"]),
    (ALL, "s3://bucket/leader.json#x", [], ["query or fragment"]),
    (ALL, "file://TMP/leader.json?x", [], ["query or fragment"]),
    (ALL, "file://TMP/sub/../leader.json", [], ["'..' segment"]),
    (ALL, "file://TMP/./leader.json", [], ["'.' segment"]),
    # durations: a number with a unit
    (TIMED, "LOCKFILE", ["--lease-timeout", "1e3"], ["--lease-timeout", "not a duration"]),
    (TIMED, "LOCKFILE", ["--lease-timeout", "15"], ["--lease-timeout", "no unit"]),
    (TIMED, "LOCKFILE", ["--lease-timeout", "0x10s"], ["not a duration"]),
    (TIMED, "LOCKFILE", ["--lease-timeout", " 3s"], ["not a duration"]),
    (TIMED, "LOCKFILE", ["--lease-timeout", "1.5e3ms"], ["not a duration"]),
    (TIMED, "LOCKFILE", ["--lease-timeout", "2.5"], ["no unit"]),
    (TIMED, "LOCKFILE", ["--lease-timeout", "1.0001s"], ["finer than a millisecond"]),
    (["run"], "LOCKFILE", ["--kill-timeout", "5"], ["--kill-timeout", "no unit"]),
    (["watch"], "LOCKFILE", ["--interval", "1e3"], ["--interval", "not a duration"]),
    # watch loops on GETs with a zero interval
    (["watch"], "LOCKFILE", ["--interval", "0"], ["--interval", "100ms"]),
    (["watch"], "LOCKFILE", ["--interval", "1ms"], ["--interval", "100ms"]),
    (["watch"], "LOCKFILE", ["--interval=99ms"], ["--interval", "100ms"]),
    # given twice: the first value was silently dropped
    (ALL, "LOCKFILE", ["--lock", "LOCKFILE"], ["more than one lock"]),
    (ALL, "LOCKFILE", ["--region", "eu-west-1", "--region", "us-east-1"], ["--region", "twice"]),
    (TIMED, "LOCKFILE", ["--lease-timeout", "3s", "--lease-timeout=4s"], ["twice"]),
    # an option as the value of another
    (ALL, "LOCKFILE", ["--region", "--path-style"], ["--region needs a value"]),
    (ALL, "LOCKFILE", ["--endpoint", ""], ["--endpoint", "empty"]),
    # options that do not apply were accepted and ignored
    (["run", "status"], "LOCKFILE", ["--interval", "1s"], ["--interval", "only to watch"]),
    (["run"], "LOCKFILE", ["--json"], ["--json", "does not apply"]),
    (["status", "watch"], "LOCKFILE", ["--kill-timeout", "1s"], ["--kill-timeout", "only to run"]),
    (["status", "watch"], "LOCKFILE", ["--renew-interval", "1s"], ["--renew-interval"]),
    (["status", "watch"], "LOCKFILE", ["--id", "x"], ["--id", "does not apply"]),
    # ids and addresses
    (["run"], "LOCKFILE", ["--id", "caf\udcff"], ["--id", "utf-8"]),
    (["run"], "LOCKFILE", ["--addr", "no-port"], ["--addr", "host:port"]),
    (["run"], "LOCKFILE", ["--addr", "10.0.0.1:99999"], ["--addr", "host:port"]),
    (["run"], "LOCKFILE", ["--ca-file", "/no/such/ca.pem"], ["--ca-file", "cannot read"]),
]


def _ids(cases):
    out = []
    for subs, lock, opts, _ in cases:
        for sub in subs:
            out.append(pytest.param(sub, lock, opts, _[:],
                                    id=f"{sub}:{lock[:40]!r}:{' '.join(opts)[:40]!r}"))
    return out


def _lock(lock: str, tmp_path: Path) -> str:
    return lock.replace("LOCKFILE", str(tmp_path / "leader.json")).replace("TMP", str(tmp_path))


@pytest.mark.parametrize("sub,lock,opts,needles", _ids(ISSUE_CASES))
def test_refused_with_one_line_and_exit_2(sub, lock, opts, needles, tmp_path, env, endpoint):
    lock = _lock(lock, tmp_path)
    opts = [_lock(o, tmp_path) for o in opts]
    # A lone surrogate ("\udcff") is passed as the raw byte 0xff (invalid UTF-8).
    r = cli(env, *invoke(sub, lock, *opts))
    assert_usage_error(r, *needles)
    assert endpoint.connections == 0, "the store was contacted before the input was refused"
    assert not (tmp_path / "leader.json").exists(), "nothing is written on a usage error"


@pytest.mark.parametrize("sub", ALL)
def test_directory_as_file_lock(sub, tmp_path, env):
    """A directory given as the lock: 'cannot read //tmp' on every poll before."""
    d = tmp_path / "locks"
    d.mkdir()
    for lock in (str(d), f"file://{d}"):
        r = cli(env, *invoke(sub, lock))
        assert_usage_error(r, "is a directory", "file path inside")
    assert list(d.iterdir()) == [], "nothing was created in the directory"


@pytest.mark.parametrize("lock", [".", "..", "locks/.", "file:///tmp/"])
def test_directory_names_as_lock(lock, env):
    r = cli(env, "status", lock)
    assert_usage_error(r, "directory")


HOSTILE_CASES = [
    (["status"], ["--lease-timeout", "-1s"], ["not a duration"]),
    (["status"], ["--lease-timeout", "nan"], ["not a duration"]),
    (["status"], ["--lease-timeout", "inf"], ["not a duration"]),
    (["status"], ["--lease-timeout", ""], ["empty"]),
    (["status"], ["--lease-timeout", "1s "], ["not a duration"]),
    (["status"], ["--lease-timeout", "1S"], ["not a duration"]),
    (["status"], ["--lease-timeout", "50ms"], ["lease_timeout", "100 ms"]),
    (["status"], ["--lease-timeout", "99999999999h"], ["too long", "24h"]),
    (["run"], ["--path-style=1"], ["takes no value"]),
    (["run"], ["--kill-timeout", "1d"], ["not a duration"]),
    (["run"], ["--renew-deadline", "25h"], ["too long"]),
    (["status", "watch", "run"], ["--bogus"], ["unknown option"]),
    (["status", "watch"], ["-x"], ["unknown option"]),
    (["status", "watch", "run"], ["--region"], ["--region needs a value"]),
    (["status"], ["--region", "us-east-1\n--json"], ["control character"]),
    (["status"], ["--endpoint", "ftp://x"], ["http://"]),
    (["status"], ["--endpoint", "http://a b:9000"], ["space"]),
    (["status"], ["--ca-file", "/"], ["directory"]),
]


@pytest.mark.parametrize("sub,opts,needles", [
    pytest.param(s, o, n, id=f"{s}:{' '.join(o)!r}") for subs, o, n in HOSTILE_CASES for s in subs])
def test_hostile_options(sub, opts, needles, tmp_path, env, endpoint):
    lock = str(tmp_path / "leader.json")
    r = cli(env, *invoke(sub, lock, *opts))
    assert_usage_error(r, *needles)
    assert endpoint.connections == 0


@pytest.mark.parametrize("value", ["1\n2s", "1\u20282s", "1\u0085s", "\u202e2s", "1\udcffs",
                                   "x" * 5000])
def test_an_echoed_value_stays_on_one_line(value, env):
    """Messages quote what the user typed; newlines, C1 controls, line separators
    and bidi overrides are shown escaped, and a huge value is cut."""
    r = cli(env, "status", "x.json", "--lease-timeout", value)
    assert_usage_error(r, "--lease-timeout")
    assert len(r.stderr) < 1500, len(r.stderr)
    assert not any(c in r.stderr for c in "\u2028\u0085\u202e\udcff"), repr(r.stderr)


@pytest.mark.parametrize("argv,needle", [
    ([], "missing command"),
    (["-x"], "unknown command"),
    (["status"], "missing lock url"),
    (["status", "a.json", "b.json"], "more than one lock"),
    (["run", "--lock", "a.json", "b.json", "--", "true"], "unexpected argument"),
    (["run", "--lock", "a.json"], "missing command"),
    (["run", "--", "true"], "missing --lock"),
    (["status", "--lock=s3://bucket/k", "s3://bucket/j"], "more than one lock"),
    (["status", "--lock"], "--lock needs a value"),
    (["watch", "--lock", "--json"], "--lock needs a value"),
    (["check-store", "--lock", "--region", "us-east-1"], "--lock needs a value"),
])
def test_argument_shape(argv, needle, env):
    r = cli(env, *argv)
    assert_usage_error(r, needle)


def test_dash_dash_ends_options_for_status(env):
    """After '--' an argument is the lock, even one that looks like an option."""
    r = cli(env, "status", "--", "--json")
    assert r.rc == 3 and r.stdout.startswith("--json: no lock record"), (r.rc, r.stdout, r.stderr)


def test_upper_case_scheme_is_s3(env, endpoint):
    """Schemes are case-insensitive (RFC 3986): S3:// is s3:// and reaches the endpoint."""
    r = cli(env, "status", "S3://bucket/leader.json")
    assert r.rc == 1, (r.rc, r.stderr)  # the listener closes the connection: a store error
    wait_for(lambda: endpoint.connections >= 1, 5, "a connection to the endpoint")
    assert "scheme" not in r.stderr and "malformed" not in r.stderr


@pytest.mark.parametrize("key", ["sp ace+plus/ü=eq&amp$.json", "a/b/c-1.json", "ключ.json",
                                 "k" * 1024])
def test_valid_keys_reach_the_store(key, env, endpoint):
    r = cli(env, "status", f"s3://my-bucket.1/{key}")
    assert r.rc == 1, (r.rc, r.stderr)
    wait_for(lambda: endpoint.connections >= 1, 5, "a connection to the endpoint")


@pytest.mark.parametrize("bucket", ["My_Legacy_Bucket", "UPPER.case-1", "B" + "b" * 254])
def test_legacy_bucket_names_reach_the_store(bucket, env, endpoint):
    """us-east-1 buckets from before 2018 may have capitals and '_' (path-style)."""
    r = cli(env, "status", f"s3://{bucket}/leader.json")
    assert r.rc == 1, (r.rc, r.stderr)
    wait_for(lambda: endpoint.connections >= 1, 5, "a connection to the endpoint")


# ---- timings derived from --lease-timeout (failed before: renew_deadline 10s >= lease) ----

def test_lease_timeout_alone_is_enough_for_run(tmp_path, env):
    lock = tmp_path / "leader.json"
    r = cli(env, "run", "--lock", str(lock), "--lease-timeout", "3s", "--", "true", timeout=20)
    assert r.rc == 0, (r.rc, r.stderr)
    assert "acquired leadership" in r.stderr and "command exited" in r.stderr
    rec = json.loads(lock.read_text())
    assert rec["leaseMs"] == 3000


def test_lease_timeout_alone_is_enough_for_status_and_watch(tmp_path, env):
    lock = str(tmp_path / "leader.json")
    r = cli(env, "status", lock, "--lease-timeout", "2s")
    assert r.rc == 3 and "no lock record" in r.stdout, (r.rc, r.stderr)
    r = cli(env, "watch", lock, "--lease-timeout", "2s", "--interval", "100ms", timeout=1.5)
    assert r.rc is None and "no record" in r.stdout and r.stderr == "", (r.rc, r.stderr)


@pytest.mark.parametrize("opts", [
    ["--lease-timeout", "1s"],
    ["--lease-timeout", "3s", "--renew-deadline", "2500ms"],
    ["--frequent-interval", "45s"],
    ["--infrequent-interval", "2s"],
])
def test_derived_timings_are_valid(opts, tmp_path, env):
    r = cli(env, "run", "--lock", str(tmp_path / "l.json"), *opts, "--", "true", timeout=20)
    assert r.rc == 0, (r.rc, r.stderr)


@pytest.mark.parametrize("opts,needle", [
    (["--lease-timeout", "3s", "--renew-deadline", "4s"], "renew_deadline (4s) must be less than lease_timeout (3s)"),
    (["--renew-interval", "3s", "--renew-deadline", "2s"], "renew_interval (3s) must be less than renew_deadline (2s)"),
    (["--frequent-interval", "3s", "--infrequent-interval", "2s"], "infrequent_interval (2s)"),
    (["--lease-timeout", "3s", "--max-lease-timeout", "2s"], "max_lease_timeout (2s)"),
])
def test_explicit_inconsistent_timings_keep_the_library_error(opts, needle, tmp_path, env):
    r = cli(env, "run", "--lock", str(tmp_path / "l.json"), *opts, "--", "true")
    assert_usage_error(r, needle)


# ---- a hostile record's leaseMs is clamped (item 5, CLI part) ----

def write_record(path: Path, lease_ms: int, age_s: float) -> None:
    t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=age_s)
    path.write_text(json.dumps({
        "leaderID": "evil", "leaderAddr": "", "term": 7, "leaseMs": lease_ms, "incarnation": "x",
        "lastUpdated": t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"}))


def test_status_clamps_a_huge_lease_and_warns(tmp_path, env):
    lock = tmp_path / "leader.json"
    write_record(lock, 10**15, age_s=120)   # 2 min old, "lease" 31 700 years
    r = cli(env, "status", str(lock))
    assert r.rc == 3, "an old record is not live because it claims a huge lease"
    assert "expired leader evil" in r.stdout and "lease 60.0s" in r.stdout, r.stdout
    assert "1000000000000" not in r.stdout
    lines = r.lines()
    assert len(lines) == 1 and "clamped" in lines[0] and "1000000000000000" in lines[0], r.stderr

    r = cli(env, "status", "--json", str(lock))
    st = json.loads(r.stdout)
    assert r.rc == 3 and st["leaseMs"] == 60000 and st["rawLeaseMs"] == 10**15
    assert st["leaseClamped"] is True and st["live"] is False
    assert len(r.lines()) == 1 and "clamped" in r.stderr

    # The bound follows --lease-timeout (4 x), or is given.
    r = cli(env, "status", "--json", "--lease-timeout", "1m", str(lock))
    st = json.loads(r.stdout)
    assert r.rc == 0 and st["leaseMs"] == 240000 and st["live"] is True, (r.stdout, r.stderr)
    r = cli(env, "status", "--json", "--max-lease-timeout", "90s", str(lock))
    st = json.loads(r.stdout)
    assert r.rc == 3 and st["leaseMs"] == 90000, (r.stdout, r.stderr)


def test_status_leaves_a_sane_lease_alone(tmp_path, env):
    lock = tmp_path / "leader.json"
    write_record(lock, 30000, age_s=1)
    r = cli(env, "status", "--json", str(lock))
    st = json.loads(r.stdout)
    assert r.rc == 0 and r.stderr == "" and st["leaseMs"] == 30000 and st["rawLeaseMs"] == 30000
    assert st["leaseClamped"] is False


def test_watch_warns_once_about_a_clamped_lease(tmp_path, env):
    lock = tmp_path / "leader.json"
    write_record(lock, 10**15, age_s=1)
    r = cli(env, "watch", str(lock), "--interval", "100ms", timeout=1.5)
    assert r.rc is None, "watch runs until stopped"
    assert "leader=evil term=7 live" in r.stdout
    warnings = [ln for ln in r.lines() if "clamped" in ln]
    assert len(warnings) == 1 and len(r.lines()) == 1, r.stderr


# ---- --help states the rules ----

@pytest.mark.parametrize("sub,needles", [
    ("run", ["--max-lease-timeout", "2/3 L", "min(L/3, deadline/2)", "0 needs none", "24h",
             "1024 bytes", "upper case"]),
    ("status", ["--max-lease-timeout", "rawLeaseMs", "a number with a unit"]),
    ("watch", ["at least 100ms", "--max-lease-timeout"]),
    (None, ["durations: a number with a unit"]),
])
def test_help_states_the_rules(sub, needles, env):
    r = cli(env, *([sub, "--help"] if sub else ["--help"]))
    assert r.rc == 0
    text = " ".join(r.stdout.split())
    for n in needles:
        assert n in text, (n, r.stdout)

# SPDX-License-Identifier: Apache-2.0
"""`s3lect check-store`: passes on stores that enforce conditional writes
(MinIO, moto, the file store) and fails on one that silently ignores them."""

from __future__ import annotations

import http.server
import secrets
import threading
import uuid

import pytest

from harness.cli import CHECK_STORE_PASSED, check_store_verdict, data_results, run

CHECKS = [
    "create-if-absent (If-None-Match: *) creates the object",
    "a second create-if-absent is refused",
    "reads back the first write with the ETag the PUT returned",
    "a write with the current ETag (If-Match) succeeds with a new ETag",
    "a write with a stale ETag is refused and changes nothing",
    "If-Match on a missing key is refused and creates nothing",
    "racing writers",
]


def results(stdout: str) -> dict[str, str]:
    """Maps each check above to "PASS"/"FAIL" from the printed table."""
    out = {}
    for line in stdout.splitlines():
        line = line.strip()
        for check in CHECKS:
            if check in line and line[:4] in ("PASS", "FAIL"):
                out[check] = line[:4]
    return out


def test_passes_on_real_s3_servers(s3server, s3lect_bin, clean_env):
    env = dict(clean_env)
    env.update(s3server.env())
    lock = f"s3://{s3server.bucket}/check/{uuid.uuid4().hex[:8]}/leader.json"
    r = run([str(s3lect_bin), "check-store", lock, "--racers", "8", "--rounds", "5"], env, timeout=120)
    table = results(r.stdout)
    assert r.returncode == 0, f"check-store failed on {s3server.name}:\n{r.stdout}\n{r.stderr}"
    assert table == {c: "PASS" for c in CHECKS}, r.stdout
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED
    assert "8 racing writers x 5 rounds" in r.stdout
    # The lock itself is never touched; the scratch object sits next to it.
    k = lock.split("/", 3)[3]
    assert s3server.client().get(s3server.bucket, k).status == 404
    scratch = [l.split(": ", 1)[1] for l in r.stdout.splitlines() if "scratch key:" in l][0]
    assert scratch.startswith(k + ".s3lect-check-")
    assert s3server.client().get(s3server.bucket, scratch).status == 200


def test_passes_on_the_file_store(s3lect_bin, clean_env, tmp_path):
    # Flags before and after the URL.
    r = run([str(s3lect_bin), "check-store", "--racers", "4", str(tmp_path / "leader.json"),
             "--rounds", "3"], clean_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert results(r.stdout) == {c: "PASS" for c in CHECKS}
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED


class LyingS3(http.server.BaseHTTPRequestHandler):
    """An 'S3' that accepts every PUT, whatever its If-Match/If-None-Match."""

    protocol_version = "HTTP/1.1"
    objects: dict[str, tuple[bytes, str]] = {}
    lock = threading.Lock()

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", etag: str | None = None):
        self.send_response(status)
        if etag:
            self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        etag = f'"{secrets.token_hex(16)}"'
        with self.lock:
            self.objects[self.path] = (body, etag)
        self._send(200, etag=etag)

    def do_GET(self):
        with self.lock:
            obj = self.objects.get(self.path)
        if obj is None:
            self._send(404, b"<Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>")
        else:
            self._send(200, obj[0], obj[1])


@pytest.fixture
def lying_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), LyingS3)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=10)


def test_fails_on_a_store_that_ignores_conditions(lying_server, s3lect_bin, clean_env):
    env = dict(clean_env, AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s")
    r = run([str(s3lect_bin), "check-store", "s3://bucket/leader.json", "--endpoint", lying_server,
             "--racers", "4", "--rounds", "2"], env, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    table = results(r.stdout)
    assert table[CHECKS[0]] == "PASS"  # plain writes do work there
    for check in (CHECKS[1], CHECKS[4], CHECKS[5], CHECKS[6]):
        assert table.get(check) == "FAIL", f"{check} should fail:\n{r.stdout}"
    failed = sum(1 for v in table.values() if v == "FAIL")
    assert check_store_verdict(r.stdout) == (
        f"{failed} of 7 checks FAILED: this store does not reliably enforce conditional writes; "
        "do not use it for s3lect"), r.stdout
    assert "4 of 4 writers with the same If-Match won" in r.stdout


def test_wrong_credentials_stop_with_the_reason(minio, s3lect_bin, clean_env):
    env = dict(clean_env)
    env.update(minio.env())
    env["AWS_SECRET_ACCESS_KEY"] = "wrong-" + secrets.token_hex(8)
    r = run([str(s3lect_bin), "check-store", f"s3://{minio.bucket}/check/auth.json"], env)
    assert r.returncode == 1
    assert "FAIL" in r.stdout and "SignatureDoesNotMatch" in r.stdout
    assert check_store_verdict(r.stdout) == (
        "stopped: the store cannot be used as configured (see the message above)"), r.stdout
    assert env["AWS_SECRET_ACCESS_KEY"] not in r.stdout + r.stderr


def test_data_fails_on_a_store_that_ignores_conditions(lying_server, s3lect_bin, clean_env):
    """--data on a store that accepts every PUT: the store's conditions fail,
    and so does the fence (an older term's write goes over a newer one's)."""
    env = dict(clean_env, AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s")
    r = run([str(s3lect_bin), "check-store", "--data", "s3://bucket/state.json", "--endpoint",
             lying_server], env, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    table = data_results(r.stdout)
    assert len(table) == 10, r.stdout
    assert table["data: create-if-absent (If-None-Match: *) creates the scratch object"] == "PASS"
    for check in ("data: If-None-Match on an existing object is refused (412)",
                  "data: a write with a stale version (If-Match) is refused (412) and changes "
                  "nothing",
                  "data: an older term's put and read-modify-write after a newer term wrote the "
                  "same bytes are fenced"):
        assert table[check] == "FAIL", f"{check} should fail:\n{r.stdout}"
    failed = sum(1 for v in table.values() if v == "FAIL")
    assert check_store_verdict(r.stdout) == (
        f"{failed} of 10 checks FAILED: the data location does not reliably enforce conditional "
        "writes; do not use it for fenced writes"), r.stdout


def test_lock_and_data_on_the_file_store(s3lect_bin, clean_env, tmp_path):
    r = run([str(s3lect_bin), "check-store", str(tmp_path / "leader.json"), "--data",
             f"file://{tmp_path}/state.json", "--racers", "3", "--rounds", "2"], clean_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert results(r.stdout) == {c: "PASS" for c in CHECKS}
    assert set(data_results(r.stdout).values()) == {"PASS"} and len(data_results(r.stdout)) == 10
    assert check_store_verdict(r.stdout) == (
        "all 17 checks passed: this store enforces conditional writes, and fenced writes hold at "
        "the data location"), r.stdout
    assert not (tmp_path / "state.json").exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        ([], "missing lock URL"),
        (["--data"], "--data needs a value"),
        (["--data="], "--data: empty URL"),
        (["--data", "s3://b/k", "--data", "s3://b/k2"], "more than one --data URL"),
        (["--data", "postgres://u@127.0.0.1:1/db?key=k"], "no scratch object can be named"),
        (["--data", "s3://b"], "needs a bucket and a key"),
        (["--racers", "1", "s3://b/k"], "--racers"),
        (["--rounds", "x", "s3://b/k"], "--rounds"),
        (["s3://b/k", "--bogus"], "unknown option"),
        (["s3://b/k", "s3://b/k2"], "more than one lock URL"),
        (["s3://b"], "needs a bucket and a key"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, needle, s3lect_bin, clean_env):
    r = run([str(s3lect_bin), "check-store", *args], clean_env)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_help(s3lect_bin, clean_env):
    r = run([str(s3lect_bin), "check-store", "--help"], clean_env)
    assert r.returncode == 0 and "usage: s3lect check-store URL" in r.stdout
    assert "--racers" in r.stdout and "--endpoint" in r.stdout and "--data DATA_URL" in r.stdout

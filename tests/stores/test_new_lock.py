# SPDX-License-Identifier: Apache-2.0
"""A lock deleted while its leader runs, and a node started right after that
never saw it (issue 38 item 3): a rolling restart or a scale-up next to a
Redis FLUSHALL, an object removed by a lifecycle rule or by hand. The fresh
node cannot tell the missing lock from a brand-new one, so it waits
new_lock_wait (one lease by default) before creating it; the old leader,
healthy, stops its command at its next renewal, and cut off from the store
(its `s3lect run` frozen, its command left running) by its hard deadline.

On the file store, Redis and S3 (MinIO), with real `s3lect run` processes:
the commands themselves are watched every 20 ms in /proc, never two at once,
and the fresh leadership's term is above the old one (terms of a lock created
again start from the creating node's clock in ms). The old leader creates its
lock at once (S3LECT_NEW_LOCK_WAIT=0, tests/conftest.py); the fresh node runs
with the default, which is what is under test."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.cli import running_commands, wait_for
from harness.redis_server import RedisServer
from harness.s3client import S3Client
from storeutil import _base, redis_env

LEASE = 3.0
FAST = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
        "--frequent-interval", "500ms", "--infrequent-interval", "1s", "--kill-timeout", "500ms",
        "--no-peer"]


@pytest.fixture
def redis_server():
    srv = RedisServer(aof=False)
    srv.start()
    yield srv
    srv.stop()


def _store(kind: str, request, tmp_path: Path):
    """(lock URL, environment, delete()) for one store."""
    name = f"newlock-{secrets.token_hex(4)}"
    if kind == "file":
        path = tmp_path / f"{name}.json"
        return str(path), _base(), lambda: path.unlink()
    if kind == "redis":
        srv = request.getfixturevalue("redis_server")
        return f"{srv.lock_prefix}{name}", redis_env(srv), lambda: srv.call("FLUSHALL")
    minio = request.getfixturevalue("minio")
    env = _base()
    env.update(AWS_ACCESS_KEY_ID=minio.access_key, AWS_SECRET_ACCESS_KEY=minio.secret_key,
               AWS_REGION="us-east-1", AWS_ENDPOINT_URL_S3=minio.endpoint)
    client = S3Client(minio.endpoint, minio.access_key, minio.secret_key)

    def delete():
        r = client.request("DELETE", minio.bucket, name)
        assert r.status == 204, (r.status, r.body[:300])
    return f"s3://{minio.bucket}/{name}", env, delete


NUM = {"old": "1", "fresh": "2"}  # sleep takes a number: <tag>1, <tag>2


def _start(bin_: Path, lock: str, node: str, tag: str, env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(bin_), "run", "--lock", lock, "--id", node, *FAST, "--", "sleep", f"{tag}{NUM[node]}"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _terms(log: Path) -> list[int]:
    return [int(t) for t in re.findall(r"acquired leadership term=(\d+)", log.read_text())]


@pytest.mark.parametrize("old_leader", ["healthy", "cut_off"])
@pytest.mark.parametrize("kind", ["file", "redis", "s3"])
def test_lock_deleted_then_a_fresh_node_starts_no_two_commands(kind, old_leader, request,
                                                              tmp_path, s3lect_bin):
    lock, env, delete = _store(kind, request, tmp_path)
    tag = f"{80000 + secrets.randbelow(9000)}"  # a sleep argument no other process uses
    old_log, new_log = tmp_path / "old.log", tmp_path / "fresh.log"
    env_old = dict(env, S3LECT_NEW_LOCK_WAIT="0")
    env_new = {k: v for k, v in env.items() if k != "S3LECT_NEW_LOCK_WAIT"}  # the default
    procs = []
    try:
        procs.append(_start(s3lect_bin, lock, "old", tag, env_old, old_log))
        wait_for(lambda: running_commands(tag) == [f"{tag}1"], 30, "the old leader's command")
        # Renewing: the delete comes between two renewals, as in the field.
        wait_for(lambda: len(_terms(old_log)) == 1, 5, "its term")
        time.sleep(1.2)
        if old_leader == "cut_off":
            # Its s3lect run frozen: no renewal reaches the store (no reset
            # either); its command runs on to the hard deadline.
            os.kill(procs[0].pid, signal.SIGSTOP)
        delete()
        t0 = time.monotonic()
        time.sleep(0.2)
        procs.append(_start(s3lect_bin, lock, "fresh", tag, env_new, new_log))
        old_gone = fresh_at = None
        while time.monotonic() < t0 + 25:
            now = running_commands(tag)
            assert len(now) <= 1, f"two commands at once {now} ({time.monotonic() - t0:.2f} s " \
                                  f"after the delete)"
            if old_gone is None and f"{tag}1" not in now:
                old_gone = time.monotonic() - t0
            if now == [f"{tag}2"]:
                fresh_at = time.monotonic() - t0
                break
            time.sleep(0.02)
        text = new_log.read_text()
        assert fresh_at is not None, f"the fresh node never led: {text[-2000:]}"
        # It waited its lease from its first read, which came after its start.
        assert fresh_at >= 0.2 + LEASE - 0.3, f"the fresh node led {fresh_at:.2f} s after the delete"
        assert fresh_at <= 0.2 + LEASE + 8, f"the fresh node led {fresh_at:.2f} s after the delete"
        assert "no lock in the store yet: creating it in 3000 ms (new_lock_wait)" in text, text
        old_term, new_term = _terms(old_log)[0], _terms(new_log)[0]
        assert new_term > old_term, (old_term, new_term)
        print(f"{kind} old leader {old_leader}: its command stopped {old_gone:.2f} s and the "
              f"fresh node's ran {fresh_at:.2f} s after the delete; terms {old_term} -> {new_term}")
        # Both terms are the creating node's clock in ms.
        assert abs(old_term / 1000 - time.time()) < 120, old_term
        if old_leader == "cut_off":
            os.kill(procs[0].pid, signal.SIGCONT)
        # One command from then on; the old leader follows the new lock.
        end = time.monotonic() + LEASE
        while time.monotonic() < end:
            assert running_commands(tag) == [f"{tag}2"], running_commands(tag)
            time.sleep(0.05)
        assert _terms(old_log) == [old_term], old_log.read_text()[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait(timeout=10)
        wait_for(lambda: not running_commands(tag), timeout=10, what="no command left")

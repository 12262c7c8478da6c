# SPDX-License-Identifier: Apache-2.0
"""`s3lect run` whose stderr is a full pipe that nobody reads (issue 26, item 1).

A log write must never stall the supervisor or the election: a node that
holds the lock runs its command, and one that must let go does. Each node
reaches MinIO through its own fault proxy (chaos_lib.Proxy), so one node's
store can fail while the others' works. The node under test has stdout and
stderr on one pipe, filled to the brim before it starts and never read: each
of its log lines would block a plain write(2) for ever.

The command of every node appends "start ID TERM PID" to a shared marker file
(not through s3lect's stderr) and then sleeps, so starts and the pids of the
commands are known whatever happens to the logs.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest

from chaos_lib import Proxy
from harness import cli
from harness.freeze import pid_gone
from harness.wait import wait_for

# Suite chaos runs this file in its second pytest session (scripts/test).
pytestmark = pytest.mark.second_session

LEASE_S, FREQUENT_S = 3.0, 0.5
TIMING = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
          "--frequent-interval", "500ms", "--infrequent-interval", "1s"]
# Followers that poll slowly: the full-stderr node is then the likely winner.
SLOW = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
        "--frequent-interval", "3s", "--infrequent-interval", "3s"]
# A lease long enough that a handover by release is told from one by expiry.
LONG = ["--lease-timeout", "8s", "--renew-interval", "1s", "--renew-deadline", "5s",
        "--frequent-interval", "500ms", "--infrequent-interval", "1s"]
# Scheduling slack for a loaded 2-core machine, on top of each bound.
SLACK_S = 4.0


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is full; the write end is blocking again."""
    r, w = os.pipe()
    fl = fcntl.fcntl(w, fcntl.F_GETFL)
    fcntl.fcntl(w, fcntl.F_SETFL, fl | os.O_NONBLOCK)
    chunk = b"x" * 65536
    while True:
        try:
            os.write(w, chunk)
        except BlockingIOError:
            try:
                os.write(w, b"x")
            except BlockingIOError:
                break
    fcntl.fcntl(w, fcntl.F_SETFL, fl)
    return r, w


class LiveNode(cli.Node):
    """A harness Node through its own fault proxy; with full, stdout and
    stderr on one full pipe that nobody reads (else its log TMP/ID.log). Its
    command appends "start ID TERM PID" to the marker TMP/cmd.log."""

    def __init__(self, bin_: Path, tmp: Path, lock: str, node_id: str, env: dict[str, str],
                 minio_port: int, full: bool, timing: list[str]):
        self.proxy = Proxy(node_id, minio_port, seed=len(node_id))
        marker = tmp / "cmd.log"
        cmd = f'echo "start $S3LECT_LEADER_ID $S3LECT_TERM $$" >> {marker}; exec sleep 600'
        self._pipe: tuple[int, int] | None = full_pipe() if full else None
        out = self._pipe[1] if self._pipe else cli.LOG
        try:
            super().__init__(bin_, tmp, lock, node_id, env,
                             [*timing, "--endpoint", f"http://127.0.0.1:{self.proxy.port}"],
                             cmd=["sh", "-c", cmd], stdout=out, stderr=out,
                             stdin=subprocess.DEVNULL)
        except BaseException:
            self.close_pipe()
            self.proxy.close()
            raise
        if self._pipe:
            os.close(self._pipe[1])  # the child holds it; the read end stays open, unread
            self._pipe = (self._pipe[0], -1)

    def starts(self) -> list[tuple[str, int, int, float]]:
        return [s for s in starts(self.marker) if s[0] == self.id]

    def close_pipe(self) -> None:
        if self._pipe:
            for fd in self._pipe:
                if fd >= 0:
                    os.close(fd)
            self._pipe = None

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.proxy.close()
            self.close_pipe()


_seen: dict[tuple[str, int], float] = {}


def starts(marker: Path) -> list[tuple[str, int, int, float]]:
    """(id, term, pid, first time this test saw the line) of every command start."""
    out = []
    if marker.exists():
        for line in marker.read_text().splitlines():
            p = line.split()
            if len(p) == 4 and p[0] == "start":
                key = (p[1], int(p[2]))
                t = _seen.setdefault(key, time.monotonic())
                out.append((p[1], int(p[2]), int(p[3]), t))
    return out


@pytest.fixture
def live(tmp_path: Path, s3lect_bin: Path, minio, clean_env):
    env = dict(clean_env)
    env.update(minio.env())
    port = int(minio.endpoint.rsplit(":", 1)[1])
    lock = f"s3://{minio.bucket}/live/{secrets.token_hex(4)}.json"
    nodes: list[LiveNode] = []
    _seen.clear()

    def start(node_id: str, full: bool = False, timing: list[str] = TIMING) -> LiveNode:
        n = LiveNode(s3lect_bin, tmp_path, lock, node_id, env, port, full, timing)
        nodes.append(n)
        return n

    start.marker = tmp_path / "cmd.log"  # type: ignore[attr-defined]
    try:
        yield start
    finally:
        for n in nodes:
            n.close()


def test_full_stderr_leader_steps_down_on_store_errors(live):
    """(a) The leader's stderr is full and its store fails: it stops its
    command and lets go; the next node's command starts within lease +
    frequent interval."""
    full = live("full", full=os.environ.get("DBG") is None)
    wait_for(lambda: full.starts(), 30, "the full-stderr node to start its command")
    pid = full.starts()[-1][2]
    other = live("healthy")
    time.sleep(1.5)  # the healthy node follows
    t_fault = time.monotonic()
    full.proxy.set(mode="reset")  # every request of the leader fails from now on
    s = wait_for(lambda: other.starts(), LEASE_S + FREQUENT_S + SLACK_S,
                 "the healthy node's command after the full-stderr leader's store failed")
    took = s[-1][3] - t_fault
    assert pid_gone(pid), "the old leader's command must be dead once another node's runs"
    assert full.proc.poll() is None, "the full-stderr node keeps running as a follower"
    print(f"takeover {took:.2f} s after the leader's store failed")


def test_full_stderr_follower_wins_and_runs(live):
    """(b) Three nodes; the leader is killed with -9 and the follower whose
    stderr is full wins: a command runs within lease + frequent + 1 s."""
    leader = live("leader")
    wait_for(lambda: leader.starts(), 30, "the first node's command")
    full = live("full", full=True)
    live("slow", timing=SLOW)
    time.sleep(2.0)  # both follow
    t_kill = time.monotonic()
    leader.kill9()
    bound = LEASE_S + FREQUENT_S + 1.0 + SLACK_S
    wait_for(lambda: [s for s in starts(live.marker) if s[0] != "leader"], bound,
             "a command after the leader's kill -9")
    first = [s for s in starts(live.marker) if s[0] != "leader"][0]
    print(f"{first[0]} started its command {first[3] - t_kill:.2f} s after the kill")
    # Whoever holds the lock runs its command: watch for another lease that
    # no node holds the lock without its command (the full node, if it won,
    # must have started it; if it let go, another must run).
    time.sleep(LEASE_S)
    running = [s for s in starts(live.marker) if s[0] != "leader" and not pid_gone(s[2])]
    assert len(running) == 1, f"exactly one command runs: {starts(live.marker)}"


def test_full_stderr_sigterm_stops_and_releases(live, s3lect_bin, minio, clean_env):
    """(c) SIGTERM to a leader whose stderr is full still stops its command,
    releases, and exits 0; the next node leads at once."""
    full = live("full", full=True, timing=LONG)
    wait_for(lambda: full.starts(), 30, "the full-stderr node's command")
    pid = full.starts()[-1][2]
    other = live("healthy", timing=LONG)
    time.sleep(1.5)
    t = time.monotonic()
    full.proc.send_signal(signal.SIGTERM)
    rc = full.proc.wait(timeout=10)
    stopped = time.monotonic() - t
    assert rc == 0, f"graceful stop exits 0, got {rc}"
    assert pid_gone(pid), "the command is dead when s3lect run exits"
    # A release is seen at the follower's next read (infrequent interval 1 s).
    wait_for(lambda: other.starts(), 8.0 + SLACK_S, "the next node's command")
    took = other.starts()[-1][3] - t
    # Without a release the lease (8 s, renewed at most 1 s before) runs out first.
    assert took < 5.0, f"handover took {took:.2f} s: the lock was not released"
    print(f"stopped in {stopped:.2f} s, next command {took:.2f} s after SIGTERM")


# ---- --startup-timeout (item 8): fail fast where nothing can work ----


def run_until_exit(bin_: Path, tmp: Path, lock: str, env: dict, extra: list[str], limit: float):
    """Runs `s3lect run` until it exits (or `limit` s): (exit code or None, seconds, output)."""
    t = time.monotonic()
    n = cli.Node(bin_, tmp, lock, "st", env, [*TIMING, *extra], cmd=["sleep", "600"],
                 kill_timeout=None)
    try:
        rc = n.wait(limit)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        n.stop()
    return rc, time.monotonic() - t, n.text()


@pytest.mark.parametrize("fault", ["missing bucket", "wrong secret", "unknown key id",
                                   "missing table", "bad credentials file"])
def test_permanent_errors_exit_after_the_startup_timeout(fault, s3lect_bin, minio, clean_env,
                                                         request, tmp_path):
    env = dict(clean_env)
    if fault == "bad credentials file":
        env.update(minio.env())
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            env.pop(k, None)
        creds = tmp_path / "credentials"
        creds.write_text("[default\naws_access_key_id AKIDBROKEN\n")
        (tmp_path / "config").write_text("")
        env.update(AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_CONFIG_FILE=str(tmp_path / "config"),
                   AWS_EC2_METADATA_DISABLED="true")
        lock = f"s3://{minio.bucket}/live/startup-{secrets.token_hex(3)}.json"
    elif fault == "missing table":
        ddb = request.getfixturevalue("dynamodb_local")
        env.update(ddb.env())
        lock = f"dynamodb://no-such-table-{secrets.token_hex(3)}/k"
    else:
        env.update(minio.env())
        bucket = minio.bucket
        if fault == "missing bucket":
            bucket = f"no-such-bucket-{secrets.token_hex(3)}"
        elif fault == "wrong secret":
            env["AWS_SECRET_ACCESS_KEY"] = "wrong" + secrets.token_hex(8)
        else:
            env["AWS_ACCESS_KEY_ID"] = "AKIDUNKNOWN" + secrets.token_hex(4).upper()
        lock = f"s3://{bucket}/live/startup-{secrets.token_hex(3)}.json"
    rc, took, out = run_until_exit(s3lect_bin, tmp_path, lock, env, ["--startup-timeout", "3s"], 40)
    assert rc == 1, f"{fault}: exit {rc} after {took:.1f} s, want 1:\n{out}"
    if fault == "bad credentials file":
        # Refused at once, before the election starts: nothing to wait for.
        assert took < 15 and "credentials" in out and "line" in out, out
    else:
        assert 3.0 <= took < 3.0 + 15, f"{fault}: exited after {took:.1f} s"
        assert "--startup-timeout" in out and "never reached" in out, out
    assert "started command" not in out, out
    print(f"{fault}: exit 1 after {took:.1f} s")


def test_a_store_that_comes_up_late_does_not_make_it_exit(s3lect_bin, minio, clean_env, tmp_path):
    """Connections refused for 10 s (a store still starting): the node
    waits past --startup-timeout and leads once the store is there."""
    env = dict(clean_env)
    env.update(minio.env())
    proxy = Proxy("late", int(minio.endpoint.rsplit(":", 1)[1]), seed=7)
    proxy.set(mode="reset")
    lock = f"s3://{minio.bucket}/live/late-{secrets.token_hex(3)}.json"
    marker = tmp_path / "late.log"
    p = cli.Node(s3lect_bin, tmp_path, lock, "late", env,
                 [*TIMING, "--endpoint", f"http://127.0.0.1:{proxy.port}", "--startup-timeout",
                  "3s"], cmd=["sh", "-c", f"echo started >> {marker}; exec sleep 600"],
                 kill_timeout=None)
    try:
        time.sleep(10)
        assert p.alive(), f"exited with {p.proc.returncode} while the store was coming up"
        proxy.heal()
        wait_for(lambda: marker.exists(), 20, "the command once the store is up")
    finally:
        p.stop()
        proxy.close()


def test_store_down_then_wrong_secret_exits_by_the_startup_timeout(s3lect_bin, minio, clean_env,
                                                                    tmp_path):
    """Issue 38 item 5: connections refused for the first 10 s (a pod started
    before its network), then the store answers SignatureDoesNotMatch (a
    wrong secret): the early transient error does not defeat
    --startup-timeout; the node exits 1 by the timeout (15 s) + 5 s, naming
    the error. Before, it was still running after 200 s."""
    env = dict(clean_env)
    env.update(minio.env())
    env["AWS_SECRET_ACCESS_KEY"] = "wrong" + secrets.token_hex(8)
    proxy = Proxy("late-wrong", int(minio.endpoint.rsplit(":", 1)[1]), seed=11)
    proxy.set(mode="reset")
    lock = f"s3://{minio.bucket}/live/late-wrong-{secrets.token_hex(3)}.json"
    t = time.monotonic()
    p = cli.Node(s3lect_bin, tmp_path, lock, "lw", env,
                 [*TIMING, "--endpoint", f"http://127.0.0.1:{proxy.port}", "--startup-timeout",
                  "15s"], cmd=["sleep", "600"], kill_timeout=None)
    try:
        time.sleep(10)
        assert p.alive(), f"exited with {p.proc.returncode} while the store was down"
        proxy.heal()
        rc = p.wait(30)
        took = time.monotonic() - t
        out = p.text()
        assert rc == 1, f"exit {rc} after {took:.1f} s:\n{out}"
        assert 15.0 <= took <= 15.0 + 5.0, f"exited after {took:.1f} s (startup timeout 15 s)"
        assert "never reached" in out and "SignatureDoesNotMatch" in out, out
        assert "started command" not in out, out
    finally:
        p.stop()
        proxy.close()

# SPDX-License-Identifier: Apache-2.0
"""Helpers for driving the s3lect CLI and tests/c/s3_probe from tests."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

# Scaled-down timings: lease 3 s; followers poll every 0.5 s in transitions
# and every 1 s when stable, so failover takes about L + 1 s.
FAST = [
    "--lease-timeout", "3s",
    "--renew-interval", "1s",
    "--renew-deadline", "2s",
    "--frequent-interval", "500ms",
    "--infrequent-interval", "1s",
    "--max-clock-skew", "0",
]


def wait_for(cond: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    """Polls cond() until it is truthy; raises AssertionError naming `what` after timeout s."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


def run(cmd: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def probe(bin_: Path, env: dict[str, str], op: str, url: str, *args: str) -> dict:
    """One store operation through tests/c/s3_probe; returns its JSON answer."""
    r = run([str(bin_), op, url, *args], env, timeout=60)
    assert r.returncode in (0, 3), f"s3_probe failed ({r.returncode}): {r.stderr}"
    return json.loads(r.stdout)


class Node:
    """One `s3lect run` process. Its CMD appends "start ID TERM" to a shared
    marker file and then runs until it is stopped."""

    def __init__(self, bin_: Path, tmp: Path, lock: str, node_id: str, env: dict[str, str],
                 extra: list[str] | None = None):
        self.id = node_id
        self.log = tmp / f"{node_id}.log"
        self.marker = tmp / "cmd.log"
        cmd = f'echo "start $S3LECT_LEADER_ID $S3LECT_TERM" >> {self.marker}; exec sleep 600'
        self._out = open(self.log, "w")
        self.proc = subprocess.Popen(
            [str(bin_), "run", "--lock", lock, "--id", node_id, *(FAST if extra is None else extra),
             "--kill-timeout", "500ms", "--", "sh", "-c", cmd],
            stdout=self._out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def terms(self) -> list[int]:
        return [int(t) for t in re.findall(r"s3lect: acquired leadership term=(\d+)", self.text())]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def leading(self) -> bool:
        """Running and its last transition was an acquisition whose CMD started."""
        t = self.text()
        return (self.alive() and t.rfind("started command") > max(t.rfind("lost leadership"),
                                                                    t.rfind("command exited")))

    def cmd_wrote_start(self) -> bool:
        """The CMD of this node's latest term has written its start line (the
        s3lect log says "started command" once the child is forked; the line
        comes a moment later, from the shell)."""
        terms = self.terms()
        return bool(terms) and (self.id, terms[-1]) in started_lines(self.marker)

    def kill9(self) -> None:
        """kill -9 of the whole group: the node and its CMD die at once, like a crash."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        finally:
            self._out.close()


def only_leader(nodes: list["Node"]) -> "Node | None":
    """The one node that leads, or None (none, or more than one)."""
    leading = [n for n in nodes if n.leading()]
    return leading[0] if len(leading) == 1 else None


def status_json(bin_: Path, lock: str, env: dict[str, str]) -> tuple[int, dict]:
    """`s3lect status LOCK --json`: (exit code 0 or 3, the parsed answer)."""
    r = run([str(bin_), "status", lock, "--json"], env)
    assert r.returncode in (0, 3), f"status failed ({r.returncode}): {r.stderr}"
    return r.returncode, json.loads(r.stdout)


def started_lines(marker: Path) -> list[tuple[str, int]]:
    """(leader id, term) of every CMD start, in order."""
    if not marker.exists():
        return []
    out = []
    for line in marker.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "start":
            out.append((parts[1], int(parts[2])))
    return out


def running_commands(tag: str) -> list[str]:
    """The arguments of every running `sleep <tag>...` process: a test gives
    each node the command `sleep <tag><n>` with a tag no other process uses,
    and this is the truth about which commands run, from /proc."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].endswith(b"sleep") and argv[1].startswith(tag.encode()):
            found.append(argv[1].decode())
    return found


CHECK_STORE_PASSED = "all 7 checks passed: this store enforces conditional writes"
CHECK_STORE_VERDICTS = (r"all \d+ checks passed: ", r"\d+ of \d+ checks FAILED: ", r"stopped: ")


def check_store_verdict(stdout: str) -> str:
    """The one verdict line `s3lect check-store` printed (passed, FAILED or
    stopped); fails the test when it printed none or more than one (issue 39
    item 2: a passing store was also told it FAILED)."""
    lines = [ln for ln in stdout.splitlines()
             if any(re.match(p, ln) for p in CHECK_STORE_VERDICTS)]
    assert len(lines) == 1, f"check-store printed {len(lines)} verdicts, not one:\n{stdout}"
    return lines[0]


# Release seen at the follower's next read (frequent 500 ms) + start; expiry
# takes at least 7 s at an 8 s lease (tests/s3/test_s3_signals.py's bound).
SIGNAL_TIMING = ["--lease-timeout", "8s", "--renew-interval", "1s", "--renew-deadline", "5s",
                 "--frequent-interval", "500ms", "--infrequent-interval", "1s"]
SIGNAL_HANDOVER_S = 4.0


def sighup_then_sigterm(nodes, what: str, ready=None) -> list[float]:
    """Issue 26 item 2, for every credential source: SIGHUP to the leader of nodes (forwarded: its command dies of it, and
    s3lect run releases and exits 128 + 1), then SIGTERM to the next leader
    (it stops its command, releases, exits 0). Each time the next node's
    command starts within SIGNAL_HANDOVER_S + 1.5 s: by the release, not
    after the lease. ready: a condition to wait for before the first signal
    (a credential refresh has happened). The handover times."""
    def leader_with_cmd(ns):
        n = only_leader(ns)
        return n if n is not None and n.cmd_wrote_start() else None

    took = []
    for sig, want_rc, line in ((signal.SIGHUP, 128 + signal.SIGHUP,
                                f"forwarding signal {int(signal.SIGHUP)} to command"),
                               (signal.SIGTERM, 0,
                                f"received signal {int(signal.SIGTERM)}: stopping")):
        live = [n for n in nodes if n.alive()]
        leader = wait_for(lambda: leader_with_cmd(live), 40, f"a leader ({what})")
        time.sleep(1.5)  # the others follow; the credential refresher runs
        if ready is not None and sig == signal.SIGHUP:
            wait_for(ready, 20, f"a credential refresh before the signals ({what})")
        t = time.monotonic()
        leader.proc.send_signal(sig)
        rc = leader.proc.wait(timeout=15)
        text = leader.text()
        assert rc == want_rc, f"{what}: {sig.name} to s3lect run: exit {rc}, want {want_rc}\n{text}"
        assert line in text and "releasing leadership" in text, f"{what}:\n{text}"
        rest = [n for n in live if n is not leader]
        wait_for(lambda: leader_with_cmd(rest), SIGNAL_HANDOVER_S + 6,
                 f"the next leader after {sig.name} ({what})")
        took.append(time.monotonic() - t)
        assert took[-1] < SIGNAL_HANDOVER_S + 1.5, (
            f"{what}: the next node led {took[-1]:.2f} s after {sig.name}: no release?")
    return took

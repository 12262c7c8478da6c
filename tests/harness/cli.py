# SPDX-License-Identifier: Apache-2.0
"""Helpers for driving the s3lect CLI and tests/c/s3_probe from tests."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from harness.servers import free_port
from harness.wait import wait_for  # noqa: F401 (re-exported: the suites import it from here)

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


def run(cmd: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def probe(bin_: Path, env: dict[str, str], op: str, url: str, *args: str) -> dict:
    """One store operation through tests/c/s3_probe; returns its JSON answer."""
    r = run([str(bin_), op, url, *args], env, timeout=60)
    assert r.returncode in (0, 3), f"s3_probe failed ({r.returncode}): {r.stderr}"
    return json.loads(r.stdout)


LOG = "log"  # Proc's stdout/stderr: into its log file


def node_env(**add: str) -> dict[str, str]:
    """This environment without AWS_* and S3LECT_* settings (but
    S3LECT_NEW_LOCK_WAIT), plus add: for nodes on the file store, which must
    not pick up a store or an option from the test's environment."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "S3LECT_")) or k == "S3LECT_NEW_LOCK_WAIT"}
    env.update(add)
    return env


class Proc:
    """One process a test starts, in a session (and process group) of its own,
    its output in a log file. stdout and stderr: LOG (the log file, both
    together when both are LOG), another path (a file of its own), or what
    subprocess.Popen takes (DEVNULL, PIPE, an open file). stop() leaves
    nothing of its group running, whatever state it is in."""

    def __init__(self, argv: list, log: Path | None, env: dict[str, str] | None = None, *,
                 stdout: Any = LOG, stderr: Any = LOG, stdin: Any = None):
        self.argv = [str(a) for a in argv]
        self.log = log
        self._files: list = []

        def where(to: Any) -> Any:
            if to is LOG:
                assert log is not None, "output to the log, but no log file"
                to = log
            if isinstance(to, Path):
                self._files.append(open(to, "w"))
                return self._files[-1]
            return to

        out = where(stdout)
        err = subprocess.STDOUT if stderr is LOG and stdout is LOG else where(stderr)
        try:
            self.proc = subprocess.Popen(self.argv, stdin=stdin, stdout=out, stderr=err, env=env,
                                         start_new_session=True)
        except BaseException:
            self.close_files()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_log(self, needle: str, timeout: float, what: str | None = None) -> str:
        """Waits until a line of the log holds needle; returns the first such line."""
        return wait_for(lambda: [ln for ln in self.text().splitlines() if needle in ln], timeout,
                        what or f"{needle!r} in {self.log}")[0]

    def signal(self, sig: int) -> None:
        """sig to the process alone (not its group), unless it has exited."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def kill9(self) -> None:
        """kill -9 of the whole group: the process and what it started in its
        group die at once, like a crash."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGKILL to the group (and SIGCONT, should it be stopped), the exit
        waited for, the log closed: even after a failure."""
        if self.proc.poll() is None:
            for sig in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    pass
        try:
            self.proc.wait(timeout=10)
        finally:
            self.close_files()

    def close_files(self) -> None:
        """Closes the files this object opened for the output."""
        for f in self._files:
            f.close()
        self._files.clear()

    def listening_ports(self) -> set[int]:
        """TCP ports this process listens on (from its fds and /proc/net/tcp{,6})."""
        inodes = set()
        for fd in Path(f"/proc/{self.proc.pid}/fd").iterdir():
            try:
                t = os.readlink(fd)
            except OSError:
                continue
            if t.startswith("socket:["):
                inodes.add(t[8:-1])
        ports = set()
        for f in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                lines = Path(f).read_text().splitlines()[1:]
            except OSError:
                continue
            for ln in lines:
                p = ln.split()
                if p[3] == "0A" and p[9] in inodes:  # LISTEN
                    ports.add(int(p[1].rsplit(":", 1)[1], 16))
        return ports


class Node(Proc):
    """One `s3lect run` process: `run --lock LOCK --id ID`, then extra
    (default FAST), --kill-timeout (None: the default), --metrics-listen on a
    free port (metrics=True: metrics_port), peer mode with certificates
    (peer=(cert, key, ca): --peer --addr on a free port, peer_port), then the
    command. The default command appends "start ID TERM" to the shared
    marker file TMP/cmd.log and then runs until it is stopped. Its log is
    TMP/ID.log unless log is given; env None: this process's environment."""

    def __init__(self, bin_: Path, tmp: Path, lock: str, node_id: str,
                 env: dict[str, str] | None = None, extra: list[str] | None = None, *,
                 cmd: list[str] | None = None, kill_timeout: str | None = "500ms",
                 metrics: bool = False, peer: tuple[Path, Path, Path] | None = None,
                 log: Path | None = None, stdout: Any = LOG, stderr: Any = LOG,
                 stdin: Any = None):
        self.id = node_id
        self.lock = lock
        self.marker = tmp / "cmd.log"
        self.metrics_port = free_port() if metrics else None
        self.peer_port = free_port() if peer else None
        if cmd is None:
            cmd = ["sh", "-c",
                   f'echo "start $S3LECT_LEADER_ID $S3LECT_TERM" >> {self.marker}; exec sleep 600']
        argv = [bin_, "run", "--lock", lock, "--id", node_id, *(FAST if extra is None else extra)]
        if kill_timeout is not None:
            argv += ["--kill-timeout", kill_timeout]
        if metrics:
            argv += ["--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
        if peer is not None:
            cert, key, ca = peer
            argv += ["--peer", "--addr", f"127.0.0.1:{self.peer_port}", "--peer-cert", cert,
                     "--peer-key", key, "--peer-ca", ca]
        super().__init__([*argv, "--", *cmd], log or tmp / f"{node_id}.log", env, stdout=stdout,
                         stderr=stderr, stdin=stdin)

    def terms(self) -> list[int]:
        return [int(t) for t in re.findall(r"s3lect: acquired leadership term=(\d+)", self.text())]

    def started_command(self) -> bool:
        """It has started its command at least once."""
        return "started command" in self.text()

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

    def started_terms(self) -> list[int]:
        """The term of every start line the default command of this node wrote."""
        return [t for i, t in started_lines(self.marker) if i == self.id]

    def metrics_text(self) -> str:
        """One scrape of --metrics-listen (metrics=True): the exposition text.
        OSError while nothing listens yet."""
        assert self.metrics_port is not None, "started without metrics=True"
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return r.read().decode()


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


#: The checks of `s3lect check-store --data`, in order (their names as printed).
DATA_CHECKS = [
    "data: create-if-absent (If-None-Match: *) creates the scratch object",
    "data: If-None-Match on an existing object is refused (412)",
    "data: a write with the current version (If-Match) succeeds",
    "data: a write with a stale version (If-Match) is refused (412) and changes nothing",
    "data: a fenced write stores its envelope (s3lect-fenced/1 ...) and reads back",
    "data: identical bytes written twice, fenced, get two versions",
    "data: a fenced read-modify-write over a stale version is refused",
    "data: an older term's put and read-modify-write after a newer term wrote the same bytes "
    "are fenced",
    "data: a fenced delete reads as not found, and an older term cannot create it again",
    "data: a second holder of a term is fenced after the first wrote",
]


def data_results(stdout: str) -> dict[str, str]:
    """The --data checks' lines (a FAIL's detail after the name): check -> "PASS"/"FAIL"."""
    out = {}
    for line in stdout.splitlines():
        line = line.strip()
        for check in DATA_CHECKS:
            if line[:4] in ("PASS", "FAIL") and line[6:].startswith(check):
                out[check] = line[:4]
    return out


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

# SPDX-License-Identifier: Apache-2.0
"""`s3lect run` as a supervisor: the command's whole process tree is dead before
another node can lead, the kill deadline is tied to the lease, and the
supervisor survives a closed log and forwards reload signals.

Real `s3lect run` processes on the file store (no S3). The supervised command
is a small Python program that starts hostile descendants — one in its own
process group that ignores SIGTERM, one that called setsid() and ignores
SIGTERM, and a double-forked daemon (setsid, SIGTERM ignored) — and each
process writes a heartbeat line stamped with time.monotonic() (one clock for
all processes on the host) to a shared log every 50 ms. "Dead before the next
leader started" means: no heartbeat of the old tree is stamped at or after
the new command's start line, and the old pids are gone.

Timings: lease 3 s, renew-deadline 2 s, renew 500 ms, so the largest safe
kill timeout is 3 s - 2 s - (2*3 s/1000 + 250 ms) = 744 ms. Bounds are
generous for a loaded 2-core machine; every wait is on a condition.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import LOG, Node
from harness.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"

SHORT = ["--lease-timeout", "3s", "--renew-deadline", "2s", "--renew-interval", "500ms",
         "--frequent-interval", "500ms", "--infrequent-interval", "1s"]
LARGEST_SAFE_MS = 3000 - 2000 - (2 * 3000 // 1000 + 250)  # 744

# The supervised command. argv: LOG KINDS MAIN_IGNORES_TERM
TREE = r'''
import os, signal, sys, time
log, kinds, main_ignores = sys.argv[1], [k for k in sys.argv[2].split(",") if k], sys.argv[3] == "1"
ident, term = os.environ["S3LECT_LEADER_ID"], os.environ["S3LECT_TERM"]

def w(line):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (line + "\n").encode())
    os.close(fd)

MAIN = os.getpid()

def beat(role):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    w(f"pid {ident} {role} {os.getpid()} {MAIN}")
    while True:
        w(f"alive {ident} {role} {os.getpid()} {time.monotonic():.6f}")
        time.sleep(0.05)

for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(sig, lambda s, f: w(f"got {ident} {s} {os.getpid()}"))
w(f"start {ident} {term} {os.getpid()} {time.monotonic():.6f}")
for k in kinds:
    if os.fork() == 0:
        if k == "group":          # same process group as the command
            beat(k)
        elif k == "setsid":       # its own session and group
            os.setsid()
            beat(k)
        elif k == "daemon":       # double fork: orphaned at once
            os.setsid()
            if os.fork() == 0:
                beat(k)
            os._exit(0)
        os._exit(0)
if main_ignores:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        pass
    w(f"alive {ident} main {os.getpid()} {time.monotonic():.6f}")
    time.sleep(0.05)
'''

KINDS = ("group", "setsid", "daemon")


def cli(*args, timeout=30):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout)


def pid_alive(pid: int) -> bool:
    """True unless the process is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


class Tree:
    """The shared log of every supervised command tree in one test."""

    def __init__(self, tmp: Path):
        self.prog = tmp / "tree.py"
        self.prog.write_text(TREE)
        self.log = tmp / "tree.log"

    def cmd(self, kinds=KINDS, main_ignores_term=True) -> list[str]:
        return [sys.executable, str(self.prog), str(self.log), ",".join(kinds),
                "1" if main_ignores_term else "0"]

    def lines(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [l.split() for l in self.log.read_text().splitlines() if l.strip()]

    def starts(self, ident: str | None = None) -> list[tuple[str, int, float]]:
        """(id, main pid, monotonic time) of each command start, in order."""
        return [(p[1], int(p[3]), float(p[4])) for p in self.lines()
                if p[0] == "start" and (ident is None or p[1] == ident)]

    def pids(self, main: int) -> dict[int, str]:
        """pid -> role of every process of the tree whose command is `main`."""
        out = {main: "main"}
        for p in self.lines():
            if p[0] == "pid" and int(p[4]) == main:
                out[int(p[3])] = p[2]
        return out

    def last_beat(self, main: int) -> dict[str, float]:
        """role -> time of its last heartbeat, for the tree of `main`."""
        pids = self.pids(main)
        out: dict[str, float] = {}
        for p in self.lines():
            if p[0] == "alive" and int(p[3]) in pids:
                out[p[2]] = max(out.get(p[2], 0.0), float(p[4]))
        return out

    def beating(self, ident: str, kinds) -> int:
        """The main pid of ident's latest tree once all of its `kinds` beat, else 0."""
        st = self.starts(ident)
        if not st:
            return 0
        main = st[-1][1]
        return main if set(kinds) | {"main"} <= set(self.last_beat(main)) else 0

    def alive(self, main: int) -> dict[str, int]:
        return {role: pid for pid, role in self.pids(main).items() if pid_alive(pid)}


def start_node(tmp: Path, lock: str, ident: str, cmd: list[str], extra=SHORT,
               stderr=None) -> Node:
    """A harness Node with command cmd, at the default kill timeout, its
    stderr in TMP/ID.log (or stderr, e.g. a pipe)."""
    return Node(BIN, tmp, lock, ident, None, extra, cmd=cmd, kill_timeout=None,
                stdout=subprocess.DEVNULL, stderr=LOG if stderr is None else stderr)


@pytest.fixture
def env(tmp_path):
    nodes: list[Node] = []
    tree = Tree(tmp_path)
    lock = f"file://{tmp_path}/leader.json"

    def node(ident, cmd=None, **kw):
        n = start_node(tmp_path, lock, ident, cmd or tree.cmd(), **kw)
        nodes.append(n)
        return n
    yield tree, node, lock
    for n in nodes:
        n.stop()
    # The command trees: whatever is left must not outlive the test.
    for _, main, _ in tree.starts():
        for pid in tree.pids(main):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def assert_tree_dead_before(tree: Tree, old_main: int, new_start: float, what: str):
    late = {role: round(t - new_start, 3) for role, t in tree.last_beat(old_main).items()
            if t >= new_start}
    assert not late, f"the old tree's processes beat after {what} (s after): {late}"
    alive = tree.alive(old_main)
    assert not alive, f"the old tree's processes are alive after {what}: {alive}"


@pytest.mark.parametrize("how", ["sigterm", "kill9", "lost", "frozen"])
def test_whole_tree_dead_before_next_command(env, how):
    """sigterm: graceful stop of the leader's s3lect run; kill9: SIGKILL of the
    s3lect run process alone; lost: the leader is paused past its renew
    deadline and resumed, so it finds its lease gone (it may win its own
    record back and start a new command: the old tree must be dead first);
    frozen: the leader stays paused (only its supervising child can act, at
    the hard deadline). Each time the next command — b's, or a's next — starts
    only after every process of the old tree is dead."""
    tree, node, _ = env
    a = node("a")
    old = wait_for(lambda: a.started_command() and tree.beating("a", KINDS), 30,
                   "a's command tree running")
    b = node("b")
    wait_for(lambda: "leader is a" in b.text(), 20, "b following a")
    t0 = time.monotonic()
    if how == "sigterm":
        a.proc.send_signal(signal.SIGTERM)
    elif how == "kill9":
        a.proc.send_signal(signal.SIGKILL)
    else:
        a.proc.send_signal(signal.SIGSTOP)
    if how == "lost":
        # Resume after the renew deadline (2 s) and before the lease ends.
        time.sleep(2.3)
        a.proc.send_signal(signal.SIGCONT)
    if how in ("sigterm", "kill9"):
        a.proc.wait(timeout=20)
        exited = time.monotonic()
        alive = tree.alive(old)
        if how == "sigterm":
            # s3lect run exits only once its whole tree is gone.
            assert a.proc.returncode == 0, a.text()
            assert not alive, f"s3lect run exited with its tree alive: {alive}"
            late = {r: round(t - exited, 3) for r, t in tree.last_beat(old).items()
                    if t > exited}
            assert not late, f"heartbeats after s3lect run exited: {late}"
    new = wait_for(lambda: [s for s in tree.starts() if s[1] != old], 30,
                   "the next command to start")[0]
    took = time.monotonic() - t0
    assert_tree_dead_before(tree, old, new[2], f"{new[0]}'s command started")
    if how == "lost":
        assert "lost leadership" in a.text(), a.text()
    else:
        assert new[0] == "b", new
    print(f"{how}: {new[0]}'s command started {took:.2f}s after the event")


def test_hard_deadline_refuses_unsafe_kill_timeout(tmp_path):
    r = cli("run", "--lock", f"file://{tmp_path}/l.json", *SHORT, "--kill-timeout", "10s",
            "--", "true")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and f"largest safe value is {LARGEST_SAFE_MS}ms" in lines[0], r.stderr
    # Just above the largest safe value is refused, the value itself accepted.
    r = cli("run", "--lock", f"file://{tmp_path}/l.json", *SHORT, "--kill-timeout",
            f"{LARGEST_SAFE_MS + 1}ms", "--", "true")
    assert r.returncode == 2, r.stderr
    r = cli("run", "--lock", f"file://{tmp_path}/l2.json", *SHORT, "--kill-timeout",
            f"{LARGEST_SAFE_MS}ms", "--", "true")
    assert r.returncode == 0, r.stderr
    # With the defaults (15 s lease, 10 s deadline) the largest safe value is 4720 ms.
    r = cli("run", "--lock", f"file://{tmp_path}/l3.json", "--kill-timeout", "10s", "--", "true")
    assert r.returncode == 2 and "largest safe value is 4720ms" in r.stderr, r.stderr


def test_default_kill_timeout_stops_term_ignoring_command_in_time(env):
    """A command that ignores SIGTERM, default kill timeout: SIGKILL comes at
    the latest the largest safe kill timeout after SIGTERM."""
    tree, node, _ = env
    a = node("a", tree.cmd(kinds=(), main_ignores_term=True))
    main = wait_for(lambda: a.started_command() and tree.beating("a", ()), 30, "a's command")
    t0 = time.monotonic()
    a.proc.send_signal(signal.SIGTERM)
    a.proc.wait(timeout=20)
    took = time.monotonic() - t0
    assert a.proc.returncode == 0
    assert "did not stop in time: SIGKILL" in a.text(), a.text()
    assert not pid_alive(main)
    # 744 ms of grace, plus the release and slack for a loaded machine.
    assert took < LARGEST_SAFE_MS / 1000 + 3, f"stop took {took:.2f}s"


def test_closed_stderr_pipe_does_not_kill_supervisor(env, tmp_path):
    tree, node, lock = env
    a = node("a", tree.cmd(kinds=(), main_ignores_term=False), stderr=subprocess.PIPE)
    # Read the log until the command runs, then close our end of the pipe.
    seen = b""
    deadline = time.monotonic() + 30
    os.set_blocking(a.proc.stderr.fileno(), False)
    while b"started command" not in seen:
        assert time.monotonic() < deadline, f"no 'started command' in {seen!r}"
        try:
            chunk = a.proc.stderr.read()
        except BlockingIOError:
            chunk = None
        seen += chunk or b""
        time.sleep(0.05)
    wait_for(lambda: tree.starts("a"), 30, "a's command")
    a.proc.stderr.close()
    # SIGTERM makes it log (to the closed pipe) while it stops the command,
    # releases the lock and exits.
    a.proc.send_signal(signal.SIGTERM)
    rc = a.proc.wait(timeout=20)
    assert rc == 0, f"exit status {rc} (141 or -13: SIGPIPE)"
    st = json.loads(cli("status", "--json", lock).stdout)
    assert st["released"] is True, st


def test_hup_usr1_usr2_are_forwarded_to_the_command(env):
    tree, node, _ = env
    a = node("a", tree.cmd(kinds=(), main_ignores_term=False))
    wait_for(lambda: a.started_command() and tree.starts("a"), 30, "a's command")
    main = tree.starts("a")[0][1]
    for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        a.proc.send_signal(sig)
        wait_for(lambda: ["got", "a", str(int(sig)), str(main)] in tree.lines(), 20,
                 f"the command to get {sig.name}")
    assert a.proc.poll() is None, "s3lect run stopped on a reload signal"
    assert len(tree.starts("a")) == 1, "the command was restarted"
    assert pid_alive(main)
    assert "forwarding signal 1" in a.text(), a.text()


def test_follower_stop_does_not_release(env):
    tree, node, _ = env
    a = node("a", tree.cmd(kinds=(), main_ignores_term=False))
    wait_for(lambda: a.started_command(), 30, "a leading")
    b = node("b", tree.cmd(kinds=(), main_ignores_term=False))
    wait_for(lambda: "leader is a" in b.text(), 20, "b following a")
    b.proc.send_signal(signal.SIGTERM)
    assert b.proc.wait(timeout=20) == 0
    assert "releasing" not in b.text(), b.text()
    assert a.proc.poll() is None and "lost leadership" not in a.text()


def test_shim_killed_leaves_nothing_behind(env):
    """If the supervising child itself is SIGKILLed, s3lect run (a subreaper)
    kills what it left and stops; nothing runs on."""
    tree, node, lock = env
    a = node("a")
    main = wait_for(lambda: a.started_command() and tree.beating("a", KINDS), 30,
                    "a's command tree")
    with open(f"/proc/{main}/stat") as f:
        stat = f.read()
    shim = int(stat[stat.rindex(")") + 2:].split()[1])
    assert shim != a.proc.pid, "the command runs under a supervising child"
    os.kill(shim, signal.SIGKILL)
    a.proc.wait(timeout=20)
    alive = tree.alive(main)
    assert not alive, alive
    assert "supervising process" in a.text(), a.text()
    st = json.loads(cli("status", "--json", lock).stdout)
    assert st["released"] is True, st

# SPDX-License-Identifier: Apache-2.0
"""One SIGTERM per process and stop (issue 39 item 1, docs/cli.md "Stopping
the command"). Many programs read a second SIGTERM as "give up the graceful
stop" (Go's signal.NotifyContext once its stop function ran, Python's
default handler after a first custom one, JVM shutdown hooks): `s3lect run`
sends each process of the command's tree exactly one SIGTERM per stop, then
SIGKILL at the kill deadline, whatever mix of process group, session and
grandchildren the tree has.

The command here counts: its main process, a child in its group, a
grandchild in its group, a `setsid` child and that child's own child each
log every SIGTERM they get, stay up 0.6 s after the first (long enough to
see a second one sent by the same stop) and exit 0. Stops: a SIGTERM to
`s3lect run`, a lost lease (the node paused past its renew deadline; it
stops the tree and may take its record back and start it again), and the
command's main process exiting by itself (the rest of the tree is stopped
then). A Go job with the standard signal.NotifyContext pattern finishes its
shutdown in 20 of 20 stops."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.cli import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
FAST = ["--lease-timeout", "6s", "--renew-deadline", "2s", "--renew-interval", "500ms",
        "--frequent-interval", "500ms", "--infrequent-interval", "1s", "--kill-timeout", "2s"]

# argv: LOG MAIN_EXITS_AFTER_S (0: runs until signalled)
COUNTER = r'''
import os, signal, sys, time
log, main_exits = sys.argv[1], float(sys.argv[2])
run = os.environ["S3LECT_TERM"]
def w(line):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (line + "\n").encode())
    os.close(fd)
def counted(role):
    got = []
    def on_term(s, f):
        got.append(time.monotonic())
        w(f"term {run} {role} {os.getpid()} {len(got)}")
    signal.signal(signal.SIGTERM, on_term)
    w(f"up {run} {role} {os.getpid()}")
    end = time.monotonic() + 60
    while time.monotonic() < end and not (got and time.monotonic() > got[0] + 0.6):
        time.sleep(0.02)
    w(f"exit {run} {role} {os.getpid()}")
    os._exit(0)
if os.fork() == 0:                     # a child in the command's group
    if os.fork() == 0:
        counted("grandchild")          # ... and its child, same group
    counted("group")
if os.fork() == 0:                     # a child in a session of its own
    os.setsid()
    if os.fork() == 0:
        counted("setsid-child")
    counted("setsid")
if main_exits > 0:
    w(f"up {run} main {os.getpid()}")
    time.sleep(main_exits)
    w(f"exit {run} main {os.getpid()}")
    os._exit(0)
counted("main")
'''
ROLES = {"main", "group", "grandchild", "setsid", "setsid-child"}


class Counting:
    def __init__(self, tmp: Path):
        self.prog = tmp / "counter.py"
        self.prog.write_text(COUNTER)
        self.log = tmp / "signals.log"

    def cmd(self, main_exits: float = 0) -> list[str]:
        return [sys.executable, str(self.prog), str(self.log), str(main_exits)]

    def lines(self) -> list[list[str]]:
        return [x.split() for x in self.log.read_text().splitlines()] if self.log.exists() else []

    def runs(self) -> list[str]:
        out = []
        for p in self.lines():
            if p[0] == "up" and p[1] not in out:
                out.append(p[1])
        return out

    def up(self, run: str) -> set[str]:
        return {p[2] for p in self.lines() if p[0] == "up" and p[1] == run}

    def exited(self, run: str) -> set[str]:
        return {p[2] for p in self.lines() if p[0] == "exit" and p[1] == run}

    def terms(self, run: str) -> Counter:
        return Counter(p[2] for p in self.lines() if p[0] == "term" and p[1] == run)


def _start(tmp: Path, lock: str, ident: str, cmd: list[str], extra=FAST) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_"))}
    env["S3LECT_NEW_LOCK_WAIT"] = "0"
    return subprocess.Popen([str(BIN), "run", "--lock", lock, "--id", ident, *extra, "--", *cmd],
                            stdout=subprocess.DEVNULL, stderr=open(tmp / f"{ident}.log", "a"),
                            env=env, start_new_session=True)


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.kill(p.pid, signal.SIGCONT)
        p.kill()
    p.wait(timeout=10)


@pytest.mark.parametrize("stop", ["sigterm", "lost_lease", "main_exits"])
def test_each_process_gets_one_sigterm_per_stop(tmp_path, stop):
    c = Counting(tmp_path)
    lock = f"file://{tmp_path}/lock.json"
    p = _start(tmp_path, lock, "a", c.cmd(main_exits=1.5 if stop == "main_exits" else 0))
    try:
        wait_for(lambda: c.runs() and c.up(c.runs()[0]) == ROLES, 20, "the whole tree up")
        run = c.runs()[0]
        if stop == "sigterm":
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=20) == 0
        elif stop == "lost_lease":
            # Past the renew deadline (2 s), well before the hard deadline:
            # it finds its lease lost and stops the tree with SIGTERM.
            p.send_signal(signal.SIGSTOP)
            time.sleep(2.6)
            p.send_signal(signal.SIGCONT)
        want = ROLES - ({"main"} if stop == "main_exits" else set())
        wait_for(lambda: c.exited(run) >= want | ({"main"} if stop == "main_exits" else set()),
                 20, f"the tree of run {run} to stop")
        time.sleep(0.3)  # a late duplicate would land by now
        got = c.terms(run)
        assert got == Counter({r: 1 for r in want}), \
            f"{stop}: SIGTERMs per process {dict(got)} (each should get exactly one)"
        if stop == "lost_lease":
            text = (tmp_path / "a.log").read_text()
            assert "lost leadership" in text, text
    finally:
        _kill(p)
        for x in c.lines():
            if x[0] == "up":
                try:
                    os.kill(int(x[3]), signal.SIGKILL)
                except ProcessLookupError:
                    pass


GO_JOB = r'''package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// The pattern of Go's documentation: stop() restores the default
// behaviour, so a second SIGTERM during the shutdown kills the job (143).
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	f, _ := os.OpenFile(os.Args[1], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	f.WriteString("up " + os.Getenv("S3LECT_TERM") + "\n")
	<-ctx.Done()
	stop()
	time.Sleep(300 * time.Millisecond) // flushing its state
	f.WriteString("flushed " + os.Getenv("S3LECT_TERM") + "\n")
	f.Close()
}
'''


def test_go_notify_context_job_shuts_down_gracefully_every_time(tmp_path):
    go = shutil.which("go")
    if not go:
        pytest.skip("no Go toolchain (scripts/deps installs one): the Go job cannot be built")
    src = tmp_path / "job"
    src.mkdir()
    (src / "main.go").write_text(GO_JOB)
    (src / "go.mod").write_text("module job\n\ngo 1.21\n")
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=mod")
    r = subprocess.run([go, "build", "-o", str(tmp_path / "job-bin"), "."], cwd=src, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    log = tmp_path / "job.log"
    lock = f"file://{tmp_path}/lock.json"
    stops = 20
    for i in range(stops):
        p = _start(tmp_path, lock, "a", [str(tmp_path / "job-bin"), str(log)])
        try:
            wait_for(lambda: log.exists() and log.read_text().count("up ") == i + 1, 20,
                     f"the job's start #{i + 1}")
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=20)
        finally:
            _kill(p)
        assert rc == 0, f"stop #{i + 1}: s3lect run exited {rc}"
        flushed = log.read_text().count("flushed ")
        assert flushed == i + 1, f"stop #{i + 1}: the job did not finish its shutdown " \
                                 f"({flushed} of {i + 1} stops flushed):\n" + \
                                 (tmp_path / "a.log").read_text()[-1500:]

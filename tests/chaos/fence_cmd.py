#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The CMD of the chaos fence workload (test_chaos_fence.py): while its node
leads, it appends lines to one object by read-modify-write through
`s3lect fence get` / `s3lect fence cas`, and records every attempt.

    fence_cmd.py CMD_LOG EVENTS_LOG WORKDIR BIN URL [STORE OPTIONS...]

Each attempt: `s3lect fence get URL` (exit 3: no object yet), then the
object's bytes plus the line "TERM SEQ NODE\\n" written with `s3lect fence
cas --version V URL` (create-only when there was none). SEQ counts this
process's attempts, so no two attempts ever write the same line. The
outcome goes to EVENTS_LOG as one line

    KIND TERM SEQ NODE PID T_START T_END

with KIND ack (exit 0: the append is acknowledged), fenced (75), precondition
(4: read again), retries (5), error (anything else), and T_* CLOCK_MONOTONIC
seconds before the write started and after it ended. CMD_LOG gets
leader_cmd.py's "start"/"end" lines (the test finds the leader by them).

A write is never cut short by SIGTERM: the write's process ignores it, and
this script exits once the write's outcome is recorded (a command that
finishes its in-flight write on stop; `s3lect run` SIGKILLs it anyway after
--kill-timeout). So a zombie's write that was in flight when its node froze
really reaches the store.

WORKDIR/hold-NODE (made by the test) stops the script after its read, before
its write: it writes WORKDIR/held-NODE and waits (at most 60 s) until the
hold file is gone. The test freezes the node there, so that the write comes
after the successor's first write, deterministically.

S3LECT_FENCE_MODE=plain is the broken fence the checker must catch: the
write is an unconditional PUT of the bytes (s3:// via
tests/harness/s3client.py and the node's --endpoint, file:// or a path
directly), not fenced; everything else is the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

EXIT_KIND = {0: "ack", 75: "fenced", 4: "precondition", 5: "retries"}
PAUSE_S = 0.05  # between attempts
HOLD_MAX_S = 60.0
CALL_TIMEOUT_S = 30.0


class Workload:
    def __init__(self, argv: list[str]):
        (self.cmd_log, self.events, workdir, self.bin, self.url), self.opts = argv[:5], argv[5:]
        self.workdir = Path(workdir)
        self.term = os.environ.get("S3LECT_TERM", "0")
        self.node = os.environ.get("S3LECT_LEADER_ID", "?")
        self.pid = os.getpid()
        self.plain = os.environ.get("S3LECT_FENCE_MODE", "fenced") == "plain"
        self.cmd_fd = os.open(self.cmd_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.ev_fd = os.open(self.events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.scratch = self.workdir / f"body-{self.node}-{self.pid}"
        self.busy = False
        self.stopping = False

    def lifeline(self, event: str) -> None:
        os.write(self.cmd_fd, f"{event} {self.term} {self.node} {self.pid} "
                 f"{time.monotonic():.6f}\n".encode())

    def on_term(self, _signum, _frame) -> None:
        if self.busy:  # finish the write first
            self.stopping = True
            return
        self.end()

    def end(self) -> None:
        self.lifeline("end")
        try:
            self.scratch.unlink()
        except OSError:
            pass
        os._exit(0)

    def read(self) -> tuple[bytes, str | None] | None:
        """(bytes, version; None: no object) or None when the read failed."""
        try:
            r = subprocess.run([self.bin, "fence", "get", *self.opts, self.url,
                                str(self.scratch)], capture_output=True, timeout=CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode == 3:
            return b"", None
        if r.returncode != 0:
            return None
        version = r.stdout.decode().split()[0]
        return self.scratch.read_bytes(), version

    def hold(self) -> None:
        hold = self.workdir / f"hold-{self.node}"
        if not hold.exists():
            return
        held = self.workdir / f"held-{self.node}"
        held.write_text(f"{self.term} {self.pid}\n")
        end = time.monotonic() + HOLD_MAX_S
        while hold.exists() and time.monotonic() < end:
            time.sleep(0.005)
        try:
            held.unlink()
        except OSError:
            pass

    def write_fenced(self, data: bytes, version: str | None) -> int:
        self.scratch.write_bytes(data)
        args = [self.bin, "fence", "cas", *self.opts]
        if version is not None:
            args += ["--version", version]
        try:
            r = subprocess.run([*args, self.url, str(self.scratch)], capture_output=True,
                               timeout=CALL_TIMEOUT_S,
                               preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
        except subprocess.TimeoutExpired:
            return -1
        return r.returncode

    def write_plain(self, data: bytes) -> int:
        """The broken fence: an unconditional write of the bytes."""
        u = urlparse(self.url)
        if u.scheme in ("", "file"):
            path = Path(u.path if u.scheme else self.url)
            tmp = path.with_name(path.name + f".plain-{self.pid}")
            tmp.write_bytes(data)
            tmp.replace(path)
            return 0
        if u.scheme != "s3":
            return 2
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from harness.s3client import S3Client
        endpoint = self.opts[self.opts.index("--endpoint") + 1]
        c = S3Client(endpoint, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                     os.environ.get("AWS_REGION", "us-east-1"))
        try:
            r = c.put(u.netloc, u.path.lstrip("/"), data)
        except OSError:
            return 1
        return 0 if r.status == 200 else 1

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_term)
        signal.signal(signal.SIGINT, self.on_term)
        self.lifeline("start")
        seq = 0
        while True:
            self.busy = True
            got = self.read()
            if got is not None:
                self.hold()
                body, version = got
                seq += 1
                line = f"{self.term} {seq} {self.node}\n".encode()
                t0 = time.monotonic()
                rc = self.write_plain(body + line) if self.plain else \
                    self.write_fenced(body + line, version)
                t1 = time.monotonic()
                kind = EXIT_KIND.get(rc, "error")
                os.write(self.ev_fd, f"{kind} {self.term} {seq} {self.node} {self.pid} "
                         f"{t0:.6f} {t1:.6f}\n".encode())
            self.busy = False
            if self.stopping:
                self.end()
            time.sleep(PAUSE_S)


if __name__ == "__main__":
    if len(sys.argv) < 6:
        print("usage: fence_cmd.py CMD_LOG EVENTS_LOG WORKDIR BIN URL [STORE OPTIONS...]",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(Workload(sys.argv[1:]).run())

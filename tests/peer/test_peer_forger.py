# SPDX-License-Identifier: Apache-2.0
"""The successor slot cannot be hijacked (issue 38 item 6, docs/peer.md "One
successor"): a local process that reads the leader's endpoint (the etag it
shows) and floods it with long polls under forged `?process=` tokens is never
named successor, so the real followers are not told to yield and every
SIGTERM handover stays as fast as without it.

Three `s3lect run` nodes on a file lock at the defaults of peer mode (on,
zero-config: a self-signed key pinned by the record), short timings. A
flooder keeps eight long polls open on whichever node leads, each with a
fresh random token and no proof. 20 SIGTERM handovers: the time from the
signal until another node's command runs (watched in /proc), p99 ≤ 0.5 s
(before the fix: 3.3 to 6.7 s, a frequent interval of yielding). The
stopped node is started again before the next trial."""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import ssl
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

from harness.cli import running_commands, wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
# Frequent 2 s: a follower told to yield reads 1.3 to 2.7 s later, so a
# hijacked slot shows far above the 0.5 s bound.
TIMING = ["--lease-timeout", "4s", "--renew-interval", "1s", "--renew-deadline", "2s",
          "--frequent-interval", "2s", "--infrequent-interval", "3s", "--kill-timeout", "500ms"]
TRIALS = 20
FLOODERS = 8


class Flooder:
    """Long polls under forged tokens on the node the lock record names."""

    def __init__(self, lock_path: Path):
        self.lock_path = lock_path
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.inflight: dict[str, int] = {}  # leader id -> open long polls
        self.sent = 0
        self.named = 0  # answers that handed the flooder a released record
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE  # the attacker pins nothing
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(FLOODERS)]
        for t in self.threads:
            t.start()

    def _leader(self) -> tuple[str, str] | None:
        try:
            rec = json.loads(self.lock_path.read_text())
        except (OSError, ValueError):
            return None
        if not rec.get("leaderAddr"):
            return None
        return rec["leaderID"], rec["leaderAddr"]

    def _run(self) -> None:
        end = time.monotonic() + 600  # bounded, whatever happens to the test
        while not self.stop.is_set() and time.monotonic() < end:
            who = self._leader()
            if not who:
                time.sleep(0.05)
                continue
            lid, addr = who
            host, port = addr.rsplit(":", 1)
            conn = http.client.HTTPSConnection(host, int(port), timeout=10, context=self.ctx)
            try:
                conn.request("GET", "/health/leadership")  # what the endpoint shows anyone
                r = conn.getresponse()
                body = r.read()
                if r.status != 200:
                    time.sleep(0.05)
                    continue
                etag = json.loads(body)["etag"]
                q = urllib.parse.urlencode({"wait": "8000", "etag": etag,
                                            "process": secrets.token_hex(16)})
                with self.lock:
                    self.inflight[lid] = self.inflight.get(lid, 0) + 1
                    self.sent += 1
                try:
                    conn.request("GET", f"/health/leadership?{q}")
                    ans = conn.getresponse().read()
                finally:
                    with self.lock:
                        self.inflight[lid] -= 1
                if b'"released"' in ans:
                    with self.lock:
                        self.named += 1
            except (OSError, ValueError, KeyError, http.client.HTTPException):
                time.sleep(0.05)
            finally:
                conn.close()

    def polls_on(self, lid: str) -> int:
        with self.lock:
            return self.inflight.get(lid, 0)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)


def test_forged_tokens_do_not_slow_handovers(tmp_path):
    lock_path = tmp_path / "lock.json"
    lock = f"file://{lock_path}"
    tag = f"{60000 + secrets.randbelow(9000)}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_"))}
    env["S3LECT_NEW_LOCK_WAIT"] = "0"
    procs: dict[str, subprocess.Popen] = {}
    logs = {n: tmp_path / f"{n}.log" for n in "abc"}

    def start(n: str) -> None:
        procs[n] = subprocess.Popen(
            [str(BIN), "run", "--lock", lock, "--id", n, *TIMING, "--",
             "sleep", f"{tag}{'abc'.index(n) + 1}"],
            stdout=subprocess.DEVNULL, stderr=open(logs[n], "a"), env=env,
            start_new_session=True)

    def leader() -> str | None:
        now = running_commands(tag)
        return "abc"[int(now[0][-1]) - 1] if len(now) == 1 else None

    flooder = None
    took: list[float] = []
    try:
        for n in "abc":
            start(n)
            time.sleep(0.3)
        flooder = Flooder(lock_path)
        for i in range(TRIALS):
            ldr = wait_for(leader, 20, "one command")
            # The followers on their long polls, the flooder on its own.
            wait_for(lambda: flooder.polls_on(ldr) >= FLOODERS // 2, 10,
                     f"the flooder's long polls on {ldr}")
            time.sleep(1.5)
            t0 = time.monotonic()
            procs[ldr].send_signal(signal.SIGTERM)
            new = None
            while time.monotonic() < t0 + 20:
                now = running_commands(tag)
                assert len(now) <= 1, f"two commands at once: {now}"
                if now and now[0] != f"{tag}{'abc'.index(ldr) + 1}":
                    new = now[0]
                    break
                time.sleep(0.01)
            assert new, f"trial {i + 1}: no new leader within 20 s of SIGTERM to {ldr}"
            took.append(time.monotonic() - t0)
            assert procs[ldr].wait(timeout=10) == 0
            start(ldr)
        took.sort()
        print(f"{TRIALS} SIGTERM handovers under {FLOODERS} forged long polls "
              f"({flooder.sent} sent, {flooder.named} named successor): "
              f"p50 {took[len(took) // 2]:.3f} s, max {took[-1]:.3f} s")
        assert flooder.named == 0, f"a forged check was named successor {flooder.named} times"
        assert took[-1] <= 0.5, f"handover p99 (the max of {TRIALS}) {took[-1]:.3f} s: {took}"
    finally:
        if flooder:
            flooder.close()
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)

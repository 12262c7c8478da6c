# SPDX-License-Identifier: Apache-2.0
"""Renewal latency while credentials are refreshed (issue 15).

One `s3lect run` leader whose credentials come from a credential_process
that mints real MinIO credentials (MinIO's STS, AssumeRole) and reports them
as expiring 6 s later, so the chain refreshes every ~4 s in the background.
A timing proxy between s3lect and MinIO records every request's latency
(request sent to first byte of the answer). Three configurations:

- static: the MinIO root keys in the environment (no refresh at all);
- process: the minting credential_process (a refresh every ~4 s);
- slow-process: the same process sleeping 2 s before it answers — if a
  renewal ever waited for a refresh, its latency would show the 2 s.

Reported: PUT (renewal) latency percentiles overall and for the PUTs sent
while a credential process was running, refreshes seen, and step-downs.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import REPO, fmt_s, log, md_table, percentile

STS_PY = REPO / "tests" / "harness" / "sts.py"
TIMING = ["--lease-timeout", "3s", "--renew-interval", "500ms", "--renew-deadline", "2s",
          "--frequent-interval", "500ms", "--infrequent-interval", "1s"]


class TimingProxy:
    """Forwards loopback connections to upstream; times each request (first
    bytes of a request line to first bytes of the status line)."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.samples: list[tuple[float, str, float]] = []  # (wall start, method, latency s)
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            u = socket.create_connection(self.upstream)
            pending: list[tuple[float, float, str]] = []
            for a, b, up in ((c, u, True), (u, c, False)):
                t = threading.Thread(target=self._pipe, args=(a, b, up, pending), daemon=True)
                t.start()
                self.threads.append(t)

    def _pipe(self, src, dst, upstream_bound, pending):
        try:
            while not self.stop.is_set():
                data = src.recv(65536)
                if not data:
                    break
                now = time.monotonic()
                if upstream_bound and data[:4] in (b"PUT ", b"GET "):
                    pending.append((time.time(), now, data[:3].decode()))
                elif not upstream_bound and data.startswith(b"HTTP/1.") and pending:
                    wall, t0, method = pending.pop(0)
                    with self.lock:
                        self.samples.append((wall, method, now - t0))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.sock.close()


@dataclass
class Run:
    name: str
    puts: list[float] = field(default_factory=list)
    puts_during: list[float] = field(default_factory=list)
    refreshes: int = 0
    lost: int = 0
    terms: int = 0


def _process_script(work: Path, server, sleep_s: float) -> tuple[Path, Path]:
    times = work / "process-times"
    script = work / f"mint-{sleep_s}.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"start=$(date +%s.%N)\nsleep {sleep_s}\n"
        f"export STS_ACCESS_KEY='{server.access_key}' STS_SECRET_KEY='{server.secret_key}'\n"
        f"'{sys.executable}' '{STS_PY}' process {server.endpoint} --report-seconds 6\n"
        f"rc=$?\necho \"$start $(date +%s.%N)\" >> '{times}'\nexit $rc\n")
    script.chmod(0o700)
    return script, times


def run_one(name: str, s3lect: Path, server, seconds: float, work: Path, logdir: Path,
            sleep_s: float | None) -> Run:
    work.mkdir(parents=True, exist_ok=True)
    proxy = TimingProxy(("127.0.0.1", server.port))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(work), AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
               AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}",
               AWS_CONFIG_FILE=str(work / "config"))
    times = work / "none"
    if sleep_s is None:
        env.update(AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=server.secret_key)
        (work / "config").write_text("")
    else:
        script, times = _process_script(work, server, sleep_s)
        (work / "config").write_text(f"[profile minted]\ncredential_process = {script}\n")
        env["AWS_PROFILE"] = "minted"
    logf = open(logdir / f"creds-{name}.log", "w")
    lock = f"s3://{server.bucket}/bench/creds-{name}-{int(time.time())}.json"
    p = subprocess.Popen([str(s3lect), "run", "--lock", lock, "--id", name, *TIMING, "--",
                          "sleep", "3600"], env=env, stdout=logf, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        time.sleep(seconds)
    finally:
        p.terminate()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
        logf.close()
        proxy.close()
    text = (logdir / f"creds-{name}.log").read_text(errors="replace")
    r = Run(name)
    r.lost = text.count("lost leadership") - text.count("reason=stopped")
    r.terms = text.count("acquired leadership")
    spans = []
    if times.exists():
        for ln in times.read_text().splitlines():
            a, b = ln.split()
            spans.append((float(a), float(b)))
    r.refreshes = max(0, len(spans) - 1)
    settle = min((w for w, m, _ in proxy.samples), default=0) + 5
    for wall, method, lat in proxy.samples:
        if method != "PUT" or wall < settle:
            continue
        r.puts.append(lat)
        if any(a <= wall <= b for a, b in spans):
            r.puts_during.append(lat)
    return r


def run_all(s3lect: Path, server, quick: bool, work: Path, logdir: Path) -> list[Run]:
    seconds = 20 if quick else 60
    out = []
    for name, sleep_s in (("static", None), ("process", 0.0), ("slow-process", 2.0)):
        log(f"creds: {name}, {seconds} s")
        out.append(run_one(name, s3lect, server, seconds, work / name, logdir, sleep_s))
    return out


def _ms(values: list[float], p: float) -> str:
    return f"{percentile(values, p) * 1000:.1f}" if values else "-"


def report(runs: list[Run]) -> tuple[str, str, list[str]]:
    rows = [[r.name, r.refreshes, len(r.puts), _ms(r.puts, 50), _ms(r.puts, 99),
             f"{max(r.puts) * 1000:.1f}" if r.puts else "-", len(r.puts_during),
             _ms(r.puts_during, 50), f"{max(r.puts_during) * 1000:.1f}" if r.puts_during else "-",
             r.terms, r.lost] for r in runs]
    body = (
        __doc__.split("\n\n", 1)[1] + "\n" +
        md_table(["credentials", "refreshes", "renewal PUTs", "p50 ms", "p99 ms", "max ms",
                  "PUTs during a refresh", "p50 ms (during)", "max ms (during)",
                  "terms", "step-downs"], rows) + "\n")
    summary = "\n".join(f"  {r.name}: {r.refreshes} refreshes, PUT p99 {_ms(r.puts, 99)} ms, "
                        f"max during a refresh {max(r.puts_during) * 1000 if r.puts_during else 0:.1f} ms, "
                        f"{r.lost} step-downs" for r in runs)
    problems = []
    for r in runs:
        if r.lost or r.terms != 1:
            problems.append(f"creds {r.name}: {r.terms} terms, {r.lost} step-downs")
        if r.name == "slow-process" and r.puts_during and max(r.puts_during) > 1.0:
            problems.append(f"creds slow-process: a renewal took {max(r.puts_during):.2f} s "
                            "during a refresh")
    return body, summary, problems

# SPDX-License-Identifier: Apache-2.0
"""Nodes of both implementations on one lock, for tests/interop: Go s3lect
(bench/peers/gos3lect) and `s3lect run`, each through its own counting proxy,
every stderr line stamped with time.monotonic() on arrival."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

from harness import cli
from harness.countproxy import CountingProxy
from harness.servers import free_port

# Lease 6 s (so a takeover of a released record, bounded by one poll + 2 s,
# is told apart from waiting the lease out), renew 1 s. Go s3lect renews and
# polls every FrequentInterval; its LeaderTimeout is our lease.
LEASE = 6.0
GO_FREQUENT = 1.0
C_INFREQUENT = 1.0
C_TIMING = ["--lease-timeout", "6s", "--renew-interval", "1s", "--renew-deadline", "3s",
            "--frequent-interval", "500ms", "--infrequent-interval", "1s",
            "--kill-timeout", "500ms"]
GO_TIMING = ["--leader-timeout", "6s", "--frequent-interval", "1s"]

_LINE = [
    ("acquired", re.compile(r"^s3lect: acquired leadership term=(\d+)")),
    ("lost", re.compile(r"^s3lect: lost leadership")),
    ("releasing", re.compile(r"^s3lect: releasing leadership")),
    ("leader_is", re.compile(r"^s3lect: leader is (\S+) term=(\d+)")),
]


def parse(line: str) -> tuple[str, tuple[str, ...]] | None:
    for kind, rx in _LINE:
        m = rx.match(line)
        if m:
            return kind, m.groups()
    return None


class Proc(cli.Proc):
    """One node process (Go s3lect or `s3lect run`), a harness Proc (its own
    process group; stdout into its log): its stderr lines, each stamped on
    arrival and copied into the log with the stamp, and the time it was
    signalled or died."""

    def __init__(self, kind: str, node_id: str, argv: list[str], env: dict[str, str],
                 proxy: CountingProxy, log: Path):
        self.kind = kind  # "go" or "c"
        self.id = node_id
        self.proxy = proxy
        self.lines: list[tuple[float, str]] = []
        self.end: float | None = None  # when it was killed / asked to stop
        self._lock = threading.Lock()
        self._log = open(log, "w")
        try:
            super().__init__(argv, log, env, stdout=self._log, stderr=subprocess.PIPE)
        except BaseException:
            self._log.close()
            proxy.close()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            t = time.monotonic()
            line = raw.decode(errors="replace")
            with self._lock:
                self.lines.append((t, line.rstrip("\n")))
            self._log.write(f"{t:.3f} {line}")
            self._log.flush()

    def events(self) -> list[tuple[float, str, tuple[str, ...]]]:
        with self._lock:
            lines = list(self.lines)
        out = []
        for t, line in lines:
            p = parse(line)
            if p:
                out.append((t, p[0], p[1]))
        return out

    def text(self) -> str:
        with self._lock:
            return "\n".join(line for _, line in self.lines)

    def leading(self) -> bool:
        ev = [e for e in self.events() if e[1] in ("acquired", "lost", "releasing")]
        return self.alive() and self.end is None and bool(ev) and ev[-1][1] == "acquired"

    def follows(self) -> str | None:
        """The leader this node last named, if it is not leading."""
        ev = [e for e in self.events() if e[1] in ("acquired", "leader_is")]
        if self.leading() or not ev or ev[-1][1] != "leader_is":
            return None
        return ev[-1][2][0]

    def kill9(self) -> None:
        self.end = time.monotonic()
        super().kill9()

    def sigterm(self, wait: float = 15) -> int:
        self.end = time.monotonic()
        self.terminate()
        return self.wait(wait)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._reader.join(timeout=5)
            self.proxy.close()
            self._log.close()


class Cluster:
    def __init__(self, s3lect_bin: Path, gonode: Path | None, minio, tmp: Path, key: str):
        self.s3lect_bin = s3lect_bin
        self.gonode = gonode
        self.minio = minio
        self.tmp = tmp
        self.key = key
        self.lock = f"s3://{minio.bucket}/{key}"
        self.nodes: list[Proc] = []
        self.env = dict(os.environ, **minio.env())
        for k in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
            self.env.pop(k, None)
        self.upstream = ("127.0.0.1", int(minio.endpoint.rsplit(":", 1)[1]))

    def _proxy(self) -> CountingProxy:
        return CountingProxy(*self.upstream)

    def start_go(self, node_id: str, extra: list[str] | None = None,
                 timing: list[str] | None = None) -> Proc:
        assert self.gonode is not None
        proxy = self._proxy()
        argv = [str(self.gonode), "--lock", self.lock, "--id", node_id, "--endpoint",
                proxy.endpoint, "--region", self.minio.region,
                *(GO_TIMING if timing is None else timing), *(extra or [])]
        n = Proc("go", node_id, argv, self.env, proxy, self.tmp / f"{node_id}.log")
        self.nodes.append(n)
        return n

    def start_c(self, node_id: str, extra: list[str] | None = None,
                timing: list[str] | None = None) -> Proc:
        proxy = self._proxy()
        argv = [str(self.s3lect_bin), "run", "--lock", self.lock, "--id", node_id,
                "--endpoint", proxy.endpoint, "--region", self.minio.region,
                *(C_TIMING if timing is None else timing), *(extra or []), "--", "sleep", "600"]
        n = Proc("c", node_id, argv, self.env, proxy, self.tmp / f"{node_id}.log")
        self.nodes.append(n)
        return n

    def leaders(self) -> list[Proc]:
        return [n for n in self.nodes if n.leading()]

    def one_leader(self) -> Proc | None:
        ls = self.leaders()
        return ls[0] if len(ls) == 1 else None

    def record(self) -> dict:
        r = self.minio.client().get(self.minio.bucket, self.key)
        assert r.status == 200, f"GET {self.key}: {r.status}"
        return json.loads(r.body)

    def leadership_intervals(self) -> list[tuple[float, float, str]]:
        """(start, end, id) of every leadership any node's own lines claimed:
        from `acquired` to `lost`/`releasing`, the kill or the exit."""
        out = []
        now = time.monotonic()
        for n in self.nodes:
            start = None
            for t, kind, _ in n.events():
                if kind == "acquired" and start is None:
                    start = t
                elif kind in ("lost", "releasing") and start is not None:
                    out.append((start, t, n.id))
                    start = None
            if start is not None:
                out.append((start, n.end if n.end is not None else now, n.id))
        return sorted(out)

    def assert_never_two_leaders(self) -> None:
        iv = self.leadership_intervals()
        for (s1, e1, a), (s2, e2, b) in zip(iv, iv[1:]):
            assert s2 >= e1, (f"{a} led {s1:.3f}–{e1:.3f} and {b} from {s2:.3f}: two leaders "
                              f"for {e1 - s2:.3f} s\n{self.describe()}")

    def describe(self) -> str:
        return "\n".join(f"--- {n.kind} {n.id}\n{n.text()}" for n in self.nodes)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


def peer_flags(pki: dict[str, Path], port: int) -> list[str]:
    return ["--peer", "--addr", f"127.0.0.1:{port}", "--peer-cert", str(pki["cert"]),
            "--peer-key", str(pki["key"]), "--peer-ca", str(pki["ca"])]

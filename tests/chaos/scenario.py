# SPDX-License-Identifier: Apache-2.0
"""A small cluster of `s3lect run` nodes for one focused chaos scenario
(test_faults.py): each node through its own proxy (in HTTP mode, so that
request faults can be injected), optionally with a wall clock the test can
step, every CMD process watched until it is gone.

Everything binds to 127.0.0.1; `close()` stops every process it started,
including descendants that escaped their s3lect.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import chaos_checker as ck
from chaos_lib import FAKETIME_LIB, DeathWatch, HttpFaults, Node, Proxy

LEADER_TREE = Path(__file__).resolve().parent / "leader_tree.py"

LOST = re.compile(r"s3lect: lost leadership term=(\d+) reason=(\w+)")
ERROR = re.compile(r"^s3lect: error: .*$", re.M)
SANITIZER = re.compile(r"ERROR: \w+Sanitizer.*|runtime error:.*")


def duration_s(timing: list[str], opt: str) -> float:
    """The value of a duration option ("3s", "500ms") in a timing list."""
    v = timing[timing.index(opt) + 1]
    return float(v[:-2]) / 1000 if v.endswith("ms") else float(v[:-1])


class Cluster:
    def __init__(self, tmp: Path, bin_: Path, minio, n: int, timing: list[str], *,
                 faults: HttpFaults | None = None, tree: bool = False,
                 clock_files: tuple[int, ...] = (), seed: int | None = None):
        """n nodes n0..n{n-1} on one new lock; every proxy shares `faults`
        (HttpFaults(), i.e. none, by default). tree: the CMD is
        leader_tree.py (descendants that ignore SIGTERM) instead of
        leader_cmd.py. clock_files: indexes of nodes whose wall clock can be
        stepped (Node.step_clock)."""
        if clock_files and not FAKETIME_LIB.exists():
            raise RuntimeError(f"libfaketime not found at {FAKETIME_LIB}: apt-get install "
                               "faketime (scripts/deps installs it)")
        u = urlparse(minio.endpoint)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise RuntimeError(f"MinIO at {minio.endpoint} is not on loopback")
        self.tmp = tmp
        self.timing = timing
        self.seed = seed if seed is not None else secrets.randbits(32)
        self.faults = faults or HttpFaults()
        self.cmd_log = tmp / "cmd.log"
        self.cmd_log.touch()
        self.watch = DeathWatch(self.cmd_log)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "S3LECT_TEST_", "LD_PRELOAD", "FAKETIME"))}
        env.update(AWS_ACCESS_KEY_ID=minio.access_key, AWS_SECRET_ACCESS_KEY=minio.secret_key,
                   AWS_REGION=minio.region, HOME=str(tmp))
        self.lock = f"s3://{minio.bucket}/chaos/{secrets.token_hex(4)}.json"
        cmd = [sys.executable, str(LEADER_TREE), str(self.cmd_log)] if tree else None
        self.proxies: list[Proxy] = []
        self.nodes: list[Node] = []
        self.exits: list[str] = []
        self.closed: list[int] | None = None
        self.stopped: set[str] = set()  # told to exit (or reported): not an unexpected exit
        for i in range(n):
            p = Proxy(f"n{i}", u.port, self.seed + i, http=self.faults)
            self.proxies.append(p)
            clock = tmp / f"n{i}.clock" if i in clock_files else None
            self.nodes.append(Node(f"n{i}", bin_, self.lock, p, env, timing, 0.0, self.cmd_log,
                                   tmp, cmd=cmd, clock_file=clock))

    # -- observation
    def instances(self) -> dict[int, ck.Instance]:
        try:
            return ck.parse_cmd_log(self.cmd_log.read_text())
        except ValueError:
            return {}

    def leader(self) -> Node | None:
        """The node whose CMD (tree root) runs now."""
        running = set(self.watch.running())
        best = None
        for i in self.instances().values():
            if i.root == i.pid and i.pid in running:
                n = self.by_id(i.node)
                if n.alive() and (best is None or i.start > best[0]):
                    best = (i.start, n)
        return best[1] if best else None

    def by_id(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)

    def wait_leader(self, timeout: float, exclude: Node | None = None) -> Node | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_nodes()
            n = self.leader()
            if n is not None and n is not exclude:
                return n
            time.sleep(0.05)
        return None

    def check_nodes(self) -> None:
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is not None and n.id not in self.stopped:
                self.exits.append(f"{n.id} exited by itself with status {n.proc.returncode}; "
                                  "log tail:\n" + "\n".join(n.text().splitlines()[-15:]))
                self.stopped.add(n.id)

    def sleep(self, s: float) -> None:
        end = time.monotonic() + s
        while time.monotonic() < end:
            self.check_nodes()
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))

    def logs(self) -> dict[str, str]:
        return ck.read_logs([p for n in self.nodes for p in n.logs])

    def lost(self) -> list[tuple[str, int, str]]:
        """(log, term, reason) of every `lost leadership` line."""
        return [(name, int(m.group(1)), m.group(2)) for name, text in self.logs().items()
                for m in LOST.finditer(text)]

    def cmd_starts(self) -> list[ck.Instance]:
        return sorted((i for i in self.instances().values() if i.root == i.pid),
                      key=lambda i: i.start)

    # -- actions
    def start(self, *idx: int) -> None:
        for i in idx or range(len(self.nodes)):
            self.nodes[i].start()

    def terminate(self, node: Node, timeout: float = 30.0) -> float | None:
        """SIGTERM to one s3lect; returns how long it took to exit (None: hung, killed)."""
        self.stopped.add(node.id)
        return node.terminate(timeout)

    def check(self, faults: list[ck.Fault], liveness_bound: float,
              observe: tuple[float, float] | None = None) -> ck.Report:
        """The checker on the history so far (call after close())."""
        deadline = duration_s(self.timing, "--renew-deadline")
        return ck.check(self.cmd_log.read_text(), self.logs(), [], dict(self.watch.deaths), faults,
                        stop_bound=1.0, liveness_bound=liveness_bound, renew_deadline=deadline,
                        run_end=time.monotonic(), observe=observe)

    def sanitizer(self) -> list[str]:
        return [f"{name}: {m.group(0)}" for name, text in self.logs().items()
                for m in SANITIZER.finditer(text)]

    def close(self) -> list[int]:
        """Stops everything: followers first, then the leader, each with
        SIGTERM (then SIGKILL); then kills CMD descendants that are still
        running (returned: they escaped their s3lect). Idempotent."""
        if self.closed is not None:
            return self.closed
        self.closed = []
        escaped: list[int] = []
        try:
            leader = self.leader()
            order = [n for n in self.nodes if n is not leader] + ([leader] if leader else [])
            for n in order:
                self.stopped.add(n.id)
                try:
                    if n.alive():
                        n.terminate(20)
                finally:
                    n.stop()
            time.sleep(0.05)
            escaped = self.watch.kill_all()
        finally:
            for n in self.nodes:  # after an exception above: nothing may run on
                n.stop()
            self.watch.kill_all()
            self.watch.stop()
            for p in self.proxies:
                p.close()
            with open(self.tmp / "requests.txt", "w") as f:  # for diagnosis: what each node sent
                for node, p in zip(self.nodes, self.proxies):
                    for t, method, what in p.requests:
                        f.write(f"{t:.3f} {node.id} {method} {what}\n")
        self.closed = escaped
        return escaped

# SPDX-License-Identifier: Apache-2.0
"""N election nodes of one implementation on one lock, as real processes.

Each node's stderr is read by its own thread, which stamps every line with
time.monotonic() as it arrives and turns the lines the implementation
recognises into events. The cluster keeps, per node, the intervals in which
it reported leadership (and ran its command), which is what the timeline
plots and the overlap check use.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from common import BenchError, overlap
from harness.cli import Proc  # tests/harness/cli.py
from harness.pki import issue, make_ca  # tests/harness/pki.py
from harness.servers import free_port  # tests/harness/servers.py
from impls import MODES, FirewallSpec, Impl, NodeSpec, PeerSpec, Timing


def refusing_port() -> tuple[socket.socket, int]:
    """A 127.0.0.1 TCP port on which a connect is refused (RST at once, as
    behind a firewall that REJECTs): a socket bound to it that never
    listens. Keep the socket open as long as the port must stay refused, so
    no other program can take it meanwhile."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


def make_pki(d: Path) -> dict[str, Path]:
    """A throwaway CA ("ca", "ca_key") and a directory ("dir") for the nodes'
    certificates (node_cert): tests/harness/pki.py's."""
    d.mkdir(parents=True, exist_ok=True)
    ca, ca_key = make_ca(d, "ca", subject="/CN=s3lect bench CA", constraints=False)
    return {"ca": ca, "ca_key": ca_key, "dir": d}


def node_cert(pki: dict[str, Path], node_id: str) -> tuple[Path, Path]:
    """A server certificate and key for one node: CN = its id (s3lect's CA
    mode counts an answer only from a certificate naming the server id the
    lock record names, docs/peer.md "Whose answer counts") and a
    subjectAltName for 127.0.0.1, where it listens."""
    return issue(pki["dir"], node_id, "ca", san=f"IP:127.0.0.1,DNS:localhost,DNS:{node_id}")


@dataclass
class Event:
    t: float
    node: "Node"
    kind: str
    data: dict = field(default_factory=dict)


class Node(Proc):
    """One node of an implementation (tests/harness/cli.py's Proc: its own
    session), its stderr read by a thread of its own."""

    def __init__(self, cluster: "Cluster", slot: int, gen: int, spec: NodeSpec):
        self.cluster = cluster
        self.slot = slot
        self.gen = gen
        self.id = spec.node_id
        self.spec = spec
        self.lead: list[list[float | None]] = []  # [start, end] of reported leadership
        self.cmd: list[list[float | None]] = []  # [start, end] of the supervised command
        self.cmd_pid: int | None = None
        self.leading = False
        self.term = 0
        self.sees: str | None = None  # id of the leader it last reported following
        self.dead_at: float | None = None
        self.log_path = cluster.logdir / f"{self.id}.log"
        impl = cluster.impl
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        # Each row elects on a fresh key: no leader of it can be running, so
        # its first node creates it at once instead of after the lease a node
        # that never saw a lock waits (new_lock_wait, docs/algorithm.md). The
        # bench measures failover and handover, not a brand-new lock's start.
        env["S3LECT_NEW_LOCK_WAIT"] = "0"
        env.update(impl.node_env(spec))
        self.t_start = time.monotonic()
        super().__init__(impl.node_argv(spec), None, env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        impl = self.cluster.impl
        with open(self.log_path, "w") as logf:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                t = time.monotonic()
                line = raw.decode("utf-8", "replace").rstrip("\n")
                logf.write(f"{t - self.cluster.t0:10.3f} {line}\n")
                logf.flush()
                ev = impl.parse_line(line)
                if ev:
                    self.cluster._on_event(Event(t, self, ev[0], ev[1]))
        self.cluster._on_event(Event(time.monotonic(), self, "exit"))

    def alive(self) -> bool:
        return self.dead_at is None and self.proc.poll() is None

    def kill9(self, trial: bool = True) -> float:
        """SIGKILL to the node's process group and its command's group; returns
        the time. trial=False for cleanup (no marker on the timeline)."""
        t = time.monotonic()
        for pg in (self.proc.pid, self.cmd_pid):
            if pg:
                try:
                    os.killpg(pg, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self.cluster._mark_dead(self, t, trial)
        return t

    def freeze(self) -> float:
        """SIGSTOP to the node's process group and its command's group: the
        host frozen or powered off (no reset reaches anyone, the tree cannot
        act); marked dead from then on. Returns the time. The trial kills it
        (kill9(trial=False)) once another node leads."""
        t = time.monotonic()
        for pg in (self.proc.pid, self.cmd_pid):
            if pg:
                try:
                    os.killpg(pg, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    pass
        self.cluster._mark_dead(self, t, True)
        return t

    def sigterm(self) -> float:
        t = time.monotonic()
        self.signal(signal.SIGTERM)
        return t

    def wait(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9(trial=False)
            raise BenchError(f"{self.id} did not exit within {timeout:.0f}s\n{self.tail()}")
        self._reader.join(timeout=5)
        return rc

    def tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text().splitlines()[-n:]
        except OSError:
            return "(no log)"
        return "\n".join(f"  {self.id}: {x}" for x in lines)


class Cluster:
    """N slots; each slot holds one live node at a time (a restart is a new node
    with a new id, since two processes must not share an id)."""

    def __init__(self, impl: Impl, n: int, server, key: str, timing: Timing, mode: str,
                 logdir: Path, pki: dict[str, Path] | None = None,
                 endpoint_for: Callable[[int], str] | None = None,
                 cmd: list[str] | None = None, zero_config: bool = False):
        if mode not in MODES:
            raise BenchError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
        if mode not in impl.modes:
            raise BenchError(f"{impl.name} cannot run mode {mode!r} (it has {', '.join(impl.modes)})")
        if mode == "peer" and not pki:
            raise BenchError("peer mode needs certificates")
        self.impl = impl
        self.n = n
        self.server = server
        self.key = key
        self.timing = timing
        self.mode = mode
        self.pki = pki
        self.endpoint_for = endpoint_for or (lambda slot: server.endpoint)
        self.cmd = cmd  # the supervised command (None: the NodeSpec default)
        # Peer mode without certificate flags where the implementation has it.
        self.zero_config = zero_config
        self.logdir = logdir
        logdir.mkdir(parents=True, exist_ok=True)
        self.t0 = time.monotonic()
        self.cv = threading.Condition()
        self.events: list[Event] = []
        self.slots: list[Node | None] = [None] * n
        self.gens = [0] * n
        self.nodes: list[Node] = []
        self.markers: list[tuple[float, int, str]] = []  # (t, slot, "kill"/"term")
        self.refusing: list[socket.socket] = []  # mode "firewalled": the advertised ports

    # ---- life cycle ----
    def start(self) -> "Cluster":
        for s in range(self.n):
            self.start_slot(s)
        return self

    def start_slot(self, slot: int) -> Node:
        self.gens[slot] += 1
        node_id = f"n{slot}.{self.gens[slot]}"
        peer = None
        if self.mode == "peer":
            assert self.pki
            # A certificate of its own (its id as CN). A later configuration
            # re-issues the same ids' files; configurations run one at a time.
            cert, key = Path(), Path()
            if not (self.zero_config and self.impl.zero_config_peer):
                cert, key = node_cert(self.pki, node_id)
            peer = PeerSpec(f"127.0.0.1:{free_port()}", cert, key, self.pki["ca"],
                            self.zero_config)
        firewall = None
        if self.mode == "firewalled":
            sock, port = refusing_port()
            self.refusing.append(sock)
            firewall = FirewallSpec(f"127.0.0.1:{port}", f"127.0.0.1:{free_port()}")
        spec = NodeSpec(node_id, self.server.bucket, self.key, self.endpoint_for(slot),
                        self.server.access_key, self.server.secret_key, self.server.region,
                        self.timing, peer, mode=self.mode, firewall=firewall)
        if self.cmd:
            spec.cmd = list(self.cmd)
        node = Node(self, slot, self.gens[slot], spec)
        with self.cv:
            self.slots[slot] = node
            self.nodes.append(node)
        return node

    def peer_setup(self) -> str:
        """How the nodes run their mode: "zero-config" or "certificates" in
        peer mode, "peer on by default" (shipped), "peer ports refused"
        (firewalled), "--no-peer" (s3 on an s3lect with peer mode on by
        default), else ""."""
        if self.mode != "peer":
            return self.impl.peer_setup(None, self.mode)
        probe = PeerSpec("", Path(), Path(), Path(), self.zero_config)
        return self.impl.peer_setup(probe)

    def stop(self) -> None:
        """Kills every node still running (cleanup, also after failures)."""
        for node in self.nodes:
            if node.proc.poll() is None:
                node.kill9(trial=False)
        for node in self.nodes:
            try:
                node.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for sock in self.refusing:
            sock.close()
        self.refusing.clear()
        self.t_end = time.monotonic()
        with self.cv:
            for node in self.nodes:
                for iv in node.lead + node.cmd:
                    if iv[1] is None:
                        iv[1] = self.t_end

    # ---- events ----
    def _on_event(self, ev: Event) -> None:
        n = ev.node
        with self.cv:
            self.events.append(ev)
            if ev.kind == "acquired":
                if not n.leading and n.dead_at is None:
                    n.lead.append([ev.t, None])
                n.leading = n.dead_at is None
                n.term = ev.data["term"]
                n.sees = n.id
            elif ev.kind in ("lost", "releasing", "exit"):
                self._end_lead(n, ev.t)
                if ev.kind == "exit":
                    self._end_cmd(n, ev.t)
            elif ev.kind == "leader_is":
                n.sees = ev.data["id"]
            elif ev.kind == "cmd_started":
                n.cmd_pid = ev.data["pid"]
                if n.dead_at is None:
                    n.cmd.append([ev.t, None])
            elif ev.kind == "cmd_exited":
                self._end_cmd(n, ev.t)
            self.cv.notify_all()

    def _end_lead(self, n: Node, t: float) -> None:
        n.leading = False
        if n.lead and n.lead[-1][1] is None:
            n.lead[-1][1] = t

    def _end_cmd(self, n: Node, t: float) -> None:
        if n.cmd and n.cmd[-1][1] is None:
            n.cmd[-1][1] = t

    def _mark_dead(self, n: Node, t: float, trial: bool) -> None:
        with self.cv:
            n.dead_at = t
            self._end_lead(n, t)
            self._end_cmd(n, t)
            if trial:
                self.markers.append((t, n.slot, "kill"))
            self.cv.notify_all()

    def mark(self, t: float, n: Node, what: str) -> None:
        with self.cv:
            self.markers.append((t, n.slot, what))

    def wait(self, pred: Callable[[], object], timeout: float, what: str):
        """Waits until pred() (called under the lock) is truthy; returns its value."""
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                v = pred()
                if v:
                    return v
                left = end - time.monotonic()
                if left <= 0:
                    raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}\n"
                                     + self.tails())
                self.cv.wait(min(left, 0.5))

    def tails(self) -> str:
        return "\n".join(n.tail() for n in self.slots if n)

    # ---- state (call under self.cv, e.g. from a wait predicate) ----
    def live(self) -> list[Node]:
        return [n for n in self.slots if n and n.alive()]

    def settled_leader(self) -> Node | None:
        """The leader, if exactly one live node leads and every other live node
        reports following it; else None."""
        live = self.live()
        leaders = [n for n in live if n.leading]
        if len(leaders) != 1:
            return None
        ldr = leaders[0]
        if all(n is ldr or n.sees == ldr.id for n in live) and len(live) == self.n:
            return ldr
        return None

    def first_acquired_after(self, idx: int, exclude: Node) -> Event | None:
        for ev in self.events[idx:]:
            if ev.kind == "acquired" and ev.node is not exclude:
                return ev
        return None

    # ---- analysis ----
    def overlap(self, which: str = "lead") -> tuple[float, int]:
        """Total seconds during which two or more nodes reported leadership
        (which="lead") or ran their command (which="cmd"), and how many such
        stretches there were."""
        now = time.monotonic()
        return overlap([(s, e if e is not None else now)
                        for n in self.nodes for s, e in getattr(n, which)])

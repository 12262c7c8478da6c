# SPDX-License-Identifier: Apache-2.0
"""s3lect and client-go's leader election on one Kubernetes Lease, on a real
API server (tests/harness/kube_apiserver.py).

client-go's side is tests/interop/k8s_clientgo (leaderelection.RunOrDie with
a LeaseLock, ReleaseOnCancel; tests/harness/clientgo.py builds it once),
s3lect's is `s3lect run --lock k8s://NS/NAME`. Each side says who leads in
its own output: the elector's LEADING / STOPPING lines (stamped by its own
wall clock), s3lect's "acquired leadership" / "lost leadership" /
"releasing leadership" (stamped on arrival, the same wall clock); a process
killed leads until its kill. Checked: never two leaders (0 s of overlap);
after kill -9 of either side's leader the other takes over within that
side's documented bound (client-go: the record's leaseDurationSeconds after
it last saw the Lease change, then its next jittered retry; s3lect: its
lease after it last saw a client-go renewal, then its next poll), and not
before a lease has passed; after a graceful stop (client-go's release,
holderIdentity ""; s3lect's release) the other side takes over at its next
poll. Every measured takeover is printed.

test_clientgo_electors_take_over_from_each_other runs two client-go
electors alone: it validates the harness and client-go's own bounds, and
needs no k8s:// store. The s3lect tests skip, saying why, when the CLI under
test has no k8s:// store; everything skips without a Go toolchain; the API
server failing to start fails them.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from harness import clientgo
from harness.cli import Proc
from harness.kube_apiserver import KubeApiServer
from harness.servers import ServerStartError
from harness.wait import wait_for

# client-go: LeaseDuration 6 s (written as leaseDurationSeconds), RenewDeadline
# 4 s, RetryPeriod 1 s. A follower retries every RetryPeriod x [1, 2.2)
# (wait.JitterUntil, JitterFactor 1.2); a leader renews every RetryPeriod.
CG_LEASE, CG_RENEW_DEADLINE, CG_RETRY = 6.0, 4.0, 1.0
CG_JITTERED = CG_RETRY * 2.2
# s3lect: lease 6 s (leaseDurationSeconds 6 too), renewals every second,
# followers poll every second when stable, every 0.5 s in transitions.
LEASE = 6.0
C_RENEW, C_INFREQUENT, C_FREQUENT = 1.0, 1.0, 0.5
C_TIMING = ["--lease-timeout", "6s", "--renew-interval", "1s", "--renew-deadline", "3s",
            "--frequent-interval", "500ms", "--infrequent-interval", "1s",
            "--kill-timeout", "500ms"]
SLACK = 2.0  # requests, process wake-ups on a loaded 2-core machine

# kill -9 of an s3lect leader: client-go saw its last renewal (at most C_RENEW
# before the kill) at its next retry, waits leaseDurationSeconds from there,
# takes over at the retry after.
CG_TAKEOVER_MAX = CG_JITTERED + LEASE + CG_JITTERED + SLACK
# kill -9 of a client-go leader (it renewed at most CG_RETRY before): s3lect
# saw that renewal at its next poll, waits its lease from there, takes over
# at a poll after.
C_TAKEOVER_MAX = C_INFREQUENT + CG_LEASE + C_INFREQUENT + SLACK
# Nobody takes over a Lease renewed less than a renew interval before a kill.
TAKEOVER_MIN = LEASE - max(C_RENEW, CG_RETRY) - 0.5
# A released Lease: taken at the other side's next poll.
CG_PROMPT = CG_JITTERED + SLACK
C_PROMPT = C_INFREQUENT + SLACK

_C_LINES = [
    ("acquired", re.compile(r"^s3lect: acquired leadership term=(\d+)")),
    ("lost", re.compile(r"^s3lect: lost leadership")),
    ("releasing", re.compile(r"^s3lect: releasing leadership")),
    ("leader_is", re.compile(r"^s3lect: leader is (\S+)")),
]


@pytest.fixture(scope="module")
def elector_bin() -> Path:
    try:
        return clientgo.build_elector()
    except clientgo.Unavailable as e:
        pytest.skip(f"client-go interop not run: {e}")
    except clientgo.BuildError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def kube(elector_bin) -> Iterator[KubeApiServer]:  # noqa: ARG001 (skip first without Go)
    try:
        server = KubeApiServer()
        server.start()
    except ServerStartError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        print(f"\nkube-apiserver ready in {server.start_seconds:.1f} s (with its etcd)")
        yield server
    finally:
        server.stop()


def has_k8s_store(s3lect_bin: Path) -> bool:
    r = subprocess.run([str(s3lect_bin), "stores", "--json"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        return False
    try:
        return any(s.get("scheme") == "k8s" or s.get("name") == "k8s"
                   for s in json.loads(r.stdout))
    except (ValueError, AttributeError):
        return False


@pytest.fixture(scope="module")
def k8s_cli(s3lect_bin) -> Path:
    if not has_k8s_store(s3lect_bin):
        pytest.skip(f"{s3lect_bin} has no k8s:// store (`s3lect stores --json` lists none): "
                    "the client-go side alone is tested by "
                    "test_clientgo_electors_take_over_from_each_other")
    return s3lect_bin


class S3lectNode(Proc):
    """`s3lect run --lock k8s://NS/NAME` with the s3lect user's kubeconfig;
    its stderr lines stamped with the wall clock on arrival."""

    kind = "s3lect"

    def __init__(self, bin_: Path, kubeconfig: Path, lock: str, node_id: str, log: Path):
        self.id = node_id
        self.lines: list[tuple[float, str]] = []
        self.end: float | None = None
        self._lock = threading.Lock()
        self._log = open(log, "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_"))}
        env["KUBECONFIG"] = str(kubeconfig)
        argv = [bin_, "run", "--lock", lock, "--id", node_id, *C_TIMING, "--", "sleep", "600"]
        try:
            super().__init__(argv, log, env, stdout=self._log, stderr=subprocess.PIPE)
        except BaseException:
            self._log.close()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            t = time.time()
            line = raw.decode(errors="replace").rstrip("\n")
            with self._lock:
                self.lines.append((t, line))
            self._log.write(f"{t:.6f} {line}\n")
            self._log.flush()

    def events(self) -> list[tuple[float, str, tuple[str, ...]]]:
        with self._lock:
            lines = list(self.lines)
        out = []
        for t, line in lines:
            for kind, rx in _C_LINES:
                m = rx.match(line)
                if m:
                    out.append((t, kind, m.groups()))
                    break
        return out

    def text(self) -> str:
        with self._lock:
            return "\n".join(f"{t:.3f} {line}" for t, line in self.lines)

    def leading(self) -> bool:
        ev = [e for e in self.events() if e[1] in ("acquired", "lost", "releasing")]
        return self.alive() and self.end is None and bool(ev) and ev[-1][1] == "acquired"

    def leading_since(self, t0: float) -> float | None:
        return next((t for t, kind, _ in self.events() if kind == "acquired" and t >= t0), None)

    def intervals(self, now: float) -> list[tuple[float, float]]:
        out, start = [], None
        for t, kind, _ in self.events():
            if kind == "acquired" and start is None:
                start = t
            elif kind in ("lost", "releasing") and start is not None:
                out.append((start, t))
                start = None
        if start is not None:
            out.append((start, self.end if self.end is not None else now))
        return out

    def kill9(self) -> None:
        self.end = time.time()
        super().kill9()

    def sigterm(self, wait: float = 20) -> int:
        self.terminate()
        rc = self.wait(wait)
        if self.end is None:
            self.end = time.time()
        return rc

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._reader.join(timeout=5)
            self._log.close()


class Mixed:
    """Electors of both sides on one Lease of the API server."""

    def __init__(self, kube: KubeApiServer, tmp: Path, elector_bin: Path,
                 s3lect_bin: Path | None):
        self.kube = kube
        self.tmp = tmp
        self.elector_bin = elector_bin
        self.s3lect_bin = s3lect_bin
        self.name = f"interop-{secrets.token_hex(4)}"
        self.kubeconfig = kube.kubeconfig(tmp / "kubeconfig")
        self.nodes: list = []

    def start_go(self, node_id: str) -> clientgo.Elector:
        n = clientgo.Elector(self.elector_bin, self.kubeconfig, self.kube.namespace, self.name,
                             node_id, self.tmp / f"{node_id}.log", lease=CG_LEASE,
                             renew_deadline=CG_RENEW_DEADLINE, retry=CG_RETRY)
        self.nodes.append(n)
        return n

    def start_c(self, node_id: str) -> S3lectNode:
        assert self.s3lect_bin is not None
        n = S3lectNode(self.s3lect_bin, self.kubeconfig, f"k8s://{self.kube.namespace}/{self.name}",
                       node_id, self.tmp / f"{node_id}.log")
        self.nodes.append(n)
        return n

    def leaders(self) -> list:
        return [n for n in self.nodes if n.leading()]

    def one_leader(self):
        ls = self.leaders()
        return ls[0] if len(ls) == 1 else None

    def lease(self) -> dict:
        obj = self.kube.get_lease(self.name)
        assert obj is not None, f"no Lease {self.name}"
        return obj

    def describe(self) -> str:
        out = []
        for n in self.nodes:
            if isinstance(n, clientgo.Elector):
                body = "\n".join(f"{t:.3f} {ev} {who}" for t, ev, who in n.events())
            else:
                body = n.text()
            out.append(f"--- {n.kind} {n.id}\n{body}")
        try:
            out.append(f"--- the Lease\n{json.dumps(self.lease().get('spec'), indent=1)}")
        except (AssertionError, OSError, RuntimeError):
            pass
        return "\n".join(out)

    def assert_never_two_leaders(self) -> float:
        """Fails on any overlap of two leaderships; returns the smallest gap
        between one leadership's end and the next one's start (seconds)."""
        now = time.time()
        iv = sorted((s, e, n.id) for n in self.nodes for s, e in n.intervals(now))
        gaps = []
        for (s1, e1, a), (s2, e2, b) in zip(iv, iv[1:]):
            assert s2 >= e1, (f"{a} led {s1:.3f}-{e1:.3f} and {b} from {s2:.3f}: two leaders "
                              f"for {e1 - s2:.3f} s\n{self.describe()}")
            gaps.append(s2 - e1)
        return min(gaps) if gaps else math.inf

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


@pytest.fixture
def mixed(kube, tmp_path, elector_bin) -> Iterator:
    made: list[Mixed] = []

    def make(s3lect_bin: Path | None = None) -> Mixed:
        m = Mixed(kube, tmp_path, elector_bin, s3lect_bin)
        made.append(m)
        return m

    try:
        yield make
    finally:
        for m in made:
            m.stop()


def _took(new, t0: float) -> float:
    t = new.leading_since(t0)
    assert t is not None
    return t - t0


def test_clientgo_electors_take_over_from_each_other(mixed):
    """Two client-go electors alone (no s3lect): one leads; kill -9 of the
    leader, the other takes over after leaseDurationSeconds from its last
    observation of a renewal; SIGTERM (ReleaseOnCancel), at its next retry."""
    m = mixed()
    a = m.start_go("go1")
    wait_for(a.leading, 30, f"go1 to lead a new Lease\n{m.describe()}")
    b = m.start_go("go2")
    time.sleep(CG_LEASE + 2)  # b watches a renew for more than a lease: a still leads
    assert m.one_leader() is a, m.describe()
    spec = m.lease()["spec"]
    assert spec["holderIdentity"] == "go1" and spec["leaseDurationSeconds"] == int(CG_LEASE)

    t0 = time.time()
    a.kill9()
    new = wait_for(m.one_leader, CG_TAKEOVER_MAX + 5, f"go2 to take over\n{m.describe()}")
    kill_took = _took(new, t0)
    assert new is b
    assert TAKEOVER_MIN <= kill_took <= CG_TAKEOVER_MAX, (
        f"go2 took over {kill_took:.2f} s after kill -9 of go1; expected "
        f"{TAKEOVER_MIN:g}-{CG_TAKEOVER_MAX:g} s\n{m.describe()}")
    assert m.lease()["spec"]["leaseTransitions"] >= 1

    c = m.start_go("go3")
    wait_for(lambda: any(ev == "NEW-LEADER" and who == "go2" for _, ev, who in c.events()), 15,
             f"go3 to see go2 lead\n{m.describe()}")
    t0 = time.time()
    assert b.sigterm() == 0, f"go2 exited non-zero on SIGTERM\n{m.describe()}"
    spec = m.lease()["spec"]
    # client-go's release (ReleaseOnCancel), unless go3 took it already.
    assert spec["holderIdentity"] in ("", "go3"), spec
    wait_for(c.leading, CG_PROMPT + 3, f"go3 to take the released Lease\n{m.describe()}")
    term_took = _took(c, t0)
    assert term_took <= CG_PROMPT, (f"go3 took {term_took:.2f} s over a released Lease "
                                    f"(at most {CG_PROMPT:g} s)\n{m.describe()}")
    gap = m.assert_never_two_leaders()
    print(f"\nclient-go -> client-go: kill -9 takeover {kill_took:.2f} s "
          f"(bound {TAKEOVER_MIN:g}-{CG_TAKEOVER_MAX:g}), SIGTERM takeover {term_took:.2f} s "
          f"(bound {CG_PROMPT:g}); smallest gap between leaders {gap:.3f} s")


def test_s3lect_and_clientgo_take_over_from_each_other(mixed, k8s_cli):
    """One s3lect node and one client-go elector at a time, the leader's side
    alternating: kill -9 of s3lect's leader (client-go takes over), kill -9
    of client-go's (s3lect takes over), then SIGTERM both ways; each side
    names the other's leader; never two leaders."""
    m = mixed(k8s_cli)
    c = m.start_c("c1")
    wait_for(c.leading, 30, f"c1 to lead a new Lease\n{m.describe()}")
    g = m.start_go("go1")
    time.sleep(LEASE + 2)  # the client-go follower watches s3lect renew for more than a lease
    assert m.one_leader() is c, f"c1 must still lead\n{m.describe()}"
    spec = m.lease()["spec"]
    assert spec["holderIdentity"] == "c1", spec
    assert spec["leaseDurationSeconds"] >= math.ceil(LEASE), spec
    assert any(ev == "NEW-LEADER" and who == "c1" for _, ev, who in g.events()), m.describe()

    seq = {"c": 1, "go": 1}
    results = []
    for how, old_side in (("kill", "c"), ("kill", "go"), ("term", "c"), ("term", "go")):
        old = m.one_leader()
        assert old is not None, f"one leader before the round\n{m.describe()}"
        assert (old.kind == "s3lect") == (old_side == "c"), f"{old.id} leads\n{m.describe()}"
        follower = next(n for n in m.nodes if n is not old and n.alive() and n.end is None)
        t0 = time.time()
        if how == "kill":
            old.kill9()
        else:
            rc = old.sigterm()
            assert rc == 0, f"{old.id} exited {rc} on SIGTERM\n{m.describe()}"
        bound = {("kill", "c"): CG_TAKEOVER_MAX, ("kill", "go"): C_TAKEOVER_MAX,
                 ("term", "c"): CG_PROMPT, ("term", "go"): C_PROMPT}[(how, old_side)]
        wait_for(follower.leading, bound + 5, f"{follower.id} to take over after {how} of "
                 f"{old.id}\n{m.describe()}")
        took = _took(follower, t0)
        results.append((how, old.id, follower.id, took, bound))
        low = TAKEOVER_MIN if how == "kill" else 0.0
        assert low <= took <= bound, (
            f"{follower.id} took over {took:.2f} s after {how} of {old.id}; expected "
            f"{low:g}-{bound:g} s\n{m.describe()}")
        assert m.lease()["spec"]["holderIdentity"] == follower.id
        # A new node of the stopped side follows the new leader.
        seq[old_side] += 1
        new_id = f"{old_side}{seq[old_side]}"
        n = m.start_c(new_id) if old_side == "c" else m.start_go(new_id)
        if old_side == "c":
            wait_for(lambda: any(k == "leader_is" and grp[0] == follower.id
                                 for _, k, grp in n.events()), 15,
                     f"{new_id} to name {follower.id} as leader\n{m.describe()}")
        else:
            wait_for(lambda: any(ev == "NEW-LEADER" and who == follower.id
                                 for _, ev, who in n.events()), 15,
                     f"{new_id} to see {follower.id} lead\n{m.describe()}")
        m.assert_never_two_leaders()

    gap = m.assert_never_two_leaders()
    print("\ns3lect <-> client-go takeovers (how, old leader, new leader, seconds, bound):")
    for how, old, new, took, bound in results:
        print(f"  {how:4} {old:>4} -> {new:<4} {took:6.2f} s  (bound {bound:.1f} s)")
    print(f"  smallest gap between two leaderships {gap:.3f} s")


def test_mixed_electors_never_two_leaders(mixed, k8s_cli):
    """Two s3lect nodes and two client-go electors on one Lease, the leader
    killed three times, whatever side it is on: always one leader again
    within the larger bound, never two."""
    m = mixed(k8s_cli)
    m.start_c("c1"), m.start_go("go1"), m.start_c("c2"), m.start_go("go2")
    wait_for(m.one_leader, 30, f"one leader\n{m.describe()}")
    seq = 2
    took_all = []
    for _ in range(3):
        old = m.one_leader()
        assert old is not None, m.describe()
        t0 = time.time()
        old.kill9()
        new = wait_for(m.one_leader, max(CG_TAKEOVER_MAX, C_TAKEOVER_MAX) + 5,
                       f"a new leader after kill -9 of {old.id}\n{m.describe()}")
        took = _took(new, t0)
        took_all.append((old.id, new.id, took))
        assert took <= max(CG_TAKEOVER_MAX, C_TAKEOVER_MAX), m.describe()
        seq += 1
        (m.start_c if old.kind == "s3lect" else m.start_go)(
            f"{'c' if old.kind == 's3lect' else 'go'}{seq}")
        m.assert_never_two_leaders()
    print("\nmixed kill -9 rounds: " + ", ".join(f"{a}->{b} {t:.2f} s" for a, b, t in took_all))

# SPDX-License-Identifier: Apache-2.0
"""The chaos fence workload (issue 41 item 5): three `s3lect run` nodes whose
command (fence_cmd.py) appends "TERM SEQ NODE" lines to one object by
read-modify-write through `s3lect fence get` / `s3lect fence cas`, each
node through its own fault proxy (chaos_lib.Proxy) and with a wall clock
the test can step (libfaketime), under:

  kill_leader     kill -9 of the leader's s3lect (its tree dies with it)
  zombie          the leader frozen (SIGSTOP of s3lect and everything below
                  it) right after its read, for longer than the lease, until
                  another node has appended; then its command resumes first
                  and its supervisors (s3lect run and its shim) only once its
                  write is done: a write that escaped its supervisors, begun
                  after the successor's, the case the fence is for (resumed
                  together, the shim SIGKILLs the command at once: the
                  lease's hard deadline has passed)
  sigterm_leader  SIGTERM to the leader (graceful: it releases the lock)
  STORE_restart   the store's server down and up again (the backend's fault;
                  none on the file store)
  vanish_lock     the lock object deleted from the store under the leader
  clock_step      one node's wall clock stepped 10 s forward or back for a
                  few seconds (default rules: the wall clock decides nothing)

then the checker (chaos_checker.check_fence) on every recorded attempt and
the object's final bytes: every acknowledged append is in the object, terms
in it never go down, and no write of a term began after a larger term's
first write and was accepted. Each store's summary line gives the appends,
the zombie writes refused as fenced and the violations (none).

test_broken_fence_is_caught runs the zombie fault with the fence off
(S3LECT_FENCE_MODE=plain: the write is an unconditional PUT) and expects the
checker to find the lost append and the zombie's accepted write.

Everything binds to 127.0.0.1; every process started is stopped.
"""

from __future__ import annotations

import base64
import os
import random
import secrets
import signal
import subprocess
import sys
import time
import urllib.parse
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest

import chaos_checker as ck
from chaos_lib import FAKETIME_LIB, Node, Proxy, descendants, pid_gone
from harness.backends import BACKENDS, Backend
from harness.servers import ServerStartError

pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

FENCE_CMD = Path(__file__).resolve().parent / "fence_cmd.py"
N_NODES = 3
LEASE_S = 3.0
# No --max-clock-skew: the default rules, under which a clock step is harmless.
TIMING = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
          "--frequent-interval", "500ms", "--infrequent-interval", "1s", "--kill-timeout", "500ms"]
OFFSETS_S = [-0.5, 0.0, 0.5]
STEP_S = 10.0
# A leader again and appending after a fault: lease + polls + a loaded
# machine; a vanished lock is held for max_lease_timeout (4 leases) first.
PROGRESS_S = 25.0
VANISH_PROGRESS_S = 4 * LEASE_S + PROGRESS_S


class FileStore:
    """The file store: no server, no proxy (its faults are the processes' and
    the clocks'; there is no store to restart)."""

    name = "file"
    restart_kind = ""
    answer = None

    def __init__(self, root: Path):
        self.root = root

    def start(self) -> None:
        self.root.mkdir(exist_ok=True)

    def destroy(self, _save_log_to: Path) -> None:
        pass

    def env(self) -> dict[str, str]:
        return {}

    def init(self, *_args) -> None:
        pass

    def lock_url(self, key: str, _port=None) -> str:
        return f"file://{self.root}/{key}.json"

    def node_args(self, _port) -> list[str]:
        return []

    def direct_args(self) -> list[str]:
        return []

    def delete(self, key: str) -> None:
        (self.root / f"{key}.json").unlink(missing_ok=True)


def delete_object(backend: Backend, key: str) -> None:
    """Deletes the object of key (a lock's) directly on the store's server."""
    name = backend._key(key)
    srv = backend.server
    if backend.name == "minio":
        r = srv.client().request("DELETE", srv.bucket, name)
        assert r.status in (200, 204), f"DELETE {name}: HTTP {r.status}"
    elif backend.name == "gcs":
        from harness.fake_gcs import _request
        status, _ = _request("DELETE", f"{srv.endpoint}/storage/v1/b/{srv.bucket}/o/"
                             + urllib.parse.quote(name, safe=""))
        assert status in (200, 204, 404), f"DELETE {name}: HTTP {status}"
    elif backend.name == "azure":
        srv.client().request("DELETE", f"{srv.container}/{name}")
    else:
        raise AssertionError(f"no delete for {backend.name}")


def fence_token(lock: str) -> str:
    """A fence token of term 1 (enough to read: a read is never fenced)."""
    def b64(s: str) -> str:
        return base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")
    return f"s3lect-fence.1.1.{b64('fence-checker')}.{b64(lock)}"


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "S3LECT_TEST_", "LD_PRELOAD", "FAKETIME", "PG", "AZURE_",
                                 "S3LECT_FENCE"))}


class FenceChaos:
    """Three nodes on one lock, their command fence_cmd.py on one object."""

    def __init__(self, store: str, tmp: Path, bin_: Path, rng: random.Random, stack: ExitStack,
                 mode: str = "fenced"):
        self.store, self.tmp, self.bin, self.rng = store, tmp, bin_, rng
        self.cmd_log = tmp / "cmd.log"
        self.cmd_log.touch()
        self.counts: Counter[str] = Counter()
        self.problems: list[str] = []
        self.expected_dead: set[str] = set()
        self.zombies = 0  # zombie faults whose write came after the successor's
        if store == "file":
            self.backend = FileStore(tmp / "store")
        else:
            self.backend = BACKENDS[store](folder="chaos/", suffix=".json")
        stack.callback(self.backend.destroy, tmp)
        self.backend.start()
        self.key = f"fence-{secrets.token_hex(4)}"
        env = clean_env()
        env.update(self.backend.env(), HOME=str(tmp), S3LECT_FENCE_MODE=mode)
        self.env = env
        self.backend.init(bin_, self.key, env)
        self.data_key = self.key + "-data"
        self.data_url = self.backend.lock_url(self.data_key, 0)
        self.proxies: list[Proxy] = []
        self.nodes: list[Node] = []
        for i in range(N_NODES):
            nid = f"n{i}"
            proxy = None
            if store != "file":
                proxy = Proxy(nid, self.backend.port, rng.randrange(2**32),
                              answer=self.backend.answer)
                stack.callback(proxy.close)
                self.proxies.append(proxy)
            args = self.backend.node_args(proxy.port if proxy else 0)
            lock = self.backend.lock_url(self.key, proxy.port if proxy else 0)
            cmd = [sys.executable, str(FENCE_CMD), str(self.cmd_log),
                   str(tmp / f"events-{nid}.log"), str(tmp), str(bin_), self.data_url, *args]
            n = Node(nid, bin_, lock, proxy, env, TIMING, OFFSETS_S[i], self.cmd_log, tmp,
                     cmd=cmd, clock_file=tmp / f"{nid}.clock", store_args=args)
            stack.callback(n.stop)
            self.nodes.append(n)

    # -- observation
    def attempts(self, node: str | None = None) -> list[ck.Attempt]:
        out = []
        for n in self.nodes:
            if node is None or n.id == node:
                p = self.tmp / f"events-{n.id}.log"
                text = p.read_text() if p.exists() else ""
                # (a line being written may be cut: only whole lines)
                out += ck.parse_fence_log(text[:text.rfind("\n") + 1])
        return out

    def acked_after(self, t: float, term_above: int = 0) -> bool:
        return any(a.kind == "ack" and a.t_start > t and a.term > term_above
                   for a in self.attempts())

    def leader(self) -> Node | None:
        text = self.cmd_log.read_text()
        try:
            inst = ck.parse_cmd_log(text[:text.rfind("\n") + 1])
        except ValueError:
            return None
        best = None
        for i in inst.values():
            if i.end is None and not pid_gone(i.pid):
                n = next(x for x in self.nodes if x.id == i.node)
                if n.alive() and not n.paused and (best is None or i.start > best[0]):
                    best = (i.start, n)
        return best[1] if best else None

    def check_nodes(self) -> None:
        for n in self.nodes:
            if n.proc is not None and not n.alive() and n.id not in self.expected_dead:
                self.problems.append(f"{n.id} exited by itself with status {n.proc.returncode}; "
                                     "log tail:\n" + "\n".join(n.text().splitlines()[-15:]))
                n.start()

    def sleep(self, s: float) -> None:
        end = time.monotonic() + s
        while time.monotonic() < end:
            self.check_nodes()
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))

    def wait(self, cond, timeout: float, what: str) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.check_nodes()
            if cond():
                return True
            time.sleep(0.05)
        self.problems.append(f"{what}: not within {timeout:.0f}s")
        return False

    def top_term(self) -> int:
        return max((a.term for a in self.attempts() if a.kind == "ack"), default=0)

    def progress(self, since: float, timeout: float = PROGRESS_S, what: str = "",
                 above: int = 0) -> None:
        """A leader appends again (an acknowledged write begun after since),
        of a term above `above` (a handover: the top term before the fault)."""
        self.wait(lambda: self.acked_after(since, above), timeout,
                  f"no acknowledged append{' by a newer term' if above else ''} {what}")

    # -- faults
    def kill_leader(self, leader: Node) -> None:
        self.expected_dead.add(leader.id)
        t, top = time.monotonic(), self.top_term()
        leader.kill9()
        self.progress(t, what=f"after kill -9 of {leader.id}", above=top)
        self.expected_dead.discard(leader.id)
        leader.start()

    def sigterm_leader(self, leader: Node) -> None:
        self.expected_dead.add(leader.id)
        t, top = time.monotonic(), self.top_term()
        if leader.terminate() is None:
            self.problems.append(f"{leader.id} did not exit within 20s of SIGTERM")
        self.progress(t, what=f"after SIGTERM to {leader.id}", above=top)
        self.expected_dead.discard(leader.id)
        leader.start()

    def zombie(self, leader: Node) -> None:
        """Freezes the leader between its read and its write until another
        term has appended; resumes its command first (its write then
        begins after the successor's first write), then its s3lect."""
        hold, held = self.tmp / f"hold-{leader.id}", self.tmp / f"held-{leader.id}"
        hold.touch()
        try:
            if not self.wait(held.exists, 10, f"{leader.id} never reached its write (hold)"):
                return
            self.wait(lambda: held.read_text().endswith("\n"), 5, "held file")
            term, script = (int(x) for x in held.read_text().split())
            cmds, _ = leader.pause()
            t = time.monotonic()
            self.wait(lambda: self.acked_after(t, term), PROGRESS_S,
                      f"no append by a newer term while {leader.id} was frozen")
        finally:
            hold.unlink(missing_ok=True)
        if not leader.paused:
            return
        before = len(self.attempts(leader.id))
        # The command (fence_cmd.py and its children) only: its supervisors
        # (s3lect run and the shim below it, which SIGKILLs the command at
        # the lease's hard deadline) stay stopped until its write is done.
        for p in reversed([script, *descendants(script)]):
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
        # (bounded: the command's write, or 5 s)
        end = time.monotonic() + 5
        while len(self.attempts(leader.id)) == before and time.monotonic() < end:
            time.sleep(0.005)
        if len(self.attempts(leader.id)) > before:
            self.zombies += 1
        else:
            self.problems.append(f"the frozen {leader.id}'s command made no write within 5s of "
                                 "its resume")
        leader.resume(cmds)
        if not self.wait(lambda: all(pid_gone(p) for p in cmds), 10,
                         f"{leader.id}'s command still runs after its resume"):
            return

    def store_restart(self, _leader: Node) -> None:
        t = time.monotonic()
        try:
            self.backend.restart(self.rng, self.sleep)
        except ServerStartError as e:
            self.problems.append(str(e))
            raise
        self.progress(t, what="after the store restart")

    def vanish_lock(self, _leader: Node) -> None:
        t, top = time.monotonic(), self.top_term()
        if isinstance(self.backend, FileStore):
            self.backend.delete(self.key)
        else:
            delete_object(self.backend, self.key)
        self.progress(t, VANISH_PROGRESS_S, "after the lock vanished", above=top)

    def clock_step(self, leader: Node) -> None:
        node = self.rng.choice(self.nodes)
        base = node.offset_s
        node.step_clock(base + self.rng.choice([-STEP_S, STEP_S]))
        self.sleep(self.rng.uniform(3.0, 4.0))
        node.step_clock(base)
        t = time.monotonic()
        self.progress(t, what=f"after {node.id}'s clock step")

    # Stores whose restart may drop writes they acknowledged: Azurite keeps
    # its blobs in LokiJS, saved to --location now and then, so a restart can
    # bring back an older version of the object (seen in CI: 26 acknowledged
    # appends gone, the next read-modify-write over the old version). A store
    # that loses acknowledged writes breaks the fence's assumption F1
    # (docs/algorithm.md), which no fence can make up for; the lock's own
    # chaos run still restarts Azurite.
    NO_RESTART = {"azure"}

    def kinds(self) -> list[str]:
        k = ["kill_leader", "zombie", "sigterm_leader", "vanish_lock", "clock_step"]
        if self.backend.restart_kind and self.store not in self.NO_RESTART:
            k.append(self.backend.restart_kind)
        return k

    def step(self, kind: str) -> None:
        if not self.wait(lambda: self.leader() is not None, PROGRESS_S, f"no leader before {kind}"):
            return
        leader = self.leader()
        if leader is None:
            return
        fault = {"kill_leader": self.kill_leader, "zombie": self.zombie,
                 "sigterm_leader": self.sigterm_leader, "vanish_lock": self.vanish_lock,
                 "clock_step": self.clock_step}.get(kind, self.store_restart)
        fault(leader)
        self.counts[kind] += 1
        self.sleep(self.rng.uniform(0.5, 1.5))

    def finish(self) -> None:
        """Everything back, then SIGTERM to every node, followers first."""
        for n in self.nodes:
            if n.paused:
                n.resume(n.cmd_pids())
        leader = self.leader()
        for n in [n for n in self.nodes if n is not leader] + ([leader] if leader else []):
            self.expected_dead.add(n.id)
            if n.terminate() is None:
                self.problems.append(f"{n.id} did not exit within 20s of SIGTERM")

    def final(self) -> bytes | None:
        """The object's bytes, read directly (no proxy), envelope stripped."""
        out = self.tmp / "final.txt"
        ep = [] if isinstance(self.backend, FileStore) else (
            ["--endpoint", self.backend.direct_endpoint()] if self.backend.direct_endpoint()
            else [])
        r = subprocess.run([str(self.bin), "fence", "get", "--token", fence_token(self.data_url),
                            *ep, self.data_url, str(out)], env=self.env, capture_output=True,
                           text=True, timeout=30)
        if r.returncode == 3:
            return None
        assert r.returncode == 0, f"s3lect fence get of the final object failed: {r.stderr}"
        return out.read_bytes()


def report(name: str, c: FenceChaos, rep: ck.FenceReport, took: float) -> str:
    return (f"[fence {name}] {rep.acked} appends acknowledged ({rep.lines} lines in the object, "
            f"{rep.terms} terms wrote); zombie writes refused as fenced: {rep.zombie_refused} of "
            f"{rep.zombie_attempts} attempted after a newer term's first write ({c.zombies} "
            f"zombie faults), {rep.fenced} fenced in all; violations: {len(rep.violations)}; "
            "faults: " + ", ".join(f"{k}={v}" for k, v in sorted(c.counts.items()))
            + f"; run took {took:.0f}s, logs in {c.tmp}")


@pytest.mark.parametrize("store", ["minio", "file",
                                   *(pytest.param(s, marks=pytest.mark.second_session)
                                     for s in ("gcs", "azure"))])
def test_chaos_fence(store: str, tmp_path: Path, s3lect_bin: Path, chaos_summary: list[str]):
    """One round of every fault kind, in a random order (S3LECT_CHAOS_SEED
    replays it), then the fence checker: no violation, and every zombie
    fault's write refused as fenced."""
    if not FAKETIME_LIB.exists():
        pytest.fail(f"libfaketime not found at {FAKETIME_LIB}: apt-get install faketime "
                    "(scripts/deps installs it)")
    seed = int(os.environ.get("S3LECT_CHAOS_SEED") or secrets.randbits(32))
    rng = random.Random(seed)
    t0 = time.monotonic()
    c, rep = run_round(lambda stack: FenceChaos(store, tmp_path, s3lect_bin, rng, stack), rng)
    line = report(store, c, rep, time.monotonic() - t0)
    chaos_summary.append(line)
    print(line)
    (tmp_path / "summary.txt").write_text("\n".join([line, *c.problems, *rep.violations]) + "\n")
    errors = c.problems + rep.violations
    assert not errors, (f"fence chaos run on {store} failed (seed {seed}, logs in {tmp_path}):\n"
                        + "\n".join(errors))
    # kill -9, the zombie, SIGTERM and the vanished lock each hand leadership on.
    assert rep.acked >= 10 and rep.terms >= 5, \
        f"too little happened: {rep.acked} appends by {rep.terms} terms"
    assert c.zombies == 1 and rep.zombie_refused >= 1, \
        f"the zombie fault produced no refused write ({c.zombies}, {rep.zombie_refused})"


def run_round(make, rng: random.Random):
    """One round of every fault kind of the run make(stack) builds, in an
    order rng shuffles, then the fence checker. Returns the run and the
    checker's report."""
    with ExitStack() as stack:
        try:
            c = make(stack)
        except ServerStartError as e:
            pytest.fail(str(e), pytrace=False)
        for n in c.nodes:
            n.start()
        try:
            if c.wait(lambda: c.acked_after(0.0), 30, "no append at start"):
                kinds = c.kinds()
                rng.shuffle(kinds)
                for kind in kinds:
                    c.step(kind)
                c.progress(time.monotonic(), what="after the last fault")
        finally:
            c.finish()
        final = c.final()
    return c, ck.check_fence(c.attempts(), final)


def run_broken(make, tmp_path: Path):
    """The zombie fault with the fence off, deterministic: the leader is
    frozen right after its read, the successor appends, then the leader's
    write. make(stack) builds the run (a FenceChaos in mode "plain").
    Returns the run and the kinds of violation the checker found."""
    with ExitStack() as stack:
        try:
            c = make(stack)
        except ServerStartError as e:
            pytest.fail(str(e), pytrace=False)
        for n in c.nodes:
            n.start()
        try:
            if c.wait(lambda: c.acked_after(0.0), 30, "no append at start"):
                c.step("zombie")
                c.progress(time.monotonic(), what="after the zombie")
        finally:
            c.finish()
        final = c.final()
    rep = ck.check_fence(c.attempts(), final)
    assert not c.problems, "\n".join(c.problems)
    assert c.zombies == 1, "the zombie fault did not happen"
    return c, sorted({v.split(":")[0] for v in rep.violations}), rep


def test_broken_fence_is_caught(tmp_path: Path, s3lect_bin: Path, chaos_summary: list[str]):
    """The zombie fault on MinIO with the fence off (the write an
    unconditional PUT): the checker must report the successor's lost append
    and the zombie's accepted write."""
    if not FAKETIME_LIB.exists():
        pytest.fail(f"libfaketime not found at {FAKETIME_LIB}")
    rng = random.Random(1)
    _, kinds, rep = run_broken(
        lambda stack: FenceChaos("minio", tmp_path, s3lect_bin, rng, stack, mode="plain"),
        tmp_path)
    chaos_summary.append(f"[fence off, minio] the checker found: {', '.join(kinds) or 'nothing'} "
                         f"({len(rep.violations)} violations)")
    assert {"lost", "zombie"} <= set(kinds), (
        f"the checker missed the broken fence (logs in {tmp_path}): {rep.violations}")

# SPDX-License-Identifier: Apache-2.0
"""Chaos across real processes (issue 8): five `s3lect run` nodes against a real
MinIO, each through its own fault-injecting TCP proxy, each with its own
wall-clock offset (libfaketime, within max_clock_skew), under kill -9 of the
leader, SIGSTOP/SIGCONT of whole nodes for longer than the lease, one-node
partitions (blackhole and reset), a slow leader, MinIO restarts and
background faults (resets, lost responses, stalls, 503 SlowDown, latency).

The same run is parametrised over the lock store (tests/harness/backends.py):
`[minio]` as above; `[dynamodb]` on DynamoDB Local (table made once with
`s3lect init-store`; each node's --endpoint is its proxy; the proxies'
"slow down" answer is DynamoDB's throttling error, HTTP 400
ProvisionedThroughputExceededException, counted as `throttle`; the store
restart is `dynamodb_restart`: the JVM stopped and started again on the same
port and -dbPath); `[postgres]` on a throwaway PostgreSQL (table made with
`s3lect init-store`; each node's postgres:// URL names its own proxy's port;
only connection faults — resets, lost responses, stalls, latency, partitions
— since an HTTP answer means nothing in PostgreSQL's protocol; the store
restart is `postgres_restart`: a crash — SIGKILL of every server process or
an immediate shutdown — then recovery, or a fast shutdown and 0.5-3 s down;
same port and data); `[gcs]` on fake-gcs-server (no token: the nodes'
--endpoint is their proxy on loopback; the "slow down" answer is Cloud
Storage's 429 rate limit, counted as `throttle`; the store restart is
`gcs_restart`: SIGTERM or SIGKILL, then the server again on the same port
and filesystem data); `[azure]` on Azurite (Shared Key; each node's
--endpoint is its proxy; the "slow down" answer is Azure's 503 ServerBusy,
counted as `busy`; the store restart is `azure_restart`: SIGTERM or SIGKILL,
then the same port and data); `[etcd]` on Debian's etcd (each node's etcd:// URL
names its own proxy's port; the "slow down" answer is etcd's 503 "no
leader", counted as `no_leader`; the store restart is `etcd_restart`:
SIGTERM or SIGKILL, then etcd again on the same ports and data); `[redis]` on
redis-server (the store's ACL user, the append-only file fsynced on every
write; each node's redis:// URL names its own proxy's port; connection faults
only, as for PostgreSQL; the store restart is `redis_restart`: SIGTERM or
SIGKILL, then the server again on the same port and data). The checks are the same for every store; each store's
summary lines are prefixed with its name. `-k 'five_nodes and postgres'`
picks one store.

Every leader's CMD (leader_cmd.py) logs its leadership with CLOCK_MONOTONIC
times; chaos_checker.py then asserts that no two leaders overlapped (beyond
the documented stop latency of a resumed node), that terms strictly
increased, that no term was acquired twice, and that leadership came back
after every fault.

Timings are scaled (lease 3 s, renew 1 s, deadline 2 s, frequent 0.5 s,
infrequent 1-2 s, kill-timeout 500 ms, max-clock-skew 2 s, offsets within
±0.9 s). The run injects faults for S3LECT_CHAOS_SECONDS (default 45 on
every store; at least one round of every fault kind
always runs); S3LECT_CHAOS_SEED replays a schedule (per store: the store
restart and the proxies' fault choices differ between stores).
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import subprocess
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest

import chaos_checker as ck
from chaos_lib import FAKETIME_ENV, FAKETIME_LIB, DeathWatch, Node, Proxy, pid_gone
from harness.backends import BACKENDS, Backend
from harness.servers import ServerStartError

# An exception in a proxy thread is a bug of the test machinery: fail on it.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

N_NODES = 5
LEASE_S, RENEW_S, DEADLINE_S, FREQUENT_S = 3.0, 1.0, 2.0, 0.5
INFREQUENT = ["1s", "1500ms", "2s", "1s", "2s"]
OFFSETS_S = [-0.9, -0.45, 0.0, 0.45, 0.9]  # pairwise within 1.8 s < max_clock_skew 2 s
TIMING = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
          "--frequent-interval", "500ms", "--max-clock-skew", "2s", "--kill-timeout", "500ms"]
# s3lect run checks its lease every 250 ms and SIGTERMs CMD, which exits at
# once; the rest is slack for a loaded 2-core machine.
STOP_BOUND_S = 1.0
# Failover is about L + frequent (infrequent <= L); generous slack.
LIVENESS_BOUND_S = LEASE_S + 2 * FREQUENT_S + 8.0
# At least one round of every kind runs anyway (~45-60 s); longer runs
# (S3LECT_CHAOS_SECONDS) repeat kinds, which the test budget cannot afford.
DEFAULT_SECONDS = {"minio": 45, "dynamodb": 45, "postgres": 45, "gcs": 45, "azure": 45,
                   "etcd": 45, "redis": 45, "mysql": 45, "k8s": 45}


def conn_faults(backend: Backend) -> tuple[str, ...]:
    """The proxies' connection-fault counters (the "slow down" answer if any)."""
    return (("reset", "lost_response", "stall")
            + ((backend.answer[0],) if backend.answer else ()) + ("conn_reset",))


def fault_kinds(backend: Backend) -> list[str]:
    """The fault kinds of a round; the store restart is the backend's (MinIO's
    list and order are those of before, so old seeds replay the same)."""
    return ["kill_leader", "pause_leader", "partition_leader_blackhole",
            "partition_leader_reset", backend.restart_kind, "pause_follower",
            "partition_follower", "slow_leader"]


class CmdLog:
    """Incremental reader of the shared CMD log."""

    def __init__(self, path: Path):
        self.path = path
        self.off = 0
        self.buf = b""
        self.inst: dict[int, ck.Instance] = {}

    def poll(self) -> dict[int, ck.Instance]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except FileNotFoundError:
            return self.inst
        self.off += len(data)
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            ev, term, node, pid, t = line.decode().split()
            pid_i, t_f = int(pid), float(t)
            if ev == "start":
                self.inst[pid_i] = ck.Instance(pid_i, node, int(term), t_f, t_f)
            elif pid_i in self.inst:
                self.inst[pid_i].last = t_f
                if ev == "end":
                    self.inst[pid_i].end = t_f
        return self.inst


class Chaos:
    def __init__(self, nodes: list[Node], proxies: list[Proxy], backend: Backend,
                 rng: random.Random, cmd_log: Path):
        self.nodes = nodes
        self.proxies = proxies
        self.backend = backend
        self.kinds = fault_kinds(backend)
        self.restarts: Counter[str] = Counter()
        self.rng = rng
        self.log = CmdLog(cmd_log)
        self.pauses: list[ck.Pause] = []
        self.deaths: dict[int, float] = {}
        self.faults: list[ck.Fault] = []
        self.counts: Counter[str] = Counter()
        self.problems: list[str] = []
        self.expected_dead: set[str] = set()

    # -- observation
    def leader(self) -> Node | None:
        """The node whose CMD runs now (alive, not paused), latest start wins."""
        inst = self.log.poll()
        best = None
        for i in inst.values():
            if i.end is None and i.pid not in self.deaths and not pid_gone(i.pid):
                n = self.by_id(i.node)
                if n.alive() and not n.paused and (best is None or i.start > best[0]):
                    best = (i.start, n)
        return best[1] if best else None

    def by_id(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)

    def wait_leader(self, timeout: float, what: str, exclude: Node | None = None) -> Node | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_nodes()
            n = self.leader()
            if n is not None and n is not exclude:
                return n
            time.sleep(0.05)
        self.problems.append(f"no leader within {timeout:.0f}s {what}")
        return None

    def check_nodes(self) -> None:
        """An s3lect that exited without being told to is a bug: report, restart."""
        for n in self.nodes:
            if n.proc is not None and not n.alive() and n.id not in self.expected_dead:
                self.problems.append(
                    f"{n.id} exited by itself with status {n.proc.returncode}; log tail:\n"
                    + "\n".join(n.text().splitlines()[-15:]))
                n.start()

    def sleep(self, s: float) -> None:
        end = time.monotonic() + s
        while time.monotonic() < end:
            self.check_nodes()
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))

    # -- faults
    def noise(self) -> None:
        """Background faults on one to three nodes for the next step."""
        for p in self.proxies:
            p.calm()
        for p in self.rng.sample(self.proxies, self.rng.randint(1, 3)):
            p.set(latency=self.rng.choice([0.0, 0.02, 0.1, 0.2]),
                  flaky=self.rng.choice([0.05, 0.1, 0.2, 0.3]))
            self.counts["noise_phase"] += 1

    def record(self, kind: str, node: Node, t_begin: float, t_heal: float) -> None:
        self.faults.append(ck.Fault(kind, node.id, t_begin, t_heal))
        self.counts[kind] += 1

    def kill_leader(self, leader: Node) -> None:
        t = time.monotonic()
        self.expected_dead.add(leader.id)
        dead = leader.kill9()
        # A CMD started just before the kill may not have shown up as a child yet.
        for i in self.log.poll().values():
            if (i.node == leader.id and i.end is None and i.pid not in dead
                    and i.pid not in self.deaths):  # (not a CMD of an earlier kill)
                deadline = time.monotonic() + 5
                while not pid_gone(i.pid) and time.monotonic() < deadline:
                    time.sleep(0.005)
                dead[i.pid] = time.monotonic()
        for pid, td in dead.items():
            if td - t > 2.0:
                self.problems.append(f"CMD pid {pid} of {leader.id} outlived kill -9 of s3lect "
                                     f"by {td - t:.1f}s (PR_SET_PDEATHSIG)")
        self.deaths.update(dead)
        # Healed once its CMD is gone: from then on the others must take over.
        self.record("kill_leader", leader, t, max(dead.values(), default=t))
        self.wait_leader(LIVENESS_BOUND_S + 5, f"after kill -9 of {leader.id}")
        self.expected_dead.discard(leader.id)
        leader.start()  # the machine reboots: same id, new incarnation

    def pause(self, node: Node, kind: str, seconds: float) -> None:
        cmds, tp = node.pause()
        self.sleep(seconds)
        tr = node.resume(cmds)
        self.pauses.append(ck.Pause(node.id, cmds, tp, tr))
        self.record(kind, node, tp, tr)
        deadline = time.monotonic() + 10
        while any(not pid_gone(p) for p in cmds) and time.monotonic() < deadline:
            time.sleep(0.01)
        if any(not pid_gone(p) for p in cmds):
            self.problems.append(f"{node.id}'s CMD still runs 10s after a {seconds:.1f}s pause")

    def partition(self, node: Node, kind: str, mode: str, seconds: float) -> None:
        t = time.monotonic()
        node.proxy.set(mode=mode)
        self.sleep(seconds)
        node.proxy.heal()
        self.record(kind, node, t, time.monotonic())

    def slow(self, node: Node, seconds: float) -> None:
        t = time.monotonic()
        node.proxy.set(latency=self.rng.uniform(0.3, 1.2))
        self.sleep(seconds)
        node.proxy.heal()
        self.record("slow_leader", node, t, time.monotonic())

    def store_restart(self, node: Node) -> None:
        """The store's server goes down and comes back with its data."""
        t = time.monotonic()
        try:
            how = self.backend.restart(self.rng, self.sleep)
        except ServerStartError as e:
            self.problems.append(str(e))
            raise
        self.restarts[how] += 1
        self.record(self.backend.restart_kind, node, t, time.monotonic())

    def step(self, kind: str) -> None:
        self.noise()
        leader = self.wait_leader(LIVENESS_BOUND_S + 5, f"before {kind}")
        if leader is None:
            return
        followers = [n for n in self.nodes if n is not leader and n.alive()]
        if kind == "kill_leader":
            self.kill_leader(leader)
        elif kind == "pause_leader":
            self.pause(leader, kind, self.rng.uniform(LEASE_S + 1, LEASE_S + 3))
        elif kind == "pause_follower":
            self.pause(self.rng.choice(followers), kind, self.rng.uniform(LEASE_S, LEASE_S + 2))
        elif kind.startswith("partition_leader"):
            self.partition(leader, kind, kind.rsplit("_", 1)[1], self.rng.uniform(4, 6))
        elif kind == "partition_follower":
            self.partition(self.rng.choice(followers), kind,
                           self.rng.choice(["blackhole", "reset"]), self.rng.uniform(2, 4))
        elif kind == "slow_leader":
            self.slow(leader, self.rng.uniform(3, 5))
        elif kind == self.backend.restart_kind:
            self.store_restart(leader)
        for p in self.proxies:
            p.calm()
        self.wait_leader(LIVENESS_BOUND_S + 5, f"after {kind}")
        self.sleep(self.rng.uniform(1.0, 2.0))

    def run(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        rounds = 0
        while not self.problems:
            kinds = self.kinds[:]
            self.rng.shuffle(kinds)
            for kind in kinds:
                if self.problems or (rounds > 0 and time.monotonic() >= end):
                    return
                self.step(kind)
            rounds += 1

    def finish(self) -> dict[str, float | None]:
        """Heals everything, waits for a leader, then stops the nodes with
        SIGTERM (followers first) and returns how long each took."""
        for p in self.proxies:
            p.calm()
            p.heal()
        for n in self.nodes:
            if n.paused:
                n.resume(n.cmd_pids())
        self.wait_leader(LIVENESS_BOUND_S + 5, "after the last fault")
        leader = self.leader()
        order = [n for n in self.nodes if n is not leader] + ([leader] if leader else [])
        took: dict[str, float | None] = {}
        for n in order:
            self.expected_dead.add(n.id)
            t = took[n.id + (" (leader)" if n is leader else "")] = n.terminate()
            if t is None:
                self.problems.append(f"{n.id} did not exit within 20s of SIGTERM (hang); log "
                                     "tail:\n" + "\n".join(n.text().splitlines()[-15:]))
        return took


def chaos_seconds(backend: str) -> float:
    v = os.environ.get("S3LECT_CHAOS_SECONDS", "")
    try:
        return float(v) if v else DEFAULT_SECONDS[backend]
    except ValueError:
        pytest.fail(f"S3LECT_CHAOS_SECONDS must be a number of seconds, not {v!r}")


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "S3LECT_TEST_", "LD_PRELOAD", "FAKETIME", "PG", "AZURE_"))}


def check_faketime(bin_: Path, status_args: list[str], env: dict[str, str]) -> None:
    """libfaketime must really move s3lect's wall clock (and only that): read the
    record with `s3lect status` 100 s in the future; its age must show it.
    status_args: the lock URL and options that reach the store directly."""
    fenv = dict(env, LD_PRELOAD=str(FAKETIME_LIB), FAKETIME="+100", **FAKETIME_ENV)
    fenv["ASAN_OPTIONS"] = (fenv.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    r = subprocess.run([str(bin_), "status", *status_args, "--json"], env=fenv,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode in (0, 3), f"s3lect status failed: {r.stderr}"
    age = json.loads(r.stdout)["localAgeMs"]  # ageMs is by the store's clock where it has one
    assert 95_000 <= age <= 110_000, f"libfaketime did not shift s3lect's wall clock: ageMs={age}"


# Every store of the registry's chaos suite (tests/harness/stores.py); suite
# chaos runs these in its second pytest session (scripts/test), beside the
# fault scenarios, and the others in the first: a new store goes to the first.
SECOND_SESSION = ("azure", "etcd", "redis")


@pytest.mark.parametrize("store", [
    pytest.param(s, marks=pytest.mark.second_session) if s in SECOND_SESSION else s
    for s in BACKENDS])
def test_chaos_five_nodes(store: str, tmp_path: Path, s3lect_bin: Path,
                          chaos_summary: list[str]) -> None:
    if not FAKETIME_LIB.exists():
        pytest.fail(f"libfaketime not found at {FAKETIME_LIB}: apt-get install faketime "
                    "(scripts/deps installs it)")
    seed = int(os.environ.get("S3LECT_CHAOS_SEED") or secrets.randbits(32))
    seconds = chaos_seconds(store)
    rng = random.Random(seed)
    lines: list[str] = []  # this run's summary (chaos_summary gathers every store's)
    lines.append(f"seed {seed} (replay the schedule: S3LECT_CHAOS_SEED={seed}), "
                 f"{seconds:.0f}s of faults, logs in {tmp_path}")
    t_run = time.monotonic()
    cmd_log = tmp_path / "cmd.log"
    offsets = OFFSETS_S[:]
    rng.shuffle(offsets)
    took: dict[str, float | None] = {}
    # A CMD killed by SIGKILL (the supervisor's hard deadline passed while
    # its node was paused) logs no end line: its end is when it was seen gone.
    cmd_log.touch()
    watch = DeathWatch(cmd_log)
    with ExitStack() as stack:
        stack.callback(watch.stop)
        try:
            backend = BACKENDS[store](folder="chaos/", suffix=".json")
        except ServerStartError as e:
            pytest.fail(str(e), pytrace=False)
        stack.callback(backend.destroy, tmp_path)  # (its log lands next to the nodes')
        try:
            backend.start()
        except ServerStartError as e:
            pytest.fail(str(e), pytrace=False)
        proxies = []
        for i in range(N_NODES):
            p = Proxy(f"n{i}", backend.port, rng.randrange(2**32), answer=backend.answer)
            stack.callback(p.close)
            proxies.append(p)
        env = clean_env()
        env.update(backend.env(), HOME=str(tmp_path))
        key = f"chaos-{secrets.token_hex(4)}" if store != "minio" else secrets.token_hex(4)
        try:
            backend.init(s3lect_bin, key, env)
        except ServerStartError as e:
            pytest.fail(str(e), pytrace=False)
        nodes = []
        for i in range(N_NODES):
            timing = TIMING + ["--infrequent-interval", INFREQUENT[i]]
            n = Node(f"n{i}", s3lect_bin, backend.node_lock(key, proxies[i].port), proxies[i],
                     env, timing, offsets[i], cmd_log, tmp_path,
                     store_args=backend.node_args(proxies[i].port))
            stack.callback(n.stop)
            nodes.append(n)
        for n in nodes:
            n.start()
        chaos = Chaos(nodes, proxies, backend, rng, cmd_log)
        if chaos.wait_leader(30, "at start") is not None:
            check_faketime(s3lect_bin, backend.status_args(key), env)
            try:
                chaos.run(seconds)
            finally:
                took = chaos.finish()
        logs = [p for n in nodes for p in n.logs]
    run_end = time.monotonic()

    node_logs = ck.read_logs(logs)
    deaths = dict(watch.deaths)
    for pid, t in chaos.deaths.items():
        deaths[pid] = min(t, deaths.get(pid, t))
    rep = ck.check(cmd_log.read_text() if cmd_log.exists() else "", node_logs, chaos.pauses,
                   deaths, chaos.faults, stop_bound=STOP_BOUND_S,
                   liveness_bound=LIVENESS_BOUND_S, renew_deadline=DEADLINE_S, run_end=run_end)
    conn = Counter()
    for p in proxies:
        conn.update(p.stats)
    kinds = conn_faults(backend)
    n_conn_faults = sum(conn[k] for k in kinds)
    big = sum(v for k, v in chaos.counts.items() if k != "noise_phase")
    regain = [d for _, d in rep.regain_s]
    lines.append(
        f"{big} faults injected: " + ", ".join(f"{k}={v}" for k, v in sorted(chaos.counts.items())
                                               if k != "noise_phase")
        + (" (restarts: " + ", ".join(f"{k} {v}" for k, v in sorted(chaos.restarts.items())) + ")"
           if store != "minio" and chaos.restarts else ""))
    lines.append(
        f"background: {chaos.counts['noise_phase']} noisy-node phases, {n_conn_faults} connection "
        f"faults (" + ", ".join(f"{k}={conn[k]}" for k in kinds) + ")")
    lines.append(
        f"{len(rep.instances)} leaderships, terms {rep.instances[0].term if rep.instances else '-'}"
        f"..{rep.instances[-1].term if rep.instances else '-'}; leadership regained after a "
        f"fault in max {max(regain, default=0):.2f}s (bound {LIVENESS_BOUND_S:.0f}s), longest "
        f"time without a leader {rep.max_gap_s:.2f}s; resumed "
        f"leader's CMD stopped within {rep.max_post_resume_s:.3f}s (bound {STOP_BOUND_S}s); "
        f"SIGTERM exit max {max((v for v in took.values() if v is not None), default=0):.2f}s; "
        f"run took {run_end - t_run:.0f}s")
    lines = [f"[{store}] {line}" for line in lines]
    chaos_summary.extend(lines)
    for line in lines:
        print(line)
    exits = ", ".join(f"{k} {'hung' if v is None else f'{v:.2f}s'}" for k, v in took.items())
    (tmp_path / "summary.txt").write_text(
        "\n".join(lines + [f"SIGTERM to exit: {exits}"] + rep.violations) + "\n")

    sanitizer = [f"{name}: {m.group(0)}" for name, text in node_logs.items()
                 for m in re.finditer(r"ERROR: \w+Sanitizer.*|runtime error:.*", text)]
    # Every node must really have gone through its proxy (else no fault reached it).
    bypass = [f"{p.name}'s proxy saw no connection: the node did not go through it"
              for p in proxies if not p.stats["connections"]]
    errors = chaos.problems + rep.violations + sanitizer + bypass
    assert not errors, ("chaos run on %s failed (seed %d, logs in %s):\n" % (store, seed, tmp_path)
                        + "\n".join(errors))
    assert big >= len(chaos.kinds), f"only {big} faults were injected"
    assert len(rep.instances) >= 2, "leadership never changed hands"

# SPDX-License-Identifier: Apache-2.0
"""Failover after kill -9 of the leader, and handover after SIGTERM.

For each configuration: N nodes on one fresh lock key. A trial waits until
exactly one node leads and every other node reports following it, waits a
random extra time (so the kill falls anywhere in the renew and poll cycles),
then either SIGKILLs the leader's process group and its command's group, or
sends SIGTERM to the leader, and measures from just before the signal until
another node's stderr says "acquired leadership". The stopped node is then
restarted (with a new id) as a follower.

The supervised command is bench/lib/treecmd.py: every process of its tree
writes a heartbeat stamped with time.monotonic() to a shared log, so the
command trees' lifetimes are measured by the trees themselves, not by what
s3lect says about them. In the "grandchild" variant each command also starts
a double-forked, setsid(), SIGTERM-ignoring grandchild that neither the
SIGTERM nor the bench's kill -9 of the node's and the command's process
groups reaches: only s3lect's supervisor can stop it.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cluster import Cluster
from common import BenchError, fmt_s, log, md_table, overlap, paired_with_first, percentile
from impls import (COST, LIKE_FOR_LIKE, MODE_TEXT, PEER_SETUPS_TEXT, Impl, Timing,
                   zero_config_for)

# (timing, mode, command variant, trials in a full run, trials with --quick)
CONFIGS = [
    (LIKE_FOR_LIKE, "s3", "plain", 20, 5),
    (LIKE_FOR_LIKE, "peer", "plain", 20, 5),
    (LIKE_FOR_LIKE, "s3", "grandchild", 20, 5),
    (LIKE_FOR_LIKE, "peer", "grandchild", 20, 5),
    (COST, "s3", "plain", 20, 5),
    (COST, "peer", "plain", 20, 5),
]
# The default timings run in their own bench (bench/run defaults,
# lib/defaults.py): s3lect as shipped, with its peers firewalled, S3 only,
# and Go s3lect at its defaults.
NODES = 3
# Largest random delay (s) before a stopped node is restarted (bench/run
# --restart-delay; 0: at once). run_config's restart_delay overrides it (the
# defaults rows: one frequent interval, lib/defaults.py).
RESTART_DELAY = 0.0
TREECMD = Path(__file__).resolve().parent / "treecmd.py"


@dataclass
class Trees:
    """The supervised command trees of one run, from their own heartbeats."""

    count: int = 0
    overlap: tuple[float, int] = (0.0, 0)  # total s two trees were alive, stretches
    min_gap: float | None = None  # smallest (next tree's start - earlier trees' last beat)
    grandchildren: int = 0  # trees whose grandchild beat at least once


def read_trees(path: Path) -> Trees:
    """Each tree lives from its start line to the last heartbeat of any of its
    processes. Two trees overlap while both live."""
    trees: dict[tuple[str, int], list[float]] = {}
    gc: set[tuple[str, int]] = set()
    if path.exists():
        for line in path.read_text().splitlines():
            p = line.split()
            if len(p) == 4 and p[0] == "start":
                t = float(p[3])
                trees[(p[1], int(p[2]))] = [t, t]
            elif len(p) == 6 and p[0] == "beat":
                k = (p[1], int(p[2]))
                iv = trees.setdefault(k, [float(p[5]), float(p[5])])
                iv[1] = max(iv[1], float(p[5]))
                if p[3] == "grandchild":
                    gc.add(k)
    ivs = sorted(trees.values())
    gap, last = None, None
    for s, e in ivs:
        if last is not None:
            gap = s - last if gap is None else min(gap, s - last)
        last = e if last is None else max(last, e)
    return Trees(len(ivs), overlap(ivs), gap, len(gc))


@dataclass
class Run:
    impl: str
    timing: Timing
    mode: str
    variant: str = "plain"
    kill: list[float] = field(default_factory=list)
    term: list[float] = field(default_factory=list)
    # Leader frozen (SIGSTOP of its whole tree): seconds to the new leader,
    # and per trial the physical bound (the frozen leader's last renewal's
    # lastUpdated + lease, from the signal) when the record could be read.
    freeze: list[float] = field(default_factory=list)
    freeze_bound: list[float | None] = field(default_factory=list)
    # Leader cut off (its store address and peer port dropped, no reset):
    # the same two, from the cut.
    cut: list[float] = field(default_factory=list)
    cut_bound: list[float | None] = field(default_factory=list)
    kill_bound: list[float | None] = field(default_factory=list)  # the same for kill -9
    lead_overlap: tuple[float, int] = (0.0, 0)
    cmd_overlap: tuple[float, int] = (0.0, 0)
    extra_acquisitions: int = 0
    bad_exits: list[str] = field(default_factory=list)
    plot: str | None = None
    duration: float = 0.0
    trees: Trees = field(default_factory=Trees)
    peer_setup: str = ""  # "zero-config" or "certificates" in peer mode
    restart_delay: float = 0.0  # a stopped node restarts after a random 0-this s

    @property
    def mode_label(self) -> str:
        return f"{self.mode} ({self.peer_setup})" if self.peer_setup else self.mode

    @property
    def tag(self) -> str:
        v = "" if self.variant == "plain" else f"-{self.variant}"
        return f"{self.impl}-{self.timing.name}-{self.mode}{v}"


def record_reader(server):
    """read(key) -> the lock record at key on the bench's S3 server, as a dict
    (None when missing or not JSON): for the physical bound of a trial."""
    import json
    from harness.s3client import S3Client
    client = S3Client(server.endpoint, server.access_key, server.secret_key)

    def read(key: str):
        r = client.get(server.bucket, key)
        if r.status != 200:
            return None
        try:
            return json.loads(r.body)
        except ValueError:
            return None
    return read


def _rfc3339(text: str) -> float:
    """Seconds since the epoch of a record's lastUpdated (RFC 3339: s3lect
    writes ms and 'Z'; Go s3lect may write ns or an offset)."""
    import datetime
    import re
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    off = 0 if m[3] == "Z" else (1 if m[3][0] == "+" else -1) * (
        int(m[3][1:3]) * 3600 + int(m[3][4:6]) * 60)
    base = datetime.datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return base + (float(m[2]) if m[2] else 0.0) - off


def _leader_port(rec, ldr) -> int | None:
    """The peer port the record gives for ldr (leaderAddr), if it names ldr."""
    addr = rec.get("leaderAddr") if rec and rec.get("leaderID") == ldr.id else None
    if not addr or ":" not in addr:
        return None
    try:
        return int(addr.rsplit(":", 1)[1])
    except ValueError:
        return None


def _trial(cl: Cluster, kind: str, rng: random.Random, run: Run, read_record=None,
           cut=None) -> float:
    t = cl.timing
    settle_timeout = 2 * (t.lease + t.infrequent + t.frequent) + 30
    ldr = cl.wait(cl.settled_leader, settle_timeout, "one leader followed by every node")
    # A random phase relative to the leader's renewals and the followers' polls.
    time.sleep(rng.uniform(t.renew, 2 * t.renew))
    ldr2 = cl.wait(cl.settled_leader, settle_timeout, "one leader followed by every node")
    if ldr2 is not ldr:
        log(f"  leadership moved from {ldr.id} to {ldr2.id} without a signal")
    ldr = ldr2
    old_term = ldr.term
    with cl.cv:
        idx = len(cl.events)
    link = None
    if kind in ("kill", "freeze", "cut"):
        if kind == "cut":
            # Its peer port from the record (read before the cut: the bench's
            # reader is not cut off, but the record names the port).
            port = _leader_port(read_record() if read_record else None, ldr)
            t0 = time.monotonic()
            link = cut(ldr, port)
            cl.mark(t0, ldr, "cut")
        else:
            t0 = ldr.kill9() if kind == "kill" else ldr.freeze()
        wall0 = time.time() - (time.monotonic() - t0)
        bound = t.kill_target(cl.mode) if kind == "kill" else t.lease + t.frequent + 1
        # The physical bound: the old leader's last write, as the store has it
        # (its lastUpdated, this machine's clock), plus the lease, from the
        # signal: no node may lead earlier.
        phys = None
        rec = read_record() if read_record else None
        if rec and rec.get("leaderID") == ldr.id and rec.get("lastUpdated"):
            phys = _rfc3339(rec["lastUpdated"]) + t.lease - wall0
        {"kill": run.kill_bound, "freeze": run.freeze_bound, "cut": run.cut_bound}[kind].append(phys)
    else:
        t0 = ldr.sigterm()
        cl.mark(t0, ldr, "term")
        bound = t.graceful_target(cl.mode)
    ev = cl.wait(lambda: cl.first_acquired_after(idx, ldr), 3 * bound + 30,
                 f"a new leader after {kind} of {ldr.id}")
    took = ev.t - t0
    if cl.impl.has_term and ev.data["term"] <= old_term:
        raise BenchError(f"new leader {ev.node.id} has term {ev.data['term']}, "
                         f"not above {old_term}")
    if kind == "cut":
        # The link comes back after a random while; the node stays up and
        # must rejoin as a follower (the next trial waits until every node
        # follows one leader).
        if run.restart_delay > 0:
            time.sleep(rng.uniform(0, run.restart_delay))
        link.heal()
        if ldr.proc.poll() is not None:
            run.bad_exits.append(f"{ldr.id} exited {ldr.proc.returncode} while cut off")
            cl.start_slot(ldr.slot)
        with cl.cv:
            run.extra_acquisitions += sum(
                1 for e in cl.events[idx:] if e.kind == "acquired" and e is not ev)
        return took
    if kind == "freeze":
        ldr.kill9(trial=False)  # SIGKILL ends a stopped process too
    rc = ldr.wait(30)
    if kind == "term" and rc != 0:
        run.bad_exits.append(f"{ldr.id} exited {rc} after SIGTERM")
    if run.restart_delay > 0:
        # So that a node's own timers are not in step with the new leader's.
        time.sleep(rng.uniform(0, run.restart_delay))
    cl.start_slot(ldr.slot)
    # Count acquisitions beyond the one measured (flapping) within the trial.
    with cl.cv:
        run.extra_acquisitions += sum(
            1 for e in cl.events[idx:] if e.kind == "acquired" and e is not ev)
    return took


def run_config(impl: Impl, server, timing: Timing, mode: str, variant: str, trials: int,
               rng: random.Random, logdir: Path, pki, plot_fn,
               zero_config: bool | None = None, restart_delay: float | None = None,
               events: tuple[str, ...] = ("kill", "term"), read_record=None,
               endpoint_for=None, cut=None) -> Run:
    """zero_config: peer mode without certificate flags where the
    implementation has it (default: impls.zero_config_for(timing, mode));
    restart_delay: largest random delay before a stopped node is restarted
    (default RESTART_DELAY); events: which trials, in order ("kill", "term",
    "freeze", "cut"); read_record(key): the lock's record as a dict (for the
    physical bound of "freeze" and "cut" trials); endpoint_for(slot): the
    store endpoint of a slot's nodes; cut(node, peer_port): cuts the node
    off, returning an object whose heal() ends the cut ("cut" trials)."""
    run = Run(impl.name, timing, mode, variant)
    run.restart_delay = RESTART_DELAY if restart_delay is None else restart_delay
    key = f"bench/failover/{int(time.time())}-{run.tag}.json"
    tree_log = logdir / run.tag / "trees.log"
    cmd = [sys.executable, str(TREECMD), str(tree_log)]
    if variant == "grandchild":
        cmd.append("--grandchild")
    if zero_config is None:
        zero_config = zero_config_for(timing, mode)
    cl = Cluster(impl, NODES, server, key, timing, mode, logdir / run.tag, pki, cmd=cmd,
                 zero_config=zero_config, endpoint_for=endpoint_for)
    run.peer_setup = cl.peer_setup()
    t_start = time.monotonic()
    try:
        cl.start()
        outs = {"kill": run.kill, "term": run.term, "freeze": run.freeze, "cut": run.cut}
        rr = (lambda: read_record(key)) if read_record else None
        for kind in events:
            out = outs[kind]
            for i in range(trials):
                took = _trial(cl, kind, rng, run, rr, cut)
                out.append(took)
                log(f"  {run.tag} {kind} #{i + 1}/{trials}: {took:.2f}s")
        # Let the last restarted node join, so the timeline ends settled.
        cl.wait(cl.settled_leader, 2 * (timing.lease + timing.infrequent) + 30, "a settled end")
    finally:
        cl.stop()
    run.duration = time.monotonic() - t_start
    # The last tree is stopped by its supervisor after cl.stop(); wait until
    # no heartbeat has come for a while before reading the log.
    end = time.monotonic() + 3 * timing.lease + 10
    size = -1
    while time.monotonic() < end:
        now = tree_log.stat().st_size if tree_log.exists() else 0
        if now == size:
            break
        size = now
        time.sleep(1.0)
    run.trees = read_trees(tree_log)
    # (The last tree may be stopped before its grandchild was forked.)
    if variant == "grandchild" and run.trees.grandchildren < run.trees.count - 1:
        raise BenchError(f"{run.tag}: only {run.trees.grandchildren} of {run.trees.count} "
                         "command trees started their grandchild")
    run.lead_overlap = cl.overlap("lead")
    run.cmd_overlap = cl.overlap("cmd")
    if plot_fn:
        run.plot = plot_fn(cl, run)
    return run


def default_kill_timeout(t: Timing) -> float:
    """s3lect run's default (and largest allowed) kill timeout, in seconds."""
    return t.lease - t.deadline - (2 * t.lease / 1000 + 0.25)


def stats_row(run: Run, kind: str) -> list[object]:
    xs = run.kill if kind == "kill" else run.term
    target = (run.timing.kill_target(run.mode) if kind == "kill"
              else run.timing.graceful_target(run.mode))
    if kind == "term" and run.variant == "grandchild":
        # The grandchild ignores SIGTERM: s3lect SIGKILLs it after the kill
        # timeout before it releases the lock.
        target += default_kill_timeout(run.timing)
    p99 = percentile(xs, 99)
    return [run.impl, run.timing.name, run.mode_label, run.variant,
            "kill -9 → new leader" if kind == "kill" else "SIGTERM → new leader",
            len(xs), fmt_s(percentile(xs, 50)), fmt_s(percentile(xs, 90)), fmt_s(p99),
            fmt_s(max(xs)), fmt_s(target), "yes" if p99 <= target else "**no**"]


HEADERS = ["impl", "timing", "mode", "command", "event", "trials", "p50 s", "p90 s", "p99 s", "max s",
           "target p99 ≤ s", "meets target"]


def ratios(runs: list[Run]) -> str:
    """p50 and p99 of every other implementation relative to the first one
    measured, per timing, mode and event ("" with one implementation)."""
    pairs = paired_with_first(runs)
    if not pairs:
        return ""
    rows = []
    for b, r in pairs:
        for kind, label in (("kill", "kill -9"), ("term", "SIGTERM")):
            xs, bs = getattr(r, kind), getattr(b, kind)
            rows.append([r.timing.name, r.mode, label, f"{b.impl} / {r.impl}",
                         f"{percentile(bs, 50) / percentile(xs, 50):.2f}",
                         f"{percentile(bs, 99) / percentile(xs, 99):.2f}"])
    return md_table(["timing", "mode", "event", "ratio", "p50 ratio", "p99 ratio"], rows)


def _few_trials(runs: list[Run]) -> str:
    """A sentence naming the runs with fewer than 20 trials per event."""
    few = [f"{r.tag} ({len(r.kill)})" for r in runs if len(r.kill) < 20]
    if not few:
        return ""
    return (" Fewer than 20 trials per event, so p99 is the largest of few samples: "
            + ", ".join(few) + ".")


def _restarts(runs: list[Run]) -> str:
    delays = sorted({r.restart_delay for r in runs})
    if delays == [0.0]:
        return "The stopped node is restarted at once, with a new id."
    return ("The stopped node is restarted with a new id after a random delay, uniform "
            "from 0 to " + " or ".join(f"{d:g} s" for d in delays) + " (per configuration: "
            + ", ".join(f"{r.tag} {r.restart_delay:g} s" for r in runs) + "), so that its "
            "timers are not in step with the new leader's.")


def report(runs: list[Run]) -> tuple[str, str]:
    """Markdown body for results/failover.md and a short summary for the console."""
    rows = [stats_row(r, k) for r in runs for k in ("kill", "term")]
    table = md_table(HEADERS, rows)
    ov_rows = [[r.impl, r.timing.name, r.mode_label, r.variant,
                f"{r.lead_overlap[0]:.3f} ({r.lead_overlap[1]})",
                f"{r.cmd_overlap[0]:.3f} ({r.cmd_overlap[1]})",
                f"{r.trees.overlap[0]:.3f} ({r.trees.overlap[1]})", r.trees.count,
                "–" if r.trees.min_gap is None else f"{r.trees.min_gap:.3f}",
                r.extra_acquisitions, "; ".join(r.bad_exits) or "none",
                f"{r.duration / 60:.1f} min"] for r in runs]
    overlap = md_table(["impl", "timing", "mode", "command", "two leaders reported: s (stretches)",
                        "two commands reported: s (stretches)",
                        "two command trees alive: s (stretches)", "trees",
                        "smallest gap between trees s", "extra acquisitions",
                        "bad exits", "run time"], ov_rows)
    timings = list(dict.fromkeys(r.timing for r in runs))
    settings = md_table(["timing", "settings"], [[t.name, t.describe()] for t in timings])
    plots = "\n".join(f"- {r.tag}: ![timeline {r.tag}]({r.plot})" for r in runs if r.plot)
    cmp = ratios(runs)
    cmp_text = f"\n\n### Ratios (below 1: {runs[0].impl} is faster)\n\n{cmp}" if cmp else ""
    body = f"""## Results

{table}{cmp_text}

Percentiles are nearest-rank: with 20 trials p99 is the largest sample, and
p90 the 18th of 20.{_few_trials(runs)}

Targets (issue 9): kill -9 p99 ≤ lease + frequent + 0.5 s in S3 mode when
infrequent ≤ lease, else ≤ max(infrequent, lease + max_clock_skew) + frequent +
0.5 s; ≤ lease + 0.5 s in peer mode (and as shipped); firewalled ≤ lease + frequent + 0.5 s.
SIGTERM p99 ≤ frequent + 0.5 s in S3 mode (and firewalled), ≤ 0.5 s in
peer mode (and as shipped). Note that the S3-mode SIGTERM target assumes a follower
re-reads the lock within one frequent interval; a *stable* follower reads it
every infrequent interval, so with infrequent > frequent (cost, defaults) a
handover can take up to infrequent (+10 % jitter) in S3 mode. In the
*grandchild* rows the SIGTERM target adds the kill timeout (0.744 s at lease
3 s, deadline 2 s; 4.72 s at the defaults): the grandchild ignores SIGTERM,
so s3lect releases the lock only after it SIGKILLed it.

## Never two leaders

{overlap}

"Two leaders reported" is the total time during which two nodes' stderr both
said they led: a node leads from its `acquired leadership` line until its
`lost leadership` or `releasing leadership` line (or the moment it was killed).
"Two commands reported" uses s3lect's `started command` and `command exited`
lines the same way (`command exited` is printed once the whole tree is gone).
"Two command trees alive" is measured by the trees themselves: every process
of each supervised command (bench/lib/treecmd.py) writes a heartbeat stamped
with `time.monotonic()` every 10 ms; a tree lives from its start line to the
last heartbeat of any of its processes, and the column is the total time two
trees lived at once. "Smallest gap between trees" is the least time from the
last heartbeat of every earlier tree to the next tree's start; a process
that runs beats within 10 ms, so after its last beat it ran for at most about
that long. The order is not left to timing, though: s3lect releases the lock,
and the shim kills at the hard deadline, only after a walk of `/proc` found
no process of the tree alive. In the *grandchild* rows each
command also double-forks a grandchild that calls setsid() and ignores
SIGTERM, which neither the SIGTERM to s3lect nor the bench's kill -9 of the
node's and the command's process groups reaches: s3lect's supervising child
(a subreaper) must find and kill it. "Extra acquisitions" counts
acquisitions within a trial beyond the one measured (leadership bouncing).

## Timelines

Which node led when (one row per node slot; a restarted node keeps its slot;
× = kill -9, ▼ = SIGTERM).

{plots}

## Settings

{settings}

{NODES} nodes of `s3lect run … -- python3 bench/lib/treecmd.py LOG [--grandchild]`
(default kill timeout: the largest safe value, 744 ms for lease 3 s and
deadline 2 s, 4.72 s at the defaults), each talking straight to
MinIO on 127.0.0.1 (no proxy), one fresh lock key per configuration. Go
s3lect's node runs no command, so it has no grandchild rows (they would
repeat its plain ones).

{PEER_SETUPS_TEXT}

{MODE_TEXT if any(r.mode in ("shipped", "firewalled") for r in runs) else ""}

Before each trial the bench waits until exactly
one node leads and the other two report following it, then waits a random
1–2 renew intervals. The time is measured from just before the signal to the
moment the new leader's `acquired leadership` line reached the bench (read by
a thread per node, stamped with `time.monotonic()`). {_restarts(runs)}
"""
    summary = md_table(["impl", "timing", "mode", "command", "event", "p50 s", "p99 s", "target",
                        "ok"],
                       [[r[0], r[1], r[2], r[3], r[4].split(" ")[0], r[6], r[8], r[10], r[11]]
                        for r in rows])
    summary += "\n\n" + md_table(
        ["timing", "mode", "command", "two trees alive s", "smallest gap s"],
        [[r.timing.name, r.mode, r.variant, f"{r.trees.overlap[0]:.3f}",
          "–" if r.trees.min_gap is None else f"{r.trees.min_gap:.3f}"] for r in runs])
    if cmp:
        summary += "\n\n" + cmp
    return body, summary

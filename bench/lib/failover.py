"""Failover after kill -9 of the leader, and handover after SIGTERM.

For each configuration: N nodes on one fresh lock key. A trial waits until
exactly one node leads and every other node reports following it, waits a
random extra time (so the kill falls anywhere in the renew and poll cycles),
then either SIGKILLs the leader's process group and its command's group, or
sends SIGTERM to the leader, and measures from just before the signal until
another node's stderr says "acquired leadership". The stopped node is then
restarted (with a new id) as a follower.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from cluster import Cluster
from common import BenchError, fmt_s, log, md_table, paired_with_first, percentile
from impls import COST, DEFAULTS, LIKE_FOR_LIKE, Impl, Timing

# (timing, mode, trials in a full run, trials with --quick)
CONFIGS = [
    (LIKE_FOR_LIKE, "s3", 20, 5),
    (LIKE_FOR_LIKE, "peer", 20, 5),
    (COST, "s3", 20, 5),
    (COST, "peer", 20, 5),
    (DEFAULTS, "s3", 5, 2),
]
NODES = 3


@dataclass
class Run:
    impl: str
    timing: Timing
    mode: str
    kill: list[float] = field(default_factory=list)
    term: list[float] = field(default_factory=list)
    lead_overlap: tuple[float, int] = (0.0, 0)
    cmd_overlap: tuple[float, int] = (0.0, 0)
    extra_acquisitions: int = 0
    bad_exits: list[str] = field(default_factory=list)
    plot: str | None = None
    duration: float = 0.0

    @property
    def tag(self) -> str:
        return f"{self.impl}-{self.timing.name}-{self.mode}"


def _trial(cl: Cluster, kind: str, rng: random.Random, run: Run) -> float:
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
    if kind == "kill":
        t0 = ldr.kill9()
        bound = t.kill_target(cl.mode)
    else:
        t0 = ldr.sigterm()
        cl.mark(t0, ldr, "term")
        bound = t.graceful_target(cl.mode)
    ev = cl.wait(lambda: cl.first_acquired_after(idx, ldr), 3 * bound + 30,
                 f"a new leader after {kind} of {ldr.id}")
    took = ev.t - t0
    if ev.data["term"] <= old_term:
        raise BenchError(f"new leader {ev.node.id} has term {ev.data['term']}, "
                         f"not above {old_term}")
    rc = ldr.wait(30)
    if kind == "term" and rc != 0:
        run.bad_exits.append(f"{ldr.id} exited {rc} after SIGTERM")
    cl.start_slot(ldr.slot)
    # Count acquisitions beyond the one measured (flapping) within the trial.
    with cl.cv:
        run.extra_acquisitions += sum(
            1 for e in cl.events[idx:] if e.kind == "acquired" and e is not ev)
    return took


def run_config(impl: Impl, server, timing: Timing, mode: str, trials: int, rng: random.Random,
               logdir: Path, pki, plot_fn) -> Run:
    run = Run(impl.name, timing, mode)
    key = f"bench/failover/{int(time.time())}-{run.tag}.json"
    cl = Cluster(impl, NODES, server, key, timing, mode, logdir / run.tag, pki)
    t_start = time.monotonic()
    try:
        cl.start()
        for kind, out in (("kill", run.kill), ("term", run.term)):
            for i in range(trials):
                took = _trial(cl, kind, rng, run)
                out.append(took)
                log(f"  {run.tag} {kind} #{i + 1}/{trials}: {took:.2f}s")
        # Let the last restarted node join, so the timeline ends settled.
        cl.wait(cl.settled_leader, 2 * (timing.lease + timing.infrequent) + 30, "a settled end")
    finally:
        cl.stop()
    run.duration = time.monotonic() - t_start
    run.lead_overlap = cl.overlap("lead")
    run.cmd_overlap = cl.overlap("cmd")
    if plot_fn:
        run.plot = plot_fn(cl, run)
    return run


def stats_row(run: Run, kind: str) -> list[object]:
    xs = run.kill if kind == "kill" else run.term
    target = (run.timing.kill_target(run.mode) if kind == "kill"
              else run.timing.graceful_target(run.mode))
    p99 = percentile(xs, 99)
    return [run.impl, run.timing.name, run.mode,
            "kill -9 → new leader" if kind == "kill" else "SIGTERM → new leader",
            len(xs), fmt_s(percentile(xs, 50)), fmt_s(percentile(xs, 90)), fmt_s(p99),
            fmt_s(max(xs)), fmt_s(target), "yes" if p99 <= target else "**no**"]


HEADERS = ["impl", "timing", "mode", "event", "trials", "p50 s", "p90 s", "p99 s", "max s",
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


def _n_defaults(runs: list[Run]) -> int:
    return next((len(r.kill) for r in runs if r.timing is DEFAULTS), 0)


def report(runs: list[Run]) -> tuple[str, str]:
    """Markdown body for results/failover.md and a short summary for the console."""
    rows = [stats_row(r, k) for r in runs for k in ("kill", "term")]
    table = md_table(HEADERS, rows)
    ov_rows = [[r.impl, r.timing.name, r.mode, f"{r.lead_overlap[0]:.3f} ({r.lead_overlap[1]})",
                f"{r.cmd_overlap[0]:.3f} ({r.cmd_overlap[1]})", r.extra_acquisitions,
                "; ".join(r.bad_exits) or "none", f"{r.duration / 60:.1f} min"] for r in runs]
    overlap = md_table(["impl", "timing", "mode", "two leaders reported: s (stretches)",
                        "two commands running: s (stretches)", "extra acquisitions",
                        "bad exits", "run time"], ov_rows)
    settings = md_table(["timing", "settings"],
                        [[t.name, t.describe()] for t in (LIKE_FOR_LIKE, COST, DEFAULTS)])
    plots = "\n".join(f"- {r.tag}: ![timeline {r.tag}]({r.plot})" for r in runs if r.plot)
    cmp = ratios(runs)
    cmp_text = f"\n\n### Ratios (below 1: {runs[0].impl} is faster)\n\n{cmp}" if cmp else ""
    body = f"""## Results

{table}{cmp_text}

Percentiles are nearest-rank: with 20 trials p99 is the largest sample, and
p90 the 18th of 20. The defaults rows have only {_n_defaults(runs)} trials per
event (each trial takes up to ~35 s), so their percentiles are rough.

Targets (issue 9): kill -9 p99 ≤ lease + frequent + 0.5 s in S3 mode when
infrequent ≤ lease, else ≤ max(infrequent, lease + max_clock_skew) + frequent +
0.5 s; ≤ lease + 0.5 s in peer mode. SIGTERM p99 ≤ frequent + 0.5 s in S3 mode,
≤ 0.5 s in peer mode. Note that the S3-mode SIGTERM target assumes a follower
re-reads the lock within one frequent interval; a *stable* follower reads it
every infrequent interval, so with infrequent > frequent (cost, defaults) a
handover can take up to infrequent (+10 % jitter) in S3 mode.

## Never two leaders

{overlap}

"Two leaders reported" is the total time during which two nodes' stderr both
said they led: a node leads from its `acquired leadership` line until its
`lost leadership` or `releasing leadership` line (or the moment it was killed).
"Two commands running" uses the supervised command's `started command` and
`command exited` lines the same way. "Extra acquisitions" counts acquisitions
within a trial beyond the one measured (leadership bouncing).

## Timelines

Which node led when (one row per node slot; a restarted node keeps its slot;
× = kill -9, ▼ = SIGTERM).

{plots}

## Settings

{settings}

{NODES} nodes of `s3lect run … -- sleep 86400`, each talking straight to
MinIO on 127.0.0.1 (no proxy), one fresh lock key per configuration. Peer mode
adds `--peer --addr 127.0.0.1:PORT` with a throwaway EC P-256 CA and a
certificate for 127.0.0.1. Before each trial the bench waits until exactly
one node leads and the other two report following it, then waits a random
1–2 renew intervals. The time is measured from just before the signal to the
moment the new leader's `acquired leadership` line reached the bench (read by
a thread per node, stamped with `time.monotonic()`).
"""
    summary = md_table(["impl", "timing", "mode", "event", "p50 s", "p99 s", "target", "ok"],
                       [[r[0], r[1], r[2], r[3].split(" ")[0], r[5], r[7], r[9], r[10]]
                        for r in rows])
    if cmp:
        summary += "\n\n" + cmp
    return body, summary

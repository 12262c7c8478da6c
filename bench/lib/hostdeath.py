# SPDX-License-Identifier: Apache-2.0
"""`bench/run hostdeath`: a leader whose host freezes or loses power (issue 38
item 1). SIGSTOP of the leader's whole process tree (the node and its
command's group): no reset reaches anyone, the tree cannot act; the time from
the signal until another node leads, at each implementation's defaults, as
`bench/run defaults` runs them:

- shipped: `s3lect run` with no mode flag (peer mode on, zero-config);
- s3-only: `s3lect run --no-peer`;
- go: Go s3lect at its defaults (S3 mode).

The rows run at the same time, each on its own key of one MinIO, three nodes
each; the frozen node is killed once another leads and restarts after a
random 0 to 5 s. Per trial the physical bound is the frozen leader's last
renewal as the store has it (its record's lastUpdated, this machine's clock)
plus the lease: no follower may lead earlier; the excess over it is what the
implementation adds. Targets (issue 38): as shipped, p99 ≤ lease + frequent
interval + 1 s (21 s) and ≤ Go s3lect's p99 in the same run.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

import failover
from common import BenchError, log, md_table, percentile
from impls import DEFAULTS

OURS = "s3lect-c"
GO = "go-s3lect"
TARGET = DEFAULTS.lease + DEFAULTS.frequent + 1.0


@dataclass(frozen=True)
class Row:
    name: str
    impl: str
    mode: str
    what: str


ROWS = [
    Row("shipped", OURS, "shipped", "`s3lect run` as shipped (peer mode on, zero-config)"),
    Row("s3-only", OURS, "s3", "`s3lect run --no-peer`"),
    Row("go", GO, "s3", "Go s3lect at its defaults (S3 mode)"),
]


def run_all(impls: list, server, seed: int, logdir, pki, trials: int,
            restart_delay: float) -> tuple[list, list[str]]:
    """The rows at once (one thread each); (runs, rows not run with why)."""
    by_name = {i.name: i for i in impls}
    runs: dict[str, object] = {}
    errors: list[str] = []
    skipped: list[str] = []
    read = failover.record_reader(server)

    def one(row: Row, rng: random.Random) -> None:
        try:
            runs[row.name] = failover.run_config(
                by_name[row.impl], server, DEFAULTS, row.mode, "plain", trials, rng, logdir,
                pki, None, zero_config=True, restart_delay=restart_delay,
                events=("freeze",), read_record=read)
        except Exception as e:  # noqa: BLE001 - reported, and the run fails
            errors.append(f"{row.name}: {e}")

    threads = []
    for row in ROWS:
        impl = by_name.get(row.impl)
        if impl is None:
            skipped.append(f"{row.name}: {row.impl} is not measured in this run")
            continue
        if row.mode not in impl.modes:
            raise BenchError(f"hostdeath row {row.name}: {impl.name} has no mode {row.mode!r}")
        log(f"hostdeath: {row.name} ({impl.name} {row.mode}), {trials} frozen leaders")
        # One seed for every row: the same random phases before each signal.
        t = threading.Thread(target=one, args=(row, random.Random(seed)), daemon=True)
        t.start()
        threads.append(t)
        time.sleep(2.0)  # the clusters do not start in step
    for t in threads:
        t.join()
    if errors:
        raise BenchError("hostdeath: " + "; ".join(errors))
    return [(row, runs[row.name]) for row in ROWS if row.name in runs], skipped


def report(runs: list, skipped: list[str], trials: int, minutes: float) -> tuple[str, str, list]:
    """(markdown body, console summary, failed verdicts)."""
    by = {row.name: run for row, run in runs}
    verdicts, failed = [], []

    def add(what, ok, measured):
        v = "NOT MEASURED" if ok is None else ("PASS" if ok else "**FAIL**")
        verdicts.append([v, what, measured])
        if ok is False:
            failed.append(what)

    def p99(run):
        return percentile(run.freeze, 99)

    s, g, n = by.get("shipped"), by.get("go"), by.get("s3-only")
    if s:
        add(f"s3lect as shipped: leader frozen p99 ≤ lease + frequent + 1 s = {TARGET:g} s",
            p99(s) <= TARGET, f"p99 {p99(s):.2f} s over {len(s.freeze)} trials")
    if s and g:
        add("s3lect as shipped: leader frozen p99 ≤ Go s3lect's", p99(s) <= p99(g),
            f"{p99(s):.2f} s vs {p99(g):.2f} s")
    if n:  # measured beside them; the targets are for s3lect as shipped
        verdicts.append(["(no target)", f"s3lect --no-peer: leader frozen p99 (target for as "
                         f"shipped: {TARGET:g} s; Go s3lect's: "
                         f"{'–' if not g else f'{p99(g):.2f} s'})",
                         f"p99 {p99(n):.2f} s over {len(n.freeze)} trials"])
    for row, run in runs:
        two = (run.lead_overlap[0], run.cmd_overlap[0], run.trees.overlap[0])
        add(f"{row.name}: never two leaders, two commands or two command trees",
            max(two) == 0.0, f"{two[0]:.3f} s / {two[1]:.3f} s / {two[2]:.3f} s")

    stats = []
    for row, run in runs:
        ex = [t - b for t, b in zip(run.freeze, run.freeze_bound) if b is not None]
        stats.append([row.name, row.what, len(run.freeze), f"{percentile(run.freeze, 50):.2f}",
                      f"{percentile(run.freeze, 99):.2f}", f"{max(run.freeze):.2f}",
                      f"{percentile(ex, 50):+.2f}" if ex else "–",
                      f"{max(ex):+.2f}" if ex else "–", f"{run.duration / 60:.1f} min"])
    per_trial = []
    for row, run in runs:
        for i, (t, b) in enumerate(zip(run.freeze, run.freeze_bound)):
            per_trial.append([row.name, i + 1, f"{t:.2f}", "–" if b is None else f"{b:.2f}",
                              "–" if b is None else f"{t - b:+.2f}"])
    body = f"""## Verdicts

{md_table(["result", "verdict", "measured"], verdicts)}

A p99 is nearest-rank: with 20 trials it is the largest of the 20.

## Rows

{md_table(["row", "what runs", "trials", "p50 s", "p99 s", "max s",
           "excess over the bound p50 s", "excess max s", "run time"], stats)}

Every row: three nodes on a fresh key of one MinIO, at the implementation's
default timings (s3lect lease 15 s, renew 5 s, deadline 10 s, frequent 5 s,
infrequent 30 s; Go s3lect LeaderTimeout 15 s, cycle 5 s); the rows ran at
the same time ({minutes:.1f} min). A trial waits until every node follows
one leader, then 1 to 2 renew intervals (a random phase), SIGSTOPs the
leader's process group and its command's group, and measures until another
node reports leadership; then it kills the frozen node and restarts it after
a random 0 to 5 s. The **physical bound** of a trial is the frozen leader's
record as read from the store right after the signal: its `lastUpdated` plus
the lease, counted from the signal (no node may lead before it); the
**excess** is what the implementation adds to it. `–`: the record read did
not name the frozen leader (not seen).
{"" if not skipped else chr(10) + "Not run: " + "; ".join(skipped) + chr(10)}
## Per trial (seconds after SIGSTOP)

{md_table(["row", "trial", "new leader after s", "physical bound s", "excess s"], per_trial)}
"""
    summary = "\n".join(f"{v[0]}: {v[1]} ({v[2]})" for v in verdicts)
    return body, summary, failed

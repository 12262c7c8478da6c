# SPDX-License-Identifier: Apache-2.0
"""`bench/run hostdeath`: a leader whose host freezes, loses power or is cut
off (issue 38 item 1), at each implementation's defaults, as `bench/run
defaults` runs them. Two events, each a set of rows:

- frozen: SIGSTOP of the leader's whole process tree (the node and its
  command's group): no reset reaches anyone, the tree cannot act;
- cut off: every packet to or from the leader's store address and its peer
  port dropped (nftables, in a network namespace of the bench's own:
  lib/netcut.py): no reset either, but the leader runs on, so it must stop
  its command by itself before anyone else starts one; the link comes back
  after the new leader is in and the old one must rejoin as a follower.

The time from the event until another node leads, per implementation:

- shipped: `s3lect run` with no mode flag (peer mode on, zero-config);
- s3-only: `s3lect run --no-peer`;
- go: Go s3lect at its defaults (S3 mode).

The rows run at the same time, each on its own key of one MinIO, three nodes
each; the frozen node is killed once another leads and restarts after a
random 0 to 5 s; the cut-off node's link comes back after a random 0 to 5 s. Per trial the physical bound is the frozen leader's last
renewal as the store has it (its record's lastUpdated, this machine's clock)
plus the lease: no follower may lead earlier; the excess over it is what the
implementation adds. Targets (issue 38), per event: as shipped, p99 ≤ lease +
frequent interval + 1 s (21 s) and ≤ Go s3lect's p99 in the same run.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

import failover
import netcut
from common import BenchError, log, md_table, percentile
from impls import DEFAULTS

OURS = "s3lect-c"
GO = "go-s3lect"
TARGET = DEFAULTS.lease + DEFAULTS.frequent + 1.0


EVENTS = ("freeze", "cut")
EVENT_TEXT = {"freeze": "leader frozen", "cut": "leader cut off"}


@dataclass(frozen=True)
class Row:
    name: str
    impl: str
    mode: str
    what: str
    event: str = "freeze"


_BASE = [
    ("shipped", OURS, "shipped", "`s3lect run` as shipped (peer mode on, zero-config)"),
    ("s3-only", OURS, "s3", "`s3lect run --no-peer`"),
    ("go", GO, "s3", "Go s3lect at its defaults (S3 mode)"),
]
ROWS = [Row(n if ev == "freeze" else f"{n}-cut", impl, mode, what, ev)
        for ev in EVENTS for n, impl, mode, what in _BASE]


def rows_for(events) -> list[Row]:
    return [r for r in ROWS if r.event in events]


def prepare(events) -> list[str]:
    """Before MinIO starts and before any thread: with cut rows, enter the
    bench's own network namespace. Returns the events that can run (a cut
    needs nftables; why not is logged)."""
    out = list(events)
    if "cut" in out:
        why = netcut.why_not()
        if why:
            log(f"hostdeath: leader-cut-off rows not run: {why}")
            out.remove("cut")
        else:
            netcut.enter()
    return out


def run_all(impls: list, server, seed: int, logdir, pki, trials: int,
            restart_delay: float, events=EVENTS) -> tuple[list, list[str]]:
    """The rows of `events` at once (one thread each); (runs, rows not run with
    why). Cut rows need prepare() first (the nodes reach MinIO through
    addresses of their own, which it must listen on)."""
    by_name = {i.name: i for i in impls}
    runs: dict[str, object] = {}
    errors: list[str] = []
    skipped: list[str] = []
    read = failover.record_reader(server)

    def one(i: int, row: Row, rng: random.Random) -> None:
        endpoint_for = cut = None
        if row.event == "cut":
            port = server.endpoint.rsplit(":", 1)[1]

            def endpoint_for(slot: int) -> str:
                return f"http://{netcut.node_address(i, slot)}:{port}"

            def cut(node, peer_port):
                return netcut.Cut(f"{row.name}_{node.slot}", netcut.node_address(i, node.slot),
                                  peer_port)
        try:
            runs[row.name] = failover.run_config(
                # variant "cut": a tag (logs, trees log, key) of its own
                by_name[row.impl], server, DEFAULTS, row.mode,
                "plain" if row.event == "freeze" else "cut", trials, rng, logdir,
                pki, None, zero_config=True, restart_delay=restart_delay,
                events=(row.event,), read_record=read, endpoint_for=endpoint_for, cut=cut)
        except Exception as e:  # noqa: BLE001 - reported, and the run fails
            errors.append(f"{row.name}: {e}")

    threads = []
    for i, row in enumerate(rows_for(events)):
        impl = by_name.get(row.impl)
        if impl is None:
            skipped.append(f"{row.name}: {row.impl} is not measured in this run")
            continue
        if row.mode not in impl.modes:
            raise BenchError(f"hostdeath row {row.name}: {impl.name} has no mode {row.mode!r}")
        log(f"hostdeath: {row.name} ({impl.name} {row.mode}), {trials} x {EVENT_TEXT[row.event]}")
        # One seed for every row: the same random phases before each signal.
        t = threading.Thread(target=one, args=(i, row, random.Random(seed)), daemon=True)
        t.start()
        threads.append(t)
        time.sleep(2.0)  # the clusters do not start in step
    for t in threads:
        t.join()
    if errors:
        raise BenchError("hostdeath: " + "; ".join(errors))
    return [(row, runs[row.name]) for row in ROWS if row.name in runs], skipped


def _times(run, event: str) -> tuple[list[float], list]:
    return (run.cut, run.cut_bound) if event == "cut" else (run.freeze, run.freeze_bound)


def report(runs: list, skipped: list[str], trials: int, minutes: float) -> tuple[str, str, list]:
    """(markdown body, console summary, failed verdicts)."""
    by = {row.name: (row, run) for row, run in runs}
    verdicts, failed = [], []

    def add(what, ok, measured):
        v = "NOT MEASURED" if ok is None else ("PASS" if ok else "**FAIL**")
        verdicts.append([v, what, measured])
        if ok is False:
            failed.append(what)

    def p99(rr):
        return percentile(_times(rr[1], rr[0].event)[0], 99)

    for event in EVENTS:
        sfx = "" if event == "freeze" else "-cut"
        s, g, n = by.get("shipped" + sfx), by.get("go" + sfx), by.get("s3-only" + sfx)
        what = EVENT_TEXT[event]
        if s:
            add(f"s3lect as shipped: {what} p99 ≤ lease + frequent + 1 s = {TARGET:g} s",
                p99(s) <= TARGET, f"p99 {p99(s):.2f} s over {len(_times(s[1], event)[0])} trials")
        if s and g:
            add(f"s3lect as shipped: {what} p99 ≤ Go s3lect's", p99(s) <= p99(g),
                f"{p99(s):.2f} s vs {p99(g):.2f} s")
        if n:  # measured beside them; the targets are for s3lect as shipped
            verdicts.append(["(no target)", f"s3lect --no-peer: {what} p99 (target for as "
                             f"shipped: {TARGET:g} s; Go s3lect's: "
                             f"{'–' if not g else f'{p99(g):.2f} s'})",
                             f"p99 {p99(n):.2f} s over {len(_times(n[1], event)[0])} trials"])
    for row, run in runs:
        two = (run.lead_overlap[0], run.cmd_overlap[0], run.trees.overlap[0])
        what = f"{row.name}: never two leaders, two commands or two command trees"
        measured = f"{two[0]:.3f} s / {two[1]:.3f} s / {two[2]:.3f} s"
        if row.impl == GO:  # Go s3lect's, measured beside ours: no target of this project
            verdicts.append(["(Go s3lect)", what, measured])
        else:
            add(what, max(two) == 0.0, measured)
        if run.bad_exits:
            add(f"{row.name}: no node exits on its own", False, "; ".join(run.bad_exits))

    stats = []
    for row, run in runs:
        ts, bs = _times(run, row.event)
        ex = [t - b for t, b in zip(ts, bs) if b is not None]
        stats.append([row.name, EVENT_TEXT[row.event], row.what, len(ts),
                      f"{percentile(ts, 50):.2f}", f"{percentile(ts, 99):.2f}", f"{max(ts):.2f}",
                      f"{percentile(ex, 50):+.2f}" if ex else "–",
                      f"{max(ex):+.2f}" if ex else "–", f"{run.duration / 60:.1f} min"])
    per_trial = []
    for row, run in runs:
        ts, bs = _times(run, row.event)
        for i, (t, b) in enumerate(zip(ts, bs)):
            per_trial.append([row.name, i + 1, f"{t:.2f}", "–" if b is None else f"{b:.2f}",
                              "–" if b is None else f"{t - b:+.2f}"])
    body = f"""## Verdicts

{md_table(["result", "verdict", "measured"], verdicts)}

A p99 is nearest-rank: with 20 trials it is the largest of the 20. Two
leaders of Go s3lect are the time a Go s3lect leader went on reporting
leadership while another did (a cut-off Go s3lect leader steps down only when
a read of the record fails or shows another leader, after the link is back);
it runs no command here.

## Rows

{md_table(["row", "event", "what runs", "trials", "p50 s", "p99 s", "max s",
           "excess over the bound p50 s", "excess max s", "run time"], stats)}

Every row: three nodes on a fresh key of one MinIO, at the implementation's
default timings (s3lect lease 15 s, renew 5 s, deadline 10 s, frequent 5 s,
infrequent 30 s; Go s3lect LeaderTimeout 15 s, cycle 5 s); the rows ran at
the same time ({minutes:.1f} min). A trial waits until every node follows
one leader, then 1 to 2 renew intervals (a random phase), and then:

- **leader frozen**: SIGSTOPs the leader's process group and its command's
  group, and measures until another node reports leadership; then it kills
  the frozen node and restarts it after a random 0 to 5 s;
- **leader cut off**: drops every packet to or from the leader's store
  address and its peer port (nftables in the bench's own network namespace,
  input hook: no reset, no error to the sender; each node reaches MinIO
  through a loopback address of its own, 127.R.S.1), and measures until
  another node reports leadership; the cut-off node runs on (it must stop
  its command by itself: the overlap rows count its command until its own
  supervisor reports it stopped), and its link comes back after a random 0
  to 5 s, after which it must follow the new leader.

The **physical bound** of a trial is the old leader's record as read from
the store right after the event: its `lastUpdated` plus the lease, counted
from the event (no node may lead before it); the **excess** is what the
implementation adds to it. `–`: the record read did not name the old leader
(not seen).
{"" if not skipped else chr(10) + "Not run: " + "; ".join(skipped) + chr(10)}
## Per trial (seconds after the event)

{md_table(["row", "trial", "new leader after s", "physical bound s", "excess s"], per_trial)}
"""
    summary = "\n".join(f"{v[0]}: {v[1]} ({v[2]})" for v in verdicts)
    return body, summary, failed

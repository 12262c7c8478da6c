# SPDX-License-Identifier: Apache-2.0
"""`bench/run defaults` (also `bench/run failover cost --timing defaults`):
s3lect at its default timings as it ships against Go s3lect at its defaults,
in one run, and the verdicts of issue 28 item 4 in results/defaults.md.

Rows (failover and cost each):

- shipped: `s3lect run` with no mode flag, so peer mode is on by default
  (zero-config, ephemeral port);
- firewalled: the same with every node's peer port refused (it advertises a
  port on which nothing listens, lib/cluster.refusing_port), so followers
  follow the leader through the store every frequent interval;
- go: Go s3lect at its defaults (S3 mode: its peer mode is opt-in);
- s3-only: `s3lect run --no-peer`.

Only the rows a verdict depends on (shipped, firewalled, go) need many
trials; the S3-only row, whose kill -9 trials take about 50 s each, has
fewer and decides nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import cost
import failover
from common import (GET_USD_PER_1000, PUT_USD_PER_1000, BenchError, fmt_s, log, md_table,
                    percentile)
from impls import DEFAULTS, MODE_TEXT

OURS = "s3lect-c"
GO = "go-s3lect"
KILL_TARGET = DEFAULTS.lease + 0.5  # s
TERM_TARGET = 0.1  # s
# Firewalled SIGTERM p99 at most this times Go s3lect's in the same run (issue 44).
FIREWALLED_TERM_FACTOR = 0.8
# A stopped node restarts after a random 0..this s (bench/run --restart-delay
# overrides it): one frequent interval, Go s3lect's whole cycle, so a
# restarted node's timers are not left in step with the new leader's.
RESTART_DELAY = DEFAULTS.frequent


@dataclass(frozen=True)
class Row:
    name: str
    impl: str
    mode: str  # impls.MODES
    trials: int  # per event (kill -9, SIGTERM) in a full run
    quick: int  # per event with --quick
    decides: bool  # a verdict depends on it: at least 20 trials in a full run
    what: str
    # Seconds per kill -9 and per SIGTERM trial, everything included (the
    # random 1-2 renew intervals before the signal, the failover, the mean
    # restart delay, until every node follows the new leader), from a
    # --quick run (about the failover time + 10.5 s): for the printed
    # estimate of the run's length only.
    est_kill: float
    est_term: float


ROWS = [
    Row("shipped", OURS, "shipped", 20, 2, True,
        "`s3lect run` as shipped: no mode flag (peer mode on by default, zero-config)", 24, 11),
    Row("firewalled", OURS, "firewalled", 20, 2, True,
        "as shipped, every peer port refused: `--addr 127.0.0.1:A --peer-listen 127.0.0.1:B`, "
        "nothing listens on A", 25, 13),
    Row("go", GO, "s3", 20, 2, True, "Go s3lect at its defaults (no flags; S3 mode)", 23, 13.5),
    Row("s3-only", OURS, "s3", 6, 2, False, "`s3lect run --no-peer`", 47, 31),
]
# Per row and per cost run, outside the trials: starting the cluster, the
# settled end, the supervisor's last stop.
ROW_OVERHEAD = 5.0
COST_SETTLE = 5.0


def trials_for(row: Row, quick: bool, trials: int | None) -> int:
    """--trials N gives the deciding rows N and the others at most their own
    count; --quick the rows' quick counts."""
    if trials:
        return trials if row.decides else min(trials, row.trials)
    return row.quick if quick else row.trials


def estimate(impl_names: list[str], quick: bool, trials: int | None) -> float:
    """Seconds the defaults bench should take with these implementations."""
    secs = 0.0
    for row in ROWS:
        if row.impl in impl_names:
            n = trials_for(row, quick, trials)
            secs += n * (row.est_kill + row.est_term) + ROW_OVERHEAD
            secs += COST_SETTLE + DEFAULTS.renew + DEFAULTS.frequent + 2 + cost.window_for(
                DEFAULTS, quick)
    return secs


def run_all(impls: list, server, rng, logdir, pki, quick: bool, trials: int | None,
            restart_delay: float | None, plot_fn) -> tuple[list, list, list[str]]:
    """Failover runs, cost runs, and the rows not run (with the reason)."""
    by_name = {i.name: i for i in impls}
    delay = RESTART_DELAY if restart_delay is None else restart_delay
    fruns, cruns, skipped = [], [], []
    for row in ROWS:
        impl = by_name.get(row.impl)
        if impl is None:
            skipped.append(f"{row.name}: {row.impl} is not measured in this run")
            continue
        if row.mode not in impl.modes:
            raise BenchError(f"defaults row {row.name}: {impl.name} has no mode {row.mode!r} "
                             f"(a build of s3lect without peer mode on by default?)")
        n = trials_for(row, quick, trials)
        log(f"defaults: {row.name} ({impl.name} {row.mode}) failover, {n} trials per event, "
            f"restart delay 0-{delay:g} s")
        t0 = time.monotonic()
        fruns.append(failover.run_config(impl, server, DEFAULTS, row.mode, "plain", n, rng,
                                         logdir, pki, plot_fn, zero_config=True,
                                         restart_delay=delay,
                                         read_record=failover.record_reader(server)))
        log(f"defaults: {row.name} failover took {(time.monotonic() - t0) / 60:.1f} min "
            f"(estimated {(n * (row.est_kill + row.est_term) + ROW_OVERHEAD) / 60:.1f})")
    for row in ROWS:
        impl = by_name.get(row.impl)
        if impl is None:
            continue
        log(f"defaults: {row.name} ({impl.name} {row.mode}) cost")
        cruns.append(cost.run_config(impl, server, DEFAULTS, row.mode, quick, logdir, pki,
                                     zero_config=True))
    return fruns, cruns, skipped


def _row_of(run) -> Row | None:
    return next((r for r in ROWS if r.impl == run.impl and r.mode == run.mode), None)


def _find(runs, name: str):
    row = next(r for r in ROWS if r.name == name)
    return next((x for x in runs if x.impl == row.impl and x.mode == row.mode
                 and getattr(x, "variant", "plain") == "plain"), None)


def _label(name: str) -> str:
    return {"shipped": "s3lect as shipped", "firewalled": "s3lect, peers firewalled",
            "go": "Go s3lect (defaults)", "s3-only": "s3lect --no-peer"}[name]


def _per_hour(run, role: str, what: str) -> float:
    """Mean requests per hour of the nodes in `role` ("leader"/"follower"):
    what = "get", "put" or "all"."""
    ns = run.role(role)

    def n_of(n):
        return n.get + n.put + sum(n.other.values()) if what == "all" else getattr(n, what)
    return sum(n.per_hour(n_of(n), run.window) for n in ns) / len(ns)


def checks(fruns: list, cruns: list) -> list[tuple[str, str, str]]:
    """(verdict, "PASS"/"FAIL"/"NOT MEASURED", what was measured)."""
    out: list[tuple[str, str, str]] = []

    def add(what, ok, measured):
        out.append((what, "NOT MEASURED" if ok is None else ("PASS" if ok else "FAIL"), measured))

    fs, cs = _find(fruns, "shipped"), _find(cruns, "shipped")
    ff, cf = _find(fruns, "firewalled"), _find(cruns, "firewalled")
    fg, cg = _find(fruns, "go"), _find(cruns, "go")
    nogo = f"{GO} was not measured in this run"

    def p99(run, kind):
        return percentile(getattr(run, kind), 99)

    def cmp_p99(ours, name, kind, event, factor=1.0):
        theirs = f"{_label('go')} {event} p99"
        what = f"{_label(name)}: {event} p99 ≤ " + (f"{factor:g} × " if factor != 1 else "") + theirs
        if not ours or not fg:
            add(what, None, "not measured" if not ours else nogo)
            return
        a, b = p99(ours, kind), p99(fg, kind)
        add(what, a <= factor * b, f"{a:.3f} s vs {b:.3f} s = {a / b:.2f}× "
            f"({len(getattr(ours, kind))} and {len(getattr(fg, kind))} trials)")

    # As shipped.
    if fs:
        k = p99(fs, "kill")
        add(f"{_label('shipped')}: kill -9 p99 ≤ lease + 0.5 s = {KILL_TARGET:g} s",
            k <= KILL_TARGET, f"p99 {k:.2f} s over {len(fs.kill)} trials")
    else:
        add(f"{_label('shipped')}: kill -9 p99 ≤ {KILL_TARGET:g} s", None, "not measured")
    cmp_p99(fs, "shipped", "kill", "kill -9")
    if fs:
        t = p99(fs, "term")
        add(f"{_label('shipped')}: SIGTERM p99 ≤ {TERM_TARGET:g} s", t <= TERM_TARGET,
            f"p99 {t:.3f} s over {len(fs.term)} trials")
    else:
        add(f"{_label('shipped')}: SIGTERM p99 ≤ {TERM_TARGET:g} s", None, "not measured")
    if cs:
        fol = cs.role("follower")
        tot = [n.get + n.put + sum(n.other.values()) for n in fol]
        add(f"{_label('shipped')}: stable followers make 0 store requests",
            all(x == 0 for x in tot),
            ", ".join(f"{n.role}: {x} in {cs.window:.0f} s" for n, x in zip(fol, tot)))
        ldr = cs.role("leader")[0]
        add(f"{_label('shipped')}: the leader makes 0 GETs (and only its renewals: "
            f"{3600 / DEFAULTS.renew:.0f} PUT/h)", ldr.get == 0 and not ldr.other,
            f"{ldr.get} GET, {ldr.put} PUT in {cs.window:.0f} s = "
            f"{ldr.per_hour(ldr.get, cs.window):.0f} GET/h, "
            f"{ldr.per_hour(ldr.put, cs.window):.0f} PUT/h")
    else:
        add(f"{_label('shipped')}: store requests of the followers and the leader", None,
            "not measured")

    # Peers firewalled: ahead of Go s3lect (issue 44 item 3: the followers
    # take turns, docs/algorithm.md "Followers").
    cmp_p99(ff, "firewalled", "kill", "kill -9")
    cmp_p99(ff, "firewalled", "term", "SIGTERM", FIREWALLED_TERM_FACTOR)
    what = f"{_label('firewalled')}: store requests per hour ≤ {_label('go')}'s"
    if cf and cg:
        # One request in the window of slack, for where a periodic request falls.
        slack = 3600.0 / cf.window
        for role in ("follower", "leader"):
            a, b = _per_hour(cf, role, "all"), _per_hour(cg, role, "all")
            add(f"{_label('firewalled')}: {role} store requests/h ≤ {_label('go')}'s "
                f"(+ 1 request in the window, {slack:.0f}/h, of slack)", a <= b + slack,
                f"{a:.0f} vs {b:.0f}" + (" (mean per follower)" if role == "follower" else
                                         f" ({_detail(cf)} vs {_detail(cg)})"))
    else:
        add(what, None, "not measured" if not cf else nogo)

    # The first thing users judge by, for every row: never two leaders, never
    # two command trees.
    for r in fruns:
        row = _row_of(r)
        if row is None:
            continue
        two = (r.lead_overlap[0], r.cmd_overlap[0], r.trees.overlap[0])
        add(f"{_label(row.name)}: never two leaders, two commands or two command trees",
            not any(x > 0 for x in two),
            f"{two[0]:.3f} s / {two[1]:.3f} s / {two[2]:.3f} s over {len(r.kill) + len(r.term)} "
            f"handovers, {r.trees.count} trees")
    return out


def _detail(run) -> str:
    ldr = run.role("leader")[0]
    return (f"{ldr.per_hour(ldr.get, run.window):.0f} GET + "
            f"{ldr.per_hour(ldr.put, run.window):.0f} PUT")


def _demote(md: str) -> str:
    """Headings one level down, to nest a report inside this one."""
    out = []
    for line in md.splitlines():
        out.append("#" + line if line.startswith("##") else line)
    return "\n".join(out)


def report(fruns: list, cruns: list, skipped: list[str], quick: bool,
           trials: int | None, restart_delay: float | None,
           minutes: float) -> tuple[str, str, list[str]]:
    """Markdown body of results/defaults.md, console summary, failed verdicts."""
    cs = checks(fruns, cruns)
    vrows = [[st if st != "FAIL" else "**FAIL**", what, measured] for what, st, measured in cs]

    def name_of(run):
        row = _row_of(run)
        return _label(row.name) if row else run.impl

    frows = [[name_of(r), r.mode_label, len(r.kill), fmt_s(percentile(r.kill, 50)),
              fmt_s(percentile(r.kill, 90)), fmt_s(percentile(r.kill, 99)),
              f"{percentile(r.term, 50):.3f}", f"{percentile(r.term, 90):.3f}",
              f"{percentile(r.term, 99):.3f}"] for r in fruns]
    # Distance to the physical limit, per kill -9 trial: the killed leader's
    # last renewal (its record's lastUpdated as read from the store right
    # after the signal) + lease is the earliest any node may lead.
    brows, trows = [], []
    for r in fruns:
        ex = [t - b for t, b in zip(r.kill, r.kill_bound) if b is not None]
        brows.append([name_of(r), r.mode_label, len(ex),
                      f"{percentile(ex, 50):+.2f}" if ex else "–",
                      f"{percentile(ex, 99):+.2f}" if ex else "–",
                      f"{max(ex):+.2f}" if ex else "–"])
        for i, (t, b) in enumerate(zip(r.kill, r.kill_bound)):
            trows.append([name_of(r), i + 1, f"{t:.2f}", "–" if b is None else f"{b:.2f}",
                          "–" if b is None else f"{t - b:+.2f}"])
    crows = []
    for r in cruns:
        fol = r.role("follower")
        ldr = r.role("leader")[0]
        g = sum(n.per_hour(n.get, r.window) for n in r.nodes)
        p = sum(n.per_hour(n.put, r.window) for n in r.nodes)
        crows.append([name_of(r), r.mode_label,
                      " / ".join(f"{n.per_hour(n.get + n.put + sum(n.other.values()), r.window):.0f}"
                                 for n in fol),
                      f"{ldr.per_hour(ldr.get, r.window):.0f} GET + "
                      f"{ldr.per_hour(ldr.put, r.window):.0f} PUT",
                      f"{cost.usd_month(g, p):.2f}", f"{r.window:.0f}"])
    rows_txt = md_table(["row", "what runs", "trials per event (full run)", "decides a verdict"],
                        [[_label(r.name), r.what, r.trials, "yes" if r.decides else "no"]
                         for r in ROWS])
    delay = RESTART_DELAY if restart_delay is None else restart_delay
    n_note = ("--quick: a smoke run of the machinery; its numbers decide nothing. "
              if quick else "")
    if trials:
        n_note += f"--trials {trials}. "
    skipped_txt = ("\n\nNot run: " + "; ".join(skipped) + ".") if skipped else ""
    fbody, _ = failover.report(fruns) if fruns else ("", "")
    cbody, _, _ = cost.report(cruns) if cruns else ("", "", True)
    body = f"""## Verdicts

{md_table(["result", "verdict", "measured"], vrows)}

Every verdict is computed from the numbers below. {n_note}A p99 is
nearest-rank: with 20 trials it is the largest of the 20. Requests per hour
are counts in the window × 3600 / window; a comparison of requests allows
one request in the window of slack, for where a periodic request falls.{skipped_txt}

## Rows

{rows_txt}

Every row runs three nodes on one fresh lock key against the bench's MinIO,
at each implementation's default timings (no timing flag: s3lect lease 15 s,
renew 5 s, deadline 10 s, frequent 5 s, infrequent 30 s; Go s3lect
LeaderTimeout 15 s, every node's cycle 5 s). The S3-only row decides nothing
and runs fewer trials (its kill -9 trials take about 50 s each).

{MODE_TEXT}

Restarts: a stopped node is restarted after a random delay, uniform from 0
to {delay:g} s, so that its timers — Go s3lect's 5 s cycle above all — are
not left in step with the new leader's. Go s3lect's node program reads
`GetLeadershipStatus()` once a second, as a user of Go s3lect would; it
prints acquisitions and losses from Go s3lect's hooks at once, so the
failover times do not wait for that poll.

Whole defaults bench: {minutes:.1f} min.

## Failover and handover (seconds until another node leads)

{md_table(["row", "mode", "trials", "kill -9 p50", "p90", "p99", "SIGTERM p50", "p90", "p99"],
          frows)}

## Distance to the physical bound (kill -9)

The bound of a trial is the killed leader's last renewal as the store has it
(the record's `lastUpdated`, read right after the signal; this machine's
clock) plus the lease, counted from the signal: no follower may lead before
it. The excess is what each implementation adds. (A frozen leader's rows are
in hostdeath.md, `bench/run hostdeath`.)

{md_table(["row", "mode", "trials with a bound", "excess p50 s", "p99 s", "max s"], brows)}

<details><summary>Per trial</summary>

{md_table(["row", "trial", "kill -9 → new leader s", "physical bound s", "excess s"], trows)}

</details>

## Store requests per hour

{md_table(["row", "mode", "each follower", "leader", "USD/month (3 nodes)", "window s"], crows)}

USD/month at S3 Standard list prices (PUT ${PUT_USD_PER_1000}, GET
${GET_USD_PER_1000} per 1,000).

## Failover details

{_demote(fbody)}

## Cost details

{_demote(cbody)}
"""
    summary = "\n".join(f"  {st}: {what}: {measured}" for what, st, measured in cs)
    failed = [f"defaults: {what}: {measured}" for what, st, measured in cs if st == "FAIL"]
    return body, summary, failed


def to_json(fruns: list, cruns: list) -> dict:
    return {"verdicts": [{"verdict": w, "result": st, "measured": m}
                         for w, st, m in checks(fruns, cruns)],
            "failover": [{"impl": r.impl, "mode": r.mode, "peer_setup": r.peer_setup,
                          "kill_s": r.kill, "sigterm_s": r.term,
                          "two_leaders_s": r.lead_overlap[0], "two_commands_s": r.cmd_overlap[0],
                          "two_trees_s": r.trees.overlap[0], "trees": r.trees.count,
                          "restart_delay_s": r.restart_delay, "duration_s": r.duration}
                         for r in fruns],
            "cost": [{"impl": r.impl, "mode": r.mode, "peer_setup": r.peer_setup,
                      "window_s": r.window,
                      "nodes": [{"role": n.role, "get": n.get, "put": n.put, "other": n.other}
                                for n in r.nodes]} for r in cruns]}

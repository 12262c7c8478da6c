# SPDX-License-Identifier: Apache-2.0
"""`bench/run transfer`: `s3lect transfer --to <a follower>` against the
SIGTERM handover, at the default timings on MinIO, three `s3lect run`
nodes, in peer mode as shipped and with --no-peer, in one run (issue 42
item 1).

Per mode, N transfer trials, then N SIGTERM trials, on one cluster:

- transfer: the leader settled (every node follows it), `s3lect transfer
  --to F` for a follower F (in turn); measured (i) from the call to F's
  "acquired leadership" line and (ii) the handover itself, from the old
  leader's "handing leadership to F" line to F's "acquired leadership";
- SIGTERM: the leader settled, SIGTERM to it; from the signal to another
  node's "acquired leadership" (the defaults bench's measure); the stopped
  node is started again (a new id) and the cluster settles.

Times are the bench's monotonic clock when each stderr line arrives
(lib/cluster.py). Never two commands: the cluster's command intervals.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field

from cluster import Cluster
from common import BenchError, log, md_table, percentile
from impls import DEFAULTS

TRIALS = 20
QUICK_TRIALS = 3
MODES = [("shipped", "peer mode as shipped (no mode flag: zero-config, ephemeral port)"),
         ("s3", "`--no-peer`")]
SETTLE = 120.0  # s: a cluster settles (every node follows one leader) within this
TERM_FACTOR = 2.0  # peer mode: transfer p99 <= this x the SIGTERM handover p99
NOPEER_BOUND = DEFAULTS.frequent  # s: --no-peer: transfer p99 <= one frequent interval


@dataclass
class ModeRun:
    mode: str
    what: str
    call: list[float] = field(default_factory=list)  # (i) call -> target acquired
    handover: list[float] = field(default_factory=list)  # (ii) handing -> acquired
    cli: list[float] = field(default_factory=list)  # the CLI's own run time
    term: list[float] = field(default_factory=list)  # SIGTERM -> new leader
    failures: list[str] = field(default_factory=list)
    cmd_overlap: float = 0.0
    lead_overlap: float = 0.0
    seconds: float = 0.0


def _line_time(c: Cluster, node, needle: str, after: float) -> float | None:
    """Monotonic time of the first line of node's log holding needle that
    arrived after `after` (the log stamps each line relative to c.t0)."""
    try:
        lines = node.log_path.read_text().splitlines()
    except OSError:
        return None
    for ln in lines:
        stamp, _, text = ln.strip().partition(" ")
        try:
            t = c.t0 + float(stamp)
        except ValueError:
            continue
        if t >= after and needle in text:
            return t
    return None


def _settle(c: Cluster):
    return c.wait(c.settled_leader, SETTLE, "every node follows one leader")


def _transfer_trial(c: Cluster, impl, server, r: ModeRun, k: int) -> None:
    ldr = _settle(c)
    fol = [n for n in c.live() if n is not ldr]
    target = fol[k % len(fol)]
    env = dict(impl.node_env(target.spec))
    argv = [str(impl.bin), "transfer", "--lock", f"s3://{server.bucket}/{c.key}",
            "--endpoint", server.endpoint, "--region", server.region, "--to", target.id,
            "--timeout", "120s"]
    with c.cv:
        idx = len(c.events)
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    r.cli.append(time.monotonic() - t0)
    if p.returncode != 0:
        r.failures.append(f"transfer {k + 1}: exit {p.returncode}: {p.stderr.strip()}")
        return
    ev = c.wait(lambda: next((e for e in c.events[idx:] if e.kind == "acquired"), None), 30,
                f"{target.id} acquires")
    if ev.node is not target:
        r.failures.append(f"transfer {k + 1}: {ev.node.id} acquired, not {target.id}")
        return
    r.call.append(ev.t - t0)
    h = _line_time(c, ldr, f"handing leadership to {target.id}", t0)
    if h is None:
        r.failures.append(f"transfer {k + 1}: no 'handing leadership' line in {ldr.id}'s log")
    else:
        r.handover.append(ev.t - h)
    log(f"transfer: {r.mode} transfer {k + 1}: {ldr.id} -> {target.id}: call {ev.t - t0:.3f} s"
        + ("" if h is None else f", handover {ev.t - h:.3f} s"))


def _term_trial(c: Cluster, r: ModeRun, k: int) -> None:
    ldr = _settle(c)
    with c.cv:
        idx = len(c.events)
    t0 = ldr.sigterm()
    c.mark(t0, ldr, "term")
    ev = c.wait(lambda: c.first_acquired_after(idx, ldr), SETTLE, "a new leader after SIGTERM")
    r.term.append(ev.t - t0)
    log(f"transfer: {r.mode} SIGTERM {k + 1}: {ldr.id} -> {ev.node.id}: {ev.t - t0:.3f} s")
    ldr.wait(60)
    c.start_slot(ldr.slot)


def run(impl, server, logdir, quick: bool, trials: int | None) -> list[ModeRun]:
    n = trials or (QUICK_TRIALS if quick else TRIALS)
    stamp = time.strftime("%Y%m%d%H%M%S")
    out = []
    for mode, what in MODES:
        r = ModeRun(mode, what)
        t_start = time.monotonic()
        c = Cluster(impl, 3, server, f"bench-transfer-{mode}-{stamp}", DEFAULTS, mode,
                    logdir / f"transfer-{mode}", zero_config=True)
        try:
            c.start()
            log(f"transfer: {mode}: {n} transfer trials, then {n} SIGTERM trials")
            for k in range(n):
                _transfer_trial(c, impl, server, r, k)
            for k in range(n):
                _term_trial(c, r, k)
            _settle(c)
        finally:
            c.stop()
            r.cmd_overlap = c.overlap("cmd")[0]
            r.lead_overlap = c.overlap("lead")[0]
            r.seconds = time.monotonic() - t_start
        out.append(r)
    if not out:
        raise BenchError("transfer: nothing measured")
    return out


def _p(xs: list[float], q: float) -> str:
    return f"{percentile(xs, q):.3f}" if xs else "–"


def checks(runs: list[ModeRun]) -> list[tuple[str, str, str]]:
    by = {r.mode: r for r in runs}
    out = []
    pr = by.get("shipped")
    if pr and pr.call and pr.term:
        t = percentile(pr.term, 99)
        for name, xs in (("(i) call → target leads", pr.call),
                         ("(ii) handover: 'handing leadership' → target leads", pr.handover)):
            a = percentile(xs, 99) if xs else float("inf")
            out.append((f"peer mode: transfer p99 ≤ {TERM_FACTOR:g} × SIGTERM handover p99, "
                        f"measure {name}", "PASS" if a <= TERM_FACTOR * t else "FAIL",
                        f"{a:.3f} s vs {TERM_FACTOR:g} × {t:.3f} s = {TERM_FACTOR * t:.3f} s"))
    s3 = by.get("s3")
    if s3 and s3.call:
        for name, xs in (("(i) call → target leads", s3.call),
                         ("(ii) handover: 'handing leadership' → target leads", s3.handover)):
            a = percentile(xs, 99) if xs else float("inf")
            out.append((f"--no-peer: transfer p99 ≤ one frequent interval ({NOPEER_BOUND:g} s), "
                        f"measure {name}", "PASS" if a <= NOPEER_BOUND else "FAIL",
                        f"{a:.3f} s"))
    for r in runs:
        out.append((f"{r.mode}: never two commands, never two leaders",
                    "PASS" if r.cmd_overlap == 0 and r.lead_overlap == 0 else "FAIL",
                    f"{r.cmd_overlap:.3f} s / {r.lead_overlap:.3f} s of overlap"))
        if r.failures:
            out.append((f"{r.mode}: every transfer handed over to its target", "FAIL",
                        "; ".join(r.failures)))
    return out


def report(runs: list[ModeRun], n: int) -> tuple[str, str, list[str]]:
    cs = checks(runs)
    vrows = [[st if st != "FAIL" else "**FAIL**", what, m] for what, st, m in cs]
    srows = []
    for r in runs:
        for name, xs in (("transfer (i): call → target's 'acquired leadership'", r.call),
                         ("transfer (ii): old leader's 'handing leadership' → target's "
                          "'acquired leadership'", r.handover),
                         ("transfer: the CLI's run time (until it saw the new leader)", r.cli),
                         ("SIGTERM → another node's 'acquired leadership'", r.term)):
            srows.append([r.mode, name, len(xs), _p(xs, 50), _p(xs, 90), _p(xs, 99),
                          f"{max(xs):.3f}" if xs else "–"])
    trows = []
    for r in runs:
        for i in range(max(len(r.call), len(r.term))):
            def at(xs):
                return f"{xs[i]:.3f}" if i < len(xs) else "–"
            trows.append([r.mode, i + 1, at(r.call), at(r.handover), at(r.cli), at(r.term)])
    modes = md_table(["mode", "what runs"], [[m, w] for m, w in MODES])
    secs = "; ".join(f"{r.mode} {r.seconds / 60:.1f} min" for r in runs)
    body = f"""## Verdicts

{md_table(["result", "verdict", "measured"], vrows)}

The issue's verdicts are stated for "transfer" without naming the measure;
each is given for both: (i) what an operator waits for, from the call of
`s3lect transfer` to the target's "acquired leadership" (it includes the
wait for the leader's next renewal, up to one renew interval, 5 s at the
defaults, when the leader takes the request up); (ii) the handover itself,
from the old leader's "handing leadership to" line (it has the target's
confirmation and now stops its command) to the target's "acquired
leadership", which is what the SIGTERM handover measures too (from the
signal). A p99 is nearest-rank: with 20 trials the largest.

## How

{modes}

Three `s3lect run` nodes on one fresh lock key against the bench's MinIO at
the default timings (no timing flag: lease 15 s, renew 5 s, deadline 10 s,
frequent 5 s, infrequent 30 s), the default kill timeout, command `sleep`.
Per mode, {n} transfer trials, then {n} SIGTERM trials on the same cluster.
A transfer trial waits until every node follows the leader, then runs
`s3lect transfer --lock s3://… --to F` for a follower F (the followers in
turn). A SIGTERM trial waits the same, signals the leader, measures until
another node's "acquired leadership", and starts the stopped node again
under a new id. Times are this machine's monotonic clock as each stderr line
reaches the bench. Run time per mode: {secs}.

## Results (seconds)

{md_table(["mode", "measure", "trials", "p50", "p90", "p99", "max"], srows)}

<details><summary>Per trial</summary>

{md_table(["mode", "trial", "transfer (i) s", "transfer (ii) s", "CLI s", "SIGTERM s"], trows)}

</details>
"""
    summary = "\n".join(f"  {st}: {what}: {m}" for what, st, m in cs)
    failed = [f"transfer: {what}: {m}" for what, st, m in cs if st == "FAIL"]
    return body, summary, failed


def to_json(runs: list[ModeRun]) -> dict:
    return {"verdicts": [{"verdict": w, "result": st, "measured": m}
                         for w, st, m in checks(runs)],
            "modes": [{"mode": r.mode, "transfer_call_s": r.call, "transfer_handover_s":
                       r.handover, "transfer_cli_s": r.cli, "sigterm_s": r.term,
                       "failures": r.failures, "two_commands_s": r.cmd_overlap,
                       "two_leaders_s": r.lead_overlap, "seconds": r.seconds} for r in runs]}

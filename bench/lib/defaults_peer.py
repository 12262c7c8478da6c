# SPDX-License-Identifier: Apache-2.0
"""The targets of issue 18 for s3lect at its default timings in peer mode
("defaults peer"), checked from the failover and cost runs of one bench/run,
and compared with Go s3lect at its defaults in the same run (S3 mode, and
peer mode when it ran)."""

from __future__ import annotations

from common import fmt_s, md_table, percentile
from impls import DEFAULTS

OURS = "s3lect-c"
GO = "go-s3lect"
KILL_TARGET = DEFAULTS.lease + 0.5  # s
TERM_TARGET = 0.1  # s


def _frun(fruns, impl, mode):
    return next((r for r in fruns if r.impl == impl and r.timing is DEFAULTS and r.mode == mode
                 and r.variant == "plain"), None)


def _crun(cruns, impl, mode):
    return next((r for r in cruns if r.impl == impl and r.timing is DEFAULTS and r.mode == mode),
                None)


def _label(run) -> str:
    return f"{run.impl} defaults {run.mode_label}"


def checks(fruns: list, cruns: list) -> list[tuple[str, str, str]]:
    """(target, "PASS"/"FAIL"/"NOT MEASURED", what was measured)."""
    out: list[tuple[str, str, str]] = []

    def add(what, ok, measured):
        out.append((what, "NOT MEASURED" if ok is None else ("PASS" if ok else "FAIL"), measured))

    f = _frun(fruns, OURS, "peer")
    c = _crun(cruns, OURS, "peer")
    miss = "no such run in this bench/run (needs failover and cost with --impl s3lect-c)"
    if f:
        k99, t99 = percentile(f.kill, 99), percentile(f.term, 99)
        add(f"{_label(f)}: failover (kill -9) p99 ≤ lease + 0.5 s = {KILL_TARGET:g} s",
            k99 <= KILL_TARGET, f"p99 {k99:.2f} s over {len(f.kill)} trials")
        add(f"{_label(f)}: graceful handover (SIGTERM) p99 ≤ {TERM_TARGET:g} s",
            t99 <= TERM_TARGET, f"p99 {t99:.3f} s over {len(f.term)} trials")
    else:
        add(f"{OURS} defaults peer: failover and handover p99", None, miss)
    if c:
        fol = c.role("follower")
        tot = [n.get + n.put + sum(n.other.values()) for n in fol]
        add(f"{_label(c)}: stable followers make 0 S3 requests", all(t == 0 for t in tot),
            ", ".join(f"{n.role}: {t} in {c.window:.0f} s" for n, t in zip(fol, tot)))
        ldr = c.role("leader")[0]
        want = c.window / DEFAULTS.renew
        add(f"{_label(c)}: leader 720 PUT/h (± 1 request in the window) and 0 GET/h",
            ldr.get == 0 and abs(ldr.put - want) <= 1 and not ldr.other,
            f"{ldr.put} PUT, {ldr.get} GET in {c.window:.0f} s = "
            f"{ldr.per_hour(ldr.put, c.window):.0f} PUT/h, "
            f"{ldr.per_hour(ldr.get, c.window):.0f} GET/h")
    else:
        add(f"{OURS} defaults peer: S3 requests of the leader and the followers", None, miss)

    # At least as good as Go s3lect at its defaults, run by run.
    for mode in ("s3", "peer"):
        gf, gc = _frun(fruns, GO, mode), _crun(cruns, GO, mode)
        if not gf and not gc:
            add(f"{OURS} defaults peer vs {GO} defaults {mode}", None,
                f"{GO} defaults {mode} was not measured in this run")
            continue
        if f and gf:
            for kind, name in (("kill", "failover (kill -9)"), ("term", "handover (SIGTERM)")):
                ours, theirs = percentile(getattr(f, kind), 99), percentile(getattr(gf, kind), 99)
                add(f"{name} p99: {_label(f)} ≤ {_label(gf)}", ours <= theirs,
                    f"{fmt_s(ours) if kind == 'kill' else f'{ours:.3f}'} s vs "
                    f"{fmt_s(theirs) if kind == 'kill' else f'{theirs:.3f}'} s")
        if c and gc:
            # One request in the window of slack, for where a periodic request falls.
            slack = 3600.0 / c.window

            def rate(run, role, attr):
                ns = run.role(role)
                return sum(n.per_hour(getattr(n, attr) if attr != "all" else
                                      n.get + n.put + sum(n.other.values()), run.window)
                           for n in ns) / len(ns)

            o, t = rate(c, "follower", "all"), rate(gc, "follower", "all")
            add(f"stable follower S3 requests/h: {_label(c)} ≤ {_label(gc)}", o <= t,
                f"{o:.0f} vs {t:.0f} (mean per follower)")
            for attr, op in (("put", "PUT"), ("get", "GET")):
                o, t = rate(c, "leader", attr), rate(gc, "leader", attr)
                add(f"leader {op}/h: {_label(c)} ≤ {_label(gc)} (+ 1 request in the window, "
                    f"{slack:.0f}/h, of slack)", o <= t + slack, f"{o:.0f} vs {t:.0f}")
    return out


def report(fruns: list, cruns: list) -> tuple[str, str, list[str]]:
    """Markdown body, console summary, and the failed targets."""
    cs = checks(fruns, cruns)
    rows = [[st if st != "FAIL" else "**FAIL**", what, measured] for what, st, measured in cs]
    f = [r for r in fruns if r.timing is DEFAULTS and r.variant == "plain"]
    c = [r for r in cruns if r.timing is DEFAULTS]
    frows = [[r.impl, r.mode_label, len(r.kill), fmt_s(percentile(r.kill, 50)),
              fmt_s(percentile(r.kill, 99)), f"{percentile(r.term, 50):.3f}",
              f"{percentile(r.term, 99):.3f}"] for r in f]
    crows = []
    for r in c:
        for n in r.nodes:
            crows.append([r.impl, r.mode_label, n.role, f"{n.per_hour(n.get, r.window):.0f}",
                          f"{n.per_hour(n.put, r.window):.0f}",
                          sum(n.other.values()), f"{r.window:.0f}"])
    body = f"""## Targets

{md_table(["result", "target", "measured"], rows)}

Every line is computed from the numbers below (failover.md and cost.md of the
same run hold the full tables). "At least as good as Go s3lect" is checked
against each of Go s3lect's default-timing runs in this run. The defaults
rows have few trials (a quarter of `--trials`, at least 2), so a p99 is the
largest of a handful of samples. After kill -9 both implementations wait out
about one lease (15 s) from the last renewal they saw: s3lect's peer-mode
followers see the long poll break and then read S3 until the record is
unchanged for a lease; Go s3lect's followers take over once `lastUpdated` is
older than `LeaderTimeout`, checked every `FrequentInterval` (5 s). So the
kill -9 comparison is between two numbers near 15 s and its result can go
either way with this many trials.

## Default timings: failover and handover

{md_table(["impl", "mode", "trials", "kill -9 p50 s", "kill -9 p99 s", "SIGTERM p50 s",
           "SIGTERM p99 s"], frows)}

## Default timings: S3 requests per hour by role

{md_table(["impl", "mode", "role", "GET/h", "PUT/h", "other requests", "window s"], crows)}

## What "defaults peer" is

s3lect with no timing flags (lease 15 s, renew 5 s, deadline 10 s, frequent
5 s, infrequent 30 s) plus peer mode. With a build that has zero-config peer
mode that is `--peer` only (no certificate flags, no `--addr`, no
`--peer-listen`); otherwise (the mode column says "certificates") the
certificate flags of the other peer configurations. Go s3lect runs its own
defaults (no timing flags): in S3 mode, and in peer mode with a certificate
from a throwaway CA (it has no zero-config peer mode).
"""
    summary = "\n".join(f"  {st}: {what}: {measured}" for what, st, measured in cs)
    failed = [f"defaults peer: {what}: {measured}" for what, st, measured in cs
              if st == "FAIL"]
    return body, summary, failed

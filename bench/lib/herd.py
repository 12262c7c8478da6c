# SPDX-License-Identifier: Apache-2.0
"""bench/run herd: 1,000 electors on 100 locks in one process (tests/c/herd)
at s3lect's default timings, through a 20 s outage in which MinIO refuses
connections (reset at the counting proxy of tests/harness/herd.py) and a 20 s
SIGSTOP of MinIO; requests and connection attempts counted per second at the
proxy (issue 26 item 6)."""

from __future__ import annotations

import secrets
from pathlib import Path

from common import BenchError, md_table
from harness.herd import HerdRun, run_outages

DEFAULTS = (15000, 5000, 10000, 5000, 30000)  # lease, renew, deadline, frequent, infrequent
KEYS, PER_KEY, OUTAGE_S = 100, 10, 20
QUICK = (20, 10, 8)  # keys, per key, outage seconds


def run(build_dir: Path, server, quick: bool, log) -> HerdRun:
    herd = build_dir / "tests" / "c" / "herd"
    if not herd.exists():
        raise BenchError(f"{herd} is missing: build the tests (scripts/build)")
    keys, per, secs = QUICK if quick else (KEYS, PER_KEY, OUTAGE_S)
    env = {"PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": server.access_key,
           "AWS_SECRET_ACCESS_KEY": server.secret_key, "AWS_REGION": "us-east-1"}
    prefix = f"s3://{server.bucket}/herd-{secrets.token_hex(4)}/lock"
    # Steady: two whole stable-follower periods; after each outage: long
    # enough for every follower's back-off to end (up to infrequent).
    steady = 20 if quick else 60
    after = 20 if quick else 40
    return run_outages(herd, server, env, prefix, keys, per, DEFAULTS, steady,
                       [("down", secs), ("pause", secs)], after, 180, log=log)


def checks(r: HerdRun) -> list[tuple[str, bool, str]]:
    out = []
    relead = (DEFAULTS[0] + DEFAULTS[3]) / 1000
    for o in r.outages:
        name = {"down": "refused", "pause": "paused"}[o.kind]
        out.append((f"{name} {o.seconds:g} s: any second of the outage ≤ 2 × steady",
                    o.during_max <= 2 * r.steady,
                    f"{o.during_max} ({o.during_max / r.steady:.2f} ×)"))
        out.append((f"{name}: any second after recovery ≤ 3 × steady",
                    o.after_max <= 3 * r.steady,
                    f"{o.after_max} ({o.after_max / r.steady:.2f} ×)"))
        out.append((f"{name}: every lock led again within lease + frequent ({relead:g} s)",
                    o.relead_s is not None and o.relead_s <= relead,
                    "never" if o.relead_s is None else f"{o.relead_s:.1f} s"))
    out.append(("never two leaders of one lock", r.most_leaders <= 1,
                f"most leaders of one lock at any 100 ms sample: {r.most_leaders}"))
    return out


def report(r: HerdRun) -> tuple[str, str, list[str]]:
    rows = [[{"down": "refused (proxy resets)", "pause": "paused (SIGSTOP)"}[o.kind],
             f"{o.seconds:g}", f"{r.steady:.1f}", f"{o.during_mean:.1f}", str(o.during_max),
             str(o.after_first), str(o.after_max), str(o.led_at_end),
             "never" if o.relead_s is None else f"{o.relead_s:.1f}"] for o in r.outages]
    body = (f"{r.keys * r.per_key} electors on {r.keys} locks in one process "
            f"(tests/c/herd), lease/renew/deadline/frequent/infrequent "
            f"{'/'.join(f'{t / 1000:g}' for t in r.timings)} s (the defaults), "
            "through a counting proxy in front of MinIO. *Requests* are HTTP requests "
            "that reached the proxy plus the connections it reset while MinIO was "
            "'refusing'; *any second* is the most in a sliding one-second window "
            "(steps of 0.1 s). Steady: mean per second over "
            f"{r.steady_window[1] - r.steady_window[0]:.0f} s before the outages.\n\n"
            + md_table(["outage", "s", "steady req/s", "outage mean/s", "outage any second",
                        "first second after", "any second after", "locks led at the end",
                        "every lock led again (s after)"], rows)
            + "\n\n" + md_table(["target", "holds", "measured"],
                                [[d, "yes" if ok else "**no**", m] for d, ok, m in checks(r)])
            + "\n\nRequests per second around each outage (seconds from its start):\n\n"
            + "\n".join(f"- {o.kind}: " + ", ".join(f"{t:g}: {n}" for t, n in o.per_second)
                        for o in r.outages)
            + f"\n\nStopping every elector at the end: {r.stop_ms} ms.\n")
    summary = "\n".join(f"  [{'ok' if ok else 'FAIL'}] {d}: {m}" for d, ok, m in checks(r))
    problems = [f"herd: {d}: {m}" for d, ok, m in checks(r) if not ok]
    return body, summary, problems

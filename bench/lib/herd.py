# SPDX-License-Identifier: Apache-2.0
"""bench/run herd: 1,000 electors on 100 locks in one process (tests/c/herd)
at s3lect's default timings, through a 20 s outage in which MinIO refuses
connections (reset at the counting proxy of tests/harness/herd.py) and a 20 s
SIGSTOP of MinIO; requests and connection attempts counted per second at the
proxy (issue 26 item 6). Then peer mode (issue 38 item 7): 10,000 electors
over three processes (bench/footprint) through a MinIO frozen and then
refusing: the store reads per second after it, which must fall back to the
steady rate within 30 s."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
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


# ---- peer mode: 10,000 electors over 3 processes (issue 38 item 7) ----

PEER_TOTAL, PEER_PER_KEY = 10000, 10
QUICK_PEER = (1000, 10)
FROZEN_S, REFUSED_S = 10, 10  # MinIO frozen (SIGSTOP), then refusing (as if killed)
AFTER_S, QUICK_AFTER_S = 90, 45
BACK_BY_S = 30  # issue 38 item 7: reads back at the steady rate within 30 s


@dataclass
class PeerHerd:
    total: int
    keys: int
    procs: int
    steady_gets: float = 0.0  # GET/s, mean over the steady window
    steady_reqs: float = 0.0  # all requests/s (the leaders' renewals)
    steady_s: float = 0.0
    outage_gets_max: int = 0
    after: list = field(default_factory=list)  # (s after recovery, GETs in that second)
    after_reqs: list = field(default_factory=list)  # (s after recovery, requests)
    late_gets_mean: float = 0.0  # GET/s, mean from BACK_BY_S after recovery to the end
    late_gets_max: int = 0  # the most in any one second of that span
    back_at_s: float | None = None  # first s after recovery from which every second is steady
    roles_after: list = field(default_factory=list)  # (s, keys led, followers ok, two leaders)
    wrong_sample: str = ""  # the status of the electors of one key whose followers name another
    reader_sample: str = ""  # the status of the electors of the key read most late after it
    keys_led_at_end: int = 0
    two_leaders_at_end: int = 0
    note: str = ""


def run_peer(impls: list, server, quick: bool, logdir: Path, log) -> PeerHerd:
    """10,000 zero-config peer electors (1,000 keys, 10 a key) spread over
    three footprint processes, through an OutageProxy that counts GETs; MinIO
    frozen 10 s, then refusing connections 10 s; the store reads per second
    before, during and after."""
    import footprint
    from harness.herd import OutageProxy

    impl = next((i for i in impls if i.name == "s3lect-c"), None)
    if impl is None:
        raise BenchError("herd: the peer part needs the s3lect-c implementation (--impl s3lect-c)")
    total, per_key = QUICK_PEER if quick else (PEER_TOTAL, PEER_PER_KEY)
    after_s = QUICK_AFTER_S if quick else AFTER_S
    keys = total // per_key
    res = PeerHerd(total, keys, footprint.PEER_PROCS)
    proxy = OutageProxy(server.port)
    prefix = f"s3://{server.bucket}/bench/herd-peer/{secrets.token_hex(4)}"
    env = footprint._s3_env(server)
    rt = footprint.ready_timeout_ms(total)
    procs = []
    paused = False
    try:
        for p in range(footprint.PEER_PROCS):
            procs.append(footprint.Proc(
                footprint._peer_argv(impl, total, per_key, prefix, proxy.endpoint, p, rt),
                env, logdir / f"herd-peer-p{p}.log", impl.nofile))
        for p in procs:
            line = p.line(rt / 1000 + 120, "readiness line")
            if footprint._fields(line)["status"] == "failed":
                raise BenchError(line)
        end = time.monotonic() + 120
        while True:
            r = footprint._roles(procs, keys)
            if (r["keys_led"] == keys and not r["followers_not_following"]) \
                    or time.monotonic() > end:
                break
            time.sleep(2)
        if r["keys_led"] != keys:
            res.note += f" before the outage only {r['keys_led']}/{keys} keys were led;"
        # Past every follower's first infrequent period: the steady state.
        time.sleep(DEFAULTS[4] / 1000 + 5)
        steady = 20 if quick else 60
        s0 = time.monotonic()
        time.sleep(steady)
        s1 = time.monotonic()
        g = proxy.rates(s0, s1, gets=True)[::10]
        a = proxy.rates(s0, s1)[::10]
        res.steady_s = s1 - s0
        res.steady_gets = sum(n for _, n in g) / max(1, len(g))
        res.steady_reqs = sum(n for _, n in a) / max(1, len(a))
        log(f"herd peer: steady {res.steady_gets:.1f} GET/s, {res.steady_reqs:.1f} requests/s")
        o0 = time.monotonic()
        server.pause()
        paused = True
        time.sleep(FROZEN_S)
        proxy.set_mode("down")  # the frozen store killed: connections refused from now on
        server.resume()
        paused = False
        time.sleep(REFUSED_S)
        proxy.set_mode("up")
        rec = time.monotonic()
        res.outage_gets_max = max((n for _, n in proxy.rates(o0, rec, gets=True)), default=0)
        # Every 5 s after it: keys led, followers naming their key's leader.
        while time.monotonic() < rec + after_s:
            time.sleep(max(0.0, min(5.0, rec + after_s - time.monotonic())))
            r = footprint._roles(procs, keys)
            res.roles_after.append((round(time.monotonic() - rec), r["keys_led"],
                                    r["followers_ok"], r["n_two_leaders"]))
            if r["followers_wrong"] and not res.wrong_sample and time.monotonic() > rec + 20:
                res.wrong_sample = _wrong_sample(procs, keys)
                log(f"herd peer: a follower naming another than its key's leader: "
                    f"{res.wrong_sample}")
            if not res.reader_sample and time.monotonic() > rec + 20:
                res.reader_sample = _reader_sample(procs, proxy, rec + 15)
                if res.reader_sample:
                    log(f"herd peer: the key read most from 15 s after the store's return: "
                        f"{res.reader_sample}")
            log(f"herd peer: +{res.roles_after[-1][0]} s: keys led {r['keys_led']}/{keys}, "
                f"followers naming the leader {r['followers_ok']} (naming another "
                f"{r['followers_wrong']}, in no follower state {r['followers_not_following']})")
        per = proxy.rates(rec, rec + after_s, gets=True)[::10]
        res.after = [(round(t - rec), n) for t, n in per]
        res.after_reqs = [(round(t - rec), n) for t, n in proxy.rates(rec, rec + after_s)[::10]]
        late = [n for t, n in res.after if t >= BACK_BY_S]
        res.late_gets_mean = sum(late) / max(1, len(late))
        res.late_gets_max = max(late, default=0)
        limit = steady_limit(res)
        res.back_at_s = next((t for i, (t, _) in enumerate(res.after)
                              if all(n <= limit for _, n in res.after[i:])), None)
        r = footprint._roles(procs, keys)
        res.keys_led_at_end = r["keys_led"]
        res.two_leaders_at_end = r["n_two_leaders"]
        log(f"herd peer: after the outage {res.late_gets_mean:.1f} GET/s from {BACK_BY_S} s "
            f"(max {res.late_gets_max}); at the steady rate from "
            f"{'never' if res.back_at_s is None else f'{res.back_at_s} s'}")
    finally:
        if paused:
            server.resume()
        for p in procs:
            p.close()
        proxy.close()
    return res


def _statuses(procs, key) -> list:
    """s3lect_status_json of every elector of `key` in every process
    (footprint's "status KEY")."""
    import json
    out = []
    for p in procs:
        p.send(f"status {key}")
        while True:
            v = p.line(60, "status")
            if v.startswith('{"status"'):
                out += json.loads(v)["status"]
                break
    return out


def _wrong_sample(procs, keys: int) -> str:
    """The status (s3lect_status_json) of every elector of one key whose
    followers name another than the key's leader: what they wait for."""
    import json
    import footprint
    per = footprint.raw_roles(procs)
    leads = {}
    for d in per:
        for k, who in d["lead"].items():
            leads.setdefault(k, []).append(who)
    for d in per:
        for k, named in d["follow"].items():
            if any([who] != leads.get(k) for who in named):
                return f"key {k} led by {leads.get(k)}: " + json.dumps(_statuses(procs, k))
    return ""


def _reader_sample(procs, proxy, since: float) -> str:
    """The electors of the key read most since `since` (from the proxy's
    GET paths): their status, to see why they read."""
    import collections
    import json
    import re
    n = collections.Counter(m.group(1) for t, path in list(proxy.get_paths) if t >= since
                            for m in [re.search(r"/k0*(\d+)\.json", path)] if m)
    if not n:
        return ""
    key, reads = n.most_common(1)[0]
    out = _statuses(procs, key)
    keep = ("serverID", "isLeader", "leaderID", "state", "leaseRemainingMs", "lastUpdated",
            "leaderLastSeen", "consecutiveFails", "cycle", "peerFailures", "peerLastFailure",
            "lastErrorMessage")
    return (f"key {key} ({reads} GETs, {len(n)} keys read): " +
            json.dumps([{k: v for k, v in x.items() if k in keep} for x in out]))


def steady_limit(r: PeerHerd) -> float:
    """Store reads per second that count as the steady rate: twice the steady
    mean, and at least 1 % of the keys (a few followers' reads of a lock
    whose leader changed: with 1,000 keys, 10 a second)."""
    return max(2 * r.steady_gets, r.keys / 100)


def peer_checks(r: PeerHerd) -> list[tuple[str, bool, str]]:
    lim = steady_limit(r)
    return [
        (f"peer: store reads back at the steady rate (≤ {lim:g}/s) within {BACK_BY_S} s "
         "of the store's return, and stay there",
         r.back_at_s is not None and r.back_at_s <= BACK_BY_S,
         "never" if r.back_at_s is None else f"from {r.back_at_s} s"),
        ("peer: every key led by one elector at the end", r.keys_led_at_end == r.keys
         and r.two_leaders_at_end == 0,
         f"{r.keys_led_at_end}/{r.keys} led, {r.two_leaders_at_end} with two"),
    ]


def peer_report(r: PeerHerd) -> tuple[str, str, list[str]]:
    checks = peer_checks(r)
    body = (f"\n## Peer mode: {r.total:,} electors over {r.procs} processes after an outage\n\n"
            f"{r.total:,} zero-config peer-mode electors on {r.keys:,} keys ({r.total // r.keys} "
            f"a key, spread over {r.procs} processes of bench/footprint), at the defaults, "
            "through a counting proxy in front of MinIO. The outage: MinIO frozen (SIGSTOP) "
            f"for {FROZEN_S} s, then refusing connections for {REFUSED_S} s (as if the "
            "frozen server had been killed), then back. Steady: mean per second over "
            f"{r.steady_s:.0f} s before the outage: {r.steady_gets:.1f} GET/s (store reads) "
            f"and {r.steady_reqs:.1f} requests/s (the leaders' renewals). Most GETs in any "
            f"second of the outage: {r.outage_gets_max}. After it: {r.late_gets_mean:.1f} "
            f"GET/s on average from {BACK_BY_S} s on (most in one second: "
            f"{r.late_gets_max}).{(' Note:' + r.note) if r.note else ''}\n\n"
            + md_table(["target", "holds", "measured"],
                       [[d, "yes" if ok else "**no**", m] for d, ok, m in checks])
            + "\n\nStore reads (GET) per second after the store's return (seconds from it): "
            + ", ".join(f"{t}: {n}" for t, n in r.after)
            + "\n\nAll requests per second after it: "
            + ", ".join(f"{t}: {n}" for t, n in r.after_reqs) + "\n")
    summary = "\n".join(f"  [{'ok' if ok else 'FAIL'}] {d}: {m}" for d, ok, m in checks)
    problems = [f"herd: {d}: {m}" for d, ok, m in checks if not ok]
    return body, summary, problems

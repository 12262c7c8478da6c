# SPDX-License-Identifier: Apache-2.0
"""What a follower's S3 reads buy: failover and handover time against follower
GETs per hour, swept over the follower poll interval (issue 18).

At a fixed short lease (3 s; s3lect: renew 1 s, deadline 2 s) every
implementation runs once per poll interval P of POLLS, in S3 mode, plus once
in peer mode (P = 1 s). Each point is one failover run (failover.run_config:
kill -9 trials, then SIGTERM trials; p50/p99) and one cost run
(cost.run_config: requests per node counted at a proxy over a window), so the
GETs per hour on the x axis are measured, like the times on the y axis.

What P sets:
- s3lect: --frequent-interval P --infrequent-interval P, so a follower polls
  S3 every P both in transitions and when stable (with infrequent > frequent
  a stable follower would poll less often than the point's P says). Renew
  1 s and deadline 2 s stay, so the leader's PUTs are the same at every P.
- Go s3lect: FrequentInterval P (InfrequentInterval P too, unused by
  c45cfbd). Its leader renews (GET + PUT) once per FrequentInterval as well,
  so P at or above the lease cannot keep a leader: those points are not run
  and the table says why.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import cost
import failover
from common import GET_USD_PER_1000, PUT_USD_PER_1000, BenchError, fmt_s, log, md_table, percentile
from impls import PEER_SETUPS_TEXT, Impl, Timing

LEASE, RENEW, DEADLINE = 3.0, 1.0, 2.0
POLLS = (0.5, 1.0, 2.0, 4.0, 8.0)
QUICK_POLLS = (1.0, 4.0)
PEER_POLL = 1.0
TRIALS, QUICK_TRIALS = 8, 3


def window_for(poll: float, quick: bool) -> float:
    """Counting window: 20 s (10 s quick), but at least 4 (2 quick) polls."""
    return max(10.0, 2 * poll) if quick else max(20.0, 4 * poll)


def timing_for(impl: Impl, poll: float) -> tuple[Timing | None, str]:
    """The timing of one point, or None and why it cannot run."""
    name = f"poll-{poll:g}s"
    if impl.renew_is_poll:
        if poll >= LEASE:
            return None, (f"not run: {impl.name}'s leader renews once per poll interval "
                          f"(FrequentInterval), so a poll interval of {poll:g} s cannot keep a "
                          f"{LEASE:g} s lease")
        return Timing(name, LEASE, poll, DEADLINE, poll, poll, 0.0,
                      ("lease", "renew", "frequent", "infrequent")), ""
    return Timing(name, LEASE, RENEW, DEADLINE, poll, poll, 0.0,
                  ("lease", "renew", "deadline", "frequent", "infrequent")), ""


@dataclass
class Point:
    impl: str
    mode: str
    poll: float
    peer_setup: str = ""
    settings: str = ""
    kill: list[float] = field(default_factory=list)
    term: list[float] = field(default_factory=list)
    window: float = 0.0
    follower_get: list[int] = field(default_factory=list)  # per follower, in the window
    follower_put: list[int] = field(default_factory=list)
    leader_get: int = 0
    leader_put: int = 0
    other: int = 0  # requests of other methods, all nodes
    skipped: str = ""  # why the point was not run
    duration: float = 0.0
    two_leaders_s: float = 0.0

    @property
    def mode_label(self) -> str:
        return f"{self.mode} ({self.peer_setup})" if self.peer_setup else self.mode

    def per_hour(self, n: float) -> float:
        return n * 3600.0 / self.window

    @property
    def follower_get_h(self) -> float:
        """Mean GETs per hour of one stable follower."""
        return self.per_hour(sum(self.follower_get) / len(self.follower_get))

    def p(self, kind: str, q: float) -> float:
        return percentile(getattr(self, kind), q)


def run_all(impls: list[Impl], server, quick: bool, trials: int, rng: random.Random,
            logdir: Path, pki) -> list[Point]:
    polls = QUICK_POLLS if quick else POLLS
    plan: list[tuple[Impl, str, float]] = [(i, "s3", p) for p in polls for i in impls]
    plan += [(i, "peer", PEER_POLL) for i in impls if "peer" in i.modes]
    points = []
    for impl, mode, poll in plan:
        timing, why = timing_for(impl, poll)
        pt = Point(impl.name, mode, poll)
        if timing is None:
            pt.skipped = why
            log(f"tradeoff: {impl.name} {mode} poll {poll:g} s: {why}")
            points.append(pt)
            continue
        pt.settings = timing.describe()
        log(f"tradeoff: {impl.name} {mode} poll {poll:g} s: failover, {trials} trials per event")
        fr = failover.run_config(impl, server, timing, mode, "plain", trials, rng,
                                 logdir / "tradeoff", pki, None, zero_config=True)
        pt.kill, pt.term, pt.peer_setup = fr.kill, fr.term, fr.peer_setup
        pt.two_leaders_s = fr.lead_overlap[0] + fr.cmd_overlap[0] + fr.trees.overlap[0]
        pt.duration = fr.duration
        window = window_for(poll, quick)
        log(f"tradeoff: {impl.name} {mode} poll {poll:g} s: cost, {window:.0f} s window")
        cr = cost.run_config(impl, server, timing, mode, quick, logdir / "tradeoff", pki,
                             window=window, zero_config=True)
        pt.window = cr.window
        ldr = cr.role("leader")
        fol = cr.role("follower")
        if len(ldr) != 1 or not fol:
            raise BenchError(f"tradeoff {impl.name} {mode} poll {poll:g}: counted "
                             f"{len(ldr)} leaders and {len(fol)} followers")
        pt.leader_get, pt.leader_put = ldr[0].get, ldr[0].put
        pt.follower_get = [n.get for n in fol]
        pt.follower_put = [n.put for n in fol]
        pt.other = sum(sum(n.other.values()) for n in cr.nodes)
        points.append(pt)
    return points


def _usd_month_cluster(pt: Point) -> float:
    get_h = pt.per_hour(pt.leader_get + sum(pt.follower_get))
    put_h = pt.per_hour(pt.leader_put + sum(pt.follower_put))
    return (get_h * GET_USD_PER_1000 + put_h * PUT_USD_PER_1000) / 1000.0 * 730


def table(points: list[Point]) -> str:
    rows = []
    for pt in points:
        if pt.skipped:
            rows.append([pt.impl, pt.mode_label, f"{pt.poll:g}", 0, "–", "–", "–", "–", "–", "–",
                         "–", "–", pt.skipped])
            continue
        rows.append([pt.impl, pt.mode_label, f"{pt.poll:g}", len(pt.kill),
                     fmt_s(pt.p("kill", 50)), fmt_s(pt.p("kill", 99)),
                     fmt_s(pt.p("term", 50)), fmt_s(pt.p("term", 99)),
                     " / ".join(f"{pt.per_hour(g):.0f}" for g in pt.follower_get),
                     f"{pt.follower_get_h:.0f}",
                     f"{pt.per_hour(pt.leader_get):.0f} / {pt.per_hour(pt.leader_put):.0f}",
                     f"{_usd_month_cluster(pt):.2f}",
                     "" if not pt.two_leaders_s else f"two leaders/commands {pt.two_leaders_s:.3f} s"])
    return md_table(["impl", "mode", "poll s", "trials", "kill -9 p50 s", "kill -9 p99 s",
                     "SIGTERM p50 s", "SIGTERM p99 s", "GET/h of each follower",
                     "follower GET/h (mean)", "leader GET/h / PUT/h", "cluster USD/month",
                     "note"], rows)


def report(points: list[Point], trials: int, quick: bool, plot_name: str | None) -> tuple[str, str]:
    tab = table(points)
    polls = QUICK_POLLS if quick else POLLS
    windows = ", ".join(f"{p:g} s → {window_for(p, quick):.0f} s" for p in polls)
    fig = f"\n\n![trade-off: p99 against follower GETs per hour]({plot_name})" if plot_name else ""
    settings = md_table(["impl", "mode", "poll s", "settings"],
                        [[p.impl, p.mode_label, f"{p.poll:g}", p.settings or p.skipped]
                         for p in points])
    body = f"""## Results

{tab}{fig}

Each row is one point: {trials} kill -9 trials and {trials} SIGTERM trials
(p50/p99 nearest rank: with {trials} trials p99 is the largest sample), then
the requests each node sent to S3 over a counting window, as per hour. "Follower
GET/h" is the x axis of the figure: the mean of the two stable followers'
measured GETs. In the figure a point with 0 follower GETs (peer mode) is drawn
at x = 1 (a log axis has no 0) and labelled with its measured count.

## What a point is

At a fixed lease of {LEASE:g} s, for each follower poll interval P ({", ".join(f"{p:g}" for p in polls)} s)
in S3 mode, and in peer mode at P = {PEER_POLL:g} s:

- **s3lect**: `--lease-timeout 3s --renew-interval 1s --renew-deadline 2s
  --frequent-interval P --infrequent-interval P`. frequent = infrequent = P,
  so a follower reads S3 every P both while leadership is stable and during
  transitions: the x axis is then exactly what P costs, and the failover
  after kill -9 is about lease + up to one P, the handover after SIGTERM up
  to one P. (s3lect's defaults use a longer stable interval than the
  transition one; the cost timing of `failover`/`cost` shows that split.)
  The leader's renewals (one PUT per second) are the same at every P.
- **Go s3lect**: `LeaderTimeout 3s, FrequentInterval P, InfrequentInterval
  P` (c45cfbd uses only the first two). Its leader renews (a GET and a PUT)
  once per FrequentInterval and its followers always poll at it, so P also
  sets the leader's requests, and P ≥ the lease cannot keep a leader: those
  points are listed as not run.
- **Peer mode** (P = {PEER_POLL:g} s, the like-for-like timing): followers ask the
  leader over HTTPS instead of S3 (s3lect: a long poll answered at each
  renewal; Go s3lect: a health check every FrequentInterval), and read S3
  only when that fails.

{PEER_SETUPS_TEXT} In the trade-off the s3lect peer point is zero-config too
when the build has it.

Each point is `failover.run_config` (3 nodes running
`bench/lib/treecmd.py` under the implementation, as in the failover bench;
kill -9 of the leader's process groups, or SIGTERM, after a settled cluster
and a random 1–2 renew intervals; the time until another node's `acquired
leadership` line) and then `cost.run_config` (3 fresh nodes, each behind its
own counting proxy; after the cluster settled and renew + frequent + 2 s
more, the requests in a window in which leadership did not change). Counting
windows (poll → window): {windows}; peer {window_for(PEER_POLL, quick):.0f} s.
USD/month: S3 Standard list prices (PUT ${PUT_USD_PER_1000}, GET
${GET_USD_PER_1000} per 1,000), 730 h, the whole cluster of 3.

## Settings

{settings}
"""
    summary = md_table(["impl", "mode", "poll s", "kill p99 s", "SIGTERM p99 s",
                        "follower GET/h"],
                       [[p.impl, p.mode_label, f"{p.poll:g}",
                         "–" if p.skipped else fmt_s(p.p("kill", 99)),
                         "–" if p.skipped else fmt_s(p.p("term", 99)),
                         "not run" if p.skipped else f"{p.follower_get_h:.0f}"]
                        for p in points])
    return body, summary


def to_json(points: list[Point]) -> list[dict]:
    out = []
    for p in points:
        d = {"impl": p.impl, "mode": p.mode, "peer_setup": p.peer_setup, "poll_s": p.poll,
             "settings": p.settings}
        if p.skipped:
            d["skipped"] = p.skipped
        else:
            d.update({"kill_s": p.kill, "sigterm_s": p.term,
                      "kill_p50_s": p.p("kill", 50), "kill_p99_s": p.p("kill", 99),
                      "sigterm_p50_s": p.p("term", 50), "sigterm_p99_s": p.p("term", 99),
                      "window_s": p.window, "follower_get": p.follower_get,
                      "follower_put": p.follower_put, "follower_get_per_h": p.follower_get_h,
                      "leader_get": p.leader_get, "leader_put": p.leader_put,
                      "other_requests": p.other,
                      "overlap_s": p.two_leaders_s, "failover_run_s": p.duration})
        out.append(d)
    return out

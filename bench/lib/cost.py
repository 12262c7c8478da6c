# SPDX-License-Identifier: Apache-2.0
"""S3 requests per hour by role and operation, and what they cost.

Three nodes on one lock, each talking to MinIO through its own counting proxy
(tests/harness/countproxy.py), so every request is attributed to the node
that sent it. After the cluster has settled (one leader, both followers
report following it, then renew + frequent + 2 s more so followers are in
their stable state), the counts are taken over a fixed window; the window is
valid only if leadership did not change during it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from cluster import Cluster
from common import (GET_USD_PER_1000, HOURS_PER_MONTH, PUT_USD_PER_1000, BenchError, log,
                    md_table, paired_with_first)
from harness.countproxy import CountingProxy
from impls import LIKE_FOR_LIKE, MODE_TEXT, PEER_SETUPS_TEXT, Impl, Timing, zero_config_for

# The default timings are measured by bench/run defaults (lib/defaults.py).
CONFIGS = [(LIKE_FOR_LIKE, "s3"), (LIKE_FOR_LIKE, "peer")]
NODES = 3
GET_LIKE = ("GET", "HEAD")  # billed at the GET rate
PUT_LIKE = ("PUT", "POST", "COPY", "LIST", "DELETE")


def window_for(timing: Timing, quick: bool) -> float:
    """60 s (20 s quick), but at least 4 (2 quick) stable-follower intervals,
    so the follower counts are not dominated by where the window falls."""
    base, k = (20.0, 2) if quick else (60.0, 4)
    return max(base, k * timing.infrequent)


@dataclass
class NodeCount:
    role: str  # "leader", "follower 1", ...
    node_id: str
    get: int
    put: int
    other: dict[str, int]

    def per_hour(self, n: int, window: float) -> float:
        return n * 3600.0 / window


@dataclass
class CostRun:
    impl: str
    timing: Timing
    mode: str
    window: float
    nodes: list[NodeCount] = field(default_factory=list)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    peer_setup: str = ""  # "zero-config" or "certificates" in peer mode

    @property
    def mode_label(self) -> str:
        return f"{self.mode} ({self.peer_setup})" if self.peer_setup else self.mode

    def role(self, role: str) -> list[NodeCount]:
        """The leader's count (role "leader") or the followers' ("follower")."""
        return [n for n in self.nodes if n.role.startswith(role)]


def usd_month(get_h: float, put_h: float) -> float:
    return (get_h * GET_USD_PER_1000 + put_h * PUT_USD_PER_1000) / 1000.0 * HOURS_PER_MONTH


def run_config(impl: Impl, server, timing: Timing, mode: str, quick: bool, logdir: Path,
               pki, window: float | None = None, zero_config: bool | None = None) -> CostRun:
    """window: the counting window in seconds (default window_for(timing, quick));
    zero_config: peer mode without certificate flags where the implementation
    has it (default: impls.zero_config_for(timing, mode))."""
    window = window or window_for(timing, quick)
    run = CostRun(impl.name, timing, mode, window)
    if zero_config is None:
        zero_config = zero_config_for(timing, mode)
    port = int(server.endpoint.rsplit(":", 1)[1])
    proxies = [CountingProxy("127.0.0.1", port) for _ in range(NODES)]
    key = f"bench/cost/{int(time.time())}-{impl.name}-{timing.name}-{mode}.json"
    cl = Cluster(impl, NODES, server, key, timing, mode, logdir / f"cost-{impl.name}-"
                 f"{timing.name}-{mode}", pki, endpoint_for=lambda s: proxies[s].endpoint,
                 zero_config=zero_config)
    run.peer_setup = cl.peer_setup()
    try:
        cl.start()
        settle_to = 2 * (timing.lease + timing.infrequent) + 30
        ldr = cl.wait(cl.settled_leader, settle_to, "one leader followed by every node")
        time.sleep(timing.renew + timing.frequent + 2)
        ldr = cl.wait(cl.settled_leader, settle_to, "one leader followed by every node")
        with cl.cv:
            idx = len(cl.events)
        before = [p.snapshot() for p in proxies]
        log(f"  cost {impl.name} {timing.name} {mode}: counting for {window:.0f}s "
            f"(leader {ldr.id})")
        time.sleep(window)
        after = [p.snapshot() for p in proxies]
        with cl.cv:
            changes = [e for e in cl.events[idx:]
                       if e.kind in ("acquired", "lost", "releasing", "exit", "leader_is")]
        if changes:
            raise BenchError(f"leadership changed during the counting window: "
                             f"{[(e.node.id, e.kind) for e in changes]}\n{cl.tails()}")
    finally:
        cl.stop()
        for p in proxies:
            p.close()
    fcount = 0
    for slot in range(NODES):
        d = after[slot] - before[slot]
        node = cl.slots[slot]
        if node is ldr:
            role = "leader"
        else:
            fcount += 1
            role = f"follower {fcount}"
        get = sum(d.get(m, 0) for m in GET_LIKE)
        put = sum(d.get(m, 0) for m in PUT_LIKE)
        other = {m: c for m, c in d.items() if m not in GET_LIKE + PUT_LIKE and c}
        run.nodes.append(NodeCount(role, node.id if node else "?", get, put, other))
    run.nodes.sort(key=lambda n: n.role)
    run.checks = expectations(run)
    return run


def expectations(run: CostRun) -> list[tuple[str, bool, str]]:
    """The cost targets of issue 9, with one request of slack for where the
    window falls (a periodic request can land at both ends)."""
    t, w = run.timing, run.window
    out = []
    for n in run.nodes:
        if n.role == "leader":
            want = w / t.renew
            ok = n.get == 0 and abs(n.put - want) <= 1 and not n.other
            out.append((f"{run.impl} {run.mode_label}/{t.name}: leader makes one PUT per renew "
                        f"interval ({3600 / t.renew:.0f}/h) and no GET", ok,
                        f"{n.put} PUT, {n.get} GET in {w:.0f}s (expected {want:.0f} ± 1 PUT)"))
        elif run.mode in ("s3", "firewalled"):
            # Firewalled: the follower follows a leader whose endpoint it
            # cannot reach through the store every frequent interval.
            every = t.infrequent if run.mode == "s3" else t.frequent
            cap = w / every
            ok = n.put == 0 and n.get <= cap + 1 and not n.other
            out.append((f"{run.impl} {run.mode_label}/{t.name}: stable {n.role} ≤ "
                        f"{3600 / every:.0f} GET/h, no PUT",
                        ok, f"{n.get} GET, {n.put} PUT in {w:.0f}s (≤ {cap:.0f} + 1 allowed)"))
        else:
            total = n.get + n.put + sum(n.other.values())
            out.append((f"{run.impl} {run.mode_label}/{t.name}: stable {n.role} makes 0 S3 "
                        "requests", total == 0, f"{total} requests in {w:.0f}s"))
    return out


def ratios(runs: list[CostRun]) -> str:
    """Cluster requests per hour and USD/month of the first implementation
    relative to every other one ("" with one implementation)."""
    pairs = paired_with_first(runs)
    if not pairs:
        return ""

    def cluster(r):
        g = sum(n.per_hour(n.get, r.window) for n in r.nodes)
        p = sum(n.per_hour(n.put, r.window) for n in r.nodes)
        return g + p, usd_month(g, p)

    rows = []
    for b, r in pairs:
        (bq, bu), (q, u) = cluster(b), cluster(r)
        rows.append([r.timing.name, r.mode, f"{b.impl} / {r.impl}",
                     f"{bq / q:.2f}" if q else "n/a (0)", f"{bu / u:.2f}" if u else "n/a (0)"])
    return md_table(["timing", "mode", "ratio", "requests/h ratio", "USD/month ratio"], rows)


def report(runs: list[CostRun]) -> tuple[str, str, bool]:
    rows, summary_rows = [], []
    for r in runs:
        tot_get = tot_put = 0.0
        for n in r.nodes:
            gh, ph = n.per_hour(n.get, r.window), n.per_hour(n.put, r.window)
            tot_get += gh
            tot_put += ph
            other = ", ".join(f"{m} {c}" for m, c in sorted(n.other.items())) or "–"
            rows.append([r.impl, r.timing.name, r.mode_label, n.role, n.get, n.put, other,
                         f"{gh:.0f}", f"{ph:.0f}", f"{usd_month(gh, ph):.4f}"])
        rows.append([r.impl, r.timing.name, r.mode_label, "**cluster**", "", "", "",
                     f"**{tot_get:.0f}**", f"**{tot_put:.0f}**",
                     f"**{usd_month(tot_get, tot_put):.4f}**"])
        summary_rows.append([r.impl, r.timing.name, r.mode_label, f"{tot_get:.0f}", f"{tot_put:.0f}",
                             f"{usd_month(tot_get, tot_put):.4f}"])
    table = md_table(["impl", "timing", "mode", "role", "GET (window)", "PUT (window)", "other",
                      "GET/h", "PUT/h", "USD/month"], rows)
    checks = [[desc, "yes" if ok else "**no**", detail] for r in runs for desc, ok, detail in
              r.checks]
    all_ok = all(ok for r in runs for _, ok, _ in r.checks)
    windows = ", ".join(f"{r.timing.name}/{r.mode} {r.window:.0f} s" for r in runs)
    cmp = ratios(runs)
    cmp_text = f"\n\n### Ratios (below 1: {runs[0].impl} is cheaper)\n\n{cmp}" if cmp else ""
    body = f"""## Results

{table}{cmp_text}

Counting windows: {windows}. Rates are counts × 3600 / window. USD/month uses
S3 Standard list prices: PUT ${PUT_USD_PER_1000} and GET ${GET_USD_PER_1000}
per 1,000 requests, {HOURS_PER_MONTH} hours a month (HEAD would be billed like
GET; the "other" column lists any other method seen). Storage and data
transfer are not included (one object of a few hundred bytes).

## Expectations

{md_table(["expectation", "holds", "measured"], checks)}

## How measured

{NODES} nodes of `s3lect run … -- sleep 86400`, each with its own counting
proxy in front of MinIO on 127.0.0.1 (tests/harness/countproxy.py counts
requests by method per connection). Peer traffic goes node to node, not
through the proxies.

{PEER_SETUPS_TEXT}

{MODE_TEXT if any(r.mode in ("shipped", "firewalled") for r in runs) else ""}

After one node leads and the others report following it, the bench waits
renew + frequent + 2 s, then counts for the window. A window in which
leadership changed is rejected, not reported.

The other lock stores (DynamoDB, PostgreSQL, Route 53) beside S3 at the
default timings: [cost-stores.md](cost-stores.md) (`bench/run cost --store all`).
"""
    summary = md_table(["impl", "timing", "mode", "cluster GET/h", "cluster PUT/h", "USD/month"],
                       summary_rows)
    if cmp:
        summary += "\n\n" + cmp
    return body, summary, all_ok

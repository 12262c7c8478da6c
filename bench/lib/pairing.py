"""Pairs of runs for the ratio tables when several implementations ran.

common.paired_with_first() keys runs by (timing, mode). The failover bench
runs two command variants (plain, grandchild) for some (timing, mode), so
with two implementations it would pair a plain run with the other
implementation's grandchild run. bench/run installs paired_same_config() in
failover.py in its place: it also matches the variant, and gives the pair of
a non-plain variant copies whose impl names carry the variant, so the
ratio table's "ratio" column says which rows they are.
"""

from __future__ import annotations

import dataclasses


def paired_same_config(runs: list) -> list[tuple[object, object]]:
    impls = list(dict.fromkeys(r.impl for r in runs))
    if len(impls) < 2:
        return []

    def key(r):
        return r.timing.name, r.mode, getattr(r, "variant", "")

    base = {key(r): r for r in runs if r.impl == impls[0]}
    out = []
    for r in runs:
        b = base.get(key(r))
        if r.impl == impls[0] or b is None:
            continue
        v = getattr(r, "variant", "plain")
        if v != "plain":
            b = dataclasses.replace(b, impl=f"{b.impl} ({v})")
            r = dataclasses.replace(r, impl=f"{r.impl} ({v})")
        out.append((b, r))
    return out

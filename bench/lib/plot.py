# SPDX-License-Identifier: Apache-2.0
"""Timeline plots (matplotlib, Agg backend): which node led when."""

from __future__ import annotations

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from common import RESULTS  # noqa: E402

COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf"]


def timeline(cl, run) -> str:
    """Writes results/failover-<tag>.png and returns its file name."""
    t0 = cl.t0
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.45 * cl.n), dpi=80)
    for node in cl.nodes:
        bars = [(s - t0, (e - s)) for s, e in node.lead if e is not None]
        ax.broken_barh(bars, (node.slot - 0.35, 0.7), facecolors=COLORS[node.slot % len(COLORS)],
                       linewidth=0)
    for t, slot, what in cl.markers:
        if what == "kill":
            ax.plot(t - t0, slot, marker="x", color="#d62728", markersize=6, mew=1.5)
        else:
            ax.plot(t - t0, slot + 0.45, marker="v", color="#ff7f0e", markersize=5)
    ax.set_yticks(range(cl.n))
    ax.set_yticklabels([f"n{i}" for i in range(cl.n)])
    ax.set_ylim(-0.6, cl.n - 0.4)
    ax.set_xlim(0, max(cl.t_end - t0, 1))
    ax.invert_yaxis()
    ax.set_xlabel("seconds since start")
    ax.set_title(f"{run.impl}, {run.timing.name}, {run.mode} mode: leadership "
                 f"(× kill -9, ▼ SIGTERM)", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    name = f"failover-{run.tag}.png"
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / name, dpi=80)
    plt.close(fig)
    return name


def tradeoff(points, name: str = "tradeoff.png") -> str:
    """Writes results/<name>: p99 seconds (log) against follower GETs per hour
    (log), one line per implementation and event over the poll intervals, peer
    mode as separate marked points. Points with 0 follower GETs are drawn at
    x = 1 (a log axis has no 0) and labelled with the measured count."""
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    impls = list(dict.fromkeys(p.impl for p in points))
    events = (("kill", "failover (kill -9)", "-", "o"), ("term", "handover (SIGTERM)", "--", "s"))
    for i, impl in enumerate(impls):
        color = COLORS[i % len(COLORS)] if i else "#d62728"
        for kind, label, ls, mk in events:
            pts = sorted((p for p in points if p.impl == impl and p.mode == "s3" and not p.skipped),
                         key=lambda p: p.follower_get_h)
            if pts:
                xs = [max(p.follower_get_h, 1.0) for p in pts]
                ys = [p.p(kind, 99) for p in pts]
                ax.plot(xs, ys, ls=ls, marker=mk, color=color, label=f"{impl}: {label}, S3")
                for p, x, y in zip(pts, xs, ys):
                    ax.annotate(f"{p.poll:g}s", (x, y), textcoords="offset points",
                                xytext=(4, 4), fontsize=7, color=color)
            for p in points:
                if p.impl == impl and p.mode == "peer" and not p.skipped:
                    x = max(p.follower_get_h, 1.0)
                    y = p.p(kind, 99)
                    ax.plot([x], [y], marker="*" if kind == "kill" else "P", markersize=13,
                            color=color, ls="none", markeredgecolor="black",
                            label=f"{impl}: {label}, peer ({p.peer_setup})")
                    ax.annotate(f"peer, {p.follower_get_h:.0f} GET/h", (x, y),
                                textcoords="offset points", xytext=(6, -10), fontsize=7,
                                color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    # 0 follower GETs is drawn at 1: say so on the axis.
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
        lambda x, _pos: "0" if x == 1 else f"{x:g}"))
    ax.set_xlabel("follower S3 GETs per hour (measured, mean of 2 stable followers; "
                  "0 drawn at 1)", fontsize=8)
    ax.set_ylabel("p99 seconds until another node leads", fontsize=8)
    ax.set_title("Follower S3 reads vs failover/handover p99 (lease 3 s; labels: poll interval)",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / name)
    plt.close(fig)
    return name

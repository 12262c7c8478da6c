"""Timeline plots (matplotlib, Agg backend): which node led when."""

from __future__ import annotations

import matplotlib

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

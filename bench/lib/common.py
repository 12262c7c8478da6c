# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the benchmarks: logging, statistics, machine facts and
the markdown result files."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
REPO = BENCH.parent
RESULTS = BENCH / "results"

# S3 Standard list prices (us-east-1) used for the cost tables.
PUT_USD_PER_1000 = 0.005
GET_USD_PER_1000 = 0.0004
HOURS_PER_MONTH = 730  # AWS's billing convention

_T0 = time.monotonic()


class BenchError(RuntimeError):
    """A benchmark could not produce a valid measurement; the message says why."""


def log(msg: str) -> None:
    print(f"[{time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least p % of the
    samples at or below it (with 20 samples, p99 is the maximum)."""
    if not values:
        raise ValueError("no samples")
    xs = sorted(values)
    k = max(1, math.ceil(p / 100.0 * len(xs)))
    return xs[k - 1]


def fmt_s(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def overlap(intervals: list[tuple[float, float]]) -> tuple[float, int]:
    """Total seconds during which two or more of the (start, end) intervals
    hold at once, and how many such stretches there were (an interval that
    ends when another starts does not overlap it)."""
    pts = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    depth, total, count, since = 0, 0.0, 0, None
    for t, d in pts:  # ends before starts at equal times
        depth += d
        if depth >= 2 and since is None:
            since, count = t, count + 1
        elif depth < 2 and since is not None:
            total += t - since
            since = None
    return total, count

def md_table(headers: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def paired_with_first(runs: list) -> list[tuple[object, object]]:
    """(base, run) for every run of an implementation other than the first one
    measured, where base is the first implementation's run of the same
    timing, mode and command variant (.variant, if the runs have one: the
    failover bench runs a plain and a grandchild command per timing and
    mode). A non-plain pair gets copies whose impl names carry the variant,
    so a ratio table says which rows they are. Runs need .impl, .timing.name
    and .mode. Empty with one implementation."""
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


def _run(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=30)
        return r.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(unavailable: {e})"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "(unknown)"


def minio_version(binary: str) -> str:
    stamp = Path(binary).with_name("minio.version")
    mod = _run(["go", "version", "-m", binary])
    for line in mod.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "mod" and parts[1] == "github.com/minio/minio":
            return f"github.com/minio/minio {parts[2]}"
    if stamp.exists():
        return f"github.com/minio/minio {stamp.read_text().strip()}"
    return _run([binary, "--version"]).splitlines()[0]


def build_type(build_dir: Path) -> str:
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return line.split("=", 1)[1] or "(none)"
    except OSError:
        pass
    return "(unknown)"


def git_commit() -> str:
    head = _run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "-C", str(REPO), "status", "--porcelain", "--", "libs3lect"])
    return head + (" (libs3lect/ has uncommitted changes)" if dirty else "")


def _repo_relative(path: Path) -> str:
    """A path inside this repository relative to it (no machine path in the
    result files), else as it is."""
    try:
        return str(Path(path).resolve().relative_to(REPO.resolve()))
    except ValueError:
        return str(path)


def machine_facts(impl_versions: dict[str, str], minio_binary: str | None,
                  build_dir: Path) -> list[tuple[str, str]]:
    load = os.getloadavg()
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    facts = [
        ("date (UTC)", _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")),
        ("CPUs (nproc)", str(os.cpu_count())),
        ("CPU model", cpu_model()),
        ("memory", f"{mem_kb // 1024} MiB"),
        ("kernel", platform.release()),
        ("load average at start (1/5/15 min)", " / ".join(f"{x:.2f}" for x in load)),
        ("repository commit", git_commit()),
        ("build", f"{_repo_relative(build_dir)} ({build_type(build_dir)})"),
    ]
    for name, v in impl_versions.items():
        facts.append((f"{name} version", v))
    if minio_binary:
        facts.append(("MinIO", minio_version(minio_binary)))
    facts.append(("Python", platform.python_version()))
    return facts


def command_line(argv: list[str]) -> str:
    """The command for the result files. A set GOS3LECT_SRC is shown as
    `GOS3LECT_SRC=…` (the Go s3lect checkout is a path on this machine)."""
    env = "GOS3LECT_SRC=… " if os.environ.get("GOS3LECT_SRC", "").strip() else ""
    return env + " ".join(["bench/run", *(shlex.quote(a) for a in argv)])


def write_result(name: str, title: str, body: str, command: str,
                 facts: list[tuple[str, str]]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.md"
    fact_rows = md_table(["fact", "value"], [[k, v] for k, v in facts])
    text = (f"# {title}\n\n"
            f"Produced by `{command}` (from the repository root).\n\n"
            f"{body.rstrip()}\n\n"
            f"## Machine\n\n{fact_rows}\n\n"
            "Absolute times depend on the machine and on what else runs on it (the load "
            "average above); compare ratios within one run, not absolute times across runs.\n")
    path.write_text(text)
    return path

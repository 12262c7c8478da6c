"""RSS, CPU and threads of one process running K electors.

Two footprint processes per measurement, on the same K lock keys: a leader
process (its K electors take every lock and renew it) and, once it leads
everywhere, a follower process (its K electors find live leaders and stay
followers). Both then measure the same window, so one run gives the
renewing-leader and the idle-follower cost.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import BenchError, REPO, log, md_table
from impls import DEFAULTS, LIKE_FOR_LIKE, Impl, Timing

COUNTS = [1, 10, 100, 1000]
# (store, timing, largest K): S3 at like-for-like timing would be 2,000
# requests a second at K = 1000, more than a loaded 2-core MinIO serves.
SETS = [("file", DEFAULTS, 1000), ("file", LIKE_FOR_LIKE, 1000), ("s3", DEFAULTS, 1000),
        ("s3", LIKE_FOR_LIKE, 100)]


def build(build_dir: Path, out_dir: Path) -> Path:
    """Compiles bench/footprint/footprint.c against the static libs3lect.a."""
    src = REPO / "bench" / "footprint" / "footprint.c"
    lib = build_dir / "libs3lect" / "libs3lect.a"
    if not lib.exists():
        raise BenchError(f"{lib} does not exist: build the library first (ninja -C {build_dir})")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "footprint"
    deps = subprocess.run(["pkg-config", "--libs", "libcurl", "libcjson", "openssl"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if deps.returncode != 0:
        raise BenchError(f"pkg-config cannot find libcurl/libcjson/openssl: {deps.stderr}")
    cc = os.environ.get("CC", "cc")
    argv = [cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
            f"-I{REPO / 'libs3lect' / 'include'}", str(src), "-o", str(out), str(lib),
            *deps.stdout.split(), "-lpthread", "-lm"]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise BenchError(f"building footprint failed:\n{' '.join(argv)}\n{r.stdout}")
    return out


class Proc:
    """A footprint process with a line queue on stdout."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path):
        self.log = open(log_path, "w")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, env=env, text=True, start_new_session=True)
        self.q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        assert self.p.stdout
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def line(self, timeout: float, what: str) -> str:
        try:
            v = self.q.get(timeout=timeout)
        except queue.Empty:
            raise BenchError(f"footprint: no {what} within {timeout:.0f}s") from None
        if v is None:
            raise BenchError(f"footprint exited (status {self.p.wait()}) before {what}")
        return v

    def send(self, s: str):
        assert self.p.stdin
        self.p.stdin.write(s + "\n")
        self.p.stdin.flush()

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.kill()
            except ProcessLookupError:
                pass
        self.p.wait(timeout=30)
        self.log.close()


@dataclass
class Sample:
    store: str
    timing: str
    count: int
    leader: dict = field(default_factory=dict)
    follower: dict = field(default_factory=dict)
    leader_ready: str = ""
    follower_ready: str = ""
    stopped: dict = field(default_factory=dict)
    lock_dir: str = ""
    note: str = ""


def measure(impl: Impl, store: str, timing: Timing, count: int, window: float, server,
            logdir: Path) -> Sample:
    s = Sample(store, timing.name, count)
    # tmpfs when there is one: 1,000 leaders renewing every second on a disk
    # are 1,000 fsyncs a second, which measures the disk, not the elector.
    shm = Path("/dev/shm")
    tmp = Path(tempfile.mkdtemp(prefix="s3lect-footprint-",
                                dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))
    if store == "file":
        prefix, endpoint = f"file://{tmp}", None
        s.lock_dir = str(tmp.parent)
    else:
        prefix = f"s3://{server.bucket}/bench/footprint/{int(time.time() * 1000)}-{count}"
        endpoint = server.endpoint
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    if server:
        env.update(AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=server.secret_key,
                   AWS_REGION=server.region)
    procs: list[Proc] = []
    try:
        tag = f"{store}-{timing.name}-{count}"
        for role in ("leader", "follower"):
            argv = impl.footprint_argv(role, count, prefix, endpoint, timing)
            if argv is None:
                raise BenchError(f"{impl.name} has no footprint program")
            p = Proc(argv, env, logdir / f"footprint-{tag}-{role}.log")
            procs.append(p)
            ready = p.line(240, f"{role} readiness")
            setattr(s, f"{role}_ready", ready)
            if not ready.startswith("ready"):
                s.note = f"{role} process: {ready}"
        for p in procs:
            p.send(f"measure {int(window * 1000)}")
        for p, role in zip(procs, ("leader", "follower")):
            setattr(s, role, json.loads(p.line(window + 120, f"{role} measurement")))
        # Followers first, so no follower takes over a released lock.
        for p, role in reversed(list(zip(procs, ("leader", "follower")))):
            p.send("stop")
            s.stopped[role] = p.line(300, f"{role} stop")
    finally:
        for p in procs:
            p.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for role in ("leader", "follower"):
        m = getattr(s, role)
        if m and m["in_role"] != count:
            s.note += f" {role}s in role at the end: {m['in_role']}/{count};"
        if m and m["failing"]:
            s.note += f" {role}s with failing store requests: {m['failing']};"
    return s


def window_for(timing: Timing, quick: bool) -> float:
    if quick:
        return 10.0
    return 60.0 if timing is DEFAULTS else 20.0


def run_all(impl: Impl, server, quick: bool, logdir: Path) -> list[Sample]:
    out = []
    for store, timing, kmax in SETS:
        if store == "s3" and server is None:
            continue
        for k in COUNTS:
            if k > kmax:
                continue
            w = window_for(timing, quick)
            t0 = time.monotonic()
            s = measure(impl, store, timing, k, w, server, logdir)
            log(f"  footprint {store} {timing.name} K={k}: leader rss {s.leader['rss_kb']} kB "
                f"cpu {s.leader['cpu_s']:.3f}s, follower rss {s.follower['rss_kb']} kB cpu "
                f"{s.follower['cpu_s']:.3f}s ({time.monotonic() - t0:.0f}s){s.note}")
            out.append(s)
    return out


def _cells(m: dict, count: int) -> list[str]:
    wall = m["wall_ms"] / 1000.0
    cpu_pct = 100.0 * m["cpu_s"] / wall
    per_e_us = 1e6 * m["cpu_s"] / wall / count  # CPU µs per second per elector
    rss_per = (m["rss_kb"] - m["rss0_kb"]) / count
    return [f"{m['rss_kb'] / 1024:.1f}", f"{rss_per:.0f}", f"{cpu_pct:.2f}", f"{per_e_us:.1f}",
            str(m["threads"])]


def report(samples: list[Sample]) -> tuple[str, str]:
    rows = []
    for s in samples:
        for role in ("leader", "follower"):
            m = getattr(s, role)
            rows.append([s.store, s.timing, s.count, "renewing leaders" if role == "leader"
                         else "idle followers", *_cells(m, s.count),
                         f"{m['in_role']}/{s.count}"])
    headers = ["store", "timing", "K", "process of", "RSS MiB", "RSS kB / elector",
               "CPU % of one core", "CPU µs/s per elector", "threads", "in role at end"]
    dirs = sorted({s.lock_dir for s in samples if s.lock_dir})
    notes = "\n".join(f"- {s.store} {s.timing} K={s.count}:{s.note}" for s in samples if s.note)
    body = f"""## Results

{md_table(headers, rows)}

{("Problems seen:" + chr(10) + notes) if notes else "Every elector was in its role at the end of every window, and none had failing store requests."}

- **RSS** is VmRSS at the end of the window; **RSS kB / elector** subtracts the
  process's RSS before it created any elector and divides by K.
- **CPU** is user + system time (getrusage) during the window, as a
  percentage of one core and as microseconds of CPU per second per elector.
  At small K the process numbers are at the resolution of the clock; read
  the K = 1000 rows for per-elector cost.
- **threads** counts every thread of the process: the v1 runtime runs two per
  elector (an election thread and a callback dispatcher; poll mode saves the
  dispatcher), plus the main thread. DESIGN §2 plans a shared-loop runtime
  (libcurl multi, many electors per thread) that would replace this layer;
  until then 1,000 electors are 2,001 threads.
- The window is {window_for(DEFAULTS, False):.0f} s at default timings (renew 5 s, follower
  poll 30 s: about twelve renewals per leader and two polls per follower) and
  {window_for(LIKE_FOR_LIKE, False):.0f} s at like-for-like timings (renew 1 s, poll 1 s);
  --quick uses 10 s (too short for a default-timing follower to poll at all).
- S3 at like-for-like timing stops at K = 100: K = 1000 is about 2,000
  requests a second against one MinIO on the same 2 cores, which measures
  MinIO rather than the elector (tried while building this bench: most
  leaders lost their leases).
- file:// locks were in {", ".join(dirs) or "(no file runs)"}: tmpfs (/dev/shm) when there is one. The file store
  fsyncs every write, and 1,000 renewals a second on a shared disk measure
  the disk (on this machine's ext4 they stalled for minutes).

## How measured

`bench/footprint/footprint.c` (built by bench/run with `cc -O2` against the
static `libs3lect.a`) creates K electors with distinct lock keys
(`PREFIX/kNNNNN.json`; file:// in a temporary directory on tmpfs, or s3://
on the bench's MinIO), starts them and waits until all are in their role (leading;
or following a known leader in the stable state). The follower process is
started once the leader process leads everywhere. A follower counts as in
its role when it does not lead and knows the leader (stable or transition
state: a poll that lands just before a renewal sees the same record again,
which the algorithm treats as a transition). Both then measure the same
window and report VmRSS/VmHWM/Threads from /proc/self/status and getrusage.
"""
    sum_rows = [[s.store, s.timing, s.count, *(_cells(s.leader, s.count)[i] for i in (0, 3)),
                 *(_cells(s.follower, s.count)[i] for i in (0, 3)), s.leader["threads"]]
                for s in samples]
    summary = md_table(["store", "timing", "K", "leader RSS MiB", "leader CPU µs/s/elector",
                        "follower RSS MiB", "follower CPU µs/s/elector", "threads"], sum_rows)
    return body, summary

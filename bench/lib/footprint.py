# SPDX-License-Identifier: Apache-2.0
"""Electors per process: threads, RSS, CPU, descriptors, connections, stop time.

One footprint process (bench/footprint/footprint.c) per configuration runs K
electors on K / N lock keys, N electors a key (default N = 10: one renewing
leader and nine stable followers per key, so 10 % of the electors renew every
5 s and 90 % poll every 30 s), at the default timings, on S3 (MinIO) and on
file locks. While it measures its own RSS and CPU over the window, bench/run
samples from outside: threads, open descriptors, TCP connections from the
process to MinIO's port, and MinIO's own CPU and RSS. Then the process stops
every elector from 16 threads and reports how long that took and how many
were leaders (each of which writes a release record); the bench then times
the same number of writes made straight to the store, the allowance of the
"stop ≤ 1 s plus the release writes" target.

With a baseline (bench/run --baseline REV) each configuration is measured for
both libraries, one right after the other, and the report puts them side by
side with new/old ratios. This tree's library runs under `ulimit -n 1024`;
the baseline under a raised limit (the thread-per-elector runtime needs
several descriptors per elector).
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from common import REPO, BenchError, log, md_table
from impls import DEFAULTS, Impl

COUNTS = [1000, 2500, 5000, 10000]
QUICK_COUNTS = [100, 1000]
PER_KEY = 10
STORES = ("s3", "file")
STOP_THREADS = 16
SAMPLE_EVERY_S = 10.0  # outside samples of threads, fds, connections, MinIO RSS

# The targets of issue 17, checked against the numbers in report().
MAX_THREADS = 8
MAX_CONNS = 64
TARGET_NOFILE = 1024
MAX_RSS_MIB_S3_10K = 150
FLAT_WITHIN = 0.20
STOP_BUDGET_S = 1.0


def build(build_dir: Path, out: Path, include_dir: Path | None = None) -> Path:
    """Compiles bench/footprint/footprint.c against build_dir's static
    libs3lect.a and the header in include_dir (default: this tree's)."""
    src = REPO / "bench" / "footprint" / "footprint.c"
    lib = build_dir / "libs3lect" / "libs3lect.a"
    include_dir = include_dir or REPO / "libs3lect" / "include"
    if not lib.exists():
        raise BenchError(f"{lib} does not exist: build the library first (ninja -C {build_dir})")
    out.parent.mkdir(parents=True, exist_ok=True)
    deps = subprocess.run(["pkg-config", "--libs", "libcurl", "libcjson", "openssl"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if deps.returncode != 0:
        raise BenchError(f"pkg-config cannot find libcurl/libcjson/openssl: {deps.stderr}")
    cc = os.environ.get("CC", "cc")
    argv = [cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{include_dir}", str(src),
            "-o", str(out), str(lib), *deps.stdout.split(), "-lpthread", "-lm"]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise BenchError(f"building footprint failed:\n{' '.join(argv)}\n{r.stdout}")
    return out


def settable_nofile(want: int) -> tuple[int, str]:
    """The largest fd limit up to `want` that a child can be given here
    (raising the hard limit needs CAP_SYS_RESOURCE), and how it was chosen."""
    r = subprocess.run(["prlimit", f"--nofile={want}:{want}", "--", "true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode == 0:
        return want, f"raised to {want}"
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = want if hard == resource.RLIM_INFINITY else min(want, hard)
    return n, f"raised to the hard limit {n}: {want} is not allowed here"


class Proc:
    """A footprint process under an fd limit, with a line queue on stdout."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, nofile: int):
        self.log = open(log_path, "w")
        # prlimit sets the limit and execs the program (same pid), so no
        # preexec_fn runs in this threaded interpreter.
        self.p = subprocess.Popen(["prlimit", f"--nofile={nofile}:{nofile}", "--", *argv],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, env=env, text=True, start_new_session=True)
        self.q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.p.pid

    def _read(self):
        assert self.p.stdout
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def line(self, timeout: float, what: str) -> str:
        try:
            v = self.q.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise BenchError(f"no {what} within {timeout:.0f}s") from None
        if v is None:
            raise BenchError(f"exited (status {self.p.wait()}) before {what}")
        return v

    def send(self, s: str):
        assert self.p.stdin
        try:
            self.p.stdin.write(s + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise BenchError(f"footprint's stdin is closed ({e}): it exited "
                             f"(status {self.p.poll()})") from None

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.kill()
            except ProcessLookupError:
                pass
        self.p.wait(timeout=60)
        self.log.close()


# ---- what bench/run sees of a process from outside (/proc) ----

def _status(pid: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("Threads", "VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def _cpu_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    except (OSError, ValueError, IndexError):
        return None


def _socket_inodes(pid: int) -> tuple[int, set[str]]:
    """(number of open fds, inodes of its sockets)."""
    n, inodes = 0, set()
    d = f"/proc/{pid}/fd"
    try:
        names = os.listdir(d)
    except OSError:
        return 0, inodes
    for name in names:
        try:
            target = os.readlink(f"{d}/{name}")
        except OSError:
            continue  # closed meanwhile
        n += 1
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return n, inodes


def _tcp_conns(pid: int, inodes: set[str], port: int) -> int:
    """ESTABLISHED TCP connections among `inodes` whose remote port is `port`."""
    c = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "01" and int(f[2].rsplit(":", 1)[1], 16) == port \
                    and f[9] in inodes:
                c += 1
    return c


@dataclass
class Outside:
    """Maxima over the window's samples, and the last sample."""

    samples: int = 0
    threads_max: int = 0
    fds_max: int = 0
    conns_max: int = 0
    threads_end: int = 0
    fds_end: int = 0
    conns_end: int = 0
    minio_rss_kb_max: int = 0
    minio_rss_kb_end: int = 0

    def sample(self, pid: int, minio_pid: int | None, port: int | None):
        st = _status(pid)
        fds, inodes = _socket_inodes(pid)
        conns = _tcp_conns(pid, inodes, port) if port else 0
        self.samples += 1
        self.threads_end, self.fds_end, self.conns_end = st.get("Threads", 0), fds, conns
        self.threads_max = max(self.threads_max, self.threads_end)
        self.fds_max = max(self.fds_max, fds)
        self.conns_max = max(self.conns_max, conns)
        if minio_pid:
            rss = _status(minio_pid).get("VmRSS", 0)
            self.minio_rss_kb_end = rss
            self.minio_rss_kb_max = max(self.minio_rss_kb_max, rss)


# ---- the allowance for the release writes ----

def _release_writes_s3(server, prefix_key: str, n: int, threads: int) -> float:
    body = json.dumps({"calibration": True, "pad": "x" * 200}).encode()

    def put(i: int):
        r = server.client().put(server.bucket, f"{prefix_key}/calib/{i}.json", body)
        if r.status != 200:
            raise BenchError(f"calibration PUT: HTTP {r.status}")

    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(put, range(n)))
    return time.monotonic() - t0


def _release_writes_file(d: Path, n: int, threads: int) -> float:
    """What the file store does for one write: flock key.lock, write a
    temporary file, fsync, rename over the key."""
    d.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"calibration": True, "pad": "x" * 200}).encode()

    def write(i: int):
        key = d / f"c{i}.json"
        with open(f"{key}.lock", "a+") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            tmp = f"{key}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, body)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, key)

    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(write, range(n)))
    return time.monotonic() - t0


# ---- one configuration ----

@dataclass
class Sample:
    store: str
    impl: str
    rev: str
    count: int
    per_key: int
    nofile: int
    nofile_note: str
    ready: dict = field(default_factory=dict)  # the "ready ..." line's fields
    m: dict = field(default_factory=dict)  # footprint's JSON measurement
    outside: dict = field(default_factory=dict)  # Outside, as a dict
    minio_cpu_pct: float | None = None
    stopped: dict = field(default_factory=dict)  # the "stopped ..." line's fields
    release_allowance_s: float | None = None
    note: str = ""  # why the row is incomplete or out of role
    failed: bool = False  # no measurement at all (see note)
    runtime: str = ""  # filled in by report(): "threads" or "shared"

    @property
    def ok(self) -> bool:
        return bool(self.m) and not self.failed


def _fields(line: str) -> dict:
    out = {"status": line.split()[0] if line else ""}
    for tok in line.split()[1:]:
        k, eq, v = tok.partition("=")
        if eq:
            out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def ready_timeout_ms(count: int) -> int:
    """Followers first see a record within one frequent interval; 10,000
    electors also take a while to create and to reach their roles."""
    return 120_000 + count * 10


def measure(impl: Impl, store: str, count: int, per_key: int, window: float, server,
            logdir: Path) -> Sample:
    s = Sample(store, impl.name, impl.rev, count, per_key, impl.nofile, impl.nofile_note)
    shm = Path("/dev/shm")
    tmp = Path(tempfile.mkdtemp(prefix="s3lect-footprint-",
                                dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))
    key_prefix = f"bench/footprint/{int(time.time() * 1000)}-{impl.name}-{store}-{count}"
    if store == "file":
        prefix, endpoint = f"file://{tmp}/locks", None
        (tmp / "locks").mkdir()
    else:
        prefix, endpoint = f"s3://{server.bucket}/{key_prefix}", server.endpoint
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=server.secret_key,
               AWS_REGION=server.region)
    minio_pid = server.proc.pid if getattr(server, "proc", None) else None
    port = server.port if store == "s3" else None
    rt = ready_timeout_ms(count)
    argv = impl.footprint_argv(count, per_key, prefix, endpoint, DEFAULTS, rt)
    if argv is None:
        raise BenchError(f"{impl.name} has no footprint program")
    tag = f"{impl.name}-{store}-{count}"
    p = None
    try:
        p = Proc(argv, env, logdir / f"footprint-{tag}.log", impl.nofile)
        line = p.line(rt / 1000 + 120, "readiness line")
        s.ready = _fields(line)
        if s.ready["status"] == "failed":
            raise BenchError(line[len("failed "):])
        if s.ready["status"] != "ready":
            s.note += (f" not every elector reached its role within {rt / 1000:.0f} s "
                       f"({s.ready.get('in_role')}/{count});")
        out = Outside()
        c0, w0 = (_cpu_ticks(minio_pid) if minio_pid else None), time.monotonic()
        p.send(f"measure {int(window * 1000)}")
        deadline = w0 + window + 120
        next_sample = w0 + 1.0
        while True:
            now = time.monotonic()
            try:
                v = p.q.get(timeout=max(0.0, min(next_sample, deadline) - now))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise BenchError(f"no measurement within {window + 120:.0f}s") from None
                if time.monotonic() < w0 + window:
                    out.sample(p.pid, minio_pid, port)
                next_sample += SAMPLE_EVERY_S
                continue
            if v is None:
                raise BenchError(f"exited (status {p.p.wait()}) during the window")
            if v.startswith("{"):
                s.m = json.loads(v)
                break
        c1, w1 = (_cpu_ticks(minio_pid) if minio_pid else None), time.monotonic()
        out.sample(p.pid, minio_pid, port)  # the end of the window
        s.outside = out.__dict__
        if c0 is not None and c1 is not None:
            s.minio_cpu_pct = 100.0 * (c1 - c0) / os.sysconf("SC_CLK_TCK") / (w1 - w0)
        p.send("stop")
        s.stopped = _fields(p.line(600, "stop"))
        leaders = int(s.stopped.get("leaders", 0))
        if store == "s3":
            s.release_allowance_s = _release_writes_s3(server, key_prefix, leaders, STOP_THREADS)
        else:
            s.release_allowance_s = _release_writes_file(tmp / "calib", leaders, STOP_THREADS)
    except BenchError as e:
        s.failed = not s.m
        s.note += f" {'failed' if s.failed else 'incomplete'}: {e};"
        log(f"  footprint {tag}: {e} (log: {logdir / f'footprint-{tag}.log'})")
    finally:
        if p:
            p.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if s.m:
        if s.m["in_role"] != count:
            s.note += (f" in role at the end: {s.m['in_role']}/{count} (leaders "
                       f"{s.m['leaders']}, keys with one leader {s.m['keys_led']}/{s.m['keys']});")
        if s.m["failing"]:
            s.note += f" electors whose last store request failed: {s.m['failing']};"
    if s.stopped and int(s.stopped.get("errors", 0)):
        s.note += f" s3lect_stop errors: {s.stopped['errors']};"
    return s


def window_for(quick: bool) -> float:
    # 60 s at the defaults: twelve renewals per leader, two polls per follower.
    return 20.0 if quick else 60.0


def run_all(impls: list[Impl], server, quick: bool, logdir: Path, counts: list[int] | None,
            per_key: int) -> list[Sample]:
    """Every (store, K), each implementation in turn within a configuration,
    so the old and the new library see the same machine at about the same time."""
    counts = counts or (QUICK_COUNTS if quick else COUNTS)
    out = []
    for store in STORES:
        for k in counts:
            for impl in impls:
                t0 = time.monotonic()
                s = measure(impl, store, k, per_key, window_for(quick), server, logdir)
                if s.ok:
                    o = s.outside
                    log(f"  footprint {impl.name} {store} K={k}: threads {o['threads_max']}, "
                        f"rss {s.m['rss_kb'] / 1024:.1f} MiB, cpu {_cpu_pct(s):.2f} %, fds "
                        f"{o['fds_max']}, conns {o['conns_max']}, in role "
                        f"{s.m['in_role']}/{k}, stop {s.stopped.get('stop_ms', '?')} ms "
                        f"({time.monotonic() - t0:.0f}s){s.note}")
                out.append(s)
                # Let MinIO close the connections of a large run before the next.
                time.sleep(2.0 + k / 1000)
    return out


# ---- the report ----

def _cpu_pct(s: Sample) -> float:
    return 100.0 * s.m["cpu_s"] / (s.m["wall_ms"] / 1000.0)


def _per_1000(s: Sample) -> float:
    """CPU µs per second per 1,000 electors."""
    return 1e6 * s.m["cpu_s"] / (s.m["wall_ms"] / 1000.0) / (s.count / 1000.0)


def _runtime_of(samples: list[Sample]) -> str:
    """"threads" if the process had at least one thread per elector, else
    "shared": read off the measured threads, not assumed from the commit."""
    seen = [s for s in samples if s.ok and s.count >= 100]
    if not seen:
        return "runtime ?"
    return "threads" if any(s.outside["threads_max"] >= s.count for s in seen) else "shared"


def _labels(samples: list[Sample]) -> dict[str, str]:
    out = {}
    for impl in dict.fromkeys(s.impl for s in samples):
        mine = [s for s in samples if s.impl == impl]
        rt = _runtime_of(mine)
        for s in mine:
            s.runtime = rt
        out[impl] = f"{rt} ({mine[0].rev})"
    return out


def _stop_s(s: Sample) -> float | None:
    v = s.stopped.get("stop_ms")
    return v / 1000.0 if isinstance(v, int) else None


def targets(samples: list[Sample], impl: str) -> list[tuple[str, str, str]]:
    """(target, PASS/FAIL/not measured, the numbers it was decided on) for one
    implementation's samples."""
    mine = [s for s in samples if s.impl == impl]
    ok = [s for s in mine if s.ok]
    out = []

    def row(name, verdict, detail):
        out.append((name, verdict, detail))

    def k_of(ss):
        return ", ".join(f"{s.store} {s.count}" for s in ss)

    if not mine:
        return out
    failed = [s for s in mine if not s.ok]
    not_in_role = [s for s in ok if s.m["in_role"] != s.count]
    row("every elector in its role at the end of the window",
        "PASS" if ok and not failed and not not_in_role else "FAIL",
        (f"failed: {k_of(failed)}; " if failed else "")
        + (f"out of role: {k_of(not_in_role)}" if not_in_role else
           f"{len(ok)} of {len(mine)} configurations measured"))
    if ok:
        worst = max(ok, key=lambda s: s.outside["threads_max"])
        row(f"≤ {MAX_THREADS} threads", "PASS" if worst.outside["threads_max"] <= MAX_THREADS
            and not failed else "FAIL",
            f"most: {worst.outside['threads_max']} ({worst.store}, K = {worst.count})")
    s3 = [s for s in ok if s.store == "s3"]
    if s3:
        worst = max(s3, key=lambda s: s.outside["conns_max"])
        row(f"≤ {MAX_CONNS} TCP connections to the S3 endpoint",
            "PASS" if worst.outside["conns_max"] <= MAX_CONNS and not
            [s for s in failed if s.store == "s3"] else "FAIL",
            f"most: {worst.outside['conns_max']} (K = {worst.count})")
    lim = {s.nofile for s in mine}
    if lim == {TARGET_NOFILE}:
        row(f"works under ulimit -n {TARGET_NOFILE}", "PASS" if not failed and not not_in_role
            else "FAIL", f"every configuration ran with RLIMIT_NOFILE {TARGET_NOFILE}"
            + (f"; failed or out of role: {k_of(failed + not_in_role)}"
               if failed or not_in_role else ""))
    else:
        row(f"works under ulimit -n {TARGET_NOFILE}", "not measured",
            f"ran with RLIMIT_NOFILE {', '.join(str(x) for x in sorted(lim))}")
    at10k = [s for s in mine if s.store == "s3" and s.count == 10000]
    if at10k:
        s = at10k[0]
        rss = s.m["rss_kb"] / 1024 if s.ok else None
        row(f"RSS ≤ {MAX_RSS_MIB_S3_10K} MiB on S3 at K = 10,000",
            "PASS" if rss is not None and rss <= MAX_RSS_MIB_S3_10K else "FAIL",
            f"{rss:.1f} MiB" if rss is not None else "no measurement")
    else:
        row(f"RSS ≤ {MAX_RSS_MIB_S3_10K} MiB on S3 at K = 10,000", "not measured",
            "K = 10,000 was not in this run")
    for store in STORES:
        ss = sorted((s for s in ok if s.store == store and s.count >= 1000),
                    key=lambda s: s.count)
        name = f"CPU per 1,000 electors flat within {FLAT_WITHIN:.0%} ({store})"
        if len(ss) < 2:
            row(name, "not measured", "needs two values of K ≥ 1,000")
            continue
        lo, hi = ss[0], ss[-1]
        ratio = _per_1000(hi) / _per_1000(lo) if _per_1000(lo) > 0 else float("inf")
        scope = "" if (lo.count, hi.count) == (1000, 10000) else \
            f" (only K = {lo.count} to {hi.count} measured)"
        row(name + scope, "PASS" if ratio <= 1 + FLAT_WITHIN else "FAIL",
            f"{_per_1000(lo):.0f} µs/s at K = {lo.count}, {_per_1000(hi):.0f} at K = "
            f"{hi.count}: ratio {ratio:.2f}")
    stops = [s for s in ok if _stop_s(s) is not None and s.release_allowance_s is not None]
    if stops:
        over = [s for s in stops if _stop_s(s) > STOP_BUDGET_S + s.release_allowance_s]
        worst = max(stops, key=lambda s: _stop_s(s) - s.release_allowance_s)
        row(f"stop of all electors ≤ {STOP_BUDGET_S:g} s plus the release writes",
            "PASS" if not over and len(stops) == len(mine) else "FAIL",
            f"worst: {_stop_s(worst):.2f} s with {worst.stopped.get('leaders')} release writes "
            f"taking {worst.release_allowance_s:.2f} s ({worst.store}, K = {worst.count})"
            + (f"; over: {k_of(over)}" if over else "")
            + ("" if len(stops) == len(mine) else f"; not stopped: "
               f"{k_of([s for s in mine if s not in stops])}"))
    return out


def report(samples: list[Sample], per_key: int) -> tuple[str, str]:
    labels = _labels(samples)
    impls = list(labels)

    def f(x, fmt="{:.1f}"):
        return "–" if x is None else fmt.format(x)

    rows, rows2 = [], []
    for s in samples:
        lab = labels[s.impl]
        if not s.ok:
            rows.append([s.store, s.count, lab, s.nofile, *["–"] * 8, f"**failed**:{s.note}"])
            continue
        o, m = s.outside, s.m
        rows.append([s.store, s.count, lab, s.nofile, o["threads_max"],
                     *((f"{m['rss_kb'] / 1024:.1f}", f"{(m['rss_kb'] - m['rss0_kb']) / s.count:.1f}")
                       if m["rss_kb"] >= 0 else ("– (unreadable)", "–")),
                     f"{_cpu_pct(s):.2f}", f"{_per_1000(s):.0f}", o["fds_max"],
                     o["conns_max"] if s.store == "s3" else "–",
                     f"{m['keys_led']}/{m['keys']} + {m['followers']}/{s.count - m['keys']}",
                     s.note.strip() or ""])
        stop = _stop_s(s)
        rows2.append([s.store, s.count, lab, f(s.minio_cpu_pct),
                      f(o["minio_rss_kb_max"] / 1024 if o["minio_rss_kb_max"] else None),
                      f"{s.ready.get('create_ms', 0) / 1000:.1f}",
                      f"{s.ready.get('start_ms', 0) / 1000:.1f}", f(stop, "{:.2f}"),
                      s.stopped.get("leaders", "–"), f(s.release_allowance_s, "{:.2f}"),
                      f(s.stopped["free_ms"] / 1000 if "free_ms" in s.stopped else None,
                        "{:.2f}")])
    table = md_table(["store", "K", "runtime (library)", "fd limit", "threads",
                      "RSS MiB", "RSS kB / elector", "CPU % of one core",
                      "CPU µs/s per 1,000 electors", "open fds", "TCP conns to MinIO",
                      "in role: keys led + followers", "note"], rows)
    table2 = md_table(["store", "K", "runtime (library)", "MinIO CPU % of one core",
                       "MinIO RSS MiB", "create+start s", "all in role after s",
                       "stop all s", "leaders stopped (release writes)",
                       "release writes alone s", "free all s"], rows2)

    ratio_text = ""
    if len(impls) >= 2:
        new, rrows = impls[0], []
        for old in impls[1:]:
            for s in samples:
                if s.impl != new:
                    continue
                b = next((x for x in samples if x.impl == old and x.store == s.store
                          and x.count == s.count), None)
                lab = f"{labels[new]} / {labels[old]}"
                if b is None:
                    continue
                if not s.ok or not b.ok:
                    miss = " and ".join(n for n, x in (("new", s), ("old", b)) if not x.ok)
                    rrows.append([s.store, s.count, lab, f"{miss}: no measurement",
                                  *["–"] * 4])
                    continue

                def r(a, c):
                    # -1: the process could not read it (e.g. no descriptor left)
                    return f"{a / c:.3f}" if c and c > 0 and a >= 0 else "–"
                rrows.append([s.store, s.count, lab,
                              r(s.outside["threads_max"], b.outside["threads_max"]),
                              r(s.m["rss_kb"], b.m["rss_kb"]), r(s.m["cpu_s"], b.m["cpu_s"]),
                              r(s.outside["fds_max"], b.outside["fds_max"]),
                              r(_stop_s(s) or 0, _stop_s(b) or 0)])
        ratio_text = ("\n\n### Ratios new / old (below 1: the new library uses less)\n\n"
                      + md_table(["store", "K", "ratio", "threads", "RSS", "CPU", "open fds",
                                  "stop all"], rrows))

    tg = {i: targets(samples, i) for i in impls}
    names = list(dict.fromkeys(t[0] for i in impls for t in tg[i]))
    trows = []
    for n in names:
        cells = []
        for i in impls:
            hit = next((t for t in tg[i] if t[0] == n), None)
            cells.append("–" if hit is None else f"**{hit[1]}**: {hit[2]}")
        trows.append([n, *cells])
    ttable = md_table(["target (issue 17)", *(labels[i] for i in impls)], trows)
    nofiles = "; ".join(f"{labels[i]}: {next(s.nofile for s in samples if s.impl == i)} "
                        f"({next(s.nofile_note for s in samples if s.impl == i)})"
                        for i in impls)
    counts = sorted({s.count for s in samples})
    window = next((s.m["wall_ms"] / 1000 for s in samples if s.ok), 0)
    body = f"""## Mix

K electors in one process on K / {per_key} lock keys, {per_key} electors a key
(`--per-key {per_key}`): on every key one elector leads and renews, the other
{per_key - 1} follow it, so {100 / per_key:.0f} % of the electors are renewing
leaders and {100 - 100 / per_key:.0f} % stable followers. Default timings (lease 15 s,
renew 5 s, frequent 5 s, infrequent 30 s): at K = 10,000 on S3 that is about
{10000 / per_key / 5:.0f} PUT/s and {(10000 - 10000 / per_key) / 30:.0f} GET/s, which the 2-core MinIO
beside the bench can serve (10,000 renewing leaders would be 2,000 PUT/s).
K = {", ".join(f"{c:,}" for c in counts)}; window {window:.0f} s.

## Targets

{ttable}

Each verdict is computed from the numbers below. "Flat" compares CPU µs/s
per 1,000 electors at the largest K with the smallest K ≥ 1,000 (a ratio
below 1 passes: fixed costs spread over more electors). The stop target's
allowance ("plus the release writes") is the time the bench then takes to make
as many writes straight to the same store from {STOP_THREADS} threads (S3: a
signed PUT over a new connection each, from Python; file: flock, write, fsync,
rename, as the file store does): a generous allowance, since the Python
client is slower than libcurl.

## Results

{table}

{table2}{ratio_text}

- **fd limit**: RLIMIT_NOFILE (soft = hard) the process ran under, set by
  `prlimit`. {nofiles}.
- **threads**, **open fds**, **TCP conns to MinIO**: the most seen in samples
  taken from outside every {SAMPLE_EVERY_S:.0f} s during the window and at its
  end (/proc/PID/status; /proc/PID/fd; the socket inodes among them matched
  with /proc/PID/net/tcp and tcp6 rows in state ESTABLISHED whose remote port
  is MinIO's). The runtime column is read off the threads: "threads" when the
  process had at least one thread per elector, else "shared".
- **RSS** is VmRSS at the end of the window; **RSS kB / elector** subtracts
  the RSS before any elector existed and divides by K.
- **CPU** is user + system time of the process (getrusage) over the window,
  as a percentage of one core and as µs of CPU per second per 1,000 electors.
- **in role**: keys with exactly one leader (of this process's electors) /
  keys, + followers that are in a follower state and name their key's leader
  / followers. Checked by the process at the end of the window.
- **MinIO CPU / RSS**: MinIO's own utime + stime over the window
  (/proc/PID/stat) and its largest VmRSS in the samples (file-lock rows show
  an idle MinIO).
- **all in role after**: from before the first s3lect_new until every
  elector was in its role (at most {ready_timeout_ms(1000) / 1000:.0f} s + 10 ms per elector).
- **stop all**: {STOP_THREADS} threads of the process each call s3lect_stop on a
  slice of the electors (elector i on thread i mod {STOP_THREADS}); from the first
  call until every one returned. Each leader writes a release record.
  **free all**: s3lect_free_elector of every stopped elector, one thread.

## How measured

`bench/footprint/footprint.c` (built by bench/run with `cc -O2` against the
static `libs3lect.a` of each library and that tree's header; it uses only the
public API) creates and starts K electors (`PREFIX/kNNNNN.json`, elector i on
key i / {per_key}; file:// in a fresh directory on tmpfs, s3:// under a fresh prefix
on the bench's MinIO), waits until all are in their role, then measures one
window. With a baseline, each (store, K) runs the two libraries one after the
other before the next configuration.
"""
    sum_rows = [[s.store, s.count, labels[s.impl],
                 *( [s.outside["threads_max"], f"{s.m['rss_kb'] / 1024:.1f}", f"{_cpu_pct(s):.2f}",
                     s.outside["conns_max"] if s.store == "s3" else "–",
                     f"{s.m['in_role']}/{s.count}", f"{_stop_s(s):.2f}"
                     if _stop_s(s) is not None else "–"]
                    if s.ok else ["failed"] + ["–"] * 5)] for s in samples]
    summary = md_table(["store", "K", "runtime", "threads", "RSS MiB", "CPU %", "conns",
                        "in role", "stop s"], sum_rows)
    summary += "\n\n" + ttable
    return body, summary

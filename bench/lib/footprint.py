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
    # What the static library needs, from the build's own s3lect.pc (its
    # Requires.private lists every library this build links: hiredis where
    # the Redis store is built, libpq's loader...), so that the link follows
    # the build; an older build without one falls back to the base set.
    # (The shared forms of those libraries: --static would also ask for
    # libcurl's own private dependencies.)
    pc = build_dir / "libs3lect" / "s3lect.pc"
    pkgs, extra = ["libcurl", "libcjson", "openssl"], []
    if pc.exists():
        for line in pc.read_text().splitlines():
            key, _, val = line.partition(":")
            if key.strip() == "Requires.private":
                pkgs = val.replace(",", " ").split()
            elif key.strip() == "Libs.private":
                extra = val.split()
    q = ["pkg-config", "--libs", *pkgs]
    deps = subprocess.run(q, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if deps.returncode != 0:
        raise BenchError(f"{' '.join(q)} failed: {deps.stderr}")
    flags = deps.stdout.split() + extra
    cc = os.environ.get("CC", "cc")
    argv = [cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{include_dir}", str(src),
            "-o", str(out), str(lib), *flags, "-lpthread", "-lm", "-ldl"]
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
    impls = [i for i in impls if i.footprint_argv(1, 1, "file:///x", None, DEFAULTS, 1)]
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


# ---- peer mode over three processes (issue 28 item 2) ----
#
# T electors in zero-config peer mode split over PEER_PROCS processes on
# T / per_key keys: process p runs the global electors p, p + 3, p + 6, ...
# (footprint.c --first p --step 3 --total T), so the per_key electors of a
# key sit in all three processes and most followers watch a leader in another
# process (through the batched follower checks of runtime/peer_hub.c).

PEER_PROCS = 3
PEER_TOTALS = [1000, 2500, 5000, 10000]
QUICK_PEER_TOTALS = [300, 1000]
MAX_LISTEN = 2
MAX_PEER_CONNS = 64
MAX_RSS_MIB_PEER = 150
HANDOVER_P99_S = 0.5
KILL_SLACK_S = 5.0  # kill -9: every key led again within lease + this
ONE_KEY_TRIALS = 5
QUICK_ONE_KEY_TRIALS = 2
CALLBACK_THREADS = 2  # the runtime's default callback_threads
# How a process stops its electors (footprint.c --stop-order): those that do
# not lead first, then the leaders, so no elector of the stopping process
# takes over a key that a leader of that process has just released. With
# "mixed" (elector i on thread i mod 16, whatever its role), a quick run at
# T = 1,000 and 3,000 handed over at p99 2.1-5.6 s, stops took 2.1 s:
# followers of the same process took keys over and were then stopped too.
PEER_STOP_ORDER = "followers-first"
PEER_STOP_THREADS = 16  # as the one-process rows (footprint.c --stop-threads)


def _tcp_rows() -> list[tuple[int, int, str, str]]:
    """(local port, remote port, state, inode) of every TCP socket here (one
    network namespace: every process sees the same table)."""
    rows = []
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9:
                rows.append((int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16),
                             f[3], f[9]))
    return rows


@dataclass
class PeerOutside:
    """Per process: maxima over the samples of the window."""

    samples: int = 0
    threads_max: int = 0
    fds_max: int = 0
    listen_max: int = 0
    listen_ports: list = field(default_factory=list)
    peer_max: int = 0  # peer sockets to/from the other processes' peer ports
    peer_self_max: int = 0  # both ends in this process (followers of a local leader)
    s3_conns_max: int = 0


def _peer_sample(pids: list[int], outs: list[PeerOutside], s3_port: int | None):
    rows = _tcp_rows()
    infos = []
    for pid in pids:
        fds, inodes = _socket_inodes(pid)
        mine = [r for r in rows if r[3] in inodes]
        listen = {r[0] for r in mine if r[2] == "0A"}
        infos.append((pid, fds, inodes, mine, listen))
    all_listen = set().union(*(i[4] for i in infos))
    for (pid, fds, inodes, mine, listen), o in zip(infos, outs):
        est = [r for r in mine if r[2] == "01"]
        local_ports = {r[0] for r in est}
        inbound = [r for r in est if r[0] in listen]
        outbound = [r for r in est if r[1] in all_listen and r[0] not in listen]
        self_in = [r for r in inbound if r[1] in local_ports]
        self_out = [r for r in outbound if r[1] in listen]
        other = len(inbound) - len(self_in) + len(outbound) - len(self_out)
        st = _status(pid)
        o.samples += 1
        o.threads_max = max(o.threads_max, st.get("Threads", 0))
        o.fds_max = max(o.fds_max, fds)
        o.listen_max = max(o.listen_max, len(listen))
        o.listen_ports = sorted(listen)
        o.peer_max = max(o.peer_max, other)
        o.peer_self_max = max(o.peer_self_max, len(self_in) + len(self_out))
        if s3_port:
            o.s3_conns_max = max(o.s3_conns_max, sum(1 for r in est if r[1] == s3_port))


@dataclass
class PeerSample:
    total: int
    per_key: int
    keys: int
    nofile: int
    rev: str = ""
    counts: list = field(default_factory=list)  # electors per process
    ready: list = field(default_factory=list)  # each process's "ready" fields
    m: list = field(default_factory=list)  # each process's measurement JSON
    outside: list = field(default_factory=list)  # PeerOutside dicts
    roles: dict = field(default_factory=dict)  # the keys checked across processes
    minio_cpu_pct: float | None = None
    stops: list = field(default_factory=list)  # {"how", "stopped", "allowance_s"}
    handover: dict = field(default_factory=dict)  # {"keys", "from_signal_s", "from_stop_s", ...}
    failover: dict = field(default_factory=dict)  # {"keys", "s", "missing"}
    note: str = ""
    failed: bool = False

    @property
    def ok(self) -> bool:
        return len(self.m) == PEER_PROCS and not self.failed


def _merge_roles(lines: list[dict], keys: int) -> dict:
    """Every key with exactly one leader (over the processes) and every
    follower naming it: {"keys_led", "followers_ok", "followers", ...}."""
    leads: dict[str, list[str]] = {}
    for d in lines:
        for k, who in d["lead"].items():
            leads.setdefault(k, []).append(who)
    keys_led = sum(1 for v in leads.values() if len(v) == 1)
    two = sorted(int(k) for k, v in leads.items() if len(v) > 1)
    ok = wrong = bad = 0
    for d in lines:
        for k, named in d["follow"].items():
            lead = leads.get(k)
            for who, n in named.items():
                if lead and len(lead) == 1 and who == lead[0]:
                    ok += n
                else:
                    wrong += n
        bad += sum(d["bad"].values())
    return {"keys": keys, "keys_led": keys_led, "two_leaders": two[:20],
            "n_two_leaders": len(two), "followers_ok": ok, "followers_wrong": wrong,
            "followers_not_following": bad,
            "led_by": [sorted(int(k) for k in d["lead"]) for d in lines]}


def raw_roles(procs: list) -> list[dict]:
    """Each process's "roles" answer, as it gave it."""
    out = []
    for p in procs:
        p.send("roles")
        while True:
            v = p.line(60, "roles")
            if v.startswith('{"roles"'):
                out.append(json.loads(v)["roles"])
                break
    return out


def _roles(procs: list, keys: int) -> dict:
    return _merge_roles(raw_roles(procs), keys)


def _acquired(p, since_us: int) -> dict[int, int]:
    p.send(f"acquired {since_us}")
    while True:
        v = p.line(60, "acquired")
        if v.startswith('{"acquired"'):
            return {k: t for k, t in json.loads(v)["acquired"]}


def _wait_led_again(procs: list, keys: list[int], since_us: int, timeout_s: float
                    ) -> tuple[dict[int, int], list[int]]:
    """Polls the live processes until every key of `keys` was acquired at or
    after since_us by one of them; (key -> first such time µs, keys missing)."""
    want = set(keys)
    got: dict[int, int] = {}
    end = time.monotonic() + timeout_s
    while True:
        for p in procs:
            for k, t in _acquired(p, since_us).items():
                if k in want and (k not in got or t < got[k]):
                    got[k] = t
        if set(got) >= want or time.monotonic() >= end:
            return got, sorted(want - set(got))
        time.sleep(0.5)


def _errors(procs: list, since_us: int) -> list:
    """[process, key, µs, code, n, message] of the electors whose last
    ERROR event came at or after since_us, from every live process."""
    out = []
    for i, p in enumerate(procs):
        if p.p.poll() is not None:
            continue
        try:
            p.send(f"errors {since_us}")
            while True:
                v = p.line(60, "errors")
                if v.startswith('{"errors"'):
                    out += [[i, *x] for x in json.loads(v)["errors"]]
                    break
        except BenchError:
            continue  # it exited meanwhile (the SIGTERM'd one)
    return out


def _now_us() -> int:
    return int(time.monotonic() * 1e6)  # CLOCK_MONOTONIC, as footprint.c's mono_us()


def _read_stop(p, timeout: float) -> tuple[dict, dict]:
    """The "stopping" JSON (or {}) and the "stopped ..." fields of a process."""
    stopping = {}
    while True:
        v = p.line(timeout, "stop")
        if v.startswith('{"stopping"'):
            stopping = json.loads(v)["stopping"]
        elif v.startswith("stopped"):
            return stopping, _fields(v)


def _peer_argv(impl: Impl, total: int, per_key: int, prefix: str, endpoint: str, p: int,
               rt: int) -> list[str]:
    argv = impl.footprint_argv(1, per_key, prefix, endpoint, DEFAULTS, rt)
    if argv is None:
        raise BenchError(f"{impl.name} has no footprint program")
    return argv + ["--peer", "1", "--first", str(p), "--step", str(PEER_PROCS),
                   "--total", str(total), "--stop-order", PEER_STOP_ORDER,
                   "--stop-threads", str(PEER_STOP_THREADS), "--stop-many", "1"]


def _s3_env(server) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=server.secret_key,
               AWS_REGION=server.region)
    return env


def measure_peer(impl: Impl, total: int, per_key: int, window: float, server, logdir: Path,
                 events: bool = True) -> PeerSample:
    keys = (total + per_key - 1) // per_key
    s = PeerSample(total, per_key, keys, impl.nofile, impl.rev)
    key_prefix = f"bench/footprint/{int(time.time() * 1000)}-{impl.name}-peer-{total}"
    prefix = f"s3://{server.bucket}/{key_prefix}"
    env = _s3_env(server)
    minio_pid = server.proc.pid if getattr(server, "proc", None) else None
    rt = ready_timeout_ms(total)
    procs: list[Proc] = []
    tag = f"{impl.name}-peer-{total}"
    try:
        for p in range(PEER_PROCS):
            procs.append(Proc(_peer_argv(impl, total, per_key, prefix, server.endpoint, p, rt),
                              env, logdir / f"footprint-{tag}-p{p}.log", impl.nofile))
        for p in procs:
            line = p.line(rt / 1000 + 120, "readiness line")
            f = _fields(line)
            if f["status"] == "failed":
                raise BenchError(line[len("failed "):])
            if f["status"] != "ready":
                s.note += f" process {len(s.ready)}: not every elector settled ({f.get('in_role')});"
            s.ready.append(f)
        s.counts = [int(f["count"]) for f in s.ready]
        # Across processes: each key one leader, each follower naming it.
        end = time.monotonic() + 60
        while True:
            r = _roles(procs, keys)
            if (r["keys_led"] == keys and not r["followers_wrong"]
                    and not r["followers_not_following"]) or time.monotonic() > end:
                break
            time.sleep(2)
        s.roles["ready"] = r
        outs = [PeerOutside() for _ in procs]
        pids = [p.pid for p in procs]
        c0, w0 = (_cpu_ticks(minio_pid) if minio_pid else None), time.monotonic()
        for p in procs:
            p.send(f"measure {int(window * 1000)}")
        next_sample = w0 + 1.0
        while time.monotonic() < w0 + window:
            time.sleep(max(0.0, min(next_sample, w0 + window) - time.monotonic()))
            if time.monotonic() < w0 + window:
                _peer_sample(pids, outs, server.port)
                next_sample += SAMPLE_EVERY_S
        for p in procs:
            while True:
                v = p.line(window + 120, "measurement")
                if v.startswith("{"):
                    s.m.append(json.loads(v))
                    break
        c1, w1 = (_cpu_ticks(minio_pid) if minio_pid else None), time.monotonic()
        _peer_sample(pids, outs, server.port)
        s.outside = [o.__dict__ for o in outs]
        if c0 is not None and c1 is not None:
            s.minio_cpu_pct = 100.0 * (c1 - c0) / os.sysconf("SC_CLK_TCK") / (w1 - w0)
        r = _roles(procs, keys)
        s.roles["end"] = r
        if r["keys_led"] != keys or r["n_two_leaders"] or r["followers_wrong"] \
                or r["followers_not_following"]:
            s.note += (f" at the end of the window: keys with one leader {r['keys_led']}/{keys}, "
                       f"keys with two {r['n_two_leaders']}, followers naming it "
                       f"{r['followers_ok']}/{total - keys};")
        if not events:
            for p in procs:
                p.send("stop")
            for i, p in enumerate(procs):
                _, st = _read_stop(p, 600)
                s.stops.append({"how": "stop (all three at once)", "proc": i, "stopped": st})
        else:
            _peer_events(s, procs, r, total, keys, minio_pid)
        for st in s.stops:
            n = int(st["stopped"].get("leaders", 0))
            st["allowance_s"] = _release_writes_s3(server, key_prefix, n, STOP_THREADS)
            if st["how"].startswith("SIGTERM"):
                # A handover makes 2 writes a key (the release, the
                # successor's): the store's own time for as many.
                st["handover_writes_s"] = _release_writes_s3(server, key_prefix, 2 * n,
                                                             STOP_THREADS)
    except BenchError as e:
        s.failed = len(s.m) < PEER_PROCS
        s.note += f" {'failed' if s.failed else 'incomplete'}: {e};"
        log(f"  footprint {tag}: {e} (logs: {logdir}/footprint-{tag}-p*.log)")
    finally:
        for p in procs:
            p.close()
    return s


def _peer_events(s: PeerSample, procs: list, r: dict, total: int, keys: int,
                 minio_pid: int | None = None):
    """SIGTERM the process leading most keys (handover), then kill -9 the
    live one leading most (failover), then "stop" the last one."""
    import signal
    lease = DEFAULTS.lease
    # Handover.
    h = max(range(len(procs)), key=lambda i: len(r["led_by"][i]))
    led = r["led_by"][h]
    live = [p for i, p in enumerate(procs) if i != h]
    # CPU of MinIO and of each process while the keys are handed over.
    pids = [minio_pid] + [p.pid for p in procs] if minio_pid else [p.pid for p in procs]
    ticks0, w0 = [_cpu_ticks(x) for x in pids], time.monotonic()
    t0 = _now_us()
    os.kill(procs[h].pid, signal.SIGTERM)
    stopping, st = _read_stop(procs[h], 600)
    s.stops.append({"how": "SIGTERM (the others run on: handover)", "proc": h, "stopped": st})
    got, missing = _wait_led_again(live, led, t0, 2 * lease + 10)
    s.handover = {
        "proc": h, "keys": len(led), "missing": missing,
        "from_signal_s": sorted((t - t0) / 1e6 for t in got.values()),
        "from_stop_s": sorted((got[k] - stopping[str(k)][0]) / 1e6 for k in got
                              if str(k) in stopping),
        "stop_call_s": sorted((v[1] - v[0]) / 1e6 for v in stopping.values()),
        # From the return of that key's s3lect_stop (its release written);
        # not measured with s3lect_stop_many (one return, after every release).
        "from_release_s": sorted((got[k] - stopping[str(k)][1]) / 1e6 for k in got
                                 if str(k) in stopping) if st.get("mode") != "stop_many" else [],
        "stop_mode": st.get("mode", "threads"),
        # (key, µs after the signal) of each stop call's start and return and
        # of the new leader's ACQUIRED, in the order the keys were acquired.
        "timeline": sorted([k, stopping[str(k)][0] - t0, stopping[str(k)][1] - t0, got[k] - t0]
                           for k in got if str(k) in stopping),
    }
    # (SIGTERM'd process: its CPU until it exited, as far as /proc still had it)
    ticks1 = [_cpu_ticks(x) for x in pids]
    wall = max(1e-3, time.monotonic() - w0)
    tck = os.sysconf("SC_CLK_TCK")
    s.handover["cpu_pct"] = {("minio" if minio_pid and j == 0 else
                              f"process {j - (1 if minio_pid else 0)}"):
                             (round(100.0 * (b - a) / tck / wall, 1)
                              if a is not None and b is not None else None)
                             for j, (a, b) in enumerate(zip(ticks0, ticks1))}
    s.handover["cpu_window_s"] = round(time.monotonic() - w0, 2)
    s.handover["errors"] = [[i, k, (t - t0) / 1e6, c, n, msg] for i, k, t, c, n, msg in
                            _errors(procs, t0)][:50]
    procs[h].p.wait(timeout=30)
    # Let the new leaders' followers settle on them.
    time.sleep(2.0)
    rest = [i for i in range(len(procs)) if i != h]
    r2 = _roles([procs[i] for i in rest], keys)
    led_now = {i: r2["led_by"][j] for j, i in enumerate(rest)}
    k = max(rest, key=lambda i: len(led_now[i]))
    last = next(i for i in rest if i != k)
    led = led_now[k]
    t0 = _now_us()
    procs[k].p.kill()
    procs[k].p.wait(timeout=30)
    got, missing = _wait_led_again([procs[last]], led, t0, lease + 60)
    s.failover = {"proc": k, "keys": len(led), "missing": missing,
                  "s": sorted((t - t0) / 1e6 for t in got.values()),
                  "errors": len(_errors(procs, t0))}
    time.sleep(1.0)
    procs[last].send("stop")
    _, st = _read_stop(procs[last], 600)
    s.stops.append({"how": "stop (the last one, leading every key)", "proc": last,
                    "stopped": st})


def one_key(impl: Impl, trials: int, server, logdir: Path) -> dict:
    """The same events at one key: three processes with one peer-mode elector
    each on one key; per trial SIGTERM the leader, then kill -9 the new one."""
    import signal
    out = {"handover_from_signal_s": [], "handover_from_stop_s": [], "failover_s": [],
           "errors": []}
    env = _s3_env(server)
    for t in range(trials):
        prefix = f"s3://{server.bucket}/bench/footprint/{int(time.time() * 1000)}-one-key-{t}"
        procs = []
        try:
            for p in range(PEER_PROCS):
                procs.append(Proc(_peer_argv(impl, PEER_PROCS, PEER_PROCS, prefix,
                                             server.endpoint, p, 60000), env,
                                  logdir / f"footprint-one-key-{t}-p{p}.log", impl.nofile))
            for p in procs:
                if _fields(p.line(180, "readiness line"))["status"] != "ready":
                    raise BenchError("not ready")
            time.sleep(1.0)
            r = _roles(procs, 1)
            h = next(i for i in range(PEER_PROCS) if r["led_by"][i])
            t0 = _now_us()
            os.kill(procs[h].pid, signal.SIGTERM)
            stopping, _ = _read_stop(procs[h], 60)
            live = [p for i, p in enumerate(procs) if i != h]
            got, missing = _wait_led_again(live, [0], t0, 40)
            if missing:
                raise BenchError("not led again after SIGTERM")
            out["handover_from_signal_s"].append((got[0] - t0) / 1e6)
            out["handover_from_stop_s"].append((got[0] - stopping["0"][0]) / 1e6)
            time.sleep(2.0)
            rest = [i for i in range(PEER_PROCS) if i != h]
            r2 = _roles([procs[i] for i in rest], 1)
            k = rest[0] if r2["led_by"][0] else rest[1]
            last = rest[1] if k == rest[0] else rest[0]
            t0 = _now_us()
            procs[k].p.kill()
            got, missing = _wait_led_again([procs[last]], [0], t0, DEFAULTS.lease + 60)
            if missing:
                raise BenchError("not led again after kill -9")
            out["failover_s"].append((got[0] - t0) / 1e6)
        except BenchError as e:
            out["errors"].append(f"trial {t}: {e}")
            log(f"  footprint one key, trial {t}: {e}")
        finally:
            for p in procs:
                p.close()
    return out


def run_peer(impls: list[Impl], server, quick: bool, logdir: Path, totals: list[int] | None,
             per_key: int, events: bool = True) -> tuple[list[PeerSample], dict | None]:
    """Peer mode for this tree's library only (a baseline is thread-per-elector)."""
    impl = next((i for i in impls if type(i).__name__ == "S3lectC"), None)
    if impl is None:
        return [], None
    totals = totals or (QUICK_PEER_TOTALS if quick else PEER_TOTALS)
    out = []
    for total in totals:
        t0 = time.monotonic()
        s = measure_peer(impl, total, per_key, window_for(quick), server, logdir, events)
        if s.ok:
            log(f"  footprint peer T={total}: threads {[o['threads_max'] for o in s.outside]}, "
                f"rss {[round(m['rss_kb'] / 1024, 1) for m in s.m]} MiB, listen "
                f"{[o['listen_max'] for o in s.outside]}, peer conns "
                f"{[o['peer_max'] for o in s.outside]}, cpu/1000 {_peer_per_1000(s):.0f} µs/s, "
                f"stops {[x['stopped'].get('stop_ms') for x in s.stops]} ms "
                f"({time.monotonic() - t0:.0f}s){s.note}")
        out.append(s)
        time.sleep(2.0 + total / 1000)
    one = one_key(impl, QUICK_ONE_KEY_TRIALS if quick else ONE_KEY_TRIALS, server, logdir) \
        if events else None
    return out, one


def _peer_per_1000(s: PeerSample) -> float:
    """CPU µs per second per 1,000 electors, the three processes together."""
    cpu = sum(m["cpu_s"] for m in s.m)
    wall = max(m["wall_ms"] for m in s.m) / 1000.0
    return 1e6 * cpu / wall / (s.total / 1000.0)


def _pct(xs: list[float], p: float) -> float | None:
    from common import percentile
    return percentile(xs, p) if xs else None


def peer_targets(samples: list[PeerSample], one: dict | None) -> list[tuple[str, str, str]]:
    out = []
    ok = [s for s in samples if s.ok]
    failed = [s for s in samples if not s.ok]

    def tot(ss):
        return ", ".join(f"{x.total:,}" for x in ss)

    def row(name, good, detail):
        out.append((name, "PASS" if good else "FAIL", detail))

    if not samples:
        return out
    bad_roles = [s for s in ok if s.roles.get("end", {}).get("keys_led") != s.keys
                 or s.roles["end"]["n_two_leaders"] or s.roles["end"]["followers_wrong"]
                 or s.roles["end"]["followers_not_following"]]
    row("every key one leader, every follower naming it (across the processes)",
        ok and not failed and not bad_roles,
        (f"failed: {tot(failed)}; " if failed else "")
        + (f"out of role: {tot(bad_roles)}" if bad_roles else
           f"{len(ok)} of {len(samples)} totals measured"))
    if not ok:
        return out

    def worst(f):
        return max(((f(s, i), s, i) for s in ok for i in range(len(s.outside))),
                   key=lambda x: x[0])

    v, ws, wi = worst(lambda s, i: s.outside[i]["threads_max"] - CALLBACK_THREADS)
    row(f"≤ {MAX_THREADS} threads per process besides the {CALLBACK_THREADS} callback threads",
        v <= MAX_THREADS and not failed,
        f"most: {v + CALLBACK_THREADS} threads, {v} besides callback threads "
        f"(T = {ws.total:,}, process {wi})")
    v, ws, wi = worst(lambda s, i: s.outside[i]["listen_max"])
    row(f"≤ {MAX_LISTEN} listening sockets per process", v <= MAX_LISTEN and not failed,
        f"most: {v} (T = {ws.total:,}, process {wi})")
    v, ws, wi = worst(lambda s, i: s.outside[i]["peer_max"])
    v2, _, _ = worst(lambda s, i: s.outside[i]["peer_max"] + s.outside[i]["peer_self_max"])
    row(f"≤ {MAX_PEER_CONNS} peer connections per process (to/from the other processes' "
        "peer ports, both directions)", v <= MAX_PEER_CONNS and not failed,
        f"most: {v} (T = {ws.total:,}, process {wi}); with the connections of followers to "
        f"their own process's listener (both ends counted): {v2}")
    lim = {s.nofile for s in samples}
    row(f"works under ulimit -n {TARGET_NOFILE}", lim == {TARGET_NOFILE} and not failed
        and not bad_roles, f"every process ran with RLIMIT_NOFILE "
        f"{', '.join(str(x) for x in sorted(lim))}")
    top = max(ok, key=lambda s: s.total)
    rss = max(m["rss_kb"] for m in top.m) / 1024
    row(f"RSS ≤ {MAX_RSS_MIB_PEER} MiB per process (T = {top.total:,})",
        rss <= MAX_RSS_MIB_PEER, f"largest: {rss:.1f} MiB")
    ss = sorted((s for s in ok if s.total >= 1000), key=lambda s: s.total)
    if len(ss) >= 2:
        lo, hi = ss[0], ss[-1]
        ratio = _peer_per_1000(hi) / _peer_per_1000(lo) if _peer_per_1000(lo) > 0 else 1e9
        row(f"CPU per 1,000 electors flat within {FLAT_WITHIN:.0%} (T = {lo.total:,} to "
            f"{hi.total:,}, three processes together)", ratio <= 1 + FLAT_WITHIN,
            f"{_peer_per_1000(lo):.0f} µs/s at {lo.total:,}, {_peer_per_1000(hi):.0f} at "
            f"{hi.total:,}: ratio {ratio:.2f} ("
            + ", ".join(f"{_peer_per_1000(s):.0f} at {s.total:,}" for s in ss) + ")")
    else:
        out.append(("CPU per 1,000 electors flat", "not measured",
                    "needs two totals ≥ 1,000"))
    stops = [(s, x) for s in ok for x in s.stops if "allowance_s" in x
             and isinstance(x["stopped"].get("stop_ms"), int)]
    if stops:
        over = [(s, x) for s, x in stops
                if x["stopped"]["stop_ms"] / 1000 > STOP_BUDGET_S + x["allowance_s"]]
        ws, wx = max(stops, key=lambda p: p[1]["stopped"]["stop_ms"] / 1000 - p[1]["allowance_s"])
        row(f"stop of all electors of a process ≤ {STOP_BUDGET_S:g} s plus the release writes",
            not over, f"worst: {wx['stopped']['stop_ms'] / 1000:.2f} s with "
            f"{wx['stopped'].get('leaders')} release writes taking {wx['allowance_s']:.2f} s "
            f"(T = {ws.total:,}, {wx['how']}"
            + (f"; meanwhile the others write as many again: the store's own time for "
               f"{2 * int(wx['stopped'].get('leaders', 0))} writes is "
               f"{wx['handover_writes_s']:.2f} s" if wx.get("handover_writes_s") else "")
            + ")"
            + ("; over: " + ", ".join(f"T = {s.total:,} ({x['how']})" for s, x in over)
               if over else ""))
    ev = [s for s in ok if s.handover]
    if ev:
        bad = []
        detail = []
        for s in ev:
            h = s.handover
            p99 = _pct(h["from_signal_s"], 99)
            if h["missing"] or p99 is None or p99 > HANDOVER_P99_S:
                bad.append(s)
            fr = h.get("from_release_s", [])
            detail.append(f"T = {s.total:,}: {h['keys']} keys, p50 "
                          f"{_pct(h['from_signal_s'], 50) or 0:.3f} s, p99 {p99 or 0:.3f} s"
                          + (f" (from that key's release written: p50 {_pct(fr, 50):.3f} s, "
                             f"p99 {_pct(fr, 99):.3f} s)" if fr else "")
                          + (f", {len(h['missing'])} not led again" if h["missing"] else ""))
        if one and one["handover_from_signal_s"]:
            detail.append(f"one key: p50 {_pct(one['handover_from_signal_s'], 50):.3f} s, "
                          f"p99 {_pct(one['handover_from_signal_s'], 99):.3f} s "
                          f"({len(one['handover_from_signal_s'])} trials)")
        row(f"SIGTERM of one process: each key it led handed over, p99 ≤ {HANDOVER_P99_S:g} s "
            "from the signal", not bad, "; ".join(detail))
        # The same, judged beside what the store itself needs: a handover of N
        # keys is 2N conditional writes (N releases, N successors' writes);
        # the time MinIO takes for 2N writes straight from 16 threads, on its
        # own, is a floor no implementation can go under.
        bad2, detail2 = [], []
        for s in ev:
            h = s.handover
            p99 = _pct(h["from_signal_s"], 99)
            hw = next((x.get("handover_writes_s") for x in s.stops
                       if x["how"].startswith("SIGTERM")), None)
            if hw is None:
                continue
            if h["missing"] or p99 is None or p99 > HANDOVER_P99_S + hw:
                bad2.append(s)
            detail2.append(f"T = {s.total:,}: p99 {p99 or 0:.3f} s, the store's time for "
                           f"{2 * h['keys']} writes {hw:.2f} s")
        if detail2:
            row(f"SIGTERM of one process: handover p99 ≤ {HANDOVER_P99_S:g} s plus the store's own "
                "time for the handover's writes (2 a key)", not bad2, "; ".join(detail2))
        bad = []
        detail = []
        lim_s = DEFAULTS.lease + KILL_SLACK_S
        for s in ev:
            f = s.failover
            if not f:
                bad.append(s)
                continue
            mx = max(f["s"]) if f["s"] else None
            if f["missing"] or mx is None or mx > lim_s:
                bad.append(s)
            detail.append(f"T = {s.total:,}: {f['keys']} keys, p50 {_pct(f['s'], 50) or 0:.2f} s, "
                          f"p99 {_pct(f['s'], 99) or 0:.2f} s, max {mx or 0:.2f} s"
                          + (f", {len(f['missing'])} not led again" if f["missing"] else ""))
        if one and one["failover_s"]:
            detail.append(f"one key: p50 {_pct(one['failover_s'], 50):.2f} s, max "
                          f"{max(one['failover_s']):.2f} s ({len(one['failover_s'])} trials)")
        row(f"kill -9 of one process: every key it led led again within lease + "
            f"{KILL_SLACK_S:g} s = {lim_s:g} s", not bad, "; ".join(detail))
    return out


def peer_report(samples: list[PeerSample], one: dict | None, per_key: int) -> tuple[str, str]:
    def f(x, fmt="{:.1f}"):
        return "–" if x is None else fmt.format(x)

    tg = peer_targets(samples, one)
    ttable = md_table(["target (issue 28 item 2)", "result"],
                      [[n, f"**{v}**: {d}"] for n, v, d in tg])
    rows, rows2, rows3 = [], [], []
    for s in samples:
        if not s.ok:
            rows.append([f"{s.total:,}", "–", *["–"] * 11, f"**failed**:{s.note}"])
            continue
        for i, (m, o) in enumerate(zip(s.m, s.outside)):
            rows.append([f"{s.total:,}", i, m["count"], s.nofile, o["threads_max"],
                         o["threads_max"] - CALLBACK_THREADS, o["listen_max"], o["peer_max"],
                         o["peer_self_max"], o["s3_conns_max"], o["fds_max"],
                         f"{m['rss_kb'] / 1024:.1f}",
                         f"{100.0 * m['cpu_s'] / (m['wall_ms'] / 1000):.2f}",
                         s.note.strip() if i == 0 else ""])
        r = s.roles["end"]
        rows2.append([f"{s.total:,}", s.keys, f"{_peer_per_1000(s):.0f}", f(s.minio_cpu_pct),
                      f"{r['keys_led']}/{s.keys}", r["n_two_leaders"],
                      f"{r['followers_ok']}/{s.total - s.keys}",
                      " / ".join(str(len(x)) for x in r["led_by"]),
                      f"{max(int(x['start_ms']) for x in s.ready) / 1000:.1f}"])
        for x in s.stops:
            st = x["stopped"]
            rows3.append([f"{s.total:,}", x["proc"], x["how"], st.get("count", "–"),
                          st.get("leaders", "–"),
                          f(st["stop_ms"] / 1000 if "stop_ms" in st else None, "{:.2f}"),
                          f(x.get("allowance_s"), "{:.2f}")])
    table = md_table(["T", "process", "electors", "fd limit", "threads",
                      "threads besides callback threads", "listening sockets",
                      "peer conns (other processes)", "peer conns (own listener, both ends)",
                      "TCP conns to MinIO", "open fds", "RSS MiB", "CPU % of one core",
                      "note"], rows)
    table2 = md_table(["T", "keys", "CPU µs/s per 1,000 electors (3 processes)",
                       "MinIO CPU %", "keys with one leader", "keys with two leaders",
                       "followers naming it", "keys led by process 0 / 1 / 2",
                       "all settled after s"], rows2)
    table3 = md_table(["T", "process", "how", "electors", "leaders (release writes)",
                       "stop all s", "release writes alone s"], rows3)
    ev_rows = []
    for s in samples:
        h, fo = s.handover, s.failover
        if h:
            ev_rows.append([f"{s.total:,}", "SIGTERM (handover), from the signal", h["keys"],
                            f(_pct(h["from_signal_s"], 50), "{:.3f}"),
                            f(_pct(h["from_signal_s"], 99), "{:.3f}"),
                            f(max(h["from_signal_s"]) if h["from_signal_s"] else None, "{:.3f}"),
                            len(h["missing"])])
            ev_rows.append([f"{s.total:,}", "SIGTERM (handover), from that key's s3lect_stop",
                            h["keys"], f(_pct(h["from_stop_s"], 50), "{:.3f}"),
                            f(_pct(h["from_stop_s"], 99), "{:.3f}"),
                            f(max(h["from_stop_s"]) if h["from_stop_s"] else None, "{:.3f}"),
                            "–"])
            fr = h.get("from_release_s", [])
            if fr:
                ev_rows.append([f"{s.total:,}", "SIGTERM (handover), from the return of that "
                                "key's s3lect_stop (release written)", h["keys"],
                                f(_pct(fr, 50), "{:.3f}"), f(_pct(fr, 99), "{:.3f}"),
                                f(max(fr) if fr else None, "{:.3f}"), "–"])
            ev_rows.append([f"{s.total:,}", "(stop calls of the leaders: their duration)"
                            + (" (one s3lect_stop_many call)"
                               if h.get("stop_mode") == "stop_many" else ""),
                            h["keys"], f(_pct(h["stop_call_s"], 50), "{:.3f}"),
                            f(_pct(h["stop_call_s"], 99), "{:.3f}"),
                            f(max(h["stop_call_s"]) if h["stop_call_s"] else None, "{:.3f}"),
                            "–"])
        if fo:
            ev_rows.append([f"{s.total:,}", "kill -9 (failover)", fo["keys"],
                            f(_pct(fo["s"], 50), "{:.2f}"), f(_pct(fo["s"], 99), "{:.2f}"),
                            f(max(fo["s"]) if fo["s"] else None, "{:.2f}"),
                            len(fo["missing"])])
    if one:
        for name, k, fmt in (("SIGTERM (handover), from the signal", "handover_from_signal_s",
                              "{:.3f}"),
                             ("SIGTERM (handover), from that key's s3lect_stop",
                              "handover_from_stop_s", "{:.3f}"),
                             ("kill -9 (failover)", "failover_s", "{:.2f}")):
            xs = one[k]
            ev_rows.append([f"one key, {len(xs)} trials", name, 1, f(_pct(xs, 50), fmt),
                            f(_pct(xs, 99), fmt), f(max(xs) if xs else None, fmt),
                            len(one["errors"])])
    table4 = md_table(["T", "event", "keys", "p50 s", "p99 s", "max s", "not led again"],
                      ev_rows) if ev_rows else "(no events measured)"
    cpu_lines = [f"- T = {s.total:,}: over {s.handover['cpu_window_s']:g} s from the signal: "
                 + ", ".join(f"{k} {v:g} %" for k, v in s.handover["cpu_pct"].items()
                             if v is not None)
                 for s in samples if s.handover.get("cpu_pct")]
    if cpu_lines:
        table4 += ("\n\nCPU (% of one core) from the signal until every key was led again "
                   "(the SIGTERM'd process: until it exited):\n\n" + "\n".join(cpu_lines))
    totals = ", ".join(f"{s.total:,}" for s in samples)
    window = next((s.m[0]["wall_ms"] / 1000 for s in samples if s.ok), 0)
    body = f"""## Peer mode: T electors over {PEER_PROCS} processes (issue 28 item 2)

T electors in zero-config peer mode (`S3LECT_OPT_PEER_MODE` on, no
certificates) split over {PEER_PROCS} processes on T / {per_key} keys of MinIO:
process p runs the electors p, p + {PEER_PROCS}, p + {2 * PEER_PROCS}, … of key i / {per_key}, so the
{per_key} electors of a key sit in all {PEER_PROCS} processes and most followers watch a
leader in another process (batched follower checks). Default timings. T =
{totals}; window {window:.0f} s, the {PEER_PROCS} processes at once. Every process under
`ulimit -n {TARGET_NOFILE}`.

### Targets

{ttable}

### Per process

{table}

### Across the processes

{table2}

### Stop

{table3}

### Handover and failover per key

{table4}

- **threads**: most seen in /proc/PID/status samples (every {SAMPLE_EVERY_S:.0f} s and at
  the end of the window); "besides callback threads" subtracts the runtime's
  {CALLBACK_THREADS} callback threads (default `callback_threads`; more are added
  only while every one is held by a slow callback, which the bench's one
  callback, storing a time, never is). The count still includes the bench's
  main thread.
- **listening sockets**: TCP sockets of the process in state LISTEN.
  **peer conns**: ESTABLISHED TCP sockets of the process whose local port is
  its listening port (inbound) or whose remote port is a listening port of one
  of the three processes (outbound); "other processes" leaves out the
  connections whose two ends are both in this process (a follower checking a
  leader of its own process through its own listener), shown beside.
  Sockets matched by inode between /proc/PID/fd and /proc/net/tcp{{,6}}.
- **CPU µs/s per 1,000 electors**: the three processes' user + system time
  over the window (getrusage in each), per second of window and per 1,000 of
  the T electors. Two cores shared with other work: CPU numbers are noisy.
- **keys with one leader / followers naming it**: after the window, every
  process lists the keys its electors lead and whom its followers name; the
  bench merges the three lists.
- **Handover**: the process leading most keys gets SIGTERM; it stops its
  followers, then its leaders, each with one `s3lect_stop_many` call (a
  library without it: from {STOP_THREADS} threads calling `s3lect_stop`;
  the "stopped" line says which), each leader writing its release record. For
  every key it led: the time from the signal (and from the stop call of its
  leader) until an elector in another process ran its ACQUIRED callback
  (CLOCK_MONOTONIC, shared by the processes). With `s3lect_stop_many` "from
  the return of that key's stop" is from the return of the one call, after
  every release was written. **Failover**: 2 s later
  the live process leading most keys gets SIGKILL; for every key it led, the
  time until the last process acquired it. Then the last process is stopped
  ("stop"). **One key**: the same two events with three processes of one
  elector each on one key, {ONE_KEY_TRIALS} trials (fresh processes per trial).
- **stop all**: as above; the allowance is the time of as many PUTs straight
  to MinIO from {STOP_THREADS} Python threads (on an idle MinIO: during a
  SIGTERM the other two processes are taking the released keys over at the
  same time).
"""
    sum_rows = [[f"{s.total:,}", *(["failed"] + ["–"] * 6 if not s.ok else [
        max(o["threads_max"] for o in s.outside),
        max(o["listen_max"] for o in s.outside), max(o["peer_max"] for o in s.outside),
        f"{max(m['rss_kb'] for m in s.m) / 1024:.1f}", f"{_peer_per_1000(s):.0f}",
        f"{s.roles['end']['keys_led']}/{s.keys}",
        f(_pct(s.handover.get("from_signal_s", []), 99), "{:.3f}")])] for s in samples]
    summary = md_table(["T (3 processes)", "threads", "listen", "peer conns", "RSS MiB",
                        "CPU µs/s per 1,000", "keys led", "handover p99 s"], sum_rows)
    return body, summary + "\n\n" + ttable

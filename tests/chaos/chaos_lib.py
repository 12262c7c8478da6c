# SPDX-License-Identifier: Apache-2.0
"""Machinery of the chaos tests: a fault-injecting TCP proxy and `s3lect run`
nodes that can be killed, paused and partitioned. The lock stores the
five-node run covers (Backend) are tests/harness/backends.py's.

Everything here binds to 127.0.0.1 only, and every loop is bounded.
"""

from __future__ import annotations

import os
import random
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

# The stores' backends moved to tests/harness/backends.py (issue 40 item 1).
from harness import cli  # noqa: E402
from harness.backends import BACKENDS, SLOWDOWN_RESPONSE, Backend  # noqa: E402,F401
# A process tree from /proc (harness/freeze.py); the tests import both from here too.
from harness.freeze import freeze, thaw  # noqa: E402
from harness.freeze import pid_gone, tree_below as descendants  # noqa: E402,F401

LEADER_CMD = Path(__file__).resolve().parent / "leader_cmd.py"
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
# Only the wall clock moves (CLOCK_BOOTTIME, the library's lease clock, is
# not faked by libfaketime 0.9.10 anyway). FAKETIME_FORCE_MONOTONIC_FIX=0:
# libfaketime's "monotonic fix", which it turns on by itself for the glibc
# here, makes its pthread_cond_timedwait wrapper return at once for
# CLOCK_MONOTONIC condition variables, so the election thread re-evaluated
# in a loop (a whole core per node since the engine waits on
# CLOCK_MONOTONIC; same decisions, just more often). Without the fix the
# waits are exact and a node is idle. Faking monotonic too would be worse:
# timed waits run late by the offset, renewals miss their deadline.
FAKETIME_ENV = {"FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_FORCE_MONOTONIC_FIX": "0"}


_PRECONDITION_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
                      b"<Code>PreconditionFailed</Code><Message>At least one of the pre-conditions "
                      b"you specified did not hold</Message><RequestId>chaos-proxy</RequestId>"
                      b"</Error>")
PRECONDITION_RESPONSE = (b"HTTP/1.1 412 Precondition Failed\r\nContent-Type: application/xml\r\n"
                         b"Content-Length: " + str(len(_PRECONDITION_BODY)).encode() +
                         b"\r\nConnection: close\r\n\r\n" + _PRECONDITION_BODY)


_CONFLICT_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
                  b"<Code>ConditionalRequestConflict</Code>"
                  b"<Message>A conflicting conditional operation is currently in progress against "
                  b"this resource. Please try again.</Message>"
                  b"<RequestId>chaos-proxy</RequestId></Error>")
# What AWS S3 answers when conditional writes to one key race (MinIO never does).
CONFLICT_RESPONSE = (b"HTTP/1.1 409 Conflict\r\nContent-Type: application/xml\r\n"
                     b"Content-Length: " + str(len(_CONFLICT_BODY)).encode() +
                     b"\r\nConnection: close\r\n\r\n" + _CONFLICT_BODY)


def rst_close(s: socket.socket) -> None:
    """Closes s with a TCP RST (SO_LINGER 0) instead of a FIN."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


# ---------------------------------------------------------------------------
# Fault-injecting TCP proxy


class Proxy:
    """Forwards 127.0.0.1:<port> to 127.0.0.1:<upstream_port>, with faults.

    mode:    "ok"        forward
             "blackhole" a partition: accept, swallow what the client sends,
                         answer nothing (the client times out)
             "reset"     a partition that fails fast: every connection is reset
    latency: seconds added before each forwarded chunk (both directions)
    flaky:   probability that a request chunk from the client meets a fault:
             reset (RST at once), lost_response (forwarded, so the write may
             land, but the client gets an RST instead of the answer), stall
             (swallowed, no answer) or the store's "slow down" answer
             (`answer`, default S3's "503 SlowDown", counted as "slowdown";
             the request is not forwarded). answer=None (for a binary
             protocol such as PostgreSQL's) leaves the three connection faults.
    """

    MAX_CONNS = 64

    def __init__(self, name: str, upstream_port: int, seed: int,
                 http: "HttpFaults | None" = None,
                 answer: tuple[str, bytes] | None = ("slowdown", SLOWDOWN_RESPONSE)):
        self.name = name
        # (stats name, bytes) of the flaky "slow down" answer, or None
        self.answer = answer
        self._flaky_kinds = ["reset", "lost_response", "stall"] + ([answer[0]] if answer else [])
        # With `http`, connections are relayed one HTTP request at a time and
        # the request faults of `http` apply (see HttpFaults); latency and
        # flaky are ignored then, mode "blackhole" swallows each request.
        self.http = http
        # (monotonic time, method, what happened) of every request (HTTP mode)
        self.requests: list[tuple[float, str, str]] = []
        self.upstream_port = upstream_port
        self.rng = random.Random(seed)
        self.mode = "ok"
        self.latency = 0.0
        self.flaky = 0.0
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._stalled: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(64)
        self._lsock.settimeout(0.2)
        self.port = self._lsock.getsockname()[1]
        t = threading.Thread(target=self._accept_loop, name=f"proxy-{name}", daemon=True)
        t.start()
        self._threads.append(t)

    # -- control
    def set(self, mode: str | None = None, latency: float | None = None,
            flaky: float | None = None) -> None:
        with self._lock:
            if mode is not None:
                self.mode = mode
            if latency is not None:
                self.latency = latency
            if flaky is not None:
                self.flaky = flaky
        if mode in ("reset",):
            self._reset_all()

    def heal(self) -> None:
        """Back to forwarding. Connections cut by a partition are reset (their
        clients gave up long ago) so that clients reconnect."""
        was = self.mode
        self.set(mode="ok", latency=0.0, flaky=0.0)
        if was != "ok":
            self._reset_all()

    def calm(self) -> None:
        """Ends a phase of background faults: no latency, no flaky requests, and
        the connections that a stall fault left hanging are reset."""
        self.set(latency=0.0, flaky=0.0)
        with self._lock:
            stalled = [c for c in self._stalled if c in self._conns]
            self._stalled.clear()
        for c in stalled:
            rst_close(c)

    def _reset_all(self) -> None:
        with self._lock:
            conns = list(self._conns)
            self._conns.clear()
        for c in conns:
            rst_close(c)

    def close(self) -> None:
        self._closed.set()
        try:
            self._lsock.close()
        except OSError:
            pass
        self._reset_all()
        for t in self._threads:
            t.join(timeout=5)

    # -- data path
    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                mode = self.mode
                full = len(self._conns) >= self.MAX_CONNS
                self._threads = [t for t in self._threads if t.is_alive()]
            if mode == "reset" or full:
                self.stats["conn_reset" if mode == "reset" else "conn_over_limit"] += 1
                rst_close(client)
                continue
            t = threading.Thread(target=self._serve, args=(client,), daemon=True)
            with self._lock:
                self._conns.add(client)
                self._threads.append(t)
            t.start()

    def _serve(self, client: socket.socket) -> None:
        if self.http is not None:
            self._serve_http(client)
            return
        upstream = None
        graceful = False
        sel = selectors.DefaultSelector()
        try:
            self.stats["connections"] += 1
            if self.mode == "ok":
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=2)
                except OSError:
                    self.stats["upstream_refused"] += 1
                    rst_close(client)
                    return
                with self._lock:
                    self._conns.add(upstream)
            sel.register(client, selectors.EVENT_READ, "c")
            if upstream:
                sel.register(upstream, selectors.EVENT_READ, "u")
            stalled = kill_on_response = False
            # Bounded: every connection ends when a side closes, on a reset, or
            # at proxy close; the 30 s idle limit stops abandoned ones.
            idle_deadline = time.monotonic() + 30
            while not self._closed.is_set() and time.monotonic() < idle_deadline:
                events = sel.select(timeout=0.1)
                mode, latency, flaky = self.mode, self.latency, self.flaky
                if mode == "reset":
                    return
                for key, _ in events:
                    try:
                        data = key.fileobj.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    idle_deadline = time.monotonic() + 30
                    if key.data == "c":
                        if mode == "blackhole" or stalled or upstream is None:
                            self.stats["bytes_swallowed"] += len(data)
                            continue
                        if flaky and self.rng.random() < flaky:
                            kind = self.rng.choice(self._flaky_kinds)
                            self.stats[kind] += 1
                            if kind == "reset":
                                return
                            if self.answer is not None and kind == self.answer[0]:
                                client.sendall(self.answer[1])
                                client.shutdown(socket.SHUT_WR)
                                graceful = True
                                return
                            if kind == "stall":
                                stalled = True
                                with self._lock:
                                    self._stalled.add(client)
                                continue
                            kill_on_response = True
                        if latency:
                            time.sleep(latency)
                        upstream.sendall(data)
                    else:
                        if mode == "blackhole" or stalled:
                            continue
                        if kill_on_response:
                            return
                        if latency:
                            time.sleep(latency)
                        client.sendall(data)
        except OSError:
            pass
        finally:
            sel.close()
            with self._lock:
                self._conns.discard(client)
                self._stalled.discard(client)
                if upstream:
                    self._conns.discard(upstream)
            if graceful:  # let the answer arrive: FIN, not RST
                try:
                    client.close()
                except OSError:
                    pass
            else:
                rst_close(client)
            if upstream:
                rst_close(upstream)


    # -- HTTP mode: one request at a time, faults per request
    def _note(self, method: str, what: str) -> None:
        with self._lock:
            self.requests.append((time.monotonic(), method, what))
        self.stats[what] += 1

    def rate(self, t0: float, t1: float, methods: tuple[str, ...] = ("GET", "PUT")) -> float:
        """Requests per second with a method in `methods` that arrived in [t0, t1)."""
        with self._lock:
            n = sum(1 for t, m, _ in self.requests if t0 <= t < t1 and m in methods)
        return n / (t1 - t0)

    def times(self, method: str, t0: float = 0.0, t1: float = float("inf")) -> list[float]:
        with self._lock:
            return [t for t, m, _ in self.requests if m == method and t0 <= t < t1]

    def _serve_http(self, client: socket.socket) -> None:
        """Relays requests one by one (s3lect's libcurl never pipelines) and
        applies the faults of self.http to each PUT."""
        f = self.http
        assert f is not None
        upstream = None
        graceful = False
        rd_c, rd_u = _Reader(client), None
        try:
            self.stats["connections"] += 1
            # Bounded: the connection ends when a side closes, on an error, at
            # proxy close, or after 30 s without a request.
            while not self._closed.is_set():
                req = rd_c.message(idle=30, request=True, closed=self._closed)
                if req is None:
                    graceful = True  # the client closed (or went idle)
                    return
                head, raw = req
                method = head.split(b" ", 1)[0].decode("ascii", "replace")
                if self.mode != "ok":  # a partition: no answer, until it heals or 30 s
                    self._note(method, "blackholed")
                    t_end = time.monotonic() + 30
                    while self.mode != "ok" and time.monotonic() < t_end:
                        if self._closed.wait(0.05):
                            break
                    return
                lower = head.lower()
                conditional = b"\r\nif-match:" in lower or b"\r\nif-none-match:" in lower
                delay = drop = 0.0
                if method == "PUT":
                    with self._lock:
                        put_status, conflict = f.put_slowdown, f.conflict
                        delay, drop = f.put_delay, f.drop_answer
                        r1, r2 = self.rng.random(), self.rng.random()
                    if f.put_412:
                        self._note(method, "precondition412")
                        client.sendall(PRECONDITION_RESPONSE)
                        graceful = True
                        return
                    if put_status:
                        self._note(method, "slowdown")
                        client.sendall(SLOWDOWN_RESPONSE)
                        graceful = True
                        return
                    if conditional and conflict and r1 < conflict:
                        self._note(method, "conflict409")
                        client.sendall(CONFLICT_RESPONSE)
                        graceful = True
                        return
                    drop = drop and r2 < drop
                if upstream is None:
                    try:
                        upstream = socket.create_connection(("127.0.0.1", self.upstream_port),
                                                            timeout=2)
                    except OSError:
                        self._note(method, "upstream_refused")
                        return
                    upstream.settimeout(None)
                    rd_u = _Reader(upstream)
                    with self._lock:
                        self._conns.add(upstream)
                if delay:
                    # The write is held back and lands `delay` late, whether
                    # or not its sender is still waiting for the answer.
                    self._note(method, "delayed")
                    if self._closed.wait(delay):
                        return
                upstream.sendall(raw)
                resp = rd_u.message(idle=30, request=False, closed=self._closed,
                                    head_only=method == "HEAD")
                if resp is None:
                    self._note(method, "upstream_failed")
                    return
                status = resp[0].split(b" ", 2)[1].decode("ascii", "replace")
                if method == "PUT" and f.answer_delay:
                    # Applied at once, answered late (a slow store).
                    if self._closed.wait(f.answer_delay):
                        return
                if drop:
                    self._note(method, f"answer_dropped_{status}")
                    return  # RST: the sender never learns that its write landed
                self._note(method, f"forwarded_{status}")
                try:
                    client.sendall(resp[1])
                except OSError:
                    self._note(method, "client_gone")  # it timed out meanwhile
                    return
                if b"\r\nconnection: close" in resp[0].lower():
                    graceful = True
                    return
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(client)
                if upstream:
                    self._conns.discard(upstream)
            if graceful:
                try:
                    client.close()
                except OSError:
                    pass
            else:
                rst_close(client)
            if upstream:
                rst_close(upstream)


@dataclass
class HttpFaults:
    """Request faults of a Proxy in HTTP mode; change the fields any time.

    put_slowdown: every PUT is answered "503 SlowDown" and not forwarded
    conflict:     probability that a conditional PUT (If-Match/If-None-Match)
                  is answered "409 ConditionalRequestConflict" and not
                  forwarded (AWS does this when conditional writes race)
    put_delay:    seconds every PUT is held before it is forwarded: it lands
                  that late, whether its sender is still waiting or gave up
    drop_answer:  probability that the answer to a (delayed) PUT is dropped:
                  the write landed but the sender gets an RST instead
    answer_delay: seconds every PUT's answer is held: it lands at once but is
                  answered that late (a store slower than the renew deadline)
    put_412:      every PUT is answered "412 Precondition Failed" and not
                  forwarded (another writer, or a store that breaks conditions)
    """
    put_slowdown: bool = False
    conflict: float = 0.0
    put_delay: float = 0.0
    drop_answer: float = 0.0
    answer_delay: float = 0.0
    put_412: bool = False


class _Reader:
    """Reads whole HTTP/1.1 messages (head + Content-Length or chunked body)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def _fill(self, deadline: float, closed: threading.Event) -> bool:
        while not closed.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([self.sock], [], [], min(left, 0.1))
            if r:
                data = self.sock.recv(65536)
                if not data:
                    return False
                self.buf += data
                return True
        return False

    def message(self, idle: float, request: bool, closed: threading.Event,
                head_only: bool = False) -> tuple[bytes, bytes] | None:
        """(head, raw bytes of the whole message), or None on close/idle."""
        deadline = time.monotonic() + idle
        while b"\r\n\r\n" not in self.buf:
            if not self._fill(deadline, closed):
                return None
        end = self.buf.index(b"\r\n\r\n") + 4
        head = self.buf[:end]
        lower = head.lower()
        status = b"" if request else head.split(b" ", 2)[1]
        length = 0
        chunked = b"\r\ntransfer-encoding: chunked" in lower
        for line in lower.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        if head_only or status in (b"204", b"304") or status.startswith(b"1"):
            length, chunked = 0, False
        if chunked:
            pos = end
            while True:  # chunk-size CRLF data CRLF ... 0 CRLF CRLF (no trailers)
                while b"\r\n" not in self.buf[pos:]:
                    if not self._fill(deadline, closed):
                        return None
                eol = self.buf.index(b"\r\n", pos)
                size = int(self.buf[pos:eol].split(b";")[0], 16)
                pos = eol + 2 + size + 2
                while len(self.buf) < pos:
                    if not self._fill(deadline, closed):
                        return None
                if size == 0:
                    break
            total = pos
        else:
            total = end + length
            while len(self.buf) < total:
                if not self._fill(deadline, closed):
                    return None
        raw, self.buf = self.buf[:total], self.buf[total:]
        return head, raw




# ---------------------------------------------------------------------------
# s3lect run nodes


class Node:
    """One `s3lect run` process, through its own proxy, with its own wall-clock
    offset (libfaketime), whose CMD is leader_cmd.py."""

    def __init__(self, node_id: str, bin_: Path, lock: str, proxy: Proxy, env: dict[str, str],
                 timing: list[str], offset_s: float, cmd_log: Path, log_dir: Path,
                 cmd: list[str] | None = None, clock_file: Path | None = None,
                 store_args: list[str] | None = None):
        """cmd: the CMD (default leader_cmd.py CMD_LOG). clock_file: a wall
        clock that the test can step while the node runs (see step_clock).
        store_args: how s3lect reaches the store through the proxy (default
        --endpoint http://127.0.0.1:<proxy port>; [] when the lock URL itself
        names the proxy, as for postgres://)."""
        self.id = node_id
        self.store_args = (["--endpoint", f"http://127.0.0.1:{proxy.port}"]
                           if store_args is None else store_args)
        self.cmd = cmd or [sys.executable, str(LEADER_CMD), str(cmd_log)]
        self.clock_file = clock_file
        if clock_file is not None and not clock_file.exists():
            clock_file.write_text(f"{offset_s:+.3f}\n")
        self.bin = bin_
        self.lock = lock
        self.proxy = proxy
        self.base_env = env
        self.timing = timing
        self.offset_s = offset_s
        self.cmd_log = cmd_log
        self.log_dir = log_dir
        self.run: cli.Node | None = None  # the current generation's process
        self.generation = 0
        self.logs: list[Path] = []
        self.paused = False
        self.exits: list[str] = []  # unexpected exits

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.run.proc if self.run is not None else None

    @property
    def log(self) -> Path:
        return self.logs[-1]

    def step_clock(self, offset_s: float) -> None:
        """Steps this node's wall clock to real time + offset_s (needs
        clock_file). libfaketime re-reads the file at most once a second
        (FAKETIME_CACHE_DURATION=1), so the step lands within a second."""
        assert self.clock_file is not None, "the node was started without a clock file"
        tmp = self.clock_file.with_suffix(".tmp")
        tmp.write_text(f"{offset_s:+.3f}\n")
        tmp.replace(self.clock_file)  # atomic: libfaketime never reads half a line
        self.offset_s = offset_s

    def env(self) -> dict[str, str]:
        env = dict(self.base_env)
        if self.offset_s or self.clock_file is not None:
            env["LD_PRELOAD"] = str(FAKETIME_LIB)
            if self.clock_file is not None:
                # A file rather than FAKETIME (which takes priority over it),
                # so that the test can step the clock during the run.
                env["FAKETIME_TIMESTAMP_FILE"] = str(self.clock_file)
                env["FAKETIME_CACHE_DURATION"] = "1"
            else:
                env["FAKETIME"] = f"{self.offset_s:+.3f}"
            env.update(FAKETIME_ENV)
            # With an ASan build the sanitizer runtime must otherwise come first.
            env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
        return env

    def start(self) -> None:
        """A new generation: a harness Node (its own log, this node's
        environment, CMD without the libfaketime variables)."""
        assert self.proc is None or self.proc.poll() is not None
        self.generation += 1
        log = self.log_dir / f"{self.id}.{self.generation}.log"
        self.logs.append(log)
        if self.run is not None:
            self.run.close_files()
        self.run = cli.Node(self.bin, self.log_dir, self.lock, self.id, self.env(),
                            [*self.store_args, *self.timing], kill_timeout=None, log=log,
                            stdin=subprocess.DEVNULL,
                            cmd=["env", "-u", "LD_PRELOAD", "-u", "FAKETIME", "-u",
                                 "FAKETIME_TIMESTAMP_FILE", "-u", "FAKETIME_CACHE_DURATION",
                                 *self.cmd])
        self.paused = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.logs and self.log.exists() else ""

    def cmd_pids(self) -> list[int]:
        """Every live process below s3lect, at any depth: the supervising
        shim of `s3lect run` (if any), CMD and CMD's descendants."""
        if not self.alive():
            return []
        return descendants(self.proc.pid)

    def kill9(self) -> dict[int, float]:
        """kill -9 of s3lect alone: everything below it must die too (the
        shim's and CMD's PR_SET_PDEATHSIG). Returns {pid: monotonic time it
        was seen dead} for every process that was below s3lect."""
        assert self.proc is not None
        tree = self.cmd_pids()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        dead: dict[int, float] = {}
        deadline = time.monotonic() + 5
        while len(dead) < len(tree) and time.monotonic() < deadline:
            for p in tree:
                if p not in dead and pid_gone(p):
                    dead[p] = time.monotonic()
            time.sleep(0.005)
        for p in tree:  # PDEATHSIG failed: kill it ourselves, the test reports it
            if p not in dead:
                try:
                    os.kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        return dead

    def pause(self) -> tuple[list[int], float]:
        """SIGSTOP of s3lect and every process below it: a paused machine.
        Returns (the pids below s3lect, monotonic time all were stopped)."""
        assert self.proc is not None
        stopped = freeze(self.proc.pid)[1:]
        self.paused = True
        return stopped, time.monotonic()

    def resume(self, cmds: list[int]) -> float:
        """SIGCONT of the node (the processes below s3lect first); returns the
        monotonic time just before."""
        assert self.proc is not None
        t = time.monotonic()
        thaw([self.proc.pid, *cmds])
        self.paused = False
        return t

    def terminate(self, timeout: float = 20.0) -> float | None:
        """SIGTERM (graceful: CMD stopped, lock released); returns the time it
        took, or None if s3lect did not exit in time (then it is killed)."""
        if not self.alive():
            return 0.0
        if self.paused:
            self.resume(self.cmd_pids())
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
            return time.monotonic() - t0
        except subprocess.TimeoutExpired:
            self.stop()
            return None

    def stop(self) -> None:
        """Whatever state: nothing of this node runs afterwards."""
        if self.proc is not None:
            if self.alive():  # s3lect stopped first: it cannot start anything new
                try:
                    os.kill(self.proc.pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
            for _ in range(20):
                tree = descendants(self.proc.pid) if self.alive() else []
                if not tree:
                    break
                for p in tree:
                    for sig in (signal.SIGKILL, signal.SIGCONT):
                        try:
                            os.kill(p, sig)
                        except (ProcessLookupError, PermissionError):
                            pass
                time.sleep(0.01)
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    os.killpg(self.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.run.close_files()


# ---------------------------------------------------------------------------
# When does each process that logs to a CMD log stop?


class DeathWatch:
    """Follows a CMD log (leader_cmd.py, leader_tree.py) and polls every
    process that logged `start` but no `end` yet; records the monotonic time
    each was first seen gone (an upper bound of its end, at most `interval`
    late). Processes killed by SIGKILL log no end line: this is their end."""

    def __init__(self, cmd_log: Path, interval: float = 0.01):
        self.cmd_log = cmd_log
        self.interval = interval
        self.deaths: dict[int, float] = {}
        self.started: dict[int, tuple[str, int]] = {}  # pid -> (node, root)
        self._ended: set[int] = set()
        self._off = 0
        self._buf = b""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="deathwatch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            with open(self.cmd_log, "rb") as f:
                f.seek(self._off)
                data = f.read()
        except FileNotFoundError:
            return
        self._off += len(data)
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            parts = line.decode(errors="replace").split()
            if len(parts) < 5:
                continue
            pid = int(parts[3])
            root = int(parts[5]) if len(parts) > 5 else pid
            if parts[0] == "start":
                self.started[pid] = (parts[2], root)
            elif parts[0] == "end":
                self._ended.add(pid)

    def poll(self) -> None:
        with self._lock:
            self._read()
            now = time.monotonic()
            for pid in self.started:
                if pid not in self._ended and pid not in self.deaths and pid_gone(pid):
                    self.deaths[pid] = now

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def running(self, node: str | None = None) -> list[int]:
        """Pids that started and have neither ended nor been seen gone."""
        self.poll()
        with self._lock:
            return [p for p, (n, _) in self.started.items()
                    if (node is None or n == node) and p not in self._ended
                    and p not in self.deaths]

    def kill_all(self, timeout: float = 5.0) -> list[int]:
        """SIGKILLs every logged process still running (descendants that
        escaped their s3lect); returns their pids."""
        left = self.running()
        for pid in left:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    ours = b"leader_" in f.read()  # never a reused pid of someone else
            except OSError:
                continue
            if ours:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        while self.running() and time.monotonic() < deadline:
            time.sleep(self.interval)
        return left

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.poll()

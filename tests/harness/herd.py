# SPDX-License-Identifier: Apache-2.0
"""Many electors in one process through store outages (tests/s3/test_herd.py,
bench/run herd).

OutageProxy sits between the electors and MinIO on 127.0.0.1 and counts, per
second, what reaches it: HTTP requests (request heads, bodies skipped by
Content-Length) and connections. Its modes:

- up: forwards both ways untouched;
- down: every connection, open or new, is reset at once (SO_LINGER 0): the
  store "refuses" connections, and each attempt is counted;
- (a pause is MinIO's own SIGSTOP: the proxy forwards to a store that accepts
  nothing and answers nothing.)

run_outages() starts tests/c/herd (K electors on N locks), waits until every
lock has a leader, measures the steady rate, then runs each outage and what
follows it, and returns the counts and the herd's view of its leaders.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from harness.countproxy import RequestHeads


class OutageProxy:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.mode = "up"
        # By tenth of a monotonic second.
        self.requests: Counter[int] = Counter()
        self.gets: Counter[int] = Counter()  # of which GET (store reads)
        self.get_paths: list[tuple[float, str]] = []  # (monotonic s, path), the first 500,000
        self.connects: Counter[int] = Counter()
        self.resets: Counter[int] = Counter()  # connections reset (down, or no upstream)
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the outage proxy did not start")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode: str) -> None:
        def apply():
            self.mode = mode
            if mode == "down":
                for w in list(self._writers):
                    self._reset(w)
        self._loop.call_soon_threadsafe(apply)

    def close(self) -> None:
        def stop():
            self._server.close()
            for w in list(self._writers):
                self._reset(w)
            self._loop.stop()
        self._loop.call_soon_threadsafe(stop)
        self._thread.join(10)

    def rates(self, t0: float, t1: float, gets: bool = False) -> list[tuple[float, int]]:
        """(t, requests + reset connections in [t, t + 1 s)) for every t from t0
        in steps of 0.1 s with t + 1 ≤ t1: every one-second window. gets: GET
        requests only (reads of the store)."""
        b0, b1 = round(t0 * 10), round(t1 * 10)
        n = [self.gets[b] if gets else self.requests[b] + self.resets[b] for b in range(b0, b1)]
        return [(b0 / 10 + i / 10, sum(n[i:i + 10])) for i in range(0, len(n) - 9)]

    # -- the event loop thread --

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0, backlog=1024))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    @staticmethod
    def _reset(w: asyncio.StreamWriter) -> None:
        s = w.get_extra_info("socket")
        try:
            if s is not None:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        w.transport.abort()

    async def _client(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        now = int(time.monotonic() * 10)
        self.connects[now] += 1
        if self.mode == "down":
            self.resets[now] += 1
            self._reset(w)
            return
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            self.resets[now] += 1
            self._reset(w)
            return
        self._writers |= {w, uw}
        try:
            await asyncio.gather(self._up(r, uw), self._down(ur, w))
        finally:
            for x in (w, uw):
                self._writers.discard(x)
                x.transport.abort()

    async def _down(self, ur: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await ur.read(65536):
                w.write(data)
                await w.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        w.transport.abort()

    async def _up(self, r: asyncio.StreamReader, uw: asyncio.StreamWriter) -> None:
        heads = RequestHeads()
        try:
            while data := await r.read(65536):
                uw.write(data)
                for method, path, _ in heads.feed(data):
                    tenth = int(time.monotonic() * 10)
                    self.requests[tenth] += 1
                    if method == "GET":
                        self.gets[tenth] += 1
                        if len(self.get_paths) < 500000:
                            self.get_paths.append((time.monotonic(), path))
                await uw.drain()
        except (OSError, ValueError):
            pass
        uw.transport.abort()


@dataclass
class Outage:
    kind: str  # "down" (connections reset at the proxy) or "pause" (MinIO SIGSTOPped)
    seconds: float
    start: float = 0.0
    end: float = 0.0
    # Requests + connection attempts in any one second (a sliding window).
    during_max: int = 0  # within the outage
    during_mean: float = 0.0
    after_max: int = 0  # within the window after it
    after_first: int = 0  # in its first second
    relead_s: float | None = None  # from the end until every lock had a leader again
    led_at_end: int = 0  # locks with a leader when the store came back
    per_second: list[tuple[float, int]] = field(default_factory=list)


@dataclass
class HerdRun:
    keys: int
    per_key: int
    timings: tuple[int, int, int, int, int]
    steady: float = 0.0  # requests per second, mean over the steady window
    steady_window: tuple[float, float] = (0.0, 0.0)
    settle_s: float = 0.0
    most_leaders: int = 0  # most leaders of one lock at any sample
    outages: list[Outage] = field(default_factory=list)
    stop_ms: int | None = None
    exit_code: int | None = None
    stderr: str = ""


def run_outages(herd_bin, server, env: dict[str, str], prefix: str, keys: int, per_key: int,
                timings: tuple[int, int, int, int, int], steady_s: float,
                outages: list[tuple[str, float]], after_s: float, settle_timeout: float,
                log=print) -> HerdRun:
    """timings: lease, renew, deadline, frequent, infrequent (ms). Every loop
    is bounded; the proxy and the herd process are stopped on any failure."""
    proxy = OutageProxy(server.port)
    res = HerdRun(keys, per_key, timings)
    samples: list[tuple[float, int, int]] = []  # (monotonic s, locks led, most leaders)
    lock = threading.Lock()
    env = dict(env, AWS_ENDPOINT_URL_S3=proxy.endpoint)
    total = settle_timeout + steady_s + sum(s + after_s for _, s in outages) + 120
    proc = subprocess.Popen([str(herd_bin), prefix, str(keys), str(per_key), str(int(total)),
                             *(str(t) for t in timings)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    paused = False

    def reader():
        for line in proc.stdout:
            parts = line.split()
            if parts and parts[0] == "S":
                with lock:
                    samples.append((int(parts[1]) / 1000.0, int(parts[2]), int(parts[3])))
            elif parts and parts[0] == "D":
                res.stop_ms = int(parts[1])

    th = threading.Thread(target=reader, daemon=True)
    th.start()

    def last() -> tuple[float, int, int]:
        with lock:
            return samples[-1] if samples else (0.0, 0, 0)

    def wait_all_led(since: float, timeout: float) -> float | None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and proc.poll() is None:
            with lock:
                hit = next((t for t, led, _ in samples if t >= since and led == keys), None)
            if hit is not None:
                return hit
            time.sleep(0.1)
        return None

    try:
        t0 = time.monotonic()
        hit = wait_all_led(t0, settle_timeout)
        if hit is None:
            raise RuntimeError(f"herd: not every lock had a leader within {settle_timeout} s "
                               f"(last sample {last()}); stderr: {proc.stderr.read() if proc.poll() is not None else ''}")
        res.settle_s = hit - t0
        # Past the start's spread and first reads: the steady state.
        time.sleep(max(2.0, timings[4] / 1000.0))
        s0 = time.monotonic()
        time.sleep(steady_s)
        s1 = time.monotonic()
        res.steady_window = (s0, s1)
        b = proxy.rates(s0, s1)
        res.steady = sum(b[i][1] for i in range(0, len(b), 10)) / max(1, len(b[::10]))
        log(f"herd: steady {res.steady:.1f} requests/s over {len(b[::10])} s")
        for kind, secs in outages:
            o = Outage(kind, secs)
            o.start = time.monotonic()
            if kind == "down":
                proxy.set_mode("down")
            else:
                server.pause()
                paused = True
            time.sleep(secs)
            o.end = time.monotonic()
            o.led_at_end = last()[1]
            if kind == "down":
                proxy.set_mode("up")
            else:
                server.resume()
                paused = False
            hit = wait_all_led(o.end, after_s)
            o.relead_s = None if hit is None else max(0.0, hit - o.end)
            rest = o.end + after_s - time.monotonic()
            if rest > 0:
                time.sleep(rest)
            during = proxy.rates(o.start, o.end)
            after = proxy.rates(o.end, o.end + after_s)
            o.during_max = max((n for _, n in during), default=0)
            o.during_mean = sum(n for _, n in during[::10]) / max(1, len(during[::10]))
            o.after_max = max((n for _, n in after), default=0)
            o.after_first = after[0][1] if after else 0
            o.per_second = [(round(s - o.start, 1), n)
                            for s, n in proxy.rates(o.start - 5, o.end + after_s)[::10]]
            log(f"herd: {kind} {secs:g} s: during max {o.during_max}/s mean "
                f"{o.during_mean:.1f}/s; after max {o.after_max}/s; every lock led again "
                f"{'never' if o.relead_s is None else f'{o.relead_s:.1f} s'} after")
            res.outages.append(o)
        proc.stdin.close()
        res.exit_code = proc.wait(timeout=120)
        th.join(10)
        res.stderr = proc.stderr.read()[-20000:]
    finally:
        if paused:
            server.resume()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proxy.close()
    with lock:
        res.most_leaders = max((m for _, _, m in samples), default=0)
    return res

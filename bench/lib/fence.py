# SPDX-License-Identifier: Apache-2.0
"""bench/run fence (issue 41 item 6): what a fenced write costs on MinIO
against a plain PUT, in requests and latency.

Three rows, each a series of writes of the same 1 KiB body to one object,
one at a time, timed one by one:

  plain        an unconditional PUT over one keep-alive HTTP/1.1 connection,
               each request one write with TCP_NODELAY (signed with
               tests/harness/s3client.py's SigV4, the answer read by
               http.client)
  fenced       s3lect_fenced_put of libs3lect.so (the build's, in this
               process through ctypes), the fence from a fence token; steady
               state: the object's last writer was this fence
  after other  the same fenced put, but before each one another writer
               (a plain PUT on a connection of its own, not timed, not
               counted) has replaced the object: the fence's If-Match fails
               (412), it reads the object again (GET) and writes (PUT)

The library and the plain client reach MinIO through a counting proxy
(tests/harness/countproxy.py) that counts the requests of each write by
method and condition and the answers by status, so the table gives requests
per write next to the latencies. The first write of each row (the object's
creation, connections being opened) is a warm-up, not counted.
"""

from __future__ import annotations

import ctypes
import http.client
import re
import secrets
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from common import BenchError, md_table, percentile
from harness.countproxy import CountingProxy
from harness.s3client import S3Client

BODY = b"s3lect fence bench " * 54  # 1026 bytes: text, so no answer looks like a status line
TRIALS, QUICK_TRIALS = 300, 30

# s3lect.h's s3lect_option values used here
OPT_LOCK, OPT_SERVER_ID, OPT_ENDPOINT, OPT_REGION, OPT_PATH_STYLE = 1, 2, 13, 14, 15
OPT_ACCESS_KEY_ID, OPT_SECRET_ACCESS_KEY = 17, 18


class StatusCountingProxy(CountingProxy):
    """Counts requests as 'METHOD' plus the condition they carry (If-Match,
    If-None-Match), and answers by status ('412', ...)."""

    _STATUS = re.compile(rb"HTTP/1\.[01] (\d{3}) ")

    def key(self, method: str, path: str, headers: dict[str, str]) -> str:
        cond = [h for h in ("if-match", "if-none-match") if h in headers]
        return method + "".join(f" {c}" for c in cond)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        # (the answers' direction: upstream to client; every status line
        # starts a chunk or follows a body that holds none)
        try:
            while not self._stop.is_set():
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    for m in self._STATUS.finditer(data):
                        self.counts[m.group(1).decode()] += 1
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._shut(src, dst)


@dataclass
class Row:
    name: str
    what: str
    ms: list[float] = field(default_factory=list)
    requests: Counter = field(default_factory=Counter)  # over all timed writes
    errors: list[str] = field(default_factory=list)

    def per_write(self) -> str:
        n = len(self.ms) or 1
        return ", ".join(f"{k} {v / n:g}" for k, v in sorted(self.requests.items()))


class Lib:
    """The fenced-write calls of the build's libs3lect.so."""

    def __init__(self, build_dir: Path):
        so = build_dir / "libs3lect" / "libs3lect.so"
        if not so.exists():
            raise BenchError(f"{so} does not exist: build the library first")
        lib = self.lib = ctypes.CDLL(str(so))
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        lib.s3lect_config_new.restype = vp
        lib.s3lect_config_free.argtypes = [vp]
        lib.s3lect_config_set_str.argtypes = [vp, ctypes.c_int, cp]
        lib.s3lect_config_set_bool.argtypes = [vp, ctypes.c_int, ctypes.c_int]
        lib.s3lect_fence_new_token.argtypes = [vp, cp, ctypes.POINTER(vp)]
        lib.s3lect_fence_free.argtypes = [vp]
        lib.s3lect_fenced_put.argtypes = [vp, cp, cp, ctypes.c_size_t]
        lib.s3lect_fence_errmsg.argtypes = [vp, cp, ctypes.c_size_t]
        lib.s3lect_fence_errmsg.restype = ctypes.c_size_t
        lib.s3lect_strerror.restype = cp

    def fence(self, server, endpoint: str, lock: str, token: str) -> ctypes.c_void_p:
        lib = self.lib
        cfg = lib.s3lect_config_new()
        try:
            for opt, val in ((OPT_LOCK, lock), (OPT_SERVER_ID, "bench-fence"),
                             (OPT_ENDPOINT, endpoint), (OPT_REGION, server.region),
                             (OPT_ACCESS_KEY_ID, server.access_key),
                             (OPT_SECRET_ACCESS_KEY, server.secret_key)):
                rc = lib.s3lect_config_set_str(cfg, opt, val.encode())
                if rc != 0:
                    raise BenchError(f"s3lect_config_set_str({opt}): {self.strerror(rc)}")
            lib.s3lect_config_set_bool(cfg, OPT_PATH_STYLE, 1)
            f = ctypes.c_void_p()
            rc = lib.s3lect_fence_new_token(cfg, token.encode(), ctypes.byref(f))
            if rc != 0:
                raise BenchError(f"s3lect_fence_new_token: {self.strerror(rc)}")
            return f
        finally:
            lib.s3lect_config_free(cfg)

    def put(self, f, url: str, data: bytes) -> str | None:
        """None once stored, else the error."""
        rc = self.lib.s3lect_fenced_put(f, url.encode(), data, len(data))
        if rc == 0:
            return None
        buf = ctypes.create_string_buffer(600)
        self.lib.s3lect_fence_errmsg(f, buf, len(buf))
        return f"{self.strerror(rc)}: {buf.value.decode(errors='replace')}"

    def strerror(self, rc: int) -> str:
        return self.lib.s3lect_strerror(rc).decode()


def token(term: int, holder: str, lock: str) -> str:
    import base64

    def b64(s: str) -> str:
        return base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")
    return f"s3lect-fence.1.{term}.{b64(holder)}.{b64(lock)}"


class PlainPut:
    """Unconditional PUTs over one keep-alive connection, each request sent
    in one write with TCP_NODELAY, as libcurl sends a small PUT
    (http.client writes the head and the body apart, and the second write
    then waits at the proxy for the first one's delayed ACK: 40 ms)."""

    def __init__(self, server, port: int):
        self.signer = S3Client(f"http://127.0.0.1:{port}", server.access_key, server.secret_key,
                               server.region)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def put(self, bucket: str, key: str, data: bytes) -> str | None:
        path = f"/{bucket}/{key}"
        headers = {"content-length": str(len(data))}
        self.signer._sign("PUT", path, headers, data)
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.sock.sendall(f"PUT {path} HTTP/1.1\r\n{head}\r\n".encode() + data)
        r = http.client.HTTPResponse(self.sock)
        r.begin()
        r.read()
        return None if r.status == 200 else f"HTTP {r.status}"

    def close(self) -> None:
        self.sock.close()


def _series(row: Row, proxy: StatusCountingProxy, n: int, write, before=None) -> None:
    for i in range(n + 1):  # the first: warm-up
        if before is not None:
            before()
        c0 = proxy.snapshot()
        t0 = time.perf_counter()
        err = write()
        dt = (time.perf_counter() - t0) * 1000
        if err:
            row.errors.append(err)
            continue
        if i:
            row.ms.append(dt)
            row.requests.update(proxy.snapshot() - c0)


def run(build_dir: Path, server, quick: bool, trials: int | None) -> list[Row]:
    n = trials or (QUICK_TRIALS if quick else TRIALS)
    lib = Lib(build_dir)
    bucket = server.bucket
    tag = secrets.token_hex(4)
    lock = f"s3://{bucket}/bench-fence/{tag}-lock.json"
    proxy = StatusCountingProxy("127.0.0.1", server.port)
    rows = [Row("plain", "PUT, unconditional (one keep-alive connection)"),
            Row("fenced", "s3lect_fenced_put, steady state (its own write last)"),
            Row("after other", "s3lect_fenced_put after another writer's PUT")]
    plain = PlainPut(server, proxy.port)
    other = PlainPut(server, server.port)  # the other writer: direct, not counted
    fence = lib.fence(server, proxy.endpoint, lock, token(1, "bench-fence", lock))
    try:
        key_p, key_f, key_o = (f"bench-fence/{tag}-{x}.txt" for x in ("plain", "fenced", "other"))
        _series(rows[0], proxy, n, lambda: plain.put(bucket, key_p, BODY))
        url_f = f"s3://{bucket}/{key_f}"
        _series(rows[1], proxy, n, lambda: lib.put(fence, url_f, BODY))
        url_o = f"s3://{bucket}/{key_o}"
        _series(rows[2], proxy, n, lambda: lib.put(fence, url_o, BODY),
                before=lambda: other.put(bucket, key_o, b"another writer's bytes"))
    finally:
        lib.lib.s3lect_fence_free(fence)
        plain.close()
        other.close()
        proxy.close()
    return rows


def report(rows: list[Row], n: int) -> tuple[str, str, list[str]]:
    """(markdown body, summary, problems)."""
    by = {r.name: r for r in rows}
    table, problems = [], []
    base = percentile(by["plain"].ms, 50) if by["plain"].ms else None
    for r in rows:
        if not r.ms:
            table.append([r.name, r.what, 0, "-", "-", "-", "-", "; ".join(r.errors[:1])])
            problems.append(f"fence {r.name}: no write succeeded ({'; '.join(r.errors[:1])})")
            continue
        p50, p99 = percentile(r.ms, 50), percentile(r.ms, 99)
        table.append([r.name, r.what, len(r.ms), f"{p50:.2f}", f"{p99:.2f}",
                      f"{p50 / base:.2f}" if base else "-", r.per_write(),
                      f"{len(r.errors)} failed" if r.errors else ""])
    expect = [("fenced", {"PUT if-match": 1.0, "200": 1.0}, "1 PUT (If-Match) a write"),
              ("after other", {"PUT if-match": 2.0, "GET": 1.0, "412": 1.0, "200": 2.0},
               "a 412, then GET and PUT: 2 PUTs and 1 GET a write")]
    checks = []
    for name, want, text in expect:
        r = by[name]
        got = {k: v / len(r.ms) for k, v in r.requests.items()} if r.ms else {}
        ok = got == want
        checks.append(f"- [{'ok' if ok else 'FAIL'}] {name}: {text}; measured {r.per_write()}")
        if not ok:
            problems.append(f"fence {name}: expected {text}, measured {r.per_write()}")
    f, o = by["fenced"], by["after other"]
    ratios = []
    if base and f.ms and o.ms:
        ratios = [f"fenced / plain p50 {percentile(f.ms, 50) / base:.2f}, p99 "
                  f"{percentile(f.ms, 99) / percentile(by['plain'].ms, 99):.2f}; after other / "
                  f"plain p50 {percentile(o.ms, 50) / base:.2f}, p99 "
                  f"{percentile(o.ms, 99) / percentile(by['plain'].ms, 99):.2f}"]
    body = ("One object per row, written one write at a time, each timed from the call to "
            f"its return; {n} timed writes a row after one warm-up write. Requests and answers "
            "counted at a proxy in front of MinIO (answers by status, per write). "
            "The plain row's client is Python (keep-alive, one write a request, TCP_NODELAY, "
            "SigV4 signed in Python), the fenced rows' libs3lect through ctypes (libcurl, keep-alive): the "
            "difference between the rows is the fence's work plus that of the clients.\n\n"
            + md_table(["row", "what", "writes", "p50 ms", "p99 ms", "p50 / plain p50",
                        "requests and answers per write", "notes"], table)
            + "\n\n" + "\n".join(checks) + "\n\n" + ("Ratios: " + ratios[0] + ".\n\n" if ratios
                                                     else "")
            + "## Per trial (ms, in order)\n\n"
            + "\n\n".join(f"**{r.name}**: " + " ".join(f"{x:.2f}" for x in r.ms) for r in rows)
            + "\n")
    summary = "\n".join(
        [f"  {r.name:12s} p50 {percentile(r.ms, 50):6.2f} ms  p99 {percentile(r.ms, 99):6.2f} ms"
         f"  per write: {r.per_write()}" for r in rows if r.ms] + ["  " + c for c in checks])
    return body, summary, problems

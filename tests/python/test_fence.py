# SPDX-License-Identifier: Apache-2.0
"""Fenced writes from Python (docs/fencing.md), on the file store: a
leader's writes, a deposed leader's refused (tests/c/test_fence.c's
scenario through the binding)."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import pytest

import s3lect


def test_fenced_writes_of_a_leader_and_a_deposed_one(
    tmp_path: Path, electors: Callable[..., s3lect.Elector]
) -> None:
    lock, obj, other = (f"file://{tmp_path}/{n}.json" for n in ("lock", "state", "other"))
    a = electors(lock, server_id="node-a")
    with a.fence() as fa:
        with pytest.raises(s3lect.NotLeaderError) as ei:
            fa.put(obj, b"x")
        assert ei.value.code == s3lect._core.S3LECT_ENOTLEADER
        assert isinstance(ei.value, s3lect.StateError)
        assert not (tmp_path / "state.json").exists(), "refused before anything was sent"
        with pytest.raises(s3lect.NotFoundError) as nf:
            fa.get(obj)
        assert nf.value.version is None and nf.value.term == 0
        assert a.fence_token() is None, "no token while not leading"

        a.start()
        assert a.wait_for_leadership(timeout=10), "a leads"
        ta = a.term
        tok_a = a.fence_token()
        assert tok_a and tok_a.startswith(f"s3lect-fence.1.{ta}.")

        # Binary-safe bytes in and out, in a's term.
        data = b"v1\x00\xff\n"
        fa.put(obj, data)
        got = fa.get(obj)
        assert isinstance(got, s3lect.FencedObject)
        assert got.body == data and got.term == ta and got.version
        fa.cas(obj, bytearray(b"v2"), got.version)
        with pytest.raises(s3lect.PreconditionFailed):
            fa.cas(obj, b"v3", got.version)
        assert fa.get(obj).body == b"v2", "the stale cas wrote nothing"
        fa.cas(other, b"new", None)
        with pytest.raises(s3lect.PreconditionFailed):
            fa.cas(other, b"new", None)

        # The zombie: a process that still holds a's token after b took over.
        with s3lect.Fence.from_token(tok_a, request_timeout=5) as fz:
            zv = fz.get(obj).version
            a.stop(release=False)  # as a frozen host
            b = electors(lock, server_id="node-b").start()
            assert b.wait_for_leadership(timeout=15), "b leads"
            assert b.term > ta, "in a newer term"
            with b.fence() as fb:
                fb.put(obj, b"v2")  # the very bytes a wrote last
                with pytest.raises(s3lect.FencedError) as fe:
                    fz.cas(obj, b"zombie", zv)
                assert fe.value.code == s3lect._core.S3LECT_EFENCED
                assert "newer than ours" in str(fe.value)
                with pytest.raises(s3lect.FencedError):
                    fz.put(obj, b"zombie")
                got = fb.get(obj)
                assert got.body == b"v2" and got.term == b.term, "b's bytes are there"

                # A delete, then the zombie's re-create.
                fb.delete(other)
                with pytest.raises(s3lect.NotFoundError) as nf:
                    fb.get(other)
                assert nf.value.version and nf.value.term == b.term, "the tombstone's"
                with pytest.raises(s3lect.FencedError):
                    fz.cas(other, b"again", None)
                with pytest.raises(s3lect.FencedError):
                    fz.put(other, b"again")
                fb.cas(other, b"back", nf.value.version)
                assert fb.get(other).body == b"back"

        with pytest.raises(s3lect.NotLeaderError):
            fa.put(obj, b"late")  # a's own fence after a stopped
        assert a.fence_token() is None


def test_fence_arguments_and_close(tmp_path: Path) -> None:
    with pytest.raises(s3lect.ConfigError):
        s3lect.Fence.from_token("not a token")
    with pytest.raises(s3lect.ConfigError):
        s3lect.Fence.from_token("s3lect-fence.1.3.YQ.cw", no_such_setting=1)
    f = s3lect.Fence.from_token("s3lect-fence.1.3.YQ.cw", endpoint_url="http://127.0.0.1:1")
    url = f"file://{tmp_path}/x.json"
    with pytest.raises(TypeError):
        f.put(url, "text is not bytes")  # type: ignore[arg-type]
    f.put(url, b"one")
    assert f.get(url) == (b"one", f.get(url).version, 3)
    f.close()
    f.close()
    with pytest.raises(s3lect.StateError):
        f.get(url)


class _S3Handler(http.server.BaseHTTPRequestHandler):
    """A minimal S3 in Python: one object per path, ETags, If-Match and
    If-None-Match. It runs on a Python thread, so it can only answer while
    the fenced call that waits for it does not hold the GIL."""

    objects: Dict[str, Tuple[bytes, str]] = {}

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes = b"", etag: str = "") -> None:
        self.send_response(code)
        if etag:
            self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        got = self.objects.get(self.path)
        if got is None:
            self._send(404, b"<Error><Code>NoSuchKey</Code></Error>")
        else:
            self._send(200, got[0], got[1])

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        cur = self.objects.get(self.path)
        if self.headers.get("If-None-Match") == "*" and cur is not None:
            return self._send(412)
        im = self.headers.get("If-Match")
        if im is not None and (cur is None or cur[1] != im):
            return self._send(412 if cur is not None else 404)
        etag = '"%d"' % (len(self.objects) * 1000 + len(body) + (1 if cur else 0))
        self.objects[self.path] = (body, etag)
        self._send(200, b"", etag)


def test_fenced_calls_release_the_gil() -> None:
    # The store answers from a Python thread of this process: each call
    # succeeds only if the binding released the GIL while it waited.
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _S3Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        with s3lect.Fence.from_token(
            "s3lect-fence.1.3.YQ.cw", endpoint=f"http://127.0.0.1:{srv.server_port}",
            region="us-east-1", access_key_id="test", secret_access_key="test-secret",
            request_timeout=2,
        ) as f:
            url = "s3://bucket/fenced.json"
            f.put(url, b"one")
            got = f.get(url)
            assert got.body == b"one" and got.term == 3
            f.cas(url, b"two", got.version)
            assert f.get(url).body == b"two"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)

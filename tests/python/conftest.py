# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the Python binding's suites.

The MinIO server comes from the shared ``minio`` fixture of tests/conftest.py
(it reuses a server announced by S3LECT_TEST_ENDPOINT, e.g. under
scripts/with-minio, or starts one on a free loopback port).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

import s3lect

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from pyutil import FAST  # noqa: E402


@pytest.fixture
def s3_settings(minio: Any) -> Dict[str, Any]:
    """Elector keyword arguments that reach the test MinIO."""
    return dict(
        endpoint=minio.endpoint,
        access_key_id=minio.access_key,
        secret_access_key=minio.secret_key,
        region="us-east-1",
    )


@pytest.fixture
def s3_lock(minio: Any, request: pytest.FixtureRequest) -> str:
    """A lock URL no other test uses."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    return f"s3://{minio.bucket}/py/{name}-{uuid.uuid4().hex[:8]}.json"


@pytest.fixture
def child_env(minio: Any) -> Dict[str, str]:
    """Environment for child processes: MinIO settings and short timings."""
    env = dict(os.environ)
    env.update(
        AWS_ENDPOINT_URL=minio.endpoint,
        AWS_ACCESS_KEY_ID=minio.access_key,
        AWS_SECRET_ACCESS_KEY=minio.secret_key,
        AWS_REGION="us-east-1",
        PYTHONUNBUFFERED="1",
    )
    for k, v in FAST.items():
        env["S3LECT_" + k.upper()] = f"{v}s"
    return env


@pytest.fixture
def electors() -> Iterator[Callable[..., s3lect.Elector]]:
    """Factory of Electors that are all stopped when the test ends, pass or fail."""
    made: List[s3lect.Elector] = []

    def make(lock: str, **kw: Any) -> s3lect.Elector:
        settings = dict(FAST)
        settings.update(kw)
        el = s3lect.Elector(lock, **settings)
        made.append(el)
        return el

    yield make
    for el in made:
        try:
            el.stop()
        except Exception:  # noqa: BLE001 - stop the rest
            pass
    made.clear()
    gc.collect()


# ---------------------------------------------------------------------------
# Child processes running tests/python/elector_proc.py
# ---------------------------------------------------------------------------


class Proc:
    """A child elector process; its JSON-lines events are collected by a thread."""

    def __init__(self, args: List[str], env: Dict[str, str]) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(HERE / "elector_proc.py"), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.events: List[Dict[str, Any]] = []
        self.stderr: List[str] = []
        self._cv = threading.Condition()
        self._t_out = threading.Thread(target=self._read_out, daemon=True)
        self._t_err = threading.Thread(target=self._read_err, daemon=True)
        self._t_out.start()
        self._t_err.start()

    def _read_out(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"event": "garbage", "line": line}
            with self._cv:
                self.events.append(ev)
                self._cv.notify_all()

    def _read_err(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.stderr.append(line)

    @property
    def pid(self) -> int:
        return self.p.pid

    def find(self, kind: str) -> List[Dict[str, Any]]:
        with self._cv:
            return [e for e in self.events if e.get("event") == kind]

    def wait_event(self, kind: str, timeout: float, pred: Callable[[Dict[str, Any]], bool] = lambda e: True) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for e in self.events:
                    if e.get("event") == kind and pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(
                        f"process {self.pid} did not report {kind!r} within {timeout:g} s; "
                        f"events: {self.events}; stderr: {''.join(self.stderr)[-2000:]}"
                    )
                self._cv.wait(left)

    def is_leading(self) -> bool:
        """True if the last acquired/lost event is 'acquired'."""
        with self._cv:
            for e in reversed(self.events):
                if e.get("event") in ("acquired", "lost"):
                    return e["event"] == "acquired"
        return False

    def signal(self, sig: int) -> None:
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Waits for exit, then for the output readers to reach end of file."""
        rc = self.p.wait(timeout=timeout)
        self._t_out.join(timeout=10)
        self._t_err.join(timeout=10)
        return rc

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture
def spawn(child_env: Dict[str, str]) -> Iterator[Callable[..., Proc]]:
    """Starts elector_proc.py children; all are killed at the end of the test."""
    procs: List[Proc] = []

    def start(*args: str, env: Optional[Dict[str, str]] = None) -> Proc:
        p = Proc(list(args), env or child_env)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
        p.kill()

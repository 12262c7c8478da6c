# SPDX-License-Identifier: Apache-2.0
"""client-go's leader election as a process, for the k8s:// interop test
(tests/interop/test_k8s_clientgo.py): tests/interop/k8s_clientgo, a tiny Go
program running k8s.io/client-go/tools/leaderelection's RunOrDie with a
LeaseLock (client-go v0.37.2, from the Go module proxy), built once into
${S3LECT_CACHE:-~/.cache/s3lect}/k8s-clientgo/<hash>/, the hash covering its
go.mod, go.sum and main.go and the Go toolchain's version.

    try:
        elector = clientgo.build_elector()
    except clientgo.Unavailable as e:   # no Go toolchain: skip, saying why
        pytest.skip(str(e))

A program that does not build raises BuildError (a failure, not a skip).

Elector runs one: its stdout lines are "SECONDS.MICROS EVENT WHO" (LEADING,
STOPPING: its leadership's context ended, STOPPED, NEW-LEADER, EXIT), each
stamped by the elector's own wall clock (time.time() here is the same
clock); events() parses them, leading() says whether its last word was
LEADING and it has not been stopped.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.cli import Proc  # noqa: E402
else:
    from .cli import Proc

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "tests" / "interop" / "k8s_clientgo"
FILES = ("go.mod", "go.sum", "main.go")


class Unavailable(Exception):
    """No Go toolchain: the reason is the message."""


class BuildError(Exception):
    """The program did not build (the Go output is the message)."""


def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise Unavailable("the go command is not on PATH (Go >= 1.26 builds the client-go "
                          "elector, tests/interop/k8s_clientgo)")
    return go


def fingerprint(go: str) -> str:
    h = hashlib.sha256()
    for name in FILES:
        h.update(f"{name}\n".encode())
        h.update((PROGRAM / name).read_bytes())
    ver = subprocess.run([go, "version"], capture_output=True, text=True, timeout=60).stdout
    h.update(ver.encode())
    return h.hexdigest()[:20]


def cache_root() -> Path:
    base = os.environ.get("S3LECT_CACHE") or str(Path.home() / ".cache" / "s3lect")
    return Path(base) / "k8s-clientgo"


def build_elector(timeout: float = 900) -> Path:
    """Path of the built elector (built once per program and toolchain;
    about 2 minutes cold on 2 cores, with the modules downloaded)."""
    go = _go()
    out_dir = cache_root() / fingerprint(go)
    binary = out_dir / "k8s-clientgo-elector"
    if os.access(binary, os.X_OK):
        return binary
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix="build-") as tmp:
        env = dict(os.environ, GOWORK="off", GOFLAGS="-mod=readonly", CGO_ENABLED="0")
        cmd = [go, "build", "-trimpath", "-o", str(Path(tmp) / "elector"), "."]
        try:
            r = subprocess.run(cmd, cwd=PROGRAM, env=env, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BuildError(f"go build of {PROGRAM} timed out after {timeout:g} s") from None
        if r.returncode != 0:
            raise BuildError(f"building the client-go elector ({PROGRAM}) failed "
                             f"(exit {r.returncode}):\n{r.stderr.strip()[-3000:]}")
        os.replace(Path(tmp) / "elector", binary)
    return binary


class Elector(Proc):
    """One client-go elector process on NAMESPACE/NAME with a kubeconfig.
    Timings in seconds (client-go's LeaseDuration, RenewDeadline,
    RetryPeriod); ReleaseOnCancel true. Its stderr (klog) goes to the log."""

    kind = "client-go"

    def __init__(self, binary: Path, kubeconfig: Path, namespace: str, name: str, node_id: str,
                 log: Path, lease: float = 6, renew_deadline: float = 4, retry: float = 1,
                 extra: list[str] | None = None):
        self.id = node_id
        self.lease, self.renew_deadline, self.retry = lease, renew_deadline, retry
        self.lines: list[tuple[float, str, str]] = []
        self.end: float | None = None  # wall clock of its kill or SIGTERM
        self._lock = threading.Lock()
        argv = [binary, "-kubeconfig", kubeconfig, "-namespace", namespace, "-name", name,
                "-id", node_id, "-lease-duration", f"{lease}s",
                "-renew-deadline", f"{renew_deadline}s", "-retry-period", f"{retry}s",
                *(extra or [])]
        super().__init__(argv, log, dict(os.environ), stdout=subprocess.PIPE, stderr=log)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            parts = raw.decode(errors="replace").split()
            if len(parts) >= 2:
                try:
                    t = float(parts[0])
                except ValueError:
                    continue
                with self._lock:
                    self.lines.append((t, parts[1], parts[2] if len(parts) > 2 else ""))

    def events(self) -> list[tuple[float, str, str]]:
        with self._lock:
            return list(self.lines)

    def leading(self) -> bool:
        ev = [e for e in self.events() if e[1] in ("LEADING", "STOPPING", "STOPPED")]
        return self.alive() and self.end is None and bool(ev) and ev[-1][1] == "LEADING"

    def leading_since(self, t0: float) -> float | None:
        """When it started leading at or after wall time t0."""
        return next((t for t, ev, _ in self.events() if ev == "LEADING" and t >= t0), None)

    def intervals(self, now: float) -> list[tuple[float, float]]:
        """(start, end) wall times of its leaderships, by its own lines; one
        still open ends at its kill or SIGTERM, else now."""
        out, start = [], None
        for t, ev, _ in self.events():
            if ev == "LEADING" and start is None:
                start = t
            elif ev in ("STOPPING", "STOPPED", "EXIT") and start is not None:
                out.append((start, t))
                start = None
        if start is not None:
            out.append((start, self.end if self.end is not None else now))
        return out

    def kill9(self) -> None:
        self.end = time.time()
        super().kill9()

    def sigterm(self, wait: float = 15) -> int:
        """SIGTERM; its exit status (0: released and exited cleanly). Its
        leadership ends when it says STOPPING (before the release)."""
        self.terminate()
        rc = self.wait(wait)
        self.end = time.time()
        return rc

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._reader.join(timeout=5)

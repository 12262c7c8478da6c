# SPDX-License-Identifier: Apache-2.0
"""A fully static Go binary (issue 19): the Go binding's migration example
built with cgo and the build tag s3lect_system against the self-contained
build (libs3lect, libcurl, BoringSSL and cJSON as static archives) and `-extldflags -static`, so it runs
with no libs3lect, libcurl or OpenSSL installed: two copies elect a leader
on a lock directory and hand over on SIGTERM.

Needs the self-contained build: S3LECT_SC_BUILD_DIR names it (the
`selfcontained` suite of scripts/test builds it and sets it).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from harness.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
SC = os.environ.get("S3LECT_SC_BUILD_DIR", "")
GO = shutil.which("go")

pytestmark = pytest.mark.skipif(
    not SC or not (Path(SC) / "selfcontained-prefix").exists() or not GO,
    reason="needs the self-contained build (S3LECT_SC_BUILD_DIR, made by "
           "scripts/build-selfcontained; scripts/test selfcontained sets it) and Go")


def wait_for(cond, timeout: float, what: str, logs):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n" +
                         "\n".join(f"--- {p}\n{p.read_text()[-2000:]}" for p in logs))


def test_static_go_binary_runs_an_election(tmp_path):
    prefix = (Path(SC) / "selfcontained-prefix").read_text().strip()
    exe = tmp_path / "migrate"
    env = dict(os.environ, CGO_ENABLED="1",
               PKG_CONFIG_LIBDIR=f"{SC}/libs3lect/uninstalled:{prefix}/lib/pkgconfig",
               CGO_LDFLAGS="-lpthread")
    env.pop("PKG_CONFIG_PATH", None)
    # -a: the build cache must not hand back objects linked for the system build.
    # -tags s3lect_system: libs3lect from the self-contained build's archives
    # (pkg-config s3lect), not the package's bundled C sources, which link
    # the system's OpenSSL rather than the self-contained BoringSSL.
    r = subprocess.run([GO, "build", "-a", "-tags", "s3lect_system",
                        "-ldflags", "-linkmode external -extldflags -static",
                        "-o", str(exe), "./examples/migrate"], cwd=ROOT / "bindings/go",
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, timeout=30)
    assert "not a dynamic executable" in (ldd.stdout + ldd.stderr), ldd.stdout
    info = subprocess.run(["file", str(exe)], capture_output=True, text=True, timeout=30).stdout \
        if shutil.which("file") else "statically linked"
    assert "statically linked" in info, info

    lockdir = tmp_path / "locks"
    lockdir.mkdir()
    procs, logs = [], []
    try:
        for nid in ("n1", "n2"):
            log = tmp_path / f"{nid}.log"
            logs.append(log)
            procs.append(subprocess.Popen(
                [str(exe), "-id", nid, "-lock-dir", str(lockdir),
                 "-addr", f"127.0.0.1:{free_port()}"],
                stdout=open(log, "w"), stderr=subprocess.STDOUT, env={"PATH": "/usr/bin:/bin"},
                start_new_session=True))
            if nid == "n1":
                wait_for(lambda: "controller: acquired leadership" in logs[0].read_text(), 20,
                         "n1 leads", logs)
        time.sleep(1)
        assert "controller: acquired leadership" not in logs[1].read_text()
        procs[0].send_signal(signal.SIGTERM)
        assert procs[0].wait(timeout=20) == 0, logs[0].read_text()[-2000:]
        wait_for(lambda: "controller: acquired leadership" in logs[1].read_text(), 20,
                 "n2 takes over", logs)
        procs[1].send_signal(signal.SIGINT)
        assert procs[1].wait(timeout=20) == 0, logs[1].read_text()[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)

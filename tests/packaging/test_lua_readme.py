# SPDX-License-Identifier: Apache-2.0
"""The Lua README's first example as written (issue 39 item 8): started twice
on one file lock, one leads; Ctrl-C (SIGINT) to the leader stops its elector
(the lock is released, so the other leads at once, not a lease later) and
exits 0 without a stack trace. Lua 5.4 and LuaJIT, with the modules the lua
suite built."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_LUA = Path(os.environ.get("S3LECT_LUA_BUILD_DIR", ROOT / "build-lua"))
LUAS = [("lua5.4", BUILD_LUA / "lua" / "5.4"), ("luajit", BUILD_LUA / "lua" / "jit")]


def example() -> str:
    text = (ROOT / "bindings" / "lua" / "README.md").read_text()
    m = re.search(r"```lua\n(.*?)```", text, re.S)
    assert m, "the Lua README has no lua example"
    return m.group(1)


def _wait(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.parametrize("lua,moddir", LUAS, ids=[x for x, _ in LUAS])
def test_readme_example_leads_and_stops_on_ctrl_c(lua, moddir, tmp_path):
    exe = shutil.which(lua)
    if not exe:
        pytest.skip(f"{lua} is not installed (scripts/deps installs it)")
    if not (moddir / "s3lect.so").exists():
        pytest.skip(f"{moddir}/s3lect.so is not built: the lua suite builds it "
                    "(scripts/test lua)")
    code = example()
    assert '"/tmp/s3lect-demo.lock"' in code
    prog = tmp_path / "leader.lua"
    prog.write_text(code.replace('"/tmp/s3lect-demo.lock"', f'"{tmp_path}/demo.lock"'))
    env = dict(os.environ, LUA_CPATH=f"{moddir}/?.so")
    procs, outs = {}, {}
    try:
        for n in ("a", "b"):
            outs[n] = tmp_path / f"{n}.out"
            procs[n] = subprocess.Popen([exe, str(prog), n], stdout=open(outs[n], "w"),
                                        stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
            if n == "a":
                _wait(lambda: "leading, term" in outs["a"].read_text(), 20, "a to lead")
        _wait(lambda: "leader is now\ta" in outs["b"].read_text(), 20, "b to follow a")
        t0 = time.monotonic()
        procs["a"].send_signal(signal.SIGINT)  # what Ctrl-C sends
        rc = procs["a"].wait(timeout=15)
        out = outs["a"].read_text()
        assert rc == 0, f"exit {rc} after Ctrl-C:\n{out}"
        assert "traceback" not in out and "interrupted" not in out, out
        _wait(lambda: "leading, term" in outs["b"].read_text(), 5, "b to lead")
        # Released on the way out: far sooner than the example's 6 s lease.
        assert time.monotonic() - t0 < 4, time.monotonic() - t0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)

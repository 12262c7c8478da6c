# SPDX-License-Identifier: Apache-2.0
"""The Lua rock: `luarocks lint` passes (licence, source URL) and `luarocks
make` builds and installs the module into a fresh tree from which Lua 5.4
loads it and reports the library's version (issue 19)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROCKSPEC = ROOT / "bindings/lua/s3lect-scm-1.rockspec"
LUAROCKS = shutil.which("luarocks")
LUA = shutil.which("lua5.4")

pytestmark = pytest.mark.skipif(
    not LUAROCKS or not LUA,
    reason="luarocks or lua5.4 is missing: run scripts/deps (Debian packages luarocks, lua5.4)")


def version() -> str:
    h = (ROOT / "libs3lect/include/s3lect.h").read_text()
    return re.search(r'#define S3LECT_VERSION_STRING "([^"]+)"', h).group(1)


def test_rockspec_lints_clean():
    r = subprocess.run([LUAROCKS, "lint", str(ROCKSPEC)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and not r.stderr.strip(), (r.stdout, r.stderr)
    spec = ROCKSPEC.read_text()
    assert 'license = "Apache-2.0"' in spec and "source = {" in spec


def test_luarocks_make_installs_a_working_module(tmp_path):
    tree = tmp_path / "tree"
    r = subprocess.run([LUAROCKS, "--lua-version", "5.4", "--tree", str(tree), "make",
                        str(ROCKSPEC)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    mods = list(tree.glob("lib/lua/5.4/s3lect.so"))
    assert mods, f"no module installed: {list(tree.rglob('*.so'))}"
    env = dict(os.environ, LUA_CPATH=f"{tree}/lib/lua/5.4/?.so", LUA_PATH="")
    r = subprocess.run([LUA, "-e", 'local s = require "s3lect"; print(s.version())'],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split()[0] == version(), (r.stdout, r.stderr)
    # The build left nothing in the checkout.
    st = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "bindings/lua"],
                        capture_output=True, text=True, timeout=60)
    assert "??" not in st.stdout, st.stdout

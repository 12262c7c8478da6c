# SPDX-License-Identifier: Apache-2.0
"""The Lua rock: `luarocks lint` passes (licence, source URL), `luarocks
make` builds and installs the module into a fresh tree from which Lua 5.4
loads it and reports the library's version (issue 19), and the source rock
of a release, packed and installed from the .src.rock alone into a fresh
tree, builds the C core itself and elects (issue 29)."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import time
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


# Two electors on MinIO and two on a file lock, driven from this thread as a
# host loop would: exactly one leader of each pair, never two; the leader's
# stop() hands over to the other.
ELECT_LUA = r"""
local s3lect = require "s3lect"
local S3 = { endpoint = arg[1], region = "us-east-1", access_key_id = arg[2],
             secret_access_key = arg[3] }
local FAST = { lease_timeout = 3, renew_interval = 0.5, renew_deadline = 2.5,
               frequent_interval = 0.3, infrequent_interval = 0.6 }
local function new(lock, id, extra)
  local o = { lock = lock, id = id }
  for k, v in pairs(FAST) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  local el = assert(s3lect.new(o))
  assert(el:start())
  return el
end
local function drive(els, cond, what)
  local deadline = s3lect.monotonic() + 30
  while true do
    local fds = {}
    for i, el in ipairs(els) do fds[i] = el:fd() end
    s3lect.poll_fd(fds, 100)
    local leaders = 0
    for _, el in ipairs(els) do
      assert(el:dispatch(0))
      if el:is_leader() then leaders = leaders + 1 end
    end
    assert(leaders <= 1, "two leaders at once: " .. what)
    if cond() then return end
    assert(s3lect.monotonic() < deadline, "timed out waiting for " .. what)
  end
end
local function elect(kind, lock, extra)
  local a, b = new(lock, kind .. "-a", extra), new(lock, kind .. "-b", extra)
  local function one() return (a:is_leader() and 1 or 0) + (b:is_leader() and 1 or 0) == 1 end
  drive({ a, b }, one, kind .. ": one leader")
  local leader, other = a, b
  if b:is_leader() then leader, other = b, a end
  local term = leader:term()
  leader:stop()
  drive({ other }, function() return other:is_leader() end, kind .. ": the handover")
  assert(other:term() > term, "the new term is not higher")
  print(kind, "elected and handed over, terms", term, other:term())
  a:close(); b:close()
end
elect("s3", "s3://" .. arg[4] .. "/luarocks/" .. arg[5] .. ".json", S3)
elect("file", "file://" .. arg[6])
print("version", s3lect.version())
"""


def test_packed_source_rock_installs_into_a_fresh_tree_and_elects(tmp_path, minio):
    """Issue 29 item 4: the source rock of a release (a rockspec naming a
    source archive, scripts/lua-rockspec) packed with `luarocks pack`, then
    `luarocks install`ed from that .src.rock alone into a fresh tree: it
    builds the C core itself, with nothing of the checkout or of a build tree
    in reach (a bare environment, another directory, the archive deleted),
    and the module elects on S3 and on a file lock."""
    installed = [str(p) for d in ("/usr/lib", "/usr/local/lib", "/usr/lib64", "/usr/local/include",
                                  "/usr/include") if Path(d).is_dir()
                 for p in Path(d).rglob("*s3lect*")]
    assert not installed, f"a libs3lect is installed here ({installed[:5]}): this test proves " \
                          "the rock needs none, so it needs a machine without one"
    src, pack, home, work = (tmp_path / n for n in ("src", "pack", "home", "work"))
    for d in (pack, home, work):
        d.mkdir()
    ver = version()
    archive = src / f"s3lect-{ver}.tar.gz"
    r = subprocess.run([str(ROOT / "scripts/lua-rockspec"), "--make-archive", "--archive",
                        str(archive), "--out", str(src)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    spec = src / f"s3lect-{ver}-1.rockspec"
    assert r.stdout.strip() == str(spec) and f'url = "{archive.as_uri()}"' in spec.read_text()
    # What a user's machine has: the system's PATH, a HOME of its own, nothing
    # of this checkout's environment (S3LECT_*, LUA_*, PKG_CONFIG_*, CMAKE_*,
    # LD_LIBRARY_PATH, compilers' caches...).
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(work),
           "LANG": "C.UTF-8"}
    r = subprocess.run([LUAROCKS, "lint", str(spec)], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and not r.stderr.strip(), (r.stdout, r.stderr)
    r = subprocess.run([LUAROCKS, "pack", str(spec)], cwd=pack, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rocks = list(pack.glob("*.src.rock"))
    assert [p.name for p in rocks] == [f"s3lect-{ver}-1.src.rock"], r.stdout
    shutil.rmtree(src)  # the .src.rock alone: its file:// source is gone

    tree = tmp_path / "tree"
    start = time.monotonic()
    r = subprocess.run([LUAROCKS, "--lua-version", "5.4", "--tree", str(tree), "install",
                        str(rocks[0])], cwd=work, env=env, capture_output=True, text=True,
                       timeout=1200)
    took = time.monotonic() - start
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    print(f"luarocks install of the .src.rock (the C core compiled once): {took:.0f} s")
    assert str(ROOT) not in out, "the build reached into the checkout"
    mod = tree / "lib/lua/5.4/s3lect.so"
    assert mod.is_file(), list(tree.rglob("*"))
    ldd = subprocess.run(["ldd", str(mod)], capture_output=True, text=True, timeout=60).stdout
    assert "s3lect" not in ldd and "libcurl" in ldd, ldd  # the core is inside; libcurl the system's

    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    script = tmp_path / "elect.lua"
    script.write_text(ELECT_LUA)
    lenv = dict(env, LUA_CPATH=f"{tree}/lib/lua/5.4/?.so", LUA_PATH="")
    r = subprocess.run([LUA, str(script), minio.endpoint, minio.access_key, minio.secret_key,
                        minio.bucket, f"{os.getpid()}-{time.time_ns()}",
                        str(lock_dir / "rock.json")],
                       cwd=work, env=lenv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "s3\telected and handed over" in r.stdout and "file\telected and handed over" \
        in r.stdout, r.stdout
    assert f"version\t{ver}" in r.stdout, r.stdout


def test_lua_rockspec_keeps_what_exists_and_checks_its_arguments(tmp_path):
    tool = str(ROOT / "scripts/lua-rockspec")
    archive = tmp_path / "a/s3lect-9.8.7.tar.gz"

    def run(*args):
        return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)

    r = run("--archive", str(archive), "--version", "9.8.7", "--out", str(tmp_path))
    assert r.returncode == 2 and "--make-archive" in r.stderr, r.stderr  # no archive
    assert run("--version", "1.0").returncode == 2  # --archive is required
    r = run("--archive", str(archive), "--make-archive", "--version", "1.0-rc1")
    assert r.returncode == 2 and "X.Y.Z" in r.stderr, r.stderr
    r = run("--archive", str(archive), "--make-archive", "--version", "9.8.7",
            "--url", "https://example.invalid/s3lect-9.8.7.tar.gz", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    spec = tmp_path / "s3lect-9.8.7-1.rockspec"
    text = spec.read_text()
    assert 'version = "9.8.7-1"' in text and 'dir = "s3lect-9.8.7"' in text
    assert 'url = "https://example.invalid/s3lect-9.8.7.tar.gz"' in text
    assert f'md5 = "{hashlib.md5(archive.read_bytes()).hexdigest()}"' in text
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "s3lect-9.8.7/libs3lect/include/s3lect.h" in names
    assert all(n == "s3lect-9.8.7" or n.startswith("s3lect-9.8.7/") for n in names)
    assert not any("/build/" in n or n.startswith("s3lect-9.8.7/build") for n in names)
    before = (spec.read_bytes(), archive.read_bytes())
    # Neither file is overwritten.
    r = run("--archive", str(archive), "--version", "9.8.7", "--out", str(tmp_path))
    assert r.returncode == 1 and "exists; kept" in r.stderr, r.stderr
    spec.rename(spec.with_suffix(".old"))
    r = run("--archive", str(archive), "--make-archive", "--version", "9.8.7",
            "--out", str(tmp_path))
    assert r.returncode == 1 and "exists; kept" in r.stderr, r.stderr
    assert (spec.with_suffix(".old").read_bytes(), archive.read_bytes()) == before

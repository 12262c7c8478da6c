# SPDX-License-Identifier: Apache-2.0
"""scripts/build-wheel's command line (issue 29, item 6): it deletes nothing in
OUT_DIR that it did not make (it used to `rm -rf` OUT_DIR first), creates
OUT_DIR if missing, keeps an existing wheel of the same name unless --force,
and takes the Python to build for as a documented option (--python PATH).

The usage tests take a second. The build tests build the self-contained wheel
three times (about 10 s each once the self-contained dependencies and the
wheel's build directory are warm; the dependencies take minutes cold), so they
run where the wheel is built anyway: suite selfcontained, which sets
S3LECT_WHEEL_DIR.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/build-wheel"
BUILDS = bool(os.environ.get("S3LECT_WHEEL_DIR"))


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_help_documents_the_options():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: scripts/build-wheel"), r.stdout
    for word in ("--python PATH", "--force", "OUT_DIR", "Nothing else in OUT_DIR"):
        assert word in r.stdout, (word, r.stdout)
    assert run("-h").stdout == r.stdout


@pytest.mark.parametrize("args", [
    ["--bogus", "{out}"],
    ["{out}", "{out}2"],
    ["--python"],
    ["--python", "/nonexistent/python3", "{out}"],
    ["--python=", "{out}"],
])
def test_usage_errors_exit_2_and_make_nothing(tmp_path, args):
    out = tmp_path / "out"
    r = run(*[a.format(out=out) for a in args])
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "usage: scripts/build-wheel" in r.stderr and r.stdout == "", r.stderr
    assert r.stderr.startswith("build-wheel: "), r.stderr
    assert not out.exists() and not Path(f"{out}2").exists()


def snapshot(d: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(d)): (p.stat().st_ino, p.read_bytes() if p.is_file() else b"")
            for p in sorted(d.rglob("*"))}


@pytest.mark.skipif(not BUILDS, reason="builds the wheel three times: runs in suite "
                    "selfcontained (S3LECT_WHEEL_DIR set), where the wheel is built anyway")
def test_builds_into_out_dir_and_deletes_nothing_else(tmp_path):
    out = tmp_path / "dist"
    (out / "sub").mkdir(parents=True)
    (out / "unrelated.txt").write_text("not the script's\n")
    (out / "sub/other.whl").write_bytes(b"another wheel")
    (out / "auditwheel-show.txt").write_text("someone else's\n")
    before = snapshot(out)

    r = run("--python", sys.executable, str(out), timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    after = snapshot(out)
    # Everything that was there is there, unchanged (same file, same bytes)...
    assert {k: after.get(k) for k in before} == before
    new = sorted(set(after) - set(before))
    # ...and the script added exactly its wheel and the wheel's auditwheel text.
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert len(new) == 2, new
    wheel = next(n for n in new if n.endswith(".whl"))
    assert wheel.startswith("s3lect-") and f"-{tag}-" in wheel and "manylinux_" in wheel, wheel
    assert new == sorted([wheel, wheel[:-len(".whl")] + ".auditwheel-show.txt"]), new
    assert "consistent with" in (out / (wheel[:-len(".whl")] + ".auditwheel-show.txt")).read_text()
    # Nothing left behind under OUT_DIR (no partial copies) or in the staging area.
    assert not [p for p in out.iterdir() if p.name.startswith(".")]

    # The same name again: kept, exit 1, nothing changed.
    r = run("--python", sys.executable, str(out), timeout=1800)
    assert r.returncode == 1, (r.returncode, r.stderr[-3000:])
    assert "exists; kept" in r.stderr and "--force" in r.stderr, r.stderr[-3000:]
    assert snapshot(out) == after

    # --force replaces the wheel and its text, and nothing else.
    r = run("--force", str(out), timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    forced = snapshot(out)
    assert set(forced) == set(after)
    assert {k: forced[k] for k in before} == before
    assert forced[wheel][0] != after[wheel][0], "the wheel was not replaced"


@pytest.mark.skipif(not BUILDS, reason="builds the wheel: runs in suite selfcontained "
                    "(S3LECT_WHEEL_DIR set)")
def test_creates_a_missing_out_dir_with_python_from_the_environment(tmp_path):
    out = tmp_path / "a/b"
    r = subprocess.run([str(SCRIPT), str(out)], capture_output=True, text=True, timeout=1800,
                       env=dict(os.environ, PYTHON=sys.executable), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(list(out.glob("s3lect-*.whl"))) == 1, list(out.iterdir())

# SPDX-License-Identifier: Apache-2.0
"""scripts/dist (issue 29 item 1): what it writes into its output directory.

It writes only its artifacts of the version and SHA256SUMS, never deletes or
changes another file there, replaces its own names on a second run, and the
sums verify. One architecture, the machine's own (its wheel is imported by
the script's checks); the artifacts themselves are the `dist` suite's
install tests' business. Minutes cold (the toolchain and the dependencies per
target are built into ~/.cache/s3lect/dist), seconds warm; so it runs only
with S3LECT_TEST_DIST=1.
"""
import hashlib
import os
import platform
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "dist"
pytestmark = pytest.mark.skipif(os.environ.get("S3LECT_TEST_DIST") != "1",
                                reason="S3LECT_TEST_DIST=1 runs scripts/dist (minutes cold)")


def version():
    h = (ROOT / "libs3lect" / "include" / "s3lect.h").read_text()
    return re.search(r'#define S3LECT_VERSION_STRING "([^"]+)"', h).group(1)


def snapshot(d):
    return {p.name: (p.stat().st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in d.iterdir() if p.is_file()}


def test_dist_writes_only_its_own_files(tmp_path):
    arch = platform.machine()
    if arch not in ("x86_64", "aarch64"):
        pytest.skip(f"no artifacts for {arch}")
    v = version()
    out = tmp_path / "dist"
    out.mkdir()
    # Another's files, one named like an artifact of another version.
    (out / "notes.txt").write_text("mine\n")
    (out / f"s3lect-0.0.1-{arch}-linux-static.tar.gz").write_bytes(b"not ours")
    (out / "sub").mkdir()
    (out / "sub" / "x").write_text("x")
    before = snapshot(out)

    r = subprocess.run([str(SCRIPT), "--arch", arch, "--out", str(out)],
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-4000:]
    after = snapshot(out)
    assert {k: after[k] for k in before} == before
    assert (out / "sub" / "x").read_text() == "x"
    want = {
        f"s3lect-{v}-cp39-abi3-manylinux2014_{arch}.manylinux_2_17_{arch}.whl",
        f"s3lect-{v}-{arch}-linux-static.tar.gz",
        f"s3lect-sdk-{v}-{arch}-linux-gnu.tar.gz",
        f"s3lect-{v}-{arch}.spdx.json",
        "SHA256SUMS",
    }
    assert set(after) - set(before) == want
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    # The sums name exactly the artifacts, and verify.
    sums = (out / "SHA256SUMS").read_text().split("\n")
    assert sorted(line.split("  ", 1)[1] for line in sums if line) == sorted(want - {"SHA256SUMS"})
    subprocess.run(["sha256sum", "--check", "--strict", "--quiet", "SHA256SUMS"], cwd=out, check=True)

    # Again: the same names are replaced, nothing else changes.
    r = subprocess.run([str(SCRIPT), "--arch", arch, "--out", str(out)],
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-4000:]
    again = snapshot(out)
    assert set(again) == set(after)
    assert {k: again[k] for k in before} == before
    subprocess.run(["sha256sum", "--check", "--strict", "--quiet", "SHA256SUMS"], cwd=out, check=True)


def test_dist_usage_errors():
    for args in (["--arch", "sparc"], ["--bogus"], ["--out"]):
        r = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (args, r.returncode, r.stderr)

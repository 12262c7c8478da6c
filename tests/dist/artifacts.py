# SPDX-License-Identifier: Apache-2.0
"""The install tests' release artifacts (S3LECT_DIST_DIR, default dist/)
and the roots they use (roots.py)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from roots import HOST_ARCH, MACHINE, Spec

REPO = Path(__file__).resolve().parents[2]
DIST = Path(os.environ.get("S3LECT_DIST_DIR", REPO / "dist")).resolve()

PY = ["python3", "python3-venv"]
# name -> what it holds. Three CPythons (Debian ships one per release):
# bullseye's 3.9 (the abi3 wheel's floor; glibc 2.31), bookworm's 3.11,
# trixie's 3.13.
SPECS = {
    "bullseye-amd64": Spec("bullseye-amd64", "bullseye", "amd64", PY),
    "bullseye-arm64": Spec("bullseye-arm64", "bullseye", "arm64", PY),
    "bookworm-amd64": Spec("bookworm-amd64", "bookworm", "amd64", PY),
    "bookworm-arm64": Spec("bookworm-arm64", "bookworm", "arm64", PY),
    "trixie-amd64": Spec("trixie-amd64", "trixie", "amd64", PY),
    "trixie-arm64": Spec("trixie-arm64", "trixie", "arm64", PY),
    # The SDK tests': a C compiler, pkg-config and minisign (README "Installing a
    # release" verifies SHA256SUMS there), still no libcurl or libssl.
    "sdk-bookworm-amd64": Spec("sdk-bookworm-amd64", "bookworm", "amd64",
                               ["gcc", "libc6-dev", "pkg-config", "minisign"]),
    "sdk-bookworm-arm64": Spec("sdk-bookworm-arm64", "bookworm", "arm64",
                               ["gcc", "libc6-dev", "pkg-config", "minisign"]),
}

# The roots the tests use: both architectures' bookworm; bullseye, trixie
# and the SDK root only for the host's (a root under qemu costs minutes to
# make, and the CPython versions are not per architecture). prepare.py makes
# them ahead of the tests.
WHEEL_ROOTS = ["bookworm-amd64", "bookworm-arm64", f"bullseye-{HOST_ARCH}", f"trixie-{HOST_ARCH}"]
USED = WHEEL_ROOTS + [f"sdk-bookworm-{HOST_ARCH}"]


def version() -> str:
    h = (REPO / "libs3lect" / "include" / "s3lect.h").read_text()
    return re.search(r'#define S3LECT_VERSION_STRING "([^"]+)"', h).group(1)


def artifacts(arch: str) -> dict[str, list[Path]]:
    """The artifacts of this checkout's version for Debian architecture ARCH
    in DIST, by kind (older versions' files there are left out)."""
    m = MACHINE[arch]
    v = f"-{version()}-"
    found: dict[str, list[Path]] = {"wheel": [], "cli": [], "sdk": []}
    if not DIST.is_dir():
        return found
    for p in sorted(DIST.iterdir()):
        n = p.name
        if not p.is_file() or m not in n or v not in n:
            continue
        if n.endswith(".whl") and n.startswith("s3lect-") and "linux" in n:
            found["wheel"].append(p)
        elif "sdk" in n and n.endswith((".tar.gz", ".tar.xz", ".tgz")):
            found["sdk"].append(p)
        elif n.startswith("s3lect-") and "sdk" not in n and (
                n.endswith((".tar.gz", ".tar.xz", ".tgz")) or
                (os.access(p, os.X_OK) and "." not in n.rsplit(m, 1)[-1])):
            found["cli"].append(p)
    return found


def need(arch: str, kind: str) -> list[Path]:
    """ARCH's artifacts of KIND, or a skip that says what is missing."""
    got = artifacts(arch)[kind]
    if not got:
        pytest.skip(f"no {kind} for {MACHINE[arch]} in {DIST} (S3LECT_DIST_DIR): "
                    f"scripts/dist --arch {MACHINE[arch]} makes it")
    return got


def unpack_cli(art: Path, dest: Path) -> Path:
    """The static CLI ART (a binary, or a tarball with bin/s3lect or s3lect)
    copied or unpacked into DEST; returns the binary's host path."""
    dest.mkdir(parents=True, exist_ok=True)
    if art.name.endswith((".tar.gz", ".tar.xz", ".tgz")):
        subprocess.run(["tar", "-xf", str(art), "-C", str(dest)], check=True)
        found = [p for p in dest.rglob("s3lect") if p.is_file() and os.access(p, os.X_OK)]
        assert found, f"no executable s3lect in {art}"
        return found[0]
    out = dest / "s3lect"
    shutil.copy2(art, out)
    return out

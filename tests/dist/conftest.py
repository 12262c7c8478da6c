# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the install tests (suite dist): clean Debian roots extracted
once per session (roots.py), the node outside them."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from artifacts import DIST, REPO, SPECS, artifacts, unpack_cli
from roots import HOST_ARCH, Root, RootUnavailable, binfmt_line


def _log(msg: str) -> None:
    print(msg, flush=True)


@pytest.fixture(scope="session")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """name -> Root, each extracted once per session from its cached tarball."""
    if os.geteuid() != 0:
        pytest.skip("the roots are made and extracted as root (their device nodes and "
                    "owners; the test machine and CI run as root)")
    made: dict[str, Root] = {}
    base = tmp_path_factory.mktemp("roots")

    def get(name: str) -> Root:
        if name not in made:
            spec = SPECS[name]
            if spec.arch != HOST_ARCH:
                try:
                    binfmt_line(spec.arch)
                except RootUnavailable as e:
                    pytest.skip(f"{name}: {e}")
            try:
                made[name] = spec.extract(base / name, _log)
            except RootUnavailable as e:
                pytest.skip(f"{name}: {e}")
            if spec.arch != HOST_ARCH:
                # Can this kernel run it (binfmt_misc inside a user namespace)?
                r = made[name].run(["/bin/true"], check=False, timeout=120)
                if r.returncode == 97:
                    pytest.skip(f"{name}: {r.stderr.strip()}; without it only the root's "
                                "first program could run under qemu, not its subprocesses")
                assert r.returncode == 0, f"{name}: /bin/true: {r.stderr}"
        return made[name]

    yield get
    # The roots were extracted by root: remove them (pytest keeps its last
    # three base temporary directories; three copies of the roots are too many).
    for r in made.values():
        shutil.rmtree(r.path, ignore_errors=True)


@pytest.fixture(scope="session")
def host_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The node outside the roots: the checkout's build (S3LECT_BUILD_DIR,
    default build/) where it exists, else the host architecture's static CLI
    from DIST (the release workflow builds no build/)."""
    b = Path(os.environ.get("S3LECT_BUILD_DIR", REPO / "build")) / "bin" / "s3lect"
    if os.access(b, os.X_OK):
        return b
    clis = artifacts(HOST_ARCH)["cli"]
    if clis:
        return unpack_cli(clis[0], tmp_path_factory.mktemp("host-cli"))
    pytest.skip(f"no s3lect for the host: neither {b} nor a static CLI in {DIST}")

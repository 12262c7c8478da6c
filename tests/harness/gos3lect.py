# SPDX-License-Identifier: Apache-2.0
"""Builds bench/peers/gos3lect (one Go s3lect elector as a process, printing
`s3lect run`'s stderr lines) against a local checkout of Go s3lect.

Go s3lect (github.com/nadrama-com/s3lect, Apache-2.0) is refused by the Go
module proxy and its code may not be copied here, so the user names a checkout
with GOS3LECT_SRC; the program's go.mod gets a `replace` directive pointing at
it in a private copy at build time (nothing machine-specific is committed). The
binary is cached in ${S3LECT_CACHE:-~/.cache/s3lect}/gos3lect/<hash>/, the hash
covering the checkout's commit and Go sources, the program's files and the Go
toolchain version.

    try:
        node = gos3lect.build_node()
    except gos3lect.Unavailable as e:   # no usable checkout: skip, saying why
        pytest.skip(str(e))

A checkout that is usable but does not build raises BuildError (a failure, not
a skip). Used by tests/interop and bench/lib/impls.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "bench" / "peers" / "gos3lect"
MODULE = "github.com/nadrama-com/s3lect"
ENV = "GOS3LECT_SRC"
# Where the workplace keeps an unmodified snapshot, beside the repository; used
# when GOS3LECT_SRC is not set at all (never a machine path of its own).
DEFAULT_SRC = REPO.parent / "shared" / "gos3lect"
HOW = (f"set {ENV} to a checkout of Go s3lect ({MODULE}, commit c45cfbd), or put one at "
       "../shared/gos3lect beside the repository; see bench/README.md \"Go s3lect\"")


class Unavailable(Exception):
    """No usable Go s3lect checkout (or no Go toolchain): the reason is the message."""


class BuildError(Exception):
    """The checkout looks like Go s3lect but the node program did not build."""


def find_source(environ: dict[str, str] | None = None) -> Path:
    """The Go s3lect checkout named by GOS3LECT_SRC (the process's environment
    without it: ../shared/gos3lect where it exists), checked; raises Unavailable."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV, "")
    if environ is None and ENV not in env and DEFAULT_SRC.is_dir():
        raw = str(DEFAULT_SRC)
    if not raw.strip():
        raise Unavailable(f"{ENV} is not set: {HOW}")
    src = Path(raw).expanduser()
    if not src.is_dir():
        raise Unavailable(f"{ENV}={raw} is not a directory: {HOW}")
    gomod = src / "go.mod"
    if not gomod.is_file():
        raise Unavailable(f"{ENV}={raw} has no go.mod, so it is not a Go s3lect checkout: {HOW}")
    m = re.search(r"^module\s+(\S+)", gomod.read_text(errors="replace"), re.M)
    if not m or m.group(1) != MODULE:
        found = m.group(1) if m else "no module line"
        raise Unavailable(f"{ENV}={raw} is module {found}, not {MODULE}: {HOW}")
    if not any("func NewS3Elector(" in p.read_text(errors="replace") for p in src.glob("*.go")):
        raise Unavailable(f"{ENV}={raw} is module {MODULE} but defines no NewS3Elector: "
                          f"not the Go s3lect API this program is written for (commit c45cfbd)")
    return src.resolve()


def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise Unavailable("the go command is not on PATH (Go ≥ 1.24 builds the Go s3lect node)")
    return go


def _fingerprint(src: Path, go: str) -> str:
    h = hashlib.sha256()
    try:
        commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    h.update(f"commit {commit}\n".encode())
    for d, label in ((src, "src"), (PROGRAM, "program")):
        for p in sorted(d.iterdir()):
            if p.is_file() and (p.suffix == ".go" or p.name in ("go.mod", "go.sum")):
                h.update(f"{label}/{p.name}\n".encode())
                h.update(p.read_bytes())
    ver = subprocess.run([go, "version"], capture_output=True, text=True, timeout=60).stdout
    h.update(ver.encode())
    return h.hexdigest()[:20]


def cache_root(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("S3LECT_CACHE") or str(Path.home() / ".cache" / "s3lect")
    return Path(base) / "gos3lect"


def build_node(environ: dict[str, str] | None = None, timeout: float = 600) -> Path:
    """Path of the built node program (built once per source/program/toolchain).
    Raises Unavailable (skip with its message) or BuildError (fail)."""
    src = find_source(environ)
    go = _go()
    out_dir = cache_root(environ) / _fingerprint(src, go)
    binary = out_dir / "gos3lect-node"
    if os.access(binary, os.X_OK):
        return binary
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix="build-") as tmp:
        work = Path(tmp) / "src"
        shutil.copytree(PROGRAM, work)
        genv = dict(os.environ if environ is None else environ, GOWORK="off", GOFLAGS="-mod=mod")
        steps = [[go, "mod", "edit", "-replace", f"{MODULE}={src}"],
                 [go, "build", "-trimpath", "-o", str(Path(tmp) / "gos3lect-node"), "."]]
        for cmd in steps:
            try:
                r = subprocess.run(cmd, cwd=work, env=genv, capture_output=True, text=True,
                                   timeout=timeout)
            except subprocess.TimeoutExpired:
                raise BuildError(f"{' '.join(cmd[:2])} timed out after {timeout:g} s in {work}")
            if r.returncode != 0:
                raise BuildError(f"building the Go s3lect node failed ({' '.join(cmd[:2])}, "
                                 f"exit {r.returncode}):\n{r.stderr.strip()[-3000:]}")
        os.replace(Path(tmp) / "gos3lect-node", binary)
    return binary


def source_commit(environ: dict[str, str] | None = None) -> str:
    """Short commit of the checkout, or "unknown" (for reports)."""
    src = find_source(environ)
    try:
        r = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"

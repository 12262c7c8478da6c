# SPDX-License-Identifier: Apache-2.0
"""A second s3lect build from a git revision, for old-vs-new runs.

`bench/run --baseline REV` builds commit REV of this repository into
${S3LECT_CACHE:-~/.cache/s3lect}/bench-baseline/<full sha>/:

    src/       `git archive REV` unpacked (no work tree, no .git)
    build/     that tree's own `scripts/build build/` (CMake, RelWithDebInfo)
    complete   written last, once bin/s3lect and libs3lect.a exist

A directory with `complete` is re-used as it is; one without it (an
interrupted build) is built again from scratch. A lock file keeps two bench
runs from building the same revision at once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from common import REPO, BenchError, log

BUILD_TIMEOUT_S = 3600  # a cold build of the whole tree on 2 shared cores


def cache_root() -> Path:
    cache = Path(os.environ.get("S3LECT_CACHE", str(Path.home() / ".cache" / "s3lect")))
    return cache / "bench-baseline"


@dataclass
class Baseline:
    rev: str  # as given on the command line
    sha: str  # full commit id
    short: str  # abbreviated commit id, used in labels
    src: Path  # the unpacked tree (its libs3lect/include is the header to build against)
    build_dir: Path  # its CMake build tree: bin/s3lect, libs3lect/libs3lect.a

    @property
    def include_dir(self) -> Path:
        return self.src / "libs3lect" / "include"

    @property
    def lib(self) -> Path:
        return self.build_dir / "libs3lect" / "libs3lect.a"

    @property
    def cli(self) -> Path:
        return self.build_dir / "bin" / "s3lect"


def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(REPO), *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    if r.returncode != 0:
        raise BenchError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def resolve(rev: str) -> tuple[str, str]:
    """(full sha, short sha) of a commit of this repository."""
    sha = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return sha, _git("rev-parse", "--short", sha)


def _complete(d: Path) -> bool:
    b = d / "build"
    return ((d / "complete").exists() and (b / "bin" / "s3lect").exists()
            and (b / "libs3lect" / "libs3lect.a").exists())


def ensure(rev: str) -> Baseline:
    """Builds REV into the cache unless a complete build is there; returns it."""
    try:
        sha, short = resolve(rev)
    except BenchError as e:
        raise BenchError(f"--baseline {rev}: not a commit of {REPO} ({e})") from None
    d = cache_root() / sha
    base = Baseline(rev, sha, short, d / "src", d / "build")
    d.mkdir(parents=True, exist_ok=True)
    with open(d.parent / f"{sha}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another bench run building the same revision
        if _complete(d):
            print(f"bench/run: baseline {rev} = {sha}: re-using the build in {d}",
                  file=sys.stderr)
            return base
        print(f"bench/run: baseline {rev} = {sha}: building it into {d} "
              f"(git archive | tar -x, then its scripts/build; once per revision)",
              file=sys.stderr)
        for p in (d / "complete", d / "src", d / "build"):
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        base.src.mkdir(parents=True)
        arch = subprocess.Popen(["git", "-C", str(REPO), "archive", "--format=tar", sha],
                                stdout=subprocess.PIPE)
        try:
            tar = subprocess.run(["tar", "-x", "-C", str(base.src)], stdin=arch.stdout,
                                 stderr=subprocess.PIPE, text=True, timeout=600)
        finally:
            assert arch.stdout
            arch.stdout.close()
            arch_rc = arch.wait(timeout=60)
        if arch_rc != 0 or tar.returncode != 0:
            raise BenchError(f"unpacking {sha} failed (git archive {arch_rc}, tar "
                             f"{tar.returncode}): {tar.stderr.strip()}")
        script = base.src / "scripts" / "build"
        if not script.exists():
            raise BenchError(f"{sha} has no scripts/build: cannot build it as a baseline")
        t0 = time.monotonic()
        logf = d / "build.log"
        with open(logf, "w") as out:
            try:
                r = subprocess.run([str(script), str(base.build_dir)], cwd=base.src,
                                   stdout=out, stderr=subprocess.STDOUT,
                                   timeout=BUILD_TIMEOUT_S, start_new_session=True)
            except subprocess.TimeoutExpired:
                raise BenchError(f"building baseline {sha} took over {BUILD_TIMEOUT_S} s "
                                 f"(log: {logf})") from None
        if r.returncode != 0 or not base.cli.exists() or not base.lib.exists():
            tail = "\n".join(logf.read_text(errors="replace").splitlines()[-30:])
            raise BenchError(f"building baseline {sha} failed (status {r.returncode}; "
                             f"log {logf}):\n{tail}")
        (d / "complete").write_text(f"{sha}\n")
        log(f"baseline {short} built in {time.monotonic() - t0:.0f} s ({d})")
        return base

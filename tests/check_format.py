#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a C source or header has drifted from .clang-format.

Every .c and .h file of the project (the library, the CLI, the bindings' C,
the tests, the examples, the ABI guard, the benchmarks; not build trees or the
self-contained build's third-party glue) must be exactly what `clang-format`
makes of it. Before that the check proves it can fail: a badly formatted
snippet must be reported.

  tests/check_format.py [REPO_ROOT]

S3LECT_CLANG_FORMAT names the binary (default clang-format; the reference is
Debian bookworm's clang-format 14, which scripts/deps installs). Fix drift with
`clang-format -i FILE...`.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
DIRS = ["libs3lect", "bindings", "tests", "examples", "abi", "bench"]
SKIP_PARTS = {".git", "node_modules", "__pycache__"}


def sources():
    out = []
    for d in DIRS:
        base = ROOT / d
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(n for n in dirnames
                                 if n not in SKIP_PARTS and not n.startswith("build"))
            for f in sorted(filenames):
                if f.endswith((".c", ".h")):
                    out.append(Path(dirpath) / f)
    return out


def drifted(tool, files, cwd):
    """The files clang-format would change (--dry-run -Werror names them)."""
    bad = set()
    for i in range(0, len(files), 50):
        r = subprocess.run([tool, "--dry-run", "-Werror"] + [str(f) for f in files[i:i + 50]],
                           cwd=cwd, capture_output=True, text=True)
        for line in r.stderr.splitlines():
            if ": error: code should be clang-formatted" in line or ": warning:" in line:
                bad.add(line.split(":", 1)[0])
        if r.returncode != 0 and not bad:
            raise SystemExit(f"check_format: {tool} failed: {r.stderr.strip()}")
    return sorted(bad)


def main():
    tool = os.environ.get("S3LECT_CLANG_FORMAT", "clang-format")
    if shutil.which(tool) is None:
        print(f"check_format: {tool} not found (scripts/deps installs clang-format)")
        return 1
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip()
    # The check must be able to fail: a snippet in the project's style file's
    # reach that is not formatted.
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(ROOT / ".clang-format", Path(tmp) / ".clang-format")
        probe = Path(tmp) / "probe.c"
        probe.write_text("int  f( int x ){ if(x) return 1; return 0 ; }\n")
        if drifted(tool, [probe], tmp) != [str(probe)]:
            print("check_format: a badly formatted probe file was not reported; the check is broken")
            return 1
    files = sources()
    bad = drifted(tool, files, ROOT)
    for f in bad:
        print(f"check_format: {Path(f).resolve().relative_to(ROOT)} is not clang-formatted")
    if bad:
        print(f"check_format: {len(bad)} of {len(files)} files drifted from .clang-format "
              f"({version}); run clang-format -i on them")
        return 1
    print(f"check_format: {len(files)} C files match .clang-format ({version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

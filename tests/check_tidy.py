#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs clang-tidy (the checks of .clang-tidy) on the library and the CLI.

Every .c file of libs3lect/src and libs3lect/cli, compiled as the build tree
compiles it (BUILD_DIR/compile_commands.json), and the project headers they
include; any finding fails the test. Before that the check proves it can fail:
a probe file with a known defect must be reported.

  tests/check_tidy.py BUILD_DIR [REPO_ROOT]

S3LECT_CLANG_TIDY names the binary (default clang-tidy; scripts/deps installs
Debian's). Files run in parallel, one clang-tidy per core.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BUILD = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else None
ROOT = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent.parent
DIRS = ("libs3lect/src/", "libs3lect/cli/")
# GCC-only warning flags in the compile commands are not clang's business.
EXTRA = ["--extra-arg=-Wno-unknown-warning-option", "--extra-arg=-Wno-ignored-optimization-argument"]


def run(tool, args, cwd=None):
    r = subprocess.run([tool, "--quiet"] + EXTRA + args, cwd=cwd, capture_output=True, text=True)
    findings = [line for line in r.stdout.splitlines() if ": error: " in line or ": warning: " in line]
    return r.returncode, findings, r.stdout + r.stderr


def main():
    if BUILD is None or not (BUILD / "compile_commands.json").is_file():
        print("check_tidy: usage: check_tidy.py BUILD_DIR [REPO_ROOT] "
              "(BUILD_DIR/compile_commands.json missing)")
        return 1
    tool = os.environ.get("S3LECT_CLANG_TIDY", "clang-tidy")
    if shutil.which(tool) is None:
        print(f"check_tidy: {tool} not found (scripts/deps installs clang-tidy)")
        return 1
    config = ROOT / ".clang-tidy"
    # The check must be able to fail: a memset with its arguments swapped
    # (bugprone-suspicious-memset-usage) in an otherwise clean file.
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.c"
        probe.write_text("#include <string.h>\n"
                         "void wipe(char *p, size_t n);\n"
                         "void wipe(char *p, size_t n) { memset(p, (int)n, 0); }\n")
        rc, findings, out = run(tool, [f"--config-file={config}", str(probe), "--", "-std=c11"])
        if rc == 0 or not any("suspicious-memset-usage" in f for f in findings):
            print("check_tidy: the probe's memset was not reported; the check is broken:\n" + out)
            return 1
    db = json.loads((BUILD / "compile_commands.json").read_text())
    root = str(ROOT.resolve()) + "/"
    files = sorted({e["file"] for e in db
                    if e["file"].startswith(root) and e["file"][len(root):].startswith(DIRS)})
    if not files:
        print(f"check_tidy: no library or CLI file in {BUILD}/compile_commands.json")
        return 1
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda f: (f, run(tool, ["-p", str(BUILD), f])), files))
    findings = []
    for f, (rc, found, out) in results:
        if rc != 0 or found:
            findings.extend(found or [f"{f}: clang-tidy exit {rc}: {out.strip()}"])
            print(out.rstrip())
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.split("\n")
    version = next((v.strip() for v in version if "version" in v), "?")
    if findings:
        print(f"check_tidy: {len(set(findings))} findings in {len(files)} files ({version})")
        return 1
    print(f"check_tidy: {len(files)} files clean under .clang-tidy in "
          f"{time.monotonic() - start:.0f} s ({version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

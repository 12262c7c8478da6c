#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Self-test of the ABI guard (abi/check_abi.sh): it must fail on each
incompatible change below and pass on a pure addition.

Copies the library's sources to a scratch directory, builds libs3lect.so
there, checks that the guard passes on the copy as it is, then applies each
mutation to a fresh copy of the sources, rebuilds and runs the guard.

  abi/selftest.py [SCRATCH_DIR]      (default: a temporary directory)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = ["CMakeLists.txt", "cmake", "libs3lect", "abi"]

HEADER = "libs3lect/include/s3lect.h"


def sub(path, pattern, repl, count=1):
    """(file or 'src:<symbol definition regex>', regex, replacement)"""
    return ("sub", path, pattern, repl, count)


# Each: name, expected outcome ("fail" or "pass"), edits.
MUTATIONS = [
    ("S3LECT_EINVAL -1 -> -21", "fail",
     [sub(HEADER, r"S3LECT_EINVAL = -1,", "S3LECT_EINVAL = -21,")]),
    ("S3LECT_OPT_LEASE_TIMEOUT 4 -> 40", "fail",
     [sub(HEADER, r"S3LECT_OPT_LEASE_TIMEOUT = 4,", "S3LECT_OPT_LEASE_TIMEOUT = 40,")]),
    ("S3LECT_STATE_LEADER 3 -> 7", "fail",
     [sub(HEADER, r"S3LECT_STATE_LEADER = 3,", "S3LECT_STATE_LEADER = 7,")]),
    ("swap S3LECT_STORE_NOT_FOUND and S3LECT_STORE_PRECONDITION", "fail",
     [sub(HEADER, r"S3LECT_STORE_NOT_FOUND = 1,", "S3LECT_STORE_NOT_FOUND = 2,"),
      sub(HEADER, r"S3LECT_STORE_PRECONDITION = 2,", "S3LECT_STORE_PRECONDITION = 1,")]),
    ("s3lect_is_leader returns long", "fail",
     [sub(HEADER, r"S3LECT_API int s3lect_is_leader\(", "S3LECT_API long s3lect_is_leader("),
      sub("src:s3lect_is_leader", r"^int s3lect_is_leader\(", "long s3lect_is_leader(")]),
    ("s3lect_config_set_int takes int32_t", "fail",
     [sub(HEADER, r"(s3lect_config_set_int\(s3lect_config \*cfg, s3lect_option opt,)\s*int64_t value\)",
          r"\1 int32_t value)"),
      sub("src:s3lect_config_set_int",
          r"^(int s3lect_config_set_int\(s3lect_config \*cfg, s3lect_option opt,)\s*int64_t value\)",
          r"\1 int32_t value)")]),
    ("s3lect_peer_port removed (header, source, map, symbols.txt)", "fail",
     [sub(HEADER, r"S3LECT_API int s3lect_peer_port\([^;]*;", ""),
      sub("src:s3lect_peer_port", r"^int s3lect_peer_port\(const s3lect_elector \*e\)\n\{.*?\n\}\n", ""),
      sub("abi/s3lect.map", r"\n\s*s3lect_peer_port;", ""),
      sub("abi/symbols.txt", r"s3lect_peer_port\n", "")]),
    ("s3lect_cycle no longer exported (map)", "fail",
     [sub("abi/s3lect.map", r"\n\s*s3lect_cycle;", "")]),
    ("lease_timeout's type int -> str in the option table", "fail",
     [sub("libs3lect/src/config/config.c", r'\{"lease_timeout", S3LECT_OPTION_INT,',
          '{"lease_timeout", S3LECT_OPTION_STR,')]),
    ("max_connections renamed max_conns in the option table", "fail",
     [sub("libs3lect/src/config/config.c", r'\{"max_connections",', '{"max_conns",')]),
    ("session_token no longer flagged secret in the option table", "fail",
     [sub("libs3lect/src/config/config.c", r'OFF\(session_token\), NO_ENV, SECRET\}', 'OFF(session_token), NO_ENV, 0}')]),
    ("an option appended, a function added (map, symbols.txt)", "pass",
     [sub(HEADER, r"(S3LECT_OPT_CALLBACK_THREADS = 32)", r"\1,\n    S3LECT_OPT_SELFTEST_ADDED = 99"),
      sub(HEADER, r"(S3LECT_API int s3lect_peer_port\([^;]*;)",
          r"\1\nS3LECT_API int s3lect_selftest_added(void);"),
      sub("src:s3lect_peer_port", r"(\nint s3lect_peer_port\()",
          r"\nint s3lect_selftest_added(void)\n{\n    return 1;\n}\n\1"),
      sub("abi/s3lect.map", r"(\n\s*local:)", r"\n    s3lect_selftest_added;\1"),
      sub("abi/symbols.txt", r"\Z", "s3lect_selftest_added\n")]),
]


def run(cmd, cwd=None, quiet=True):
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not quiet:
        print(r.stdout, end="")
    return r.returncode, r.stdout


def definer(src_root, symbol):
    """The source file that defines a public function."""
    pat = re.compile(r"^[a-z][\w \*]*\b" + re.escape(symbol) + r"\(", re.M)
    for p in sorted((src_root / "libs3lect").rglob("*.c")):
        if pat.search(p.read_text()):
            return p
    raise SystemExit(f"selftest: no source file defines {symbol}")


def apply(src_root, edits):
    for _, path, pattern, repl, count in edits:
        p = definer(src_root, path[4:]) if path.startswith("src:") else src_root / path
        text = p.read_text()
        new, n = re.subn(pattern, repl, text, count=count, flags=re.M | re.S)
        if n == 0:
            raise SystemExit(f"selftest: mutation pattern {pattern!r} not found in {p}: "
                             "update abi/selftest.py to the current sources")
        p.write_text(new)


def copy_sources(dst):
    for part in PARTS:
        s, d = ROOT / part, dst / part
        if d.exists():
            shutil.rmtree(d) if d.is_dir() else d.unlink()
        if s.is_dir():
            shutil.copytree(s, d)
        else:
            shutil.copy2(s, d)


def main():
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="s3lect-abi-"))
    keep = len(sys.argv) > 1
    src, bld = scratch / "src", scratch / "build"
    src.mkdir(parents=True, exist_ok=True)
    copy_sources(src)
    rc, out = run(["cmake", "-S", str(src), "-B", str(bld), "-G", "Ninja",
                   "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DS3LECT_BUILD_TESTS=OFF",
                   "-DS3LECT_BUILD_CLI=OFF"])
    if rc:
        print(out)
        raise SystemExit("selftest: configuring the scratch build failed")
    lib = bld / "libs3lect" / "libs3lect.so"
    failures = 0

    def guard(name, expect):
        nonlocal failures
        rc, out = run(["ninja", "-C", str(bld), "s3lect"])
        if rc:
            built = False
            verdict = "fail"  # a mutation that no longer builds is caught too (but say so)
        else:
            built = True
            rc, out = run(["sh", str(src / "abi" / "check_abi.sh"), str(lib),
                           str(src / "abi" / "baseline.abi"), str(src / "libs3lect" / "include"),
                           str(src / "abi")])
            verdict = "fail" if rc else "pass"
        ok = verdict == expect and built
        failures += not ok
        last = [l for l in out.strip().splitlines() if l.strip()][-1:] or [""]
        print(f"{'ok  ' if ok else 'FAIL'} {name}: guard says {verdict}, expected {expect}"
              + ("" if built else " (the mutated library did not build)") + f" | {last[0][:150]}")

    guard("unchanged sources", "pass")
    for name, expect, edits in MUTATIONS:
        copy_sources(src)
        apply(src, edits)
        guard(name, expect)
    copy_sources(src)
    if not keep:
        shutil.rmtree(scratch, ignore_errors=True)
    total = len(MUTATIONS) + 1
    print(f"abi selftest: {total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

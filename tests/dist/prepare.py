#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Makes what the install tests need ahead of them: the clean roots and,
with --dist, the release artifacts (scripts/dist --out DIR, both
architectures and the sdist) at the same time. scripts/test runs it in the
background at nice 19, beside the suites that mostly wait.

    python3 tests/dist/prepare.py [--dist DIR]

Each root in artifacts.USED is made and cached (roots.py) unless it is
already; a root of a foreign architecture is left out, with the reason,
where this machine cannot run it (no qemu-user-static). scripts/dist always
runs: warm it takes under a minute, and artifacts left in DIR by an older
checkout must not be tested in place of this one's. Exit status 1 when a
root could not be made or scripts/dist failed (their output is printed).
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from artifacts import SPECS, USED  # noqa: E402
from roots import RootUnavailable, binfmt_line  # noqa: E402


def make_roots() -> int:
    rc = 0
    for name in USED:
        spec = SPECS[name]
        start = time.monotonic()
        try:
            binfmt_line(spec.arch)
            tar = spec.ensure(lambda m: print(m, flush=True))
        except RootUnavailable as e:
            print(f"prepare: {name} left out: {e}", flush=True)
            continue
        except (AssertionError, OSError, subprocess.SubprocessError) as e:
            print(f"prepare: {name} could not be made: {e}", flush=True)
            rc = 1
            continue
        print(f"prepare: root {name}: {tar.name} ({time.monotonic() - start:.0f} s)", flush=True)
    return rc


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dist", metavar="DIR", help="also build the release artifacts into DIR")
    args = ap.parse_args(argv)
    dist = None
    if args.dist:
        # scripts/dist's output is printed after the roots' lines.
        dist = subprocess.Popen([str(HERE.parents[1] / "scripts" / "dist"), "--out", args.dist],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # SIGTERM (an interrupted test run): stop scripts/dist too (it cleans up).
    def stop(signum, _frame):
        if dist and dist.poll() is None:
            dist.terminate()
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    start = time.monotonic()
    rc = make_roots()
    if dist:
        out, _ = dist.communicate()
        print(out, end="", flush=True)
        print(f"prepare: scripts/dist --out {args.dist}: exit {dist.returncode} "
              f"({time.monotonic() - start:.0f} s from the start)", flush=True)
        rc = rc or (1 if dist.returncode else 0)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

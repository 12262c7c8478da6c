# SPDX-License-Identifier: Apache-2.0
"""scripts/test runs some suites as two pytest sessions side by side over the
same paths (pytest_pair in scripts/lib/lanes.sh; `scripts/test --list` names
the suites and their paths): the tests marked second_session
(tests/conftest.py) in the second, `-m second_session`, the others in the
first, `-m 'not second_session'`. The split must lose no test and run none
twice, each session must have tests, and the paths must hold every test file
of the suite's directories. Collection only: no server starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "second_session"


def pairs() -> dict[str, list[str]]:
    r = subprocess.run([str(ROOT / "scripts" / "test"), "--list"], capture_output=True,
                       text=True, timeout=30, check=True)
    out: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():
        name, sep, paths = line.partition(" pair: ")
        if sep:
            out[name] = paths.split()
    return out


def collect(paths: list[str], *args: str) -> list[str]:
    """The test ids pytest collects, relative to the checkout. A mark that is
    not registered (a misspelt second_session) is an error."""
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         f"--rootdir={ROOT}", "-W", "error::pytest.PytestUnknownMarkWarning", *args, *paths],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        # not this session's options (scripts/test's lane gives it a --basetemp)
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"})
    # (5: every test deselected)
    assert r.returncode in (0, 5), \
        f"collection failed ({r.returncode}):\n{r.stdout[-4000:]}{r.stderr[-2000:]}"
    return [line for line in r.stdout.splitlines() if "::" in line]


def test_the_runner_lists_its_split_suites():
    assert {"stores", "chaos"} <= set(pairs())


@pytest.mark.parametrize("suite", ["stores", "chaos"])
def test_split_loses_and_repeats_no_test(suite: str):
    paths = pairs()[suite]
    whole = collect(paths)
    first = collect(paths, "-m", f"not {MARK}")
    second = collect(paths, "-m", MARK)
    assert first, f"suite {suite}: its first session has no tests"
    assert second, f"suite {suite}: its second session has no tests"
    assert len(set(whole)) == len(whole), f"suite {suite}: a test collected twice"
    assert not set(first) & set(second), f"in both sessions: {sorted(set(first) & set(second))}"
    assert sorted(first + second) == sorted(whole), \
        f"lost by the split: {sorted(set(whole) - set(first) - set(second))}"
    # every test file in the directories of the paths runs (one the paths
    # leave out would run in neither session, nor in any other suite)
    files = {t.split("::")[0] for t in whole}
    dirs = {ROOT / p if (ROOT / p).is_dir() else (ROOT / p).parent for p in paths}
    for d in sorted(dirs):
        for f in d.rglob("test_*.py"):
            assert str(f.relative_to(ROOT)) in files, f"suite {suite}: {f} collects no test"

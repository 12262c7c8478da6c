# SPDX-License-Identifier: Apache-2.0
"""tests/data/config_table.txt through the CLI: each case's values as
S3LECT_* variables and, where the CLI has a flag, as flags; `run
--print-config` shows the effective values the library derived, and an error
must carry the library's text (as C, Python, Go and Lua do). Then
tests/data/env_table.txt: each case's variables as the environment of `run
--print-config`."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.config_table import cases, env_cases

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build"))
BIN = BUILD / "bin" / "s3lect"
FLAGS = {"lease_timeout", "max_lease_timeout", "renew_interval", "renew_deadline",
         "frequent_interval", "infrequent_interval", "max_clock_skew"}


def run(tmp_path, given, as_flags):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_")) or k == "S3LECT_NEW_LOCK_WAIT"}
    args = [str(BIN), "run", "--lock", str(tmp_path / "l.json"), "--print-config"]
    for name, text in given.items():
        if as_flags and name in FLAGS:
            args.append(f"--{name.replace('_', '-')}={text}")
        else:
            env["S3LECT_" + name.upper()] = text
    return subprocess.run([*args, "--", "true"], env=env, capture_output=True, text=True,
                          timeout=10)


@pytest.mark.parametrize("as_flags", [False, True], ids=["env", "flags"])
@pytest.mark.parametrize("case", cases(), ids=lambda c: c.id)
def test_config_table(case, as_flags, tmp_path):
    r = run(tmp_path, case.given, as_flags)
    if case.error is not None:
        # A flag's own syntax error names the flag; the rest is the library's text.
        text = case.error
        if as_flags and r.returncode == 2 and "'" in text:
            name = text.split(" ", 1)[0]
            if name in FLAGS:
                text = text.replace(name, "--" + name.replace("_", "-"), 1)
        assert r.returncode == 2 and text in r.stderr, (r.returncode, r.stderr)
        return
    assert r.returncode == 0, r.stderr
    got = dict(line.split("=") for line in r.stdout.split())
    for name, value in case.want.items():
        assert int(got[name]) == value, (name, got)


@pytest.mark.parametrize("case", env_cases(), ids=lambda c: c.id)
def test_env_table(case, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_"))}
    env.update(case.variables)
    args = [str(BIN), "run", "--print-config"]
    if "S3LECT_LOCK" not in case.variables:
        args += ["--lock", str(tmp_path / "l.json")]
    r = subprocess.run([*args, "--", "true"], env=env, capture_output=True, text=True, timeout=10)
    if case.error is not None:
        assert r.returncode == 2 and case.error in r.stderr, (r.returncode, r.stderr)
        return
    assert r.returncode == 0, r.stderr
    got = dict(line.split("=", 1) for line in r.stdout.splitlines())
    for name, value in case.want.items():
        assert got[name] == value, (name, got)

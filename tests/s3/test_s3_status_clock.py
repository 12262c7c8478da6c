# SPDX-License-Identifier: Apache-2.0
"""`s3lect status` judges a record's age by the store's clock (issue 26 item 9).

A live leader on MinIO; `s3lect status` runs under libfaketime with its wall
clock 10 minutes off (either way; MinIO refuses signatures more than 15
minutes off, so that is as far as a request can get). It must still report a
live leader, with the age taken from S3's Date against Last-Modified
(`ageClock: "store"`). Before, the age was this machine's clock minus the
leader's `lastUpdated`: +10 min called the live leader expired (exit 3).
A file lock has no server clock: the output says the age rests on this
machine's clock. Every process started is stopped (cluster fixture).
"""
from __future__ import annotations

import json
import secrets
import shutil
import subprocess

import pytest

from harness.cli import Node, run, wait_for

LEASE_S = 3.0


@pytest.fixture
def s3env(minio, clean_env):
    env = dict(clean_env)
    env.update(minio.env())
    return env


@pytest.fixture
def leader(s3lect_bin, tmp_path, s3env, minio):
    lock = f"s3://{minio.bucket}/cli/clock-{secrets.token_hex(4)}.json"
    node = Node(s3lect_bin, tmp_path, lock, "n0", s3env)
    try:
        wait_for(node.leading, 20, "the node to lead")
        yield lock
    finally:
        node.stop()


def faked(offset: str, argv: list[str]) -> list[str]:
    if shutil.which("faketime") is None:
        pytest.skip("libfaketime's faketime command is not installed (apt-get install faketime)")
    return ["faketime", "-f", offset, *argv]


@pytest.mark.parametrize("offset", ["+600s", "-600s"])
def test_status_is_not_fooled_by_this_machines_clock(offset, leader, s3lect_bin, s3env):
    env = dict(s3env, FAKETIME_DONT_FAKE_MONOTONIC="1")
    r = run(faked(offset, [str(s3lect_bin), "status", leader, "--json"]), env, timeout=30)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    st = json.loads(r.stdout)
    assert st["live"] is True and st["leaderID"] == "n0", st
    assert st["ageClock"] == "store", st
    # Whole seconds on the store's clock; the leader renews well within the lease.
    assert 0 <= st["ageMs"] <= LEASE_S * 1000, st
    # ...while this machine's clock, against the leader's, is 10 minutes off.
    assert abs(abs(st["localAgeMs"]) - 600_000) < 60_000, st

    r = run(faked(offset, [str(s3lect_bin), "status", leader]), env, timeout=30)
    assert r.returncode == 0 and ": live leader n0" in r.stdout, (r.stdout, r.stderr)
    assert "age by the store's clock" in r.stdout, r.stdout


def test_the_faked_clock_really_is_off(s3lect_bin, tmp_path, clean_env):
    """The check above means something only if faketime moves the CLI's clock:
    with a file lock (judged by this machine's clock) a fresh record looks
    10 minutes old."""
    lock = str(tmp_path / "lock.json")
    node = Node(s3lect_bin, tmp_path, lock, "f0", clean_env)
    try:
        wait_for(node.leading, 20, "the node to lead")
        env = dict(clean_env, FAKETIME_DONT_FAKE_MONOTONIC="1")
        r = run([str(s3lect_bin), "status", lock], env, timeout=30)
        assert r.returncode == 0 and "age by this machine's clock" in r.stdout, r.stdout
        assert json.loads(run([str(s3lect_bin), "status", lock, "--json"], env,
                              timeout=30).stdout)["ageClock"] == "local"
        r = run(faked("+600s", [str(s3lect_bin), "status", lock]), env, timeout=30)
        assert r.returncode == 3 and "expired leader f0" in r.stdout, (r.stdout, r.stderr)
    finally:
        node.stop()

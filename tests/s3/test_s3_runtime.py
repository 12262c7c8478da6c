# SPDX-License-Identifier: Apache-2.0
"""The shared runtime against MinIO: many S3 electors in one process.

tests/c/runtime_scale starts the electors (ten per lock) under a low
descriptor limit and reports what the process used while they elected one
leader per lock (docs/threading.md; bench/run footprint measures 10,000).
"""

from __future__ import annotations

import json
import secrets
import subprocess

import pytest

from test_s3_store import env_for


@pytest.fixture(scope="module")
def scale_bin(build_dir):
    p = build_dir / "tests" / "c" / "runtime_scale"
    if not p.exists():
        pytest.fail(f"{p} is missing: build the tests (scripts/build)", pytrace=False)
    return p


def run_scale(minio, clean_env, scale_bin, keys, per_key, max_conns, nofile):
    prefix = f"s3://{minio.bucket}/scale-{secrets.token_hex(4)}/lock"
    env = env_for(minio, clean_env)
    r = subprocess.run([str(scale_bin), prefix, str(keys), str(per_key), str(max_conns),
                        str(nofile), "90"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_600_s3_electors_share_a_few_connections(minio, clean_env, scale_bin):
    # 60 locks x 10 electors, at most 4 connections, 128 descriptors: the old
    # runtime needed two threads, one connection and an eventfd per elector.
    r = run_scale(minio, clean_env, scale_bin, 60, 10, 4, 128)
    assert r["started"] == r["electors"] == 600, r
    assert r["settled"], f"every lock has one leader named by all its electors: {r}"
    assert r["mostLeaders"] <= 1, f"never two leaders on one lock: {r}"
    assert 0 < r["connections"] <= 4, f"at most max_connections to MinIO: {r}"
    # The loop and two callback threads (no worker for S3, no refresher for
    # static keys); one more allowed.
    assert r["threads"] - r["baseThreads"] <= 4, r
    assert r["fds"] - r["baseFds"] <= 16, r
    assert r["leadersAtStop"] == 60, r
    assert r["stopMs"] < 10000, r


def test_connection_limit_is_a_setting(minio, clean_env, scale_bin):
    r = run_scale(minio, clean_env, scale_bin, 20, 5, 1, 64)
    assert r["settled"] and r["mostLeaders"] <= 1, r
    assert r["connections"] == 1, f"max_connections 1: one connection: {r}"

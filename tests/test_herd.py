# SPDX-License-Identifier: Apache-2.0
"""No herds (issue 26 item 6): many electors in one process through a store
outage. While the store refuses connections the process probes it instead of
every elector connecting; when it answers again the electors' requests are
spread, not sent at once; every lock is led again soon, never by two.

tests/c/herd runs 400 electors on 20 locks (short timings) through a counting
proxy (tests/harness/herd.py) in front of a MinIO of this test's own (a pause
would stop the session's MinIO for other tests). Bounds are 5x the steady
rate (bench/run herd measures 1,000 electors at the defaults against 2x and
3x); without the runtime's per-endpoint back-off the outage alone reaches
over 10x.
"""

from __future__ import annotations

import secrets

import pytest

from harness.herd import run_outages
from harness.servers import MinioServer, ServerStartError
from test_s3_store import env_for

# lease, renew, deadline, frequent, infrequent (ms)
TIMINGS = (3000, 1000, 2000, 1000, 15000)


@pytest.fixture
def own_minio():
    try:
        server = MinioServer().start()
    except ServerStartError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def test_outages_are_probed_not_stormed(own_minio, clean_env, build_dir):
    herd = build_dir / "tests" / "c" / "herd"
    if not herd.exists():
        pytest.fail(f"{herd} is missing: build the tests (scripts/build)", pytrace=False)
    prefix = f"s3://{own_minio.bucket}/herd-{secrets.token_hex(4)}/lock"
    r = run_outages(herd, own_minio, env_for(own_minio, clean_env), prefix, keys=20, per_key=20,
                    timings=TIMINGS, steady_s=10, outages=[("down", 5), ("pause", 5)],
                    after_s=8, settle_timeout=60, log=lambda m: None)
    assert r.exit_code == 0 and r.stop_ms is not None, r.stderr
    assert r.steady > 10, f"the steady rate was measured: {r.steady}"
    bound = 5 * r.steady
    for o in r.outages:
        what = f"{o.kind} {o.seconds:g} s (steady {r.steady:.0f}/s): {o.per_second}"
        assert o.during_max <= bound, f"requests + connections in a second of the outage: {what}"
        assert o.after_max <= bound, f"requests in a second after the store is back: {what}"
        # lease + frequent, and generous: the machine is shared.
        limit = 5 * (TIMINGS[0] + TIMINGS[3]) / 1000
        assert o.relead_s is not None and o.relead_s <= limit, f"every lock led again: {what}"
    assert r.most_leaders <= 1, "never two leaders of one lock"


def test_the_footprint_bench_builds_against_this_build(build_dir, tmp_path):
    """Issue 44 item 5: bench/run footprint links libs3lect.a with the
    libraries this build's s3lect.pc names (hiredis where the Redis store is
    built): built here once, so the link cannot rot unseen again."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for p in (root / "bench" / "lib", root / "bench", root / "tests"):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    import footprint  # bench/lib/footprint.py

    exe = footprint.build(Path(build_dir), tmp_path / "footprint")
    r = subprocess.run([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=30)
    assert r.returncode != 0 and "usage: footprint" in r.stderr, (r.returncode, r.stderr)

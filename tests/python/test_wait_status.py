# SPDX-License-Identifier: Apache-2.0
"""wait_for_leadership, wait_for_next_election and status()."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

import s3lect
from pyutil import wait_until


def test_wait_for_leadership_times_out_on_a_follower(electors, s3_lock, s3_settings):
    a = electors(s3_lock, server_id="a", **s3_settings).start()
    assert a.wait_for_leadership(timeout=15) is True
    b = electors(s3_lock, server_id="b", **s3_settings).start()
    t0 = time.monotonic()
    assert b.wait_for_leadership(timeout=1.5) is False
    took = time.monotonic() - t0
    assert 1.4 <= took < 6, f"wait_for_leadership(timeout=1.5) returned after {took:.2f} s"
    t0 = time.monotonic()
    assert b.wait_for_leadership(timedelta(milliseconds=300)) is False
    assert time.monotonic() - t0 < 5
    assert b.wait_for_leadership(timeout=0) is False


def test_wait_for_leadership_returns_when_leadership_arrives(electors, s3_lock, s3_settings):
    a = electors(s3_lock, server_id="a", **s3_settings).start()
    assert a.wait_for_leadership(timeout=15)
    b = electors(s3_lock, server_id="b", **s3_settings).start()
    wait_until(lambda: b.leader_id == "a", 10, "b to see a")
    threading.Timer(0.5, a.stop).start()
    t0 = time.monotonic()
    assert b.wait_for_leadership(timeout=20) is True
    assert b.is_leader
    assert time.monotonic() - t0 < 10


def test_wait_before_start_and_after_stop(electors, s3_lock, s3_settings):
    el = electors(s3_lock, server_id="a", **s3_settings)
    with pytest.raises(s3lect.StateError, match="start"):
        el.wait_for_leadership(timeout=1)
    el.start()
    with pytest.raises(s3lect.StateError, match="already started"):
        el.start()
    el.stop()
    with pytest.raises(s3lect.StoppedError):
        el.wait_for_leadership(timeout=1)
    with pytest.raises(s3lect.StoppedError):
        el.wait_for_next_election(timeout=1)
    with pytest.raises(s3lect.StateError, match="cannot be restarted"):
        el.start()
    el.stop()  # idempotent


def test_stop_wakes_a_waiting_thread(electors, s3_lock, s3_settings):
    a = electors(s3_lock, server_id="a", **s3_settings).start()
    assert a.wait_for_leadership(timeout=15)
    b = electors(s3_lock, server_id="b", **s3_settings).start()
    result = []

    def waiter():
        try:
            result.append(b.wait_for_leadership())
        except BaseException as exc:  # noqa: BLE001
            result.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    b.stop()
    t.join(10)
    assert not t.is_alive(), "wait_for_leadership() did not return after stop()"
    assert isinstance(result[0], s3lect.StoppedError), result
    assert time.monotonic() - t0 < 5


def test_wait_for_next_election(electors, s3_lock, s3_settings):
    el = electors(s3_lock, server_id="a", **s3_settings).start()
    assert el.wait_for_leadership(timeout=15)
    before = el.cycle
    t0 = time.monotonic()
    assert el.wait_for_next_election(timeout=10) is True
    assert el.cycle > before
    # The leader renews every renew_interval (0.5 s): a cycle each time.
    assert time.monotonic() - t0 < 5
    assert el.wait_for_next_election(timeout=0) is False


def test_status_of_leader_and_follower(electors, s3_lock, s3_settings):
    a = electors(s3_lock, server_id="a", server_addr="10.0.0.1:7000", **s3_settings).start()
    assert a.wait_for_leadership(timeout=15)
    b = electors(s3_lock, server_id="b", **s3_settings).start()
    wait_until(lambda: b.leader_id == "a", 10, "b to see a")
    sa, sb = a.status(), b.status()
    now = datetime.now(timezone.utc)

    assert sa.is_leader is True and sa.state is s3lect.State.LEADER
    assert sa.server_id == "a" and sa.leader_id == "a" and sa.leader_addr == "10.0.0.1:7000"
    assert sa.term == a.term >= 1
    assert sa.etag, "leader's status has no etag"
    assert 0 < sa.lease_remaining <= 2.0 + 0.1  # at most renew_deadline
    assert sa.last_updated is not None and abs((now - sa.last_updated).total_seconds()) < 10
    assert sa.last_seen is not None and abs((now - sa.last_seen).total_seconds()) < 10
    assert sa.record_corrupt is False
    assert sa.last_error_code == 0 and sa.last_error == ""
    assert sa.consecutive_failures == 0
    assert sa.cycle >= 1

    assert sb.is_leader is False
    assert sb.state in (s3lect.State.FOLLOWER_STABLE, s3lect.State.FOLLOWER_TRANSITION)
    assert sb.server_id == "b" and sb.leader_id == "a" and sb.leader_addr == "10.0.0.1:7000"
    assert sb.term == sa.term
    assert sb.lease_remaining == 0.0

    with pytest.raises(dataclasses.FrozenInstanceError):
        sa.term = 99  # type: ignore[misc]

    doc = json.loads(a.status_json())
    assert doc["isLeader"] is True and doc["leaderID"] == "a" and doc["term"] == sa.term

    a.stop()
    assert a.status().state is s3lect.State.STOPPED
    assert a.status().is_leader is False


def test_status_reports_a_corrupt_record(electors, s3_lock, minio):
    s3 = minio.client()
    key = s3_lock.split("/", 3)[3]
    assert s3.put(minio.bucket, key, b"this is not json").status == 200
    el = electors(s3_lock, server_id="a", endpoint=minio.endpoint,
                  access_key_id=minio.access_key, secret_access_key=minio.secret_key)
    el.start()
    wait_until(lambda: el.status().record_corrupt, 10, "status to flag the corrupt record")
    assert not el.is_leader
    # The corrupt record is treated as a holder nobody renews: taken over after the lease.
    assert el.wait_for_leadership(timeout=20)
    r = s3.get(minio.bucket, key)
    assert r.status == 200 and json.loads(r.body)["leaderID"] == "a"
    assert el.status().record_corrupt is False

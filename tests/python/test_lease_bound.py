# SPDX-License-Identifier: Apache-2.0
"""max_lease_timeout, the renew_timeout reason and the max_clock_skew default
(libs3lect commit f5c22f6) through the Python binding."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

import s3lect
from s3lect import _core
from pyutil import wait_until


def test_max_lease_timeout_round_trips(tmp_path):
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a", lease_timeout=3,
                        max_lease_timeout=12)
    assert el.get_config()["max_lease_timeout"] == 12.0
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a", lease_timeout=3,
                        max_lease_timeout=timedelta(milliseconds=3500))
    assert el.get_config()["max_lease_timeout"] == 3.5
    # The default reads back as 0 (= 4 x lease_timeout, computed by the core).
    assert s3lect.Elector(f"file://{tmp_path}/l", server_id="a").get_config()[
        "max_lease_timeout"] == 0.0
    el = s3lect.Elector.from_env(f"file://{tmp_path}/l", server_id="a",
                                 environ={"S3LECT_MAX_LEASE_TIMEOUT": "20s"})
    assert el.get_config()["max_lease_timeout"] == 20.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(lease_timeout=3, max_lease_timeout=2),
         "max_lease_timeout (2s) must not be less than lease_timeout (3s)"),
        (dict(max_lease_timeout=86400.001),
         "max_lease_timeout must be between 0 ms and 86400000 ms, got 86400001 ms"),
        (dict(max_lease_timeout=-1), "max_lease_timeout must not be negative"),
    ],
)
def test_max_lease_timeout_bounds_use_the_core_message(tmp_path, kwargs, message):
    with pytest.raises(s3lect.ConfigError) as ei:
        s3lect.Elector(f"file://{tmp_path}/l", server_id="a", **kwargs)
    assert message in str(ei.value)


def test_update_config_keeps_lease_within_max_lease_timeout(electors, tmp_path):
    el = electors(f"file://{tmp_path}/l", server_id="a", lease_timeout=3,
                  max_lease_timeout=4)
    with pytest.raises(s3lect.ConfigError, match=r"max_lease_timeout \(4s\) must not be less "
                                                 r"than lease_timeout \(5s\)"):
        el.update_config(lease_timeout=5, renew_deadline=3, renew_interval=1)
    assert el.get_config()["lease_timeout"] == 3.0, "a rejected update changed something"
    # libs3lect's s3lect_update_config does not apply max_lease_timeout: refused
    # here rather than accepted and silently ignored.
    with pytest.raises(s3lect.ConfigError, match="max_lease_timeout cannot change"):
        el.update_config(max_lease_timeout=8)
    assert el.get_config()["max_lease_timeout"] == 4.0


def test_max_clock_skew_is_off_by_default(tmp_path):
    assert s3lect.Elector(f"file://{tmp_path}/l", server_id="a").get_config()[
        "max_clock_skew"] == 0.0


def _write_atomically(path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp-test")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_hostile_record_is_taken_over_after_max_lease_timeout(electors, tmp_path):
    # The file store keeps the record of lock file:///dir/key in dir/key.
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    hostile = dict(leaderID="hostile", leaderAddr="", lastUpdated=now, term=7,
                   leaseMs=10**15, incarnation="x")
    _write_atomically(tmp_path / "lock", json.dumps(hostile).encode())
    errors, acquired = [], []
    el = electors(f"file://{tmp_path}/lock", server_id="a", lease_timeout=1,
                  renew_deadline=0.6, renew_interval=0.2,
                  max_lease_timeout=2, frequent_interval=0.1, infrequent_interval=0.2,
                  on_error=errors.append, on_acquire=lambda term: acquired.append(term))
    t0 = time.monotonic()
    el.start()
    assert el.wait_for_leadership(timeout=10), "the hostile record blocked the lock"
    took = time.monotonic() - t0
    # The bound is 2 s; without it the default bound would be 4 x 1 s.
    assert 1.9 <= took <= 3.5, f"took over after {took:.2f} s, expected about 2 s"
    assert el.term == 8
    wait_until(lambda: acquired, 5, "on_acquire")
    assert acquired == [8]
    clamped = [e for e in errors if "above max_lease_timeout" in str(e)]
    assert clamped, f"the clamping was not reported: {errors}"
    assert "1000000000000000 ms" in str(clamped[0]) and "2000 ms" in str(clamped[0])
    rec = json.loads((tmp_path / "lock").read_bytes())
    assert (rec["leaderID"], rec["term"], rec["leaseMs"]) == ("a", 8, 1000)


class FailingPuts(s3lect.MemoryStore):
    """A MemoryStore whose puts raise (a transient failure) once told to."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = threading.Event()

    def put(self, key, data, if_match=None):
        if self.failing.is_set():
            raise ConnectionError("store unreachable (test)")
        return super().put(key, data, if_match=if_match)


def test_failing_renewals_lose_with_renew_timeout(electors):
    store = FailingPuts()
    lost, events = [], []
    el = electors("k", server_id="a", store=store, lease_timeout=1.5,
                  renew_deadline=1.0, renew_interval=0.3, frequent_interval=0.2,
                  on_lose=lambda term, reason: lost.append((term, reason)),
                  on_event=events.append)
    el.start()
    assert el.wait_for_leadership(timeout=10)
    term = el.term
    store.failing.set()
    t0 = time.monotonic()
    wait_until(lambda: lost, 5, "on_lose after the store's puts started failing")
    took = time.monotonic() - t0
    assert lost[0] == (term, s3lect.LostReason.RENEW_TIMEOUT), lost
    assert isinstance(lost[0][1], s3lect.LostReason) and lost[0][1] == "renew_timeout"
    # renew_deadline is 1 s.
    assert took <= 2.5, f"stepped down {took:.2f} s after the failures began"
    lost_events = [e for e in events if e.type is s3lect.EventType.LOST]
    assert lost_events[0].reason is s3lect.LostReason.RENEW_TIMEOUT
    assert not el.is_leader


def test_reason_constants_match_the_core():
    for reason in s3lect.LostReason:
        if reason is s3lect.LostReason.UNKNOWN:
            continue
        code = getattr(_core, "S3LECT_LOST_" + reason.name)
        assert _core.s3lect_lost_reason_str(code) == reason.value


def test_unknown_reason_becomes_unknown_not_an_exception():
    calls = []
    # A LOST event with a reason this binding does not know (a newer core).
    t = (_core.S3LECT_EVENT_LOST, 3, 1000, "", "", 0, "", 0)
    ev = s3lect.Event._from_core(t)
    assert ev is not None and ev.reason is s3lect.LostReason.UNKNOWN
    from s3lect._elector import _Dispatch
    import logging

    d = _Dispatch(logging.getLogger("s3lect-test"), None,
                  lambda term, reason: calls.append((term, reason)), None, None, None)
    d.event(t)
    assert calls == [(3, s3lect.LostReason.UNKNOWN)]
    assert not d.callback_errors


@pytest.mark.parametrize("region", ["us east 1", "../../etc", "x" * 65])
def test_region_names_are_validated(tmp_path, region):
    with pytest.raises(s3lect.ConfigError, match="is not a region name"):
        s3lect.Elector("s3://bucket/k", server_id="a", region=region)
    el = s3lect.Elector("s3://bucket/k", server_id="a", region="eu-west_3",
                        access_key_id="AKIDTEST", secret_access_key="throwaway-test-secret")
    assert el.get_config()["region"] == "eu-west_3"

# SPDX-License-Identifier: Apache-2.0
"""A custom store written in pure Python drives the same engine."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

import s3lect
from pyutil import wait_until


class RecordingStore(s3lect.MemoryStore):
    """MemoryStore that records every call and can be told to fail."""

    def __init__(self):
        super().__init__()
        self.calls = []
        self.fail_gets = 0
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            self.calls.append(("get", key, None))
            if self.fail_gets > 0:
                self.fail_gets -= 1
                raise ConnectionError("store temporarily unreachable")
        return super().get(key)

    def put(self, key, data, if_match=None):
        with self.lock:
            self.calls.append(("put", key, if_match))
        return super().put(key, data, if_match=if_match)


def test_three_electors_on_a_python_store_elect_one_leader(electors):
    store = s3lect.MemoryStore()
    els = [electors("leader.json", server_id=f"n{i}", store=store) for i in range(3)]
    for e in els:
        e.start()
    first = wait_until(lambda: [e for e in els if e.is_leader], 15, "a leader")
    assert len(first) == 1
    end = time.monotonic() + 2
    while time.monotonic() < end:
        assert sum(e.is_leader for e in els) <= 1, "two leaders on the custom store"
        time.sleep(0.02)
    leader = first[0]
    data, etag = store.get("leader.json")
    rec = json.loads(data)
    assert rec["leaderID"] == leader.server_id and rec["term"] == leader.term
    leader.stop()
    rest = [e for e in els if e is not leader]
    nxt = wait_until(lambda: [e for e in rest if e.is_leader], 10, "a handover on the custom store")
    assert nxt[0].term == rec["term"] + 1


def test_put_conditions_follow_the_protocol(electors):
    store = RecordingStore()
    el = electors("locks/a.json", server_id="a", store=store).start()
    assert el.wait_for_leadership(timeout=10)
    assert el.wait_for_next_election(timeout=10)  # at least one renewal
    puts = [c for c in store.calls if c[0] == "put"]
    assert puts[0] == ("put", "locks/a.json", "*"), f"first write must be create-only: {puts[0]}"
    assert all(c[2] not in (None, "*") for c in puts[1:]), f"renewals must use If-Match: {puts}"
    assert all(c[1] == "locks/a.json" for c in store.calls), "the key passed to the store"


def test_lost_race_is_reported_as_precondition(electors):
    store = RecordingStore()
    el = electors("k", server_id="a", store=store).start()
    assert el.wait_for_leadership(timeout=10)
    term = el.term
    # Someone else overwrites the record: the leader's next If-Match renewal fails.
    data, _ = store.get("k")
    rec = json.loads(data)
    rec.update(leaderID="intruder", term=term + 1)
    store.put("k", json.dumps(rec).encode(), if_match=None)
    wait_until(lambda: not el.is_leader, 10, "the leader to step down after losing the race")
    wait_until(lambda: el.leader_id == "intruder", 10, "the elector to see the intruder")


def test_store_exceptions_are_transient_and_logged(electors, caplog):
    caplog.set_level(logging.ERROR, logger="s3lect")
    store = RecordingStore()
    store.fail_gets = 3
    el = electors("k", server_id="a", store=store).start()
    assert el.wait_for_leadership(timeout=20), "the elector did not recover from store errors"
    assert "ConnectionError" in caplog.text and "store temporarily unreachable" in caplog.text
    assert any(r.exc_info for r in caplog.records), "store failures logged without traceback"


def test_malformed_store_answers_are_reported(electors):
    class BadStore:
        def get(self, key):
            return "not a tuple"

        def put(self, key, data, if_match=None):
            return ""

    errors = []
    el = electors("k", server_id="a", store=BadStore(), on_error=errors.append).start()
    wait_until(lambda: errors, 10, "an error event about the malformed answer")
    assert "get() must return" in str(errors[0]), errors
    assert not el.is_leader


def test_store_without_methods_is_rejected():
    with pytest.raises(s3lect.ConfigError, match="get"):
        s3lect.Elector("k", server_id="a", store=object())


def test_memory_store_semantics():
    st = s3lect.MemoryStore()
    assert st.get("x") is None
    e1 = st.put("x", b"1", if_match="*")
    with pytest.raises(s3lect.PreconditionFailed):
        st.put("x", b"2", if_match="*")
    with pytest.raises(s3lect.PreconditionFailed):
        st.put("x", b"2", if_match='"stale"')
    e2 = st.put("x", b"2", if_match=e1)
    assert e2 != e1 and st.get("x") == (b"2", e2)
    with pytest.raises(s3lect.PreconditionFailed):
        st.put("missing", b"", if_match=e2)
    assert isinstance(st, s3lect.Store)

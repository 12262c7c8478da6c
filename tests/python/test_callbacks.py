# SPDX-License-Identifier: Apache-2.0
"""Callbacks: veto from on_acquire, callbacks that raise, callbacks that block."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import s3lect
from pyutil import wait_until


class Veto(Exception):
    pass


def test_on_acquire_raising_vetoes_and_releases(electors, s3_lock, s3_settings, caplog):
    calls = []
    lost = []

    def always_veto(term):
        calls.append(term)
        raise Veto(f"not ready for term {term}")

    caplog.set_level(logging.ERROR, logger="s3lect")
    a = electors(s3_lock, server_id="a", on_acquire=always_veto,
                 on_lose=lambda term, reason: lost.append((term, reason)), **s3_settings)
    a.start()
    wait_until(lambda: calls and lost, 15, "a veto and the LOST event that follows it")
    assert lost[0] == (calls[0], s3lect.LostReason.HOOK_FAILED), f"on_lose calls: {lost}"
    # The exception is kept and logged with its traceback.
    assert any(isinstance(e, Veto) for e in a.callback_errors)
    rec = [r for r in caplog.records if "on_acquire" in r.getMessage()]
    assert rec, "the veto was not logged"
    assert rec[0].exc_info and rec[0].exc_info[0] is Veto, "the log record lacks the traceback"
    assert "Veto: not ready" in caplog.text

    # The released lock goes to a node that accepts it.
    b = electors(s3_lock, server_id="b", **s3_settings)
    b.start()
    assert b.wait_for_leadership(timeout=20), "b did not get the lock a kept vetoing"
    assert b.term > calls[0]
    end = time.monotonic() + 2
    while time.monotonic() < end:
        assert not a.is_leader or not b.is_leader, "two leaders"
        time.sleep(0.05)


def test_veto_once_then_accept(electors, s3_lock, s3_settings):
    calls = []

    def veto_first(term):
        calls.append(term)
        if len(calls) == 1:
            raise Veto("first time")

    a = electors(s3_lock, server_id="a", on_acquire=veto_first, **s3_settings)
    a.start()
    wait_until(lambda: len(calls) >= 2, 20, "a second acquisition after the veto")
    assert a.wait_for_leadership(timeout=10)
    assert calls[1] > calls[0], f"terms of the two acquisitions: {calls}"
    assert a.term == calls[1]


def test_raising_callbacks_are_logged_and_harmless(electors, s3_lock, s3_settings, caplog):
    caplog.set_level(logging.ERROR, logger="s3lect")
    seen = []

    def bad_change(leader_id, addr, term):
        seen.append(leader_id)
        raise RuntimeError("boom in on_leader_change")

    def bad_event(ev):
        raise ValueError("boom in on_event")

    el = electors(s3_lock, server_id="a", on_leader_change=bad_change, on_event=bad_event,
                  **s3_settings)
    el.start()
    assert el.wait_for_leadership(timeout=15)
    wait_until(lambda: seen, 10, "on_leader_change to run")
    term = el.term
    # Several renewals later the elector still leads with the same term.
    for _ in range(3):
        assert el.wait_for_next_election(timeout=10)
    assert el.is_leader and el.term == term
    kinds = {type(e) for e in el.callback_errors}
    assert {RuntimeError, ValueError} <= kinds, f"kept errors: {el.callback_errors}"
    assert "boom in on_leader_change" in caplog.text and "Traceback" in caplog.text
    assert all(r.exc_info for r in caplog.records if "callback raised" in r.getMessage())


def test_blocking_callback_does_not_lose_leadership(electors, s3_lock, s3_settings):
    lease = 3.0
    release = threading.Event()
    entered = threading.Event()

    def slow_acquire(term):
        entered.set()
        release.wait(3 * lease)  # far longer than the lease

    a = electors(s3_lock, server_id="a", lease_timeout=lease, renew_interval=0.3,
                 renew_deadline=2.0, on_acquire=slow_acquire, **s3_settings)
    b = electors(s3_lock, server_id="b", lease_timeout=lease, renew_interval=0.3,
                 renew_deadline=2.0, **s3_settings)
    a.start()
    assert entered.wait(15), "on_acquire never ran"
    term = a.term
    b.start()
    try:
        end = time.monotonic() + 2.5 * lease
        while time.monotonic() < end:
            assert a.is_leader, "a lost leadership while its callback blocked"
            assert not b.is_leader, "b took over while a's callback blocked"
            time.sleep(0.05)
    finally:
        release.set()
    assert a.is_leader and a.term == term
    assert b.leader_id == "a"


def test_stop_from_own_callback_raises_busy(electors, s3_lock, s3_settings):
    outcome = []
    box = {}

    def on_acquire(term):
        try:
            box["el"].stop()
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    el = electors(s3_lock, server_id="a", on_acquire=on_acquire, **s3_settings)
    box["el"] = el
    el.start()
    wait_until(lambda: outcome, 15, "on_acquire to try stop()")
    assert isinstance(outcome[0], s3lect.BusyError), outcome
    assert "another thread" in str(outcome[0])
    assert el.wait_for_leadership(timeout=5)  # nothing was stopped
    box.clear()


def test_on_error_receives_typed_errors(electors, minio, s3_settings):
    errors = []
    bad = dict(s3_settings, secret_access_key="wrong-" + minio.secret_key)
    el = electors(f"s3://{minio.bucket}/py/on-error.json", server_id="a",
                  on_error=errors.append, **bad)
    el.start()
    wait_until(lambda: errors, 15, "on_error to be called")
    assert isinstance(errors[0], s3lect.AuthError), errors
    assert errors[0].code == s3lect._core.S3LECT_EAUTH
    assert minio.secret_key not in str(errors[0])


@pytest.mark.parametrize("name", ["on_acquire", "on_lose", "on_leader_change", "on_error"])
def test_non_callable_callback_is_a_config_error(s3_lock, name):
    with pytest.raises(s3lect.ConfigError, match=name):
        s3lect.Elector(s3_lock, server_id="a", **{name: 42})

# SPDX-License-Identifier: Apache-2.0
"""The SWIG layer s3lect._core itself: callback typemaps, GIL, references."""

from __future__ import annotations

import sys
import threading

import pytest

from s3lect import _core as c
from pyutil import wait_until


def make(lock: str, server_id: str = "low"):
    cfg = c.s3lect_config_new()
    try:
        assert c.s3lect_config_set_str(cfg, c.S3LECT_OPT_LOCK, lock) == 0
        assert c.s3lect_config_set_str(cfg, c.S3LECT_OPT_SERVER_ID, server_id) == 0
        for opt, ms in ((c.S3LECT_OPT_LEASE_TIMEOUT, 3000), (c.S3LECT_OPT_RENEW_DEADLINE, 2000),
                        (c.S3LECT_OPT_RENEW_INTERVAL, 500), (c.S3LECT_OPT_FREQUENT_INTERVAL, 200)):
            assert c.s3lect_config_set_int(cfg, opt, ms) == 0
        rc, e = c.s3lect_new(cfg)
        assert rc == 0, c.s3lect_py_config_errmsg(cfg)
        return e
    finally:
        c.s3lect_config_free(cfg)


def test_trampolines_report_exceptions_and_veto(tmp_path, monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(u))
    events = []
    hook_calls = []

    def on_event(t):
        events.append(t)
        if t[0] == c.S3LECT_EVENT_CYCLE:
            raise KeyError("raised in a C-called callback")

    def hook(t):
        hook_calls.append(t)
        return len(hook_calls) > 1  # False vetoes the first acquisition

    e = make(f"file://{tmp_path}/l")
    try:
        for kind in (c.S3LECT_EVENT_ACQUIRED, c.S3LECT_EVENT_LOST, c.S3LECT_EVENT_CYCLE):
            assert c.s3lect_set_callback(e, kind, on_event) == 0
        assert c.s3lect_set_acquire_hook(e, hook) == 0
        assert c.s3lect_start(e) == 0
        assert c.s3lect_wait_for_leadership(e, 15000) == 0
        wait_until(lambda: any(t[0] == c.S3LECT_EVENT_ACQUIRED for t in events), 10,
                   "the ACQUIRED event after the veto")
    finally:
        assert c.s3lect_free_elector(e) == 0  # stops; releases the GIL while joining
    lost = [t for t in events if t[0] == c.S3LECT_EVENT_LOST]
    assert lost[0][2] == c.S3LECT_LOST_HOOK_FAILED, lost
    assert lost[-1][2] == c.S3LECT_LOST_STOPPED, lost
    acquired = [t for t in events if t[0] == c.S3LECT_EVENT_ACQUIRED]
    assert acquired[0][1] == hook_calls[1][1] > hook_calls[0][1], (acquired, hook_calls)
    # event tuples: (type, term, reason, leader_id, leader_addr, code, message, cycle)
    assert acquired[0][3] == "low" and isinstance(acquired[0][7], int)
    assert unraisable and isinstance(unraisable[0].exc_value, KeyError)
    assert unraisable[0].exc_traceback is not None


def test_userdata_free_drops_the_reference(tmp_path):
    def cb(t):
        pass

    before = sys.getrefcount(cb)
    e = make(f"file://{tmp_path}/l")
    assert c.s3lect_set_callback(e, c.S3LECT_EVENT_CYCLE, cb) == 0
    assert c.s3lect_set_acquire_hook(e, cb) == 0
    assert sys.getrefcount(cb) == before + 2
    assert c.s3lect_set_callback(e, c.S3LECT_EVENT_CYCLE, cb) == 0  # replacement frees the old
    assert sys.getrefcount(cb) == before + 2
    assert c.s3lect_free_elector(e) == 0
    assert sys.getrefcount(cb) == before


def test_callback_typemaps_check_types(tmp_path):
    e = make(f"file://{tmp_path}/l")
    try:
        with pytest.raises(TypeError, match="callable"):
            c.s3lect_set_callback(e, c.S3LECT_EVENT_CYCLE, 42)
        cfg = c.s3lect_config_new()
        with pytest.raises(TypeError, match="get"):
            c.s3lect_config_set_custom_store(cfg, object())
        c.s3lect_config_free(cfg)
    finally:
        c.s3lect_free_elector(e)


def test_blocking_calls_release_the_gil(tmp_path):
    """While one thread blocks in a C wait, other Python threads keep running."""
    a = make(f"file://{tmp_path}/l", "a")
    b = make(f"file://{tmp_path}/l", "b")
    try:
        assert c.s3lect_start(a) == 0
        assert c.s3lect_wait_for_leadership(a, 15000) == 0
        assert c.s3lect_start(b) == 0
        counter = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                counter[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        try:
            rc = c.s3lect_wait_for_leadership(b, 1000)  # b follows: times out
        finally:
            stop.set()
            t.join()
        assert rc == c.S3LECT_ETIMEDOUT
        assert counter[0] > 1000, "the other thread did not run: the GIL was held"
    finally:
        c.s3lect_free_elector(b)
        c.s3lect_free_elector(a)


def test_helpers_return_str(tmp_path):
    e = make(f"file://{tmp_path}/l")
    try:
        assert c.s3lect_py_leader_id(e) == ""
        assert isinstance(c.s3lect_py_errmsg(e), str)
        rc, js = c.s3lect_status_json(e)
        assert rc == 0 and js.startswith("{")
        assert c.s3lect_strerror(c.S3LECT_EAUTH)
    finally:
        c.s3lect_free_elector(e)

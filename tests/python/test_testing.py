# SPDX-License-Identifier: Apache-2.0
"""s3lect.testing (docs/testing-your-code.md): the s3lect_clock and mem_lock
fixtures of the pytest plugin the package ships, electors in virtual time run
by Clock.advance in the test's thread (acquire, lose and regain through
mem_fail, hand over on stop, take over after a crash), the same run twice,
the refusals, and a mem:// lock on the system's clock. No server."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Tuple

import pytest

import s3lect
import s3lect.testing
from s3lect.testing import Clock, mem_fail, mem_reset, new_mem_lock

# The fixtures s3lect_clock and mem_lock, as an application's conftest.py takes them.
pytest_plugins = ["s3lect.testing"]

FAST: Dict[str, Any] = dict(lease_timeout=0.3, renew_interval=0.1, renew_deadline=0.2,
                            frequent_interval=0.05, infrequent_interval=0.15, new_lock_wait=0)


# bindings/python/README.md's "Testing your leader logic", as written there.
def test_job_runs_only_while_leading(s3lect_clock, mem_lock):
    job = set()
    el = s3lect.Elector(mem_lock, server_id="a", clock=s3lect_clock, lease_timeout=0.3,
                        new_lock_wait=0, on_acquire=lambda term: job.add("run"),
                        on_lose=lambda term, reason: job.discard("run"))
    el.start()
    s3lect_clock.advance(0)
    assert job                                  # leads at once
    s3lect.testing.mem_fail(mem_lock, 10**6)    # the store goes down
    s3lect_clock.advance(0.3)
    assert not job                              # lost: no renewal
    s3lect.testing.mem_fail(mem_lock, 0)        # the store is back
    s3lect_clock.advance(5)
    assert job                                  # leads again
    el.stop()
    assert not job


def test_virtual_time_in_this_thread(s3lect_clock: Clock, mem_lock: str) -> None:
    log: List[Tuple[float, str, str, int]] = []
    threads = set()

    def node(name: str, **kw: Any) -> s3lect.Elector:
        def on_acquire(term: int) -> None:
            threads.add(threading.get_ident())
            log.append((s3lect_clock.now, name, "acquired", term))

        def on_lose(term: int, reason: s3lect.LostReason) -> None:
            log.append((s3lect_clock.now, name, "lost", term))

        return s3lect.Elector(mem_lock, server_id=name, clock=s3lect_clock, on_acquire=on_acquire,
                              on_lose=on_lose, **FAST, **kw)

    a = node("a").start()
    assert not a.is_leader and not log, "nothing runs before an advance"
    s3lect_clock.advance(0)
    assert a.is_leader and log == [(0.0, "a", "acquired", log[0][3])]
    assert threads == {threading.get_ident()}, "callbacks run in the advancing thread"
    b = node("b").start()
    for _ in range(100):  # ten virtual seconds
        s3lect_clock.advance(0.1)
        assert a.is_leader and not b.is_leader
    assert abs(s3lect_clock.now - 10.0) < 1e-9

    # Hand over: stop writes the release at once; b takes it at its next read.
    t0 = s3lect_clock.now
    a.stop()
    assert log[-1][1:3] == ("a", "lost") and s3lect_clock.now == t0
    while not b.is_leader and s3lect_clock.now < t0 + 1:
        s3lect_clock.advance(0.01)
    assert b.is_leader and s3lect_clock.now - t0 <= 0.2 + 1e-9

    # A crash (no release): c takes over only once the lease is over.
    c = node("c").start()
    s3lect_clock.advance(1)
    t0 = s3lect_clock.now
    b.stop(release=False)
    while not c.is_leader and s3lect_clock.now < t0 + 2:
        s3lect_clock.advance(0.005)
        assert not (b.is_leader and c.is_leader)
    took = s3lect_clock.now - t0
    assert c.is_leader and 0.2 <= took <= 0.75, took
    c.stop()


def test_advance_from_a_callback_is_refused(s3lect_clock: Clock, mem_lock: str) -> None:
    seen: List[BaseException] = []

    def on_acquire(term: int) -> None:
        try:
            s3lect_clock.advance(1)
        except s3lect.BusyError as exc:
            seen.append(exc)

    el = s3lect.Elector(mem_lock, server_id="a", clock=s3lect_clock, on_acquire=on_acquire,
                        **FAST).start()
    s3lect_clock.advance(0)
    assert el.is_leader and len(seen) == 1 and s3lect_clock.now == 0
    el.stop()


def _run(seed_name: str) -> List[Tuple[float, str, str, int]]:
    log: List[Tuple[float, str, str, int]] = []
    url = f"mem://{seed_name}"
    mem_reset(url)
    with Clock(wall_start=1_700_000_000) as clock:
        def node(name: str) -> s3lect.Elector:
            return s3lect.Elector(
                url, server_id=name, clock=clock,
                on_acquire=lambda t: log.append((clock.now, name, "acquired", t)),
                on_lose=lambda t, r: log.append((clock.now, name, "lost", t)), **FAST).start()
        els = [node(f"n{i}") for i in range(3)]
        for step in range(600):  # a virtual minute, a node replaced every 5 s
            clock.advance(0.1)
            assert sum(e.is_leader for e in els) <= 1
            if step % 50 == 49:
                k = (step // 50) % 3
                els[k].stop(release=bool(step % 100 == 49))
                els[k] = node(f"n{k}-{step}")
        for e in els:
            e.stop()
    return log


def test_the_same_run_twice() -> None:
    first, second = _run("py-again"), _run("py-again")
    assert len(first) >= 8 and first == second


def test_refused_and_closed(mem_lock: str, tmp_path: Any) -> None:
    with Clock() as clock:
        with pytest.raises(s3lect.ConfigError, match="mem://"):
            s3lect.Elector(f"file://{tmp_path}/lock.json", server_id="a", clock=clock)
        with pytest.raises(s3lect.ConfigError, match="peer mode"):
            s3lect.Elector(mem_lock, server_id="a", clock=clock, peer_mode=True)
        with pytest.raises(s3lect.ConfigError, match="Clock"):
            s3lect.Elector(mem_lock, server_id="a", clock=object())
        el = s3lect.Elector(mem_lock, server_id="a", clock=clock, **FAST).start()
    # The clock closed before its elector: the elector keeps it.
    with pytest.raises(s3lect.ConfigError, match="closed"):
        clock.advance(1)
    el.stop()
    with pytest.raises(s3lect.ConfigError):
        mem_fail(mem_lock, -1)
    with pytest.raises(s3lect.ConfigError):
        mem_reset("mem://bad name")
    assert new_mem_lock() != new_mem_lock()


def test_mem_lock_on_the_system_clock(mem_lock: str) -> None:
    a = s3lect.Elector(mem_lock, server_id="a", **FAST).start()
    b = s3lect.Elector(mem_lock, server_id="b", **FAST)
    try:
        assert a.wait_for_leadership(timeout=5)
        b.start()
        time.sleep(0.4)
        assert a.is_leader and not b.is_leader
        a.stop()
        assert b.wait_for_leadership(timeout=5)
    finally:
        a.stop()
        b.stop()

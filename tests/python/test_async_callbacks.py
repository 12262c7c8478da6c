# SPDX-License-Identifier: Apache-2.0
"""async def callbacks: run on the elector's event loop, in order, awaited."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import warnings

import pytest

import s3lect
from pyutil import FAST

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def _never_awaited(caught):
    return [str(w.message) for w in caught
            if issubclass(w.category, RuntimeWarning) and "never awaited" in str(w.message)]


def test_async_callbacks_run_in_order_on_the_loop(tmp_path):
    seen = []
    active = []
    overlap = []

    async def main():
        loop_thread = threading.get_ident()

        async def track(kind, *args):
            if active:
                overlap.append((kind, list(active)))
            active.append(kind)
            assert threading.get_ident() == loop_thread, "not run on the event loop's thread"
            await asyncio.sleep(0.05)  # something awaited inside the callback
            seen.append((kind,) + args)
            active.remove(kind)

        async def on_acquire(term):
            await track("ACQUIRED", term)

        async def on_lose(term, reason):
            await track("LOST", term, reason)

        async def on_leader_change(leader_id, addr, term):
            await track("LEADER_CHANGED", leader_id)

        async def on_event(ev):
            if ev.type is not s3lect.EventType.CYCLE:
                await track("event:" + ev.type.name)

        el = s3lect.Elector(f"file://{tmp_path}/lock", server_id="a", on_acquire=on_acquire,
                            on_lose=on_lose, on_leader_change=on_leader_change,
                            on_event=on_event, **FAST)
        async with el:
            assert await el.wait_for_leadership_async(timeout=15)
            deadline = time.monotonic() + 10
            while not any(k[0] == "ACQUIRED" for k in seen):
                assert time.monotonic() < deadline, f"on_acquire did not finish: {seen}"
                await asyncio.sleep(0.02)
            term = el.term
        # async with stops through stop_async(): on_lose(term, "stopped") has
        # been awaited before it returns.
        assert ("LOST", term, s3lect.LostReason.STOPPED) in seen, seen
        return term

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        term = asyncio.run(main())
        gc.collect()
    assert not _never_awaited(caught), _never_awaited(caught)
    kinds = [k[0] for k in seen]
    assert kinds.index("ACQUIRED") < kinds.index("LOST"), kinds
    assert ("ACQUIRED", term) in seen
    assert "event:ACQUIRED" in kinds and "event:LOST" in kinds
    assert kinds.index("event:ACQUIRED") < kinds.index("LOST") < kinds.index("event:LOST"), kinds
    assert not overlap, f"callbacks of one elector overlapped: {overlap}"


def test_async_on_acquire_raising_vetoes(tmp_path):
    calls = []
    lost = []

    async def main():
        async def on_acquire(term):
            await asyncio.sleep(0.01)
            calls.append(term)
            if len(calls) == 1:
                raise RuntimeError("not ready yet")

        async def on_lose(term, reason):
            lost.append((term, reason))

        el = s3lect.Elector(f"file://{tmp_path}/lock", server_id="a", on_acquire=on_acquire,
                            on_lose=on_lose, **FAST)
        async with el:
            deadline = time.monotonic() + 15
            while len(calls) < 2:
                assert time.monotonic() < deadline, f"no second acquisition: {calls} {lost}"
                await asyncio.sleep(0.05)
            assert await el.wait_for_leadership_async(timeout=10)
            return el

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        el = asyncio.run(main())
        gc.collect()
    assert not _never_awaited(caught)
    assert lost[0] == (calls[0], s3lect.LostReason.HOOK_FAILED), lost
    assert calls[1] > calls[0]
    assert any(isinstance(e, RuntimeError) and "not ready" in str(e) for e in el.callback_errors)


def test_async_callback_without_a_loop_is_refused_at_start(tmp_path):
    async def on_lose(term, reason):
        pass

    el = s3lect.Elector(f"file://{tmp_path}/lock", server_id="a", on_lose=on_lose, **FAST)
    with pytest.raises(s3lect.ConfigError, match="event loop") as info:
        el.start()
    assert "on_lose" in str(info.value)
    assert not el.started


def test_explicit_loop_in_another_thread(tmp_path):
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    ran_on = []
    try:
        async def on_acquire(term):
            await asyncio.sleep(0.01)
            ran_on.append(threading.current_thread())

        el = s3lect.Elector(f"file://{tmp_path}/lock", server_id="a", on_acquire=on_acquire,
                            loop=loop, **FAST)
        with el:  # started from a thread with no running loop
            assert el.wait_for_leadership(timeout=15)
            deadline = time.monotonic() + 10
            while not ran_on:
                assert time.monotonic() < deadline, "on_acquire did not run"
                time.sleep(0.02)
        assert ran_on == [t]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
        loop.close()


def test_plain_callback_returning_a_coroutine_is_awaited(tmp_path):
    done = []

    async def later(term):
        await asyncio.sleep(0.01)
        done.append(term)

    async def main():
        el = s3lect.Elector(f"file://{tmp_path}/lock", server_id="a",
                            on_acquire=lambda term: later(term), **FAST)
        async with el:
            assert await el.wait_for_leadership_async(timeout=15)
            deadline = time.monotonic() + 10
            while not done:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    assert done and not _never_awaited(caught)


def test_blocking_stop_on_the_loop_thread_does_not_deadlock(tmp_path):
    lost = []

    async def main():
        async def on_lose(term, reason):
            await asyncio.sleep(0.01)
            lost.append(reason)

        el = s3lect.Elector(f"file://{tmp_path}/lock", server_id="a", on_lose=on_lose, **FAST)
        el.start()
        assert await el.wait_for_leadership_async(timeout=15)
        el.stop()  # blocks the loop: on_lose's coroutine runs after it returns
        for _ in range(200):
            if lost:
                break
            await asyncio.sleep(0.02)

    result = []
    t = threading.Thread(target=lambda: result.append(asyncio.run(main())), daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "stop() on the event loop's thread deadlocked"
    assert result == [None]
    assert lost == [s3lect.LostReason.STOPPED]

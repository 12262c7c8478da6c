# SPDX-License-Identifier: Apache-2.0
"""asyncio helpers: awaitable waits and the async event iterator."""

from __future__ import annotations

import asyncio
import time

import pytest

import s3lect
from pyutil import FAST


def test_wait_for_leadership_async_and_events(s3_lock, s3_settings):
    async def main():
        el = s3lect.Elector(s3_lock, server_id="a", **FAST, **s3_settings)
        stream = None
        async with el:
            stream = el.events()
            ticks = 0

            async def ticker():  # proves the loop keeps running while we wait
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            tick_task = asyncio.ensure_future(ticker())
            assert await el.wait_for_leadership_async(timeout=15) is True
            assert await el.wait_for_next_election_async(timeout=10) is True
            tick_task.cancel()
            assert ticks > 0
        kinds = [ev.type async for ev in stream]  # ends because the elector stopped
        return el, kinds

    el, kinds = asyncio.run(main())
    assert el.stopped
    assert s3lect.EventType.ACQUIRED in kinds and s3lect.EventType.LOST in kinds, kinds
    assert kinds.index(s3lect.EventType.ACQUIRED) < kinds.index(s3lect.EventType.LOST)
    assert s3lect.EventType.CYCLE in kinds


def test_async_wait_times_out_and_can_be_cancelled(electors, s3_lock, s3_settings):
    a = electors(s3_lock, server_id="a", **s3_settings).start()
    assert a.wait_for_leadership(timeout=15)
    b = electors(s3_lock, server_id="b", **s3_settings).start()

    async def main():
        t0 = time.monotonic()
        assert await b.wait_for_leadership_async(timeout=0.8) is False
        assert time.monotonic() - t0 >= 0.7
        task = asyncio.ensure_future(b.wait_for_leadership_async())
        await asyncio.sleep(0.3)
        t1 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t1

    assert asyncio.run(main()) < 2


def test_events_need_a_running_loop(electors, tmp_path):
    el = electors(f"file://{tmp_path}/l", server_id="a")
    with pytest.raises(RuntimeError, match="coroutine"):
        el.events()


def test_event_stream_of_a_stopped_elector_ends_at_once(electors, tmp_path):
    el = electors(f"file://{tmp_path}/l", server_id="a").start()
    el.stop()

    async def main():
        return [ev async for ev in el.events()]

    assert asyncio.run(asyncio.wait_for(main(), 5)) == []

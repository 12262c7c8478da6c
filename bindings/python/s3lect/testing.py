# SPDX-License-Identifier: Apache-2.0
"""Test helpers: test your leader logic deterministically and fast
(docs/testing-your-code.md).

* ``mem://NAME`` locks live in this process's memory: every elector of the
  process that names the same NAME shares them. :func:`mem_reset` drops
  them, :func:`mem_fail` makes the next requests fail as an outage would.
* A :class:`Clock` is virtual time: electors made with ``clock=`` are run by
  :meth:`Clock.advance`, in the calling thread (their callbacks too), and
  nothing happens between two advances. Sub-second leases are fine.

With pytest this module is a plugin with two fixtures, ``s3lect_clock`` (a
fresh :class:`Clock`) and ``mem_lock`` (a fresh ``mem://`` lock URL, dropped
after the test): ``pytest_plugins = ["s3lect.testing"]`` in your
``conftest.py`` (or your test module) takes them::

    def test_job_runs_only_while_leading(s3lect_clock, mem_lock):
        job = set()
        el = s3lect.Elector(mem_lock, server_id="a", clock=s3lect_clock,
                            lease_timeout=0.3, new_lock_wait=0,
                            on_acquire=lambda term: job.add("running"),
                            on_lose=lambda term, why: job.discard("running"))
        el.start()
        s3lect_clock.advance(0)
        assert job                      # leads at once
        s3lect.testing.mem_fail(mem_lock, 10**6)
        s3lect_clock.advance(0.3)
        assert not job                  # the store is down: lost

(PYTEST_DONT_REWRITE: the plugin has no asserts of its own, and a test
module that imports it before pytest loads it gets no warning.)
"""

from __future__ import annotations

import itertools
import os
from datetime import datetime, timedelta
from typing import Any, Iterator, Union

from . import _core
from ._config import Duration, to_ms
from ._errors import BusyError, ConfigError, error_from_code

__all__ = ["Clock", "mem_reset", "mem_fail", "new_mem_lock"]

_names = itertools.count(1)


def _mem_name(lock: str) -> str:
    """The NAME of ``mem://NAME[/KEY]``, or NAME itself."""
    if lock.lower().startswith("mem://"):
        return lock[len("mem://"):].split("/", 1)[0]
    return lock


def mem_reset(lock: str) -> None:
    """Drops every object of ``mem://NAME`` (give the URL or NAME): a fresh
    store for the next test. Electors still using it see the lock missing."""
    rc = _core.s3lect_mem_reset(_mem_name(lock))
    if rc != _core.S3LECT_OK:
        raise ConfigError(f"mem_reset: {lock!r} is no mem:// lock or name")


def mem_fail(lock: str, n: int) -> None:
    """The next ``n`` requests (reads or writes, of any elector) to
    ``mem://NAME`` fail as a store outage does; ``n = 0`` ends it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"mem_fail: n must be a whole number >= 0, not {n!r}")
    rc = _core.s3lect_mem_fail(_mem_name(lock), n)
    if rc != _core.S3LECT_OK:
        raise ConfigError(f"mem_fail: {lock!r} is no mem:// lock or name")


def new_mem_lock(prefix: str = "test") -> str:
    """A ``mem://`` lock URL no other lock of this process has used."""
    return f"mem://{prefix}-{os.getpid()}-{next(_names)}"


class Clock:
    """A virtual clock: virtual time in seconds, from 0.

    Electors made with ``Elector(..., clock=clock)`` (a ``mem://`` lock, no
    peer mode) are not run by libs3lect's threads: :meth:`advance` runs every
    step due in that much virtual time, in order, in the calling thread --
    their store requests and their callbacks. ``start()`` schedules an
    elector's first step at the current virtual time (``advance(0)`` runs
    it); ``stop()`` writes the release at once. The same test runs the same
    way every time.

    Args:
        wall_start: what the electors' wall clock reads at virtual time 0:
            seconds since the epoch or a ``datetime`` [0].
    """

    def __init__(self, wall_start: Union[float, datetime] = 0) -> None:
        if isinstance(wall_start, datetime):
            wall_ms = int(round(wall_start.timestamp() * 1000))
        elif isinstance(wall_start, (int, float)) and not isinstance(wall_start, bool):
            wall_ms = int(round(wall_start * 1000))
        else:
            raise ConfigError(f"wall_start must be seconds since the epoch or a datetime, "
                              f"not {wall_start!r}")
        self._handle: Any = _core.s3lect_clock_new(wall_ms)
        if self._handle is None:
            raise MemoryError("s3lect_clock_new failed")

    def _h(self) -> Any:
        if self._handle is None:
            raise ConfigError("this Clock was closed")
        return self._handle

    def advance(self, seconds: Duration) -> None:
        """Runs the electors on this clock through ``seconds`` (or a
        ``timedelta``) of virtual time, in this thread.

        Raises:
            BusyError: from a callback run by an advance of this clock.
        """
        rc = _core.s3lect_clock_advance(self._h(), to_ms("advance", seconds))
        if rc == _core.S3LECT_EBUSY:
            raise BusyError("Clock.advance() was called from a callback that an advance of the "
                            "same clock runs; advance from the test's own code")
        if rc != _core.S3LECT_OK:
            raise error_from_code(rc, "s3lect_clock_advance failed")

    @property
    def now(self) -> float:
        """The virtual time in seconds (in a callback: the time of its event)."""
        return int(_core.s3lect_clock_now(self._h())) / 1000.0

    def set_latency(self, seconds: Duration) -> None:
        """Every store request is answered this long after it is sent [0]."""
        rc = _core.s3lect_clock_set_latency(self._h(), to_ms("latency", seconds))
        if rc != _core.S3LECT_OK:
            raise error_from_code(rc, "s3lect_clock_set_latency failed")

    def close(self) -> None:
        """Lets go of the clock; electors made on it keep it as long as they need."""
        h, self._handle = self.__dict__.get("_handle"), None
        if h is not None:
            _core.s3lect_clock_free(h)

    def __enter__(self) -> "Clock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: modules may be gone
            pass

    def __repr__(self) -> str:
        return f"<s3lect.testing.Clock at {timedelta(seconds=self.now) if self._handle else '-'}>"


try:  # the pytest plugin: only where pytest is installed
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def s3lect_clock() -> Iterator[Clock]:
        """A fresh virtual :class:`Clock` at 0, closed after the test."""
        clock = Clock()
        try:
            yield clock
        finally:
            clock.close()

    @pytest.fixture
    def mem_lock() -> Iterator[str]:
        """A fresh ``mem://`` lock URL, its store dropped after the test."""
        url = new_mem_lock()
        try:
            yield url
        finally:
            mem_reset(url)

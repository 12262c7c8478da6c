# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the Python binding's tests."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict

import pytest

#: Short timings for tests (seconds); bounds in assertions stay generous.
FAST: Dict[str, float] = dict(
    lease_timeout=3.0,
    renew_interval=0.5,
    renew_deadline=2.0,
    frequent_interval=0.5,
    infrequent_interval=1.0,
    request_timeout=5.0,
    new_lock_wait=0.0,  # a lock name of its own: no leader can be running
)


def wait_until(cond: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    """Polls cond() until it returns a truthy value; fails the test with
    `what` after `timeout` seconds. Returns that value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)

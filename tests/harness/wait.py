# SPDX-License-Identifier: Apache-2.0
"""Waiting on a condition with a deadline (never sleep-and-hope)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float, what: str, step: float = 0.05) -> T:
    """Polls cond() every `step` seconds until it returns something truthy and
    returns that; raises AssertionError naming `what` after `timeout` seconds
    (cond is asked at least once, and once more at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)

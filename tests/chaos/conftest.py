# SPDX-License-Identifier: Apache-2.0
"""Chaos suite: summary lines printed at the end of the pytest run."""

from __future__ import annotations

import pytest


def _lines(config: pytest.Config) -> list[str]:
    return config.__dict__.setdefault("_s3lect_chaos_summary", [])


@pytest.fixture
def chaos_summary(request: pytest.FixtureRequest) -> list[str]:
    """Lines the chaos test wants printed in pytest's terminal summary."""
    return _lines(request.config)


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    lines = _lines(config)
    if lines:
        terminalreporter.section("chaos")
        for line in lines:
            terminalreporter.write_line(line)

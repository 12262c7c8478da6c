# SPDX-License-Identifier: Apache-2.0
"""tests/data/config_table.txt through the Python binding: each case's values
as S3LECT_* variables of Elector.from_env (parsed by libs3lect), the effective
settings from get_config(); the same values or error texts as C, the CLI, Go
and Lua."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import s3lect
from s3lect import _config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.config_table import cases  # noqa: E402


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.id)
def test_config_table(case, tmp_path):
    environ = {"S3LECT_" + name.upper(): text for name, text in case.given.items()}
    if case.error is not None:
        with pytest.raises(s3lect.ConfigError) as ei:
            s3lect.Elector.from_env(f"file://{tmp_path}/l", server_id="a", environ=environ)
        assert case.error in str(ei.value)
        return
    el = s3lect.Elector.from_env(f"file://{tmp_path}/l", server_id="a", environ=environ)
    try:
        got = el.get_config()
    finally:
        el.close()
    for name, value in case.want.items():
        unit = 1000 if name in _config.DURATION_NAMES else 1  # seconds here, ms in the table
        assert round(got[name] * unit) == value, (name, got[name])


@pytest.mark.parametrize("kwargs,want", [
    ({"infrequent_interval": 1}, {"frequent_interval": 1.0, "infrequent_interval": 1.0}),
    ({"lease_timeout": 3}, {"renew_deadline": 2.0, "renew_interval": 1.0}),
    ({"frequent_interval": 45}, {"infrequent_interval": 45.0}),
])
def test_keywords_get_the_library_derivation(kwargs, want, tmp_path):
    """Keyword settings (seconds) are derived by libs3lect as the CLI's flags are."""
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a", **kwargs)
    try:
        got = el.get_config()
    finally:
        el.close()
    assert {k: got[k] for k in want} == want

# SPDX-License-Identifier: Apache-2.0
"""tests/data/config_table.txt through the Python binding: each case's values
as S3LECT_* variables of Elector.from_env (parsed by libs3lect), the effective
settings from get_config(); the same values or error texts as C, the CLI, Go
and Lua. Then tests/data/env_table.txt: each case's variables as the environ
of Elector.from_env."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import s3lect
from s3lect import _config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.config_table import cases, env_cases  # noqa: E402


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


@pytest.mark.parametrize("case", env_cases(), ids=lambda c: c.id)
def test_env_table(case, tmp_path, monkeypatch):
    # A store other than a file (the DynamoDB case) opens with credentials:
    # throwaway ones in the process's environment, where the library reads them.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTHROWAWAY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "throwaway")
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    environ = dict(case.variables)
    lock = None if "S3LECT_LOCK" in environ else f"file://{tmp_path}/l"
    ids = {} if {"S3LECT_SERVER_ID", "S3LECT_ID"} & set(environ) else {"server_id": "a"}
    if case.error is not None:
        with pytest.raises(s3lect.ConfigError) as ei:
            s3lect.Elector.from_env(lock, environ=environ, **ids)
        assert case.error in str(ei.value)
        return
    el = s3lect.Elector.from_env(lock, environ=environ, **ids)
    try:
        got = dict(el.get_config(), server_id=el.server_id)
    finally:
        el.close()
    for name, value in case.want.items():
        v = got[name]
        if name in _config.DURATION_NAMES:
            v = round(v * 1000)
        elif isinstance(v, bool):
            v = int(v)
        elif v is None:
            v = ""
        assert str(v) == value, (name, got[name])


def test_docs_list_every_variable_of_the_map():
    """docs/cli.md's table of variables names each option's variable and
    alias from libs3lect's map (s3lect_option_env), and the map names only
    S3LECT_* variables, none for a secret but PEM material."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    seen = 0
    for name, info in _config.OPTIONS.items():
        rc, var, alias = s3lect._core.s3lect_option_env(info.opt)
        assert rc == 0
        for v in (var, alias):
            if v is None:
                continue
            seen += 1
            assert v.startswith("S3LECT_"), (name, v)
            assert f"`{v}`" in docs, f"docs/cli.md does not list {v} ({name})"
        if info.flags & s3lect._core.S3LECT_OPTION_SECRET and info.type != s3lect._core.S3LECT_OPTION_BYTES:
            assert var is None and alias is None, f"{name} is a secret with a variable"
    assert seen >= 30, seen
    assert s3lect._core.s3lect_option_env(0)[0] == s3lect._core.S3LECT_EINVAL

# SPDX-License-Identifier: Apache-2.0
"""The option table comes from libs3lect (s3lect_option_info), and the binding
covers every option the library reports."""

from __future__ import annotations

import inspect

import pytest

import s3lect
from s3lect import _config, _core

TYPES = {
    _core.S3LECT_OPTION_STR,
    _core.S3LECT_OPTION_INT,
    _core.S3LECT_OPTION_BOOL,
    _core.S3LECT_OPTION_BYTES,
}


def library_options():
    """(opt, name, type, min, max, default) of every option, straight from the core."""
    out = []
    for opt in range(1, _core.s3lect_option_count() + 1):
        rc, name, typ, lo, hi, default = _core.s3lect_option_info(opt)
        assert rc == _core.S3LECT_OK, f"option {opt}: s3lect_option_info returned {rc}"
        out.append((opt, name, typ, lo, hi, default))
    return out


def test_swig_option_info_and_by_name():
    opts = library_options()
    assert len(opts) == _core.s3lect_option_count() >= _core.S3LECT_OPT_MAX_LEASE_TIMEOUT
    for opt, name, typ, lo, hi, default in opts:
        assert isinstance(name, str) and name, f"option {opt} has no name"
        assert typ in TYPES, f"{name}: type {typ}"
        assert _core.s3lect_option_by_name(name) == opt
        assert lo <= hi
    assert tuple(_core.s3lect_option_info(_core.S3LECT_OPT_LEASE_TIMEOUT)) == (
        _core.S3LECT_OK, "lease_timeout", _core.S3LECT_OPTION_INT, 100, 86400000, 15000
    )
    for bad in (0, -1, _core.s3lect_option_count() + 1):
        rc, name, *_ = _core.s3lect_option_info(bad)
        assert rc == _core.S3LECT_EINVAL and name is None
    assert _core.s3lect_option_by_name("no_such_option") == 0
    assert _core.s3lect_option_by_name("") == 0


def test_config_table_is_the_library_table():
    opts = library_options()
    assert set(_config.OPTIONS) == {o[1] for o in opts}
    for opt, name, typ, lo, hi, default in opts:
        info = _config.OPTIONS[name]
        assert (info.opt, info.type, info.min, info.max, info.default) == (opt, typ, lo, hi, default)
    # Every keyword is a library option, filed under its type's setter (and
    # an integer one under its unit: a duration or a count).
    by_type = {
        _core.S3LECT_OPTION_STR: _config.STRINGS,
        _core.S3LECT_OPTION_BOOL: _config.BOOLS,
        _core.S3LECT_OPTION_BYTES: _config.BLOBS,
    }
    for name, opt in _config.ALL.items():
        info = _config.OPTIONS[name]
        assert info.opt == opt
        if info.type == _core.S3LECT_OPTION_INT:
            table = _config.COUNTS if name in _config.COUNT_NAMES else _config.DURATIONS
        else:
            table = by_type[info.type]
        assert table.get(name) == opt, f"{name} is filed under the wrong setter"


def test_every_int_option_is_a_known_duration_or_count():
    """libs3lect's integer options are durations (ms) or counts. A new one
    fails here until _config files it under DURATION_NAMES or COUNT_NAMES."""
    ints = {name for _, name, typ, *_ in library_options() if typ == _core.S3LECT_OPTION_INT}
    unknown = ints - _config.DURATION_NAMES - _config.COUNT_NAMES
    assert unknown == set(), (
        f"integer options neither in _config.DURATION_NAMES nor in _config.COUNT_NAMES: {unknown}"
    )
    assert not _config.DURATION_NAMES & _config.COUNT_NAMES
    assert _config.DURATION_NAMES | _config.COUNT_NAMES == ints, "stale names"
    assert set(_config.COUNTS) == {"max_connections", "worker_threads", "callback_threads",
                                   "priority"}


def test_binding_covers_every_library_option():
    """A new C option without Python support fails here: it must become an
    Elector keyword (and a _config setting), or be listed in NOT_SETTINGS with
    the reason the binding does not expose it."""
    params = set(inspect.signature(s3lect.Elector.__init__).parameters)
    missing = []
    for opt, name, typ, *_ in library_options():
        if name in _config.NOT_SETTINGS:
            continue
        if name not in _config.ALL or name not in params:
            missing.append(name)
    assert missing == [], (
        f"libs3lect options the Python binding does not cover: {missing}; add them to "
        "Elector's keywords (bindings/python/s3lect/_elector.py) or to _config.NOT_SETTINGS"
    )
    # lock and server_id are Elector's own arguments.
    assert {"lock", "server_id"} <= params
    assert set(_config.NOT_SETTINGS) <= set(_config.OPTIONS), "stale NOT_SETTINGS entries"


def test_defaults_read_back_as_the_library_reports(tmp_path):
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a")
    try:
        cfg = el.get_config()
    finally:
        el.close()
    for name in _config.DURATIONS:
        assert cfg[name] == _config.OPTIONS[name].default / 1000.0, name
    for name in _config.COUNTS:
        assert cfg[name] == _config.OPTIONS[name].default and type(cfg[name]) is int, name
    for name in _config.BOOLS:
        default = _config.OPTIONS[name].default
        assert cfg[name] == (None if default < 0 else bool(default)), name


@pytest.mark.parametrize("name", sorted(_config.DURATIONS))
def test_duration_bounds_are_the_library_bounds(name):
    info = _config.OPTIONS[name]
    cfg = _core.s3lect_config_new()
    try:
        _config.apply(cfg, name, info.min / 1000.0)
        _config.apply(cfg, name, info.max / 1000.0)
        assert tuple(_core.s3lect_config_get_int(cfg, info.opt)) == (_core.S3LECT_OK, info.max)
        with pytest.raises(s3lect.ConfigError) as ei:
            _config.apply(cfg, name, (info.max + 1) / 1000.0)
        assert f"takes {info.min / 1000:g} s to {info.max / 1000:g} s" in str(ei.value)
        if info.min > 0:
            with pytest.raises(s3lect.ConfigError) as ei:
                _config.apply(cfg, name, (info.min - 1) / 1000.0)
            assert name in str(ei.value)
    finally:
        _core.s3lect_config_free(cfg)


def test_runtime_sizes_are_counts(tmp_path):
    """max_connections, worker_threads and callback_threads are ints (not
    seconds), reach the elector's configuration in libs3lect as they are,
    and an out-of-range or mistyped count is refused with the option's name
    and range."""
    want = {"max_connections": (1, 1024, 64), "worker_threads": (1, 64, 4),
            "callback_threads": (1, 64, 2)}
    for name, (lo, hi, default) in want.items():
        info = _config.OPTIONS[name]
        assert (info.type, info.min, info.max, info.default) == (
            _core.S3LECT_OPTION_INT, lo, hi, default), name
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a", max_connections=200,
                        worker_threads=8, callback_threads=3, new_lock_wait=0)
    try:
        cfg = el.get_config()
        assert (cfg["max_connections"], cfg["worker_threads"], cfg["callback_threads"]) == (200, 8, 3)
        raw = _core.s3lect_get_config(el._h())
        try:
            for name, value in (("max_connections", 200), ("worker_threads", 8),
                                ("callback_threads", 3)):
                assert tuple(_core.s3lect_config_get_int(raw, _config.COUNTS[name])) == (
                    _core.S3LECT_OK, value), name
        finally:
            _core.s3lect_config_free(raw)
        with pytest.raises(s3lect.ConfigError, match="worker_threads cannot change"):
            el.update_config(worker_threads=16)
        el.start()
        assert el.wait_for_leadership(timeout=10)
    finally:
        el.stop()
    for name, (lo, hi, _default) in want.items():
        with pytest.raises(s3lect.ConfigError) as ei:
            s3lect.Elector(f"file://{tmp_path}/l", server_id="a", **{name: hi + 1})
        assert f"{name} must be between {lo} and {hi}, got {hi + 1}" in str(ei.value)
        assert " ms" not in str(ei.value) and " s " not in str(ei.value)
        with pytest.raises(s3lect.ConfigError) as ei:
            s3lect.Elector(f"file://{tmp_path}/l", server_id="a", **{name: 0})
        assert f"{name} must be between {lo} and {hi}, got 0" in str(ei.value)
        for bad in (-1, True, 2.0, "8"):
            with pytest.raises(s3lect.ConfigError) as ei:
                s3lect.Elector(f"file://{tmp_path}/l", server_id="a", **{name: bad})
            assert f"{name} must be a whole number from {lo} to {hi} (a count)" in str(ei.value), bad
    # S3LECT_* values are libs3lect's to parse (s3lect_config_set_text), as in the CLI.
    el = s3lect.Elector.from_env(f"file://{tmp_path}/l", server_id="a",
                                 environ={"S3LECT_WORKER_THREADS": "8"})
    try:
        assert el.get_config()["worker_threads"] == 8
    finally:
        el.close()
    with pytest.raises(s3lect.ConfigError, match=r"callback_threads '2.5' is not a count.*"
                       r"\(from the environment: S3LECT_CALLBACK_THREADS\)"):
        s3lect.Elector.from_env(f"file://{tmp_path}/l", server_id="a",
                                environ={"S3LECT_CALLBACK_THREADS": "2.5"})

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
    # Every keyword is a library option, filed under its type's setter.
    by_type = {
        _core.S3LECT_OPTION_INT: _config.DURATIONS,
        _core.S3LECT_OPTION_STR: _config.STRINGS,
        _core.S3LECT_OPTION_BOOL: _config.BOOLS,
        _core.S3LECT_OPTION_BYTES: _config.BLOBS,
    }
    for name, opt in _config.ALL.items():
        info = _config.OPTIONS[name]
        assert info.opt == opt
        assert by_type[info.type].get(name) == opt, f"{name} is filed under the wrong setter"


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

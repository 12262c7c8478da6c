# SPDX-License-Identifier: Apache-2.0
"""Settings: names, types, conversion of durations and counts, building a C config."""

from __future__ import annotations

import math
import operator
import os
from datetime import timedelta
from typing import Any, Dict, FrozenSet, Mapping, NamedTuple, Optional, Union

from . import _core
from ._errors import ConfigError, error_from_code

#: A duration: seconds as ``int``/``float``, or a :class:`datetime.timedelta`.
Duration = Union[int, float, timedelta]


class OptionInfo(NamedTuple):
    """One option as libs3lect describes it (s3lect_option_info, s3lect_option_flags)."""

    opt: int  #: the S3LECT_OPT_* value
    name: str  #: the library's name, also the Python keyword
    type: int  #: S3LECT_OPTION_STR, _INT, _BOOL or _BYTES
    min: int  #: bounds s3lect_config_set_int enforces (durations: ms; bools 0..1)
    max: int
    default: int  #: a new configuration's value (durations: ms; path_style -1: automatic)
    flags: int  #: S3LECT_OPTION_UNIT_MS, _UNIT_COUNT, _SECRET, _RUNTIME, _PROCESS_WIDE bits


def _library_options() -> Dict[str, OptionInfo]:
    """The library's option table, read once at import (option values 1..count)."""
    out: Dict[str, OptionInfo] = {}
    for opt in range(1, _core.s3lect_option_count() + 1):
        rc, name, typ, lo, hi, default = _core.s3lect_option_info(opt)
        flags = _core.s3lect_option_flags(opt)
        if rc != _core.S3LECT_OK or not name or flags < 0:
            raise ImportError(f"libs3lect describes no option {opt} (s3lect_option_info: {rc})")
        out[name] = OptionInfo(opt, name, typ, lo, hi, default, flags)
    return out


#: Every option libs3lect knows, by name, from s3lect_option_info.
OPTIONS: Dict[str, OptionInfo] = _library_options()

#: Options that are not keyword settings, and why. lock and server_id are
#: Elector's own arguments; poll_mode stays off because callbacks run on the
#: callback threads of libs3lect's shared runtime (see _Dispatch).
NOT_SETTINGS: Dict[str, str] = {
    "lock": "the lock argument of Elector",
    "server_id": "the server_id argument of Elector",
    "poll_mode": "the binding runs callbacks on the callback threads of libs3lect's runtime",
}


def _having(flag: int) -> FrozenSet[str]:
    return frozenset(name for name, info in OPTIONS.items() if info.flags & flag)


#: The facts libs3lect reports for its options (s3lect_option_flags): which
#: integer options are durations (ms in C, seconds or a timedelta here) and
#: which are counts (the process-wide sizes of the shared runtime), which are
#: secrets, and which s3lect_update_config applies to a running elector.
DURATION_NAMES = _having(_core.S3LECT_OPTION_UNIT_MS)
COUNT_NAMES = _having(_core.S3LECT_OPTION_UNIT_COUNT)
RUNTIME_NAMES = _having(_core.S3LECT_OPTION_RUNTIME)
PROCESS_WIDE_NAMES = _having(_core.S3LECT_OPTION_PROCESS_WIDE)


def _settings(option_type: int, only: Optional[FrozenSet[str]] = None) -> Dict[str, int]:
    return {
        name: info.opt
        for name, info in OPTIONS.items()
        if info.type == option_type and name not in NOT_SETTINGS and (only is None or name in only)
    }


# Python keyword -> C option, grouped by the setter type. The keywords are the
# library's names (DESIGN §4). Durations are milliseconds in C and seconds
# (or timedelta) in Python; counts are ints in both.
DURATIONS: Dict[str, int] = _settings(_core.S3LECT_OPTION_INT, DURATION_NAMES)
COUNTS: Dict[str, int] = _settings(_core.S3LECT_OPTION_INT, COUNT_NAMES)
STRINGS: Dict[str, int] = _settings(_core.S3LECT_OPTION_STR)
BOOLS: Dict[str, int] = _settings(_core.S3LECT_OPTION_BOOL)
# PEM material: bytes (PEM), or str/PathLike (PEM text or a file path).
BLOBS: Dict[str, int] = _settings(_core.S3LECT_OPTION_BYTES)
SECRETS = _having(_core.S3LECT_OPTION_SECRET)
ALL = {**DURATIONS, **COUNTS, **STRINGS, **BOOLS, **BLOBS}


#: boto3's names of settings -> ours: Elector and Elector.from_env accept both.
ALIASES: Dict[str, str] = {
    "endpoint_url": "endpoint",
    "region_name": "region",
    "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
    "profile_name": "profile",
}


def resolve_aliases(settings: Dict[str, Any]) -> Dict[str, Any]:
    """Replaces boto3-style names (``endpoint_url``, ``region_name``,
    ``aws_access_key_id``, ...) in ``settings`` by ours, in place; an alias
    of None counts as not given. Giving both names of one setting with
    different values is a ConfigError (secrets are not shown)."""
    for alias, name in ALIASES.items():
        if alias not in settings:
            continue
        value = settings.pop(alias)
        if value is None:
            continue
        current = settings.get(name)
        if current is not None and current != value:
            if name in SECRETS:
                shown = "different values"
            else:
                shown = f"different values ({alias}={value!r}, {name}={current!r})"
            raise ConfigError(
                f"{alias} and {name} name the same setting ({alias} is boto3's name for "
                f"{name}) and were given {shown}; give only one"
            )
        settings[name] = value
    return settings


def to_ms(name: str, value: Any) -> int:
    """Converts a duration (seconds or timedelta) to whole milliseconds."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ConfigError(
            f"{name} must be a duration in seconds (int or float) or a datetime.timedelta, "
            f"not {type(value).__name__} {value!r}"
        )
    if math.isnan(seconds) or math.isinf(seconds):
        raise ConfigError(f"{name} must be a finite duration, got {value!r}")
    info = OPTIONS.get(name)
    if seconds < 0 and info is not None and info.min < 0 and round(seconds * 1000.0) >= info.min:
        return int(round(seconds * 1000.0))  # new_lock_wait's -1 ms: the default
    if seconds < 0:
        raise ConfigError(
            f"{name} must not be negative, got {seconds:g} s; pass seconds (e.g. {name}=15) "
            f"or a datetime.timedelta"
        )
    return int(round(seconds * 1000.0))


def to_count(name: str, value: Any) -> int:
    """Checks a count (an int; not a bool, float or negative number)."""
    info = OPTIONS[name]
    wanted = f"{name} must be a whole number from {info.min} to {info.max} (a count)"
    if isinstance(value, bool):
        raise ConfigError(f"{wanted}, not {value!r}")
    try:
        n = operator.index(value)  # int and int-like types; never a float
    except TypeError:
        raise ConfigError(f"{wanted}, not {type(value).__name__} {value!r}") from None
    if n < 0:
        raise ConfigError(f"{wanted}, got {n}")
    return n


def check(cfg: Any, rc: int, what: str) -> None:
    """Raises the typed error for a failed config call, with the core's message."""
    if rc == _core.S3LECT_OK:
        return
    detail = _core.s3lect_py_config_errmsg(cfg) or _core.s3lect_strerror(rc)
    if rc == _core.S3LECT_EINVAL:
        raise ConfigError(f"{what}: {detail}" if what else detail, rc)
    raise error_from_code(rc, f"{what}: {detail}" if what else detail)


def apply(cfg: Any, name: str, value: Any) -> None:
    """Sets one keyword setting on a C config."""
    shown = "***" if name in SECRETS else repr(value)
    if name in DURATIONS:
        ms = to_ms(name, value)
        info = OPTIONS[name]
        what = f"{name}={shown}"
        if not info.min <= ms <= info.max:  # the core's message, plus the range in seconds
            what += f" (takes {info.min / 1000:g} s to {info.max / 1000:g} s)"
        check(cfg, _core.s3lect_config_set_int(cfg, DURATIONS[name], ms), what)
    elif name in COUNTS:
        # Out of range (0, say), the core's message names the option and its range.
        n = to_count(name, value)
        check(cfg, _core.s3lect_config_set_int(cfg, COUNTS[name], n), f"{name}={shown}")
    elif name in STRINGS:
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise ConfigError(f"{name} must be a str, not {type(value).__name__}")
        text = None if value is None else os.fspath(value)
        check(cfg, _core.s3lect_config_set_str(cfg, STRINGS[name], text), f"{name}={shown}")
    elif name in BOOLS:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be True or False, not {value!r}")
        check(cfg, _core.s3lect_config_set_bool(cfg, BOOLS[name], int(value)), f"{name}={shown}")
    elif name in BLOBS:
        opt = BLOBS[name]
        if isinstance(value, (bytes, bytearray, memoryview)):
            rc = _core.s3lect_config_set_bytes(cfg, opt, bytes(value))
        elif isinstance(value, (str, os.PathLike)):
            rc = _core.s3lect_config_set_str(cfg, opt, os.fspath(value))
        else:
            raise ConfigError(f"{name} must be PEM bytes, PEM text or a file path, not {value!r}")
        check(cfg, rc, f"{name}={'***' if name in SECRETS else '<PEM>'}")
    else:
        raise ConfigError(f"unknown setting {name!r}; known settings: {', '.join(sorted(ALL))}")


def read_pem(name: str, value: Any) -> bytes:
    """PEM material as bytes: bytes are taken as they are, a str that holds
    PEM text too, any other str or PathLike is the path of a PEM file."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    elif isinstance(value, str) and value.lstrip().startswith("-----BEGIN"):
        data = value.encode()
    elif isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ConfigError(f"{name}: cannot read PEM file {path!r}: {e.strerror}") from e
    else:
        raise ConfigError(f"{name} must be PEM bytes, PEM text or a file path, not {value!r}")
    if not data.strip():
        raise ConfigError(f"{name} is empty; give a PEM CA bundle (bytes, text or a file path)")
    return data


def read(cfg: Any) -> Dict[str, Any]:
    """The settings of a C config as a dict (durations in seconds, counts as
    ints; secrets as "")."""
    out: Dict[str, Any] = {
        "lock": _core.s3lect_py_config_get_str(cfg, _core.S3LECT_OPT_LOCK),
        "server_id": _core.s3lect_py_config_get_str(cfg, _core.S3LECT_OPT_SERVER_ID),
    }
    for name, opt in DURATIONS.items():
        rc, ms = _core.s3lect_config_get_int(cfg, opt)
        if rc == 0:
            out[name] = ms / 1000.0
    for name, opt in COUNTS.items():
        rc, n = _core.s3lect_config_get_int(cfg, opt)
        if rc == 0:
            out[name] = int(n)
    for name, opt in BOOLS.items():
        rc, v = _core.s3lect_config_get_int(cfg, opt)
        if rc == 0:
            out[name] = bool(v) if name != "path_style" or v >= 0 else None
    for name, opt in STRINGS.items():
        out[name] = _core.s3lect_py_config_get_str(cfg, opt)
    return out


def default_str(opt: int) -> str:
    """A string option's value in a new configuration: libs3lect's default."""
    cfg = _core.s3lect_config_new()
    if cfg is None:
        raise MemoryError("s3lect_config_new failed")
    try:
        return _core.s3lect_py_config_get_str(cfg, opt) or ""
    finally:
        _core.s3lect_config_free(cfg)


def env_settings(environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The settings that S3LECT_* variables give, as libs3lect maps and
    parses them (s3lect_config_set_from_env: the option table's environment
    column, the one map of every front end): environ (default: the
    process's environment) is handed to the library, and the options it set
    are read back as keyword settings (lock and server_id too). The store's
    own variables (AWS_*, GOOGLE_*, AZURE_*, PG*) are not settings: the
    library reads them from the process's environment when the store opens,
    for every front end alike. Raises ConfigError naming the variable."""
    envp = None if environ is None else [f"{k}={v}" for k, v in environ.items()]
    cfg = _core.s3lect_config_new()
    if cfg is None:
        raise MemoryError("s3lect_config_new failed")
    out: Dict[str, Any] = {}
    try:
        check(cfg, _core.s3lect_config_set_from_env(cfg, envp), "")
        for name, info in OPTIONS.items():
            if _core.s3lect_config_is_set(cfg, info.opt) != 1:
                continue
            if info.type in (_core.S3LECT_OPTION_STR, _core.S3LECT_OPTION_BYTES):
                out[name] = _core.s3lect_py_config_get_str(cfg, info.opt)
                continue
            rc, v = _core.s3lect_config_get_int(cfg, info.opt)
            if rc != _core.S3LECT_OK:
                continue
            if info.type == _core.S3LECT_OPTION_BOOL:
                out[name] = bool(v)
            elif name in DURATION_NAMES:
                out[name] = v / 1000.0
            else:
                out[name] = int(v)
    finally:
        _core.s3lect_config_free(cfg)
    return out

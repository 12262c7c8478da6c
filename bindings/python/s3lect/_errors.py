# SPDX-License-Identifier: Apache-2.0
"""Typed exceptions. Every error the C core reports becomes one of these."""

from __future__ import annotations

from typing import Dict, Optional, Type

from . import _core

__all__ = [
    "Error",
    "ConfigError",
    "StateError",
    "BusyError",
    "StoppedError",
    "WaitTimeout",
    "StoreError",
    "AuthError",
    "TransientError",
    "FatalStoreError",
    "CorruptRecordError",
    "PreconditionFailed",
    "NotFoundError",
    "CallbackError",
    "UnsupportedError",
    "LocalIOError",
    "FencedError",
    "NotLeaderError",
    "RetriesExhaustedError",
    "error_from_code",
]


class Error(Exception):
    """Base class of every s3lect error.

    Attributes:
        code: the C library's error code (a negative ``S3LECT_E*`` value), or 0
            for errors raised by the Python layer itself.
        message: the detailed message (from ``s3lect_errmsg`` when the C core
            had one), the same text as ``str(exc)``.
    """

    default_code = 0

    def __init__(self, message: str = "", code: Optional[int] = None) -> None:
        self.code = self.default_code if code is None else code
        if not message and self.code:
            message = _core.s3lect_strerror(self.code)
        self.message = message
        super().__init__(message)


class ConfigError(Error, ValueError):
    """Invalid argument or configuration (``S3LECT_EINVAL``).

    Raised by the :class:`~s3lect.Elector` constructor, :meth:`~s3lect.Elector.update_config`
    and :meth:`~s3lect.Elector.from_env`; the message names the setting and
    says what a valid value looks like.
    """

    default_code = _core.S3LECT_EINVAL


class StateError(Error, RuntimeError):
    """The call is not valid in the elector's current state (``S3LECT_ESTATE``),
    e.g. ``start()`` twice or waiting on an elector that was never started."""

    default_code = _core.S3LECT_ESTATE


class BusyError(StateError):
    """``stop()`` was called from one of the same elector's callbacks, where it
    would deadlock (``S3LECT_EBUSY``). Stop it from another thread instead."""

    default_code = _core.S3LECT_EBUSY


class StoppedError(StateError):
    """The elector is stopped, or was stopped while a wait was in progress
    (``S3LECT_ESTOPPED``)."""

    default_code = _core.S3LECT_ESTOPPED


class WaitTimeout(Error, TimeoutError):
    """A C-level wait ran out of time (``S3LECT_ETIMEDOUT``). The Python wait
    methods return ``False`` instead of raising this."""

    default_code = _core.S3LECT_ETIMEDOUT


class StoreError(Error):
    """Base class of the errors reported by the lock store (S3, file, custom)."""


class AuthError(StoreError, PermissionError):
    """The store refused the credentials or the permissions are missing
    (``S3LECT_EAUTH``; HTTP 401/403 from S3)."""

    default_code = _core.S3LECT_EAUTH


class TransientError(StoreError):
    """A temporary store failure: 5xx, throttling, timeout or network error
    (``S3LECT_ETRANSIENT``). The elector retries by itself."""

    default_code = _core.S3LECT_ETRANSIENT


class FatalStoreError(StoreError):
    """The store is misconfigured: no such bucket, bad endpoint
    (``S3LECT_EFATAL``). Retrying will not help until the configuration is fixed."""

    default_code = _core.S3LECT_EFATAL


class CorruptRecordError(StoreError):
    """The lock object is not a valid s3lect record (``S3LECT_ECORRUPT``)."""

    default_code = _core.S3LECT_ECORRUPT


class PreconditionFailed(StoreError):
    """A conditional write lost the race (``S3LECT_EPRECONDITION``).

    A custom store's ``put()`` raises this when ``if_match`` does not hold.
    """

    default_code = _core.S3LECT_EPRECONDITION


class NotFoundError(StoreError, LookupError):
    """The lock object does not exist (``S3LECT_ENOTFOUND``). A custom store's
    ``put()`` may raise this for an ``if_match`` etag on a missing key."""

    default_code = _core.S3LECT_ENOTFOUND


class CallbackError(Error):
    """A user callback failed (``S3LECT_ECALLBACK``)."""

    default_code = _core.S3LECT_ECALLBACK


class UnsupportedError(Error, NotImplementedError):
    """The feature is not compiled into this build of the C core
    (``S3LECT_EUNSUPPORTED``)."""

    default_code = _core.S3LECT_EUNSUPPORTED


class LocalIOError(Error, OSError):
    """A local I/O or system call failed (``S3LECT_EIO``), e.g. the directory
    of a ``file://`` lock is not writable."""

    default_code = _core.S3LECT_EIO


class FencedError(StoreError):
    """A fenced write was refused: a newer term (or another holder of this
    term) wrote the object last, and nothing was written
    (``S3LECT_EFENCED``; docs/fencing.md). This process is a deposed leader:
    it must stop acting as one, not retry."""

    default_code = _core.S3LECT_EFENCED


class NotLeaderError(StateError):
    """The call needs this elector to lead, and it does not (never led,
    stopped, or its lease passed; ``S3LECT_ENOTLEADER``): a fenced write of
    its :class:`~s3lect.Fence` (refused before anything was sent), or
    :meth:`~s3lect.Elector.transfer`."""

    default_code = _core.S3LECT_ENOTLEADER


class RetriesExhaustedError(StoreError):
    """Other writers kept changing the object between a fenced write's read
    and its write, and its retries ran out (``S3LECT_ERETRIES``); nothing
    was written."""

    default_code = _core.S3LECT_ERETRIES


_BY_CODE: Dict[int, Type[Error]] = {
    cls.default_code: cls
    for cls in (
        ConfigError,
        StateError,
        BusyError,
        StoppedError,
        WaitTimeout,
        AuthError,
        TransientError,
        FatalStoreError,
        CorruptRecordError,
        PreconditionFailed,
        NotFoundError,
        CallbackError,
        UnsupportedError,
        LocalIOError,
        FencedError,
        NotLeaderError,
        RetriesExhaustedError,
    )
}


def error_from_code(code: int, message: str = "") -> BaseException:
    """Returns the exception instance for a C error code (``MemoryError`` for
    ``S3LECT_ENOMEM``; :class:`Error` for codes this version does not know)."""
    if code == _core.S3LECT_ENOMEM:
        return MemoryError(message or _core.s3lect_strerror(code))
    cls = _BY_CODE.get(code, Error)
    return cls(message, code)

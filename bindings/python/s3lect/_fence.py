# SPDX-License-Identifier: Apache-2.0
"""Fenced writes (docs/fencing.md): a leader's writes to other objects that a
deposed leader cannot make any more."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

from . import _config, _core
from ._errors import ConfigError, NotFoundError, StateError, error_from_code

if TYPE_CHECKING:  # pragma: no cover
    from ._elector import Elector

__all__ = ["Fence", "FencedObject"]

_Bytes = Union[bytes, bytearray, memoryview]


class FencedObject(NamedTuple):
    """A fenced object as :meth:`Fence.get` reads it."""

    body: bytes
    """Its writer's bytes (the envelope stripped)."""
    version: str
    """The store's version of it: pass it to :meth:`Fence.cas`."""
    term: int
    """The term of its writer (0: an object no fenced writer wrote, read as it is)."""


def _url(url: Any) -> str:
    if not isinstance(url, (str, os.PathLike)):
        raise ConfigError(f"url must be a str like 's3://bucket/key', not {url!r}")
    return os.fspath(url)


def _data(data: Any) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    return bytes(data)


class Fence:
    """Fenced writes: each write goes only over an older term, or over this
    same leadership's own writes, so a leader deposed while it did not know
    it (a GC pause, a frozen host, a slow network) gets a
    :class:`~s3lect.FencedError` instead of overwriting its successor's
    bytes.

    Objects are named by URLs of the lock's schemes (``s3://BUCKET/KEY``,
    ``gs://``, ``az://``, ``file://``, ...) and stored in an envelope that
    :meth:`get` strips. Make one with :meth:`Elector.fence` (its term while it
    leads; :class:`~s3lect.NotLeaderError` before anything is sent while it
    does not) or :meth:`from_token` (a process that holds only a fence
    token). Close it with :meth:`close` or a ``with`` block; the calls of one
    fence run one at a time (the methods are thread-safe). Each call blocks
    up to a few request timeouts, with the GIL released.

    Errors: :class:`~s3lect.FencedError` (a newer term wrote the object: stop
    acting as leader), :class:`~s3lect.NotLeaderError`,
    :class:`~s3lect.PreconditionFailed` (:meth:`cas` over another version),
    :class:`~s3lect.RetriesExhaustedError`, :class:`~s3lect.NotFoundError`
    (:meth:`get`), and the store's errors (:class:`~s3lect.AuthError`,
    :class:`~s3lect.TransientError`, ...).
    """

    def __init__(self, handle: Any, elector: Optional["Elector"] = None) -> None:
        # Use Elector.fence() or Fence.from_token(); this takes a C handle.
        self._handle: Any = handle
        self._mu = threading.Lock()
        # The elector's fence must be freed before it: keep it alive.
        self._elector = elector

    @classmethod
    def from_token(cls, token: str, **settings: Any) -> "Fence":
        """A fence for a fence token (:meth:`Elector.fence_token`, or
        ``$S3LECT_FENCE_TOKEN`` under ``s3lect run``): its term and holder.
        No leadership check is possible: the fence alone refuses a stale term.

        Args:
            token: ``"s3lect-fence.1.TERM.HOLDER.LOCK"``.
            **settings: the store's settings as :class:`Elector` takes them
                (``endpoint``, ``region``, ``access_key_id``, ``profile``,
                ``request_timeout``, boto3's names too, ...); the defaults and
                the store's own variables otherwise.

        Raises:
            ConfigError: for a string that is no token, or a bad setting.
        """
        if not isinstance(token, str):
            raise ConfigError(f"token must be a str, not {type(token).__name__}")
        settings = _config.resolve_aliases(dict(settings))
        cfg = _core.s3lect_config_new()
        if cfg is None:
            raise MemoryError("s3lect_config_new failed")
        try:
            for name, value in settings.items():
                if value is not None:
                    _config.apply(cfg, name, value)
            rc, handle = _core.s3lect_fence_new_token(cfg, token)
        finally:
            _core.s3lect_config_free(cfg)
        if rc == _core.S3LECT_EINVAL:
            raise ConfigError("not a fence token (expected 's3lect-fence.1.TERM.HOLDER.LOCK')", rc)
        if rc != _core.S3LECT_OK:
            raise error_from_code(rc, "s3lect_fence_new_token failed")
        return cls(handle)

    def _fail(self, h: Any, rc: int) -> BaseException:
        return error_from_code(rc, _core.s3lect_py_fence_errmsg(h) or "")

    def _h(self) -> Any:
        h = self._handle
        if h is None:
            raise StateError("this Fence was closed")
        return h

    def get(self, url: str) -> FencedObject:
        """Reads a fenced object.

        Raises:
            NotFoundError: there is none, or a fenced :meth:`delete` left its
                tombstone; then the exception's ``version`` and ``term`` are
                the tombstone's (``version`` None, ``term`` 0 when there is
                no object at all): ``cas(url, data, exc.version)`` creates it
                again over it.
            CorruptRecordError: bytes that begin like an envelope but are none.
        """
        u = _url(url)
        with self._mu:
            h = self._h()
            rc, body, version, term = _core.s3lect_fenced_get(h, u)
            if rc == _core.S3LECT_OK:
                return FencedObject(body if body is not None else b"", version or "", int(term))
            exc = self._fail(h, rc)
        if isinstance(exc, NotFoundError):
            exc.version = version  # type: ignore[attr-defined]
            exc.term = int(term)  # type: ignore[attr-defined]
        raise exc

    def put(self, url: str, data: _Bytes) -> None:
        """Writes ``data`` at ``url``, fenced (one PUT in the steady state).

        Raises:
            FencedError: a newer term (or another holder of this term) wrote
                it last; nothing was written.
            NotLeaderError: an elector's fence while the elector does not lead.
            RetriesExhaustedError: other writers kept changing it.
        """
        u, d = _url(url), _data(data)
        with self._mu:
            h = self._h()
            rc = _core.s3lect_fenced_put(h, u, d)
            if rc != _core.S3LECT_OK:
                raise self._fail(h, rc)

    def cas(self, url: str, data: _Bytes, version: Optional[str]) -> None:
        """As :meth:`put`, but only over ``version`` (from :meth:`get`; None:
        only where there is no object at all): read-modify-write.

        Raises:
            PreconditionFailed: the object is at another version (read it again).
            FencedError: a newer term wrote it.
        """
        u, d = _url(url), _data(data)
        if version is not None and not isinstance(version, str):
            raise TypeError(f"version must be a str or None, not {type(version).__name__}")
        with self._mu:
            h = self._h()
            rc = _core.s3lect_fenced_cas(h, u, d, version)
            if rc != _core.S3LECT_OK:
                raise self._fail(h, rc)

    def delete(self, url: str) -> None:
        """Deletes a fenced object: writes its tombstone (fenced as a
        :meth:`put`), so that a deposed leader cannot create it again."""
        u = _url(url)
        with self._mu:
            h = self._h()
            rc = _core.s3lect_fenced_delete(h, u)
            if rc != _core.S3LECT_OK:
                raise self._fail(h, rc)

    def close(self) -> None:
        """Frees the fence (waits for a call of another thread); idempotent."""
        with self._mu:
            h, self._handle = self._handle, None
            if h is not None:
                _core.s3lect_fence_free(h)
            self._elector = None

    def __enter__(self) -> "Fence":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        h = self.__dict__.get("_handle")
        if h is None:
            return
        self._handle = None
        try:
            _core.s3lect_fence_free(h)
        except Exception:  # noqa: BLE001 - interpreter shutdown: modules may be gone
            pass

# SPDX-License-Identifier: Apache-2.0
"""Custom stores written in Python."""

from __future__ import annotations

import hashlib
import logging
import threading
from typing import Any, Dict, Optional, Protocol, Tuple, runtime_checkable

from . import _core
from ._errors import (
    AuthError,
    ConfigError,
    FatalStoreError,
    NotFoundError,
    PreconditionFailed,
    TransientError,
)

__all__ = ["Store", "MemoryStore"]

# What the current thread is doing for libs3lect. The shared runtime's worker
# and callback threads serve every elector of the process, so a thread's id
# says nothing about which elector it works for; these markers are set for
# the duration of one store call or one callback instead.
_current = threading.local()


def in_store_call() -> bool:
    """True inside a custom store's get() or put() (of any elector)."""
    return getattr(_current, "store_calls", 0) > 0


class _StoreCall:
    """Marks the current thread as inside a custom store call."""

    def __enter__(self) -> None:
        _current.store_calls = getattr(_current, "store_calls", 0) + 1

    def __exit__(self, *exc: Any) -> None:
        _current.store_calls -= 1


@runtime_checkable
class Store(Protocol):
    """What a custom store must provide (any object with these two methods).

    The elector calls them on a worker thread of libs3lect's shared runtime
    (one per process, see docs/threading.md), one call at a time per
    elector: calls for one elector never overlap, but several electors' calls
    may run at once on different workers (``worker_threads`` of them), so a
    store shared by electors must be thread-safe. Keep them fast: each call
    should finish well within ``request_timeout``, and a slow call holds a
    worker that other electors' stores may be waiting for. From inside them,
    :meth:`Elector.stop`, the waits and :meth:`Elector.peer_response` raise
    :class:`s3lect.BusyError` on *any* elector (they could wait for the very
    worker that runs the call); getters such as ``is_leader`` are fine.

    ``get(key)`` returns ``(data, etag)`` -- the object's bytes and an opaque,
    non-empty etag string that changes with every write -- or ``None`` when
    the key does not exist.

    ``put(key, data, if_match=...)`` writes ``data`` and returns the new etag,
    but only if the condition holds; otherwise it raises
    :class:`s3lect.PreconditionFailed`:

    - ``if_match="*"``: create only; fail if the key exists (the library
      passes this when there is no lock object yet; it is S3's
      ``If-None-Match: *``);
    - ``if_match=<etag>``: replace only if the current etag equals it (fail if
      the key is missing, or raise :class:`s3lect.NotFoundError`);
    - ``if_match=None``: write unconditionally (the library never does this;
      it is there for your own tools).

    Other exceptions map as follows: :class:`s3lect.AuthError` -> access
    denied, :class:`s3lect.FatalStoreError` or :class:`s3lect.ConfigError` ->
    misconfiguration, anything else -> a transient failure that is retried
    (and logged with its traceback). Raise ``PreconditionFailed`` only when
    the condition certainly failed; an answer that leaves it open whether the
    write landed (a timeout after sending, S3's 409
    ``ConditionalRequestConflict``) must be a transient failure: the library
    then reads the record back rather than taking it for a lost race.
    """

    def get(self, key: str) -> Optional[Tuple[bytes, str]]:
        """Reads ``key``: ``(data, etag)`` or ``None`` if it does not exist."""
        ...

    def put(self, key: str, data: bytes, if_match: Optional[str] = None) -> str:
        """Writes ``key`` if ``if_match`` holds and returns the new etag."""
        ...


class MemoryStore:
    """A thread-safe in-process :class:`Store`, for tests and demos.

    Several electors in one process that share one ``MemoryStore`` elect one
    leader among themselves, exactly as if they shared a bucket::

        store = s3lect.MemoryStore()
        a = s3lect.Elector("leader", server_id="a", store=store)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: Dict[str, Tuple[bytes, str]] = {}
        self._generation = 0

    def get(self, key: str) -> Optional[Tuple[bytes, str]]:
        """Returns ``(data, etag)`` of ``key`` or ``None``."""
        with self._lock:
            return self._objects.get(key)

    def put(self, key: str, data: bytes, if_match: Optional[str] = None) -> str:
        """Writes ``key`` if ``if_match`` holds (see :class:`Store`); returns the new etag."""
        with self._lock:
            current = self._objects.get(key)
            if if_match == "*" and current is not None:
                raise PreconditionFailed(f"{key!r} already exists")
            if if_match not in (None, "*"):
                if current is None:
                    raise PreconditionFailed(f"{key!r} does not exist")
                if current[1] != if_match:
                    raise PreconditionFailed(f"{key!r} changed: etag {current[1]} != {if_match}")
            self._generation += 1
            digest = hashlib.sha256(bytes(data)).hexdigest()[:16]
            etag = f'"{self._generation}-{digest}"'
            self._objects[key] = (bytes(data), etag)
            return etag


_Answer = Tuple[int, Optional[bytes], Optional[str], Optional[str]]


class StoreAdapter:
    """What the C trampolines call: turns a user's :class:`Store` into
    ``(outcome, body, etag, message)`` answers and maps exceptions to
    outcomes. Internal."""

    def __init__(self, store: Any, logger: logging.Logger) -> None:
        self.store = store
        self.logger = logger

    def _failed(self, op: str, exc: BaseException) -> _Answer:
        msg = f"custom store {op}() raised {type(exc).__name__}: {exc}"
        if isinstance(exc, PreconditionFailed):
            return (_core.S3LECT_STORE_PRECONDITION, None, None, msg)
        if isinstance(exc, NotFoundError):
            return (_core.S3LECT_STORE_NOT_FOUND, None, None, msg)
        if isinstance(exc, AuthError):
            return (_core.S3LECT_STORE_AUTH, None, None, msg)
        if isinstance(exc, (FatalStoreError, ConfigError)):
            return (_core.S3LECT_STORE_FATAL, None, None, msg)
        if not isinstance(exc, TransientError):
            self.logger.error("%s; treated as a transient failure", msg, exc_info=exc)
        return (_core.S3LECT_STORE_TRANSIENT, None, None, msg)

    @staticmethod
    def _etag(op: str, etag: Any) -> Optional[str]:
        if isinstance(etag, bytes):
            etag = etag.decode("utf-8", "replace")
        if not isinstance(etag, str) or not etag:
            return None
        return etag

    def get(self, key: str, timeout_ms: int) -> _Answer:
        try:
            with _StoreCall():
                answer = self.store.get(key)
        except BaseException as exc:  # noqa: BLE001 - reported to the core, never lost
            return self._failed("get", exc)
        if answer is None:
            return (_core.S3LECT_STORE_NOT_FOUND, None, None, None)
        try:
            data, etag = answer
            body = bytes(data)
        except (TypeError, ValueError):
            return (
                _core.S3LECT_STORE_FATAL,
                None,
                None,
                f"custom store get() must return (bytes, etag) or None, got {answer!r:.80}",
            )
        tag = self._etag("get", etag)
        if tag is None:
            return (
                _core.S3LECT_STORE_FATAL,
                None,
                None,
                f"custom store get() returned an empty or non-str etag {etag!r:.80}",
            )
        return (_core.S3LECT_STORE_OK, body, tag, None)

    def put(self, key: str, data: bytes, if_match: Optional[str], timeout_ms: int) -> _Answer:
        # The C API passes NULL for "must not exist"; the Python protocol says "*".
        condition = "*" if if_match is None else if_match
        try:
            with _StoreCall():
                etag = self.store.put(key, data, if_match=condition)
        except BaseException as exc:  # noqa: BLE001
            return self._failed("put", exc)
        tag = self._etag("put", etag)
        if tag is None:
            return (
                _core.S3LECT_STORE_FATAL,
                None,
                None,
                f"custom store put() must return the new etag (a non-empty str), got {etag!r:.80}",
            )
        return (_core.S3LECT_STORE_OK, None, tag, None)

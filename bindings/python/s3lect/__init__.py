# SPDX-License-Identifier: Apache-2.0
"""s3lect: leader election for processes that share nothing but an S3 bucket.

One object in the bucket is the lock; conditional writes decide who holds it.
This package wraps the s3lect C library (linked into ``s3lect._core``)::

    import s3lect

    with s3lect.Elector("s3://my-bucket/leader.json", server_id="node-a") as el:
        if el.wait_for_leadership(timeout=30):
            print("leader, fencing token", el.term)

See :class:`Elector` for every setting, :class:`Store` for custom stores and
the README of the Python binding for more examples.
"""

from __future__ import annotations

try:
    from . import _core
except ImportError as exc:  # pragma: no cover - a broken build or a source checkout
    raise ImportError(
        "the s3lect C extension (s3lect._core) is missing or cannot be loaded: "
        f"{exc}. Install the package with `pip install ./bindings/python` (it builds the "
        "extension) instead of importing it from the source tree."
    ) from exc

from ._config import Duration
from ._elector import Elector, EventStream
from ._errors import (
    AuthError,
    BusyError,
    CallbackError,
    ConfigError,
    CorruptRecordError,
    Error,
    FatalStoreError,
    FencedError,
    LocalIOError,
    NotFoundError,
    NotLeaderError,
    PreconditionFailed,
    RetriesExhaustedError,
    StateError,
    StoppedError,
    StoreError,
    TransientError,
    UnsupportedError,
    WaitTimeout,
    error_from_code,
)
from ._fence import Fence, FencedObject
from ._store import MemoryStore, Store
from ._types import Event, EventType, LostReason, State, Status

#: Version of this package, which is the version of the C core it contains.
__version__: str = str(_core.s3lect_version())


def core_version() -> str:
    """Version of the linked C library (``s3lect_version()``)."""
    return str(_core.s3lect_version())


#: The Content-Type to serve :func:`metrics_text` with.
METRICS_CONTENT_TYPE: str = "text/plain; version=0.0.4; charset=utf-8"


def metrics_text(*electors: Elector) -> str:
    """The Prometheus text exposition (format 0.0.4) of the given electors
    (each labelled ``lock`` and ``id``; docs/metrics.md), for your own HTTP
    server, e.g. a Flask/FastAPI route returning it with
    :data:`METRICS_CONTENT_TYPE`. Never waits for the store."""
    for e in electors:
        if not isinstance(e, Elector):
            raise TypeError(f"metrics_text() takes Elector objects, not {type(e).__name__}")
    rc, text = _core.s3lect_metrics_text([e._h() for e in electors])
    if rc != 0:
        raise error_from_code(rc, "s3lect_metrics_text failed")
    return text or ""


__all__ = [
    "__version__",
    "core_version",
    "metrics_text",
    "METRICS_CONTENT_TYPE",
    "Duration",
    "Elector",
    "EventStream",
    "Fence",
    "FencedObject",
    "Event",
    "EventType",
    "LostReason",
    "State",
    "Status",
    "Store",
    "MemoryStore",
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
]

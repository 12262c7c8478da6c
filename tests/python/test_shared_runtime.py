# SPDX-License-Identifier: Apache-2.0
"""The binding on libs3lect's shared runtime: callback and worker threads
serve every elector of the process, so 'inside a callback' and 'inside a
store call' are about the call, not the thread."""

from __future__ import annotations

import threading
from typing import Any, List

import s3lect


def test_store_function_cannot_stop_another_elector(tmp_path):
    """From a custom store call, stop() on any elector is refused at once."""
    other = s3lect.Elector(f"file://{tmp_path}/other", server_id="o", new_lock_wait=0).start()
    seen: List[BaseException] = []
    done = threading.Event()

    class Store(s3lect.MemoryStore):
        def get(self, key: str) -> Any:
            if not done.is_set():
                try:
                    other.stop()
                except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                    seen.append(exc)
                done.set()
            return super().get(key)

    el = s3lect.Elector("k", server_id="a", store=Store(), frequent_interval=0.2,
                        infrequent_interval=0.5).start()
    try:
        assert done.wait(10), "the store was never called"
        assert len(seen) == 1 and isinstance(seen[0], s3lect.BusyError), seen
        assert "custom store" in str(seen[0])
        assert not other.stopped and other.wait_for_leadership(timeout=10)
    finally:
        el.stop()
        other.stop()


def test_peer_response_from_another_electors_callback(tmp_path):
    """Only the elector's own callbacks are refused peer_response(): another
    elector's callback, on a thread of the same runtime, may call it."""
    a = s3lect.Elector(f"file://{tmp_path}/a", server_id="a", new_lock_wait=0).start()
    assert a.wait_for_leadership(timeout=10)
    got: List[Any] = []
    done = threading.Event()

    def on_acquire(term: int) -> None:
        try:
            got.append(a.peer_response()[0])
        except BaseException as exc:  # noqa: BLE001
            got.append(exc)
        done.set()

    b = s3lect.Elector(f"file://{tmp_path}/b", server_id="b", on_acquire=on_acquire,
                       new_lock_wait=0).start()
    try:
        assert done.wait(10), "b never acquired"
        assert got == [200], got
    finally:
        b.stop()
        a.stop()

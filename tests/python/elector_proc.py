# SPDX-License-Identifier: Apache-2.0
"""A child process for the multi-process tests.

    python elector_proc.py LOCK SERVER_ID [MODE]

Settings come from the environment through Elector.from_env (AWS_* and
S3LECT_*). Prints one JSON object per line on stdout: {"event": "started"},
then "acquired"/"lost"/"leader_changed" as they happen, "stopped" after a
graceful stop. SIGTERM or SIGINT stops gracefully (releasing the lock).

MODE:
  run       (default) run until signalled
  exit      on SIGTERM, return from main without calling stop(): the atexit
            handler must stop it (and release the lock)
  drop      on SIGTERM, drop the last reference to the Elector on another
            thread and garbage-collect it; then exit without calling stop()
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading

import s3lect


def emit(**fields: object) -> None:
    fields["pid"] = os.getpid()
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> int:
    lock, server_id = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "run"
    done = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    el = s3lect.Elector.from_env(
        lock,
        server_id=server_id,
        on_acquire=lambda term: emit(event="acquired", term=term),
        on_lose=lambda term, reason: emit(event="lost", term=term, reason=str(reason)),
        on_leader_change=lambda lid, addr, term: emit(event="leader_changed", leader_id=lid,
                                                       term=term),
    )
    el.start()
    emit(event="started")
    while not done.wait(0.5):
        pass
    if mode == "exit":
        emit(event="exiting", term=el.term)
        return 0
    if mode == "drop":
        emit(event="dropping", term=el.term)
        box = [el]
        del el

        def drop() -> None:
            box.clear()
            gc.collect()

        t = threading.Thread(target=drop)
        t.start()
        t.join()
        emit(event="dropped")
        return 0
    el.stop()
    emit(event="stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

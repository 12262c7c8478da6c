# SPDX-License-Identifier: Apache-2.0
"""Freezing a process tree (a paused machine, a long GC pause): SIGSTOP of
a process and of every process below it, whatever group or session they
moved to (`s3lect run`'s command runs in process groups of its own), and
SIGCONT of them all afterwards.

    frozen = freeze(node.pid)
    try:
        ...  # the node and its command run no code
    finally:
        thaw(frozen)
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def pid_gone(pid: int) -> bool:
    """pid has exited (a zombie counts: it runs no code)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            out += [int(x) for x in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            pass
    return out


def tree_below(pid: int) -> list[int]:
    """The live processes below pid, at any depth, parents before children."""
    out: list[int] = []
    todo = [pid]
    while todo and len(out) < 10000:
        for c in _children(todo.pop(0)):
            if c not in out and not pid_gone(c):
                out.append(c)
                todo.append(c)
    return out


def freeze(pid: int) -> list[int]:
    """SIGSTOP of pid, then of every process below it (a stopped process
    forks no more, so a few walks find them all). Returns every pid stopped,
    pid first, for thaw()."""
    os.kill(pid, signal.SIGSTOP)
    stopped = [pid]
    for _ in range(20):
        new = [p for p in tree_below(pid) if p not in stopped]
        if not new:
            break
        for p in new:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        stopped += new
    return stopped


def thaw(pids: list[int]) -> None:
    """SIGCONT of what freeze() stopped, the processes below first (the top
    one, running again, finds its children running)."""
    for p in reversed(pids):
        try:
            os.kill(p, signal.SIGCONT)
        except ProcessLookupError:
            pass

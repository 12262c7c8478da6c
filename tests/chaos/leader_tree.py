#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A CMD for `s3lect run` whose descendants ignore SIGTERM (issue 14, item 1).

    leader_tree.py LOG [MAX_LIFE_S]

The CMD itself behaves like leader_cmd.py (logs `start`, `hb` every 0.1 s,
and `end` when SIGTERM arrives, then exits). Before its first heartbeat it
starts three descendants that ignore SIGTERM (and SIGHUP) and can only be
stopped by SIGKILL:

  group    a child in the CMD's process group
  setsid   a grandchild (child of `group`) that called setsid(): its own
           session and process group, out of reach of a signal to the CMD's
           group
  daemon   a double-forked daemon: the CMD forks, the child calls setsid(),
           forks the daemon and exits, so the daemon is reparented (to init,
           or to the nearest child subreaper)

Each descendant logs `start` and then `hb` every 0.1 s, with the same term
and node and a sixth field: the CMD's pid (the tree it belongs to; the
checker treats the tree as running until its last process stops). A
descendant has no `end` line (SIGKILL leaves no chance); the test sees it
gone. As a safety net against a test that dies without cleaning up, every
process of the tree exits by itself after MAX_LIFE_S seconds (default 120),
logging `end`.

Lines are "<event> <term> <id> <pid> <t> <root>" with t = CLOCK_MONOTONIC in
seconds, each written with one write(2) on an O_APPEND descriptor.
"""

import os
import signal
import sys
import time

HEARTBEAT_S = 0.1
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print("usage: leader_tree.py LOG [MAX_LIFE_S]", file=sys.stderr)
        return 2
    log_path = sys.argv[1]
    max_life = float(sys.argv[2]) if len(sys.argv) == 3 else 120.0
    term = os.environ.get("S3LECT_TERM", "?")
    node = os.environ.get("S3LECT_LEADER_ID", "?")
    root = os.getpid()
    born = time.monotonic()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(event: str) -> None:
        os.write(fd, f"{event} {term} {node} {os.getpid()} {time.monotonic():.6f} {root}\n"
                 .encode())

    def live(ignore: bool) -> None:
        """Logs start, then heartbeats until MAX_LIFE_S (never returns)."""
        if ignore:
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        log("start")
        while time.monotonic() - born < max_life:
            time.sleep(HEARTBEAT_S)
            log("hb")
        log("end")
        os._exit(0)

    def on_term(_signum, _frame):
        log("end")
        os._exit(0)

    # Until every process has its disposition, a stop signal waits (blocked):
    # a descendant must not die of it, nor the CMD before logging.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    log("start")  # the CMD first: a descendant's start needs its tree's start

    # group: a child in the CMD's process group; it starts the setsid grandchild.
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            live(ignore=True)
        live(ignore=True)

    # daemon: fork, setsid, fork again, and the middle process exits.
    mid = os.fork()
    if mid == 0:
        os.setsid()
        if os.fork() == 0:
            live(ignore=True)
        os._exit(0)
    os.waitpid(mid, 0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    while time.monotonic() - born < max_life:
        time.sleep(HEARTBEAT_S)
        log("hb")
    log("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

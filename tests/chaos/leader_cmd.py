#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The CMD that `s3lect run` starts in the chaos tests: it records when it leads.

    leader_cmd.py LOG

Appends lines "<event> <term> <id> <pid> <t>" to LOG, where t is
CLOCK_MONOTONIC in seconds (one clock for every process on the host) and
event is
  start  when it starts (s3lect started it as leader of S3LECT_TERM),
  hb     every HEARTBEAT_S while it runs (so a killed CMD's end is bounded),
  end    when it gets SIGTERM (then it exits at once, status 0).
Each line is written with one write(2) on an O_APPEND descriptor, so lines
of several processes never interleave.
"""

import os
import signal
import sys
import time

HEARTBEAT_S = 0.1


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: leader_cmd.py LOG", file=sys.stderr)
        return 2
    term = os.environ.get("S3LECT_TERM", "?")
    node = os.environ.get("S3LECT_LEADER_ID", "?")
    pid = os.getpid()
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(event: str) -> None:
        os.write(fd, f"{event} {term} {node} {pid} {time.monotonic():.6f}\n".encode())

    def on_term(_signum, _frame):
        log("end")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log("start")
    while True:
        time.sleep(HEARTBEAT_S)
        log("hb")


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
"""The command that bench/run failover supervises with `s3lect run`.

    treecmd.py LOG [--grandchild]

Appends "start ID MAIN T" to LOG, then "beat ID MAIN ROLE PID T" every 10 ms
from each of its processes, where ID is S3LECT_LEADER_ID, MAIN the pid of the
command's main process and T time.monotonic() (one clock for every process on
the host, the bench's too). With --grandchild it first double-forks a
grandchild that calls setsid() (so it is in neither the command's process
group nor s3lect's) and ignores SIGTERM: only a supervisor that tracks the
whole tree can stop it. The main process dies on SIGTERM as usual.

The bench reads LOG to see each command tree's lifetime: from its start line
to the last heartbeat of any of its processes.
"""
import os
import signal
import sys
import time

LOG = sys.argv[1]
GRANDCHILD = "--grandchild" in sys.argv[2:]
IDENT = os.environ.get("S3LECT_LEADER_ID", "?")
MAIN = os.getpid()


def write(line: str) -> None:
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())  # one write < PIPE_BUF: lines never interleave
    finally:
        os.close(fd)


def beat_forever(role: str) -> None:
    while True:
        write(f"beat {IDENT} {MAIN} {role} {os.getpid()} {time.monotonic():.6f}")
        time.sleep(0.01)


write(f"start {IDENT} {MAIN} {time.monotonic():.6f}")
if GRANDCHILD:
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            beat_forever("grandchild")
        os._exit(0)
    os.waitpid(child, 0)
beat_forever("main")

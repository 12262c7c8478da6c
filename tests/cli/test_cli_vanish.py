# SPDX-License-Identifier: Apache-2.0
"""A lock deleted under a running cluster (by hand, a lifecycle rule, a store
that lost it): s3lect never deletes a lock, so the leader learns it only at
its next renewal, and until then runs its command. The followers must not
take the missing lock at once: they treat it as held for max_lease_timeout
(4 leases by default) from the first "not found", then one of them leads.
Real `s3lect run` processes on the file store; the check is on the commands
themselves (never two running at once), polled every 20 ms."""
import os
import signal
import subprocess
import time
from pathlib import Path

from harness.cli import running_commands
from harness.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"

LEASE = 3.0
FAST = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
        "--frequent-interval", "500ms", "--infrequent-interval", "1s", "--kill-timeout", "500ms"]


def test_deleted_lock_is_held_then_taken_and_never_two_commands(tmp_path):
    lock = tmp_path / "leader.json"
    tag = f"{90000 + os.getpid() % 9000}"  # a sleep argument no other process uses
    procs, logs = [], []
    try:
        for n in range(3):
            log = tmp_path / f"n{n}.log"
            logs.append(log)
            procs.append(subprocess.Popen(
                [str(BIN), "run", "--lock", str(lock), "--id", f"n{n}", *FAST, "--",
                 "sleep", f"{tag}{n}"],
                stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True))
        wait_for(lambda: len(running_commands(tag)) == 1, timeout=30, what="one command")
        first = running_commands(tag)
        assert len(first) == 1, first
        leader = f"n{first[0][-1]}"
        # Every follower has read the record (a node that never saw it cannot
        # know it vanished: docs/algorithm.md).
        wait_for(lambda: all(f"leader is {leader}" in log.read_text() for log in logs),
                 timeout=15, what="every node to see the leader")
        assert running_commands(tag) == first
        lock.unlink()
        t0 = time.monotonic()
        seen, back = [], None
        # The hold is 4 leases (12 s) from each follower's first "not found";
        # bounded at 30 s on a loaded machine.
        while time.monotonic() < t0 + 30:
            now = running_commands(tag)
            assert len(now) <= 1, f"two commands at once {now}"
            if not now and not seen:
                seen.append(time.monotonic() - t0)  # the old leader stopped
            if now and seen:
                back = time.monotonic() - t0
                break
            time.sleep(0.02)
        assert seen, "the old leader's command never stopped after its lock was deleted"
        assert back is not None, "no command ran again within 30 s of the delete"
        # No node took the missing lock before the hold (4 leases) had passed.
        assert back >= 4 * LEASE - 1, f"a command ran again {back:.1f} s after the delete"
        assert lock.exists()
        text = "".join(log.read_text() for log in logs)
        assert "the lock object vanished from the store" in text, text[-3000:]
        assert "max_lease_timeout" in text, text[-3000:]
        # And one leader from then on.
        end = time.monotonic() + LEASE
        while time.monotonic() < end:
            assert len(running_commands(tag)) == 1
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        # The commands are in the nodes' sessions: none may be left.
        wait_for(lambda: not running_commands(tag), timeout=10, what="no command left")

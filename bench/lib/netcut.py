# SPDX-License-Identifier: Apache-2.0
"""A host cut off from the network, without a reset: packets dropped by
nftables in a network namespace of the bench's own (issue 38 item 1, the
"leader cut off" rows of `bench/run hostdeath`).

enter() moves this process (and every process it starts from then on: MinIO,
the nodes) into a new network namespace with only a loopback interface, so
rules added there reach nothing outside the bench. In it, every node talks to
the store through an address of its own (127.R.S.1: row R, slot S; MinIO
listens on every address of the namespace, which is loopback only), so a
node's store traffic is the packets to or from that address; its peer
endpoint is the port in the lock record's leaderAddr. cut() drops both, in
both directions, in one nftables transaction: no RST, no ICMP, a SYN goes
unanswered and an open connection hangs, as when a host loses its link or a
firewall starts to DROP. heal() deletes the rules.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

from common import BenchError

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
_entered = False


def why_not() -> str | None:
    """None when cut-off rows can run here, else why not (nft missing)."""
    if not shutil.which("nft"):
        return ("nft (nftables) is not installed: apt-get install nftables, then run again; "
                "the leader-cut-off rows drop packets with it")
    return None


def enter() -> None:
    """Moves this process into a new network namespace (a user namespace too
    when not root, which must happen before any thread is started) and brings
    its loopback up. Idempotent."""
    global _entered
    if _entered:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNET if uid == 0 else CLONE_NEWUSER | CLONE_NEWNET
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise BenchError(f"cannot make a network namespace for the cut-off rows: "
                         f"unshare: {os.strerror(err)} (run as root, or allow user namespaces)")
    if uid != 0:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1\n")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1\n")
    r = subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"ip link set lo up in the bench's namespace: {r.stderr.strip()}")
    _entered = True


def node_address(row: int, slot: int) -> str:
    """The loopback address node `slot` of row `row` reaches the store at."""
    return f"127.{20 + row}.{slot}.1"


def _nft(script: str) -> None:
    r = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise BenchError(f"nft: {r.stderr.strip()}\n{script}")


class Cut:
    """The rules that cut one node off: its store address and its peer port."""

    def __init__(self, name: str, address: str, port: int | None):
        if not _entered:
            raise BenchError("netcut.enter() first: rules outside the bench's namespace "
                             "would reach the whole machine")
        self.table = f"cut_{name}".replace("-", "_").replace(".", "_")
        rules = [f"ip saddr {address} drop", f"ip daddr {address} drop"]
        if port:
            rules += [f"tcp dport {port} drop", f"tcp sport {port} drop"]
        body = "\n".join(f"    {r}" for r in rules)
        # The input hook only: a packet dropped there left its sender as
        # usual (a DROP in output would fail the sender's call with EPERM,
        # which a cut cable does not do).
        _nft(f"""table inet {self.table} {{
  chain in {{
    type filter hook input priority -10; policy accept;
{body}
  }}
}}
""")
        self.active = True

    def heal(self) -> None:
        if self.active:
            _nft(f"delete table inet {self.table}\n")
            self.active = False

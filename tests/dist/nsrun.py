# SPDX-License-Identifier: Apache-2.0
"""nsrun.py CMD...: runs CMD in a new user namespace and mount namespace
(this process becomes CMD: its pid is CMD's, so signals sent to it reach CMD).

Run as root, every host uid and gid is mapped to itself (a helper process
left in the parent namespace writes the maps: a process may not write a
map wider than its own id for itself), so a Debian root with files of many
owners can be built (mmdebstrap) and used; otherwise only the caller's
ids are mapped, to 0. The user namespace is what lets CMD mount a
binfmt_misc instance of its own (Linux >= 6.7): a qemu-user registration
made there reaches only the processes under it, never the host's.
"""
from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: nsrun.py CMD [ARGS...]", file=sys.stderr)
        return 2
    uid, gid = os.geteuid(), os.getegid()
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    helper = os.fork()
    if helper == 0:  # stays in the parent namespace; writes the maps of its parent
        os.close(ready_w)
        os.close(done_r)
        target = os.getppid()
        if os.read(ready_r, 1) != b"u":
            os._exit(1)
        try:
            if uid == 0:
                maps = [("uid_map", "0 0 4294967295\n"), ("gid_map", "0 0 4294967295\n")]
            else:
                with open(f"/proc/{target}/setgroups", "w") as f:
                    f.write("deny")
                maps = [("uid_map", f"0 {uid} 1\n"), ("gid_map", f"0 {gid} 1\n")]
            for name, text in maps:
                with open(f"/proc/{target}/{name}", "w") as f:
                    f.write(text)
        except OSError as e:
            print(f"nsrun: cannot write the id maps: {e}", file=sys.stderr)
            os._exit(1)
        os.write(done_w, b"k")
        os._exit(0)
    os.close(ready_r)
    os.close(done_w)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        print(f"nsrun: unshare(CLONE_NEWUSER|CLONE_NEWNS): {os.strerror(err)}", file=sys.stderr)
        return 1
    os.write(ready_w, b"u")
    ok = os.read(done_r, 1) == b"k"
    os.waitpid(helper, 0)
    if not ok:
        return 1
    os.close(ready_w)
    os.close(done_r)
    os.setgid(0)
    os.setuid(0)
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"nsrun: {argv[0]}: {e}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

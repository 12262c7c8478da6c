# SPDX-License-Identifier: Apache-2.0
"""Clean Debian roots for the install tests (issue 29 item 2).

A root is a Debian minbase made by mmdebstrap with a few packages
(python3 and python3-venv; gcc for the SDK test), then stripped of every
libssl and libcurl package (python3's stdlib depends on libssl3: without it
Python runs, only its ssl and hashlib-with-OpenSSL modules cannot load,
which pip installing a local wheel does not need). Each is cached as a
tarball under ${S3LECT_CACHE:-~/.cache/s3lect}/roots/, named by the root's
name (suite and architecture) and a hash of the whole mmdebstrap command
(a root made by a newer recipe replaces those of older ones); a test session
extracts the tarballs it needs into its own temporary directory.

Programs run inside a root through nsrun.py: a user and a mount namespace
of their own, the host's /dev and /proc bound in, chroot, and the host's
network namespace (so a MinIO that the harness started on 127.0.0.1 is
reachable; nothing else is reached by the tests). A root of another
architecture than the host's runs under qemu-user: a binfmt_misc instance
mounted inside that user namespace (Linux >= 6.7; the registration never
reaches the host) registers Debian's qemu-user-static interpreter with
flag F (opened at registration, so it works inside the chroot without a
copy of qemu there); every exec in the root, a subprocess's too, then goes
through qemu. The same is done to build such a root with mmdebstrap.

Run as root (the test machine and CI), the namespace maps every id to
itself: it gives a private binfmt_misc and private mounts, not a sandbox.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NSRUN = HERE / "nsrun.py"

DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
QEMU_NAME = {"amd64": "x86_64", "arm64": "aarch64"}  # Debian arch -> qemu's name
MACHINE = {"amd64": "x86_64", "arm64": "aarch64"}  # Debian arch -> uname -m
HOST_ARCH = DEBIAN_ARCH.get(platform.machine(), platform.machine())
MIRROR = "http://deb.debian.org/debian"

# Files that must not be in a clean root (the tests assert it on the tarball).
FORBIDDEN_LIBS = ("libssl.so", "libcrypto.so", "libcurl.so", "libcurl-gnutls.so")
COMPILERS = ("cc", "gcc", "c99", "c89", "clang", "tcc", "x86_64-linux-gnu-gcc",
             "aarch64-linux-gnu-gcc")

# Remove every libssl* and libcurl* package that a package's dependencies
# brought in (dpkg --force-depends: python3's stdlib depends on libssl3).
STRIP_HOOK = ('chroot "$1" sh -c \'pkgs=$(dpkg-query -W -f="\\${Package}\\n" | '
              'grep -E "^lib(ssl|curl)" || true); '
              '[ -z "$pkgs" ] || dpkg --purge --force-depends $pkgs\'')


def cache_dir() -> Path:
    return Path(os.environ.get("S3LECT_CACHE", Path.home() / ".cache" / "s3lect")) / "roots"


def binfmt_line(arch: str) -> str | None:
    """The binfmt_misc registration for running ARCH's binaries here, from
    Debian's qemu-user-static (None when ARCH is the host's)."""
    if arch == HOST_ARCH:
        return None
    q = QEMU_NAME[arch]
    conf = Path(f"/usr/lib/binfmt.d/qemu-{q}.conf")
    interp = Path(f"/usr/libexec/qemu-binfmt/{q}-binfmt-P")
    if not conf.is_file() or not interp.exists():
        raise RootUnavailable(f"no qemu-user-static for {arch} ({conf}, {interp}): "
                              "apt-get install qemu-user-static (scripts/deps does)")
    line = conf.read_text().strip()
    # :name:type:offset:magic:mask:interpreter:flags; magic and mask can hold ':'
    # only escaped, so splitting from both ends is safe.
    head, _interp, _flags = line.rsplit(":", 2)
    # F: the interpreter is opened now, so it works inside the chroot. P:
    # argv[0] is kept (the -binfmt-P name tells qemu so). O: unreadable binaries.
    return f"{head}:{interp}:POF"


class RootUnavailable(Exception):
    """A root cannot be made or used on this machine (the reason is the message)."""


# Runs "$@" with the root's mounts: $1 the root, $2 the binfmt registration
# ("" for none), the rest the command (run by chroot inside the root).
SETUP = r"""
set -e
r=$1; reg=$2; shift 2
mount --make-rprivate /
mount --rbind /dev "$r/dev"
mount --rbind /proc "$r/proc"
if [ -n "$reg" ]; then
    b=$(mktemp -d "${TMPDIR:-/tmp}/s3lect-binfmt.XXXXXX")
    mount -t binfmt_misc binfmt_misc "$b" || {
        echo "roots: cannot mount binfmt_misc in a user namespace (Linux >= 6.7 can)" >&2
        exit 97
    }
    printf '%s' "$reg" >"$b/register"
    rmdir "$b" 2>/dev/null || true
fi
exec chroot "$r" "$@"
"""

BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
}


class Root:
    """An extracted root at PATH, of Debian architecture ARCH."""

    def __init__(self, path: Path, arch: str, name: str):
        self.path = path
        self.arch = arch
        self.name = name
        self.reg = binfmt_line(arch) or ""

    def host_path(self, inside: str) -> Path:
        return self.path / inside.lstrip("/")

    def command(self, argv: list[str]) -> list[str]:
        return [sys.executable, str(NSRUN), "sh", "-c", SETUP, "setup", str(self.path),
                self.reg, *argv]

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        e = dict(BASE_ENV)
        e.update(extra or {})
        return e

    def run(self, argv: list[str], env: dict[str, str] | None = None, timeout: float = 300,
            check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run(self.command(argv), env=self.env(env), capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"in root {self.name}: {shlex.join(argv)}: exit "
                                 f"{r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        return r

    def popen(self, argv: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
        return subprocess.Popen(self.command(argv), env=self.env(env), **kw)


class Spec:
    """What a root holds: Debian SUITE for ARCH with PACKAGES (and python3's
    name for the tests), made by one mmdebstrap command."""

    def __init__(self, name: str, suite: str, arch: str, packages: list[str]):
        self.name = name
        self.suite = suite
        self.arch = arch
        self.packages = sorted(packages)

    def mmdebstrap_args(self) -> list[str]:
        return ["mmdebstrap", "--variant=minbase", "--format=tar", f"--arch={self.arch}",
                f"--include={','.join(self.packages)}",
                "--dpkgopt=path-exclude=/usr/share/doc/*",
                "--dpkgopt=path-exclude=/usr/share/man/*",
                "--dpkgopt=path-exclude=/usr/share/locale/*",
                "--dpkgopt=path-exclude=/usr/share/info/*",
                f"--customize-hook={STRIP_HOOK}",
                self.suite]

    def key(self) -> str:
        h = hashlib.sha256("\0".join(self.mmdebstrap_args() + [MIRROR]).encode()).hexdigest()
        return f"{self.name}-{h[:12]}"

    def tarball(self) -> Path:
        return cache_dir() / f"{self.key()}.tar"

    def ensure(self, log) -> Path:
        """The cached tarball, made first if missing (one maker at a time)."""
        tar = self.tarball()
        if tar.is_file():
            return tar
        if not shutil.which("mmdebstrap"):
            raise RootUnavailable("mmdebstrap is not installed (scripts/deps installs it)")
        reg = binfmt_line(self.arch)
        if reg and not shutil.which("arch-test"):
            raise RootUnavailable("mmdebstrap needs arch-test for a foreign root "
                                  "(scripts/deps installs it)")
        tar.parent.mkdir(parents=True, exist_ok=True)
        with open(tar.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if tar.is_file():
                return tar
            part = tar.with_suffix(".tar.part")
            args = self.mmdebstrap_args() + [str(part), MIRROR]
            if reg:
                # In a user namespace with its own binfmt_misc (see the module
                # text), and a PID namespace so that mmdebstrap can mount /proc.
                script = ('set -e; b=$(mktemp -d); mount -t binfmt_misc binfmt_misc "$b"; '
                          'printf "%s" "$1" >"$b/register"; shift; '
                          'exec unshare -p -f --mount-proc "$@"')
                cmd = [sys.executable, str(NSRUN), "sh", "-c", script, "mk", reg, *args]
            else:
                cmd = args
            log(f"roots: making {tar.name}: {shlex.join(args)}")
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            if r.returncode != 0:
                part.unlink(missing_ok=True)
                raise AssertionError(f"mmdebstrap failed (exit {r.returncode}):\n"
                                     f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
            part.rename(tar)
            # Older recipes' roots of this name are of no further use.
            for old in tar.parent.glob(f"{self.name}-" + "?" * 12 + ".tar"):
                if old != tar:
                    old.unlink()
        return tar

    def extract(self, dest: Path, log) -> Root:
        tar = self.ensure(log)
        dest.mkdir(parents=True)
        subprocess.run(["tar", "-xf", str(tar), "-C", str(dest)], check=True)
        return Root(dest, self.arch, self.name)


def tar_members(tar: Path) -> list[str]:
    r = subprocess.run(["tar", "-tf", str(tar)], capture_output=True, text=True, check=True)
    return r.stdout.splitlines()


def unclean(members: list[str], compiler_allowed: bool = False) -> list[str]:
    """The members of a root's tarball that a clean root must not have."""
    bad = []
    for m in members:
        base = m.rstrip("/").rsplit("/", 1)[-1]
        if base.startswith(FORBIDDEN_LIBS):
            bad.append(m)
        elif not compiler_allowed and ("/bin/" in m and
                                       (base in COMPILERS or base.startswith("gcc-"))):
            bad.append(m)
    return bad


def new_temp_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))

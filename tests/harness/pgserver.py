# SPDX-License-Identifier: Apache-2.0
"""A throwaway PostgreSQL server on a free 127.0.0.1 port.

Debian's server binaries (/usr/lib/postgresql/<version>/bin, the highest
version installed; package postgresql, which scripts/deps installs without
starting its system cluster) run on a fresh data directory in a temporary
directory: initdb with trust authentication for the user s3lect, postgres
listening on 127.0.0.1 only (its Unix socket in the temporary directory), no
fsync, database s3lect. PostgreSQL refuses to run as root, so as root the
server runs as the user nobody (group nogroup) via setpriv.

PostgresServer: start(), stop() (fast shutdown, SIGKILL after a bound, the
directory removed), restart(hard=False) -> seconds (immediate shutdown, or
SIGKILL of every server process, then the same port and data), pause() /
resume() (SIGSTOP/SIGCONT of the postmaster and all its children: PostgreSQL
puts each child in a session of its own, so these are signalled one by one,
found through /proc), psql(sql),
host, port, dsn, env().
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.servers import START_TIMEOUT_S, ServerStartError, free_port, wait_stopped  # noqa: E402
else:
    from .servers import START_TIMEOUT_S, ServerStartError, free_port, wait_stopped

PG_ROOT = Path("/usr/lib/postgresql")
USER = "s3lect"
DATABASE = "s3lect"
RUN_AS = ("nobody", "nogroup")  # when we are root


def ensure_postgres() -> Path:
    """The bin directory of the highest PostgreSQL server version installed
    (initdb, postgres, pg_isready, psql)."""
    versions = []
    if PG_ROOT.is_dir():
        for d in PG_ROOT.iterdir():
            if re.fullmatch(r"\d+(\.\d+)?", d.name) and all(
                os.access(d / "bin" / t, os.X_OK) for t in ("initdb", "postgres", "pg_isready", "psql")
            ):
                versions.append((float(d.name), d / "bin"))
    if not versions:
        raise ServerStartError(
            f"PostgreSQL server binaries not found under {PG_ROOT}/<version>/bin: "
            "install Debian package postgresql (scripts/deps does)"
        )
    return max(versions)[1]


def _started(pid: int) -> str | None:
    """The start time of live (not zombie) process pid, to tell it from a later
    one with its pid; None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else fields[19]
    except (OSError, IndexError):
        return None


def _children(ppid: int) -> list[tuple[int, str]]:
    """(pid, start time) of the live children of ppid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 19 and fields[0] != "Z" and int(fields[1]) == ppid:
            out.append((int(d), fields[19]))
    return out


class PostgresError(RuntimeError):
    """psql failed: the message has its stderr."""


class PostgresServer:
    name = "postgres"
    host = "127.0.0.1"

    def __init__(self, bindir: Path | None = None, settings: dict[str, str] | None = None):
        """settings: more server settings (-c NAME=VALUE), e.g. ssl=on."""
        self.bindir = bindir or ensure_postgres()
        self.settings = dict(settings or {})
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.root = os.geteuid() == 0
        self.workdir = Path(tempfile.mkdtemp(prefix="s3lect-postgres-"))
        self.data_dir = self.workdir / "data"
        self.socket_dir = self.workdir / "sock"
        self.log_path = self.workdir / "postgres.log"
        self.socket_dir.mkdir()
        if self.root:
            import grp
            import pwd

            uid, gid = pwd.getpwnam(RUN_AS[0]).pw_uid, grp.getgrnam(RUN_AS[1]).gr_gid
            for p in (self.workdir, self.socket_dir):
                os.chown(p, uid, gid)
        os.chmod(self.workdir, 0o700)

    # -- properties ---------------------------------------------------------
    @property
    def dsn(self) -> str:
        return f"postgres://{USER}@{self.host}:{self.port}/{DATABASE}"

    def env(self) -> dict[str, str]:
        """libpq's variables for a client of this server."""
        return {"PGHOST": self.host, "PGPORT": str(self.port), "PGUSER": USER, "PGDATABASE": DATABASE}

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return "(no log)"

    # -- processes ----------------------------------------------------------
    def _as_server_user(self, cmd: list[str]) -> list[str]:
        if not self.root:
            return cmd
        return ["setpriv", f"--reuid={RUN_AS[0]}", f"--regid={RUN_AS[1]}", "--clear-groups", "--", *cmd]

    def _server_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        if self.root:
            env["HOME"] = str(self.workdir)
        return env

    def _initdb(self) -> None:
        cmd = self._as_server_user([
            str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", USER, "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions",
        ])
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               stdin=subprocess.DEVNULL, env=self._server_env(), cwd=self.workdir,
                               timeout=120)
        except subprocess.TimeoutExpired:
            raise ServerStartError(f"initdb did not finish within 120s: {' '.join(cmd)}") from None
        if r.returncode != 0:
            raise ServerStartError(f"initdb failed (status {r.returncode}): {' '.join(cmd)}\n{r.stdout[-4000:]}")

    def command(self) -> list[str]:
        return self._as_server_user([
            str(self.bindir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
            "-k", str(self.socket_dir), "-c", f"listen_addresses={self.host}",
            # fsync off only loses data in an OS crash; synchronous_commit stays on,
            # so a restart (a crash of the server processes) keeps every commit.
            "-c", "fsync=off",
            "-c", "shared_buffers=16MB", "-c", "max_connections=100",
            *[a for k, v in self.settings.items() for a in ("-c", f"{k}={v}")],
        ])

    def _spawn(self) -> None:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=self._server_env(), cwd=self.workdir, start_new_session=True,
        )

    def ready(self) -> bool:
        try:
            r = subprocess.run(
                [str(self.bindir / "pg_isready"), "-q", "-h", self.host, "-p", str(self.port),
                 "-U", USER, "-d", "postgres", "-t", "2"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                timeout=5,
            )
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0

    def _await_ready(self, timeout: float = START_TIMEOUT_S) -> str | None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.ready():
                return None
            time.sleep(0.1)
        if self.proc.poll() is None:
            return f"postgres did not accept connections within {timeout:.0f}s"
        return f"postgres exited with status {self.proc.returncode}"

    def _signal_all(self, sig: int, kids: list[tuple[int, str]] | None = None) -> list[tuple[int, str]]:
        """Sends sig to the postmaster's children (kids, or those it has now)
        and to the postmaster's process group. PostgreSQL puts every child in a
        session of its own (setsid), so killpg on the postmaster misses them."""
        assert self.proc is not None
        if kids is None:
            kids = _children(self.proc.pid)
        for pid, started in kids:
            if _started(pid) == started:  # still that process, not a reused pid
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        return kids

    def _halt(self, first: int, bound: float = 10.0) -> None:
        """Sends first to the postmaster (SIGINT: fast shutdown, SIGQUIT:
        immediate; SIGKILL goes to every server process), waits up to bound,
        then SIGKILLs every server process. Keeps the data directory."""
        p = self.proc
        if p is not None:
            try:
                os.kill(p.pid, signal.SIGSTOP)  # no new children while we look
            except ProcessLookupError:
                pass
            kids = _children(p.pid)
            if first == signal.SIGKILL:
                self._signal_all(signal.SIGKILL, kids)
            else:
                try:
                    os.kill(p.pid, first)
                except ProcessLookupError:
                    pass
                self._signal_all(signal.SIGCONT, kids)  # in case it was paused
            try:
                p.wait(timeout=bound)
            except subprocess.TimeoutExpired:
                pass
            self._signal_all(signal.SIGKILL, kids + _children(p.pid))
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            # Children outlive a killed postmaster only while stopped or busy;
            # give them a bounded moment to go (a restart needs their shared memory gone).
            deadline = time.monotonic() + 10
            while any(_started(pid) == st for pid, st in kids) and time.monotonic() < deadline:
                time.sleep(0.02)
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None

    # -- life cycle ---------------------------------------------------------
    def start(self) -> "PostgresServer":
        if self.root and not shutil.which("setpriv"):
            raise ServerStartError("setpriv not found (Debian package util-linux): needed to run "
                                   "PostgreSQL as nobody")
        self._initdb()
        errors = []
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = free_port()
            self._spawn()
            why = self._await_ready()
            if why is None:
                try:
                    self.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
                    return self
                except (PostgresError, OSError, subprocess.TimeoutExpired) as e:
                    why = f"creating database {DATABASE}: {e}"
            errors.append(why)
            self._halt(signal.SIGINT)
        log = self.log_text()
        self.stop(keep_dir=True)
        raise ServerStartError(
            f"postgres could not be started on 127.0.0.1 ({'; '.join(errors)}).\n"
            f"command: {' '.join(self.command())}\n--- postgres log ({self.log_path}) ---\n{log}"
        )

    def stop(self, keep_dir: bool = False) -> None:
        """Fast shutdown (SIGINT), SIGKILL of every server process after 10 s; removes the
        temporary directory (data and log) unless keep_dir."""
        self._halt(signal.SIGINT)
        if not keep_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def give_to_server_user(self, path: Path, mode: int = 0o600) -> None:
        """Makes a file (a TLS key) the server's own, as PostgreSQL requires."""
        if self.root:
            import grp
            import pwd

            os.chown(path, pwd.getpwnam(RUN_AS[0]).pw_uid, grp.getgrnam(RUN_AS[1]).gr_gid)
        os.chmod(path, mode)

    def restart(self, hard: bool = False) -> float:
        """Stops the server like a crash (immediate shutdown, SIGQUIT; with
        hard=True SIGKILL of every server process) and starts it again on the same port
        and data directory; returns the seconds until it accepts connections."""
        t0 = time.monotonic()
        self._halt(signal.SIGKILL if hard else signal.SIGQUIT)
        self._spawn()
        why = self._await_ready()
        if why is not None:
            raise ServerStartError(
                f"postgres did not come back on port {self.port} after a restart ({why}).\n"
                f"--- postgres log ---\n{self.log_text()}"
            )
        return time.monotonic() - t0

    def pause(self) -> None:
        """SIGSTOP to the postmaster and all its children: connections are
        accepted by the kernel but nothing answers."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)
            self._signal_all(signal.SIGSTOP)
            wait_stopped(self.proc.pid)  # the postmaster accepts; its stop is what counts

    def resume(self) -> None:
        if self.proc is not None:
            self._signal_all(signal.SIGCONT)

    def psql(self, sql: str, database: str = DATABASE, timeout: float = 30.0) -> str:
        """Runs sql with psql over TCP (any local user: trust authentication);
        returns its output (unaligned, tuples only); raises PostgresError on an
        error, subprocess.TimeoutExpired after timeout."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["PGCONNECT_TIMEOUT"] = "5"
        r = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", self.host, "-p", str(self.port), "-U", USER, "-d", database, "-c", sql],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, timeout=timeout,
        )
        if r.returncode != 0:
            raise PostgresError(f"psql failed (status {r.returncode}) for {sql!r}: {r.stderr.strip()}")
        return r.stdout

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

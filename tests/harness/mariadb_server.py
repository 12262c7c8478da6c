# SPDX-License-Identifier: Apache-2.0
"""A throwaway MariaDB server on a free 127.0.0.1 port, for the mysql://
store's tests.

Debian's mariadb-server binaries (scripts/deps installs the package; no
service starts) run on a fresh data directory in a temporary directory:
mariadb-install-db, then mariadbd --no-defaults listening on 127.0.0.1
only, its Unix socket in the temporary directory, no binary log. The admin
is root over that socket (no password); the store's user `s3lect` (a
random throwaway password, in `password`) may SELECT, INSERT, UPDATE,
DELETE and CREATE in the database `s3lect`, and nothing else (no SUPER: a
read-only server refuses its writes). As root, mariadbd runs with
--user=root (it refuses root otherwise).

MariaDBServer: start(), stop() (SIGTERM, SIGKILL after a bound, the
directory removed), restart(hard=False) -> seconds (SIGTERM or SIGKILL,
then the same port and data), pause() / resume() (SIGSTOP/SIGCONT of
mariadbd: one process), sql(statement) as root, set_read_only(on),
kill_connections(user) (KILL CONNECTION of each of the user's sessions),
connection_ids(user); tls=(ca.pem, server.pem, server.key) of
harness/pki.py turns TLS on (have_ssl). env() gives MYSQL_PWD (the
store's password from the environment, so no URL shows it);
url(key) the lock URL without the password.
"""

from __future__ import annotations

import os
import secrets
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

USER = "s3lect"
DATABASE = "s3lect"
# What the store's user may do (docs/stores.md): the lock table's four
# statements and CREATE for init-store.
GRANTS = "SELECT, INSERT, UPDATE, DELETE, CREATE"


def mariadb_binaries() -> dict[str, str]:
    """mariadbd, mariadb-install-db and the mariadb client (Debian's paths)."""
    found = {}
    for name, fallbacks in (("mariadbd", ["/usr/sbin/mariadbd"]),
                            ("mariadb-install-db", ["/usr/bin/mariadb-install-db"]),
                            ("mariadb", ["/usr/bin/mariadb"])):
        b = shutil.which(name) or next((f for f in fallbacks if os.access(f, os.X_OK)), None)
        if not b:
            raise ServerStartError(f"{name} is not installed (scripts/deps installs Debian's "
                                   "mariadb-server package, no service started)")
        found[name] = b
    return found


class MariaDBError(RuntimeError):
    """The mariadb client failed: the message has its stderr."""


class MariaDBServer:
    name = "mariadb"
    host = "127.0.0.1"

    def __init__(self, tls: tuple[Path, Path, Path] | None = None,
                 settings: dict[str, str] | None = None):
        """tls: (CA, certificate, key) files for the server (have_ssl);
        settings: more mariadbd options (--NAME=VALUE)."""
        self.bin = mariadb_binaries()
        self.tls = tls
        self.settings = dict(settings or {})
        self.port = 0
        self.password = secrets.token_hex(12)
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.root = os.geteuid() == 0
        self.workdir = Path(tempfile.mkdtemp(prefix="s3lect-mariadb-"))
        self.data_dir = self.workdir / "data"
        self.socket = self.workdir / "mariadb.sock"
        self.log_path = self.workdir / "mariadb.log"
        os.chmod(self.workdir, 0o700)

    # -- properties ---------------------------------------------------------
    def url(self, key: str, host: str | None = None, port: int | None = None,
            extra: str = "") -> str:
        """The lock URL of key (no password: env() has it)."""
        h = host or self.host
        return (f"mysql://{USER}@{h}:{port or self.port}/{DATABASE}?key={key}"
                + (f"&{extra}" if extra else ""))

    def env(self) -> dict[str, str]:
        return {"MYSQL_PWD": self.password}

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return "(no log)"

    # -- processes ----------------------------------------------------------
    def _server_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MYSQL")}
        env.update(LC_ALL="C", LANG="C", HOME=str(self.workdir))
        return env

    def _install(self) -> None:
        cmd = [self.bin["mariadb-install-db"], "--no-defaults", f"--datadir={self.data_dir}",
               "--auth-root-authentication-method=normal", "--skip-test-db",
               *(["--user=root"] if self.root else [])]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               stdin=subprocess.DEVNULL, env=self._server_env(), cwd=self.workdir,
                               timeout=120)
        except subprocess.TimeoutExpired:
            raise ServerStartError(f"mariadb-install-db did not finish within 120s: {' '.join(cmd)}") from None
        if r.returncode != 0:
            raise ServerStartError(f"mariadb-install-db failed (status {r.returncode}): "
                                   f"{' '.join(cmd)}\n{r.stdout[-4000:]}")

    def command(self) -> list[str]:
        tls = []
        if self.tls:
            ca, cert, key = self.tls
            tls = [f"--ssl-ca={ca}", f"--ssl-cert={cert}", f"--ssl-key={key}"]
        return [
            self.bin["mariadbd"], "--no-defaults", f"--datadir={self.data_dir}",
            f"--socket={self.socket}", f"--port={self.port}", f"--bind-address={self.host}",
            f"--pid-file={self.workdir / 'mariadb.pid'}", f"--log-error={self.log_path}",
            "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=16M",
            # Every commit survives a crash of the server process (the store
            # tests restart it with SIGKILL): the log is written at each commit.
            "--innodb-flush-log-at-trx-commit=1", "--max-connections=200",
            *(["--user=root"] if self.root else []), *tls,
            *[f"--{k}={v}" for k, v in self.settings.items()],
        ]

    def _spawn(self) -> None:
        self._log = open(self.workdir / "mariadbd.out", "ab")
        self.proc = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=self._server_env(), cwd=self.workdir, start_new_session=True,
        )

    def ready(self) -> bool:
        try:
            self.sql("SELECT 1", timeout=5)
            return True
        except (MariaDBError, subprocess.TimeoutExpired, OSError):
            return False

    def _await_ready(self, timeout: float = START_TIMEOUT_S) -> str | None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.socket.exists() and self.ready():
                return None
            time.sleep(0.1)
        if self.proc.poll() is None:
            return f"mariadbd did not accept connections within {timeout:.0f}s"
        return f"mariadbd exited with status {self.proc.returncode}"

    def _halt(self, sig: int, bound: float = 20.0) -> None:
        """Sends sig to mariadbd (SIGCONT too, in case it was paused), waits
        up to bound, then SIGKILL. Keeps the data directory."""
        p = self.proc
        if p is not None:
            for s in (sig, signal.SIGCONT):
                try:
                    os.kill(p.pid, s)
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=bound)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None

    # -- life cycle ---------------------------------------------------------
    def start(self) -> "MariaDBServer":
        self._install()
        errors = []
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = free_port()
            self._spawn()
            why = self._await_ready()
            if why is None:
                try:
                    self.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}; "
                             f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{self.password}'; "
                             f"GRANT {GRANTS} ON {DATABASE}.* TO '{USER}'@'%'")
                    return self
                except (MariaDBError, OSError, subprocess.TimeoutExpired) as e:
                    why = f"creating database {DATABASE} and user {USER}: {e}"
            errors.append(why)
            self._halt(signal.SIGTERM)
        log = self.log_text()
        self.stop(keep_dir=True)
        raise ServerStartError(
            f"mariadbd could not be started on 127.0.0.1 ({'; '.join(errors)}).\n"
            f"command: {' '.join(self.command())}\n--- mariadb log ({self.log_path}) ---\n{log}"
        )

    def stop(self, keep_dir: bool = False) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after 20 s; removes the
        temporary directory (data and log) unless keep_dir."""
        self._halt(signal.SIGTERM)
        if not keep_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def restart(self, hard: bool = False) -> float:
        """Stops the server (SIGTERM; hard=True: SIGKILL, a crash that InnoDB
        recovers from) and starts it again on the same port and data;
        returns the seconds until it accepts connections."""
        t0 = time.monotonic()
        self._halt(signal.SIGKILL if hard else signal.SIGTERM)
        for _attempt in range(3):  # the port may linger a moment after a kill
            self._spawn()
            why = self._await_ready()
            if why is None:
                return time.monotonic() - t0
            self._halt(signal.SIGKILL)
            time.sleep(0.5)
        raise ServerStartError(
            f"mariadbd did not come back on port {self.port} after a restart ({why}).\n"
            f"--- mariadb log ---\n{self.log_text()}"
        )

    def pause(self) -> None:
        """SIGSTOP to mariadbd: connections are accepted by the kernel but
        nothing answers."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)
            wait_stopped(self.proc.pid)

    def resume(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    # -- the admin's statements ----------------------------------------------
    def sql(self, statement: str, timeout: float = 30.0, database: str | None = None) -> str:
        """Runs statement(s) as root over the Unix socket; returns the output
        (tab-separated, no column names). MariaDBError on an error,
        subprocess.TimeoutExpired after timeout."""
        r = subprocess.run(
            [self.bin["mariadb"], "--no-defaults", f"--socket={self.socket}", "-uroot",
             "--batch", "--skip-column-names", "--connect-timeout=5",
             *([database] if database else []), "-e", statement],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=self._server_env(), timeout=timeout,
        )
        if r.returncode != 0:
            raise MariaDBError(f"mariadb failed (status {r.returncode}) for {statement!r}: "
                               f"{r.stderr.strip()}")
        return r.stdout

    def set_read_only(self, on: bool) -> None:
        """SET GLOBAL read_only: the store's user (no SUPER, no READ ONLY
        ADMIN) can then read but not write, as on a replica."""
        self.sql(f"SET GLOBAL read_only = {1 if on else 0}")

    def connection_ids(self, user: str = USER) -> list[int]:
        out = self.sql("SELECT ID FROM information_schema.PROCESSLIST "
                       f"WHERE USER = '{user}' AND COMMAND <> 'Killed'")
        return [int(x) for x in out.split()]

    def kill_connections(self, user: str = USER) -> int:
        """KILL CONNECTION for every session of user; returns how many."""
        ids = self.connection_ids(user)
        for i in ids:
            try:
                self.sql(f"KILL CONNECTION {i}")
            except MariaDBError:
                pass  # gone already
        return len(ids)

    def version(self) -> str:
        return self.sql("SELECT VERSION()").strip()

    def __enter__(self) -> "MariaDBServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    with MariaDBServer() as srv:
        print(f"mariadb {srv.version()} on {srv.host}:{srv.port}: {srv.url('demo')}")

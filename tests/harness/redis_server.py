# SPDX-License-Identifier: Apache-2.0
"""redis-server (Debian's package; scripts/deps installs it) on a free
127.0.0.1 port, for the redis:// store's tests.

RedisServer writes a redis.conf into its work directory and starts
redis-server on it:

  - persistence: aof=True (the default) keeps every write in an append-only
    file fsynced on every write (appendfsync always), so restart() and a
    hard kill keep the lock; aof=False keeps nothing (a restart empties the
    server, as a cache-only Redis would);
  - users: `default` is the admin (password admin_password, for the tests'
    own commands), and `s3lect` (password password) may run exactly the
    commands the store needs (ACL below) on keys under KEY_PREFIX;
  - tls=True: the port speaks TLS only, with a CA and a server certificate
    for 127.0.0.1/localhost made by the harness (ca_file);
  - replica_of=other: a read-only replica of another RedisServer.

env() exports S3LECT_REDIS_PASSWORD (the store's password from the
environment, so no URL shows it) and S3LECT_TEST_LOCK_PREFIX=
redis://s3lect@127.0.0.1:PORT/s3lect/ (rediss:// with tls). command()
is a tiny RESP client for the tests (as the admin by default).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import ssl
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.pki import issue, make_ca  # noqa: E402
    from harness.servers import Server, ServerStartError  # noqa: E402
else:
    from .pki import issue, make_ca
    from .servers import Server, ServerStartError

KEY_PREFIX = "s3lect/"
# The commands the store runs: the two script commands, and what the scripts
# call (Redis checks those against the ACL too); INFO lets it refuse Cluster
# at connect time.
STORE_ACL = "+eval +evalsha +exists +hget +hmget +hset +time +info"


def redis_binary() -> str:
    b = shutil.which("redis-server") or ("/usr/bin/redis-server"
                                         if os.access("/usr/bin/redis-server", os.X_OK) else None)
    if not b:
        raise ServerStartError("redis-server is not installed (scripts/deps installs Debian's "
                               "redis-server package)")
    return b


def _encode(args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RespError(Exception):
    pass


def _read_reply(f):
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed")
    t, rest = line[:1], line[1:-2]
    if t == b"+":
        return rest.decode()
    if t == b"-":
        return RespError(rest.decode())
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if t == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise ConnectionError(f"unexpected RESP line {line!r}")


def make_tls_files(d: Path, san: str = "IP:127.0.0.1,DNS:localhost") -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signs for san (127.0.0.1 and
    localhost): tests/harness/pki.py's."""
    try:
        ca, _ = make_ca(d, "ca", subject="/CN=s3lect test CA", constraints=False)
        crt, key = issue(d, "server", "ca", san=san, subject="/CN=127.0.0.1", eku=None)
    except RuntimeError as e:
        raise ServerStartError(str(e)) from e
    return ca, crt, key


class RedisServer(Server):
    name = "redis"

    def __init__(self, aof: bool = True, tls: bool = False, replica_of: "RedisServer | None" = None,
                 acl: str = STORE_ACL, tls_san: str = "IP:127.0.0.1,DNS:localhost"):
        super().__init__()
        self.binary = redis_binary()
        self.aof = aof
        self.tls = tls
        self.replica_of = replica_of
        self.acl = acl
        self.admin_password = secrets.token_hex(12)
        self.user = "s3lect"
        self.password = secrets.token_hex(12)
        self.ca_file = self.cert = self.key = None
        self.tls_san = tls_san
        if tls:
            self.ca_file, self.cert, self.key = make_tls_files(self.workdir, tls_san)

    @property
    def endpoint(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}"

    @property
    def lock_prefix(self) -> str:
        """A lock URL prefix (a key name is appended) with the password left
        to S3LECT_REDIS_PASSWORD."""
        return f"{'rediss' if self.tls else 'redis'}://{self.user}@127.0.0.1:{self.port}/{KEY_PREFIX}"

    def env(self) -> dict[str, str]:
        env = {"S3LECT_REDIS_PASSWORD": self.password,
               "S3LECT_TEST_LOCK_PREFIX": self.lock_prefix}
        if self.ca_file:
            env["S3LECT_TEST_REDIS_CA_FILE"] = str(self.ca_file)
        return env

    def config_text(self) -> str:
        lines = [
            "bind 127.0.0.1",
            "protected-mode no",
            f"dir {self.workdir}",
            'save ""',
            f"appendonly {'yes' if self.aof else 'no'}",
            "appendfsync always",
            "daemonize no",
            "loglevel notice",
            f"user default on >{self.admin_password} ~* &* +@all",
            f"user {self.user} on >{self.password} ~{KEY_PREFIX}* {self.acl}",
        ]
        if self.tls:
            lines += ["port 0", f"tls-port {self.port}", f"tls-cert-file {self.cert}",
                      f"tls-key-file {self.key}", f"tls-ca-cert-file {self.ca_file}",
                      "tls-auth-clients no"]
        else:
            lines.append(f"port {self.port}")
        if self.replica_of is not None:
            lines += [f"replicaof 127.0.0.1 {self.replica_of.port}",
                      f"masterauth {self.replica_of.admin_password}", "replica-read-only yes"]
        return "\n".join(lines) + "\n"

    def command(self) -> list[str]:
        conf = self.workdir / "redis.conf"
        conf.write_text(self.config_text())
        return [self.binary, str(conf)]

    def call(self, *args, user: str | None = None, password: str | None = None,
             timeout: float = 5.0):
        """Runs one command (after AUTH as the admin, or as user/password);
        returns the reply, raising RespError on an error reply."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if self.tls:
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
            name = "127.0.0.1" if "IP:127.0.0.1" in self.tls_san else "localhost"
            s = ctx.wrap_socket(s, server_hostname=name)
        with s:
            f = s.makefile("rb")
            auth = ["AUTH", user, password] if user else ["AUTH", self.admin_password]
            s.sendall(_encode(auth) + _encode(args))
            replies = [_read_reply(f), _read_reply(f)]
        for r in replies:
            if isinstance(r, RespError):
                raise r
        return replies[1]

    def ready(self) -> bool:
        try:
            return self.call("PING", timeout=1) == "PONG"
        except (OSError, ConnectionError, RespError, ssl.SSLError):
            return False

    def on_ready(self) -> None:
        if self.replica_of is None:
            return
        import time
        deadline = time.monotonic() + 20
        while b"master_link_status:up" not in self.call("INFO", "replication"):
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not link to its primary within 20s")
            time.sleep(0.1)


def main(argv: list[str]) -> int:
    """redis_server.py: starts one server and prints its env until killed (debugging)."""
    import time
    with RedisServer(tls="--tls" in argv) as srv:
        print(srv.env(), flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

# SPDX-License-Identifier: Apache-2.0
"""A minimal MySQL/MariaDB client for the tests (the client/server protocol
4.1: handshake v10, mysql_native_password, text queries), so that a test can
hold a transaction open on a connection of its own without a driver package.

    c = MyConn("127.0.0.1", port, "s3lect", password, "s3lect")
    c.query("BEGIN")
    cur = c.cursor()            # DB-API's execute(sql, params) / fetchone()
    cur.execute("SELECT 1 FROM t WHERE name = %s", ("x",))
    c.query("COMMIT"); c.close()

query() returns the rows (lists of str or None) of a statement with a
result set, else []; a server error raises MyError with its number. No TLS,
no compression, no prepared statements.
"""

from __future__ import annotations

import hashlib
import socket
import struct
from typing import Any, Optional, Sequence

CLIENT_LONG_PASSWORD = 1
CLIENT_FOUND_ROWS = 2
CLIENT_CONNECT_WITH_DB = 8
CLIENT_PROTOCOL_41 = 512
CLIENT_TRANSACTIONS = 8192
CLIENT_SECURE_CONNECTION = 32768
CLIENT_PLUGIN_AUTH = 1 << 19
UTF8MB4 = 45


class MyError(RuntimeError):
    """The server's error packet: number, SQLSTATE and message."""

    def __init__(self, errno: int, state: str, message: str) -> None:
        super().__init__(f"error {errno} ({state}): {message}")
        self.errno, self.state, self.message = errno, state, message


def native_password(password: str, scramble: bytes) -> bytes:
    """mysql_native_password: SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw)))."""
    if not password:
        return b""
    h1 = hashlib.sha1(password.encode()).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(scramble + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


def _lenenc(buf: bytes, i: int) -> tuple[Optional[int], int]:
    b = buf[i]
    if b < 0xFB:
        return b, i + 1
    if b == 0xFB:
        return None, i + 1
    if b == 0xFC:
        return struct.unpack_from("<H", buf, i + 1)[0], i + 3
    if b == 0xFD:
        return int.from_bytes(buf[i + 1:i + 4], "little"), i + 4
    return struct.unpack_from("<Q", buf, i + 1)[0], i + 9


def literal(v: Any) -> str:
    """A value as an SQL literal (strings quoted, backslash and quote escaped)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    s = str(v)
    for a, b in (("\\", "\\\\"), ("'", "\\'"), ("\0", "\\0"), ("\n", "\\n"), ("\r", "\\r"),
                 ("\x1a", "\\Z")):
        s = s.replace(a, b)
    return f"'{s}'"


class MyCursor:
    """execute(sql, params) with %s placeholders, fetchone()."""

    def __init__(self, conn: "MyConn") -> None:
        self.conn = conn
        self.rows: list = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        parts = sql.split("%s")
        if len(parts) != len(params) + 1:
            raise ValueError(f"{len(params)} parameters for {len(parts) - 1} placeholders")
        text = parts[0] + "".join(literal(p) + rest for p, rest in zip(params, parts[1:]))
        self.rows = list(self.conn.query(text))

    def fetchone(self) -> Optional[list]:
        return self.rows.pop(0) if self.rows else None


class MyConn:
    def __init__(self, host: str, port: int, user: str, password: str, database: str,
                 timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.seq = 0
        self.affected_rows = 0
        try:
            self._login(user, password, database)
        except BaseException:
            self.sock.close()
            raise

    # -- packets
    def _recv(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            out += chunk
        return out

    def _read(self) -> bytes:
        head = self._recv(4)
        n = int.from_bytes(head[:3], "little")
        self.seq = (head[3] + 1) & 0xFF
        return self._recv(n)

    def _write(self, payload: bytes) -> None:
        self.sock.sendall(len(payload).to_bytes(3, "little") + bytes([self.seq]) + payload)
        self.seq = (self.seq + 1) & 0xFF

    @staticmethod
    def _error(p: bytes) -> MyError:
        errno = struct.unpack_from("<H", p, 1)[0]
        state, msg = ("", p[3:]) if p[3:4] != b"#" else (p[4:9].decode(), p[9:])
        return MyError(errno, state, msg.decode("utf-8", "replace"))

    # -- the session
    def _login(self, user: str, password: str, database: str) -> None:
        p = self._read()
        if p[:1] == b"\xff":
            raise self._error(p)
        i = p.index(b"\0", 1) + 1 + 4  # version, connection id
        scramble = p[i:i + 8]
        i += 8 + 1 + 2 + 1 + 2 + 2  # filler, capabilities, charset, status, capabilities
        alen = p[i]
        i += 1 + 10
        scramble += p[i:i + max(13, alen - 8)].rstrip(b"\0")[:12]
        caps = (CLIENT_LONG_PASSWORD | CLIENT_FOUND_ROWS | CLIENT_CONNECT_WITH_DB |
                CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS | CLIENT_SECURE_CONNECTION |
                CLIENT_PLUGIN_AUTH)
        auth = native_password(password, scramble)
        self._write(struct.pack("<IIB", caps, 1 << 24, UTF8MB4) + b"\0" * 23 +
                    user.encode() + b"\0" + bytes([len(auth)]) + auth +
                    database.encode() + b"\0" + b"mysql_native_password\0")
        r = self._read()
        if r[:1] == b"\xfe":  # AuthSwitchRequest: the plugin and a new scramble
            name, _, data = r[1:].partition(b"\0")
            if name != b"mysql_native_password":
                raise MyError(0, "", f"the server asks for auth plugin {name.decode()}")
            self._write(native_password(password, data.rstrip(b"\0")[:20]))
            r = self._read()
        if r[:1] == b"\xff":
            raise self._error(r)

    def query(self, sql: str) -> list:
        self.seq = 0
        self._write(b"\x03" + sql.encode())
        p = self._read()
        if p[:1] == b"\xff":
            raise self._error(p)
        if p[:1] == b"\x00":
            self.affected_rows, _ = _lenenc(p, 1)
            return []
        ncols, _ = _lenenc(p, 0)
        for _ in range(ncols or 0):  # column definitions
            self._read()
        self._read()  # EOF
        rows = []
        while True:
            p = self._read()
            if p[:1] == b"\xfe" and len(p) < 9:
                return rows
            if p[:1] == b"\xff":
                raise self._error(p)
            row, i = [], 0
            for _ in range(ncols or 0):
                n, i = _lenenc(p, i)
                if n is None:
                    row.append(None)
                else:
                    row.append(p[i:i + n].decode("utf-8", "replace"))
                    i += n
            rows.append(row)

    def cursor(self) -> MyCursor:
        return MyCursor(self)

    def close(self) -> None:
        try:
            self.seq = 0
            self._write(b"\x01")  # COM_QUIT
        except OSError:
            pass
        self.sock.close()

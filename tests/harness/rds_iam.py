# SPDX-License-Identifier: Apache-2.0
"""A loopback stand-in for Amazon RDS's IAM database authentication, for
tests/stores/test_rds_iam.py: a test double labelled as such, not a database.

verify_token(): checks an IAM database authentication token the way the
service would, written here from the SigV4 documentation (independently of
libs3lect's signer and of tests/data/rds_token/gen_expected.py): the shape
(HOST:PORT/?Action=connect&DBUser=...&X-Amz-*, no scheme), the host and port,
DBUser, X-Amz-Expires=900, signed headers "host", X-Amz-Date within a
minute of now, the credential scope (date, region, rds-db), and the
signature recomputed from the canonical request with the secret key that
belongs to the token's access key id.

FakeRdsPostgres: a server on 127.0.0.1 that speaks the PostgreSQL protocol
far enough to take a password: SSLRequest answered 'S' and the connection
wrapped in TLS (certificates from pki.py), GSSENCRequest answered 'N', the
startup message read, AuthenticationCleartextPassword asked (as RDS does for
IAM users), the password read and verified, then refused with an
ErrorResponse 28P01 "PAM authentication failed for user ..." whose text says
whether the test server verified the token. Every attempt is recorded
(user, database, TLS, the verdict, the access key id; the token itself only
for the test to grep outputs with).

FakeRdsMysql: the same for MySQL, as RDS MySQL does it for an IAM user:
handshake v10 offering TLS, the SSLRequest wrapped in TLS, the handshake
response read, an AuthSwitchRequest to mysql_clear_password, the password
verified, then ERR 1045 (28000) "Access denied ..." with the verdict.

    srv = FakeRdsPostgres(tmp_path, secrets={"AKID": "secret"}, region="us-west-2").start()
    ... srv.attempts ... srv.stop()
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import quote, unquote

from .pki import issue, make_ca

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
PROTOCOL_3 = 196608


def _enc(s: str) -> str:
    return quote(s.encode("utf-8"), safe="-._~")


def verify_token(token: str, host: str, port: int, user: str, region: str,
                 secret_of: Callable[[str], Optional[str]], now: Optional[float] = None,
                 skew_s: float = 60.0) -> tuple[bool, str, dict]:
    """(ok, why, params): why names the first rule the token breaks ("" when
    ok); params are its decoded query parameters."""
    now = time.time() if now is None else now
    hostport = f"{host}:{port}"
    if "://" in token:
        return False, "the token has a scheme", {}
    if not token.startswith(hostport + "/?"):
        return False, f"the token is not for {hostport}", {}
    query = token[len(hostport) + 2:]
    pairs = []
    for part in query.split("&"):
        if "=" not in part:
            return False, f"malformed parameter {part[:40]!r}", {}
        k, v = part.split("=", 1)
        pairs.append((unquote(k), unquote(v)))
    params = dict(pairs)
    if len(params) != len(pairs):
        return False, "a parameter given twice", params
    if not pairs or pairs[-1][0] != "X-Amz-Signature":
        return False, "X-Amz-Signature is not last", params
    want = {"Action": "connect", "DBUser": user, "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
            "X-Amz-Expires": "900", "X-Amz-SignedHeaders": "host"}
    for k, v in want.items():
        if params.get(k) != v:
            return False, f"{k} is {params.get(k)!r}, want {v!r}", params
    try:
        signed_at = datetime.datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (KeyError, ValueError):
        return False, "X-Amz-Date missing or malformed", params
    if abs(signed_at - now) > skew_s:
        return False, f"X-Amz-Date is {signed_at - now:+.0f} s from now", params
    cred = params.get("X-Amz-Credential", "").split("/")
    if len(cred) != 5 or cred[1] != params["X-Amz-Date"][:8] or cred[2] != region or \
            cred[3] != "rds-db" or cred[4] != "aws4_request":
        return False, f"credential scope {'/'.join(cred[1:])!r} is not DATE/{region}/rds-db/aws4_request", params
    secret = secret_of(cred[0])
    if secret is None:
        return False, "unknown access key id", params
    signed = [(k, v) for k, v in pairs if k != "X-Amz-Signature"]
    canonical_query = "&".join(f"{_enc(k)}={_enc(v)}" for k, v in sorted(signed))
    canonical_request = "\n".join(["GET", "/", canonical_query, f"host:{hostport}", "", "host",
                                   hashlib.sha256(b"").hexdigest()])
    scope = "/".join(cred[1:])
    string_to_sign = "\n".join(["AWS4-HMAC-SHA256", params["X-Amz-Date"], scope,
                                hashlib.sha256(canonical_request.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in cred[1:]:
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(sig, params["X-Amz-Signature"]):
        return False, "the signature does not match", params
    return True, "", params


@dataclass
class Attempt:
    user: str = ""
    database: str = ""
    tls: bool = False
    token: str = ""
    verified: bool = False
    why: str = ""
    access_key_id: str = ""
    session_token: str = ""
    at: float = field(default_factory=time.time)


class _FakeRds:
    """A loopback server that takes one password per connection and
    verifies it as an IAM token (the protocol is a subclass's _login).
    secrets: access key id -> secret (or a callable); region: the region
    tokens must be signed for; host: the name the client connects with (the
    token's host)."""

    def __init__(self, tmp: Path, secrets, region: str, host: str = "127.0.0.1"):
        self.tmp = Path(tmp)
        self.secret_of = secrets if callable(secrets) else secrets.get
        self.region = region
        self.host = host
        self.port = 0
        self.attempts: list[Attempt] = []
        self.errors: list[str] = []
        self._sock: Optional[socket.socket] = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ctx: Optional[ssl.SSLContext] = None
        self.ca = self.tmp / "rds-ca.pem"

    def start(self) -> "_FakeRds":
        self.tmp.mkdir(parents=True, exist_ok=True)
        make_ca(self.tmp, "rds-ca")
        pem, key = issue(self.tmp, "rds-server", "rds-ca", san="IP:127.0.0.1,DNS:localhost")
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.load_cert_chain(pem, key)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="fake-rds", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        if self._sock:
            self._sock.close()

    def snapshot(self) -> list[Attempt]:
        with self._lock:
            return list(self.attempts)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _verify(self, a: Attempt) -> str:
        """Verifies a.token, records the attempt (before the client can read
        the answer) and returns the verdict for the refusal's message."""
        a.verified, a.why, params = verify_token(a.token, self.host, self.port, a.user,
                                                 self.region, self.secret_of)
        a.access_key_id = params.get("X-Amz-Credential", "").split("/")[0]
        a.session_token = params.get("X-Amz-Security-Token", "")
        with self._lock:
            self.attempts.append(a)
        return "token verified" if a.verified else f"token NOT verified: {a.why}"

    def _client(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        a = Attempt()
        s = conn
        try:
            s = self._login(conn, a)
        except (OSError, ConnectionError, ssl.SSLError, ValueError, struct.error) as e:
            with self._lock:
                self.errors.append(f"{type(e).__name__}: {e}")
            a.why = a.why or f"connection ended early: {e}"
        finally:
            with self._lock:
                if (a.user or a.token) and not any(x is a for x in self.attempts):
                    self.attempts.append(a)
            try:
                (s or conn).close()
            except OSError:
                pass

    def _login(self, conn: socket.socket, a: Attempt):
        raise NotImplementedError


class FakeRdsPostgres(_FakeRds):
    """PostgreSQL's side: see the module's docstring."""

    def _login(self, conn: socket.socket, a: Attempt):
        s = conn
        while True:
            (n,) = struct.unpack("!I", _recv(s, 4))
            body = _recv(s, n - 4)
            (code,) = struct.unpack("!I", body[:4])
            if code == SSL_REQUEST and not a.tls:
                s.sendall(b"S")
                s = self._ctx.wrap_socket(s, server_side=True)
                a.tls = True
                continue
            if code == GSSENC_REQUEST:
                s.sendall(b"N")
                continue
            if code != PROTOCOL_3:
                raise ConnectionError(f"unexpected startup code {code}")
            fields = body[4:].split(b"\0")
            kv = dict(zip(fields[0::2], fields[1::2]))
            a.user = kv.get(b"user", b"").decode()
            a.database = kv.get(b"database", b"").decode()
            break
        s.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
        t = _recv(s, 1)
        (n,) = struct.unpack("!I", _recv(s, 4))
        body = _recv(s, n - 4)
        if t != b"p":
            raise ConnectionError(f"expected a password message, got {t!r}")
        a.token = body.rstrip(b"\0").decode()
        verdict = self._verify(a)
        msg = f'PAM authentication failed for user "{a.user}" (test server: {verdict})'
        err = b"SFATAL\0VFATAL\0C28P01\0M" + msg.encode() + b"\0\0"
        s.sendall(b"E" + struct.pack("!I", len(err) + 4) + err)
        return s


# MySQL capability flags (the client/server protocol's).
CLIENT_LONG_PASSWORD = 0x1
CLIENT_FOUND_ROWS = 0x2
CLIENT_LONG_FLAG = 0x4
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_SSL = 0x800
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_CONNECT_ATTRS = 0x100000
CLIENT_PLUGIN_AUTH_LENENC = 0x200000


class FakeRdsMysql(_FakeRds):
    """MySQL's side, as RDS MySQL does it for an IAM user: handshake v10
    (offering TLS), the client's SSLRequest answered by wrapping in TLS, its
    handshake response read (user, database), an AuthSwitchRequest to
    mysql_clear_password, the password read and verified, then ERR 1045
    (28000) "Access denied ..." saying whether the token verified."""

    CAPS = (CLIENT_LONG_PASSWORD | CLIENT_FOUND_ROWS | CLIENT_LONG_FLAG | CLIENT_CONNECT_WITH_DB
            | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_TRANSACTIONS | CLIENT_SECURE_CONNECTION
            | CLIENT_MULTI_RESULTS | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_ATTRS
            | CLIENT_PLUGIN_AUTH_LENENC)

    @staticmethod
    def _send(s, seq: int, payload: bytes) -> None:
        s.sendall(struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload)

    @staticmethod
    def _read(s) -> tuple[int, bytes]:
        head = _recv(s, 4)
        n = head[0] | head[1] << 8 | head[2] << 16
        return head[3], _recv(s, n)

    def _login(self, conn: socket.socket, a: Attempt):
        s = conn
        salt = b"0123456789abcdefghij"
        caps = self.CAPS
        hello = (b"\x0a" + b"8.0.36-s3lect-test-rds\0" + struct.pack("<I", 1) + salt[:8] + b"\0"
                 + struct.pack("<H", caps & 0xFFFF) + bytes([45]) + struct.pack("<H", 2)
                 + struct.pack("<H", caps >> 16) + bytes([len(salt) + 1]) + b"\0" * 10
                 + salt[8:] + b"\0" + b"mysql_native_password\0")
        self._send(s, 0, hello)
        seq, body = self._read(s)
        (ccaps,) = struct.unpack("<I", body[:4])
        if len(body) == 32 and ccaps & CLIENT_SSL:
            s = self._ctx.wrap_socket(s, server_side=True)
            a.tls = True
            seq, body = self._read(s)
            (ccaps,) = struct.unpack("<I", body[:4])
        rest = body[32:]
        user, _, rest = rest.partition(b"\0")
        a.user = user.decode()
        if ccaps & CLIENT_PLUGIN_AUTH_LENENC:
            n = rest[0]
            if n >= 0xFB:
                raise ConnectionError("long auth response")
            rest = rest[1 + n:]
        else:
            rest = rest[1 + rest[0]:]
        if ccaps & CLIENT_CONNECT_WITH_DB:
            db, _, rest = rest.partition(b"\0")
            a.database = db.decode()
        self._send(s, seq + 1, b"\xfe" + b"mysql_clear_password\0")
        seq, body = self._read(s)
        a.token = body.rstrip(b"\0").decode()
        verdict = self._verify(a)
        msg = (f"Access denied for user '{a.user}'@'127.0.0.1' (using password: YES) "
               f"(test server: {verdict})")
        self._send(s, seq + 1, b"\xff" + struct.pack("<H", 1045) + b"#28000" + msg.encode())
        return s


def _recv(s, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The CMD of the store-native fence recipes' chaos workload
(tests/python/test_chaos_recipes.py): while its node leads, it appends
lines to one row, item or key of the application's own data in the
database that holds the lock (PostgreSQL, DynamoDB Local, etcd, Redis), by
read-modify-write whose write goes through s3lect.recipes with
S3LECT_TERM and S3LECT_LEADER_ID as term and holder, and records every
attempt in fence_cmd.py's format (chaos_checker.check_fence judges it).

    recipe_cmd.py CMD_LOG EVENTS_LOG WORKDIR SPEC

SPEC is a JSON file (written by the test, mode 0600): "store", the
server's "port", the lock ("lock": the row name, item key or key; "table"
for PostgreSQL and DynamoDB), the application's data ("app": a table or a
key) and what the client needs ("access_key"/"secret_key"/"region" for
DynamoDB Local, "password" of Redis's admin user).

The loop, the hold before the write (WORKDIR/hold-NODE), SIGTERM during a
write and the outcome's line (KIND TERM SEQ NODE PID T_START T_END) are
fence_cmd.py's Workload; this script only reads and writes:

  postgres  read: SELECT of the row (autocommit); write: BEGIN,
            recipes.postgres_fence (the lock row FOR SHARE), the UPSERT,
            COMMIT. (The hold is before BEGIN: a zombie frozen inside the
            transaction would hold the share lock, and the takeover waits for
            it, as it should: no successor could write.)
  dynamodb  read: GetItem (consistent); write: recipes.dynamodb_transact_write
            (the lock's ConditionCheck and the Put in one transaction)
  etcd      read: kv/range; write: recipes.etcd_fenced_write (a Txn on the
            lock key's mod_revision; "retries" when it kept changing)
  redis     read: GET; write: recipes.redis_fenced_call of SET (one EVAL)

A refused write (s3lect.FencedError) is "fenced", anything else that did
not answer "error". S3LECT_FENCE_MODE=plain is the broken recipe the
checker must catch: the same write without the check (an UPSERT, PutItem,
kv/put, SET). Every call is bounded (socket timeouts).

Needs the s3lect binding (its recipes import the compiled core): the
interpreter of tests/python's venv, where scripts/test-python installs it.
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
for p in (HERE, TESTS, TESTS / "python"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import s3lect  # noqa: E402
from s3lect import recipes  # noqa: E402

from fence_cmd import Workload  # noqa: E402

TIMEOUT_S = 5.0
FENCED, RETRIES, FAILED = 75, 5, 1  # fence_cmd.EXIT_KIND: fenced, retries, error


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


class RedisClient:
    """execute_command(*args) (what recipes.redis_fenced_call calls) over one
    connection per command, as Redis's admin user."""

    def __init__(self, port: int, password: str):
        self.port, self.password = port, password

    def execute_command(self, *args: Any) -> Any:
        import socket

        from harness.redis_server import RespError, _encode, _read_reply
        with socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT_S) as s:
            f = s.makefile("rb")
            s.sendall(_encode(["AUTH", self.password]) + _encode(list(args)))
            replies = [_read_reply(f), _read_reply(f)]
        for r in replies:
            if isinstance(r, RespError):
                raise r
        return replies[1]


class RecipeWorkload(Workload):
    def __init__(self, argv: list[str]):
        cmd_log, events, workdir, spec = argv
        super().__init__([cmd_log, events, workdir, "", ""])
        self.spec = json.loads(Path(spec).read_text())
        self.store = self.spec["store"]
        self.port = int(self.spec["port"])
        self.pg = None  # the connection of the current attempt (postgres)
        if self.store == "dynamodb":
            import boto3
            from botocore.config import Config
            self.ddb = boto3.client(
                "dynamodb", endpoint_url=f"http://127.0.0.1:{self.port}",
                region_name=self.spec["region"], aws_access_key_id=self.spec["access_key"],
                aws_secret_access_key=self.spec["secret_key"],
                config=Config(connect_timeout=TIMEOUT_S, read_timeout=TIMEOUT_S,
                              retries={"total_max_attempts": 1}))
        elif self.store == "redis":
            self.redis = RedisClient(self.port, self.spec["password"])
        elif self.store not in ("postgres", "etcd"):
            raise SystemExit(f"recipe_cmd.py: unknown store {self.store!r}")

    # -- the clients
    def pg_close(self) -> None:
        if self.pg is not None:
            self.pg.close()
            self.pg = None

    def etcd(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            return json.loads(r.read() or b"{}")

    # -- Workload's read and writes
    def read(self) -> tuple[bytes, str | None] | None:
        app = self.spec["app"]
        try:
            if self.store == "postgres":
                from harness.pgclient import PgConn
                self.pg_close()
                self.pg = PgConn("127.0.0.1", self.port, "s3lect", "s3lect", timeout=TIMEOUT_S)
                rows = self.pg.query(f"SELECT v FROM {app} WHERE k = 'data'")
                v = rows[0][0] if rows else ""
                return (v or "").encode(), None
            if self.store == "dynamodb":
                item = self.ddb.get_item(TableName=app, Key={"id": {"S": "data"}},
                                         ConsistentRead=True).get("Item")
                return (item["v"]["S"].encode() if item else b""), None
            if self.store == "etcd":
                kvs = self.etcd("/v3/kv/range", recipes.etcd_range_request(app)).get("kvs") or []
                return (base64.b64decode(kvs[0].get("value", "")) if kvs else b""), None
            v = self.redis.execute_command("GET", app)
            return (v or b""), None
        except Exception:  # noqa: BLE001 - any failed read: no write, read again
            self.pg_close()
            return None

    def write_fenced(self, data: bytes, _version: str | None) -> int:
        return self.write(data, fenced=True)

    def write_plain(self, data: bytes) -> int:
        return self.write(data, fenced=False)

    def write(self, data: bytes, fenced: bool) -> int:
        s, app = self.spec, self.spec["app"]
        term, holder = int(self.term), self.node
        try:
            if self.store == "postgres":
                return self.write_pg(data.decode(), fenced)
            if self.store == "dynamodb":
                put = {"Put": {"TableName": app,
                               "Item": {"id": {"S": "data"}, "v": {"S": data.decode()}}}}
                if fenced:
                    recipes.dynamodb_transact_write(self.ddb, [put], s["table"], s["lock"], term,
                                                    holder)
                else:
                    self.ddb.put_item(**put["Put"])
            elif self.store == "etcd":
                if fenced:
                    recipes.etcd_fenced_write(self.etcd, s["lock"], term, holder,
                                              puts=[(app, data)])
                else:
                    self.etcd("/v3/kv/put", {"key": b64(app.encode()), "value": b64(data)})
            else:
                cmd = ["SET", app, data]
                if fenced:
                    reply = recipes.redis_fenced_call(self.redis, s["lock"], term, holder, cmd,
                                                      keys=[app])
                else:
                    reply = self.redis.execute_command(*cmd)
                if reply != "OK":
                    return FAILED
            return 0
        except s3lect.FencedError:
            return FENCED
        except s3lect.RetriesExhaustedError:
            return RETRIES
        except Exception:  # noqa: BLE001 - the store did not answer, or an error: unknown
            return FAILED

    def write_pg(self, value: str, fenced: bool) -> int:
        s, conn = self.spec, self.pg
        if conn is None:
            return FAILED
        try:
            conn.query("BEGIN")
            cur = conn.cursor()
            if fenced:
                try:
                    recipes.postgres_fence(cur, s["table"], s["lock"], int(self.term), self.node)
                except s3lect.FencedError:
                    conn.query("ROLLBACK")
                    return FENCED
            cur.execute(f"INSERT INTO {s['app']} (k, v) VALUES ('data', %s) "
                        "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v", (value,))
            conn.query("COMMIT")
            return 0
        finally:
            self.pg_close()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print("usage: recipe_cmd.py CMD_LOG EVENTS_LOG WORKDIR SPEC", file=sys.stderr)
        sys.exit(2)
    sys.exit(RecipeWorkload(sys.argv[1:]).run())

# SPDX-License-Identifier: Apache-2.0
"""Fenced writes where the lock lives in a database the application also
writes: PostgreSQL, MySQL/MariaDB, DynamoDB, etcd and Redis (docs/fencing.md, "Where the
lock lives in a database the application also writes").

Each helper makes the application's own write commit only while the lock
record still names its leadership (``term`` and ``holder``: the elector's
:attr:`~s3lect.Elector.term` when it acquired and its
:attr:`~s3lect.Elector.server_id`). The database checks it, in the same
transaction, script or condition as the write; a refused write raises
:class:`s3lect.FencedError` and writes nothing.

The helpers take your own client objects (a DB-API cursor, a boto3
DynamoDB client, a function that POSTs to etcd's JSON gateway, a Redis
client) or return plain dicts and strings: this module needs no package
beyond the standard library.

The lock records are those s3lect writes: JSON text whose first field is
``"leaderID"`` and whose ``"term"`` is followed by ``"leaseMs"``
(libs3lect/src/engine/record.c), e.g.
``{"leaderID":"node-a","leaderAddr":"","lastUpdated":"...","term":7,"leaseMs":15000,...}``;
a released record has ``"leaderID":""``, which no holder matches.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ._errors import ConfigError, Error, FencedError, RetriesExhaustedError

__all__ = [
    "REDIS_FENCE_SCRIPT",
    "record_holds",
    "postgres_fence_sql",
    "postgres_fence",
    "mysql_fence_sql",
    "mysql_fence",
    "dynamodb_condition_check",
    "dynamodb_transact_write",
    "etcd_range_request",
    "etcd_check_lock",
    "etcd_fenced_txn",
    "etcd_fenced_write",
    "redis_fenced_call",
]

_Text = Union[str, bytes]

#: The attribute of a DynamoDB lock item that holds the record
#: (DDB_RECORD_ATTR in libs3lect/src/store/store_dynamodb.c).
DYNAMODB_RECORD_ATTR = "s3lectRecord"
#: The hash field of a Redis lock that holds the record (store_redis.c).
REDIS_RECORD_FIELD = "r"
#: The PostgreSQL store's default table (``&table=`` of the lock URL).
POSTGRES_DEFAULT_TABLE = "s3lect_locks"
#: The MySQL store's default table (``&table=`` of the lock URL).
MYSQL_DEFAULT_TABLE = "s3lect_locks"

#: The largest term a record holds (docs/algorithm.md, "Terms").
TERM_MAX = 2**53 - 1

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _check_term_holder(term: Any, holder: Any) -> Tuple[int, str]:
    if isinstance(term, bool) or not isinstance(term, int) or not 0 <= term <= TERM_MAX:
        raise ConfigError(f"term must be a leadership's term (an int, 0 to 2^53 - 1), "
                          f"not {term!r}")
    if not isinstance(holder, str) or not holder:
        raise ConfigError(f"holder must be the leader's server_id (a non-empty str), not {holder!r}")
    return term, holder


def _text(v: _Text) -> str:
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else str(v)


def record_holds(record: Optional[_Text], term: int, holder: str) -> bool:
    """True when the lock record (its JSON text) names leadership ``term`` of
    ``holder``; False for any other record, a released one, no record or
    one that is not JSON."""
    term, holder = _check_term_holder(term, holder)
    if record is None:
        return False
    try:
        rec = json.loads(_text(record))
    except (ValueError, UnicodeDecodeError):
        return False
    if not isinstance(rec, dict):
        return False
    t = rec.get("term")
    return (isinstance(t, int) and not isinstance(t, bool) and t == term
            and rec.get("leaderID") == holder)


def _describe(record: Optional[_Text]) -> str:
    if record is None:
        return "there is no lock record"
    try:
        rec = json.loads(_text(record))
        lid = rec.get("leaderID")
        if lid == "":
            return f"the lock was released (term {rec.get('term')})"
        return f"the lock record names term {rec.get('term')} of {lid!r}"
    except (ValueError, AttributeError, UnicodeDecodeError):
        return "the lock record is not JSON"


# ---------------------------------------------------------------------------
# PostgreSQL: the lock row checked FOR SHARE inside the application's transaction
# ---------------------------------------------------------------------------


def _pg_table(table: str) -> str:
    """The table as the store quotes it: "name" or "schema"."name"."""
    parts = table.split(".") if isinstance(table, str) else []
    if not 1 <= len(parts) <= 2 or not all(_IDENT.fullmatch(p) for p in parts):
        raise ConfigError(f"table must be NAME or SCHEMA.NAME as in the lock URL's &table= "
                          f"(letters, digits, '_'), not {table!r}")
    return ".".join(f'"{p}"' for p in parts)


def postgres_fence_sql(table: str = POSTGRES_DEFAULT_TABLE) -> str:
    """The check :func:`postgres_fence` runs, with ``%s`` placeholders for
    (lock name, term, holder), for drivers it cannot call. No row means
    fenced: roll back."""
    return (f"SELECT 1 FROM {_pg_table(table)} WHERE name = %s "
            "AND (record::jsonb ->> 'term')::bigint = %s "
            "AND record::jsonb ->> 'leaderID' = %s FOR SHARE")


def postgres_fence(cursor: Any, table: str, name: str, term: int, holder: str) -> None:
    """Checks, inside the caller's open transaction, that the lock row
    ``name`` of ``table`` (the lock URL's ``key=`` and ``table=``) names
    leadership ``term`` of ``holder``, and locks the row FOR SHARE until the
    transaction ends: a takeover's UPDATE of the row waits for your commit
    or rollback, so nothing you commit after this call lands after a newer
    term was written.

    ``cursor`` is a DB-API cursor whose driver takes ``%s`` placeholders
    (psycopg 2 and 3, pg8000); run this first in the transaction, then your
    writes, then commit. Raises :class:`s3lect.FencedError` when the row
    names another term or holder (or is released or missing): roll back.

    The leader's own renewals also wait for the share lock: keep these
    transactions much shorter than ``renew_deadline``.
    """
    term, holder = _check_term_holder(term, holder)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"name must be the lock's key (a non-empty str), not {name!r}")
    cursor.execute(postgres_fence_sql(table), (name, term, holder))
    row = cursor.fetchone()
    if row is None:
        raise FencedError(f"lock {name!r} in table {table} is not held at term {term} by "
                          f"{holder!r}: a newer leader took it over (or it was released); "
                          "roll back")


# ---------------------------------------------------------------------------
# MySQL and MariaDB: the lock row read LOCK IN SHARE MODE in the transaction
# ---------------------------------------------------------------------------

_MY_TABLE = re.compile(r"[A-Za-z0-9_]{1,64}")


def mysql_fence_sql(table: str = MYSQL_DEFAULT_TABLE) -> str:
    """The check :func:`mysql_fence` runs, with ``%s`` placeholders for
    (lock name, term, holder), for drivers it cannot call. No row means
    fenced: roll back. ``LOCK IN SHARE MODE`` (MySQL 5.7, 8, 8.4 and every
    MariaDB; ``FOR SHARE`` in MySQL 8) reads the latest committed row, not
    the transaction's snapshot, and holds it until the transaction ends."""
    if not isinstance(table, str) or not _MY_TABLE.fullmatch(table):
        raise ConfigError(f"table must be the lock URL's &table= (letters, digits, '_', at "
                          f"most 64), not {table!r}")
    return (f"SELECT 1 FROM `{table}` WHERE name = %s "
            "AND CAST(JSON_UNQUOTE(JSON_EXTRACT(record, '$.term')) AS UNSIGNED) = %s "
            "AND JSON_UNQUOTE(JSON_EXTRACT(record, '$.leaderID')) = %s LOCK IN SHARE MODE")


def mysql_fence(cursor: Any, table: str, name: str, term: int, holder: str) -> None:
    """Checks, inside the caller's open InnoDB transaction, that the lock row
    ``name`` of ``table`` (the lock URL's ``key=`` and ``table=``) names
    leadership ``term`` of ``holder``, and locks the row in share mode until
    the transaction ends: a takeover's UPDATE of the row waits for your
    commit or rollback, so nothing you commit after this call lands after a
    newer term was written.

    ``cursor`` is a DB-API cursor whose driver takes ``%s`` placeholders
    (mysqlclient, PyMySQL, mysql-connector-python, MariaDB Connector/Python
    with ``paramstyle`` format); run this first in the transaction (autocommit
    off), then your writes, then commit. Raises :class:`s3lect.FencedError`
    when the row names another term or holder (or is released or missing):
    roll back.

    The leader's own renewals also wait for the share lock (up to the
    store's ``innodb_lock_wait_timeout``, its request timeout): keep these
    transactions much shorter than ``renew_deadline``.
    """
    term, holder = _check_term_holder(term, holder)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"name must be the lock's key (a non-empty str), not {name!r}")
    cursor.execute(mysql_fence_sql(table), (name, term, holder))
    row = cursor.fetchone()
    if row is None:
        raise FencedError(f"lock {name!r} in table {table} is not held at term {term} by "
                          f"{holder!r}: a newer leader took it over (or it was released); "
                          "roll back")


# ---------------------------------------------------------------------------
# DynamoDB: a ConditionCheck on the lock item inside TransactWriteItems
# ---------------------------------------------------------------------------


def _json_string(s: str) -> str:
    # cJSON's escaping (record.c's writer) for what a server_id may hold:
    # '"' and '\\' escaped, no control characters (server_id refuses them),
    # other characters as UTF-8, unescaped.
    return json.dumps(s, ensure_ascii=False)


def dynamodb_condition_check(table: str, key: str, term: int, holder: str,
                             partition_key: str = "LockID", sort_key: Optional[str] = None,
                             sort_value: Optional[str] = None) -> Dict[str, Any]:
    """One entry of ``TransactItems`` (boto3's low-level client form) that
    holds only while the lock item (the lock URL's table, key and
    ``partition_key``, ``sort_key``, ``sort_value``) names leadership
    ``term`` of ``holder``.

    A condition cannot parse JSON, so it looks for two exact pieces of the
    record text: ``"term":N,`` (the comma tells term 12 from 123) and
    ``{"leaderID":"HOLDER",`` (only the record's start has it).
    """
    term, holder = _check_term_holder(term, holder)
    if (sort_key is None) != (sort_value is None):
        raise ConfigError("sort_key and sort_value go together")
    k: Dict[str, Any] = {partition_key: {"S": key}}
    if sort_key is not None:
        k[sort_key] = {"S": sort_value}
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": k,
            "ConditionExpression": "contains(#s3lectRecord, :s3lectTerm) AND "
                                   "contains(#s3lectRecord, :s3lectHolder)",
            "ExpressionAttributeNames": {"#s3lectRecord": DYNAMODB_RECORD_ATTR},
            "ExpressionAttributeValues": {
                ":s3lectTerm": {"S": f'"term":{term},'},
                ":s3lectHolder": {"S": '{"leaderID":' + _json_string(holder) + ","},
            },
        }
    }


def dynamodb_transact_write(client: Any, items: Sequence[Mapping[str, Any]], table: str,
                            key: str, term: int, holder: str, **lock: Any) -> Any:
    """``client.transact_write_items`` (a boto3 DynamoDB client) of
    ``items`` with :func:`dynamodb_condition_check` first; ``lock`` takes
    its ``partition_key``, ``sort_key`` and ``sort_value``. Returns the
    client's answer. Raises :class:`s3lect.FencedError` when the check
    failed (nothing was written); the client's own exception for anything
    else, a condition of your items included."""
    check = dynamodb_condition_check(table, key, term, holder, **lock)
    try:
        return client.transact_write_items(TransactItems=[check, *items])
    except Exception as e:  # noqa: BLE001 - boto3's modelled exceptions have no common import
        resp = getattr(e, "response", None) or {}
        reasons = resp.get("CancellationReasons") or []
        if reasons and (reasons[0] or {}).get("Code") == "ConditionalCheckFailed":
            raise FencedError(f"lock {key!r} in table {table} is not held at term {term} by "
                              f"{holder!r}: a newer leader took it over (or it was released); "
                              "nothing was written") from e
        raise


# ---------------------------------------------------------------------------
# etcd (v3 JSON gateway): read and check the lock, then a Txn on its mod_revision
# ---------------------------------------------------------------------------


def _b64(v: _Text) -> str:
    return base64.b64encode(v.encode("utf-8") if isinstance(v, str) else bytes(v)).decode()


def etcd_range_request(lock_key: _Text) -> Dict[str, Any]:
    """The body of ``POST /v3/kv/range`` that reads the lock key."""
    return {"key": _b64(lock_key)}


def etcd_check_lock(range_response: Mapping[str, Any], term: int, holder: str) -> int:
    """From the answer to :func:`etcd_range_request`: the lock key's
    ``mod_revision`` when its record names leadership ``term`` of
    ``holder``; raises :class:`s3lect.FencedError` otherwise."""
    term, holder = _check_term_holder(term, holder)
    kvs = range_response.get("kvs") or []
    record = base64.b64decode(kvs[0].get("value", "")) if kvs else None
    if not record_holds(record, term, holder):
        raise FencedError(f"the lock is not held at term {term} by {holder!r}: "
                          f"{_describe(record)}; nothing was written")
    return int(kvs[0]["mod_revision"])


def etcd_fenced_txn(lock_key: _Text, mod_revision: int,
                    puts: Iterable[Tuple[_Text, _Text]] = (),
                    deletes: Iterable[_Text] = ()) -> Dict[str, Any]:
    """The body of ``POST /v3/kv/txn`` that runs ``puts`` ((key, value)
    pairs) and ``deletes`` (keys) only if the lock key is still at
    ``mod_revision`` (what :func:`etcd_check_lock` returned): any write of
    the lock since, a takeover or a renewal, makes ``succeeded`` false and
    writes nothing."""
    if isinstance(mod_revision, bool) or not isinstance(mod_revision, int) or mod_revision < 1:
        raise ConfigError(f"mod_revision must be the lock key's revision (>= 1), not {mod_revision!r}")
    ops: List[Dict[str, Any]] = [{"request_put": {"key": _b64(k), "value": _b64(v)}}
                                 for k, v in puts]
    ops += [{"request_delete_range": {"key": _b64(k)}} for k in deletes]
    if not ops:
        raise ConfigError("etcd_fenced_txn needs at least one put or delete")
    return {
        "compare": [{"key": _b64(lock_key), "target": "MOD", "result": "EQUAL",
                     "mod_revision": str(mod_revision)}],
        "success": ops,
    }


def etcd_fenced_write(post: Callable[[str, Dict[str, Any]], Mapping[str, Any]], lock_key: _Text,
                      term: int, holder: str, puts: Iterable[Tuple[_Text, _Text]] = (),
                      deletes: Iterable[_Text] = (), attempts: int = 5) -> Mapping[str, Any]:
    """Reads the lock key, checks it names leadership ``term`` of
    ``holder``, and writes ``puts`` and ``deletes`` in a Txn conditional on
    the lock's mod_revision; when a renewal changed the lock in between, it
    reads and tries again (``attempts`` in all).

    ``post(path, body)`` sends one JSON request to your etcd's v3 gateway
    (``path`` is ``/v3/kv/range`` or ``/v3/kv/txn``) and returns the
    decoded answer, raising on an HTTP error. Returns the Txn's answer.
    Raises :class:`s3lect.FencedError` when the lock names another term or
    holder, :class:`s3lect.RetriesExhaustedError` when the lock kept
    changing; nothing was written in either case.
    """
    puts, deletes = list(puts), list(deletes)
    for _ in range(max(1, attempts)):
        rev = etcd_check_lock(post("/v3/kv/range", etcd_range_request(lock_key)), term, holder)
        ans = post("/v3/kv/txn", etcd_fenced_txn(lock_key, rev, puts, deletes))
        if ans.get("succeeded"):
            return ans
    raise RetriesExhaustedError(f"the lock changed between each of {max(1, attempts)} checks and "
                                "its write; nothing was written")


# ---------------------------------------------------------------------------
# Redis: a script that compares the lock's term and holder, then runs the write
# ---------------------------------------------------------------------------

#: KEYS[1] the lock (a hash: the record in field r), KEYS[2..] the keys your
#: command touches (declared, as Redis asks of scripts); ARGV[1] the term,
#: ARGV[2] the holder, ARGV[3..] your command. Returns {1, the command's
#: reply} when the lock names that term and holder, else {0, why}.
REDIS_FENCE_SCRIPT = """\
local raw = redis.call('HGET', KEYS[1], 'r')
if not raw then return {0, 'fenced: there is no lock record'} end
local ok, rec = pcall(cjson.decode, raw)
if not ok or type(rec) ~= 'table' then return {0, 'fenced: the lock record is not JSON'} end
if type(rec.term) ~= 'number' or rec.term ~= tonumber(ARGV[1]) or rec.leaderID ~= ARGV[2] then
  local t = type(rec.term) == 'number' and string.format('%.0f', rec.term) or '?'
  return {0, 'fenced: the lock record names term ' .. t .. ' of ' .. tostring(rec.leaderID)}
end
return {1, redis.call(unpack(ARGV, 3))}
"""


def redis_fenced_call(client: Any, lock_key: _Text, term: int, holder: str,
                      command_args: Sequence[Any], keys: Sequence[_Text] = ()) -> Any:
    """Runs ``command_args`` (e.g. ``["SET", "app:state", "v"]``) on Redis
    only while the lock hash ``lock_key`` (the lock URL's key) names
    leadership ``term`` of ``holder``: one ``EVAL`` of
    :data:`REDIS_FENCE_SCRIPT`, atomic on the server. ``keys`` lists the
    keys the command touches. ``client`` is a redis-py client, or anything
    with ``execute_command(*args)``. Returns the command's reply; raises
    :class:`s3lect.FencedError` (nothing was run) otherwise."""
    term, holder = _check_term_holder(term, holder)
    if not command_args:
        raise ConfigError("command_args must name a command, e.g. ['SET', key, value]")
    keys = list(keys)
    reply = client.execute_command("EVAL", REDIS_FENCE_SCRIPT, 1 + len(keys), lock_key, *keys,
                                   term, holder, *command_args)
    if not isinstance(reply, (list, tuple)) or not reply or reply[0] not in (0, 1):
        raise Error(f"unexpected reply from the fence script (not {{0|1, ...}}): {reply!r}")
    if reply[0] == 1:
        return reply[1] if len(reply) > 1 else None
    why = _text(reply[1]) if len(reply) > 1 and reply[1] is not None else "fenced"
    raise FencedError(f"lock {_text(lock_key)!r} is not held at term {term} by {holder!r} "
                      f"({why}); nothing was run")

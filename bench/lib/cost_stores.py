# SPDX-License-Identifier: Apache-2.0
"""Requests per hour by role and request type on every lock store, and what
they cost (`bench/run cost --store S ...`, results/cost-stores.md).

The cluster of the S3 cost bench (lib/cost.py): three `s3lect run … -- sleep
86400` nodes on one fresh lock, s3lect's DEFAULT timings (no timing flag),
followers polling the store (no peer mode). Each node talks to the store
server through its own counting proxy (lib/storeproxy.py), so every request
is attributed to the node that sent it:

  s3        MinIO (the bench's server)   HTTP method (GET, PUT)
  dynamodb  DynamoDB Local               X-Amz-Target action (GetItem, PutItem)
  postgres  PostgreSQL (pgserver.py)     statements by first keyword, from the
                                         wire protocol; connections
  redis     redis-server (redis_server.py) commands by name, from RESP (the
                                         read and write scripts apart);
                                         connections
  route53   moto's server                ListResourceRecordSets (GET …/rrset),
                                         ChangeResourceRecordSets (POST …/rrset/)

After one node leads and both others report following it, the bench waits
renew + frequent + 2 s, then counts over a window (120 s, the S3 cost bench's
window at the defaults: four stable-follower intervals; 60 s with --quick).
A window in which leadership changed is rejected.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cluster import Cluster
from common import (GET_USD_PER_1000, HOURS_PER_MONTH, PUT_USD_PER_1000, BenchError, log,
                    md_table)
from impls import DEFAULTS, NodeSpec, S3lectC, Timing
from storeproxy import HttpTypeProxy, MySqlProxy, PgProxy, RedisProxy, TlsHttpTypeProxy

from harness.backends import FAMILY, Backend  # tests/harness/backends.py: the stores' backends
from harness.stores import kinds  # tests/harness/stores.py: the one list of stores

STORES = tuple(kinds("cost"))
NODES = 3
WINDOW = 120.0  # = cost.window_for(DEFAULTS, quick=False)
QUICK_WINDOW = 60.0

# AWS DynamoDB pricing page, on-demand, us-east-1, after the 2024-11-01 price
# reduction (on-demand throughput prices halved). Check the current prices
# for your region before relying on these numbers.
DDB_USD_PER_MILLION_WRU = 0.625
DDB_USD_PER_MILLION_RRU = 0.125
DDB_PRICES_AS_OF = "2024-11-01 (AWS DynamoDB pricing page, on-demand, us-east-1)"
# Route 53: a hosted zone is $0.50/month (first 25 zones); API calls are not
# billed; DNS queries are, but s3lect makes none. The API allows 5 requests
# per second per AWS account (Route 53 quotas page).
R53_ZONE_USD_MONTH = 0.50
R53_API_LIMIT_PER_S = 5.0
# Google Cloud Storage pricing page, Standard storage in a region (us-east1):
# Class A operations (objects.insert) $0.005 per 1,000, Class B
# (objects.get) $0.0004 per 1,000; deletes are free.
GCS_CLASS_A_USD_PER_1000 = 0.005
GCS_CLASS_B_USD_PER_1000 = 0.0004
GCS_PRICES_AS_OF = "2025 (Cloud Storage pricing page, Standard storage, regional)"
# Azure Blob Storage pricing page, block blobs, Hot tier, LRS, East US: write
# operations (Put Blob) $0.065 per 10,000, read operations (Get Blob) $0.005
# per 10,000. Check your region's and tier's prices.
AZ_WRITE_USD_PER_10000 = 0.065
AZ_READ_USD_PER_10000 = 0.005
AZ_PRICES_AS_OF = "2025 (Azure Blob Storage pricing page, block blob, Hot, LRS, East US)"


@dataclass
class NodeCount:
    role: str
    node_id: str
    counts: dict[str, int]


@dataclass
class StoreRun:
    store: str
    timing: Timing
    window: float
    server: str = ""  # what served it (name and version)
    lock: str = ""  # the lock URL, with the proxy's port as 127.0.0.1:PORT
    nodes: list[NodeCount] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    item_bytes: int | None = None  # DynamoDB: the item's size as DynamoDB counts it
    record_bytes: int | None = None  # the JSON record's length
    error: str = ""  # set when the store could not be measured

    def per_hour(self, n: float) -> float:
        return n * 3600.0 / self.window

    def role(self, prefix: str) -> list[NodeCount]:
        return [n for n in self.nodes if n.role.startswith(prefix)]

    def types(self) -> list[str]:
        seen = Counter()
        for n in self.nodes:
            seen.update({k: v for k, v in n.counts.items() if k != "connections"})
        return sorted(seen, key=lambda k: (-seen[k], k))

    def cluster_counts(self) -> Counter:
        c = Counter()
        for n in self.nodes:
            c.update(n.counts)
        return c


# ---- the node program: s3lect-c with another lock URL ----
#
# The stores themselves (server, lock URL, options, environment, request
# names, reading a record back) are tests/harness/backends.py's, the chaos
# run's family: a store of the registry needs nothing here.

class StoreS3lect(S3lectC):
    """`s3lect run` with the lock URL of a store backend instead of s3://."""

    def __init__(self, base: S3lectC, backend: Backend):
        # Share the private binary copy of the run's s3lect-c.
        self.__dict__.update(base.__dict__)
        self.backend = backend

    def node_argv(self, spec: NodeSpec) -> list[str]:
        argv = super().node_argv(spec)
        port = int(spec.endpoint.rsplit(":", 1)[1])
        i = argv.index("--lock")
        argv[i + 1] = self.backend.node_lock(spec.key, port)
        j = argv.index("--endpoint")
        del argv[j:j + 2]
        argv[j:j] = self.backend.node_args(port)
        if not self.backend.aws:
            j = argv.index("--region")
            del argv[j:j + 2]
        return argv

    def node_env(self, spec: NodeSpec) -> dict[str, str]:
        return self.backend.env()


@dataclass
class ClusterServer:
    """What Cluster reads from a server (bucket, credentials, region,
    endpoint): the node program above takes the store's from its backend."""

    region: str
    endpoint: str = ""
    bucket: str = ""
    access_key: str = ""
    secret_key: str = ""


def make_backend(name: str, minio) -> Backend:
    """The harness's backend of store `name`; S3 runs on the bench's MinIO."""
    return FAMILY[name](server=minio if name == "s3" else None, folder="s3lect-bench/")


def make_proxy(backend: Backend):
    """A counting proxy in front of the store's server."""
    if backend.protocol == "postgres":
        return PgProxy("127.0.0.1", backend.port)
    if backend.protocol == "redis":
        return RedisProxy("127.0.0.1", backend.port)
    if backend.protocol == "mysql":
        return MySqlProxy("127.0.0.1", backend.port)
    if backend.protocol == "tls":  # the API server: its own certificate for 127.0.0.1
        srv = backend.server
        return TlsHttpTypeProxy("127.0.0.1", backend.port, backend.classify, srv.cert, srv.key,
                                srv.ca_file)
    return HttpTypeProxy("127.0.0.1", backend.port, backend.classify)


def inspect(backend: Backend, run: StoreRun, key: str) -> None:
    """Looks at the stored lock at the end of the window (sizes)."""
    if backend.kind == "dynamodb":
        item = backend.item(key)
        if not item:
            run.notes.append("the item was not found after the window")
            return
        run.item_bytes = ddb_item_size(item)
        run.notes.append("attribute value sizes: " + ", ".join(
            f"{k} ({len(next(iter(v.values())).encode())} bytes)" for k, v in sorted(item.items())))
    rec = backend.record(key)
    if rec is not None:
        run.record_bytes = len(rec)


def init_env(backend: Backend) -> dict[str, str]:
    """init-store's environment: none of ours but the store's."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PG"))}
    e.update(backend.env())
    return e


def ddb_item_size(item: dict) -> int:
    """DynamoDB's item size: the UTF-8 length of every attribute name plus its
    value (strings: UTF-8 bytes). Only string attributes occur here."""
    size = 0
    for name, value in item.items():
        (typ, v), = value.items()
        if typ != "S":
            raise BenchError(f"unexpected attribute type {typ} of {name}")
        size += len(name.encode()) + len(v.encode())
    return size


# ---- one measurement ----

def run_store(base: S3lectC, backend: Backend, quick: bool, logdir: Path) -> StoreRun:
    timing = DEFAULTS
    window = QUICK_WINDOW if quick else WINDOW
    run = StoreRun(backend.kind, timing, window)
    key = f"bench-cost-{int(time.time())}-{backend.kind}"
    backend.init(base.bin, key, init_env(backend), timeout=180)
    run.server = backend.version()
    proxies = [make_proxy(backend) for _ in range(NODES)]
    ends = [f"http://127.0.0.1:{p.port}" for p in proxies]
    impl = StoreS3lect(base, backend)
    run.lock = backend.lock_url(key, "PORT")
    cl = Cluster(impl, NODES, ClusterServer(backend.region), key, timing, "s3",
                 logdir / f"cost-store-{backend.kind}", None, endpoint_for=lambda s: ends[s])
    settle_to = 2 * (timing.lease + timing.infrequent) + 30
    try:
        if not backend.cas:
            # One node first; the others once it leads (moto's Route 53 lets
            # nodes started together all win the first create).
            cl.start_slot(0)
            cl.wait(lambda: cl.slots[0].leading, settle_to, "the first node to lead")
            for s in range(1, NODES):
                cl.start_slot(s)
        else:
            cl.start()
        cl.wait(cl.settled_leader, settle_to, "one leader followed by every node")
        time.sleep(timing.renew + timing.frequent + 2)
        ldr = cl.wait(cl.settled_leader, settle_to, "one leader followed by every node")
        with cl.cv:
            idx = len(cl.events)
        before = [p.snapshot() for p in proxies]
        log(f"  cost {backend.kind}: counting for {window:.0f}s (leader {ldr.id})")
        time.sleep(window)
        after = [p.snapshot() for p in proxies]
        with cl.cv:
            changes = [e for e in cl.events[idx:]
                       if e.kind in ("acquired", "lost", "releasing", "exit", "leader_is")]
        if changes:
            raise BenchError(f"{backend.kind}: leadership changed during the counting window: "
                             f"{[(e.node.id, e.kind) for e in changes]}\n{cl.tails()}")
        totals = [p.snapshot() for p in proxies]
        try:
            inspect(backend, run, key)
        except Exception as e:  # noqa: BLE001 - a size note, not the measurement
            run.notes.append(f"could not read the stored lock back: {e}")
    finally:
        cl.stop()
        for p in proxies:
            p.close()
    fcount = 0
    for slot in range(NODES):
        d = after[slot] - before[slot]
        node = cl.slots[slot]
        if node is ldr:
            role = "leader"
        else:
            fcount += 1
            role = f"follower {fcount}"
        counts = {k: v for k, v in d.items() if v}
        if backend.protocol == "redis":
            counts["connections"] = d.get("connections", 0)
            run.notes.append(f"{role}: {totals[slot].get('connections', 0)} connection(s) opened "
                             f"from start to the end of the window")
        if backend.protocol == "mysql":
            counts["connections"] = d.get("connections", 0)
            run.notes.append(f"{role}: {totals[slot].get('connections', 0)} connection(s) opened "
                             f"from start to the end of the window, "
                             f"{totals[slot].get('SET', 0)} SET")
        if backend.protocol == "postgres":
            counts["connections"] = d.get("connections", 0)
            run.notes.append(f"{role}: {totals[slot].get('connections', 0)} connection(s) opened "
                             f"from start to the end of the window, "
                             f"{totals[slot].get('SET', 0)} SET statement_timeout")
        run.nodes.append(NodeCount(role, node.id if node else "?", counts))
    run.nodes.sort(key=lambda n: n.role)
    return run


def run_all(base: S3lectC, minio, stores: list[str], quick: bool, logdir: Path) -> list[StoreRun]:
    runs = []
    for name in stores:
        backend = None
        log(f"cost: store {name} (defaults, followers poll the store)")
        try:
            backend = make_backend(name, minio)
            backend.start()
            runs.append(run_store(base, backend, quick, logdir))
        except Exception as e:  # noqa: BLE001 - the other stores are still measured
            # A server that cannot start, a cluster that does not settle, a
            # window with a leadership change: a row with the reason.
            r = StoreRun(name, DEFAULTS, QUICK_WINDOW if quick else WINDOW)
            first = str(e).splitlines()[0] if str(e) else ""
            r.error = first if isinstance(e, BenchError) else f"{type(e).__name__}: {first}"
            log(f"cost: store {name} not measured: {e}")
            runs.append(r)
        finally:
            try:
                if backend is not None:
                    backend.destroy()
            except Exception as e:  # noqa: BLE001
                log(f"cost: stopping the {name} server: {e}")
    return runs


# ---- prices ----

def s3_usd_month(counts: dict[str, float]) -> float:
    from cost import GET_LIKE, PUT_LIKE
    g = sum(v for k, v in counts.items() if k in GET_LIKE)
    p = sum(v for k, v in counts.items() if k in PUT_LIKE)
    return (g * GET_USD_PER_1000 + p * PUT_USD_PER_1000) / 1000.0 * HOURS_PER_MONTH


def ddb_units(run: StoreRun) -> tuple[int, int]:
    """(RRU per GetItem, WRU per PutItem) for the item size measured (strongly
    consistent read: 1 RRU per 4 KB; write: 1 WRU per 1 KB, rounded up)."""
    size = run.item_bytes or 1
    return max(1, math.ceil(size / 4096)), max(1, math.ceil(size / 1024))


def ddb_usd_month(run: StoreRun, counts: dict[str, float]) -> float:
    rru, wru = ddb_units(run)
    return ((counts.get("GetItem", 0) * rru * DDB_USD_PER_MILLION_RRU
             + counts.get("PutItem", 0) * wru * DDB_USD_PER_MILLION_WRU)
            / 1e6 * HOURS_PER_MONTH)


def usd_month(run: StoreRun, counts_h: dict[str, float]) -> str:
    """USD/month for these requests per hour, as a table cell."""
    if run.store == "s3":
        return f"{s3_usd_month(counts_h):.4f}"
    if run.store == "dynamodb":
        return f"{ddb_usd_month(run, counts_h):.4f}"
    if run.store == "route53":
        return "0 (API calls are not billed)"
    if run.store == "gcs":
        return (f"{(counts_h.get('objects.insert', 0) * GCS_CLASS_A_USD_PER_1000 + counts_h.get('objects.get', 0) * GCS_CLASS_B_USD_PER_1000) / 1000.0 * HOURS_PER_MONTH:.4f}")
    if run.store == "azure":
        return (f"{(counts_h.get('PutBlob', 0) * AZ_WRITE_USD_PER_10000 + counts_h.get('GetBlob', 0) * AZ_READ_USD_PER_10000) / 10000.0 * HOURS_PER_MONTH:.4f}")
    return "n/a (your server)"


def cluster_usd_month(run: StoreRun) -> str:
    h = {k: run.per_hour(v) for k, v in run.cluster_counts().items()}
    if run.store == "route53":
        return f"{R53_ZONE_USD_MONTH:.2f} (the hosted zone; API calls are not billed)"
    return usd_month(run, h)


def _fmt_counts(counts: dict[str, float], types: list[str], per_hour=None) -> str:
    parts = []
    for t in types:
        v = counts.get(t, 0)
        parts.append(f"{t} {per_hour(v) if per_hour else v:.0f}")
    return ", ".join(parts) or "0"


def report(runs: list[StoreRun], command: str) -> tuple[str, str]:
    rows, summary_rows, detail_rows = [], [], []
    notes = []
    for r in runs:
        if r.error:
            rows.append([r.store, "not measured", r.error, "", "", ""])
            summary_rows.append([r.store, "not measured", "", ""])
            continue
        types = r.types()
        ldr = r.role("leader")
        fol = r.role("follower")
        ldr_h = _fmt_counts(ldr[0].counts, types, r.per_hour) if ldr else "–"
        fol_h = " / ".join(_fmt_counts(f.counts, types, r.per_hour) for f in fol) or "–"
        cl = r.cluster_counts()
        cl_total = sum(v for k, v in cl.items() if k != "connections")
        cl_h = _fmt_counts(cl, types, r.per_hour)
        rows.append([r.store, ldr_h, fol_h, f"{cl_h} (**{r.per_hour(cl_total):.0f}**)",
                     cluster_usd_month(r),
                     usd_month(r, {k: r.per_hour(v) for k, v in ldr[0].counts.items()})
                     if ldr else "–"])
        summary_rows.append([r.store, f"{r.per_hour(cl_total):.0f}", cl_h, cluster_usd_month(r)])
        for n in r.nodes:
            extra = (f"; connections opened in the window {n.counts.get('connections', 0)}"
                     if r.store in ("postgres", "redis") else "")
            detail_rows.append([r.store, n.role, n.node_id,
                                _fmt_counts(n.counts, types) + extra,
                                _fmt_counts(n.counts, types, r.per_hour),
                                usd_month(r, {k: r.per_hour(v) for k, v in n.counts.items()})])
        if r.store == "dynamodb":
            rru, wru = ddb_units(r)
            size = r.item_bytes
            room = (f"More than {1024 - size} further bytes (a longer lock key, node id or, in peer mode, "
                    f"the leader's address and the 64-character key fingerprint the record "
                    f"then carries) would take it past 1 KB, and every PutItem would then "
                    f"cost 2 WRU (the lock key alone may be up to 2048 bytes)"
                    if size is not None and size <= 1024 else
                    "it is over 1 KB, so each PutItem costs more than 1 WRU")
            notes.append(
                f"- **dynamodb**: the item — partition key LockID (the lock key), s3lectRecord "
                f"(the JSON record: leader id and address, time, term, lease, incarnation) and "
                f"s3lectVersion (a 32-character version) — measured "
                f"{size if size is not None else '?'} bytes as DynamoDB counts item size "
                f"(attribute names + values), of which the record "
                f"{r.record_bytes if r.record_bytes is not None else '?'} bytes "
                f"({'; '.join(r.notes)}): {rru} RRU per strongly consistent GetItem (1 RRU "
                f"per 4 KB), {wru} WRU per PutItem (1 WRU per 1 KB). {room}. A conditional "
                f"PutItem that fails is billed too (none failed here: one leader).")
        elif r.store == "route53":
            cl_per_s = r.per_hour(cl_total) / 3600.0
            notes.append(
                f"- **route53**: the cluster makes {cl_per_s:.3f} API requests per second, "
                f"{100 * cl_per_s / R53_API_LIMIT_PER_S:.1f} % of Route 53's limit of "
                f"{R53_API_LIMIT_PER_S:g} requests per second per AWS account (shared by every "
                f"client in the account: about "
                f"{int(R53_API_LIMIT_PER_S // cl_per_s) if cl_per_s else '∞'} such clusters "
                f"would use all of it). API requests are not billed; the hosted zone is "
                f"${R53_ZONE_USD_MONTH:.2f}/month (first 25 zones; one zone can hold many "
                f"locks), DNS queries are billed but s3lect makes none. Measured on moto's "
                f"server, which counts the same requests as Route 53 but whose reads are "
                f"immediately consistent (Route 53's are not; that changes when a takeover "
                f"happens, not how many requests a steady cluster makes). The record is "
                f"{r.record_bytes if r.record_bytes is not None else '?'} characters of TXT "
                f"strings (base64 of the JSON record).")
        elif r.store == "postgres":
            notes.append(
                "- **postgres**: statements by first keyword, counted from the wire protocol "
                "(each Parse or simple Query message the node sends). `SET` is the "
                "`SET statement_timeout` on each new connection; pooled connections stay "
                "open, so a steady cluster opens none. No per-request price: the cost is "
                "your server's. " + "; ".join(r.notes) + ".")
        elif r.store == "mysql":
            notes.append(
                "- **mysql**: statements by first keyword, counted from the client's "
                "COM_QUERY packets (MariaDB 10.11 here; the store sends each statement as "
                "text). `SET` is the session setup on each new connection (strict SQL mode, "
                "statement time limits); pooled connections stay open, so a steady cluster "
                "opens none. No per-request price: the cost is your server's. "
                + "; ".join(r.notes) + ".")
        elif r.store == "k8s":
            notes.append(
                "- **k8s**: API server requests on the Lease by verb (GET a read, PUT a "
                "renewal with metadata.resourceVersion, POST a create), counted at a proxy "
                "that terminates each node's TLS with the API server's own certificate; a "
                "real kube-apiserver v1.37.2 on its own etcd. No per-request price: the cost "
                "is your API server's and its etcd's (each PUT is an etcd write, and a watch "
                "event for every watcher of leases in the namespace). "
                + "; ".join(r.notes) + ".")
        elif r.store == "redis":
            notes.append(
                "- **redis**: commands by name, counted from RESP: `EVALSHA (read)` is the "
                "read script (HMGET of the record, its version and stamp, and TIME), "
                "`EVALSHA (write)` the compare-and-set script; `EVAL` only when the server "
                "had not cached a script (NOSCRIPT), and `AUTH` and `INFO` once per new "
                "connection (one per node, kept open). No per-request price: the cost is "
                "your server's. The record is "
                f"{r.record_bytes if r.record_bytes is not None else '?'} bytes. "
                + "; ".join(r.notes) + ".")
        elif r.store == "gcs":
            notes.append(
                f"- **gcs**: the JSON API counted by operation: objects.get (the record read "
                f"with its generation; a Class B operation, ${GCS_CLASS_B_USD_PER_1000} per "
                f"1,000) and objects.insert (a conditional upload with ifGenerationMatch; "
                f"Class A, ${GCS_CLASS_A_USD_PER_1000} per 1,000), Standard storage, "
                f"{GCS_PRICES_AS_OF}. Measured on fake-gcs-server, which answers the same "
                f"requests the same way (the store makes no other). The record is "
                f"{r.record_bytes if r.record_bytes is not None else '?'} bytes.")
        elif r.store == "azure":
            notes.append(
                f"- **azure**: Blob REST requests by operation: GetBlob (a read operation, "
                f"${AZ_READ_USD_PER_10000} per 10,000) and PutBlob (a conditional Put Blob with "
                f"If-Match / If-None-Match; a write operation, ${AZ_WRITE_USD_PER_10000} per "
                f"10,000), {AZ_PRICES_AS_OF}. Measured on Azurite, which answers the same "
                f"requests the same way. The record is "
                f"{r.record_bytes if r.record_bytes is not None else '?'} bytes.")
        elif r.store == "etcd":
            notes.append(
                f"- **etcd**: the v3 JSON gateway counted by path: kv/range (the record read, "
                f"linearizable) and kv/txn (a compare on mod_revision or create_revision, then "
                f"a put, through raft); auth/authenticate once per token with a user. No "
                f"per-request price: the cost is your cluster's. The record is "
                f"{r.record_bytes if r.record_bytes is not None else '?'} bytes.")
        elif r.store == "s3":
            notes.append(
                f"- **s3**: S3 Standard list prices (us-east-1): PUT ${PUT_USD_PER_1000} and GET "
                f"${GET_USD_PER_1000} per 1,000 requests, as in [cost.md](cost.md); storage "
                f"(one object of {r.record_bytes if r.record_bytes is not None else 'a few hundred'}"
                f" bytes) and data transfer not included.")
    windows = ", ".join(f"{r.store} {r.window:.0f} s" for r in runs if not r.error)
    servers = md_table(["store", "server", "lock URL (PORT: each node's proxy)"],
                       [[r.store, r.server, f"`{r.lock}`"] for r in runs if not r.error])
    table = md_table(["store", "leader requests/h", "per-follower requests/h (follower 1 / 2)",
                      f"cluster requests/h ({NODES} nodes; total)",
                      f"USD/month, {NODES}-node cluster", "USD/month, leader alone"], rows)
    detail = md_table(["store", "role", "node", "in the window", "per hour", "USD/month"],
                      detail_rows)
    body = f"""## Results

s3lect at its default timings ({DEFAULTS.describe()}), {NODES} nodes, followers polling
the store (no peer mode), each store on a local server.

{table}

Rates are counts in the window × 3600 / window ({windows}); {HOURS_PER_MONTH} hours a
month. Request types: S3 by HTTP method; DynamoDB by action (GetItem: a read with
ConsistentRead; PutItem: a conditional write); PostgreSQL by statement; Route 53
ListResourceRecordSets (a read) and ChangeResourceRecordSets (a write: one DELETE +
CREATE batch); GCS by JSON API operation (objects.get, objects.insert); etcd by
gateway path (kv/range, kv/txn).

### Per node

{detail}

### Prices and notes

- **Prices used.** S3: PUT ${PUT_USD_PER_1000}, GET ${GET_USD_PER_1000} per 1,000
  requests (S3 Standard, us-east-1). DynamoDB on-demand, us-east-1, as of
  {DDB_PRICES_AS_OF}: ${DDB_USD_PER_MILLION_WRU} per million write request units,
  ${DDB_USD_PER_MILLION_RRU} per million read request units (after the
  2024-11-01 price reduction). Route 53: ${R53_ZONE_USD_MONTH:.2f} per hosted zone
  and month, API requests free, limit {R53_API_LIMIT_PER_S:g} requests/s per account.
  GCS: Class A ${GCS_CLASS_A_USD_PER_1000}, Class B ${GCS_CLASS_B_USD_PER_1000} per
  1,000 operations (Standard storage, regional). PostgreSQL: no per-request price. **Check current prices for your region**;
  these are list prices at the date given, without free tiers or discounts.
{chr(10).join(notes)}

## Servers

{servers}

## How measured

`{command}` runs, for each store, {NODES} nodes of `s3lect run --lock URL … --
sleep 86400` (s3lect-c of the build tree; no timing flag, so s3lect's defaults),
each through its own counting proxy in front of the store's server on
127.0.0.1 (bench/lib/storeproxy.py): HTTP requests by method (S3), by
X-Amz-Target action (DynamoDB) or by method and path (Route 53); for
PostgreSQL a proxy that reads the client side of the wire protocol and counts
each statement (simple Query or extended-protocol Parse message) by its first
keyword, and each connection. DynamoDB's table and PostgreSQL's table are made
beforehand with `s3lect init-store URL` against the server directly (not
counted); Route 53's hosted zone with boto3 on moto. After one node leads and
both others report following it, the bench waits renew + frequent + 2 s, then
counts for the window; a window in which leadership changed is rejected. The
window ({WINDOW:.0f} s, {QUICK_WINDOW:.0f} s with --quick) is the S3 cost bench's at
the defaults (four stable-follower intervals of 30 s); the timings are not
shortened, only the counting is: the per-hour numbers are extrapolated from
the window ({windows}), not counted over an hour, and a periodic request can
land at both ends of a window, so a count can be one more or one fewer than
the rate says. Route 53's nodes are started one after the other (the first,
then the others once it leads): moto accepts a second CREATE of the lock's
TXT name with another value (Route 53 refuses it), so nodes started together
could each win the first create. The other stores' nodes start together, as
in the S3 cost bench.
"""
    summary = md_table(["store", "cluster requests/h", "by type", "USD/month"], summary_rows)
    return body, summary


def to_json(runs: list[StoreRun]) -> list[dict]:
    return [{"store": r.store, "window_s": r.window, "server": r.server, "lock": r.lock,
             "error": r.error, "item_bytes": r.item_bytes, "record_bytes": r.record_bytes,
             "notes": r.notes,
             "nodes": [{"role": n.role, "id": n.node_id, "counts": n.counts} for n in r.nodes]}
            for r in runs]


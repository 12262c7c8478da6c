# SPDX-License-Identifier: Apache-2.0
"""The harness's servers for the DynamoDB and PostgreSQL stores work, and
what moto's Route 53 and DynamoDB actually do (so a moto upgrade that
changes it is noticed).

    python3 -m pytest -q tests/harness/test_harness_servers.py
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from harness.dynamodb_local import DynamoDBLocal  # noqa: E402
from harness.pgserver import PostgresServer  # noqa: E402
from harness.servers import Server, cache_dir  # noqa: E402

boto3 = pytest.importorskip("boto3")  # comes with moto[server] (scripts/deps)
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError, ReadTimeoutError  # noqa: E402


def _listen_addrs(port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Local addresses of the TCP sockets listening on port (from /proc/net)."""
    out = []
    for path, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(path).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            addr, p = f[1].split(":")
            if f[3] != "0A" or int(p, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.append(ipaddress.ip_address(raw) if width == 8 else ipaddress.IPv6Address(raw))
    return out


def _loopback_only(port: int) -> None:
    addrs = _listen_addrs(port)
    assert addrs, f"nothing listens on port {port}"
    for a in addrs:
        v4 = a.ipv4_mapped if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped else a
        assert v4.is_loopback, f"port {port} listens on {a}, not only on loopback"


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


# -- DynamoDB Local -----------------------------------------------------------

def test_dynamodb_local_conditional_writes(dynamodb_local: DynamoDBLocal) -> None:
    _loopback_only(dynamodb_local.port)
    table = _name("locks")
    dynamodb_local.create_table(table)
    c = dynamodb_local.client()
    key = {"LockID": {"S": "lock1"}}
    c.put_item(TableName=table, Item={**key, "v": {"S": "1"}},
               ConditionExpression="attribute_not_exists(#k)", ExpressionAttributeNames={"#k": "LockID"})
    with pytest.raises(ClientError) as e:
        c.put_item(TableName=table, Item={**key, "v": {"S": "2"}},
                   ConditionExpression="attribute_not_exists(#k)", ExpressionAttributeNames={"#k": "LockID"})
    assert e.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    with pytest.raises(ClientError) as e:
        c.put_item(TableName=table, Item={**key, "v": {"S": "2"}}, ConditionExpression="#v = :old",
                   ExpressionAttributeNames={"#v": "v"}, ExpressionAttributeValues={":old": {"S": "9"}})
    assert e.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    c.put_item(TableName=table, Item={**key, "v": {"S": "2"}}, ConditionExpression="#v = :old",
               ExpressionAttributeNames={"#v": "v"}, ExpressionAttributeValues={":old": {"S": "1"}})
    item = c.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert item["v"] == {"S": "2"}


def test_dynamodb_local_env_reaches_it(dynamodb_local: DynamoDBLocal, clean_env: dict[str, str]) -> None:
    """A child process finds the server through env() alone (-sharedDb: its
    own credentials see the same tables)."""
    table = _name("envcheck")
    dynamodb_local.create_table(table)
    env = {**clean_env, **dynamodb_local.env(), "AWS_ACCESS_KEY_ID": "other", "AWS_SECRET_ACCESS_KEY": "x"}
    r = subprocess.run([sys.executable, "-c", "import boto3; print(boto3.client('dynamodb').list_tables()['TableNames'])"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert table in r.stdout


def test_dynamodb_local_restart_keeps_items_and_pause(dynamodb_local: DynamoDBLocal) -> None:
    table = _name("restart")
    dynamodb_local.create_table(table)
    c = dynamodb_local.client()
    key = {"LockID": {"S": "k"}}
    c.put_item(TableName=table, Item={**key, "v": {"S": "before"}})
    port = dynamodb_local.port
    for hard in (False, True):
        took = dynamodb_local.restart(hard=hard)
        assert dynamodb_local.port == port and took < 60
        assert c.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["v"] == {"S": "before"}

    quick = boto3.client("dynamodb", endpoint_url=dynamodb_local.endpoint, region_name="us-east-1",
                         aws_access_key_id=dynamodb_local.access_key,
                         aws_secret_access_key=dynamodb_local.secret_key,
                         config=Config(connect_timeout=1, read_timeout=1, retries={"total_max_attempts": 1}))
    dynamodb_local.pause()
    try:
        t0 = time.monotonic()
        with pytest.raises(ReadTimeoutError):
            quick.get_item(TableName=table, Key=key)
        assert time.monotonic() - t0 < 10
    finally:
        dynamodb_local.resume()
    assert quick.get_item(TableName=table, Key=key)["Item"]["v"] == {"S": "before"}


# -- PostgreSQL ---------------------------------------------------------------

def test_postgres_restart_keeps_rows(postgres: PostgresServer) -> None:
    _loopback_only(postgres.port)
    assert postgres.dsn == f"postgres://s3lect@127.0.0.1:{postgres.port}/s3lect"
    postgres.psql("CREATE TABLE IF NOT EXISTS harness_check (k text PRIMARY KEY, v int)")
    postgres.psql("INSERT INTO harness_check VALUES ('a', 1) ON CONFLICT (k) DO UPDATE SET v = 1")
    port = postgres.port
    for hard in (False, True):
        took = postgres.restart(hard=hard)
        assert postgres.port == port and took < 60
        assert postgres.psql("SELECT k, v FROM harness_check WHERE k = 'a'").strip() == "a|1"
    if os.geteuid() == 0:  # PostgreSQL refuses root: it runs as nobody
        assert postgres.psql("SELECT current_setting('data_directory')").strip() == str(postgres.data_dir)
        assert Path(postgres.data_dir).stat().st_uid != 0


def test_postgres_env_reaches_it(postgres: PostgresServer, clean_env: dict[str, str]) -> None:
    r = subprocess.run([str(postgres.bindir / "psql"), "-X", "-At", "-c", "SELECT current_user || '@' || current_database()"],
                       env={**clean_env, **postgres.env()}, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "s3lect@s3lect"


def test_postgres_pause_resume(postgres: PostgresServer) -> None:
    postgres.pause()
    try:
        t0 = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            postgres.psql("SELECT 1", timeout=2)
        assert time.monotonic() - t0 < 10
    finally:
        postgres.resume()
    assert postgres.psql("SELECT 41 + 1").strip() == "42"


# -- what moto does (moto 5.2.1 at the time of writing) -------------------------

def _r53(moto: Server):
    return boto3.client("route53", endpoint_url=moto.endpoint, region_name="us-east-1",
                        aws_access_key_id=moto.access_key, aws_secret_access_key=moto.secret_key)


def _txt(action: str, value: str, ttl: int = 60, name: str = "lock.example.com.") -> dict:
    return {"Action": action, "ResourceRecordSet": {"Name": name, "Type": "TXT", "TTL": ttl,
                                                     "ResourceRecords": [{"Value": value}]}}


def test_moto_route53_change_batches(moto: Server) -> None:
    """moto's ChangeResourceRecordSets, compared with Route 53's documented rules.

    Like Route 53: a batch whose DELETE does not match is rejected as a whole
    (nothing of it applied); a DELETE with the right value but another TTL is
    rejected; CREATE of an identical record that exists is rejected
    (InvalidChangeBatch); UPSERT exists.
    Unlike Route 53: the rejection is InvalidInput (Route 53: InvalidChangeBatch);
    moto checks a DELETE against every CREATE/UPSERT the zone ever had, not the
    record's current value, so deleting a value that was replaced is accepted
    (a DELETE+CREATE compare-and-swap is NOT safe against moto); CREATE of an
    existing name with another value is accepted and leaves two record sets.
    """
    r53 = _r53(moto)
    zone = r53.create_hosted_zone(Name=_name("z") + ".example.com.",
                                  CallerReference=secrets.token_hex(8))["HostedZone"]
    zid, name = zone["Id"], "lock." + zone["Name"]

    def change(*changes: dict) -> str | None:
        try:
            r53.change_resource_record_sets(HostedZoneId=zid, ChangeBatch={"Changes": list(changes)})
            return None
        except ClientError as e:
            return e.response["Error"]["Code"]

    def values() -> list[tuple[int, list[str]]]:
        sets = r53.list_resource_record_sets(HostedZoneId=zid)["ResourceRecordSets"]
        return sorted((s["TTL"], [r["Value"] for r in s["ResourceRecords"]])
                      for s in sets if s["Type"] == "TXT" and s["Name"] == name)

    assert change(_txt("CREATE", '"abc"', name=name)) is None
    assert values() == [(60, ['"abc"'])]
    # A batch with a DELETE of the wrong value is rejected whole (AWS: InvalidChangeBatch).
    assert change(_txt("DELETE", '"WRONG"', name=name), _txt("CREATE", '"new"', name=name)) == "InvalidInput"
    assert values() == [(60, ['"abc"'])]
    # DELETE with the right value and the wrong TTL: rejected.
    assert change(_txt("DELETE", '"abc"', ttl=300, name=name)) == "InvalidInput"
    assert values() == [(60, ['"abc"'])]
    # CREATE of an identical existing record: rejected like AWS.
    assert change(_txt("CREATE", '"abc"', name=name)) == "InvalidChangeBatch"
    # UPSERT exists and replaces.
    assert change(_txt("UPSERT", '"b"', name=name)) is None
    assert values() == [(60, ['"b"'])]
    # Deviation: DELETE of a value the record no longer has ("abc" was replaced
    # by "b") is accepted, since "abc" was once created: AWS rejects it.
    assert change(_txt("DELETE", '"abc"', name=name), _txt("CREATE", '"c"', name=name)) is None
    assert values() == [(60, ['"c"'])]
    # Deviation: CREATE of an existing name with another value is accepted
    # (AWS: InvalidChangeBatch, "already exists") and leaves two record sets.
    assert change(_txt("CREATE", '"d"', name=name)) is None
    assert values() == [(60, ['"c"']), (60, ['"d"'])]
    # ...and a DELETE removes every record set of that name and type.
    assert change(_txt("DELETE", '"d"', name=name)) is None
    assert values() == []
    # Deviation: DELETE of a record that does not exist (but once did) is accepted.
    assert change(_txt("DELETE", '"d"', name=name)) is None


def test_moto_dynamodb_conditions(moto: Server) -> None:
    """moto's DynamoDB honours attribute_not_exists(#k) and #v = :old
    conditions (ConditionalCheckFailedException, and the old item with
    ReturnValuesOnConditionCheckFailure) and accepts ConsistentRead (it has
    only one copy of the data, so every read is consistent)."""
    c = boto3.client("dynamodb", endpoint_url=moto.endpoint, region_name="us-east-1",
                     aws_access_key_id=moto.access_key, aws_secret_access_key=moto.secret_key)
    table = _name("locks")
    c.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "LockID", "AttributeType": "S"}],
                   KeySchema=[{"AttributeName": "LockID", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    key = {"LockID": {"S": "lock1"}}
    not_exists = dict(ConditionExpression="attribute_not_exists(#k)", ExpressionAttributeNames={"#k": "LockID"})
    c.put_item(TableName=table, Item={**key, "v": {"S": "1"}}, **not_exists)
    with pytest.raises(ClientError) as e:
        c.put_item(TableName=table, Item={**key, "v": {"S": "2"}}, **not_exists)
    assert e.value.response["Error"]["Code"] == "ConditionalCheckFailedException"

    def cas(old: str, new: str) -> None:
        c.put_item(TableName=table, Item={**key, "v": {"S": new}}, ConditionExpression="#v = :old",
                   ExpressionAttributeNames={"#v": "v"}, ExpressionAttributeValues={":old": {"S": old}},
                   ReturnValuesOnConditionCheckFailure="ALL_OLD")

    with pytest.raises(ClientError) as e:
        cas("9", "2")
    assert e.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert e.value.response.get("Item") == {**key, "v": {"S": "1"}}
    cas("1", "2")
    assert c.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["v"] == {"S": "2"}
    assert c.get_item(TableName=table, Key=key, ConsistentRead=False)["Item"]["v"] == {"S": "2"}


# -- failures say why ---------------------------------------------------------

def test_start_failures_carry_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import pgserver
    from harness.servers import ServerStartError

    monkeypatch.setattr(pgserver, "PG_ROOT", tmp_path / "nothing")
    with pytest.raises(ServerStartError, match="install Debian package postgresql"):
        pgserver.ensure_postgres()
    monkeypatch.undo()

    class BrokenPostgres(PostgresServer):
        def command(self) -> list[str]:
            return self._as_server_user([str(self.bindir / "postgres"), "-D", str(self.workdir / "missing")])

    pg = BrokenPostgres()
    with pytest.raises(ServerStartError) as e:
        pg.start()
    assert "postgres could not be started" in str(e.value) and "missing" in str(e.value)
    assert pg.proc is None
    pg.stop()
    assert not pg.workdir.exists()

    empty = tmp_path / "no-jars"
    empty.mkdir()
    ddb = DynamoDBLocal(libdir=empty)
    with pytest.raises(ServerStartError) as e:
        ddb.start()
    assert "exited with status" in str(e.value) and "S3lectDynamoDBLocal" in str(e.value)  # javac's complaint
    assert ddb.proc is None
    ddb.stop()


@pytest.mark.parametrize("kind", ["minio", "moto", "dynamodb", "postgres", "gcs", "azure", "etcd",
                                  "redis", "k8s"])
def test_with_store_exports_a_lock_prefix_the_cli_elects_on(kind: str, clean_env: dict[str, str],
                                                             s3lect_bin: Path) -> None:
    """servers.py with-STORE -- CMD: CMD finds S3LECT_TEST_LOCK_PREFIX and
    everything the CLI needs in its environment; a key appended to the prefix
    is a lock the CLI leads and releases (the table made by init-store)."""
    env = dict(clean_env)
    env["S3LECT_CLI"] = str(s3lect_bin)
    env["S3LECT_CACHE"] = str(cache_dir())  # clean_env's HOME has no cached servers
    key = _name("prefix")
    script = ('case "$S3LECT_TEST_LOCK_PREFIX" in "") echo "no prefix"; exit 3;; esac; '
              '"$S3LECT_CLI" run --no-peer --lock "${S3LECT_TEST_LOCK_PREFIX}$1" -- '
              'sh -c "echo LED-\\$S3LECT_TERM" || exit 4; '
              '"$S3LECT_CLI" status --json --lock "${S3LECT_TEST_LOCK_PREFIX}$1"; '
              'echo "STATUS-EXIT-$?"')
    r = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "servers.py"),
                        f"with-{kind}", "--", "sh", "-c", script, "sh", key],
                       env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert re.search(r"LED-\d{13}\b", r.stdout), r.stdout + r.stderr[-2000:]
    assert "S3LECT_TEST_LOCK_PREFIX" not in r.stderr
    # read back from the same store: the record of that term (the creating
    # node's clock in ms), released (status exit 3: free) by the leader when
    # its command ended
    assert "STATUS-EXIT-3" in r.stdout, r.stdout + r.stderr[-2000:]
    assert re.search(r'"term": ?\d{13}\b', r.stdout), r.stdout


# -- fake-gcs-server ----------------------------------------------------------

def test_fake_gcs_generations_restart_and_pause(fake_gcs) -> None:
    """ifGenerationMatch is honoured (the store's compare-and-set); a restart,
    soft or hard, keeps the object and its generation; a paused server does
    not answer."""
    import urllib.error
    import urllib.request
    name = _name("gcs")
    assert fake_gcs.put_object(name, b'{"v":1}') == 200
    status, body, gen = fake_gcs.get_object(name)
    assert status == 200 and body == b'{"v":1}' and gen.isdigit(), (status, body, gen)
    base = f"{fake_gcs.endpoint}/upload/storage/v1/b/{fake_gcs.bucket}/o?uploadType=media&name={name}"

    def upload(cond: str) -> int:
        req = urllib.request.Request(f"{base}&ifGenerationMatch={cond}", data=b'{"v":2}',
                                     method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert upload("0") == 412, "a create over an existing object must fail"
    assert upload(str(int(gen) + 1)) == 412, "a stale generation must fail"
    assert upload(gen) == 200
    _, body, gen2 = fake_gcs.get_object(name)
    assert body == b'{"v":2}' and gen2 != gen
    for hard in (False, True):
        fake_gcs.restart(hard=hard)
        assert fake_gcs.get_object(name)[1:] == (b'{"v":2}', gen2)
    fake_gcs.pause()
    try:
        t0 = time.monotonic()
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{fake_gcs.endpoint}/storage/v1/b", timeout=1)
        assert time.monotonic() - t0 < 10
    finally:
        fake_gcs.resume()
    assert fake_gcs.get_object(name)[0] == 200


# -- redis-server -------------------------------------------------------------

def test_redis_server_aof_restart_pause_and_acl() -> None:
    """With the append-only file a restart, soft or hard, keeps the data;
    without it a restart empties the server; a paused server does not
    answer; the store's ACL user reaches only keys under s3lect/."""
    from harness.redis_server import KEY_PREFIX, RedisServer, RespError
    with RedisServer() as srv:
        key = KEY_PREFIX + _name("rd")
        assert srv.call("HSET", key, "v", "1") == 1
        srv.restart(hard=True)
        assert srv.call("HGET", key, "v") == b"1"
        srv.restart()
        assert srv.call("HGET", key, "v") == b"1"
        assert srv.call("HGET", key, "v", user=srv.user, password=srv.password) == b"1"
        with pytest.raises(RespError, match="NOPERM"):
            srv.call("HGET", "elsewhere", "v", user=srv.user, password=srv.password)
        with pytest.raises(RespError, match="NOPERM"):
            srv.call("DEL", key, user=srv.user, password=srv.password)
        srv.pause()
        try:
            with pytest.raises(OSError):
                srv.call("PING", timeout=1)
        finally:
            srv.resume()
        assert srv.call("PING") == "PONG"
    with RedisServer(aof=False) as srv:
        srv.call("HSET", KEY_PREFIX + "x", "v", "1")
        srv.restart(hard=True)
        assert srv.call("EXISTS", KEY_PREFIX + "x") == 0


# -- kube-apiserver -------------------------------------------------------------

def test_kube_apiserver_rbac_credentials_conditions_restart_and_pauses(kube_apiserver) -> None:
    """The k8s:// store's test server (tests/harness/kube_apiserver.py): on
    loopback only, ready within its bound; the RBAC it was given (s3lect:
    get, create, update on leases; noupdate: no update; nobody: nothing; an
    unknown token: 401); a client certificate of its CA authenticates as its
    CN; the two conditions the store relies on (409 reason AlreadyExists for
    a create of an existing Lease, 409 reason Conflict for a stale
    resourceVersion); the written files (kubeconfig, in-cluster directory);
    a restart, soft or hard, keeps the Lease; a paused API server and a
    paused etcd behind it do not answer, and both come back."""
    from harness.kube_apiserver import LEASES

    srv = kube_apiserver
    _loopback_only(srv.port)
    assert 0 < srv.start_seconds < 90, srv.start_seconds
    print(f"\nkube-apiserver started (with its etcd) in {srv.start_seconds:.2f} s")
    ns, name = srv.namespace, _name("lease")
    base = LEASES.format(ns=ns)

    def lease(holder: str, rv: str | None = None) -> dict:
        meta = {"name": name, "namespace": ns, **({"resourceVersion": rv} if rv else {})}
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 6}}

    status, created = srv.request("POST", base, lease("a"), user="s3lect")
    assert status == 201, (status, created)
    rv = created["metadata"]["resourceVersion"]
    status, ans = srv.request("POST", base, lease("b"), user="s3lect")
    assert (status, ans.get("reason")) == (409, "AlreadyExists"), (status, ans)
    status, upd = srv.request("PUT", f"{base}/{name}", lease("b", rv), user="s3lect")
    assert status == 200 and upd["spec"]["holderIdentity"] == "b", (status, upd)
    status, ans = srv.request("PUT", f"{base}/{name}", lease("c", rv), user="s3lect")
    assert (status, ans.get("reason")) == (409, "Conflict"), (status, ans)
    assert srv.request("GET", f"{base}/{name}", user="s3lect")[0] == 200
    assert srv.request("DELETE", f"{base}/{name}", user="s3lect")[0] == 403  # not granted

    status, ans = srv.request("PUT", f"{base}/{name}", lease("x", upd["metadata"]["resourceVersion"]),
                              user="noupdate")
    assert status == 403 and ans.get("reason") == "Forbidden", (status, ans)
    assert 'cannot update resource "leases"' in ans.get("message", ""), ans
    assert srv.request("GET", f"{base}/{name}", user="noupdate")[0] == 200
    assert srv.request("GET", f"{base}/{name}", user="nobody")[0] == 403
    assert srv.request("GET", f"{base}/{name}", token=secrets.token_hex(16))[0] == 401
    assert srv.request("GET", f"{base}/{name}", user="s3lect-2")[0] == 200  # a second token
    # Another namespace has no Role until add_namespace() gives it one.
    other = _name("ns")
    srv._must("POST", "/api/v1/namespaces",
              {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    assert srv.request("GET", f"{LEASES.format(ns=other)}/{name}", user="s3lect")[0] == 403
    srv.add_namespace(other)
    assert srv.request("GET", f"{LEASES.format(ns=other)}/{name}", user="s3lect")[0] == 404

    cert = srv.client_cert("s3lect")
    assert srv.request("GET", f"{base}/{name}", cert=cert)[0] == 200
    assert srv.request("GET", f"{base}/{name}", cert=srv.client_cert("nobody"))[0] == 403

    d = Path(srv.workdir) / "client"
    kc = srv.kubeconfig(d / "kubeconfig", user="noupdate").read_text()
    assert f'server: "{srv.endpoint}"' in kc and srv.tokens["noupdate"] in kc
    assert "current-context: s3lect-test" in kc and f"namespace: {ns}" in kc
    kc = srv.kubeconfig(d / "kubeconfig-cert", cert=True).read_text()
    assert "client-certificate:" in kc and srv.tokens["s3lect"] not in kc
    env = srv.in_cluster(d / "sa")
    assert env == {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(srv.port),
                   "S3LECT_K8S_SA_DIR": str(d / "sa")}
    assert (d / "sa" / "token").read_text() == srv.tokens["s3lect"]
    assert (d / "sa" / "namespace").read_text() == ns
    assert (d / "sa" / "ca.crt").read_bytes() == Path(srv.ca_file).read_bytes()
    assert srv.env()["S3LECT_TEST_LOCK_PREFIX"] == f"k8s://{ns}/"

    for hard in (False, True):
        took = srv.restart(hard=hard)
        got = srv.get_lease(name)
        assert got is not None and got["spec"]["holderIdentity"] == "b", got
        print(f"kube-apiserver {'hard ' if hard else ''}restart: ready again in {took:.2f} s")

    srv.pause()
    try:
        with pytest.raises(OSError):
            srv.request("GET", f"{base}/{name}", timeout=1)
    finally:
        srv.resume()
    assert srv.get_lease(name) is not None

    srv.pause_etcd()
    try:
        t0 = time.monotonic()
        try:
            status, _ = srv.request("GET", f"{base}/{name}", timeout=3)
        except OSError:
            status = 0  # no answer in time
        assert status != 200, "a Lease was read while etcd was paused"
        assert time.monotonic() - t0 < 10
    finally:
        srv.resume_etcd()
    from harness.wait import wait_for
    wait_for(lambda: srv.ready() and srv.get_lease(name) is not None, 30,
             "the API server to answer again after etcd's pause")
    srv.put_lease(name, {"holderIdentity": "", "leaseDurationSeconds": 1})
    assert srv.get_lease(name)["spec"]["holderIdentity"] == ""
    assert srv.delete_lease(name) and srv.get_lease(name) is None


def test_kube_apiserver_audit_log_names_who_wrote_a_lease() -> None:
    """KubeApiServer(audit=True): every lease request in the audit log with
    its user (how a test tells which credentials a client sent)."""
    from harness.kube_apiserver import LEASES, KubeApiServer
    from harness.wait import wait_for

    with KubeApiServer(audit=True) as srv:
        name = _name("audited")
        srv.put_lease(name, {"holderIdentity": "a"})
        assert srv.request("GET", f"{LEASES.format(ns=srv.namespace)}/{name}",
                           user="s3lect-2")[0] == 200
        events = wait_for(lambda: [e for e in srv.audit_events()
                                   if e.get("objectRef", {}).get("name") == name], 10,
                          "the lease's audit events")
        users = {(e["verb"], e["user"]["username"]) for e in events}
        assert ("create", "admin") in users and ("get", "s3lect") in users, users
        assert not any(tok in srv.audit_log.read_text() for tok in srv.tokens.values())

# SPDX-License-Identifier: Apache-2.0
"""The servers of the table, DNS, GCS, Azure and etcd stores for the bindings' suites.

    python3 tests/harness/store_servers.py [--cli PATH] -- CMD [ARGS...]

starts DynamoDB Local (dynamodb_local.py), PostgreSQL (pgserver.py) and moto
(servers.MotoServer, for Route 53), creates a hosted zone in moto, runs CMD
with the variables below added to its environment, stops every server (even
on failure or a signal) and exits with CMD's status. If a server cannot
start, it exits with status 1 and the server's log, before running CMD.

Why not nest servers.py with-dynamodb / with-postgres / with-moto around
scripts/with-minio: with-dynamodb and with-moto export AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (and with-moto S3LECT_TEST_ENDPOINT too), so whichever
wrapper is innermost overrides the others' credentials: MinIO rejects
DynamoDB Local's keys, and DynamoDB Local rejects MinIO's (it accepts access
key ids of letters and digits only). This wrapper exports only names that
nothing else uses, so it nests with scripts/with-minio in either order:

    AWS_ENDPOINT_URL_DYNAMODB              DynamoDB Local's endpoint
    S3LECT_TEST_DYNAMODB_ACCESS_KEY_ID     credentials DynamoDB Local accepts
    S3LECT_TEST_DYNAMODB_SECRET_ACCESS_KEY (pass them to the elector explicitly)
    S3LECT_PG_DSN                          postgres://s3lect@127.0.0.1:PORT/s3lect
    AWS_ENDPOINT_URL_ROUTE_53              moto's endpoint
    S3LECT_TEST_ROUTE53_ZONE               the hosted zone's id (letters and digits)
    S3LECT_TEST_ROUTE53_DOMAIN             its name, without the final dot
    S3LECT_TEST_GCS_ENDPOINT               fake-gcs-server's endpoint (http, loopback: no token)
    S3LECT_TEST_GCS_BUCKET                 its bucket, for gs://BUCKET/OBJECT locks
    AZURE_STORAGE_CONNECTION_STRING        Azurite's (azurite.py): account key and blob endpoint
    S3LECT_TEST_AZURE_LOCK_PREFIX          az://devstoreaccount1/s3lect-test/ (append a name)
    S3LECT_TEST_ETCD_ENDPOINT              etcd's client URL (http://127.0.0.1:PORT, no auth)
    S3LECT_TEST_REDIS_LOCK_PREFIX          redis://s3lect@127.0.0.1:PORT/s3lect/ (append a key)
    S3LECT_REDIS_PASSWORD                  the password of that ACL user (redis_server.py)
    S3LECT_CLI                             the s3lect CLI (--cli), to run init-store
    S3LECT_TEST_STORES                     the kinds above, in the registry's order
                                           (dynamodb,postgres,route53,gcs,azure,etcd,redis)

The stores are the registry's (tests/harness/stores.py) but for those in
ELSEWHERE: a registry store in neither SERVED nor ELSEWHERE stops this
wrapper (status 1), and the Go and Lua store tests fail on a kind of
S3LECT_TEST_STORES they have no target for, so a new store of the registry
is a new server here and a target there (tests/cli/test_store_lists.py
checks all three lists without running anything).

No table is created: the tests run `$S3LECT_CLI init-store URL` for theirs.
create_hosted_zone() is also used by the Python suite, whose moto comes
from the `moto` fixture.
"""

from __future__ import annotations

import os
import secrets
import sys
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.servers import ServerStartError, make_server, run_child  # noqa: E402
    from harness.stores import STORES  # noqa: E402
else:
    from .servers import ServerStartError, make_server, run_child
    from .stores import STORES

R53_NS = "{https://route53.amazonaws.com/doc/2013-04-01/}"


def create_hosted_zone(endpoint: str, name: str, timeout: float = 15.0) -> str:
    """Creates hosted zone `name` in moto's Route 53 at endpoint and returns
    its id (the last element of HostedZone.Id). Plain urllib, so that it
    needs no boto3: moto checks no signature, but picks the service from
    the credential scope of the Authorization header, hence the dummy one."""
    if not name.endswith("."):
        name += "."
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<CreateHostedZoneRequest xmlns="https://route53.amazonaws.com/doc/2013-04-01/">'
        f"<Name>{name}</Name><CallerReference>s3lect-{secrets.token_hex(8)}</CallerReference>"
        "</CreateHostedZoneRequest>"
    ).encode()
    req = urllib.request.Request(
        endpoint.rstrip("/") + "/2013-04-01/hostedzone",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/xml",
            "Authorization": "AWS4-HMAC-SHA256 Credential=s3lecttest/20260101/us-east-1/route53/"
            "aws4_request, SignedHeaders=host, Signature=00",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read()
    except urllib.error.HTTPError as e:
        raise RuntimeError(
            f"CreateHostedZone {name} at {endpoint}: HTTP {e.code}: {e.read()[:2000]!r}"
        ) from e
    zid = ET.fromstring(text).findtext(f"{R53_NS}HostedZone/{R53_NS}Id")
    if not zid:
        raise RuntimeError(f"CreateHostedZone {name} at {endpoint}: no HostedZone.Id in {text[:2000]!r}")
    return zid.rsplit("/", 1)[-1]


# The registry's stores the bindings' main suites cover without this wrapper.
ELSEWHERE = {
    "s3": "scripts/with-minio's MinIO (the bindings' main suites)",
    "file": "no server (the bindings' main suites)",
}


def _route53(moto) -> dict[str, str]:
    domain = f"s3lect-{secrets.token_hex(4)}.example.com"
    zone = create_hosted_zone(moto.endpoint, domain)
    return dict(AWS_ENDPOINT_URL_ROUTE_53=moto.endpoint, S3LECT_TEST_ROUTE53_ZONE=zone,
                S3LECT_TEST_ROUTE53_DOMAIN=domain)


# Per store of the registry (its kind): the server (servers.make_server's
# kind) and the variables the drivers read, from the started server.
SERVED = {
    "dynamodb": ("dynamodb", lambda s: dict(
        AWS_ENDPOINT_URL_DYNAMODB=s.endpoint, S3LECT_TEST_DYNAMODB_ACCESS_KEY_ID=s.access_key,
        S3LECT_TEST_DYNAMODB_SECRET_ACCESS_KEY=s.secret_key)),
    "postgres": ("postgres", lambda s: dict(S3LECT_PG_DSN=s.dsn)),
    "route53": ("moto", _route53),
    "gcs": ("gcs", lambda s: dict(S3LECT_TEST_GCS_ENDPOINT=s.endpoint,
                                  S3LECT_TEST_GCS_BUCKET=s.bucket)),
    "azure": ("azure", lambda s: dict(
        AZURE_STORAGE_CONNECTION_STRING=s.env()["AZURE_STORAGE_CONNECTION_STRING"],
        S3LECT_TEST_AZURE_LOCK_PREFIX=s.lock_prefix())),
    "etcd": ("etcd", lambda s: dict(S3LECT_TEST_ETCD_ENDPOINT=s.endpoint)),
    "redis": ("redis", lambda s: dict(S3LECT_TEST_REDIS_LOCK_PREFIX=s.lock_prefix,
                                      S3LECT_REDIS_PASSWORD=s.password)),
}


def served_kinds() -> list[str]:
    """The registry's stores this wrapper serves, in its order; raises
    RuntimeError naming a registry store it neither serves nor leaves to
    the main suites."""
    missing = [s.kind for s in STORES if s.kind not in SERVED and s.kind not in ELSEWHERE]
    if missing:
        raise RuntimeError(f"the registry's store(s) {', '.join(missing)} (tests/harness/stores.py) "
                           "have no server here: add them to SERVED")
    return [s.kind for s in STORES if s.kind in SERVED]


def main(argv: list[str]) -> int:
    cli = None
    if len(argv) >= 2 and argv[0] == "--cli":
        cli, argv = argv[1], argv[2:]
    if len(argv) < 2 or argv[0] != "--":
        print("usage: store_servers.py [--cli PATH] -- CMD [ARGS...]", file=sys.stderr)
        return 2
    cmd = argv[1:]
    if cli is not None and not os.access(cli, os.X_OK):
        print(f"store_servers: --cli {cli}: not an executable file (build the CLI first: "
              "scripts/build)", file=sys.stderr)
        return 1
    servers = []
    try:
        env = dict(os.environ)
        said = []
        try:
            kinds = served_kinds()
            for kind in kinds:
                server_kind, exported = SERVED[kind]
                srv = make_server(server_kind)
                servers.append(srv)
                srv.start()
                env.update(exported(srv))
                said.append(f"{kind}: {srv.name} on port {srv.port}")
        except (ServerStartError, RuntimeError, OSError) as e:
            print(f"store_servers: {e}", file=sys.stderr)
            return 1
        env["S3LECT_TEST_STORES"] = ",".join(kinds)
        if cli is not None:
            env["S3LECT_CLI"] = str(Path(cli).resolve())
        print(f"store_servers: {'; '.join(said)}", file=sys.stderr)
        return run_child("store_servers", cmd, env)
    finally:
        for srv in reversed(servers):
            try:
                srv.stop()
            except Exception as e:  # noqa: BLE001 - stop the others
                print(f"store_servers: stopping {srv.name}: {e}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

# SPDX-License-Identifier: Apache-2.0
"""The test side's one list of stores (issue 40 item 1).

Every suite, the chaos run and the bench take their store lists from here;
`tests/cli/test_cli_stores.py` fails when a store that `s3lect stores --json`
reports as compiled in has no row here, or a row names a scheme the CLI does
not know. A new store is a row here (and its server in the harness), not an
edit of every list.

kind:    the name suites, the chaos run and the bench use ("gcs")
scheme:  its lock URL scheme, as `s3lect stores --json` gives it ("gs")
server:  what the harness runs for it (module.Class under tests/harness, or
         a word for what needs none)
suites:  where it is tested: "stores" (tests/stores' backend fixture: real
         nodes of `s3lect run` against its server), "cas" (the servers that
         enforce compare-and-set there), "python" (tests/python/test_stores.py),
         "chaos" (the five-node chaos run), "cost" (bench/run cost-stores)
chaos:   its name in the chaos run (tests/chaos/chaos_lib.py BACKENDS)
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Store:
    kind: str
    scheme: str
    server: str
    suites: frozenset[str]
    chaos: str = ""


def _s(*names: str) -> frozenset[str]:
    return frozenset(names)


STORES: tuple[Store, ...] = (
    Store("s3", "s3", "servers.MinioServer", _s("chaos", "cost"), chaos="minio"),
    Store("file", "file", "none: the embedded file store", _s()),
    # Tests only: one process's memory (tests/c/test_vclock.c, the bindings' helpers).
    Store("mem", "mem", "none: in the test's own process", _s()),
    Store("dynamodb", "dynamodb", "dynamodb_local.DynamoDBLocal",
          _s("stores", "cas", "python", "chaos", "cost"), chaos="dynamodb"),
    Store("postgres", "postgres", "pgserver.PostgresServer",
          _s("stores", "cas", "python", "chaos", "cost"), chaos="postgres"),
    Store("mysql", "mysql", "mariadb_server.MariaDBServer",
          _s("stores", "cas", "python", "chaos", "cost"), chaos="mysql"),
    # moto's Route 53 does not enforce compare-and-set (tests/stores/conftest.py).
    Store("route53", "route53", "servers.MotoServer", _s("stores", "python", "cost")),
    Store("gcs", "gs", "fake_gcs.FakeGCS", _s("stores", "cas", "python", "chaos", "cost"),
          chaos="gcs"),
    Store("azure", "az", "azurite.AzuriteServer", _s("stores", "cas", "python", "chaos", "cost"),
          chaos="azure"),
    Store("etcd", "etcd", "etcd.EtcdServer", _s("stores", "cas", "python", "chaos", "cost"),
          chaos="etcd"),
    Store("redis", "redis", "redis_server.RedisServer",
          _s("stores", "cas", "python", "chaos", "cost"), chaos="redis"),
    # The bench's cost run counts its requests at a proxy that terminates TLS
    # with a certificate of the harness's CA (bench/lib/storeproxy.py).
    Store("k8s", "k8s", "kube_apiserver.KubeApiServer",
          _s("stores", "cas", "python", "chaos", "cost"), chaos="k8s"),
)


def kinds(suite: str) -> list[str]:
    """The kinds tested by suite, in the registry's order."""
    return [s.kind for s in STORES if suite in s.suites]


def by_scheme(scheme: str) -> Store | None:
    return next((s for s in STORES if s.scheme == scheme), None)

# SPDX-License-Identifier: Apache-2.0
"""Every store of the registry (tests/harness/stores.py) has a backend in the
one family (tests/harness/backends.py) that the chaos run and the bench use,
a server in store_servers.py, and a target in the Go and Lua store tests
(issue 40 items 1 and 4). Fast: nothing is started."""

from __future__ import annotations

import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from harness import store_servers  # noqa: E402
from harness.backends import BACKENDS, FAMILY, Backend  # noqa: E402
from harness.stores import STORES, kinds  # noqa: E402

# The registry's stores that need no server (so no backend).
SERVERLESS = {"file"}


def test_every_registry_store_has_a_backend():
    want = {s.kind for s in STORES} - SERVERLESS
    assert set(FAMILY) == want, f"backends {sorted(FAMILY)} vs the registry's {sorted(want)}"
    for kind, cls in FAMILY.items():
        assert cls.kind == kind and issubclass(cls, Backend)
        assert cls.protocol in ("http", "postgres", "redis"), (kind, cls.protocol)
        for method in ("make_server", "lock_url"):
            assert getattr(cls, method) is not getattr(Backend, method), f"{kind}: no {method}"


def test_the_chaos_run_and_the_bench_take_the_registrys_stores():
    chaos = {s.chaos: s.kind for s in STORES if "chaos" in s.suites}
    assert set(BACKENDS) == set(chaos), f"chaos backends {sorted(BACKENDS)} vs {sorted(chaos)}"
    for name, cls in BACKENDS.items():
        assert cls.name == name and cls.kind == chaos[name]
        # The chaos run's faults: a restart of the server with its own kind.
        assert cls.restart_kind == f"{name}_restart", (name, cls.restart_kind)
        assert cls.restart is not Backend.restart, f"{name}: no restart fault"
        assert (cls.answer is None) == (cls.protocol != "http"), name
    assert set(kinds("cost")) <= set(FAMILY), "a bench store without a backend"


class _Server:
    port = 4242
    bucket = "bkt"
    user = "u"
    password = "pw"
    region = "us-east-1"

    def lock_prefix(self) -> str:
        return "az://acct/ctr/"


def test_lock_urls_name_the_proxy_or_the_folder():
    """The chaos run's lock names (folder chaos/, objects .json); stores whose
    URL names the port get the proxy's, the others --endpoint."""
    got = {}
    for kind, cls in FAMILY.items():
        if kind == "route53":
            continue  # its zone comes from start()
        b = cls(server=_Server(), folder="chaos/", suffix=".json")
        got[kind] = (b.lock_url("k", 5555), b.node_args(5555))
        assert not b.owned
    assert got["s3"] == ("s3://bkt/chaos/k.json", ["--endpoint", "http://127.0.0.1:5555"])
    assert got["gcs"][0] == "gs://bkt/chaos/k.json"
    assert got["azure"][0] == "az://acct/ctr/chaos/k.json"
    assert got["etcd"] == ("etcd://127.0.0.1:5555/chaos/k", [])
    assert got["postgres"] == ("postgres://s3lect@127.0.0.1:5555/s3lect?key=k", [])
    assert re.fullmatch(r"redis://u@127\.0\.0\.1:5555/.*chaos/k", got["redis"][0]), got["redis"]
    assert got["redis"][1] == []
    assert re.fullmatch(r"dynamodb://s3lect-[0-9a-f]{8}/k", got["dynamodb"][0]), got["dynamodb"]


def test_store_servers_serves_every_registry_store_but_the_main_suites():
    served = store_servers.served_kinds()
    want = [s.kind for s in STORES if s.kind not in store_servers.ELSEWHERE]
    assert served == want
    assert set(store_servers.ELSEWHERE) | set(served) == {s.kind for s in STORES}


def test_the_go_and_lua_store_tests_have_a_target_per_served_store():
    served = set(store_servers.served_kinds())
    go = (ROOT / "bindings/go/stores_test.go").read_text()
    table = go.split("var storeTargets = map[string]func(*testing.T) storeTarget{", 1)[1]
    table = table.split("\n}\n", 1)[0]
    assert set(re.findall(r'^\t"([a-z0-9]+)":', table, re.M)) == served, table
    lua = (ROOT / "bindings/lua/tests/test_stores.lua").read_text()
    assert set(re.findall(r"^function targets\.([a-z0-9_]+)\(\)", lua, re.M)) == served
    # Both iterate over store_servers.py's list.
    assert 'os.Getenv("S3LECT_TEST_STORES")' in go
    assert 'os.getenv("S3LECT_TEST_STORES")' in lua

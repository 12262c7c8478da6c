# SPDX-License-Identifier: Apache-2.0
"""Every store of the registry (tests/harness/stores.py) has a backend in the
one family (tests/harness/backends.py) that the store suite, the chaos run,
the bench and store_servers.py use, and what store_servers.py tells the Go
and Lua store tests of it (S3LECT_TEST_STORES) is what they can use; neither
has per-store targets (issue 40 items 1 and 4). Fast: nothing is started."""

from __future__ import annotations

import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import pytest  # noqa: E402

from harness import store_servers  # noqa: E402
from harness.backends import BACKENDS, FAMILY, Backend  # noqa: E402
from harness.stores import STORES, by_scheme, kinds  # noqa: E402

# The registry's stores that need no server (so no backend).
SERVERLESS = {"file", "mem"}


def test_every_registry_store_has_a_backend():
    want = {s.kind for s in STORES} - SERVERLESS
    assert set(FAMILY) == want, f"backends {sorted(FAMILY)} vs the registry's {sorted(want)}"
    for kind, cls in FAMILY.items():
        assert cls.kind == kind and issubclass(cls, Backend)
        # "tls": an opaque TLS stream (the API server's): proxies forward its bytes.
        assert cls.protocol in ("http", "postgres", "redis", "mysql", "tls"), (kind, cls.protocol)
        for method in ("make_server", "lock_url"):
            assert getattr(cls, method) is not getattr(Backend, method), f"{kind}: no {method}"
        # The store suite shares tests/conftest.py's server, or starts its own.
        assert cls.fixture in ("", *_session_fixtures()), f"{kind}: no fixture {cls.fixture!r}"


def _session_fixtures() -> set[str]:
    text = (TESTS / "conftest.py").read_text()
    return set(re.findall(r'@pytest\.fixture\(scope="session"\)\ndef (\w+)\(', text))


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
    endpoint = "http://127.0.0.1:4242"
    blob_endpoint = "http://127.0.0.1:4242/acct"
    access_key = "AKID"
    secret_key = "SECRET"
    account_key = "a2V5"
    account = "acct"
    namespace = "ns"  # the API server's test namespace
    workdir = "/nonexistent"

    def kubeconfig(self, path, server: str | None = None) -> str:  # noqa: ARG002
        return str(path)

    def lock_prefix(self) -> str:
        return "az://acct/ctr/"

    def env(self) -> dict[str, str]:
        return dict(AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key,
                    AWS_REGION=self.region, AWS_ENDPOINT_URL_S3=self.endpoint)


def _fake(kind: str, **kw) -> Backend:
    b = FAMILY[kind](server=_Server(), **kw)
    if kind == "route53":  # what start() makes
        b.zone_id, b.zone_name = "Z123", "z.example.com."
    return b


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
    # The API server's URL names no port: a node's proxy is in its own kubeconfig.
    assert got["k8s"] == ("k8s://ns/k?kubeconfig=/nonexistent/kubeconfig-s3lect-5555", [])
    assert FAMILY["k8s"](server=_Server()).lock_url("k", 4242) == "k8s://ns/k"


def test_store_servers_serves_every_registry_store_but_the_main_suites():
    served = store_servers.served_kinds()
    want = [s.kind for s in STORES if s.kind not in store_servers.ELSEWHERE]
    assert served == want and set(served) <= set(FAMILY)
    assert set(store_servers.ELSEWHERE) | set(served) == {s.kind for s in STORES}


def _library_options() -> set[str]:
    text = (ROOT / "libs3lect/src/config/config.c").read_text()
    names = set(re.findall(r'^\s*\[S3LECT_OPT_\w+\] = \{"(\w+)"', text, re.M))
    assert {"endpoint", "access_key_id", "lock"} <= names, names
    return names


@pytest.mark.parametrize("kind", store_servers.served_kinds())
def test_store_servers_tells_the_bindings_a_lock_options_and_variables(kind):
    """S3LECT_TEST_STORES's lines of each served store (with a stand-in
    server): a lock URL of the store's scheme with {key} once, options the
    library has (credentials never as variables: scripts/with-minio's are
    MinIO's), staggered where the server does not enforce compare-and-set."""
    b = _fake(kind)
    lines, env = store_servers.settings(kind, b)
    got: dict[str, list] = {}
    for what, name, value in lines:
        got.setdefault(what, []).append((name, value))
    (_, lock), = got["lock"]
    assert lock.count("{key}") == 1 and "s3lectkeyz9" not in lock, lock
    store = next(s for s in STORES if s.kind == kind)
    assert by_scheme(lock.split("://", 1)[0]) == store, (kind, lock)
    assert got["staggered"] == [("-", "0" if b.cas else "1")]
    options = dict(got.get("option", []))
    assert set(options) <= _library_options(), options
    assert dict(got.get("env", [])) == env
    assert not {n for n in env if n.startswith("AWS_")}, env
    if not b.url_port:
        assert options["endpoint"].startswith("http://127.0.0.1:4242"), options
    if b.aws:
        assert options["access_key_id"] == "AKID" and options["secret_access_key"] == "SECRET"


def test_the_go_and_lua_store_tests_have_no_per_store_targets():
    """Both iterate over store_servers.py's S3LECT_TEST_STORES and take each
    store's lock URL and options from it: no lock URL of a served store is
    written in them, but each one's missing-table test (Go: DynamoDB's)."""
    go = (ROOT / "bindings/go/stores_test.go").read_text()
    lua = (ROOT / "bindings/lua/tests/test_stores.lua").read_text()
    assert 'os.Getenv("S3LECT_TEST_STORES")' in go
    assert 'os.getenv("S3LECT_TEST_STORES")' in lua
    for text, allowed in ((go, {"dynamodb"}), (lua, set())):
        for kind in store_servers.served_kinds():
            scheme = next(s.scheme for s in STORES if s.kind == kind)
            if kind not in allowed:
                assert f"{scheme}://" not in text, f"a {scheme}:// lock URL written in a store test"
        assert "storeTargets" not in text and "targets." not in text

# SPDX-License-Identifier: Apache-2.0
"""What is particular to the k8s:// store (a Kubernetes Lease), against a real
kube-apiserver (tests/harness/kube_apiserver.py: its own etcd, static tokens,
RBAC, a CA that also signs client certificates).

  - credentials: a kubeconfig with a token, with a client certificate, with
    an exec plugin (one run for every store handle of a process: check-store
    opens several; a run again before the credential expires); the pod's
    service account through S3LECT_K8S_SA_DIR, its token file replaced while
    a node runs (read again after a 401 at once; read again within a minute
    without one: the new token's user may not update, and the leader's
    renewals say so);
  - errors: 401 names the source and never the token; 403 names the verb
    and the resource to grant;
  - whoami: the source, never the token;
  - the Lease's spec as client-go reads it, and Leases written by a
    client-go-shaped writer (the admin here): a foreign holder is followed
    with client-go's timing, its stale s3lect record's term kept.

The generic store suite, check-store's and the bindings' runs on k8s come
from the k8s row of tests/harness/stores.py; the API server's faults are in
test_k8s_faults.py, client-go itself in tests/interop/test_k8s_clientgo.py.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from harness.cli import FAST, Node, run, status_json, wait_for
from harness.kube_apiserver import KubeApiServer

LEASE_S = 3.0
SLACK = 4.0  # a loaded 2-core machine


@pytest.fixture(scope="module")
def kube(kube_apiserver, s3lect_bin) -> KubeApiServer:
    r = run([str(s3lect_bin), "stores", "--json"], env=dict(os.environ), timeout=30)
    assert r.returncode == 0, r.stderr
    schemes = {s.get("scheme") for s in json.loads(r.stdout)}
    assert "k8s" in schemes, f"{s3lect_bin} has no k8s:// store (`s3lect stores --json`)"
    return kube_apiserver


def _env(**add: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "S3LECT_", "KUBE")) or k == "S3LECT_NEW_LOCK_WAIT"}
    env.update(add)
    return env


def _lock(kube: KubeApiServer, tag: str) -> tuple[str, str]:
    name = f"{tag}-{secrets.token_hex(4)}"
    return name, f"k8s://{kube.namespace}/{name}"


def _rfc3339_micro(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _holder(kube: KubeApiServer, name: str) -> str | None:
    lease = kube.get_lease(name)
    return None if lease is None else lease.get("spec", {}).get("holderIdentity")


# ---------------------------------------------------------------------------
# credentials


def test_kubeconfig_token_elects_and_writes_clientgos_spec(kube, s3lect_bin, tmp_path):
    kc = kube.kubeconfig(tmp_path / "kc")
    name, lock = _lock(kube, "token")
    n = Node(s3lect_bin, tmp_path, lock, "node-a", env=_env(KUBECONFIG=str(kc)))
    try:
        wait_for(n.leading, 30, f"node-a leads {lock}:\n{n.text()}")
        lease = kube.get_lease(name)
        spec, ann = lease["spec"], lease["metadata"]["annotations"]
        assert spec["holderIdentity"] == "node-a"
        # lease 3 s; s3lect run's hold is at most the lease: 3 s, rounded up
        assert spec["leaseDurationSeconds"] == 3, spec
        assert spec["leaseTransitions"] == 0 and spec["acquireTime"], spec
        assert len(spec["renewTime"]) == len("2026-12-07T01:02:03.123456Z"), spec
        rec = json.loads(ann["s3lect.io/record"])
        assert rec["leaderID"] == "node-a" and rec["term"] >= 1
        assert ann["s3lect.io/stamp"] == f'{spec["renewTime"]} node-a'
        first = spec["renewTime"]
        wait_for(lambda: kube.get_lease(name)["spec"]["renewTime"] != first, 10,
                 "a renewal")
        renewed = kube.get_lease(name)["spec"]
        assert renewed["acquireTime"] == spec["acquireTime"], "a renewal keeps acquireTime"
        n.terminate()
        assert n.wait(15) == 0, n.text()
        spec = kube.get_lease(name)["spec"]
        assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1, spec
        code, st = status_json(s3lect_bin, lock, _env(KUBECONFIG=str(kc)))
        assert st["released"] is True, st
    finally:
        n.stop()


def test_check_store_passes_with_token_and_client_certificate(kube, s3lect_bin, tmp_path):
    for cert in (False, True):
        kc = kube.kubeconfig(tmp_path / f"kc-{cert}", cert=cert)
        _, lock = _lock(kube, "check")
        t0 = time.monotonic()
        r = run([str(s3lect_bin), "check-store", lock], _env(KUBECONFIG=str(kc)), timeout=120)
        assert r.returncode == 0, f"cert={cert}: {r.stdout}\n{r.stderr}"
        assert time.monotonic() - t0 < 60
        w = run([str(s3lect_bin), "whoami", lock, "--json"], _env(KUBECONFIG=str(kc)))
        assert w.returncode == 0, w.stderr
        who = json.loads(w.stdout)
        assert who["usable"] is True and who["principal"] == "s3lect", who
        assert ("client certificate" in who["source"]) == cert, who
        assert kube.tokens["s3lect"] not in w.stdout + w.stderr + r.stdout + r.stderr


PLUGIN = """#!/bin/sh
echo run >> {count}
case "$KUBERNETES_EXEC_INFO" in *'"apiVersion":"client.authentication.k8s.io/v1"'*) ;; *) exit 7;; esac
exp=$(python3 -c 'import datetime,sys; print((datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=int(sys.argv[1]))).strftime("%Y-%m-%dT%H:%M:%SZ"))' {life})
printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"%s","expirationTimestamp":"%s"}}}}' "$PLUG_TOKEN" "$exp"
"""


def _exec_kubeconfig(kube: KubeApiServer, tmp: Path, life: int) -> tuple[Path, Path]:
    count = tmp / f"runs-{life}"
    plug = tmp / f"plug-{life}.sh"
    plug.write_text(PLUGIN.format(count=count, life=life))
    plug.chmod(0o700)
    kc = tmp / f"kc-exec-{life}"
    kc.write_text("\n".join([
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: test",
        "  cluster:",
        f"    server: {kube.endpoint}",
        f"    certificate-authority: {kube.ca_file}",
        "contexts:",
        "- name: test",
        "  context: {cluster: test, user: plug}",
        "current-context: test",
        "users:",
        "- name: plug",
        "  user:",
        "    exec:",
        "      apiVersion: client.authentication.k8s.io/v1",
        f"      command: ./{plug.name}",
        "      env:",
        "      - name: PLUG_TOKEN",
        f"        value: \"{kube.tokens['s3lect']}\"",
        "      interactiveMode: Never",
        "",
    ]))
    return kc, count


def _runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_exec_plugin_runs_once_per_process_and_again_before_expiry(kube, s3lect_bin, tmp_path):
    # check-store opens a store handle per racing writer: one plugin run for all
    kc, count = _exec_kubeconfig(kube, tmp_path, 3600)
    _, lock = _lock(kube, "exec")
    r = run([str(s3lect_bin), "check-store", lock], _env(KUBECONFIG=str(kc)), timeout=120)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert _runs(count) == 1, f"the plugin ran {_runs(count)} times in one process"
    assert kube.tokens["s3lect"] not in r.stdout + r.stderr
    w = run([str(s3lect_bin), "whoami", lock, "--json"], _env(KUBECONFIG=str(kc)))
    who = json.loads(w.stdout)
    assert who["usable"] and "exec plugin ./plug-3600.sh" in who["source"], who
    assert who["expires"], who
    assert kube.tokens["s3lect"] not in w.stdout + w.stderr
    # a credential of 12 s: run again before it expires, the leader never stops
    kc, count = _exec_kubeconfig(kube, tmp_path, 12)
    name, lock = _lock(kube, "exec-renew")
    n = Node(s3lect_bin, tmp_path, lock, "node-x", env=_env(KUBECONFIG=str(kc)))
    try:
        wait_for(n.leading, 30, f"node-x leads:\n{n.text()}")
        t0 = time.monotonic()
        wait_for(lambda: _runs(count) >= 3, 40, "two refreshes of a 12 s credential")
        assert n.leading() and n.terms() == n.terms()[:1], n.text()
        assert "lost leadership" not in n.text(), n.text()
        assert time.monotonic() - t0 < 30
    finally:
        n.stop()


def test_in_cluster_token_is_read_again_after_a_401(kube, s3lect_bin, tmp_path):
    sa = tmp_path / "sa"
    env = _env(**kube.in_cluster(sa))
    (sa / "token").write_text("not-a-valid-token")
    name, lock = _lock(kube, "incluster")
    n = Node(s3lect_bin, tmp_path, lock, "pod-1", env=env)
    try:
        n.wait_log("refused the credentials", 30)
        text = n.text()
        assert "in-cluster service account" in text and "not-a-valid-token" not in text, text
        (sa / "token").write_text(kube.tokens["s3lect"] + "\n")  # the kubelet's rotation
        t0 = time.monotonic()
        wait_for(n.leading, 20, f"pod-1 leads with the new token:\n{n.text()}")
        # well before the periodic re-read: the 401 made it read the file
        assert time.monotonic() - t0 < 15, n.text()
        assert _holder(kube, name) == "pod-1"
        w = run([str(s3lect_bin), "whoami", lock], env)
        assert w.returncode == 0 and "in-cluster service account" in w.stdout, w
        assert kube.tokens["s3lect"] not in w.stdout + w.stderr + n.text()
    finally:
        n.stop()


def test_in_cluster_token_is_read_again_within_a_minute(kube, s3lect_bin, tmp_path):
    """The token file rotated to a token that works but whose user may not
    update leases: the leader reads it within 60 s (no 401 prompts it),
    and its renewals then fail with 403 naming the verb."""
    sa = tmp_path / "sa"
    env = _env(**kube.in_cluster(sa))
    name, lock = _lock(kube, "rotate")
    n = Node(s3lect_bin, tmp_path, lock, "pod-2", env=env)
    try:
        wait_for(n.leading, 30, f"pod-2 leads:\n{n.text()}")
        (sa / "token").write_text(kube.tokens["noupdate"])
        t0 = time.monotonic()
        n.wait_log("grant verb update on leases", 60 + 2 * SLACK)
        assert time.monotonic() - t0 >= 0
        wait_for(lambda: "lost leadership" in n.text(), 10, f"pod-2 steps down:\n{n.text()}")
        assert kube.tokens["noupdate"] not in n.text()
    finally:
        n.stop()


# ---------------------------------------------------------------------------
# errors


def test_401_names_the_source_and_never_the_token(kube, s3lect_bin, tmp_path):
    kc = kube.kubeconfig(tmp_path / "kc")
    text = kc.read_text().replace(kube.tokens["s3lect"], "bogus-s3cr3t-token")
    kc.write_text(text)
    _, lock = _lock(kube, "e401")
    r = run([str(s3lect_bin), "status", lock], _env(KUBECONFIG=str(kc)))
    out = r.stdout + r.stderr
    assert r.returncode not in (0, 3), out
    assert "the API server refused the credentials" in out, out
    assert str(kc) in out and "the token in the kubeconfig" in out, out
    assert "bogus-s3cr3t-token" not in out


def test_403_names_the_verb_and_resource(kube, s3lect_bin, tmp_path):
    # noupdate may get and create: check-store's first update is refused
    kc = kube.kubeconfig(tmp_path / "kc-noupdate", user="noupdate")
    _, lock = _lock(kube, "e403")
    r = run([str(s3lect_bin), "check-store", lock], _env(KUBECONFIG=str(kc)), timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "grant verb update on leases (coordination.k8s.io) in namespace " \
           f"{kube.namespace} to noupdate" in out, out
    assert 'cannot update resource "leases"' in out, out
    # nobody may not even read
    kc = kube.kubeconfig(tmp_path / "kc-nobody", user="nobody")
    r = run([str(s3lect_bin), "status", lock], _env(KUBECONFIG=str(kc)))
    out = r.stdout + r.stderr
    assert "grant verb get on leases" in out, out
    assert kube.tokens["nobody"] not in out and kube.tokens["noupdate"] not in out


def test_missing_namespace_and_bad_kubeconfig_are_one_line_each(kube, s3lect_bin, tmp_path):
    # the admin: RBAC refuses a user without rights there before the lookup
    kc = kube.kubeconfig(tmp_path / "kc", user="admin")
    r = run([str(s3lect_bin), "check-store", "k8s://no-such-ns/x"], _env(KUBECONFIG=str(kc)),
            timeout=60)
    assert r.returncode != 0 and "namespace 'no-such-ns' does not exist" in r.stdout + r.stderr, r
    bad = tmp_path / "bad"
    bad.write_text("users:\n- name: x\n  user:\n    auth-provider:\n      name: gcp\n"
                   "contexts:\n- name: c\n  context: {cluster: k, user: x}\n"
                   "clusters:\n- name: k\n  cluster: {server: 'https://127.0.0.1:1'}\n"
                   "current-context: c\n")
    r = run([str(s3lect_bin), "status", "k8s://ns/x"], _env(KUBECONFIG=str(bad)))
    assert r.returncode != 0 and "use an exec credential plugin" in r.stderr, r


# ---------------------------------------------------------------------------
# Leases written by a client-go-shaped writer


def test_a_clientgo_holder_is_followed_with_clientgos_timing(kube, s3lect_bin, tmp_path):
    """The admin plays a client-go leader: spec only, renewTime every second.
    An s3lect node never takes it while it renews; once it stops, the node
    takes it within its lease (counted from its own sight of the last
    change) plus a poll; the stale s3lect record's term grows on."""
    kc = kube.kubeconfig(tmp_path / "kc")
    env = _env(KUBECONFIG=str(kc))
    name, lock = _lock(kube, "clientgo")
    # a previous s3lect holder left its record (term 41)
    stale = {"leaderID": "old", "leaderAddr": "", "lastUpdated": "2026-01-01T00:00:00.000Z",
             "term": 41, "leaseMs": 3000, "incarnation": "x"}
    ann = {"s3lect.io/record": json.dumps(stale),
           "s3lect.io/stamp": "2026-01-01T00:00:00.000000Z old"}

    def renew(transitions: int = 5) -> None:
        now = datetime.now(timezone.utc)
        kube.put_lease(name, {"holderIdentity": "go-leader", "leaseDurationSeconds": 3,
                              "acquireTime": _rfc3339_micro(now - timedelta(minutes=1)),
                              "renewTime": _rfc3339_micro(now),
                              "leaseTransitions": transitions}, annotations=ann)

    renew()
    code, st = status_json(s3lect_bin, lock, env)
    assert st["leaderID"] == "go-leader" and st["leaseMs"] == 3000 and st["term"] == 41, st
    assert st["live"] is True, st
    n = Node(s3lect_bin, tmp_path, lock, "node-c", env=env)
    try:
        end = time.monotonic() + 3 * LEASE_S
        while time.monotonic() < end:
            renew()
            assert not n.leading(), f"node-c took a renewed Lease:\n{n.text()}"
            time.sleep(1.0)
        assert _holder(kube, name) == "go-leader"
        stopped = time.monotonic()
        wait_for(n.leading, LEASE_S + 1.0 + SLACK + 5, f"node-c takes over:\n{n.text()}")
        took = time.monotonic() - stopped
        assert took >= LEASE_S - 1.0, f"took over {took:.1f} s after the last renewal"
        lease = kube.get_lease(name)
        assert lease["spec"]["holderIdentity"] == "node-c"
        assert lease["spec"]["leaseTransitions"] == 6, lease["spec"]
        assert n.terms() and n.terms()[-1] > 41, n.text()  # terms grow past the stale one
        # client-go's release (ReleaseOnCancel) reads as released
    finally:
        n.stop()
    now = _rfc3339_micro(datetime.now(timezone.utc))
    kube.put_lease(name, {"holderIdentity": "", "leaseDurationSeconds": 1,
                          "acquireTime": now, "renewTime": now, "leaseTransitions": 6})
    code, st = status_json(s3lect_bin, lock, env)
    assert st["released"] is True, st

# SPDX-License-Identifier: Apache-2.0
"""Fenced writes (issue 41) on real stores: MinIO, fake-gcs-server, Azurite
and the file store, through real `s3lect run` processes and the `s3lect
fence` CLI, with each pitfall shown closed: identical bytes rewritten by the
new leader, a delete then a zombie re-create, a same-term second holder.
And `s3lect check-store --data` on each of them.

The zombie is node A frozen (SIGSTOP of `s3lect run` and everything below
it) past its lease; node B takes over, and the writes A's command would
have sent on waking are sent with A's fence token (the one its command got
as S3LECT_FENCE_TOKEN).
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from harness.cli import DATA_CHECKS, Node, check_store_verdict, node_env, run, wait_for
from harness.freeze import freeze, thaw

pytestmark = pytest.mark.second_session

MAGIC = b"s3lect-fenced/1 "
FENCED = 75  # `s3lect fence`: a newer term (or another holder of ours) owns it
NOT_FOUND = 3
PRECONDITION = 4
# Lease 2 s: B takes over about 2.5 s after A froze.
TIMING = ["--lease-timeout", "2s", "--renew-interval", "500ms", "--renew-deadline", "1200ms",
          "--frequent-interval", "250ms", "--infrequent-interval", "500ms",
          "--max-clock-skew", "0"]
KINDS = ["s3", "gcs", "azure", "file"]


@dataclass
class FenceStore:
    kind: str
    env: dict[str, str]
    new_url: Callable[[str], str]  # a fresh object (or lock) URL named after its argument
    raw: Callable[[str], tuple[bytes | None, str]]  # stored bytes (None: absent), store version


def _cloud(kind: str, request) -> FenceStore:
    from conftest import make_backend
    b = make_backend(kind, request)
    srv = b.server

    def key_of(url: str, prefix: str) -> str:
        assert url.startswith(prefix), url
        return url[len(prefix):]

    if kind == "s3":
        def raw(url):
            r = srv.client().get(srv.bucket, key_of(url, f"s3://{srv.bucket}/"))
            return (r.body if r.status == 200 else None), r.etag or ""
    elif kind == "gcs":
        def raw(url):
            status, body, gen = srv.get_object(key_of(url, f"gs://{srv.bucket}/"))
            return (body if status == 200 else None), gen
    else:
        from harness.azurite import AzureError

        def raw(url):
            try:
                return srv.client().get_blob(srv.container, key_of(url, srv.lock_prefix()))
            except AzureError as e:
                if e.status != 404:
                    raise
                return None, ""
    return FenceStore(kind, b.env, b.new_lock, raw)


@pytest.fixture(params=KINDS)
def store(request, tmp_path) -> FenceStore:
    if request.param != "file":
        return _cloud(request.param, request)
    d = tmp_path / "store"
    d.mkdir()

    def raw(url: str):
        p = Path(url[len("file://"):])
        return (p.read_bytes() if p.exists() else None), ""
    return FenceStore("file", node_env(), lambda n: f"file://{d}/{n}-{secrets.token_hex(4)}.json",
                      raw)


def fence(bin_: Path, st: FenceStore, *args: str, data: bytes | None = None, token: str = ""):
    """One `s3lect fence` call (the token given with --token), its input data."""
    argv = [str(bin_), "fence", *args] + (["--token", token] if token else [])
    return subprocess.run(argv, env=st.env, input=data, capture_output=True, timeout=60)


def leader_script(tmp: Path, bin_: Path, role: str, data: str, other: str) -> Path:
    """The command of node A or B: it saves its term and fence token, writes
    and reads with `s3lect fence` (each step's exit code into steps), then
    sleeps until stopped. A: put, get, cas, a stale cas, the same bytes
    twice, a create-only of `other`; B: the same bytes A wrote last."""
    d = tmp / role
    d.mkdir()
    s = f'"{bin_}" fence'
    lines = ["set -u", f'D="{d}"',
             'printf "%s" "$S3LECT_TERM" > "$D/term"',
             'printf "%s" "$S3LECT_FENCE_TOKEN" > "$D/token"']
    if role == "a":
        lines += [
            "printf first > \"$D/in1\"",
            f'{s} put "{data}" "$D/in1"; echo "put $?" >> "$D/steps"',
            f'{s} get "{data}" "$D/got1" > "$D/v1.ver"; echo "get $?" >> "$D/steps"',
            'v1=$(cut -d" " -f1 "$D/v1.ver")',
            f'printf second | {s} cas --version "$v1" "{data}" -; echo "cas $?" >> "$D/steps"',
            f'printf stale | {s} cas --version "$v1" "{data}" - 2> "$D/stale.err"; '
            'echo "stale $?" >> "$D/steps"',
            f'printf same | {s} put "{data}"; echo "same1 $?" >> "$D/steps"',
            f'{s} get "{data}" "$D/same1" > "$D/same1.ver"',
            f'printf same | {s} put "{data}"; echo "same2 $?" >> "$D/steps"',
            f'{s} get "{data}" "$D/same2" > "$D/same2.ver"',
            f'printf other | {s} cas "{other}" -; echo "create $?" >> "$D/steps"',
        ]
    else:
        lines += [
            f'printf same | {s} put "{data}"; echo "same $?" >> "$D/steps"',
            f'{s} get "{data}" "$D/same" > "$D/same.ver"',
        ]
    lines += ['echo "done 0" >> "$D/steps"', "exec sleep 600"]
    script = tmp / f"{role}.sh"
    script.write_text("\n".join(lines) + "\n")
    return d


def steps(d: Path) -> dict[str, int]:
    p = d / "steps"
    if not p.exists():
        return {}
    return {k: int(v) for k, v in (ln.split() for ln in p.read_text().splitlines())}


def version_term(d: Path, name: str) -> tuple[str, int]:
    v, t = (d / f"{name}.ver").read_text().split()
    return v, int(t)


def wait_logged(cond, timeout: float, what: str, node: Node) -> None:
    """wait_for, the node's log in the failure."""
    try:
        wait_for(cond, timeout, what)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- {node.id} ---\n{node.text()}") from None


def forge_other_holder(token: str, holder: str) -> str:
    """A token of the same term and lock as `token`, another holder (as
    tests/c/test_fence.c builds one)."""
    parts = token.split(".")
    assert len(parts) == 5 and parts[:2] == ["s3lect-fence", "1"], token
    parts[3] = base64.urlsafe_b64encode(holder.encode()).decode().rstrip("=")
    return ".".join(parts)


def test_a_frozen_leaders_writes_are_fenced(store, s3lect_bin, tmp_path):
    st = store
    lock, data, other = st.new_url("fence-lock"), st.new_url("fence-data"), st.new_url("fence-other")
    da = leader_script(tmp_path, s3lect_bin, "a", data, other)
    db = leader_script(tmp_path, s3lect_bin, "b", data, other)
    nodes: list[Node] = []
    frozen: list[int] = []
    try:
        a = Node(s3lect_bin, tmp_path, lock, "node-a", st.env, TIMING,
                 cmd=["sh", str(tmp_path / "a.sh")])
        nodes.append(a)
        wait_logged(lambda: "done" in steps(da), 30, "A's command to finish its writes", a)
        sa = steps(da)
        assert sa == {"put": 0, "get": 0, "cas": 0, "stale": PRECONDITION, "same1": 0, "same2": 0,
                      "create": 0, "done": 0}, (sa, a.text(), (da / "stale.err").read_text())
        term_a, token_a = int((da / "term").read_text()), (da / "token").read_text()
        assert token_a.startswith(f"s3lect-fence.1.{term_a}."), token_a
        assert (da / "got1").read_bytes() == b"first"
        v1, t1 = version_term(da, "v1")
        assert t1 == term_a
        # Identical bytes written twice in one term: two versions.
        s1, _ = version_term(da, "same1")
        s2, _ = version_term(da, "same2")
        assert s1 != s2 and s1 != v1, (v1, s1, s2)

        b = Node(s3lect_bin, tmp_path, lock, "node-b", st.env, TIMING,
                 cmd=["sh", str(tmp_path / "b.sh")])
        nodes.append(b)
        wait_logged(lambda: "leader is node-a" in b.text(), 15, "B to follow A", b)
        assert not b.leading()
        frozen = freeze(a.pid)
        wait_logged(lambda: "done" in steps(db), 20, "B to take over from frozen A and write", b)
        assert steps(db) == {"same": 0, "done": 0}, b.text()
        term_b, token_b = int((db / "term").read_text()), (db / "token").read_text()
        assert term_b > term_a
        vb, tb = version_term(db, "same")
        assert tb == term_b
        # The new leader rewrote the very bytes A wrote last: a version of its own.
        assert vb != s2, (vb, s2)

        # The zombie wakes: its put and its read-modify-write over the
        # version it read are fenced, and B's bytes stay.
        z = fence(s3lect_bin, st, "put", data, data=b"zombie", token=token_a)
        assert z.returncode == FENCED, z.stderr
        assert b"newer than ours" in z.stderr, z.stderr
        z = fence(s3lect_bin, st, "cas", "--version", s2, data, data=b"zombie", token=token_a)
        assert z.returncode == FENCED, z.stderr
        g = fence(s3lect_bin, st, "get", data, str(tmp_path / "now"), token=token_b)
        assert g.returncode == 0, g.stderr
        assert (tmp_path / "now").read_bytes() == b"same"
        assert g.stdout.decode().split() == [vb, str(term_b)]

        # The stored bytes: the envelope, B's term, B's bytes.
        body, raw_version = st.raw(data)
        assert body is not None and body.startswith(MAGIC), body
        header, rest = body.split(b"\n", 1)
        meta = json.loads(header[len(MAGIC):])
        assert rest == b"same" and meta["term"] == term_b and meta["holder"] == "node-b", body
        if st.kind == "s3":
            assert raw_version == vb and raw_version != s2, (raw_version, vb, s2)

        # A delete by B, then the zombie's re-create (put, and create-only cas).
        r = fence(s3lect_bin, st, "rm", other, token=token_b)
        assert r.returncode == 0, r.stderr
        assert fence(s3lect_bin, st, "get", other, token=token_b).returncode == NOT_FOUND
        for args in (["put", other], ["cas", other]):
            z = fence(s3lect_bin, st, *args, data=b"again", token=token_a)
            assert z.returncode == FENCED, (args, z.stderr)
        assert fence(s3lect_bin, st, "get", other, token=token_b).returncode == NOT_FOUND
        tomb, _ = st.raw(other)
        assert tomb is not None and tomb.startswith(MAGIC) and b'"deleted":true' in tomb, tomb

        # A second holder of B's term, after B wrote: fenced.
        second = forge_other_holder(token_b, "node-other")
        z = fence(s3lect_bin, st, "put", data, data=b"second", token=second)
        assert z.returncode == FENCED, z.stderr
        assert b"another holder" in z.stderr, z.stderr
        assert st.raw(data)[0] == body  # nothing written by any of them
    finally:
        thaw(frozen)
        for n in nodes:
            n.stop()


def test_identical_bytes_share_an_s3_etag_unless_fenced(request, s3lect_bin, tmp_path):
    """Why the envelope has a nonce: MinIO (as S3) gives identical bytes the
    same ETag, so an If-Match of a zombie that read them would match the new
    leader's rewrite; fenced writes of identical bytes get two ETags."""
    st = _cloud("s3", request)
    url = st.new_url("etag")
    from conftest import make_backend
    srv = make_backend("s3", request).server
    key = url[len(f"s3://{srv.bucket}/"):]
    e1 = srv.client().put(srv.bucket, key, b"same").etag
    e2 = srv.client().put(srv.bucket, key, b"same").etag
    assert e1 and e1 == e2, (e1, e2)
    token = "s3lect-fence.1.7." + base64.urlsafe_b64encode(b"t").decode().rstrip("=") + ".bA"
    fenced_url = st.new_url("etag-fenced")
    tags = []
    for _ in range(2):
        r = fence(s3lect_bin, st, "put", fenced_url, data=b"same", token=token)
        assert r.returncode == 0, r.stderr
        tags.append(st.raw(fenced_url)[1])
    assert tags[0] and tags[0] != tags[1], tags


def test_check_store_data_passes(store, s3lect_bin):
    st = store
    data = st.new_url("check-data")
    r = run([str(s3lect_bin), "check-store", "--data", data], st.env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    table = {ln.strip()[6:]: ln.strip()[:4] for ln in r.stdout.splitlines()
             if ln.strip()[:4] in ("PASS", "FAIL")}
    assert table == {c: "PASS" for c in DATA_CHECKS}, r.stdout
    assert check_store_verdict(r.stdout) == (
        "all 10 checks passed: the data location enforces conditional writes, and fenced writes "
        "hold there"), r.stdout
    # Identical bytes: one ETag on S3 (their MD5), a version per write elsewhere.
    info = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("info")]
    assert len(info) == 1, r.stdout
    if st.kind == "s3":
        assert "identical bytes written again kept their version" in info[0], info
    else:
        assert "identical bytes written again got a new version" in info[0], info
    # The data object itself is never touched; the scratch object is a tombstone.
    assert st.raw(data)[0] is None
    scratch = [ln.split(": ", 1)[1] for ln in r.stdout.splitlines()
               if ln.startswith("  scratch object: ")]
    assert len(scratch) == 1 and scratch[0].startswith(data + ".s3lect-check-"), r.stdout
    body, _ = st.raw(scratch[0])
    assert body is not None and body.startswith(MAGIC) and b'"deleted":true' in body, body

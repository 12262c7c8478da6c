# SPDX-License-Identifier: Apache-2.0
"""The credential provider chain through the Python binding (issue 15).

Each test runs an ``s3lect.Elector`` on an s3:// lock in the test MinIO in a
child process (this file, run as a script) whose environment holds no static
keys and whose HOME, AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE point
into the test's temporary directory: the library finds its credentials only
through the chain, in an environment fixed before it reads it, and the
credential cache and refresher thread die with the child. The child reports
events, callback errors and status snapshots as JSON lines.

- a ``credential_process`` profile serving real temporary credentials from
  MinIO's STS (tests/harness/sts.py), reported to expire 6 s after they are
  handed out: leader, renewing, at least two background refreshes, one term;
- a container-credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI on
  127.0.0.1 with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE) serving MinIO STS
  credentials: leader;
- web identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN), a role_arn +
  source_profile profile (SigV4-signed AssumeRole with the source key), both
  against a loopback fake STS (AWS_ENDPOINT_URL_STS) answering with MinIO STS
  credentials; an sso_session profile (cached token, loopback portal at
  AWS_ENDPOINT_URL_SSO handing out MinIO STS credentials); EC2 instance
  metadata (AWS_EC2_METADATA_SERVICE_ENDPOINT at the harness's IMDSv2 server
  serving MinIO STS credentials): leader on each;
- a broken ``credential_process`` (exit status 3): the error names the
  source, at construction and, when it breaks after the first credentials,
  through ``on_error`` and ``Status.last_error``.

Every test checks that no secret or token it knows appears in anything it
captured from the child (stdout, stderr with the library's log at DEBUG).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent

if __name__ != "__main__":
    import pytest

    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from harness.container_creds import ContainerCredsServer  # noqa: E402
    from harness.credtest import (STS_PY, container_answer, no_secrets,  # noqa: E402
                                  write_mint_profile)
    from harness.imds import FakeImds, imds_creds  # noqa: E402
    from harness.sso import FakePortal, write_sso_session  # noqa: E402
    from harness.sts import FakeSts, assume_role, sts_answer  # noqa: E402
    from pyutil import FAST  # noqa: E402



# ---------------------------------------------------------------------------
# The child: one Elector, events and status as JSON lines
# ---------------------------------------------------------------------------


def child_main(lock: str, server_id: str, endpoint: str, timings: str) -> int:
    import logging

    import s3lect

    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                        format="%(name)s %(levelname)s %(message)s")
    out_mu = threading.Lock()

    def emit(**fields: Any) -> None:
        line = json.dumps(fields)
        with out_mu:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    try:
        el = s3lect.Elector(
            lock,
            server_id=server_id,
            endpoint=endpoint,
            region="us-east-1",
            on_acquire=lambda term: emit(event="acquired", term=term),
            on_lose=lambda term, reason: emit(event="lost", term=term, reason=str(reason)),
            on_error=lambda e: emit(event="error", type=type(e).__name__, code=e.code,
                                    message=str(e)),
            **json.loads(timings),
        )
    except s3lect.Error as e:
        emit(event="create_failed", type=type(e).__name__, code=e.code, message=str(e))
        return 3
    el.start()
    emit(event="started")
    while not done.wait(0.25):
        st = el.status()
        emit(event="status", is_leader=st.is_leader, state=str(st.state), term=st.term,
             leader_id=st.leader_id, server_id=st.server_id, last_error=st.last_error,
             last_error_code=st.last_error_code,
             last_updated=st.last_updated.timestamp() if st.last_updated else None,
             lease_remaining=st.lease_remaining)
    el.stop()
    emit(event="stopped")
    return 0


if __name__ == "__main__":
    sys.exit(child_main(*sys.argv[1:5]))


# ---------------------------------------------------------------------------
# The parent side
# ---------------------------------------------------------------------------


class Child:
    """A child elector; stdout (JSON lines) and stderr collected by threads."""

    def __init__(self, lock: str, server_id: str, endpoint: str, env: Dict[str, str]) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), lock, server_id, endpoint,
             json.dumps(FAST)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env=env, text=True, cwd=str(TESTS.parent),
        )
        self.events: List[Dict[str, Any]] = []
        self.out: List[str] = []
        self.err: List[str] = []
        self._mu = threading.Lock()
        self._threads = [threading.Thread(target=self._read, args=(self.p.stdout, True), daemon=True),
                         threading.Thread(target=self._read, args=(self.p.stderr, False),
                                          daemon=True)]
        for t in self._threads:
            t.start()

    def _read(self, f: Any, is_out: bool) -> None:
        for line in f:
            with self._mu:
                (self.out if is_out else self.err).append(line)
                if is_out:
                    try:
                        self.events.append(json.loads(line))
                    except ValueError:
                        self.events.append({"event": "garbage", "line": line})

    def find(self, kind: str) -> List[Dict[str, Any]]:
        with self._mu:
            return [e for e in self.events if e.get("event") == kind]

    def text(self) -> str:
        with self._mu:
            return "".join(self.out) + "".join(self.err)

    def wait_for(self, cond: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            exited = self.p.poll() is not None
            if exited:  # everything it printed is read before the last look
                for t in self._threads:
                    t.join(timeout=10)
            v = cond()
            if v:
                return v
            if exited or time.monotonic() >= deadline:
                tail = self.text()[-3000:]
                pytest.fail(f"{what}: not within {timeout:g} s (exit status {self.p.poll()}); "
                            f"child output:\n{tail}")
            time.sleep(0.05)

    def stop(self) -> int | None:
        """SIGTERM (a graceful stop), then SIGKILL after 10 s; joins the readers."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(timeout=10)
        for t in self._threads:
            t.join(timeout=10)
        return self.p.returncode


@pytest.fixture
def children() -> Any:
    made: List[Child] = []

    def start(*args: Any) -> Child:
        c = Child(*args)
        made.append(c)
        return c

    yield start
    for c in made:
        c.stop()


@pytest.fixture
def cred_env(clean_env: Dict[str, str], tmp_path: Path) -> Dict[str, str]:
    """No credentials anywhere: no AWS_* variables (clean_env), HOME, the
    config and the credentials file in tmp_path, no instance metadata."""
    env = dict(clean_env)
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        env.pop(k, None)
    env.update(
        AWS_CONFIG_FILE=str(tmp_path / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_REGION="us-east-1",
        PYTHONUNBUFFERED="1",
    )
    (tmp_path / "config").write_text("")
    (tmp_path / "credentials").write_text("")
    return env


@pytest.fixture
def cred_lock(minio: Any) -> str:
    return f"s3://{minio.bucket}/py/creds-{secrets.token_hex(6)}.json"


def minted(count: Path) -> List[List[str]]:
    """[akid, secret, token] per credential_process run, from its count file."""
    if not count.exists():
        return []
    return [ln.split() for ln in count.read_text().splitlines() if ln.strip()]


def minio_sts_works(minio: Any) -> Dict[str, str]:
    """Temporary credentials from the test MinIO's STS (its root keys)."""
    try:
        return assume_role(minio.endpoint, minio.access_key, minio.secret_key)
    except Exception as e:  # noqa: BLE001 - say what is missing, never skip silently
        pytest.fail(f"MinIO's STS did not mint credentials with the test keys: {e}")


def leader_status(c: Child, server_id: str) -> Callable[[], Any]:
    def cond() -> Any:
        st = c.find("status")
        return st and st[-1]["is_leader"] and st[-1]["state"] == "leader" and \
            st[-1]["leader_id"] == server_id and st[-1]["term"] >= 1 and st[-1]
    return cond


# ---------------------------------------------------------------------------
# 1. credential_process with MinIO STS credentials, refreshed in the background
# ---------------------------------------------------------------------------


def test_credential_process_leads_through_refreshes(minio, cred_env, cred_lock, tmp_path,
                                                    children):
    minio_sts_works(minio)
    count = write_mint_profile(tmp_path, minio, 6)
    env = dict(cred_env, AWS_PROFILE="minted")
    c = children(cred_lock, "proc-a", minio.endpoint, env)
    c.wait_for(lambda: c.find("acquired"), 15, "leadership on credential_process credentials")
    first = c.wait_for(leader_status(c, "proc-a"), 5, "a leader status")
    term = c.find("acquired")[0]["term"]
    assert first["term"] == term and first["lease_remaining"] > 0, first
    assert first["last_error"] == "" and first["last_error_code"] == 0, first
    keys = minted(count)
    assert keys and all(k[0] != minio.access_key for k in keys), \
        "the elector must run on minted temporary keys"
    start = len(keys)
    # Reported lifetime 6 s: refreshed about every 4 s by the background thread.
    c.wait_for(lambda: len(minted(count)) >= start + 2, 14, "two background refreshes")
    time.sleep(1.0)  # signing with the newest keys: at least two more renewals
    st = c.wait_for(leader_status(c, "proc-a"), 2, "still leader after the refreshes")
    assert st["term"] == term, f"term changed from {term} to {st['term']}"
    assert st["last_updated"] > first["last_updated"], "the leader did not renew"
    assert not c.find("lost"), f"leadership lost: {c.find('lost')}"
    assert len(c.find("acquired")) == 1, c.find("acquired")
    # (A slow MinIO may fail a renewal on a loaded machine; the credentials never may.)
    cred_errors = [e for e in c.find("error")
                   if "credential" in e["message"] or "expired" in e["message"]]
    assert not cred_errors, f"credential errors while refreshing: {cred_errors}"
    # The lease stayed valid in every snapshot since it was first won.
    sts = c.find("status")
    i = sts.index(first)
    assert all(s["is_leader"] and s["term"] == term for s in sts[i:]), sts[i:]
    got = minted(count)
    assert len({k[0] for k in got}) == len(got), "every refresh brought new MinIO credentials"
    assert c.stop() == 0
    assert c.find("stopped") and c.find("lost")[-1]["reason"] == "stopped"
    no_secrets([c.text()], [minio.secret_key] + [v for k in minted(count) for v in k[1:]])


# ---------------------------------------------------------------------------
# 2. a container-credentials endpoint on 127.0.0.1
# ---------------------------------------------------------------------------


def test_container_credentials_endpoint_leads(minio, cred_env, cred_lock, tmp_path, children):
    creds = minio_sts_works(minio)
    token = "pod-identity-" + secrets.token_urlsafe(24)
    token_file = tmp_path / "pod-identity-token"
    token_file.write_text(token + "\n")
    served = container_answer(creds, "arn:aws:iam::123456789012:role/s3lect-py-task")
    with ContainerCredsServer(creds=served, token=token) as srv:
        env = dict(cred_env, AWS_CONTAINER_CREDENTIALS_FULL_URI=srv.url("/creds"),
                   AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file))
        c = children(cred_lock, "pod-a", minio.endpoint, env)
        try:
            c.wait_for(lambda: c.find("acquired"), 15, "leadership on container credentials")
            st = c.wait_for(leader_status(c, "pod-a"), 5, "a leader status")
            assert st["term"] == c.find("acquired")[0]["term"]
            assert srv.count >= 1 and srv.last_had_auth, "the endpoint was not asked with the token"
        finally:
            rc = c.stop()
    assert rc == 0
    assert not [e for e in c.find("error") if "credential" in e["message"]], c.find("error")
    no_secrets([c.text()], [minio.secret_key, creds["SecretAccessKey"], creds["SessionToken"],
                            token])


# ---------------------------------------------------------------------------
# 3. a broken credential_process
# ---------------------------------------------------------------------------


def write_broken_profile(tmp_path: Path, leaked: str) -> Path:
    """Profile 'broken': prints credentials on stdout (which must never be
    shown), then exits with status 3."""
    script = tmp_path / "broken.sh"
    script.write_text(
        "#!/bin/sh\n"
        "echo 'broken.sh: the token service is down' >&2\n"
        f"echo '{{\"Version\": 1, \"AccessKeyId\": \"ASIABROKEN\", \"SecretAccessKey\": "
        f"\"{leaked}\"}}'\n"
        "exit 3\n"
    )
    script.chmod(0o700)
    return script


def test_broken_credential_process_fails_with_its_name(minio, cred_env, cred_lock, tmp_path,
                                                       children):
    leaked = "leaked-" + secrets.token_hex(16)
    script = write_broken_profile(tmp_path, leaked)
    (tmp_path / "config").write_text(f"[profile broken]\ncredential_process = {script}\n")
    env = dict(cred_env, AWS_PROFILE="broken")
    c = children(cred_lock, "broken-a", minio.endpoint, env)
    failed = c.wait_for(lambda: c.find("create_failed"), 15, "the Elector to refuse to start")
    msg = failed[0]["message"]
    assert "credential_process of profile 'broken' exited with status 3" in msg, msg
    assert failed[0]["type"] == "AuthError", failed[0]
    # The child exits by itself with status 3 after reporting: wait for that
    # rather than racing its exit with a SIGTERM.
    try:
        rc = c.p.wait(timeout=15)
    finally:
        c.stop()
    assert rc == 3, rc
    assert "the token service is down" in "".join(c.err), "the process's stderr is passed through"
    no_secrets([c.text()], [leaked, minio.secret_key])


def test_credential_process_breaking_later_reports_through_on_error(minio, cred_env, cred_lock,
                                                                     tmp_path, children):
    """The first run mints 6 s credentials, later runs fail: the elector
    leads on the first ones, then on_error and the status name the source
    and why its refresh failed, and the leader steps down."""
    minio_sts_works(minio)
    count = tmp_path / "minted"
    leaked = "leaked-" + secrets.token_hex(16)
    broken = write_broken_profile(tmp_path, leaked)
    script = tmp_path / "once.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"if [ -e '{count}' ]; then exec '{broken}'; fi\n"
        f"export STS_ACCESS_KEY='{minio.access_key}' STS_SECRET_KEY='{minio.secret_key}'\n"
        f"export STS_COUNT_FILE='{count}'\n"
        f"exec '{sys.executable}' '{STS_PY}' process {minio.endpoint} --report-seconds 6\n"
    )
    script.chmod(0o700)
    (tmp_path / "config").write_text(f"[profile flaky]\ncredential_process = {script}\n")
    env = dict(cred_env, AWS_PROFILE="flaky")
    c = children(cred_lock, "flaky-a", minio.endpoint, env)
    c.wait_for(lambda: c.find("acquired"), 15, "leadership on the first credentials")
    want = "credential_process of profile 'flaky' exited with status 3"
    expired = [e for e in c.wait_for(
        lambda: [e for e in c.find("error") if want in e["message"] and "expired" in e["message"]],
        15, "on_error naming the failed source and saying the credentials expired")]
    assert "the credentials from profile 'flaky'" in expired[0]["message"], expired[0]
    st = c.wait_for(lambda: [s for s in c.find("status") if want in s["last_error"]], 5,
                    "the status naming the failed source")[0]
    assert st["last_error_code"] < 0, st
    lost = c.wait_for(lambda: c.find("lost"), 5, "the leader to step down")
    assert lost[0]["reason"] in ("renew_timeout", "lease_expired"), lost
    c.stop()
    assert len(minted(count)) == 1
    no_secrets([c.text()], [leaked, minio.secret_key] + minted(count)[0][1:])


# ---------------------------------------------------------------------------
# 4. every other source in the chain, each with real MinIO STS credentials
# ---------------------------------------------------------------------------

ROLE = "arn:aws:iam::123456789012:role/s3lect-py"


def lead_once(c: Child, server_id: str) -> None:
    """c becomes leader within 15 s, reports one term, stops gracefully and
    never reported a credential error."""
    try:
        c.wait_for(lambda: c.find("acquired"), 15, f"leadership of {server_id}")
        st = c.wait_for(leader_status(c, server_id), 5, "a leader status")
        assert st["term"] == c.find("acquired")[0]["term"], st
        assert st["last_error"] == "", st
    finally:
        rc = c.stop()
    assert rc == 0, rc
    assert c.find("stopped") and c.find("lost")[-1]["reason"] == "stopped", c.find("lost")
    assert not [e for e in c.find("error") if "credential" in e["message"]], c.find("error")


def test_web_identity_leads(minio, cred_env, cred_lock, tmp_path, children):
    creds = minio_sts_works(minio)
    token = "eyJ-web-identity-" + secrets.token_urlsafe(24)
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    answer = sts_answer(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"],
                        900, ROLE + "/irsa", action="AssumeRoleWithWebIdentity")
    with FakeSts([(200, answer)] * 3) as f:
        env = dict(cred_env, AWS_WEB_IDENTITY_TOKEN_FILE=str(token_file), AWS_ROLE_ARN=ROLE,
                   AWS_ROLE_SESSION_NAME="py-pod", AWS_ENDPOINT_URL_STS=f.endpoint)
        c = children(cred_lock, "irsa-a", minio.endpoint, env)
        lead_once(c, "irsa-a")
    assert f.requests, "STS was never asked"
    req = f.requests[0]
    assert req["Action"] == "AssumeRoleWithWebIdentity" and req["RoleArn"] == ROLE, \
        {k: v for k, v in req.items() if k != "WebIdentityToken"}
    assert req["WebIdentityToken"] == token and req["RoleSessionName"] == "py-pod"
    assert req["_authorization"] == "", "AssumeRoleWithWebIdentity is not signed"
    no_secrets([c.text()], [token, minio.secret_key, creds["SecretAccessKey"],
                            creds["SessionToken"]])


def test_role_arn_with_source_profile_leads(minio, cred_env, cred_lock, tmp_path, children):
    creds = minio_sts_works(minio)
    src_akid = "AKIDSRC" + secrets.token_hex(4).upper()
    src_secret = secrets.token_hex(20)
    (tmp_path / "credentials").write_text(
        f"[src]\naws_access_key_id = {src_akid}\naws_secret_access_key = {src_secret}\n")
    (tmp_path / "config").write_text(
        f"[profile assumer]\nrole_arn = {ROLE}\nsource_profile = src\n"
        "role_session_name = py-assumer\n")
    answer = sts_answer(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"],
                        900, ROLE + "/py-assumer")
    with FakeSts([(200, answer)] * 3) as f:
        env = dict(cred_env, AWS_PROFILE="assumer", AWS_ENDPOINT_URL_STS=f.endpoint)
        c = children(cred_lock, "assumer-a", minio.endpoint, env)
        lead_once(c, "assumer-a")
    assert f.requests, "STS was never asked"
    req = f.requests[0]
    assert req["Action"] == "AssumeRole" and req["RoleArn"] == ROLE, req
    assert req["RoleSessionName"] == "py-assumer", req
    assert req["_authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={src_akid}/"), \
        "AssumeRole is SigV4-signed with the source profile's key"
    assert "/sts/aws4_request" in req["_authorization"], req["_authorization"]
    no_secrets([c.text()], [src_secret, minio.secret_key, creds["SecretAccessKey"],
                            creds["SessionToken"]])


def test_sso_session_profile_leads(minio, cred_env, cred_lock, tmp_path, children):
    minio_sts_works(minio)
    bearer = "sso-" + secrets.token_urlsafe(24)
    write_sso_session(Path(cred_env["HOME"]), tmp_path / "config", bearer)
    with FakePortal(minio, bearer) as portal:
        env = dict(cred_env, AWS_PROFILE="dev", AWS_ENDPOINT_URL_SSO=portal.endpoint)
        c = children(cred_lock, "sso-a", minio.endpoint, env)
        lead_once(c, "sso-a")
    assert portal.seen and portal.seen[0] == (
        "/federation/credentials", {"role_name": "Leader", "account_id": "111122223333"}), \
        portal.seen
    assert portal.handed, "the portal handed out no credentials"
    assert all(h["AccessKeyId"] != minio.access_key for h in portal.handed)
    no_secrets([c.text()], [bearer, minio.secret_key]
               + [v for h in portal.handed for v in (h["SecretAccessKey"], h["SessionToken"])])


def test_ec2_instance_metadata_leads(minio, cred_env, cred_lock, tmp_path, children):
    creds = minio_sts_works(minio)
    served = dict(imds_creds(), AccessKeyId=creds["AccessKeyId"],
                  SecretAccessKey=creds["SecretAccessKey"], Token=creds["SessionToken"],
                  Expiration=creds["Expiration"])
    imds = FakeImds(creds=served)
    imds.start()
    try:
        env = dict(cred_env, AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.endpoint("ok"))
        del env["AWS_EC2_METADATA_DISABLED"]
        c = children(cred_lock, "ec2-a", minio.endpoint, env)
        lead_once(c, "ec2-a")
    finally:
        imds.stop()
    assert imds.puts >= 1 and imds.gets >= 2, \
        f"IMDSv2 session and role/credential GETs expected (puts {imds.puts}, gets {imds.gets})"
    no_secrets([c.text()], [imds.token, minio.secret_key, creds["SecretAccessKey"],
                            creds["SessionToken"]])

# SPDX-License-Identifier: Apache-2.0
"""Signals to `s3lect run` on every refreshed credential source (issue 26,
item 2), against real servers on 127.0.0.1.

A refreshed source (credential_process, container credentials, instance
metadata, SSO, web identity, an assumed role) starts the library's
credential refresher thread, possibly before `s3lect run` blocks the signals
it reads from its signalfd. Every library thread is created with the
asynchronous signals blocked, so SIGTERM and SIGHUP reach s3lect run's loop
whatever the order: SIGHUP is forwarded to the command, which dies of it, and
s3lect releases and exits with the command's status (128 + 1); SIGTERM stops
the command, releases and exits 0. Either way the next node leads at its next
read, within about a second, not after the lease.

Three nodes per source with an 8 s lease (so a takeover by expiry, at least
7 s, is told from one by release): SIGHUP to the first leader, SIGTERM to the
second. A last test reads every thread's blocked-signal mask from /proc.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from harness.cli import SIGNAL_TIMING, Node, sighup_then_sigterm, wait_for
from harness.container_creds import ContainerCredsServer
from harness.credtest import STS_PY, container_answer, write_mint_profile
from harness.imds import ImdsMock, ImdsMockMissing, find_imds_mock
from harness.sso import FakePortal
from harness.sts import assume_role

ROLE = "arn:aws:iam::123456789012:role/s3lect-test"
LONG = SIGNAL_TIMING  # harness/cli.py: an 8 s lease, 500 ms frequent interval


@pytest.fixture
def cenv(clean_env, tmp_path):
    env = dict(clean_env)
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        env.pop(k, None)
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_REGION="us-east-1",
               AWS_CONFIG_FILE=str(tmp_path / "config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"))
    (tmp_path / "config").write_text("")
    return env


def need_own_minio(minio):
    if minio.name != "minio" or not hasattr(minio, "proc"):
        pytest.fail("this test needs the harness's own MinIO (its root keys mint credentials)")


def source_env(kind: str, minio, moto, cenv: dict, tmp_path: Path, stack) -> tuple[dict, str]:
    """(environment, bucket) for the credential source `kind`."""
    if kind == "credential_process":
        need_own_minio(minio)
        write_mint_profile(tmp_path, minio, None)
        return dict(cenv, AWS_PROFILE="minted", AWS_ENDPOINT_URL_S3=minio.endpoint), minio.bucket
    if kind == "container":
        sts = assume_role(minio.endpoint, minio.access_key, minio.secret_key)
        srv = stack(ContainerCredsServer(creds=container_answer(sts, ROLE)))
        return dict(cenv, AWS_ENDPOINT_URL_S3=minio.endpoint,
                    AWS_CONTAINER_CREDENTIALS_FULL_URI=srv.url("/creds")), minio.bucket
    if kind == "instance_metadata":
        try:
            binary = find_imds_mock()
        except ImdsMockMissing as e:
            pytest.skip(f"the EC2 metadata mock is not available: {e}")
        sts = assume_role(minio.endpoint, minio.access_key, minio.secret_key)
        served = {"Code": "Success", "LastUpdated": sts["Expiration"], "Type": "AWS-HMAC",
                  "AccessKeyId": sts["AccessKeyId"], "SecretAccessKey": sts["SecretAccessKey"],
                  "Token": sts["SessionToken"], "Expiration": sts["Expiration"]}
        mock = stack(ImdsMock(creds=served, role="s3lect-sig", region=minio.region,
                              v2_only=True, binary=binary))
        env = dict(cenv, AWS_ENDPOINT_URL_S3=minio.endpoint,
                   AWS_EC2_METADATA_SERVICE_ENDPOINT=mock.endpoint)
        env.pop("AWS_EC2_METADATA_DISABLED")
        return env, minio.bucket
    if kind == "sso":
        need_own_minio(minio)
        bearer = "sso-" + secrets.token_hex(16)
        cache = Path(cenv["HOME"]) / ".aws" / "sso" / "cache"
        cache.mkdir(parents=True)
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        (cache / f"{hashlib.sha1(b'corp').hexdigest()}.json").write_text(json.dumps(
            {"startUrl": "https://corp.awsapps.com/start", "region": "eu-west-1",
             "accessToken": bearer, "expiresAt": later.strftime("%Y-%m-%dT%H:%M:%SZ")}))
        (tmp_path / "config").write_text(
            "[profile dev]\nsso_session = corp\nsso_account_id = 111122223333\n"
            "sso_role_name = Leader\n[sso-session corp]\n"
            "sso_start_url = https://corp.awsapps.com/start\nsso_region = eu-west-1\n")
        portal = stack(FakePortal(minio, bearer))
        return dict(cenv, AWS_PROFILE="dev", AWS_ENDPOINT_URL_SSO=portal.endpoint,
                    AWS_ENDPOINT_URL_S3=minio.endpoint), minio.bucket
    if kind == "web_identity":
        token = tmp_path / "token"
        token.write_text("eyJ-a-web-identity-token-" + secrets.token_hex(16) + "\n")
        return dict(cenv, AWS_WEB_IDENTITY_TOKEN_FILE=str(token), AWS_ROLE_ARN=ROLE,
                    AWS_ROLE_SESSION_NAME="irsa-pod", AWS_ENDPOINT_URL_STS=moto.endpoint,
                    AWS_ENDPOINT_URL_S3=moto.endpoint), moto.bucket
    if kind == "assume_role":
        (tmp_path / "credentials").write_text(
            f"[src]\naws_access_key_id = AKIDSRC{secrets.token_hex(4).upper()}\n"
            f"aws_secret_access_key = {secrets.token_hex(20)}\n")
        (tmp_path / "config").write_text(f"[profile p]\nrole_arn = {ROLE}\nsource_profile = src\n")
        return dict(cenv, AWS_PROFILE="p", AWS_ENDPOINT_URL_STS=moto.endpoint,
                    AWS_ENDPOINT_URL_S3=moto.endpoint), moto.bucket
    raise AssertionError(kind)


@pytest.fixture
def stack():
    """Enters context managers (servers) for the test and closes them after."""
    entered = []

    def enter(cm):
        v = cm.__enter__()
        entered.append(cm)
        return v if v is not None else cm

    yield enter
    for cm in reversed(entered):
        cm.__exit__(None, None, None)


def leader_with_cmd(nodes: list[Node]) -> Node | None:
    live = [n for n in nodes if n.alive() and n.leading() and n.cmd_wrote_start()]
    return live[0] if len(live) == 1 else None


SOURCES = ["credential_process", "container", "instance_metadata", "sso", "web_identity",
           "assume_role"]


@pytest.mark.parametrize("kind", SOURCES)
def test_sighup_and_sigterm_on_refreshed_credentials(kind, minio, moto, s3lect_bin, cenv,
                                                     tmp_path, stack, sighup_default):
    env, bucket = source_env(kind, minio, moto, cenv, tmp_path, stack)
    lock = f"s3://{bucket}/signals/{kind}-{secrets.token_hex(4)}.json"
    nodes = [Node(s3lect_bin, tmp_path, lock, f"n{i}", env, LONG) for i in range(3)]
    try:
        took = sighup_then_sigterm(nodes, kind)
        print(f"{kind}: next leader's command {took[0]:.2f} s after SIGHUP, {took[1]:.2f} s "
              "after SIGTERM")
    finally:
        for n in nodes:
            n.stop()


SYNC = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGTRAP,
        signal.SIGSYS, signal.SIGKILL, signal.SIGSTOP}


def blocked(status: str) -> set[int]:
    m = re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.M)
    mask = int(m.group(1), 16)
    return {i + 1 for i in range(64) if mask >> i & 1}


def test_every_library_thread_blocks_asynchronous_signals(minio, s3lect_bin, cenv, tmp_path):
    """credential_process (the refresher), --metrics-listen and --peer (their
    threads), the runtime's loop and callback threads: every thread but
    s3lect run's main one must block every asynchronous signal."""
    need_own_minio(minio)
    write_mint_profile(tmp_path, minio, 6)  # short-lived: the refresher runs
    env = dict(cenv, AWS_PROFILE="minted", AWS_ENDPOINT_URL_S3=minio.endpoint)
    lock = f"s3://{minio.bucket}/signals/mask-{secrets.token_hex(4)}.json"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    node = Node(s3lect_bin, tmp_path, lock, "mask", env,
                LONG + ["--peer", "--metrics-listen", f"127.0.0.1:{port}"])
    try:
        wait_for(lambda: node.leading() and node.cmd_wrote_start(), 40, "leadership")
        time.sleep(1.0)
        pid = node.proc.pid
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        assert len(tids) >= 4, f"expected the loop, callback, refresher, peer and metrics threads: {tids}"
        want = {s for s in range(1, 65) if s not in SYNC and s not in (32, 33)}  # glibc-internal
        bad = []
        for tid in tids:
            if tid == pid:
                continue
            try:
                status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                continue  # ended meanwhile
            missing = want - blocked(status)
            if missing:
                bad.append(f"thread {tid} ({name}) does not block {sorted(missing)}")
        assert not bad, "\n".join(bad)
    finally:
        node.stop()


# ---- the library's own children are not the command's (issue 26, item 3) ----


def slow_process_profile(tmp_path: Path, minio, report_seconds: float) -> tuple[Path, Path]:
    """Profile 'slow': a credential_process that takes 2 s (and hangs while
    the file HANG exists), logs "start PID" and, if it gets SIGTERM (which
    only s3lect run's leftover logic would send), "term PID"."""
    log, hang = tmp_path / "credproc.log", tmp_path / "HANG"
    script = tmp_path / "slow.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"echo \"start $$\" >> '{log}'\n"
        f"trap 'echo \"term $$\" >> {log}; exit 1' TERM\n"
        f"while [ -e '{hang}' ]; do sleep 0.2 & wait $!; done\n"
        "sleep 2 & wait $!\n"
        f"export STS_ACCESS_KEY='{minio.access_key}' STS_SECRET_KEY='{minio.secret_key}'\n"
        f"exec '{sys.executable}' '{STS_PY}' process {minio.endpoint} "
        f"--report-seconds {report_seconds}\n")
    script.chmod(0o700)
    (tmp_path / "config").write_text(f"[profile slow]\ncredential_process = {script}\n")
    return log, hang


def test_slow_and_hanging_credential_process_during_takeovers(minio, s3lect_bin, cenv, tmp_path):
    need_own_minio(minio)
    log, hang = slow_process_profile(tmp_path, minio, 8)
    env = dict(cenv, AWS_PROFILE="slow", AWS_ENDPOINT_URL_S3=minio.endpoint,
               S3LECT_CREDENTIAL_PROCESS_TIMEOUT="4")
    lock = f"s3://{minio.bucket}/signals/credproc-{secrets.token_hex(4)}.json"
    timing = ["--lease-timeout", "4s", "--renew-interval", "1s", "--renew-deadline", "2500ms",
              "--frequent-interval", "500ms", "--infrequent-interval", "1s"]
    nodes: list[Node] = []

    def add() -> None:
        nodes.append(Node(s3lect_bin, tmp_path, lock, f"n{len(nodes)}", env, timing))

    def leader() -> Node | None:
        return leader_with_cmd([n for n in nodes if n.alive()])

    try:
        add()
        add()
        # Refreshes (about every 5 s with an 8 s lifetime) run throughout:
        # four takeovers by SIGTERM, each followed by a node started anew.
        for i in range(4):
            cur = wait_for(leader, 30, f"a leader running its command (round {i})")
            time.sleep(1.5)
            cur.proc.send_signal(signal.SIGTERM)
            assert cur.proc.wait(timeout=15) == 0, cur.text()
            wait_for(leader, 15, f"the next leader's command after round {i}")
            add()
        # Now the source hangs (the library kills it after 4 s and retries):
        # the nodes' credentials run out and leadership is lost, but no
        # refresh is ever killed by the supervisor.
        hang.write_text("")
        time.sleep(12)
        hang.unlink()
        t = time.monotonic()
        # Healed within one refresh (2 s) + a lease + a poll, with slack.
        wait_for(leader, 2 + 4 + 1 + 10, "a leader running its command after the source recovered")
        print(f"led again {time.monotonic() - t:.2f} s after the source recovered")
    finally:
        for n in nodes:
            n.stop()
    lines = log.read_text().splitlines()
    starts = [ln for ln in lines if ln.startswith("start")]
    assert len(starts) >= 6, f"the credential_process ran repeatedly: {lines}"
    killed = [ln for ln in lines if ln.startswith("term")]
    assert not killed, f"s3lect run's supervisor sent SIGTERM to credential_process runs: {killed}"
    for n in nodes:
        assert "left behind by the command" not in n.text(), n.text()

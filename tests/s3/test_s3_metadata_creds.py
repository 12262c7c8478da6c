# SPDX-License-Identifier: Apache-2.0
"""End to end: `s3lect` on MinIO with temporary credentials that only a
metadata endpoint hands out (issue 15).

MinIO's own STS (AssumeRole, SigV4-signed with the MinIO user's keys, via
tests/harness/sts.py) mints real temporary credentials that MinIO enforces.
They are served to s3lect

  - by a container-credentials endpoint of the test's own
    (AWS_CONTAINER_CREDENTIALS_FULL_URI on 127.0.0.1 with
    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, as EKS Pod Identity does), and
  - by AWS's EC2 metadata mock in IMDSv2-only mode
    (AWS_EC2_METADATA_SERVICE_ENDPOINT pointing at it), configured to serve
    exactly these credentials.

s3lect gets no other credentials (no AWS_ACCESS_KEY_ID, HOME without
~/.aws), becomes leader through `s3lect run`, and `s3lect whoami` names the
source. A control serves the same keys with a damaged session token: MinIO
refuses them, so the leadership above came from the served credentials.
No log or output holds a secret or a token.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from harness.cli import Node, wait_for  # noqa: E402
from harness.container_creds import ContainerCredsServer  # noqa: E402
from harness.credtest import container_answer, no_secrets  # noqa: E402
from harness.imds import ImdsMock, ImdsMockMissing, find_imds_mock  # noqa: E402
from harness.sts import assume_role  # noqa: E402

ROLE_ARN = "arn:aws:iam::123456789012:role/s3lect-e2e-task"


@pytest.fixture
def sts_creds(minio) -> dict:
    """Fresh temporary credentials from MinIO's STS (15 minutes)."""
    return assume_role(minio.endpoint, minio.access_key, minio.secret_key)


@pytest.fixture
def mock_binary() -> str:
    try:
        return find_imds_mock()
    except ImdsMockMissing as e:  # never a silent skip: say why
        pytest.skip(f"the EC2 metadata mock is not available: {e}")


def base_env(clean_env: dict[str, str], minio) -> dict[str, str]:
    env = dict(clean_env)
    env.update(AWS_ENDPOINT_URL_S3=minio.endpoint, AWS_REGION=minio.region)
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        env.pop(k, None)
    return env


def whoami(bin_: Path, lock: str, env: dict[str, str]) -> tuple[dict, str]:
    r = subprocess.run([str(bin_), "whoami", lock, "--json"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, f"whoami failed ({r.returncode}): {r.stdout} {r.stderr}"
    return json.loads(r.stdout), r.stdout + r.stderr


def whoami_fails(bin_: Path, lock: str, env: dict[str, str], *wants: str) -> str:
    """whoami exits 1 with a message holding every one of wants; returns its output."""
    r = subprocess.run([str(bin_), "whoami", lock], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    both = r.stdout + r.stderr
    assert all(w in both for w in wants), both
    return both


def check_store(bin_: Path, lock: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_), "check-store", lock, "--racers", "2", "--rounds", "1"],
                          env=env, capture_output=True, text=True, timeout=120)


def lead_once(bin_: Path, tmp: Path, lock: str, env: dict[str, str]) -> str:
    """Runs one node until its command starts as leader; returns its log."""
    node = Node(bin_, tmp, lock, "meta-1", env)
    try:
        wait_for(lambda: node.leading() and node.cmd_wrote_start(), 30,
                 f"leadership on metadata credentials; log:\n{node.text()}")
        assert node.terms() and node.terms()[0] >= 1
        return node.text()
    finally:
        node.stop()


def test_run_on_container_credentials(s3lect_bin, minio, sts_creds, clean_env, tmp_path):
    token = "pod-identity-" + secrets.token_urlsafe(24)
    token_file = tmp_path / "eks-pod-identity-token"
    token_file.write_text(token + "\n")
    served = container_answer(sts_creds, ROLE_ARN)
    lock = f"s3://{minio.bucket}/metadata-creds/container-{secrets.token_hex(4)}.json"
    with ContainerCredsServer(creds=served, token=token) as srv:
        env = base_env(clean_env, minio)
        env.update(AWS_CONTAINER_CREDENTIALS_FULL_URI=srv.url("/creds"),
                   AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file),
                   AWS_EC2_METADATA_DISABLED="true")
        info, out = whoami(s3lect_bin, lock, env)
        assert "container" in info["source"] and "AWS_CONTAINER_CREDENTIALS_FULL_URI" in info["source"]
        assert info["usable"] is True, info
        assert info["principal"] == ROLE_ARN
        assert info["expires"][:19] == sts_creds["Expiration"][:19]
        texts = [out]

        asked = srv.count
        texts.append(lead_once(s3lect_bin, tmp_path, lock, env))
        assert srv.count > asked, "s3lect run did not ask the container endpoint"

        # Control: the same keys with a damaged session token are refused by
        # MinIO, so the credentials above were the ones that worked.
        bad = dict(served, Token=served["Token"][:-6] + "AAAAAA")
        srv.set_creds(bad)
        r = check_store(s3lect_bin, lock, env)
        assert r.returncode != 0, f"check-store passed with a damaged token: {r.stdout}"
        texts += [r.stdout, r.stderr]

        # A token the endpoint refuses: one clear line, not a crash.
        token_file.write_text("not-the-token")
        texts.append(whoami_fails(s3lect_bin, lock, env, "HTTP 401",
                                  "AWS_CONTAINER_AUTHORIZATION_TOKEN"))
    no_secrets(texts, [sts_creds["SecretAccessKey"], sts_creds["SessionToken"], token,
                       bad["Token"]])


def test_run_on_instance_metadata(s3lect_bin, minio, sts_creds, clean_env, tmp_path, mock_binary):
    served = {
        "Code": "Success",
        "LastUpdated": sts_creds["Expiration"],
        "Type": "AWS-HMAC",
        "AccessKeyId": sts_creds["AccessKeyId"],
        "SecretAccessKey": sts_creds["SecretAccessKey"],
        "Token": sts_creds["SessionToken"],
        "Expiration": sts_creds["Expiration"],
    }
    lock = f"s3://{minio.bucket}/metadata-creds/imds-{secrets.token_hex(4)}.json"
    with ImdsMock(creds=served, role="s3lect-e2e-instance-role", region=minio.region,
                  v2_only=True, binary=mock_binary) as mock:
        env = base_env(clean_env, minio)
        env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = mock.endpoint
        info, out = whoami(s3lect_bin, lock, env)
        assert "instance metadata" in info["source"], info
        assert info["usable"] is True, info
        assert info["principal"] == "s3lect-e2e-instance-role"
        assert info["expires"][:19] == sts_creds["Expiration"][:19]
        texts = [out, lead_once(s3lect_bin, tmp_path, lock, env)]

    # IMDSv1 fallback disabled and nothing answering the token request: one
    # clear line naming instance metadata, exit 1.
    with ContainerCredsServer() as not_imds:  # answers PUT with 405
        env = base_env(clean_env, minio)
        env.update(AWS_EC2_METADATA_SERVICE_ENDPOINT=not_imds.base,
                   AWS_EC2_METADATA_V1_DISABLED="true")
        texts.append(whoami_fails(s3lect_bin, lock, env, "AWS_EC2_METADATA_V1_DISABLED",
                                  "HTTP 405"))
    no_secrets(texts, [sts_creds["SecretAccessKey"], sts_creds["SessionToken"]])

# SPDX-License-Identifier: Apache-2.0
"""Helpers of the credential tests (tests/s3/test_s3_creds.py,
tests/s3/test_s3_metadata_creds.py, tests/python/test_credentials.py): secrets
never in captured output, a credential_process minting MinIO credentials,
and STS credentials in the container endpoint's answer format.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable, Optional

STS_PY = Path(__file__).resolve().parent / "sts.py"


def no_secrets(texts: Iterable[str], values: Iterable[Optional[str]]) -> None:
    """Fails when any non-empty value appears in any of the texts (the
    message never quotes either)."""
    texts = list(texts)
    for v in values:
        if not v:
            continue
        for t in texts:
            assert v not in t, "a secret or session token appears in the captured output"


def write_mint_profile(tmp_path: Path, minio: Any, report_seconds: Optional[float]) -> Path:
    """Profile 'minted' in tmp_path/config: a credential_process that mints
    MinIO credentials (AssumeRole with the root user's keys; reported to
    expire report_seconds after each run when given) and appends what it
    handed out to a count file; returns that file's path."""
    count = tmp_path / "minted"
    script = tmp_path / "mint.sh"
    extra = f" --report-seconds {report_seconds}" if report_seconds else ""
    script.write_text(
        "#!/bin/sh\n"
        f"export STS_ACCESS_KEY='{minio.access_key}' STS_SECRET_KEY='{minio.secret_key}'\n"
        f"export STS_COUNT_FILE='{count}'\n"
        f"exec '{sys.executable}' '{STS_PY}' process {minio.endpoint}{extra}\n"
    )
    script.chmod(0o700)
    (tmp_path / "config").write_text(f"[profile minted]\ncredential_process = {script}\n")
    return count


def container_answer(sts: dict, role_arn: str) -> dict:
    """STS credentials (assume_role's dict) as a container-credentials
    endpoint serves them."""
    return {
        "AccessKeyId": sts["AccessKeyId"],
        "SecretAccessKey": sts["SecretAccessKey"],
        "Token": sts["SessionToken"],
        "Expiration": sts["Expiration"],
        "RoleArn": role_arn,
    }

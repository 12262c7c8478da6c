# SPDX-License-Identifier: Apache-2.0
"""Environments for the store tests' nodes: the parent's, without any AWS_,
S3LECT_ or PG variable of the machine, plus the server's own."""

from __future__ import annotations

import os


_GCP_VARS = ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_CONFIG",
             "GCE_METADATA_HOST", "STORAGE_EMULATOR_HOST")


def _base() -> dict[str, str]:
    # S3LECT_NEW_LOCK_WAIT stays: tests/conftest.py says why.
    return {k: v for k, v in os.environ.items()
            if (not k.startswith(("AWS_", "S3LECT_", "PG", "AZURE_")) and k not in _GCP_VARS)
            or k == "S3LECT_NEW_LOCK_WAIT"}


def gcs_env(server) -> dict[str, str]:
    """For fake-gcs-server: its endpoint as STORAGE_EMULATOR_HOST (no token)."""
    env = _base()
    env.update(server.env())
    return env


def redis_env(server) -> dict[str, str]:
    """For redis-server: the ACL user's password (S3LECT_REDIS_PASSWORD) and,
    with TLS, the CA (S3LECT_TEST_REDIS_CA_FILE, for --ca-file)."""
    env = _base()
    env.update(server.env())
    return env


def ddb_env(server) -> dict[str, str]:
    """For an AWS server (DynamoDB Local, moto): its credentials and endpoint."""
    env = _base()
    env.update(server.env())
    return env


def pg_env(server) -> dict[str, str]:
    """For PostgreSQL: nothing but the URL (no PG* variable)."""
    return _base()


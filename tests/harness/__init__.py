# SPDX-License-Identifier: Apache-2.0
"""Test harness: real S3 servers (MinIO, moto) on loopback, a small S3 client, CLI helpers."""

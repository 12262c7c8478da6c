# SPDX-License-Identifier: Apache-2.0
"""A malformed AWS credentials file is not silent (issue 26 item 9).

The MinIO keys are in a shared credentials file (AWS_SHARED_CREDENTIALS_FILE)
with one stray line. `s3lect status` still works with the keys and prints one
warning line on stderr that names the file and the line, never the line's
text; `s3lect run --metrics-listen` counts it in
s3lect_credential_file_errors_total{file="credentials"}. Without a usable
profile the error names the file's problem instead of "no credentials".
Every process started is stopped.
"""
from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import urllib.request

import pytest

from harness.cli import run, wait_for


@pytest.fixture
def creds_env(minio, clean_env, tmp_path):
    env = {k: v for k, v in dict(clean_env, **minio.env()).items()
           if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")}
    path = tmp_path / "creds"
    path.write_text("[default]\n"
                    f"aws_access_key_id = {minio.access_key}\n"
                    "stray SECRETWORD line\n"
                    f"aws_secret_access_key = {minio.secret_key}\n")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(path)
    env["AWS_CONFIG_FILE"] = str(tmp_path / "no-config")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env, path


def test_status_warns_once_naming_file_and_line(creds_env, minio, s3lect_bin):
    env, path = creds_env
    lock = f"s3://{minio.bucket}/cli/credfile-{secrets.token_hex(4)}.json"
    r = run([str(s3lect_bin), "status", lock], env, timeout=30)
    assert r.returncode == 3 and "no lock record yet" in r.stdout, (r.stdout, r.stderr)
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1, r.stderr
    assert f"{path} line 3: expected 'key = value'" in warnings[0], warnings
    assert "SECRETWORD" not in r.stderr and minio.secret_key not in r.stderr


def test_no_profile_names_the_problem(creds_env, minio, s3lect_bin):
    env, path = creds_env
    path.write_text(f"aws_access_key_id = {minio.access_key}\n"
                    f"aws_secret_access_key = {minio.secret_key}\n")
    r = run([str(s3lect_bin), "status", f"s3://{minio.bucket}/x.json"], env, timeout=30)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"{path} line 1: 'key = value' before any [section] header" in r.stderr, r.stderr
    assert minio.secret_key not in r.stderr and minio.access_key not in r.stderr


def test_run_counts_it_in_a_metric(creds_env, minio, s3lect_bin):
    env, _ = creds_env
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lock = f"s3://{minio.bucket}/cli/credfile-{secrets.token_hex(4)}.json"
    p = subprocess.Popen([str(s3lect_bin), "run", "--lock", lock, "--id", "c1",
                          "--lease-timeout", "3s", "--metrics-listen", f"127.0.0.1:{port}",
                          "--", "sleep", "60"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        def scrape():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as r:
                    text = r.read().decode()
            except OSError:
                return None
            m = re.search(r'^s3lect_credential_file_errors_total\{file="credentials"\} (\d+)$',
                          text, re.M)
            return m and int(m.group(1)) >= 1 and re.search(r'^s3lect_leader\{.*\} 1$', text, re.M)
        wait_for(scrape, 20, "a leader whose scrape counts the credentials file's error")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate(timeout=10)
    assert "line 3: expected 'key = value'" in err, err
    assert "SECRETWORD" not in err and minio.secret_key not in err

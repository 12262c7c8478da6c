# SPDX-License-Identifier: Apache-2.0
"""The S3 store against real servers: MinIO (checks signatures) and moto.

Each test drives one store operation through tests/c/s3_probe (the C store,
not a Python reimplementation) and checks the answer, and where it matters
what landed in the bucket, read back with the tests' own signed client.
"""

from __future__ import annotations

import json
import secrets
import socket
from pathlib import Path

import pytest

from harness.cli import probe

RECORD = '{"leaderID":"n1","leaderAddr":"","lastUpdated":"2026-01-01T00:00:00.000Z","term":1}'


def key(name: str) -> str:
    return f"store/{name}-{secrets.token_hex(4)}.json"


def env_for(server, clean_env: dict[str, str], **overrides: str) -> dict[str, str]:
    env = dict(clean_env)
    env.update(
        AWS_ACCESS_KEY_ID=server.access_key,
        AWS_SECRET_ACCESS_KEY=server.secret_key,
        AWS_REGION="us-east-1",
        AWS_ENDPOINT_URL_S3=server.endpoint,
    )
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def test_get_missing_key_is_not_found(s3server, s3_probe_bin, clean_env):
    r = probe(s3_probe_bin, env_for(s3server, clean_env), "get", f"s3://{s3server.bucket}/{key('missing')}")
    assert r["outcome"] == "NOT_FOUND", r
    assert r["http_status"] == 404


def test_create_read_and_compare_and_swap(s3server, s3_probe_bin, clean_env):
    env = env_for(s3server, clean_env)
    k = key("cas")
    url = f"s3://{s3server.bucket}/{k}"

    created = probe(s3_probe_bin, env, "put", url, "--body", RECORD)
    assert created["outcome"] == "OK", created
    etag1 = created["etag"]
    assert etag1.startswith('"') and etag1.endswith('"'), f"ETag kept with its quotes: {etag1}"

    # What landed in the bucket, read by an independent client.
    obj = s3server.client().get(s3server.bucket, k)
    assert obj.status == 200 and obj.body.decode() == RECORD
    assert obj.etag == etag1
    assert obj.headers.get("content-type", "").startswith("application/json")

    got = probe(s3_probe_bin, env, "get", url)
    assert got["outcome"] == "OK" and got["body"] == RECORD and got["etag"] == etag1, got

    again = probe(s3_probe_bin, env, "put", url, "--body", "{}")
    assert again["outcome"] == "PRECONDITION", f"second create-if-absent must lose: {again}"
    assert again["http_status"] in (409, 412)

    rec2 = RECORD.replace('"term":1', '"term":2')
    swapped = probe(s3_probe_bin, env, "put", url, "--body", rec2, "--if-match", etag1)
    assert swapped["outcome"] == "OK", swapped
    assert swapped["etag"] != etag1

    stale = probe(s3_probe_bin, env, "put", url, "--body", "{}", "--if-match", etag1)
    assert stale["outcome"] == "PRECONDITION", f"a stale If-Match must lose: {stale}"
    assert s3server.client().get(s3server.bucket, k).body.decode() == rec2, "stale write changed nothing"


def test_if_match_on_missing_key_creates_nothing(s3server, s3_probe_bin, clean_env):
    env = env_for(s3server, clean_env)
    k = key("ifmatch-missing")
    r = probe(s3_probe_bin, env, "put", f"s3://{s3server.bucket}/{k}", "--body", "{}",
              "--if-match", '"0123456789abcdef0123456789abcdef"')
    assert r["outcome"] in ("PRECONDITION", "NOT_FOUND"), r
    assert s3server.client().get(s3server.bucket, k).status == 404


def test_keys_with_special_characters_are_signed_and_stored_verbatim(s3server, s3_probe_bin, clean_env):
    """S3 signs the path exactly as sent: spaces, '+', unicode, '=' and '&' in keys."""
    env = env_for(s3server, clean_env)
    k = f"store/sp ace+plus/ü=eq&amp$-{secrets.token_hex(3)}.json"
    r = probe(s3_probe_bin, env, "put", f"s3://{s3server.bucket}/{k}", "--body", RECORD)
    assert r["outcome"] == "OK", r
    obj = s3server.client().get(s3server.bucket, k)
    assert obj.status == 200 and obj.body.decode() == RECORD, "stored under the exact key"


def test_missing_bucket_is_fatal_and_named(s3server, s3_probe_bin, clean_env):
    bucket = f"s3lect-no-such-{secrets.token_hex(4)}"
    for op, extra in (("get", []), ("put", ["--body", "{}"])):
        r = probe(s3_probe_bin, env_for(s3server, clean_env), op, f"s3://{bucket}/lock.json", *extra)
        assert r["outcome"] == "FATAL", r
        assert f"bucket '{bucket}' does not exist" in r["message"], r["message"]


def test_wrong_secret_is_auth_with_a_clear_message(minio, s3_probe_bin, clean_env):
    wrong = "wrong-" + secrets.token_hex(10)
    env = env_for(minio, clean_env, AWS_SECRET_ACCESS_KEY=wrong)
    for op, extra, action in (("get", [], "s3:GetObject"), ("put", ["--body", "{}"], "s3:PutObject")):
        r = probe(s3_probe_bin, env, op, f"s3://{minio.bucket}/{key('auth')}", *extra)
        assert r["outcome"] == "AUTH", r
        msg = r["message"]
        assert "SignatureDoesNotMatch" in msg and "secret" in msg and action in msg, msg
        assert minio.bucket in msg and "AWS_ACCESS_KEY_ID" in msg  # where the credentials came from
        assert wrong not in msg and minio.secret_key not in msg and "Signature=" not in msg, msg


def test_unknown_access_key_is_auth(minio, s3_probe_bin, clean_env):
    env = env_for(minio, clean_env, AWS_ACCESS_KEY_ID="AKIDUNKNOWN0000")
    r = probe(s3_probe_bin, env, "get", f"s3://{minio.bucket}/{key('akid')}")
    assert r["outcome"] == "AUTH", r
    assert "AKIDUNKNOWN0000" in r["message"] and "InvalidAccessKeyId" in r["message"], r["message"]


def test_credentials_from_a_shared_credentials_file(minio, s3_probe_bin, clean_env, tmp_path):
    creds = tmp_path / "creds"
    creds.write_text(
        f"[ci]\naws_access_key_id = {minio.access_key}\naws_secret_access_key = {minio.secret_key}\n"
    )
    conf = tmp_path / "config"
    conf.write_text(f"[profile ci]\nregion = us-east-1\nendpoint_url = {minio.endpoint}\n")
    env = dict(clean_env, AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_CONFIG_FILE=str(conf),
               AWS_PROFILE="ci")
    k = key("profile")
    r = probe(s3_probe_bin, env, "put", f"s3://{minio.bucket}/{k}", "--body", RECORD)
    assert r["outcome"] == "OK", f"profile credentials and endpoint_url from the files: {r}"
    assert minio.client().get(minio.bucket, k).status == 200


def test_endpoint_precedence(minio, s3_probe_bin, clean_env):
    """AWS_ENDPOINT_URL works; AWS_ENDPOINT_URL_S3 beats it; --endpoint beats both."""
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    base = env_for(minio, clean_env, AWS_ENDPOINT_URL_S3=None)
    url = f"s3://{minio.bucket}/{key('endpoint')}"
    r = probe(s3_probe_bin, dict(base, AWS_ENDPOINT_URL=minio.endpoint), "get", url)
    assert r["outcome"] == "NOT_FOUND", r
    r = probe(s3_probe_bin, dict(base, AWS_ENDPOINT_URL=dead, AWS_ENDPOINT_URL_S3=minio.endpoint), "get", url)
    assert r["outcome"] == "NOT_FOUND", r
    r = probe(s3_probe_bin, dict(base, AWS_ENDPOINT_URL_S3=dead), "get", url, "--endpoint", minio.endpoint)
    assert r["outcome"] == "NOT_FOUND", r


def test_unreachable_endpoint_is_transient(s3_probe_bin, clean_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(clean_env, AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s",
               AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{port}")
    r = probe(s3_probe_bin, env, "get", "s3://bucket/lock.json", "--timeout", "3000")
    assert r["outcome"] == "TRANSIENT", r
    assert f"127.0.0.1:{port}" in r["message"]


def test_no_credentials_fail_at_open_with_what_to_set(s3_probe_bin, clean_env):
    env = dict(clean_env, AWS_ENDPOINT_URL_S3="http://127.0.0.1:9")
    r = probe(s3_probe_bin, env, "get", "s3://bucket/lock.json")
    assert r.get("open_error") == -7, r  # S3LECT_EAUTH
    assert "AWS_ACCESS_KEY_ID" in r["message"] and "AWS_SECRET_ACCESS_KEY" in r["message"], r


def test_store_answers_are_json_bodies_of_the_lock(minio, s3_probe_bin, clean_env, tmp_path):
    """Bodies up to the record limit go through unchanged (64 KiB record)."""
    body = json.dumps({"leaderID": "x" * 60000, "term": 1})
    f = tmp_path / "body.json"
    f.write_text(body)
    env = env_for(minio, clean_env)
    url = f"s3://{minio.bucket}/{key('big')}"
    r = probe(s3_probe_bin, env, "put", url, "--body-file", str(f))
    assert r["outcome"] == "OK", r
    got = probe(s3_probe_bin, env, "get", url)
    assert got["outcome"] == "OK" and got["body"] == body

# SPDX-License-Identifier: Apache-2.0
"""Settings: validation errors, durations, update_config, from_env, store errors."""

from __future__ import annotations

import importlib.metadata
from datetime import timedelta

import pytest

import s3lect
from pyutil import FAST


def test_version_matches_core_and_package():
    assert s3lect.__version__ == s3lect.core_version() == s3lect._core.S3LECT_VERSION_STRING
    assert importlib.metadata.version("s3lect") == s3lect.__version__, (
        "bindings/python/pyproject.toml's version differs from S3LECT_VERSION_STRING"
    )


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(lease_timeout=-1), ["lease_timeout", "negative"]),
        (dict(renew_interval=-0.5), ["renew_interval", "negative"]),
        (dict(frequent_interval=timedelta(seconds=-3)), ["frequent_interval", "negative"]),
        (dict(lease_timeout=10, renew_deadline=10, renew_interval=2), ["renew_deadline", "lease_timeout"]),
        (dict(lease_timeout=10, renew_deadline=12, renew_interval=2), ["renew_deadline", "lease_timeout"]),
        (dict(lease_timeout=10, renew_deadline=4, renew_interval=5), ["renew_interval", "renew_deadline"]),
        (dict(lease_timeout="15"), ["lease_timeout", "str"]),
        (dict(lease_timeout=float("nan")), ["lease_timeout", "finite"]),
        (dict(peer_mode="yes"), ["peer_mode", "True or False"]),
    ],
)
def test_bad_settings_raise_config_error(kwargs, words):
    with pytest.raises(s3lect.ConfigError) as ei:
        s3lect.Elector("s3://bucket/leader.json", server_id="a", **kwargs)
    msg = str(ei.value)
    for w in words:
        assert w in msg, f"message {msg!r} does not mention {w!r}"
    assert isinstance(ei.value, ValueError)  # a ConfigError is also a ValueError


def test_empty_server_id():
    with pytest.raises(s3lect.ConfigError, match="server_id") as ei:
        s3lect.Elector("s3://bucket/leader.json", server_id="")
    assert ei.value.code == s3lect._core.S3LECT_EINVAL


@pytest.mark.parametrize("lock", ["", "ftp://host/key", "s3://", "s3://bucket", "s3:///key"])
def test_bad_lock_url(lock):
    with pytest.raises(s3lect.ConfigError) as ei:
        s3lect.Elector(lock, server_id="a")
    assert "lock" in str(ei.value).lower(), str(ei.value)


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        s3lect.Elector("s3://b/k", server_id="a", lease=3)  # type: ignore[call-arg]


def test_durations_accept_seconds_and_timedelta(tmp_path):
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a",
                        lease_timeout=timedelta(seconds=9), renew_deadline=6,
                        renew_interval=1.5, frequent_interval=0.25, max_clock_skew=0)
    cfg = el.get_config()
    assert cfg["lease_timeout"] == 9.0
    assert cfg["renew_deadline"] == 6.0
    assert cfg["renew_interval"] == 1.5
    assert cfg["frequent_interval"] == 0.25
    assert cfg["max_clock_skew"] == 0.0
    assert cfg["server_id"] == "a"


def test_lease_timeout_alone_scales_renew_settings(tmp_path):
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a", lease_timeout=3)
    cfg = el.get_config()
    assert cfg["renew_deadline"] == 2.0 and cfg["renew_interval"] == 1.0


def test_secrets_are_not_readable_back(tmp_path):
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a",
                        access_key_id="AKIDEXAMPLE", secret_access_key="very-secret")
    cfg = el.get_config()
    assert cfg["secret_access_key"] == ""
    assert "very-secret" not in repr(el) and "very-secret" not in repr(cfg)


def test_update_config(electors, tmp_path):
    el = electors(f"file://{tmp_path}/l", server_id="a").start()
    assert el.wait_for_leadership(timeout=10)
    el.update_config(lease_timeout=6, renew_deadline=4, renew_interval=timedelta(seconds=1))
    cfg = el.get_config()
    assert (cfg["lease_timeout"], cfg["renew_deadline"], cfg["renew_interval"]) == (6, 4, 1)
    with pytest.raises(s3lect.ConfigError, match="renew_deadline"):
        el.update_config(renew_deadline=7)  # not < lease_timeout 6
    assert el.get_config()["renew_deadline"] == 4.0, "a rejected update changed something"
    with pytest.raises(s3lect.ConfigError, match="timing"):
        el.update_config(server_id="b")  # type: ignore[arg-type]
    assert el.wait_for_next_election(timeout=10) and el.is_leader


def test_from_env(electors, minio, s3_lock, monkeypatch):
    # The store's own variables come from the process's environment, where
    # libs3lect reads them when the store opens (for s3lect run alike); the
    # S3LECT_* ones from the mapping given.
    for var, value in (("AWS_ENDPOINT_URL", minio.endpoint), ("AWS_ACCESS_KEY_ID", minio.access_key),
                       ("AWS_SECRET_ACCESS_KEY", minio.secret_key), ("AWS_REGION", "us-east-1")):
        monkeypatch.setenv(var, value)
    env = {
        "S3LECT_LOCK": s3_lock,
        "S3LECT_SERVER_ID": "env-node",
        "S3LECT_LEASE_TIMEOUT": "3s",
        "S3LECT_RENEW_DEADLINE": "2000ms",
        "S3LECT_RENEW_INTERVAL": "500ms",
    }
    el = s3lect.Elector.from_env(environ=env, frequent_interval=0.5)
    try:
        assert el.server_id == "env-node" and el.lock == s3_lock
        cfg = el.get_config()
        assert (cfg["lease_timeout"], cfg["renew_deadline"], cfg["renew_interval"]) == (3, 2, 0.5)
        assert not cfg["endpoint"], "AWS_ENDPOINT_URL is the store's, not an explicit setting"
        el.start()
        assert el.wait_for_leadership(timeout=15)
    finally:
        el.stop()
    with pytest.raises(s3lect.ConfigError, match="S3LECT_LOCK"):
        s3lect.Elector.from_env(environ={})
    with pytest.raises(s3lect.ConfigError, match="S3LECT_LEASE_TIMEOUT"):
        s3lect.Elector.from_env("s3://b/k", environ={"S3LECT_LEASE_TIMEOUT": "soon"})
    # The process's environment, by default: S3LECT_ID is S3LECT_SERVER_ID's alias.
    monkeypatch.setenv("S3LECT_ID", "short-name")
    monkeypatch.setenv("S3LECT_LEASE_TIMEOUT", "4s")
    el = s3lect.Elector.from_env(s3_lock)
    try:
        assert el.server_id == "short-name" and el.get_config()["lease_timeout"] == 4
    finally:
        el.close()


def test_wrong_credentials_raise_auth_error(electors, minio, s3_settings):
    bad = dict(s3_settings, secret_access_key="wrong-" + minio.secret_key)
    el = electors(f"s3://{minio.bucket}/py/auth.json", server_id="a", **bad).start()
    with pytest.raises(s3lect.AuthError) as ei:
        el.wait_for_leadership(timeout=20)
    assert isinstance(ei.value, s3lect.StoreError) and isinstance(ei.value, PermissionError)
    assert minio.secret_key not in str(ei.value), "the secret leaked into an error message"
    st = el.status()
    assert st.last_error_code == s3lect._core.S3LECT_EAUTH and st.consecutive_failures > 0
    assert not el.is_leader


def test_unknown_access_key_raises_auth_error(electors, minio, s3_settings):
    bad = dict(s3_settings, access_key_id="NOSUCHKEY")
    el = electors(f"s3://{minio.bucket}/py/auth2.json", server_id="a", **bad).start()
    with pytest.raises(s3lect.AuthError):
        el.wait_for_leadership(timeout=20)


def test_missing_bucket_raises_store_error(electors, s3_settings):
    el = electors("s3://no-such-bucket-s3lect/leader.json", server_id="a", **s3_settings).start()
    with pytest.raises(s3lect.StoreError) as ei:
        el.wait_for_leadership(timeout=20)
    assert isinstance(ei.value, s3lect.FatalStoreError), repr(ei.value)
    assert "bucket" in str(ei.value).lower(), str(ei.value)


def test_unreachable_endpoint_keeps_retrying(electors, s3_lock):
    import socket

    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    el = electors(s3_lock, server_id="a", endpoint=f"http://127.0.0.1:{port}",
                  access_key_id="x", secret_access_key="y", request_timeout=1.0).start()
    assert el.wait_for_leadership(timeout=2) is False  # transient: no exception, just no lead
    st = el.status()
    assert st.last_error_code == s3lect._core.S3LECT_ETRANSIENT, st
    assert st.consecutive_failures >= 1 and not st.is_leader


def test_no_credentials_at_all_is_an_auth_error_at_construction(monkeypatch, tmp_path):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(s3lect.AuthError, match="AWS_ACCESS_KEY_ID"):
        s3lect.Elector("s3://bucket/leader.json", server_id="a", **FAST)


@pytest.mark.parametrize("lock", ["dynamodb://tbl/k", "route53://Z0123456789ABC/n.example.com",
                                  "s3://bkt/k"])
def test_from_env_leaves_the_stores_variables_to_the_library(lock):
    """from_env turns no store variable into an explicit setting: the library
    reads AWS_ENDPOINT_URL_<STORE>, AWS_ENDPOINT_URL and AWS_REGION for the
    lock's own store when it opens, as for `s3lect run` (issue 40 item 4:
    Python's own map gave a DynamoDB lock AWS_ENDPOINT_URL_S3 as its
    endpoint, where `s3lect run` with the same environment did not)."""
    env = {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:2",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:4", "AWS_REGION": "eu-west-1",
           "AWS_ACCESS_KEY_ID": "AKIDTHROWAWAY", "AWS_SECRET_ACCESS_KEY": "throwaway"}
    for given in ({"S3LECT_LOCK": lock, **env}, env):
        el = s3lect.Elector.from_env(None if "S3LECT_LOCK" in given else lock,
                                     environ=given, server_id="a", access_key_id="AKIDTHROWAWAY",
                                     secret_access_key="throwaway", region="us-east-1")
        try:
            cfg = el.get_config()
            assert not cfg.get("endpoint") and el.lock == lock, (lock, cfg)
        finally:
            el.close()

# SPDX-License-Identifier: Apache-2.0
"""boto3-style keyword aliases: endpoint_url, region_name, aws_access_key_id,
aws_secret_access_key, aws_session_token, profile_name."""

from __future__ import annotations

import pytest

import s3lect


def test_aliases_set_the_canonical_settings(tmp_path):
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a",
                        endpoint_url="http://127.0.0.1:9", region_name="eu-west-3",
                        aws_access_key_id="AKIDALIAS", aws_secret_access_key="s3cr3t",
                        aws_session_token="tok", profile_name="dev")
    cfg = el.get_config()
    assert cfg["endpoint"] == "http://127.0.0.1:9"
    assert cfg["region"] == "eu-west-3"
    assert cfg["access_key_id"] == "AKIDALIAS"
    assert cfg["profile"] == "dev"


def test_aliases_reach_s3(electors, s3_lock, minio):
    el = electors(s3_lock, server_id="a", endpoint_url=minio.endpoint, region_name="us-east-1",
                  aws_access_key_id=minio.access_key,
                  aws_secret_access_key=minio.secret_key).start()
    assert el.wait_for_leadership(timeout=15)


def test_same_value_under_both_names_is_fine(tmp_path):
    el = s3lect.Elector(f"file://{tmp_path}/l", server_id="a", endpoint="http://h:1",
                        endpoint_url="http://h:1", region="r", region_name="r")
    assert el.get_config()["endpoint"] == "http://h:1"


@pytest.mark.parametrize("alias,name", [
    ("endpoint_url", "endpoint"),
    ("region_name", "region"),
    ("aws_access_key_id", "access_key_id"),
    ("profile_name", "profile"),
])
def test_alias_and_name_with_different_values_is_an_error(tmp_path, alias, name):
    with pytest.raises(s3lect.ConfigError) as info:
        s3lect.Elector(f"file://{tmp_path}/l", server_id="a", **{alias: "one", name: "two"})
    msg = str(info.value)
    assert alias in msg and name in msg and "'one'" in msg and "'two'" in msg


@pytest.mark.parametrize("alias,name", [
    ("aws_secret_access_key", "secret_access_key"),
    ("aws_session_token", "session_token"),
])
def test_secret_conflicts_do_not_show_the_values(tmp_path, alias, name):
    with pytest.raises(s3lect.ConfigError) as info:
        s3lect.Elector(f"file://{tmp_path}/l", server_id="a",
                       **{alias: "secret-one", name: "secret-two"})
    msg = str(info.value)
    assert alias in msg and name in msg
    assert "secret-one" not in msg and "secret-two" not in msg


def test_from_env_accepts_aliases_and_they_override_the_environment(tmp_path):
    environ = {"AWS_ENDPOINT_URL": "http://from-env:1", "AWS_REGION": "env-region"}
    el = s3lect.Elector.from_env(f"file://{tmp_path}/l", environ=environ, server_id="a",
                                 endpoint_url="http://from-kwargs:2", region_name="kw-region")
    cfg = el.get_config()
    assert cfg["endpoint"] == "http://from-kwargs:2"
    assert cfg["region"] == "kw-region"


def test_from_env_refuses_an_alias_and_its_name_with_different_values(tmp_path):
    with pytest.raises(s3lect.ConfigError, match="endpoint_url.*endpoint"):
        s3lect.Elector.from_env(f"file://{tmp_path}/l", environ={}, server_id="a",
                                endpoint="http://a:1", endpoint_url="http://b:2")


def test_unknown_keyword_is_still_a_type_error(tmp_path):
    with pytest.raises(TypeError):
        s3lect.Elector(f"file://{tmp_path}/l", server_id="a", endpoint_uri="http://h:1")

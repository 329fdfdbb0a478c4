"""The object store's settings from the standard AWS variables (python_hooks/project/object_store.py)
and the local server's command line (python_hooks/objectstore/server.py), without a server."""

from __future__ import annotations

import pytest

from python_hooks.objectstore import server
from python_hooks.project import object_store


def test_keys_are_both_variables_or_the_development_ones_and_never_one_alone():
    mine = object_store.keys_from_env({"AWS_ACCESS_KEY_ID": "id-1", "AWS_SECRET_ACCESS_KEY": "secret-1"})
    assert (mine.access_key_id, mine.secret_access_key, mine.development) == ("id-1", "secret-1", False)
    assert "secret-1" not in repr(mine)
    dev = object_store.keys_from_env({})
    assert dev.development and dev.access_key_id == object_store.DEV_ACCESS_KEY_ID
    with pytest.raises(SystemExit, match="AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"):
        object_store.keys_from_env({"AWS_ACCESS_KEY_ID": "id-1"})
    with pytest.raises(SystemExit, match="AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"):
        object_store.keys_from_env({"AWS_SECRET_ACCESS_KEY": "secret-1"})


def test_the_endpoint_prefers_the_s3_variable_and_unset_means_aws():
    assert object_store.endpoint_url({}) is None
    assert object_store.endpoint_url({"AWS_ENDPOINT_URL": "http://a:1"}) == "http://a:1"
    assert object_store.endpoint_url({"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://b:2"}) == (
        "http://b:2"
    )
    assert object_store.region({}) == "us-east-1" and object_store.region({"AWS_REGION": "eu-west-1"}) == "eu-west-1"
    assert object_store.bucket({}) == "cdc-lakehouse" and object_store.bucket({"CDC_S3_BUCKET": "b"}) == "b"


def test_the_server_binds_127_0_0_1_on_its_own_ports_in_its_folder_and_keeps_secrets_off_its_command_line(tmp_path):
    environ = {"CDC_S3_DIR": str(tmp_path), "CDC_S3_PORT": "20100", "AWS_ACCESS_KEY_ID": "id-1"}
    environ["AWS_SECRET_ACCESS_KEY"] = "secret-1"
    config = server.config_from_env(environ)
    assert config.endpoint_url == "http://127.0.0.1:20100"
    assert sorted(config.ports.values()) == [20100, 20101, 20102, 20103, 20104, 30100, 30101, 30102, 30103, 30104]
    command = server.command(config)
    assert f"-dir={tmp_path / 'data'}" in command and "-ip.bind=127.0.0.1" in command and "-ip=127.0.0.1" in command
    assert "-master.telemetry=false" in command
    assert not any("secret-1" in part for part in command)
    with pytest.raises(SystemExit, match="CDC_S3_PORT='x' is not a port number"):
        server.config_from_env({**environ, "CDC_S3_PORT": "x"})

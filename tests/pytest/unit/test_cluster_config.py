"""The cluster's configuration (python_hooks/cluster/), without starting anything: ports and folders
from the environment, Iceberg's commit lock left on, secrets kept off command lines, and the dbt
options a `make run` passes on to every dbt command of the run (python_hooks/commands/run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from python_hooks import cluster
from python_hooks.project.dbt_args import dbt_option, project_dir_of, split_shared_options


def _environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"CDC_CLUSTER_DIR": str(tmp_path / "c"), "CDC_WAREHOUSE": str(tmp_path / "w"), **extra}


def test_ports_and_folders_come_from_the_environment(tmp_path):
    config = cluster.config_from_env(_environ(tmp_path, CDC_THRIFT_PORT="20010", CDC_PG_PORT="25433"))
    assert (config.thrift_port, config.pg_port) == (20010, 25433)
    assert config.ports["CDC_SPARK_MASTER_PORT"] == cluster.PORTS["CDC_SPARK_MASTER_PORT"]
    assert config.master_url == f"spark://127.0.0.1:{cluster.PORTS['CDC_SPARK_MASTER_PORT']}"
    assert config.root == tmp_path / "c" and config.warehouse == str(tmp_path / "w")
    assert config.pid_file("thrift") == tmp_path / "c" / "run" / "thrift.pid"


def test_default_ports_avoid_the_standard_ones():
    assert not set(cluster.PORTS.values()) & {5432, 7077, 8080, 8081, 10000, 4040}


def test_a_port_that_is_not_a_number_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="CDC_PG_PORT='x' is not a port number"):
        cluster.config_from_env(_environ(tmp_path, CDC_PG_PORT="x"))


def test_thrift_server_keeps_the_commit_lock_on_and_the_password_out_of_sight(tmp_path):
    environ = _environ(tmp_path, CDC_METASTORE_PASSWORD="s3cret")
    config = cluster.config_from_env(environ)
    settings = cluster.thrift_settings(config, environ)
    assert not any("lock-enabled" in key for key in settings), "the Iceberg commit lock stays on (its default)"
    assert settings["spark.sql.catalog.spark_catalog"] == "org.apache.iceberg.spark.SparkSessionCatalog"
    assert settings["spark.hadoop.javax.jdo.option.ConnectionURL"].startswith("jdbc:postgresql://127.0.0.1:")
    assert settings["spark.hadoop.javax.jdo.option.ConnectionPassword"] == "s3cret"
    assert int(settings["spark.sql.catalog.spark_catalog.table-default.commit.retry.num-retries"]) > 4
    assert str(cluster.POSTGRES_JDBC_JAR) in settings["spark.driver.extraClassPath"]
    assert "iceberg-spark-runtime" in settings["spark.driver.extraClassPath"]
    # The settings file holding the password is readable by its owner only.
    config.root.mkdir(parents=True)
    path = config.root / "secret.conf"
    cluster.processes.private_file(path, "x")
    assert path.stat().st_mode & 0o077 == 0


def test_run_options_for_every_dbt_command_are_told_from_build_options():
    build, shared = split_shared_options(
        ["--select", "a", "b", "--target", "cluster", "--vars={x: 1}", "--target-path", "t", "--full-refresh"]
    )
    assert build == ["--select", "a", "b", "--full-refresh"]
    assert shared == ["--target", "cluster", "--vars={x: 1}", "--target-path", "t"]
    assert dbt_option(shared, "--target", "-t") == "cluster"
    assert dbt_option(["-t", "local", "--target=cluster"], "--target", "-t") == "cluster"
    assert dbt_option(["--select", "x"], "--target", "-t") is None


def test_project_dir_is_the_option_else_dbts_variable():
    """dbt reads DBT_PROJECT_DIR for every command; the hooks' warehouse seam reads the same project."""
    assert project_dir_of(["--project-dir", "/a"], {"DBT_PROJECT_DIR": "/b"}) == "/a"
    assert project_dir_of(["--target", "local"], {"DBT_PROJECT_DIR": "/b"}) == "/b"
    assert project_dir_of([], {}) is None

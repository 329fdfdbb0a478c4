"""The environment made visible (python_hooks/project/env.py), without Spark: which values apply_defaults()
filled in (CDC_DEFAULTED), describe() and banner(), `python -m python_hooks env` in a subprocess, and
the banner a plain `dbt run` in the venv prints from the start-up hook."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from python_hooks.project import env

PROJECT = Path(__file__).resolve().parents[3]
PATHS = ["DBT_PROFILES_DIR", "CDC_LANDING_ROOT", "CDC_WAREHOUSE"]


def _sources(environ: dict[str, str]) -> dict[str, tuple[str, str]]:
    return {name: (value, source) for name, value, source in env.describe(environ)}


def test_apply_defaults_records_what_it_filled_in():
    environ: dict[str, str] = {}
    env.apply_defaults(environ)
    defaulted = environ[env.DEFAULTED].split(",")
    assert set(PATHS) <= set(defaulted)
    assert environ["CDC_WAREHOUSE"] == str(PROJECT / "data" / "warehouse")
    sources = _sources(environ)
    for name in PATHS:
        assert sources[name] == (environ[name], "default"), name
    assert sources["CDC_TARGET"] == ("local", "default")
    assert sources["CDC_SCHEMA"] == ("lakehouse", "default")


def test_a_value_the_user_set_is_environment_even_when_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    environ = {"CDC_LANDING_ROOT": "raw", "CDC_SCHEMA": "mine", "CDC_TARGET": "local"}
    env.apply_defaults(environ)
    assert environ["CDC_LANDING_ROOT"] == str(tmp_path / "raw")
    assert "CDC_LANDING_ROOT" not in environ[env.DEFAULTED].split(",")
    sources = _sources(environ)
    assert sources["CDC_LANDING_ROOT"] == (str(tmp_path / "raw"), "environment")
    assert sources["CDC_WAREHOUSE"][1] == "default"
    assert sources["CDC_SCHEMA"] == ("mine", "environment")
    assert sources["CDC_TARGET"] == ("local", "environment")


def test_defaults_stay_defaults_when_applied_again_and_in_a_child_process():
    """The start-up hook applies them, then a command does again, then a subprocess inherits them."""
    environ: dict[str, str] = {}
    env.apply_defaults(environ)
    first = dict(environ)
    env.apply_defaults(environ)
    assert environ == first
    child = dict(environ)
    env.apply_defaults(child)
    assert _sources(child)["CDC_WAREHOUSE"] == (str(PROJECT / "data" / "warehouse"), "default")


def test_a_defaulted_warehouse_follows_the_target_and_a_value_set_later_is_the_users(tmp_path):
    environ: dict[str, str] = {}
    env.apply_defaults(environ)
    environ["CDC_TARGET"] = "cluster"  # e.g. a parent process's environment passed to a cluster child
    env.apply_defaults(environ)
    assert _sources(environ)["CDC_WAREHOUSE"] == (str(PROJECT / "data" / "cluster" / "warehouse"), "default")
    environ["CDC_WAREHOUSE"] = str(tmp_path / "w")  # set after the defaults were applied
    env.apply_defaults(environ)
    assert environ["CDC_WAREHOUSE"] == str(tmp_path / "w")
    assert _sources(environ)["CDC_WAREHOUSE"] == (str(tmp_path / "w"), "environment")
    assert "CDC_WAREHOUSE" not in environ[env.DEFAULTED].split(",")


def test_describe_never_shows_the_erasure_secret_and_says_what_is_unset():
    rows = env.describe({"CDC_ERASURE_SECRET": "a-very-secret-value-123"})
    assert [name for name, _, _ in rows] == env.VARIABLES
    assert all("a-very-secret-value-123" not in value for _, value, _ in rows)
    sources = {name: (value, source) for name, value, source in rows}
    assert sources["CDC_ERASURE_SECRET"][1] == "environment"
    assert sources["CDC_WAREHOUSE"] == ("", "unset")  # apply_defaults() never ran: the profile would fail
    assert _sources({})["CDC_ERASURE_SECRET"] == ("", "unset")


def test_banner_local_and_cluster(tmp_path):
    environ: dict[str, str] = {"CDC_LANDING_ROOT": str(tmp_path / "landing")}
    env.apply_defaults(environ)
    line = env.banner(environ)
    assert line == (
        f"target local | warehouse {PROJECT / 'data' / 'warehouse'} (default) | landing {tmp_path / 'landing'}"
        " | schema lakehouse"
    )
    assert "\n" not in line and line.isascii()
    cluster = {**environ, "CDC_TARGET": "cluster", "CDC_THRIFT_PORT": "20010", "CDC_SCHEMA": "team"}
    env.apply_defaults(cluster)
    line = env.banner(cluster)
    assert line.startswith("target cluster | thrift 127.0.0.1:20010 | warehouse ")
    assert f"{PROJECT / 'data' / 'cluster' / 'warehouse'} (default)" in line and line.endswith("| schema team")
    sources = _sources(cluster)
    assert sources["CDC_THRIFT_HOST"] == ("127.0.0.1", "default")
    assert sources["CDC_THRIFT_PORT"] == ("20010", "environment")


def test_banner_without_a_readable_profile_has_no_thrift_part_and_never_raises(tmp_path):
    environ = {"CDC_TARGET": "cluster", "DBT_PROFILES_DIR": str(tmp_path / "nowhere")}
    line = env.banner(environ)
    assert line.startswith("target cluster | warehouse (unset) | landing (unset)")


def test_environ_for_a_target_option():
    environ: dict[str, str] = {}
    env.apply_defaults(environ)
    for args in (["run", "--target", "cluster"], ["show", "-t", "cluster"], ["build", "--target=cluster"]):
        chosen = env.environ_for(args, environ)
        assert chosen["CDC_TARGET"] == "cluster"
        assert chosen["CDC_WAREHOUSE"] == str(PROJECT / "data" / "cluster" / "warehouse")
    assert env.environ_for(["run"], environ) == environ
    assert "CDC_TARGET" not in environ


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["/x/.venv/bin/dbt", "run"], True),
        (["dbt", "--no-use-colors", "build", "--select", "a"], True),
        (["dbt", "show", "--inline", "select 1"], True),
        (["dbt", "source", "freshness"], True),
        (["dbt", "run-operation", "cdc_create_meta_tables"], True),
        (["dbt", "--version"], False),
        (["dbt", "run", "--help"], False),
        (["dbt", "parse"], False),
        (["dbt", "deps"], False),
        (["dbt", "ls"], False),
        (["dbt", "run", "--quiet"], False),
        (["dbt"], False),
        (["/x/.venv/bin/python", "run"], False),
        (["/x/bin/sqlfluff", "lint"], False),
        (["-c"], False),
        ([], False),
    ],
)
def test_which_processes_print_the_banner_at_start_up(argv, expected):
    assert env._dbt_touches_warehouse(argv) is expected


# ------------------------------------------------------------------------------------------ processes


def _child_environ(**extra: str) -> dict[str, str]:
    """This process's environment without the project's variables (as a fresh shell has it)."""
    names = {*env.VARIABLES, env.DEFAULTED, "CDC_THRIFT_HOST", "CDC_THRIFT_PORT"}
    return {**{k: v for k, v in os.environ.items() if k not in names}, **extra}


def _env_command(*args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "python_hooks", "env", *args],
        env=_child_environ(**extra),
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _row(stdout: str, name: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if line.startswith(name + " "))


def test_env_command_says_where_the_warehouse_comes_from(tmp_path):
    unset = _env_command()
    lines = unset.stdout.splitlines()
    assert lines[0].startswith(
        "where each value comes from: environment = you set it, default = python_hooks/project/env.py"
    )
    assert _row(unset.stdout, "CDC_WAREHOUSE") == ["CDC_WAREHOUSE", str(PROJECT / "data" / "warehouse"), "default"]
    assert unset.stderr.splitlines()[0].startswith("target local | warehouse ")  # the banner, on stderr
    assert "(default)" in unset.stderr.splitlines()[0]

    mine = _env_command(CDC_WAREHOUSE=str(tmp_path / "wh"), CDC_ERASURE_SECRET="not-to-be-printed-0000")
    assert _row(mine.stdout, "CDC_WAREHOUSE") == ["CDC_WAREHOUSE", str(tmp_path / "wh"), "environment"]
    assert f"warehouse {tmp_path / 'wh'} | landing" in mine.stderr
    assert "not-to-be-printed" not in mine.stdout + mine.stderr


def test_env_shell_prints_the_old_lines_and_no_banner(tmp_path):
    shell = _env_command("--shell", CDC_WAREHOUSE=str(tmp_path / "wh"), CDC_S3_DIR=str(tmp_path / "no-s3"))
    assert shell.stderr == ""
    jars = PROJECT / "jars" / "lib"
    assert shell.stdout.splitlines() == [
        f"DBT_PROFILES_DIR={PROJECT / 'profiles'}",
        f"CDC_LANDING_ROOT={PROJECT / 'data' / 'landing'}",
        f"CDC_WAREHOUSE={tmp_path / 'wh'}",
        "CDC_TARGET=",
        f"ICEBERG_SPARK_RUNTIME_JAR={jars / 'iceberg-spark-runtime-3.5_2.12-1.12.0.jar'}",
        f"CDC_AWS_JARS={jars / 'iceberg-aws-bundle-1.12.0.jar'},{jars / 'hadoop-aws-3.3.4.jar'},"
        f"{jars / 'aws-java-sdk-bundle-1.12.262.jar'}",
        f"CDC_STATE_DIR={tmp_path / 'wh'}",  # the warehouse's local folder: the warehouse itself here
    ]


# ------------------------------------------------------------------------------------------ the jars


def test_every_jar_of_the_pom_is_named_by_one_variable_and_none_brings_another_hadoop():
    """jars/pom.xml owns the pins; env.py's JAR_VARIABLES names each artifact once. S3A's jars match
    the Hadoop client pyspark ships (hadoop-client-api-<version>.jar)."""
    import pyspark

    pinned = env.pinned_jars()
    named = [artifact for artifacts in env.JAR_VARIABLES.values() for artifact in artifacts]
    assert sorted(named) == sorted(pinned), "each jar of jars/pom.xml belongs to exactly one variable"
    hadoop = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("hadoop-client-api-*.jar"))
    assert [jar.name for jar in hadoop] == [pinned["hadoop-aws"].replace("hadoop-aws", "hadoop-client-api")]
    assert pinned["iceberg-spark-runtime-3.5_2.12"] == "iceberg-spark-runtime-3.5_2.12-1.12.0.jar"


def test_a_missing_jar_folder_says_in_one_line_to_run_make_install(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "JARS_DIR", tmp_path / "lib")
    with pytest.raises(FileNotFoundError) as raised:
        env.spark_jars({})
    message = str(raised.value)
    assert "\n" not in message and f"{tmp_path / 'lib'} is missing: run `make install`" in message
    environ: dict[str, str] = {}
    env.apply_defaults(environ)  # never raises: the jars stay unset and the banner says what to do
    assert not {"ICEBERG_SPARK_RUNTIME_JAR", "CDC_AWS_JARS"} & set(environ)
    assert env.banner(environ).endswith(f"| {message}")
    (tmp_path / "lib").mkdir()
    assert "lacks iceberg-spark-runtime-3.5_2.12-1.12.0.jar" in env.jars_problem({})


def test_the_iceberg_runtime_variable_overrides_the_jar_folder_and_says_so(tmp_path):
    mine = tmp_path / "iceberg-spark-runtime-3.5_2.12-9.9.jar"
    environ = {"ICEBERG_SPARK_RUNTIME_JAR": str(mine)}
    env.apply_defaults(environ)
    jars = env.spark_jars(environ)
    assert jars[0] == mine and [jar.name for jar in jars[1:]] == [
        "iceberg-aws-bundle-1.12.0.jar",
        "hadoop-aws-3.3.4.jar",
        "aws-java-sdk-bundle-1.12.262.jar",
    ]
    sources = _sources(environ)
    assert sources["ICEBERG_SPARK_RUNTIME_JAR"] == (str(mine), "environment")
    assert sources["CDC_AWS_JARS"][1] == "default"


def _start_up_hook_installed() -> bool:
    pth = Path(sysconfig.get_paths()["purelib"]) / env.PTH_NAME
    return pth.is_file() and str(PROJECT) in pth.read_text(encoding="utf-8")


@pytest.mark.skipif(not _start_up_hook_installed(), reason="the venv's start-up hook is not installed (make install)")
def test_a_plain_dbt_command_prints_the_banner_once_from_the_start_up_hook(tmp_path):
    """A stand-in `dbt` script run by the venv's Python: the start-up hook sees argv[0] = .../dbt."""
    fake = tmp_path / "dbt"
    fake.write_text("print('dbt ran')\n", encoding="utf-8")

    def dbt(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(fake), *args],
            env=_child_environ(CDC_LANDING_ROOT=str(tmp_path / "landing")),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )

    run = dbt("run", "--select", "x")
    assert run.stdout == "dbt ran\n"
    assert run.stderr.splitlines() == [
        f"target local | warehouse {PROJECT / 'data' / 'warehouse'} (default) | landing {tmp_path / 'landing'}"
        " | schema lakehouse"
    ]
    assert dbt("show", "--target", "cluster").stderr.startswith("target cluster | thrift 127.0.0.1:10009 | ")
    for quiet in (["--version"], ["parse"], ["ls"], ["run", "--help"], ["deps"]):
        result = dbt(*quiet)
        assert (result.stdout, result.stderr) == ("dbt ran\n", ""), quiet
    plain = subprocess.run(
        [sys.executable, "-c", "print('ok')"], env=_child_environ(), capture_output=True, text=True, check=True
    )
    assert (plain.stdout, plain.stderr) == ("ok\n", "")


def test_a_warehouse_on_s3_keeps_its_uri_and_gets_a_local_folder(tmp_path):
    """An s3a:// warehouse is not a path to make absolute; Derby and the hooks' state go to a local
    folder named after it, which follows the warehouse when it changes, unless you set it."""
    environ = {"CDC_WAREHOUSE": "s3a://bucket/team/warehouse", "CDC_LANDING_ROOT": "s3a://bucket/landing"}
    env.apply_defaults(environ)
    assert environ["CDC_WAREHOUSE"] == "s3a://bucket/team/warehouse"
    assert environ["CDC_LANDING_ROOT"] == "s3a://bucket/landing"
    assert environ["CDC_STATE_DIR"] == str(PROJECT / "data" / "state" / "s3a" / "bucket" / "team" / "warehouse")
    environ["CDC_WAREHOUSE"] = str(tmp_path / "w")  # a child process with another warehouse
    env.apply_defaults(environ)
    assert environ["CDC_STATE_DIR"] == str(tmp_path / "w")
    mine = {"CDC_WAREHOUSE": "s3a://bucket/w", "CDC_STATE_DIR": str(tmp_path / "state")}
    env.apply_defaults(mine)
    assert mine["CDC_STATE_DIR"] == str(tmp_path / "state")
    assert env.state_dir_for("file:///x/wh") == "/x/wh"


def test_on_s3_without_an_endpoint_the_local_servers_variables_are_defaults(tmp_path):
    """No local server running: nothing is filled in (AWS itself). A banner names the endpoint."""
    environ = {"CDC_WAREHOUSE": "s3a://bucket/w", "CDC_S3_DIR": str(tmp_path / "no-server")}
    env.apply_defaults(environ)
    assert not any(name in environ for name in env.S3_VARIABLES)
    assert "S3 AWS" in env.banner(environ)
    environ["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9"
    assert "S3 http://127.0.0.1:9 |" not in env.banner(environ)  # the last part, no separator after it
    assert env.banner(environ).endswith("S3 http://127.0.0.1:9")


def test_a_state_folder_a_caller_sets_over_an_inherited_default_is_the_callers(tmp_path):
    """A parent's derived default is decided again in a child (its warehouse may differ); a value the
    caller wrote over it (a test's, a script's) stays, although the parent's CDC_DEFAULTED names it."""
    parent = {"CDC_WAREHOUSE": str(tmp_path / "parent")}
    env.apply_defaults(parent)
    assert parent["CDC_STATE_DIR"] == str(tmp_path / "parent")
    child = {**parent, "CDC_WAREHOUSE": str(tmp_path / "child")}
    env.apply_defaults(child)
    assert child["CDC_STATE_DIR"] == str(tmp_path / "child")
    mine = {**parent, "CDC_WAREHOUSE": "s3a://b/w", "CDC_STATE_DIR": str(tmp_path / "mine")}
    env.apply_defaults(mine)
    assert mine["CDC_STATE_DIR"] == str(tmp_path / "mine")
    assert dict(r[0::2] for r in env.describe(mine))["CDC_STATE_DIR"] == "environment"


def test_a_derived_state_folder_copied_without_cdc_defaulted_still_follows_the_warehouse(tmp_path):
    """A child given the parent's environment minus CDC_DEFAULTED (what test_demo once handed `make
    demo`) and another warehouse: the state folder is the child warehouse's, not the parent's copied one
    (which the demo would then have treated as the user's and deleted)."""
    parent = {"CDC_WAREHOUSE": str(tmp_path / "parent")}
    env.apply_defaults(parent)
    child = {name: value for name, value in parent.items() if name != env.DEFAULTED}
    child["CDC_WAREHOUSE"] = str(tmp_path / "child")
    env.apply_defaults(child)
    assert child["CDC_STATE_DIR"] == str(tmp_path / "child")
    assert dict(r[0::2] for r in env.describe(child))["CDC_STATE_DIR"] == "default"


def test_the_jvm_options_map_the_class_archive_only_when_make_install_made_it(tmp_path, monkeypatch):
    """CDC_JVM_OPTIONS (the profile's extra driver options): the options that map the class archive
    (python_hooks/project/jvm_classes.py) while the file exists, a default; nothing without it; yours win."""
    from python_hooks.project import jvm_classes

    archive = tmp_path / "cdc-jvm" / "classes.jsa"
    monkeypatch.setattr(jvm_classes, "ARCHIVE", archive)
    environ: dict[str, str] = {}
    env.apply_defaults(environ)
    assert env.JVM_OPTIONS not in environ
    assert _sources(environ)[env.JVM_OPTIONS] == ("", "unset")

    archive.parent.mkdir()
    archive.write_bytes(b"archive")
    env.apply_defaults(environ)
    options = environ[env.JVM_OPTIONS]
    assert options.split() == [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    assert _sources(environ)[env.JVM_OPTIONS] == (options, "default")

    archive.unlink()  # removed (a new venv): the inherited default goes with it
    env.apply_defaults(environ)
    assert env.JVM_OPTIONS not in environ

    mine = {env.JVM_OPTIONS: "-Xlog:gc:file=/tmp/gc.log"}
    archive.write_bytes(b"archive")
    env.apply_defaults(mine)
    assert mine[env.JVM_OPTIONS] == "-Xlog:gc:file=/tmp/gc.log"
    assert _sources(mine)[env.JVM_OPTIONS] == ("-Xlog:gc:file=/tmp/gc.log", "environment")

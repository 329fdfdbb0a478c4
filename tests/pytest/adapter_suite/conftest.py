"""dbt Labs' standard adapter tests (PyPI dbt-tests-adapter) on this project's local target, with the
project's macros loaded: what an analyst's own models get (issue 30, docs/models.md).
ADAPTER_SUITE_TARGET=cluster (`make test-adapter-cluster`) runs them on the cluster target instead: a cluster
of the run's own, its warehouse on a local S3 server (the `cluster` fixture of tests/pytest/conftest.py),
through the Thrift Server as the project's `cluster` output reaches it.

The suite's fixtures (dbt.tests.fixtures.project) write a small dbt project and a profile per test class
and run dbt in this process. Here they are pointed at the run's one SparkSession: the profile is the
project's `local` output rendered as dbt renders it (dbt-spark's session method reuses the active
session and sets the same runtime settings on it), the project's `macro-paths` adds this project's
macros/ folder, and the environment the suite's fixtures change (DBT_PROFILES_DIR, DBT_LOG_PATH, the
working folder) is given back after each class, so the other tests of the run see theirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from dbt.tests.fixtures.project import *  # noqa: F403 (the suite's fixtures, for this folder only)
from dbt.tests.util import write_file
from dbt_common.tests import disable_test_caching

from helpers.adapter_suite import SUITE_TARGET
from helpers.paths import PROJECT


@pytest.fixture(scope="class")
def environment(request):
    """As the suite's (os.environ, which dbt's invocation context reads), once the run's target is up: the
    cluster fixture sets CDC_THRIFT_PORT, which the first class's context must see too."""
    request.getfixturevalue("spark" if SUITE_TARGET == "local" else "cluster")
    return os.environ


@pytest.fixture(scope="class")
def dbt_profile_target(environment) -> dict:
    """The project's output of SUITE_TARGET, rendered (env_var) as `dbt` renders profiles/profiles.yml,
    once the target is up (`environment`). Local: the run's SparkSession is created once, from the project's
    profile, whatever runs first. Cluster: the run's cluster sets CDC_THRIFT_PORT, which the output reads."""
    from dbt.config.profile import read_profile
    from dbt.config.renderer import ProfileRenderer

    raw = read_profile(str(PROJECT / "profiles"))
    return ProfileRenderer({}).render_data(raw["cdc_lakehouse"]["outputs"][SUITE_TARGET])


@pytest.fixture(scope="class")
def profiles_yml(profiles_root, dbt_profile_data):
    """As the suite's, but gives DBT_PROFILES_DIR back (the project's profile renders it) after the class."""
    before = os.environ.get("DBT_PROFILES_DIR")
    os.environ["DBT_PROFILES_DIR"] = str(profiles_root)
    write_file(yaml.safe_dump(dbt_profile_data), profiles_root, "profiles.yml")
    yield dbt_profile_data
    if before is None:
        os.environ.pop("DBT_PROFILES_DIR", None)
    else:
        os.environ["DBT_PROFILES_DIR"] = before


@pytest.fixture(scope="class")
def logs_dir(tmp_path_factory, prefix):
    """dbt's logs of the class in pytest's temporary folder, not in the repository's logs/."""
    path = tmp_path_factory.mktemp("dbt-logs") / prefix
    before = os.environ.get("DBT_LOG_PATH")
    os.environ["DBT_LOG_PATH"] = str(path)
    yield str(path)
    if before is None:
        os.environ.pop("DBT_LOG_PATH", None)
    else:
        os.environ["DBT_LOG_PATH"] = before


@pytest.fixture(scope="class")
def initialization(environment):
    """As the suite's (an invocation context, Jinja's parse cache on), the cache off again after the class."""
    from dbt_common.context import set_invocation_context
    from dbt_common.tests import enable_test_caching

    set_invocation_context(environment)
    enable_test_caching()
    yield
    disable_test_caching()


@pytest.fixture(scope="class")
def dbt_project_yml(project_root, project_config_update):
    """As the suite's, plus this project's macros (macros/) beside the test project's own."""
    config = {"name": "test", "profile": "test", "flags": {"send_anonymous_usage_stats": False}}
    if isinstance(project_config_update, str):
        project_config_update = yaml.safe_load(project_config_update)
    config.update(project_config_update or {})
    config["macro-paths"] = [*config.get("macro-paths", ["macros"]), str(Path(PROJECT) / "macros")]
    write_file(yaml.safe_dump(config), project_root, "dbt_project.yml")
    return config

"""The target dbt's adapter suite (tests/pytest/adapter_suite/) runs on: ADAPTER_SUITE_TARGET, local (the
default: the run's embedded SparkSession) or cluster (`make test-adapter-cluster`: the run's own cluster,
its warehouse on a local S3 server)."""

from __future__ import annotations

import os

import pytest

SUITE_TARGET = os.environ.get("ADAPTER_SUITE_TARGET", "local")
if SUITE_TARGET not in ("local", "cluster"):
    raise pytest.UsageError(f"ADAPTER_SUITE_TARGET={SUITE_TARGET!r}: local or cluster")

# For the tests that read a table's folder on this machine's file system (the cluster's warehouse is on S3).
LOCAL_FILES_ONLY = pytest.mark.skipif(
    SUITE_TARGET != "local", reason="reads the table's folder on the local file system; the cluster's is on S3"
)

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

# The cluster's warehouse is on the run's local S3 server (SeaweedFS), which keeps a folder whose objects were
# all deleted as a listed prefix (seaweedfs/seaweedfs#6927, open). A non-Iceberg table leaves such folders behind
# (its writer's `_temporary/` or `.hive-staging_*`), so once it is dropped its location still "exists" and Spark
# refuses a table of the same name there (LOCATION_ALREADY_EXISTS): every re-seed and every rebuild of a non-Iceberg
# table. On AWS S3 a prefix without objects does not exist. Iceberg tables and views are not affected
# (docs/models.md).
EMPTIED_FOLDERS_KEPT = pytest.mark.xfail(
    SUITE_TARGET == "cluster",
    strict=True,
    reason="the local S3 server (SeaweedFS) keeps emptied folders as prefixes (seaweedfs/seaweedfs#6927): a dropped "
    "non-Iceberg table's location still exists, LOCATION_ALREADY_EXISTS when a table of its name is created again",
)

"""The pipeline's own tables, in the `<target schema>_cdc_meta` schema (created by
macros/cdc/meta.sql: cdc_create_meta_tables, from cdc_meta_table_definitions, which owns their columns; docs:
models/pipeline/_cdc_meta__sources.yml). Python names them from here; the meta schema's suffix is
pinned to the macro's by tests/pytest/unit/test_rules_pinned.py."""

from __future__ import annotations

META_SCHEMA_SUFFIX = "_cdc_meta"

FILE_LEDGER = "cdc_file_ledger"
TOMBSTONES = "cdc_tombstones"
BATCH_LOG = "cdc_batch_log"
SCHEMA_EVOLUTION_LOG = "schema_evolution_log"
RAW_FILE_GROUPS = "cdc_raw_file_groups"
ERASURE_REGISTER = "erasure_register"
RECTIFICATION_REGISTER = "rectification_register"
ERASURE_LOG = "erasure_log"
META_TABLES = (
    FILE_LEDGER,
    TOMBSTONES,
    BATCH_LOG,
    SCHEMA_EVOLUTION_LOG,
    RAW_FILE_GROUPS,
    ERASURE_REGISTER,
    RECTIFICATION_REGISTER,
    ERASURE_LOG,
)
# The meta tables whose newest snapshot the hooks read, from one listing (Warehouse.meta_snapshots): the ledger's
# and the file groups' rows are kept on this machine per snapshot, the registers' snapshots fingerprint the views.
SNAPSHOT_TABLES = (FILE_LEDGER, RAW_FILE_GROUPS, ERASURE_REGISTER, RECTIFICATION_REGISTER)
# Set by `make run` for its dbt build once every meta table exists: on-run-start creates nothing then.
META_READY_VARIABLE = "CDC_META_READY"
# Set by `make run` (embedded target) when neither personal-data register was ever written: no batch asks them.
REGISTERS_EMPTY_VARIABLE = "CDC_REGISTERS_EMPTY"

# cdc_batch_log's counters of ignored changes, by reason.
IGNORED_COUNTERS = ("ignored_older", "ignored_redelivered", "ignored_tombstoned", "ignored_truncated")


def meta_schema(schema: str) -> str:
    """The schema of the pipeline's own tables for a target schema (macros/cdc/meta.sql: cdc_meta_schema)."""
    return f"{schema}{META_SCHEMA_SUFFIX}"

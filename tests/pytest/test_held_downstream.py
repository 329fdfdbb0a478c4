"""`run --every --downstream-every` on real Spark and Iceberg (python_hooks/commands/downstream.py): a turn that holds
the models and snapshots downstream of the current-state tables back applies the tables' batches and leaves the
snapshot, its models and the marts as they were; the next run that does not hold them back builds them from the
tables as they are, though it finds nothing new, in another call (a loop stopped in between, or `make run`). The
snapshot then keeps one version per build of it: the dimension is compared with the snapshot's replay
(oracles/replay_history.py: CustomerSnapshot) run at the builds only."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.tables import assert_same_table, snapshot_ids, table_rows
from oracles.replay_dms import replay
from oracles.replay_history import CUSTOMER_ATTRIBUTES, CustomerSnapshot, joined_customers
from python_hooks.commands import downstream
from python_hooks.project.warehouse import state_dir
from sample_data import debezium, dms

# The customer dimension and the order fact, with all they read (their staging and current-state tests are
# other suites'): every model and snapshot downstream of the customer tables is in the selection.
SELECT = (
    "--select",
    "+fct_sales_order",
    "+dim_customer",
    "--exclude",
    "resource_type:test,path:models/staging",
    "resource_type:test,path:models/current_state",
)
DIM_COLUMNS = ["customer_id", *CUSTOMER_ATTRIBUTES, "valid_from", "valid_to", "is_current", "is_deleted"]
CUSTOMER_TABLES = ("crm__customer_master", "crm__customer_address", "salesdb__customer")


def _land(landing: Path, stage: int) -> None:
    dms.write_stage(landing, stage)
    debezium.write_stage(landing, stage)


def _owed(schema: str) -> set[str]:
    return {r for r in downstream.read_owed(state_dir()) if r.startswith(f"{schema}_current.")}


def test_a_held_run_leaves_the_snapshot_to_the_next_run(dbt, spark, tmp_path: Path, schema: str) -> None:
    landing = tmp_path / "landing"
    snapshot = CustomerSnapshot()
    snapshot_relation, joined = f"{schema}_snapshots.customer_snapshot", f"{schema}_intermediate.int_customer__joined"
    dim = f"{schema}_marts.dim_customer"

    _land(landing, 1)
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    snapshot.run(joined_customers(landing))
    built = {r: snapshot_ids(spark, r) for r in (snapshot_relation, joined)}

    _land(landing, 2)
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema, hold_downstream=True)
    for table in dms.TABLES:  # the tables took their batches
        expected = replay(landing / "dms" / "crm" / table, ["customer_id"])
        columns = [*dms.TABLES[table], "_cdc_op", "_cdc_ts"]
        actual = table_rows(spark, f"{schema}_current.crm__{table}", ["customer_id"], columns)
        assert_same_table(actual, expected, table)
    assert {r: snapshot_ids(spark, r) for r in built} == built, "a held run built the snapshot or its source"
    owed = _owed(schema)
    assert {f"{schema}_current.{t}" for t in CUSTOMER_TABLES} <= owed, owed

    # nothing new: the run builds what the held one left, from the tables as they are
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    snapshot.run(joined_customers(landing))
    assert len(snapshot_ids(spark, snapshot_relation)) == len(built[snapshot_relation]) + 1
    expected = {k: v for k, v in snapshot.dim_rows().items() if k[0] is not None}
    actual = table_rows(spark, dim, ["customer_id", "valid_from"], DIM_COLUMNS)
    assert_same_table({k: v for k, v in actual.items() if k[0] is not None}, expected, "dim_customer")
    assert not _owed(schema), json.dumps(sorted(_owed(schema)))

    # nothing new and nothing owed: no build at all
    after = {r: snapshot_ids(spark, r) for r in built}
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    assert {r: snapshot_ids(spark, r) for r in built} == after

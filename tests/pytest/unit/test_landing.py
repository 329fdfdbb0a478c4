"""The landing zone's rules without Spark: which files are raw files, in which order producers wrote
them, and how many wait per table (a folder listed in Python, every ledger in one query)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from helpers.pending_warehouse import PendingWarehouse
from python_hooks.landing.files import (
    delivery_order,
    empty_files,
    is_listed_here,
    is_local,
    landing_files,
    raw_files,
)
from python_hooks.landing.pending import (
    PLAN_PART_MAX_CHARS,
    PLAN_PARTS_VARIABLE,
    PLAN_VARIABLE,
    idle_models,
    pending,
    pending_files,
    plan_environment,
    plan_parts,
    staging_test_files,
)
from python_hooks.project.storage import Location
from python_hooks.project.tables import CdcTable


def _touch(folder: Path, *names: str, size: int = 4) -> None:
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


def test_raw_files_are_parquet_files_nothing_hidden_on_the_way(tmp_path):
    _touch(tmp_path, "LOAD00000001.parquet", "2026/11/25/20261125-1.parquet", "partition=0/t+0+5.snappy.parquet")
    _touch(tmp_path, "_SUCCESS", ".part.parquet.crc", ".hidden.parquet", "_temporary/0/x.parquet", "notes.txt")
    found = sorted(p.relative for p in landing_files(tmp_path))
    assert found == ["2026/11/25/20261125-1.parquet", "LOAD00000001.parquet", "partition=0/t+0+5.snappy.parquet"]
    assert landing_files(tmp_path / "missing") == []


def test_delivery_order_per_producer(tmp_path):
    _touch(tmp_path, "20261125-2.parquet", "a/LOAD00000002.parquet", "20261124-9.parquet", "LOAD00000001.parquet")
    assert [p.name for p in raw_files(tmp_path, "dms")] == [
        "LOAD00000001.parquet",
        "LOAD00000002.parquet",
        "20261124-9.parquet",
        "20261125-2.parquet",
    ]
    names = ["t+0+10.snappy.parquet", "t+0+9.snappy.parquet", "odd.parquet"]
    assert sorted(names, key=lambda n: delivery_order("debezium_flattened", Path(n))) == [
        "odd.parquet",
        "t+0+9.snappy.parquet",
        "t+0+10.snappy.parquet",
    ]


def test_empty_files_and_local_folders(tmp_path):
    _touch(tmp_path, "full.parquet")
    _touch(tmp_path, "uploading.parquet", size=0)
    assert [p.name for p in empty_files(tmp_path)] == ["uploading.parquet"]
    assert is_local("/data/landing/dms/crm/customer") and is_local("file:/data/landing")
    assert not is_local("s3a://bucket/landing/dms/crm/customer")
    # Python lists this machine's folders and S3's; another scheme is Spark's to list (binaryFile)
    assert all(map(is_listed_here, ["/data/landing", "file:/data/landing", "s3a://b/landing", "s3://b/landing"]))
    assert not is_listed_here("abfss://c@account.dfs.core.windows.net/landing")


def _table(folder: Path, name: str) -> CdcTable:
    return CdcTable(
        model=name,
        schema="lake",
        identifier=name,
        staging_model=f"stg_{name}",
        source=f"src.{name}",
        folder=folder,
        producer="dms",
        timestamp_column="last_update_time",
        source_name="src",
        table_name=name,
        landing=str(folder),
    )


def test_files_waiting_are_listed_files_the_ledger_lacks_in_one_query(tmp_path):
    _touch(tmp_path / "a", "LOAD1.parquet", "2026/11/25/c1.parquet", "_SUCCESS")
    _touch(tmp_path / "b", "LOAD1.parquet")
    a, b, c = _table(tmp_path / "a", "a"), _table(tmp_path / "b", "b"), _table(tmp_path / "c", "c")
    warehouse = PendingWarehouse(
        {("lake", "a"), ("lake", "b"), ("lake_cdc_meta", "cdc_file_ledger")},
        [("a", "LOAD1.parquet"), ("b", "LOAD1.parquet"), ("c", "c1.parquet")],
    )
    assert pending_files(warehouse, [a, b, c]) == {"a": 1, "b": 0}  # c is not built yet
    assert warehouse.listed == ["lake"]  # a file waits: which tables exist is read from the schema's listing
    assert len(warehouse.queries) == 1
    waiting = pending(warehouse, [a, b, c])
    assert idle_models([a, b, c], waiting) == {"b", "stg_b"}
    # the plan handed to dbt: a's waiting file, by name and path in its folder, as the macro lists it
    size = (tmp_path / "a" / "2026/11/25/c1.parquet").stat().st_size
    assert waiting.plan == {
        "a": {"folder": str(tmp_path / "a"), "files": [["c1.parquet", "2026/11/25/c1.parquet"]], "bytes": size}
    }


def test_the_plan_leaves_out_a_table_whose_file_names_repeat(tmp_path):
    _touch(tmp_path / "a", "x/f.parquet", "y/f.parquet")
    _touch(tmp_path / "b", "g.parquet")
    a, b = _table(tmp_path / "a", "a"), _table(tmp_path / "b", "b")
    warehouse = PendingWarehouse({("lake", "a"), ("lake", "b"), ("lake_cdc_meta", "cdc_file_ledger")}, [])
    waiting = pending(warehouse, [a, b])
    assert waiting.counts == {"a": 2, "b": 1}
    assert list(waiting.plan) == ["b"]  # two files named f.parquet: the macro refuses them in words
    assert plan_environment(plan_parts(waiting.plan)) == {PLAN_VARIABLE: json.dumps(waiting.plan)}  # one part


def test_the_plan_of_hundreds_of_tables_is_handed_in_parts_and_a_table_too_long_for_one_is_left_out():
    files = [[f"{n}.parquet", f"{n}.parquet"] for n in range(200)]
    big = {f"t{i}": {"folder": "/x", "files": files} for i in range(50)}
    big["huge"] = {"folder": "/x", "files": [[f"{n}.parquet", f"{n}.parquet"] for n in range(20_000)]}
    big["last"] = {"folder": "/y", "files": files[:1]}
    handed = plan_environment(plan_parts(big))
    parts = int(handed[PLAN_PARTS_VARIABLE])
    names = [PLAN_VARIABLE, *(f"{PLAN_VARIABLE}_{n}" for n in range(2, parts + 1))]
    assert parts > 1 and set(handed) == {*names, PLAN_PARTS_VARIABLE}
    assert all(len(handed[name]) <= PLAN_PART_MAX_CHARS for name in names)
    merged = {}
    for name in names:  # as macros/cdc/landing.sql: cdc_run_plan reads them
        merged.update(json.loads(handed[name]))
    assert merged == {name: entry for name, entry in big.items() if name != "huge"}
    assert list(merged) == [name for name in big if name != "huge"]  # in the plan's order


def test_staging_tests_get_the_plans_file_names_as_quoted_literals(tmp_path):
    """Per staging model, the names of the plan's files (two models on one staging view: both sets), each
    a Spark string literal whatever it holds; a table the plan does not hold is not named (whole view)."""
    a, b, c = _table(tmp_path / "a", "a"), _table(tmp_path / "b", "b"), _table(tmp_path / "c", "c")
    twin = replace(b, model="b2", identifier="b2")
    plan = {
        "a": {"folder": "/a", "files": [["it's.parquet", "it's.parquet"], ["x\\y.parquet", "d/x\\y.parquet"]]},
        "b": {"folder": "/b", "files": [["2.parquet", "2.parquet"]]},
        "b2": {"folder": "/b", "files": [["1.parquet", "1.parquet"], ["2.parquet", "2.parquet"]]},
    }
    handed = json.loads(staging_test_files(plan, [a, b, twin, c]))
    assert handed == {"stg_a": "'it\\'s.parquet', 'x\\\\y.parquet'", "stg_b": "'1.parquet', '2.parquet'"}


class _LedgerWithSnapshot(PendingWarehouse):
    """The ledger as an Iceberg table: its current snapshot changes with every commit."""

    snapshot = 7

    def meta_snapshots(self) -> dict[str, str | None]:  # Warehouse.meta_snapshots: one listing of the meta tables
        self.queries.append("show table extended in `lake_cdc_meta` like 'cdc_file_ledger|...'")
        return {"cdc_file_ledger": str(self.snapshot)}


def test_the_ledger_is_read_again_only_when_its_snapshot_changed(tmp_path):
    _touch(tmp_path / "a", "LOAD1.parquet", "c1.parquet")
    a = _table(tmp_path / "a", "a")
    state = tmp_path / "state"
    warehouse = _LedgerWithSnapshot({("lake", "a"), ("lake_cdc_meta", "cdc_file_ledger")}, [("a", "LOAD1.parquet")])
    assert pending(warehouse, [a], cache_dir=state).counts == {"a": 1}
    assert [q for q in warehouse.queries if "show table extended" not in q], "first run: the ledger is read"

    warehouse.queries.clear()
    assert pending(warehouse, [a], cache_dir=state).counts == {"a": 1}
    assert all("show table extended" in q for q in warehouse.queries), "same snapshot: one listing, no ledger read"

    warehouse._ledger.append(("a", "c1.parquet"))  # a run applied c1: the ledger has a new snapshot
    warehouse.snapshot = 8
    warehouse.queries.clear()
    listed = len(warehouse.listed)
    assert pending(warehouse, [a], cache_dir=state).counts == {"a": 0}
    assert len(warehouse.listed) == listed  # nothing waits: no listing of the schema, only whether the table exists
    assert [q for q in warehouse.queries if "show table extended" not in q]

    (state / "ledger_cache.json").write_text("[damaged", encoding="utf-8")
    assert pending(warehouse, [a], cache_dir=state).counts == {"a": 0}


def test_python_lists_local_and_file_uri_folders_and_leaves_other_schemes_to_spark(tmp_path):
    _touch(tmp_path / "a", "LOAD1.parquet")
    as_uri = f"file://{tmp_path / 'a'}"
    local = _table(tmp_path / "a", "a")
    uri = replace(_table(tmp_path / "a", "f"), landing=as_uri, folder=Location.parse(as_uri))
    azure = "abfss://c@account.dfs.core.windows.net/landing/a"
    other = replace(_table(tmp_path / "a", "g"), landing=azure, folder=Location.parse(azure))
    warehouse = PendingWarehouse(
        {("lake", "a"), ("lake", "f"), ("lake", "g"), ("lake_cdc_meta", "cdc_file_ledger")}, []
    )
    waiting = pending(warehouse, [local, uri, other])
    assert waiting.counts == {"a": 1, "f": 1}  # g: Spark's listing table lists it, and it does not exist yet
    assert waiting.plan["f"] == {"folder": as_uri, "files": [["LOAD1.parquet", "LOAD1.parquet"]], "bytes": 4}

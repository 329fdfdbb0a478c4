"""The fuzz corpus through the real pipeline (real Spark, Iceberg and Parquet): damaged raw files
(tests/pytest/fuzz/damage.py), each a recipe (producer, kind, seed: the largest stage-3 file of
crm.customer_address for DMS, of salesdb.customer for Debezium), not a stored blob.

For each case, as test_hostile_input.py: stages 1-2 applied, stage 3 landed with the damaged file, a run:
- refused: the run fails; its last lines hold exactly one line naming the file, and it names the table
  and says in words what is wrong (never only a Spark error class, a Java object or a test name); the
  refused table changed nothing (helpers/refusal.py: rows, columns, snapshots, ledger, batch log) and
  the other table of the source, beside it, equals its replay;
- taken (extreme values, sidecar files, odd metadata, a flip that only changed a value): every table
  equals the replay of what pyarrow reads from the raw files.
Then the sidecars are removed and a refused file is replaced by its good version: the next run is clean
and every table equals the replay. `make test` runs SMOKE; `make fuzz` every recipe (marker fuzz_full).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fuzz.damage import ACCEPTED_KINDS, damage
from fuzz.python_side import NOT_WORDS, SOURCES, assert_worded, damaged_file
from helpers.refusal import assert_changed_nothing, table_state
from helpers.tables import assert_same_table, table_rows
from oracles.replay_debezium import replay_topic
from oracles.replay_dms import replay as replay_dms
from sample_data import debezium, dms

# make test runs this module in its servers process (Makefile: SERVERS_GROUP).
pytestmark = pytest.mark.fuzz


@dataclass(frozen=True)
class Producer:
    """A producer's sample through the pipeline: the file damaged in stage 3 (fuzz/python_side.py picks it),
    its table and another one of the same source that must be built beside it."""

    source: str  # fuzz.python_side.SOURCES
    select: tuple[str, ...]
    write_stage: Callable[[Path, int], list[Path]]
    other: str  # the other source (fuzz.python_side.SOURCES) of the same dbt selection

    def actual(self, spark, schema: str, source: str) -> dict:
        model, key, columns = _TABLES[source]
        return table_rows(spark, f"{schema}_current.{model}", key, [*columns, "_cdc_op", "_cdc_ts"])

    def expected(self, folder: Path, source: str) -> dict:
        key = _TABLES[source][1]
        return replay_dms(folder, key) if source.startswith("dms") else replay_topic(folder, "flat", key)


_TABLES = {
    "dms_customer_address": ("crm__customer_address", ["customer_id"], dms.TABLES["customer_address"]),
    "dms_customer_master": ("crm__customer_master", ["customer_id"], dms.TABLES["customer_master"]),
    "debezium_flattened": ("salesdb__customer", ["id"], ["id", "name", "mktsegment"]),
    "debezium_sales_order": (
        "salesdb__sales_order",
        ["order_id"],
        ["order_id", "customer_id", "order_ts", "amount", "order_status"],
    ),
}
PRODUCERS = {
    "dms": Producer(
        "dms_customer_address", ("--select", "staging.crm", "current_state.crm"), dms.write_stage, "dms_customer_master"
    ),
    "debezium": Producer(
        "debezium_flattened",
        ("--select", "staging.salesdb", "current_state.salesdb"),
        debezium.write_stage,
        "debezium_sales_order",
    ),
}
OTHER_FOLDERS = {"debezium_sales_order": f"debezium/topics/{debezium.SALES_ORDER}"}

# (producer, kind, seed): one or a few per kind, the cases the fast layer and earlier runs chose; those that
# once failed stay here (see the comment on each).
RECIPES = [
    *[
        ("dms", kind, seed)
        for kind, seeds in {
            "flip_data_page": (0, 3),
            "flip_dictionary_page": (0,),
            "zero_run": (0,),
            "truncate": (0, 5),
            "flip_footer": (0, 4),  # 4: pyarrow decodes it, Spark fails (tests named o1198.collectToPython)
            "footer_length": (0,),
            "magic": (0, 1),  # trailing; leading (pyarrow reads the footer all the same)
            "not_parquet": (0,),
            "zero_bytes": (0,),
            "arrow_schema_metadata": (0,),
            "repeated_column": (0,),  # Spark said only [COLUMN_ALREADY_EXISTS], naming no file
            "case_collision": (0,),
            # time64, timestamp[ns] in a string column, duration, time32; timestamp[ns] in a timestamp column
            "unsupported_type": (0, 2, 4, 5, 14),
            "nested_type": (0, 1, 7),  # map, list, struct
            "missing_key": (0,),
            "extreme_values": (0, 1, 18),  # 18: year-1 timestamps in row_audit_ts (Spark refused to rebase them)
            "sidecars": (0,),  # its .crc once had Hadoop's header and garbage: that is damaged_crc now
            "damaged_crc": (0,),
        }.items()
        for seed in seeds
    ],
    *[("debezium", kind, 0) for kind in ("flip_data_page", "truncate", "repeated_column", "nested_type", "sidecars")],
]
SMOKE = {("dms", "zero_run", 0), ("dms", "repeated_column", 0), ("dms", "sidecars", 0)}


def _folder(landing: Path, source: str) -> Path:
    return landing / (OTHER_FOLDERS.get(source) or SOURCES[source].folder)


def _raw_only(folder: Path, into: Path) -> Path:
    """A copy of `folder` without the sidecar files (hidden names, `.tmp`): what the replay reads."""
    shutil.copytree(folder, into, ignore=lambda d, names: [n for n in names if not _raw_name(n, Path(d) / n)])
    return into


def _raw_name(name: str, path: Path) -> bool:
    return not name.startswith(("_", ".")) and (path.is_dir() or name.endswith(".parquet"))


def _summary(caplog) -> list[str]:
    records = [
        r.getMessage() for r in caplog.records if r.name == "python_hooks.commands.run" and r.levelname == "ERROR"
    ]
    start = next((i for i, r in enumerate(records) if r.startswith("this run refused or failed")), None)
    assert start is not None, f"the run failed without its last lines: {records}"
    return records[start:]


@pytest.mark.parametrize(
    "producer,kind,seed",
    [pytest.param(*r, marks=() if r in SMOKE else pytest.mark.fuzz_full) for r in RECIPES],
    ids=["-".join(map(str, r)) for r in RECIPES],
)
def test_damaged_file_refused_in_words_or_applied(dbt, spark, schema, tmp_path, caplog, producer, kind, seed):
    spec = PRODUCERS[producer]
    model = SOURCES[spec.source].model
    landing = tmp_path / "landing"
    for stage in (1, 2):
        spec.write_stage(landing, stage)
    assert dbt.pipeline(*spec.select, landing=landing, schema=schema)
    relation = f"{schema}_current.{model}"
    before = table_state(spark, schema, model, relation)

    spec.write_stage(landing, 3)
    bad = _folder(landing, spec.source) / damaged_file(spec.source)
    folder, name = bad.parent, bad.name
    good = bad.read_bytes()
    damaged = damage(good, name, kind, seed, SOURCES[spec.source].keys)
    label = f"{producer} {kind} seed {seed} ({damaged.says})"
    for relative, data in damaged.files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(data)
    caplog.clear()
    started = time.monotonic()
    ok = dbt.pipeline(*spec.select, landing=landing, schema=schema)
    _report(producer, kind, seed, ok, [] if ok else _summary(caplog), time.monotonic() - started)

    if ok:
        assert kind in ACCEPTED_KINDS or _readable(bad), f"{label}: Spark took a file pyarrow cannot read"
        clean = _raw_only(_folder(landing, spec.source), tmp_path / "raw")
        assert_same_table(spec.actual(spark, schema, spec.source), spec.expected(clean, spec.source), f"{label}: taken")
    else:
        summary = _summary(caplog)
        text = "\n".join(summary)
        assert kind not in ACCEPTED_KINDS, f"{label}: must be taken, was refused:\n{text}"
        naming = [i for i, line in enumerate(summary) if name in line]
        assert len(naming) == 1, f"{label}: {len(naming)} lines name the file:\n{text}"
        line = summary[naming[0]]
        if model not in line:  # a dbt failure's detail line: its 'failed: <model>:' line just above
            header = next(summary[i] for i in range(naming[0], -1, -1) if summary[i].startswith("failed: "))
            line = f"{header.split(': ')[1]}: {line.strip()}"
        assert_worded(line.removeprefix("refused: ").removeprefix("failed: "), name, model, label)
        assert not any(NOT_WORDS.search(line) for line in summary), f"{label}:\n{text}"
        assert summary[-1].startswith("What to do:"), summary
        assert_changed_nothing(before, table_state(spark, schema, model, relation), label)
    other = spec.other
    assert_same_table(
        spec.actual(spark, schema, other), spec.expected(_folder(landing, other), other), f"{label}: other table"
    )

    for relative in set(damaged.files) - {name}:  # the sidecars removed
        (folder / relative).unlink()
    if not ok:  # the refused file replaced by its good version (a taken one is in the ledger: applied)
        bad.write_bytes(good)
    assert dbt.pipeline(*spec.select, landing=landing, schema=schema), f"{label}: the run after the fix"
    for source in (spec.source, other):
        expected = spec.expected(_folder(landing, source), source)
        assert_same_table(spec.actual(spark, schema, source), expected, f"{label}: {source} after the fix")


def _report(producer: str, kind: str, seed: int, ok: bool, summary: list[str], seconds: float) -> None:
    """With FUZZ_REPORT set (make fuzz), one JSON line per case: what the run did (the figures fuzz.figures prints)."""
    if os.environ.get("FUZZ_REPORT"):
        case = {"producer": producer, "kind": kind, "seed": seed, "taken": ok, "summary": summary, "seconds": seconds}
        with open(os.environ["FUZZ_REPORT"], "a", encoding="utf-8") as out:
            out.write(json.dumps(case) + "\n")


def _readable(path: Path) -> bool:
    try:
        pq.read_table(path)
    except Exception:  # noqa: BLE001 - any failure: pyarrow cannot read it
        return False
    return True

"""The Python side that sees raw files first, as `make run` calls it before dbt, without Spark: the
listing (landing/files.py), the empty-file check (commands/run.py) and the footers, their union and the
schema plan (evolution/apply.py: inspect_table). `verdict` says what it makes of a folder: its refusals.

The sources: the sample's tables of both producers (DMS, Debezium flattened and envelope), each with the
files of stages 1-2 (applied: the table's columns come from them) and a stage-3 file to damage."""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from python_hooks.commands.run import empty_file_refusals
from python_hooks.evolution.apply import inspect_table
from python_hooks.evolution.footers import FooterCache, FooterReadError
from python_hooks.evolution.plan import business_schema, decoded_schema
from python_hooks.evolution.types import spark_type
from python_hooks.landing.files import raw_files
from python_hooks.project.storage import location
from python_hooks.project.tables import CdcTable
from sample_data import debezium, dms


@dataclass(frozen=True)
class Source:
    """A sample table: where its files land, its model, and which stage-3 file is damaged."""

    name: str
    folder: str  # below the landing root
    model: str
    source: str
    producer: str
    keys: tuple[str, ...]
    timestamp_column: str | None
    decoded: tuple[tuple[str, str], ...] = ()

    def table(self, landing: Path) -> CdcTable:
        return CdcTable(
            self.model,
            "fuzz_current",
            self.model,
            "stg_" + self.model,
            self.source,
            location(landing / self.folder),
            self.producer,
            self.timestamp_column,
            keys=self.keys,
            decoded_types=self.decoded,
        )


SOURCES = {
    "dms_customer_address": Source(
        "dms_customer_address",
        "dms/crm/customer_address",
        "crm__customer_address",
        "crm.customer_address",
        "dms",
        ("customer_id",),
        "last_update_time",
    ),
    "dms_customer_master": Source(
        "dms_customer_master",
        "dms/crm/customer_master",
        "crm__customer_master",
        "crm.customer_master",
        "dms",
        ("customer_id",),
        "last_update_time",
    ),
    "debezium_flattened": Source(
        "debezium_flattened",
        f"debezium/topics/{debezium.CUSTOMER}",
        "salesdb__customer",
        "salesdb.customer",
        "debezium_flattened",
        ("id",),
        None,
    ),
    "debezium_envelope": Source(
        "debezium_envelope",
        f"debezium/topics/{debezium.PRODUCT}",
        "inventory__product",
        "inventory.product",
        "debezium_envelope",
        ("product_id",),
        None,
    ),
}


@functools.cache
def sample_files() -> dict[str, dict[int, dict[str, bytes]]]:
    """source -> stage -> {path relative to the source's folder: bytes}, the sample written once."""
    root = Path(tempfile.mkdtemp(prefix="fuzz-sample-"))
    stages: dict[str, dict[int, dict[str, bytes]]] = {name: {} for name in SOURCES}
    for stage in (1, 2, 3):
        written = [*dms.write_stage(root, stage), *debezium.write_stage(root, stage)]
        for name, source in SOURCES.items():
            folder = root / source.folder
            stages[name][stage] = {
                p.relative_to(folder).as_posix(): p.read_bytes() for p in written if p.is_relative_to(folder)
            }
    return stages


def damaged_file(source: str) -> str:
    """The stage-3 file that is damaged: the largest (DMS: the CDC file of inserts, updates, deletes)."""
    files = sample_files()[source][3]
    return max(sorted(files), key=lambda name: len(files[name]))


def land(landing: Path, source: str, stages: Sequence[int], replace: dict[str, bytes] | None = None) -> Path:
    """The source's files of `stages` under `landing`, stage 3's damaged file replaced by `replace`."""
    folder = landing / SOURCES[source].folder
    for stage in stages:
        files = dict(sample_files()[source][stage])
        if stage == 3 and replace is not None:
            del files[damaged_file(source)]
            prefix = str(Path(damaged_file(source)).parent)
            files.update({(f"{prefix}/{n}" if prefix != "." else n): data for n, data in replace.items()})
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
    return folder


@functools.cache
def current_columns(source: str) -> tuple[tuple[str, str], ...]:
    """The table's columns after stages 1-2, as DESCRIBE would give them (the business columns)."""
    landing = Path(tempfile.mkdtemp(prefix="fuzz-current-"))
    land(landing, source, (1, 2))
    table = SOURCES[source].table(landing)
    union = FooterCache(landing / "cache.json").union_schema(str(table.folder), raw_files(table.folder, table.producer))
    business = decoded_schema(
        business_schema(union.schema, table.producer, table.timestamp_column), dict(table.decoded_types)
    )
    return tuple((f.name, spark_type(f.type)) for f in business if spark_type(f.type))


def verdict(landing: Path, source: str) -> list[str]:
    """The refusals the Python side gives the source's folder under `landing`, as a run words them."""
    table = SOURCES[source].table(landing)
    files = raw_files(table.folder, table.producer)
    cache = FooterCache(landing / "footer_cache.json")
    try:
        problems = inspect_table(table, files, cache, list(current_columns(source))).problems
    except FooterReadError as error:  # evolve(): the same words
        problems = [f"{table.model} (source {table.source}): {error}. The table was not changed."]
    empty = empty_file_refusals(table)
    if empty:
        named = {str(f.location) for f in files if f.size == 0}
        problems = [p for p in problems if not any(n in p for n in named)] + empty
    return problems


# Not words: a Spark or Java error class alone, a Java object, a stack trace, a Python repr of an exception.
NOT_WORDS = re.compile(r"\bo\d+\.\w+|Traceback|at org\.apache|\bjava\.\w|Error\(")


def assert_worded(line: str, file: str, model: str, label: str) -> None:
    """One refusal line: names the file and the model, and says in words what is wrong."""
    assert file in line, f"{label}: the refusal does not name the file {file}: {line}"
    assert model in line, f"{label}: the refusal does not name the table {model}: {line}"
    assert not NOT_WORDS.search(line), f"{label}: not in words: {line}"
    assert "\n" not in line, f"{label}: more than one line: {line}"
    said = line.replace(file, "").replace(model, "").split(" says: ")[0]  # a tool's own words come last
    assert not re.match(r"^\W*\[[A-Z_.]+\]", said), f"{label}: an error class first: {line}"
    words = re.findall(r"[a-z]{3,}", said)
    assert len(words) >= 8, f"{label}: too few words to say what is wrong: {line}"

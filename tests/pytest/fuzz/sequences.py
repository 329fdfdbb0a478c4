"""Sequences of runs as an operator lives them, searched with hypothesis.stateful (issue 43, part 3).

One table, crm.customer_address, in a landing folder and a schema of its own per sequence. The steps: land
a valid DMS CDC file (a few inserts, updates and deletes of keys 1-6, each at a commit time of its own); land
a damaged one (fuzz/damage.py: every kind); remove a file; replace a file not yet applied under the same
name, by a valid or a damaged one; add a column (the files landed after it carry it); erase a customer
(`python -m python_hooks erase`'s code in this process: python_hooks/personal_data/, once a run has made the
table, while no damaged file is landed: an erasure stops at a file it cannot read); run the pipeline
(`make run`'s code in this process: helpers/dbt_runner.py). A sequence starts with the full-load file.

After every run, the invariants (`RunSequences.run`):
- the batch is applied whole or not at all: its files all reach the ledger, or none does; a run whose
  waiting files are all valid (or only odd: fuzz/damage.py ACCEPTED_KINDS) applies them;
- the table equals the pure-Python replay (oracles/replay_dms.py) of the files accepted so far, as they
  were when applied (a removed file's changes stay applied), without the customers erased (an erasure
  removes them, and staging leaves out their later changes); before any is accepted there is no table, or
  (a run over an empty folder) an empty one;
- the table's columns are exactly those of the accepted files (and `_cdc_` ones), the earlier ones first;
- the ledger names exactly the accepted files, each with its number of change events (those of erased
  customers left out, when the file was applied after the erasure); the batch log has one row for a run with
  files waiting: 'applied' counting the files and events, or 'refused' counting nothing; none for a run with
  nothing new;
- no applied file is taken for one changed in place (the machine changes none; an erasure rewrites some);
- a run that fails ends with lines naming a waiting file in words (fuzz/python_side.py: assert_worded),
  then "What to do:"; no line the hooks log is Spark internals (NOT_WORDS).

A damaged file the pipeline took may have changed a column's type (fuzz/damage.py: nested_type writes a column
as a struct, a list or a map; a table takes a file whose column is nested where it was plain before only as a
new type). A later file whose column is plain where an accepted file's is nested, or the other way round, is
then one the pipeline may refuse (docs/operations.md: "neither type widens to the other"): the model counts it
as refusable, valid or not (`_refusable`).

Names: a new file takes a name never applied (DMS names its files by write time); the ledger skips a name it
holds, so a new file under an applied name is outside what a run promises.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from fuzz.damage import KINDS, damage
from fuzz.python_side import NOT_WORDS, assert_worded
from helpers.paths import PROJECT
from helpers.runs import batch_log
from helpers.tables import assert_same_table, table_rows
from oracles.replay_dms import METADATA, replay
from python_hooks import personal_data
from python_hooks.project.warehouse import Warehouse
from sample_data import dms

TABLE = "customer_address"
MODEL = "crm__customer_address"
SELECT = ("--select", "stg_crm__customer_address", MODEL)
KEYS = ("customer_id",)
UTC = dt.timezone.utc
DAY = dt.datetime(2026, 11, 5, tzinfo=UTC)  # CDC changes: minutes after it, one commit time each
LOAD = "LOAD00000001.parquet"
# The names files land under (DMS: write times); a name is reused only while no run applied it.
NAMES = tuple(f"20261105-{hour:02d}0000000.parquet" for hour in range(8, 16))
EXTRA_COLUMNS = ("loyalty_tier", "region")
MOST_WAITING = 3  # mutations between two runs: every sequence runs

# A change: (op, key, version of the row's values, minute after DAY); a file holds 1 to 4 of them.
CHANGES = st.lists(
    st.tuples(st.sampled_from("IUD"), st.integers(1, 6), st.integers(0, 3), st.integers(0, 240)),
    min_size=1,
    max_size=4,
)


@dataclass
class Stats:
    """The search's figures: sequences, steps, runs and what they did, damaged files and what became of them."""

    sequences: int = 0
    steps: int = 0
    runs: int = 0
    applied: int = 0
    refused: int = 0
    idle: int = 0
    damaged_landed: int = 0
    damaged_taken: int = 0
    erasures: int = 0
    failures: int = 0
    kinds: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        return (
            f"run sequences: {self.sequences} sequences, {self.steps} steps, {self.runs} runs ({self.applied} applied,"
            f" {self.refused} refused, {self.idle} with nothing new), {self.damaged_landed} damaged files landed"
            f" ({self.damaged_taken} taken), {self.erasures} erasures, {self.failures} failing sequence(s)"
        )

    def report(self, label: str) -> None:
        """With FUZZ_REPORT set (make fuzz), one JSON line for fuzz.figures."""
        if os.environ.get("FUZZ_REPORT"):
            with open(os.environ["FUZZ_REPORT"], "a", encoding="utf-8") as out:
                out.write(json.dumps({"search": label, **self.__dict__}) + "\n")


@dataclass
class Context:
    """What every sequence shares: the run's dbt (its one SparkSession) and the test's temp folder and logs."""

    dbt: object
    spark: object
    tmp: Path
    caplog: object
    stats: Stats = field(default_factory=Stats)


@dataclass(frozen=True)
class Landed:
    """A file landed in the table's folder: its bytes, what was done to it, the files beside it (sidecars)."""

    main: bytes
    says: str
    kind: str | None = None  # fuzz/damage.py's kind, None for a valid file
    refusable: bool = False
    beside: tuple[tuple[str, bytes], ...] = ()


def _row(key: int, version: int, extras: tuple[str, ...]) -> dict:
    city, country = dms.CITIES[(key + version) % len(dms.CITIES)]
    row = {
        "customer_id": key,
        "city": city,
        "country": country,
        "row_audit_ts": DAY - dt.timedelta(days=key) + dt.timedelta(hours=version),
    }
    return {**row, **{name: f"{name}-{key}-{version}" for name in extras}}


def _parquet(columns: dict[str, pa.Array]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink, compression="snappy")
    return sink.getvalue()


def _business_columns(extras: tuple[str, ...], rows: list[dict]) -> dict[str, pa.Array]:
    types = {**dms.TABLES[TABLE], **dict.fromkeys(extras, pa.string())}
    return {name: pa.array([row.get(name) for row in rows], typ) for name, typ in types.items()}


def full_load_file(keys: range) -> bytes:
    """A DMS full-load file: no Op, no change sequence, the load time as commit time."""
    rows = [_row(key, 0, ()) for key in keys]
    when = pa.array([dms.LOAD_TIME] * len(rows), dms.TIMESTAMP)
    return _parquet({"last_update_time": when, **_business_columns((), rows)})


def cdc_file(changes: list[tuple[str, int, int, int]], extras: tuple[str, ...]) -> bytes:
    """A DMS CDC file: Op first, the commit time, the row (a delete carries its key only), AR_H_CHANGE_SEQ
    (the commit time's digits: each change has a minute of its own, so it orders as the time does)."""
    times = [DAY + dt.timedelta(minutes=minute) for _, _, _, minute in changes]
    rows = [{"customer_id": key} if op == "D" else _row(key, version, extras) for op, key, version, _ in changes]
    return _parquet(
        {
            "Op": pa.array([op for op, *_ in changes], pa.string()),
            "last_update_time": pa.array(times, dms.TIMESTAMP),
            **_business_columns(extras, rows),
            "AR_H_CHANGE_SEQ": pa.array([f"{t:%Y%m%d%H%M%S}{0:021d}" for t in times], pa.string()),
        }
    )


def _columns(data: bytes) -> list[str]:
    return [name.lower() for name in pq.read_schema(io.BytesIO(data)).names if name.lower() not in METADATA]


def summary(caplog) -> list[str]:
    """The run's last lines (python_hooks/commands/summary.py), from "this run refused or failed" on."""
    records = [
        r.getMessage() for r in caplog.records if r.name == "python_hooks.commands.run" and r.levelname == "ERROR"
    ]
    start = next((i for i, r in enumerate(records) if r.startswith("this run refused or failed")), len(records))
    return records[start:]


@dataclass(frozen=True)
class Observed:
    """What a run left: the ledger {file: change events}, the batch log rows of the table, its columns."""

    ledger: dict[str, int]
    batch_log: list[dict]
    columns: list[str] | None  # None: no table


class RunSequences(RuleBasedStateMachine):
    """The model: the files landed now (`landed`) and those accepted, as they were when applied (`accepted`)."""

    def __init__(self, context: Context) -> None:
        super().__init__()
        self.context = context
        context.stats.sequences += 1
        root = context.tmp / f"sequence-{context.stats.sequences}"
        self.landing = root / "landing"
        self.folder = self.landing / "dms" / "crm" / TABLE
        self.folder.mkdir(parents=True)
        self.mirror = root / "accepted"  # the accepted files, for the replay
        self.mirror.mkdir()
        self.schema = f"t_{uuid.uuid4().hex[:10]}"
        self.relation = f"{self.schema}_current.{MODEL}"
        self.landed: dict[str, Landed] = {}
        self.accepted: dict[str, bytes] = {}
        self.events: dict[str, int] = {}  # accepted file -> its change events when applied (the ledger's)
        self.erased: set[int] = set()  # the customers erased
        self.extras: tuple[str, ...] = ()
        self.minutes: set[int] = set()
        self.waiting = 0  # mutations since the last run
        self.columns: list[str] | None = None
        self._put(LOAD, Landed(full_load_file(range(1, 5)), "the full load"))

    # ------------------------------------------------------------------ the model's files

    def _put(self, name: str, landed: Landed) -> None:
        self._remove(name)
        (self.folder / name).write_bytes(landed.main)
        for relative, data in landed.beside:
            (self.folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (self.folder / relative).write_bytes(data)
        self.landed[name] = landed

    def _remove(self, name: str) -> None:
        landed = self.landed.pop(name, None)
        if landed is None:
            return
        (self.folder / name).unlink()
        for relative, _ in landed.beside:
            (self.folder / relative).unlink(missing_ok=True)
        for sub in sorted((p for p in self.folder.rglob("*") if p.is_dir()), reverse=True):
            if not any(sub.iterdir()):
                sub.rmdir()

    def _file(self, changes: list[tuple[str, int, int, int]], name: str, kind: str | None, seed: int) -> Landed:
        """A CDC file of `changes` (each moved to a minute no other change has), damaged by `kind` if given."""
        unique = []
        for op, key, version, minute in changes:
            while minute in self.minutes:
                minute += 1
            self.minutes.add(minute)
            unique.append((op, key, version, minute))
        good = cdc_file(unique, self.extras)
        if kind is None:
            return Landed(good, f"valid, {len(unique)} changes")
        damaged = damage(good, name, kind, seed, KEYS)
        self.context.stats.damaged_landed += 1
        self.context.stats.kinds[kind] = self.context.stats.kinds.get(kind, 0) + 1
        beside = tuple(sorted((n, d) for n, d in damaged.files.items() if n != name))
        return Landed(damaged.files[name], f"{kind} seed {seed}: {damaged.says}", kind, damaged.refusable, beside)

    def _free_names(self) -> list[str]:
        return [n for n in NAMES if n not in self.landed and n not in self.accepted]

    def _pending(self) -> list[str]:
        return sorted(n for n in self.landed if n not in self.accepted)

    def _step(self) -> None:
        self.context.stats.steps += 1
        self.waiting += 1

    # ------------------------------------------------------------------ the steps

    @precondition(lambda self: self.waiting < MOST_WAITING and self._free_names())
    @rule(changes=CHANGES, slot=st.integers(0, len(NAMES) - 1))
    def land_valid(self, changes, slot):
        names = self._free_names()
        name = names[slot % len(names)]
        self._put(name, self._file(changes, name, None, 0))
        self._step()

    @precondition(lambda self: self.waiting < MOST_WAITING and self._free_names())
    @rule(changes=CHANGES, slot=st.integers(0, len(NAMES) - 1), kind=st.sampled_from(KINDS), seed=st.integers(0, 20))
    def land_damaged(self, changes, slot, kind, seed):
        names = self._free_names()
        name = names[slot % len(names)]
        self._put(name, self._file(changes, name, kind, seed))
        self._step()

    @precondition(lambda self: self.waiting < MOST_WAITING and self.landed)
    @rule(pick=st.integers(0, 20))
    def remove(self, pick):
        names = sorted(self.landed)
        self._remove(names[pick % len(names)])
        self._step()

    @precondition(lambda self: self.waiting < MOST_WAITING and self._pending())
    @rule(
        pick=st.integers(0, 20),
        changes=CHANGES,
        kind=st.one_of(st.none(), st.sampled_from(KINDS)),
        seed=st.integers(0, 20),
    )
    def replace(self, pick, changes, kind, seed):
        """A file no run applied, replaced under its name: the operator's fix of a refused file, or damage."""
        names = self._pending()
        name = names[pick % len(names)]
        self._put(name, self._file(changes, name, kind, seed))
        self._step()

    @precondition(lambda self: self.waiting < MOST_WAITING and len(self.extras) < len(EXTRA_COLUMNS))
    @rule()
    def add_column(self):
        """A column added at the source: the files landed from now on carry it."""
        self.extras = EXTRA_COLUMNS[: len(self.extras) + 1]
        self._step()

    @precondition(
        lambda self: self.waiting < MOST_WAITING
        and self.accepted
        and all(landed.kind is None for landed in self.landed.values())
    )
    @rule(key=st.integers(1, 6))
    def erase(self, key):
        """A customer erased (`python -m python_hooks erase --subject customer`): every raw file holding it is
        rewritten under its name without its rows (checked here against the file as it was), the table loses
        its row, and staging leaves out its later changes."""
        context = self.context
        context.stats.erasures += 1
        before = {name: pq.read_table(io.BytesIO(landed.main)) for name, landed in self.landed.items()}
        parsed = context.dbt("parse", landing=self.landing, schema=self.schema)
        assert parsed.success, parsed.exception
        with Warehouse.open(["--project-dir", str(PROJECT)]) as warehouse:
            personal_data.erase(warehouse, parsed.result, "customer", [str(key)], "fuzz: run sequences")
        self.erased.add(key)
        for name, table in before.items():
            data = (self.folder / name).read_bytes()
            now = pq.read_table(io.BytesIO(data))
            kept = [row for row in table.to_pylist() if row["customer_id"] != key]
            assert now.schema.equals(table.schema), f"erasure of {key}: {name}'s schema changed"
            assert now.to_pylist() == kept, f"erasure of {key}: {name} is not the file without the customer's rows"
            self.landed[name] = Landed(data, self.landed[name].says)
        self._step()

    @precondition(lambda self: self.waiting or self._pending())
    @rule()
    def run(self):
        """The pipeline, when a step changed something or files wait (a refused batch is tried again)."""
        context, stats = self.context, self.context.stats
        stats.steps += 1
        stats.runs += 1
        self.waiting = 0
        pending = {name: self.landed[name] for name in self._pending()}
        before = self._observe()
        context.caplog.clear()
        ok = context.dbt.pipeline(*SELECT, landing=self.landing, schema=self.schema)
        after = self._observe()
        lines = summary(context.caplog)
        text = "\n".join(lines)
        files = ", ".join(f"{n} ({p.says})" for n, p in pending.items()) or "none"
        label = f"run {stats.runs} (waiting: {files})"

        # Applied whole or not at all: the ledger gains every waiting file, or none.
        kept = {n: c for n, c in after.ledger.items() if n in before.ledger}
        assert kept == before.ledger, f"{label}: ledger rows changed: {before.ledger} -> {after.ledger}"
        new = set(after.ledger) - set(before.ledger)
        assert not new or new == set(pending), f"{label}: a batch applied in part: {sorted(new)}\n{text}"
        if new:
            stats.applied += 1
            stats.damaged_taken += sum(1 for p in pending.values() if p.kind is not None)
            for name in new:
                self.accepted[name] = pending[name].main
                self.events[name] = self._events(pending[name].main)
                (self.mirror / name).write_bytes(pending[name].main)
                assert _readable(pending[name].main), f"{label}: {name} applied, but pyarrow cannot read it"
        elif pending:
            stats.refused += 1
            valid = [n for n, p in pending.items() if not self._refusable(p)]
            assert len(valid) < len(pending), f"{label}: files that are all valid were refused:\n{text}"
        else:
            stats.idle += 1

        self._check_lines(label, ok, pending, bool(new), lines)
        self._check_batch_log(label, before, after, pending, bool(new))
        assert after.ledger == self.events, f"{label}: ledger {after.ledger}, accepted {self.events}"
        self._check_table(label, after.columns)

    def _refusable(self, landed: Landed) -> bool:
        """Damaged and refusable, or a column nested in it and plain in an accepted file (or the other way)."""
        if landed.refusable:
            return True
        accepted = {}
        for data in self.accepted.values():
            for column in pq.read_schema(io.BytesIO(data)):
                accepted.setdefault(column.name.lower(), set()).add(pa.types.is_nested(column.type))
        try:
            schema = pq.read_schema(io.BytesIO(landed.main))
        except Exception:  # noqa: BLE001 - a file pyarrow cannot read is not one this rule is about
            return False
        return any(
            {pa.types.is_nested(c.type)} != accepted.get(c.name.lower(), {pa.types.is_nested(c.type)}) for c in schema
        )

    def _events(self, data: bytes) -> int:
        """The change events of a file that a batch reads now: its rows but those of erased customers."""
        return sum(
            1 for key in pq.read_table(io.BytesIO(data)).column("customer_id").to_pylist() if key not in self.erased
        )

    # ------------------------------------------------------------------ the invariants

    def _observe(self) -> Observed:
        spark = self.context.spark
        meta = f"{self.schema}_cdc_meta"
        if not spark.catalog.tableExists(f"{meta}.cdc_file_ledger"):
            return Observed({}, [], None)
        ledger = {
            row[0]: row[1]
            for row in spark.sql(
                f"select file_name, change_events from {meta}.cdc_file_ledger where model_name = '{MODEL}'"
            ).collect()
        }
        logged = (
            batch_log(spark, self.schema).get(MODEL, []) if spark.catalog.tableExists(f"{meta}.cdc_batch_log") else []
        )
        columns = spark.table(self.relation).columns if spark.catalog.tableExists(self.relation) else None
        return Observed(ledger, logged, columns)

    def _check_lines(self, label: str, ok: bool, pending: dict[str, Landed], applied: bool, lines: list[str]) -> None:
        """A failed run names a waiting file in words and says what to do; no line of the hooks is Spark's."""
        text = "\n".join(lines)
        logged = [
            r.getMessage() for r in self.context.caplog.records if r.name.startswith("python_hooks") and r.levelno >= 30
        ]
        internals = [line for line in logged if NOT_WORDS.search(line)]
        assert not internals, f"{label}: Spark internals in the run's lines:\n" + "\n".join(internals)
        in_place = [line for line in logged if "already applied" in line]
        assert not in_place, f"{label}: an applied file taken for one changed in place:\n" + "\n".join(in_place)
        if ok:
            assert not lines, f"{label}: a run that succeeded ended with:\n{text}"
            return
        assert lines and lines[-1].startswith("What to do:"), f"{label}: a failed run's last lines:\n{text}"
        assert not applied or any(map(self._refusable, pending.values())), f"{label}: valid files failed:\n{text}"
        for name in (n for n, p in pending.items() if self._refusable(p)):
            naming = [i for i, line in enumerate(lines) if name in line]
            if not naming:
                continue
            line = lines[naming[0]]
            if MODEL not in line:  # a dbt failure's detail line: its 'failed: <model>:' line above it
                header = next((lines[i] for i in range(naming[0], -1, -1) if lines[i].startswith("failed: ")), "")
                line = f"{header.split(': ')[1] if ': ' in header else ''}: {line.strip()}"
            assert_worded(line.removeprefix("refused: ").removeprefix("failed: "), name, MODEL, label)
            return
        raise AssertionError(f"{label}: the failed run's last lines name no damaged file waiting:\n{text}")

    def _check_batch_log(self, label: str, before: Observed, after: Observed, pending: dict, applied: bool) -> None:
        assert after.batch_log[: len(before.batch_log)] == before.batch_log, f"{label}: earlier batch log rows changed"
        rows = after.batch_log[len(before.batch_log) :]
        if not pending:
            assert rows == [], f"{label}: a run with nothing new logged {rows}"
            return
        assert len(rows) == 1, f"{label}: {len(rows)} batch log rows for one batch: {rows}"
        row = rows[0]
        if applied:
            events = sum(self._events(p.main) for p in pending.values())
            got = (row["status"], row["files"], row["change_events"], row["files_refused"])
            assert got == ("applied", len(pending), events, 0), f"{label}: logged {got} for {len(pending)} files"
        else:
            counts = (row["rows_inserted"], row["rows_updated"], row["rows_deleted"], row["change_events"])
            assert row["status"] == "refused" and counts == (0, 0, 0, 0), f"{label}: a refused batch logged {row}"
            assert row["files_refused"] >= 1 and row["refusal"], f"{label}: a refused batch logged {row}"

    def _check_table(self, label: str, columns: list[str] | None) -> None:
        if not self.accepted:  # no table, or (a run over an empty folder) an empty one of the declared columns
            rows = 0 if columns is None else self.context.spark.table(self.relation).count()
            assert rows == 0, f"{label}: {rows} rows in a table no file was accepted into"
            return
        assert columns is not None, f"{label}: no table, though {sorted(self.accepted)} were accepted"
        business = [c for c in columns if not c.startswith("_cdc_")]
        expected = {c for data in self.accepted.values() for c in _columns(data)}
        assert set(business) == expected, (
            f"{label}: the table's columns {business}, the accepted files' {sorted(expected)}"
        )
        if self.columns is not None:
            assert business[: len(self.columns)] == self.columns, f"{label}: columns {self.columns} -> {business}"
        self.columns = business
        actual = table_rows(self.context.spark, self.relation, list(KEYS), [*business, "_cdc_op", "_cdc_ts"])
        wanted = {
            key: {**dict.fromkeys(business), **row}
            for key, row in replay(self.mirror, list(KEYS)).items()
            if key[0] not in self.erased
        }
        assert_same_table(actual, wanted, f"{label}: the table against the replay of the accepted files")


def _readable(data: bytes) -> bool:
    try:
        pq.read_table(io.BytesIO(data)).validate(full=True)  # text that is not UTF-8 included
    except Exception:  # noqa: BLE001 - any failure: pyarrow cannot read it
        return False
    return True

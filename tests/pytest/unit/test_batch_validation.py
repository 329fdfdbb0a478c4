"""The batch's validation on the Python side (python_hooks/landing/validation.py): the events of a raw file a
batch would refuse, counted with pyarrow, against the rule written out here in plain Python, row by row. That
Spark's validation counts the same on the same files: tests/pytest/test_validation_pinned.py."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fuzz.python_side import assert_worded
from python_hooks.evolution.apply import refused_files
from python_hooks.landing.validation import FileChecks, PooledChecks, not_timestamps
from python_hooks.project.storage import Location
from python_hooks.project.tables import CdcTable

KAFKA_NAME = "crm.customer+0+0000000042.snappy.parquet"
OPERATIONS = ["I", "U", "D", " u ", "d", "X", "", "ı", "T", "  ", "i", "\tI", None]
DEBEZIUM_OPERATIONS = ["r", "c", "u", "d", "t", "R", "C", "I", "U", "D", "x", "", "cc", None]
WHEN = dt.datetime(2026, 12, 3, 12, 0, 0)
DMS_SEQUENCES = [None, "", "  ", "20261203120000000000000000000000001", " 42 ", "4 2", "-1", "x1", "1" * 40,
                 "1" * 35 + "x", "x" + "1" * 35, "１２"]  # fmt: skip


def _table(producer: str, keys=("id",), folder: Path | None = None) -> CdcTable:
    timestamp = "last_update_time" if producer == "dms" else None
    where = Location.parse(str(folder)) if folder is not None else None
    return CdcTable("m", "s", "m", "stg_m", "src.t", where, producer, timestamp, keys=keys)


def _checked(producer: str, table: pa.Table, name: str = "20261203-120000000.parquet", keys=("id",)) -> FileChecks:
    checks = FileChecks(_table(producer, keys), name)
    for batch in table.to_batches(max_chunksize=7):  # several row groups, summed
        checks.add(pa.Table.from_batches([batch]))
    return checks


def _dms_operation(raw):
    """staging_dms.sql's `coalesce(upper(trim(Op)), 'I')`, row by row (trim: spaces only)."""
    return "I" if raw is None else raw.strip(" ").upper()


def _debezium_operation(raw):
    """staging_debezium.sql's `case lower(op) when 'r' then 'I' ... else upper(op) end`, row by row."""
    if raw is None:
        return None
    return {"r": "I", "c": "I", "u": "U", "d": "D", "t": "T"}.get(raw.lower(), raw.upper())


def _lpad_digits(text: str, width: int) -> bool:
    """Spark's `lpad(text, width, '0')` is `width` digits: its first `width` characters, or all of a shorter text."""
    return all(c in "0123456789" for c in text[:width])


def _expected(operations, keys, stamps):
    """(null keys, null timestamps, unknown operations), counted as cdc_validation_checks counts them."""
    known = {"I", "U", "D", "T"}
    null_keys = sum(1 for op, key in zip(operations, keys, strict=True) if op is not None and op != "T" and key is None)
    unknown = sum(1 for op in operations if op not in known)
    return null_keys, sum(1 for s in stamps if s is None), unknown


@pytest.mark.parametrize("seed", range(6))
def test_dms_events_are_counted_as_the_batch_counts_them(seed):
    chooser = random.Random(seed)
    rows = chooser.randrange(1, 40)
    ops = [chooser.choice(OPERATIONS) for _ in range(rows)]
    keys = [chooser.choice([None, 1, 2, 3]) for _ in range(rows)]
    stamps = [chooser.choice([None, WHEN, WHEN]) for _ in range(rows)]
    seqs = [chooser.choice(DMS_SEQUENCES) for _ in range(rows)]
    file = pa.table(
        {
            "Op": pa.array(ops, pa.string()),
            "last_update_time": stamps,
            "ID": keys,
            "city": ["x"] * rows,
            "AR_H_CHANGE_SEQ": pa.array(seqs, pa.string()),
        }
    )
    checks = _checked("dms", file)
    staged = [_dms_operation(op) for op in ops]
    null_keys, null_stamps, unknown = _expected(staged, keys, stamps)
    assert (checks.null_keys.get("id", 0), checks.null_timestamps, checks.unknown) == (null_keys, null_stamps, unknown)
    assert checks.unknown_operations == {f"'{op}'" for op in staged if op not in {"I", "U", "D", "T"}}
    # staging's `coalesce(lpad(nullif(trim(seq), ''), 35, '0'), <35 digits from the file name>)`
    bad = sum(1 for seq in seqs if seq is not None and seq.strip(" ") and not _lpad_digits(seq.strip(" "), 35))
    assert checks.bad_sequences == bad


def test_a_dms_sequence_of_integers_is_bad_where_negative():
    file = pa.table({"last_update_time": [WHEN] * 3, "id": [1, 2, 3], "ar_h_change_seq": [5, -5, None]})
    assert _checked("dms", file).bad_sequences == 1


def test_a_dms_file_without_op_holds_inserts_only():
    checks = _checked("dms", pa.table({"last_update_time": [WHEN, WHEN], "id": [1, None]}))
    assert (checks.unknown, checks.null_keys, checks.failures()[0]) == (
        0,
        {"id": 1},
        "1 change event(s) with null or missing key column id",
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("named", [True, False])
def test_flattened_debezium_events_are_counted_as_the_batch_counts_them(seed, named):
    chooser = random.Random(seed)
    rows = chooser.randrange(1, 40)
    ops = [chooser.choice(DEBEZIUM_OPERATIONS) for _ in range(rows)]
    keys = [chooser.choice([None, 1, 2]) for _ in range(rows)]
    stamps = [chooser.choice([None, 1_700_000_000_000]) for _ in range(rows)]
    lsns = [chooser.choice([None, 123, -4]) for _ in range(rows)]
    file = pa.table({"id": keys, "__op": ops, "__source_ts_ms": stamps, "__source_lsn": lsns})
    checks = _checked("debezium_flattened", file, KAFKA_NAME if named else "changes.parquet")
    staged = [_debezium_operation(op) for op in ops]
    null_keys, null_stamps, unknown = _expected(staged, keys, stamps)
    assert (checks.null_keys.get("id", 0), checks.null_timestamps, checks.unknown) == (null_keys, null_stamps, unknown)
    # the sequence: the LSN as digits, else the Kafka position the S3 sink's file name gives
    assert checks.bad_sequences == lsns.count(-4) + (0 if named else lsns.count(None))


@pytest.mark.parametrize("named", [True, False])
def test_a_mysql_position_is_bad_where_not_digits(named):
    file = pa.table(
        {
            "id": [1, 2, 3, 4, 5],
            "__op": ["c"] * 5,
            "__source_ts_ms": [1] * 5,
            "__source_file": ["mysql-bin.000003", None, "mysql-bin.000003", "mysql-bin.000003", "x"],
            "__source_pos": pa.array(["154", "154", "-1", "12a", None], pa.string()),
            "__source_row": [0, 0, 0, 0, 0],
        }
    )
    checks = _checked("debezium_flattened", file, KAFKA_NAME if named else "changes.parquet")
    # event 2 has no file and 5 no pos: no position, so the Kafka one, if the name gives it
    assert checks.bad_sequences == 2 + (0 if named else 2)


@pytest.mark.parametrize("seed", range(6))
def test_envelope_keys_are_read_from_after_else_before(seed):
    chooser = random.Random(seed)
    rows = chooser.randrange(1, 30)
    image = pa.struct([("id", pa.int64()), ("city", pa.string())])
    afters = [chooser.choice([None, {"id": None, "city": "a"}, {"id": 1, "city": "b"}]) for _ in range(rows)]
    befores = [chooser.choice([None, {"id": None, "city": "a"}, {"id": 2, "city": "c"}]) for _ in range(rows)]
    ops = [chooser.choice(DEBEZIUM_OPERATIONS) for _ in range(rows)]
    source = pa.array([{"ts_ms": chooser.choice([None, 5])} for _ in range(rows)], pa.struct([("ts_ms", pa.int64())]))
    top_ts = [chooser.choice([None, 7]) for _ in range(rows)]
    file = pa.table(
        {
            "before": pa.array(befores, image),
            "after": pa.array(afters, image),
            "op": ops,
            "source": source,
            "ts_ms": pa.array(top_ts, pa.int64()),
        }
    )
    checks = _checked("debezium_envelope", file, KAFKA_NAME)
    pairs = zip(afters, befores, strict=True)
    keys = [(a["id"] if a is not None else (b["id"] if b is not None else None)) for a, b in pairs]
    stamps = [s["ts_ms"] if s["ts_ms"] is not None else t for s, t in zip(source.to_pylist(), top_ts, strict=True)]
    null_keys, null_stamps, unknown = _expected([_debezium_operation(op) for op in ops], keys, stamps)
    assert (checks.null_keys.get("id", 0), checks.null_timestamps, checks.unknown) == (null_keys, null_stamps, unknown)


@pytest.mark.parametrize(
    "text",
    ["2026-12-03 12:00:00", "2026-12-03T12:00:00.123456Z", " 2026-12-03 ", "2026-12-03", "2026", "2026-1-5",
     "12:00:00", "2024-02-29 00:00:00", "2000-02-29", "+10000-01-01", "2026-12-03 12:00:00 America/New_York",
     "\t2026-12-31\n"],
)  # fmt: skip
def test_text_spark_may_read_as_a_timestamp_is_never_counted(text):
    assert not_timestamps(pa.array([text])).to_pylist() == [False]


@pytest.mark.parametrize(
    "text", ["", "   ", "garbage", "2026-13-01", "2026-00-10", "2023-02-29", "1900-02-29", "2026-04-31 01:00", "x2026"]
)
def test_text_spark_surely_cannot_read_as_a_timestamp_is_counted(text):
    assert not_timestamps(pa.array([text])).to_pylist() == [True]


def test_a_file_with_events_a_batch_refuses_is_refused_in_words_naming_it(tmp_path):
    """The file, the model and the column (or what the operation column holds), in one line each."""
    folder = tmp_path / "customer"
    folder.mkdir()
    bad = folder / "20261203-120000000.parquet"
    pq.write_table(pa.table({"Op": ["I", "Q"], "last_update_time": [WHEN, None], "id": [None, 2]}), bad)
    good = folder / "20261203-120100000.parquet"
    pq.write_table(pa.table({"Op": ["I", "D"], "last_update_time": [WHEN, WHEN], "id": [1, 2]}), good)
    table = _table("dms", folder=folder)
    problems = refused_files(table, [Location.parse(str(bad)), Location.parse(str(good))])
    assert len(problems) == 3, problems
    said = ["key column id", "null commit timestamp", "unknown operation 'Q'"]
    for problem, says in zip(problems, said, strict=True):
        assert says in problem and "\n" not in problem
        assert_worded(problem, bad.name, "m", "refused_files")
    assert not any(good.name in p for p in problems)


def test_dms_text_timestamps_are_counted_where_spark_surely_reads_none():
    stamps = ["2026-12-03 12:00:00", None, "not a time", "2026-02-30 00:00:00", " 2026-12-03T01:02:03 "]
    checks = _checked("dms", pa.table({"Op": ["I"] * 5, "last_update_time": stamps, "id": [1, 2, 3, 4, 5]}))
    assert checks.null_timestamps == 3


def test_an_operation_column_of_nulls_only_is_read_as_staging_reads_it():
    """A column with no value has Parquet's null type (Spark's void): DMS takes its events as inserts, Debezium
    as unknown operations."""
    dms_file = pa.table({"Op": pa.nulls(3), "last_update_time": [WHEN] * 3, "id": [1, None, 3]})
    assert (_checked("dms", dms_file).unknown, _checked("dms", dms_file).null_keys) == (0, {"id": 1})
    debezium_file = pa.table({"__op": pa.nulls(2), "__source_ts_ms": [1, 2], "id": [1, 2]})
    checks = _checked("debezium_flattened", debezium_file, KAFKA_NAME)
    assert (checks.unknown, checks.unknown_operations) == (2, {"null"})


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("producer", ["dms", "debezium_flattened"])
def test_files_checked_together_are_refused_as_each_alone(seed, producer):
    """PooledChecks (small files of one schema and kind of name in one pass) names the same files with the same
    failures as FileChecks over each file alone, whatever mix of good, bad, large and differently typed files."""
    chooser = random.Random(seed)
    pooled = PooledChecks(_table(producer), pooled_rows=chooser.choice([5, 30, 200]))
    expected = {}
    for index in range(chooser.randrange(1, 25)):
        rows = chooser.randrange(1, 12)
        bad = chooser.random() < 0.15
        if producer == "dms":
            ops = [chooser.choice(OPERATIONS) if bad else chooser.choice(["I", "U", "D"]) for _ in range(rows)]
            keys = [chooser.choice([None, 1]) if bad else 1 for _ in range(rows)]
            key_type = chooser.choice([pa.int64(), pa.int32()])  # two schemas: two pools
            file = pa.table({"Op": ops, "last_update_time": [WHEN] * rows, "id": pa.array(keys, key_type)})
            name = f"2026120{index % 9}-120000000.parquet"
        else:
            ops = [chooser.choice(DEBEZIUM_OPERATIONS) if bad else "u" for _ in range(rows)]
            lsns = [chooser.choice([None, 7, -4]) if bad else 7 for _ in range(rows)]
            file = pa.table({"id": [1] * rows, "__op": ops, "__source_ts_ms": [1] * rows, "__source_lsn": lsns})
            name = chooser.choice([KAFKA_NAME, f"changes-{index}.parquet"])
        reading = pooled.reading(index, name)
        alone = FileChecks(_table(producer), name)
        for batch in file.to_batches(max_chunksize=chooser.choice([3, 50])):
            reading.add(pa.Table.from_batches([batch]))
            alone.add(pa.Table.from_batches([batch]))
        pooled.done(reading)
        if alone.failures():
            expected[index] = alone.failures()
    assert pooled.failures() == expected


def test_files_read_two_at_a_time_are_refused_in_their_order(tmp_path, monkeypatch):
    """refused_files reads small files in rounds on two threads: the refusals are those of each file alone, in the
    files' order, whichever round or thread read them."""
    import python_hooks.evolution.apply as apply
    from python_hooks.landing.files import raw_files

    monkeypatch.setattr(apply, "READ_ROUND_FILES", 3)  # several rounds of a few files
    folder = tmp_path / "customer"
    folder.mkdir()
    bad = {4, 5, 11}
    for n in range(14):
        ops = ["I", "Q" if n in bad else "U"]
        rows = {"Op": ops, "last_update_time": [WHEN, WHEN], "id": [n, n]}
        pq.write_table(pa.table(rows), folder / f"20261203-1200{n:02d}000.parquet")
    (folder / "20261203-120007000.parquet").write_bytes(b"PAR1 cut short")
    files = raw_files(Location.parse(str(folder)), "dms")
    assert [len(r) for r in apply._read_rounds(files)][:4] == [3, 3, 3, 3]
    problems = refused_files(_table("dms", folder=folder), files)
    named = [next(f.name for f in files if f.name in p) for p in problems]
    expected = [f"20261203-1200{n:02d}000.parquet" for n in sorted(bad | {7})]
    assert named == expected, problems


PLACEHOLDER = "__debezium_unavailable_value"


def _holds(rows: pa.Table) -> bool:
    """Independent of holds_value: the placeholder among the rows' values as Python reads them, at any depth
    (a map's keys and values too)."""

    def found(value) -> bool:
        if isinstance(value, dict):
            return any(found(v) for v in value.values())
        if isinstance(value, list | tuple):
            return any(found(v) for v in value)
        return value in (PLACEHOLDER, PLACEHOLDER.encode())

    return any(found(row) for row in rows.to_pylist())


@pytest.mark.parametrize("seed", range(40))
def test_a_placeholder_is_found_at_any_depth_and_never_missed(seed):
    """holds_value over random columns of every kind a Debezium file carries (text, binary, lists, an envelope's
    structs, a dictionary, a map): False only where no value is the placeholder; a map is not looked into, so it
    is said to hold it."""
    from python_hooks.landing.validation import holds_value

    chooser = random.Random(seed)

    def text():
        return chooser.choice([None, "a", "", PLACEHOLDER, PLACEHOLDER + " ", "x" * 3])

    rows = 5
    kinds = {
        "text": lambda: pa.array([text() for _ in range(rows)], pa.string()),
        "large": lambda: pa.array([text() for _ in range(rows)], pa.large_string()),
        "binary": lambda: pa.array([None if (t := text()) is None else t.encode() for _ in range(rows)], pa.binary()),
        "list": lambda: pa.array([[text(), text()] for _ in range(rows)], pa.list_(pa.string())),
        "envelope": lambda: pa.array(
            [{"id": 1, "body": text(), "tags": [text()]} for _ in range(rows)],
            pa.struct([("id", pa.int64()), ("body", pa.string()), ("tags", pa.list_(pa.string()))]),
        ),
        "dictionary": lambda: pa.array([text() for _ in range(rows)], pa.string()).dictionary_encode(),
        "number": lambda: pa.array(range(rows), pa.int64()),
        "map": lambda: pa.array([[("k", "v")] for _ in range(rows)], pa.map_(pa.string(), pa.string())),
    }
    chosen = chooser.sample(sorted(kinds), chooser.randint(1, 4))
    table = pa.table({name: kinds[name]() for name in chosen})
    assert holds_value(table, PLACEHOLDER) == (_holds(table) or "map" in chosen), table.to_pylist()


def test_refused_files_says_whether_a_batch_holds_its_sources_placeholder(tmp_path):
    """The fact a batch plans from (its fill, macros/cdc/unchanged.sql): set for a table whose source has a
    placeholder, true when any file of the batch holds it, whichever round or thread read it."""
    from dataclasses import replace

    from python_hooks.landing.files import raw_files

    folder = tmp_path / "document"
    folder.mkdir()
    for n in range(5):
        body = [PLACEHOLDER if n == 3 else "text", "more"]
        rows = {"id": [n, n], "body": body, "__op": ["u", "u"], "__source_ts_ms": [1, 2], "__source_lsn": [7, 8]}
        pq.write_table(pa.table(rows), folder / f"shop.document+0+{n:010d}.snappy.parquet")
    files = raw_files(Location.parse(str(folder)), "debezium")
    table = replace(_table("debezium", folder=folder), unchanged_value=PLACEHOLDER)
    for batch, holds in ((files, True), (files[:3], False), (files[3:4], True)):
        placeholders = {}
        assert refused_files(table, batch, placeholders=placeholders) == []
        assert placeholders == {"m": holds}
    placeholders = {}
    refused_files(_table("debezium", folder=folder), files, placeholders=placeholders)
    assert placeholders == {}, "a source without a placeholder: nothing to say"


def _debezium_group(producer: str, events: list[tuple]) -> pa.Table:
    """Rows of (raw operation, key, commit millis, LSN) as a Debezium file holds them, flattened or as an envelope
    (the key in `after`, or in `before` for a delete)."""
    ops = [op for op, *_ in events]
    keys = [key for _, key, _, _ in events]
    millis = [ms for _, _, ms, _ in events]
    lsns = [lsn for *_, lsn in events]
    if producer == "debezium_flattened":
        return pa.table(
            {"id": keys, "body": ["x"] * len(events), "__op": ops, "__source_ts_ms": millis, "__source_lsn": lsns}
        )
    row = pa.struct([("id", pa.int64()), ("body", pa.string())])
    after = [None if op == "d" else {"id": key, "body": "x"} for op, key, *_ in events]
    before = [{"id": key, "body": "x"} if op == "d" else None for op, key, *_ in events]
    source = [{"ts_ms": ms, "lsn": lsn} for ms, lsn in zip(millis, lsns, strict=True)]
    return pa.table(
        {
            "before": pa.array(before, row),
            "after": pa.array(after, row),
            "source": pa.array(source, pa.struct([("ts_ms", pa.int64()), ("lsn", pa.int64())])),
            "op": ops,
        }
    )


def _one_round(events: list[tuple]) -> bool:
    """The rule FillFacts decides, written out over every pair of events: no delete; or no insert or update of a
    key at or after (commit time, LSN) a delete of that key, and no create at a delete's position."""
    read = [(_debezium_operation(op), key, (ms, lsn)) for op, key, ms, lsn in events]
    deletes = [(key, at) for op, key, at in read if op == "D"]
    if not deletes:
        return True
    changes = [(op, key, at) for op, key, at in read if op in ("I", "U")]
    after_delete = any(key == gone and at >= when for _, key, at in changes for gone, when in deletes)
    key_change = any(op == "I" and at == when for op, _, at in changes for _, when in deletes)
    return not after_delete and not key_change


@pytest.mark.parametrize("seed", range(80))
def test_the_fill_takes_one_round_only_where_no_delete_can_change_it(seed):
    """FillFacts over random batches of Debezium files (both shapes, several files, read by two threads as the
    hooks read them): one round exactly where the rule written out here over every pair of events allows it."""
    from concurrent.futures import ThreadPoolExecutor

    from python_hooks.landing.validation import FillFacts

    chooser = random.Random(seed)
    producer = chooser.choice(["debezium_flattened", "debezium_envelope"])
    operations = chooser.choice([["c", "u", "r"], ["c", "u", "d", "r"], ["u", "d", "t"], ["c", "d"]])
    span = chooser.choice([4, 8, 80])  # keys and positions that meet often, or seldom

    def event():
        return chooser.choice(operations), chooser.randint(1, span), chooser.randint(1, span), chooser.randint(1, 3)

    events = [event() for _ in range(12)]
    cuts = sorted(chooser.sample(range(1, len(events)), chooser.randint(0, 4)))
    groups = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]
    facts = FillFacts(_table(producer))
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(facts.add, [_debezium_group(producer, group) for group in groups]))
    assert facts.one_round() == _one_round(events), (producer, events)


def test_the_fill_takes_two_rounds_after_a_delete_where_this_side_cannot_tell():
    """A batch with a delete whose keys or positions this side does not compare as staging reads them fills in
    two rounds; without a delete, in one."""
    from dataclasses import replace

    from python_hooks.landing import validation
    from python_hooks.landing.validation import FillFacts

    table = _table("debezium_flattened")

    def one_round(table, *groups) -> bool:
        facts = FillFacts(table)
        for group in groups:
            facts.add(group)
        return facts.one_round()

    group = _debezium_group("debezium_flattened", [("d", 1, 1, 5), ("u", 2, 1, 6)])  # one round if told
    assert one_round(table, group)
    assert not one_round(table, group.set_column(0, "id", pa.array([1.0, 2.0]))), "a key staging may read otherwise"
    assert not one_round(replace(table, decoded_types=(("id", "date"),)), group), "a key staging decodes"
    as_texts = _debezium_group("debezium_flattened", [("u", 1, 3, 1)]).set_column(0, "id", pa.array(["1"]))
    assert not one_round(table, group, as_texts), "integers in one file, texts in another: staging casts them alike"
    assert not one_round(table, group.set_column(3, "__source_ts_ms", pa.array(["1", "1"]))), "a commit time as text"
    assert not one_round(table, group.set_column(4, "__source_lsn", pa.array([5, None]))), "no LSN: a Kafka position"
    assert not one_round(table, group.drop_columns(["__source_lsn"])), "no LSN at all"
    many = _debezium_group("debezium_flattened", [("u", n, 9, n) for n in range(10, 10 + 3_000)])
    limit, validation.FILL_FACTS_MAX_EVENTS = validation.FILL_FACTS_MAX_EVENTS, 2_000
    try:
        assert not one_round(table, group, many), "more events than it keeps"
    finally:
        validation.FILL_FACTS_MAX_EVENTS = limit
    dms = pa.table({"id": [1, 2], "Op": ["D", "U"], "last_update_time": ["2026-12-03 12:00:00"] * 2})
    assert not one_round(_table("dms"), dms), "a DMS file's position: this side cannot tell"
    assert one_round(_table("dms"), dms.set_column(1, "Op", pa.array(["U", "I"]))), "no delete: one round"
    unreadable = _debezium_group("debezium_flattened", [("u", 1, 1, 1)]).set_column(0, "id", pa.array([1.5]))
    assert one_round(table, unreadable), "no delete: one round, whatever the keys"


def test_refused_files_says_whether_a_batch_fills_in_one_round(tmp_path):
    """The fact reaches the run's plan from refused_files, for a table whose source has a placeholder, whichever
    round or thread read each file; nothing for a source without one."""
    from dataclasses import replace

    from python_hooks.landing.files import raw_files

    folder = tmp_path / "document"
    folder.mkdir()
    for n in range(5):
        ops = ["u", "d" if n == 3 else "c"]
        rows = {"id": [n, 10 + n], "body": [PLACEHOLDER, "more"], "__op": ops, "__source_ts_ms": [n, 100 + n],
                "__source_lsn": [2 * n, 2 * n + 1]}  # fmt: skip
        pq.write_table(pa.table(rows), folder / f"shop.document+0+{n:010d}.snappy.parquet")
    pq.write_table(
        pa.table({"id": [13], "body": ["again"], "__op": ["u"], "__source_ts_ms": [200], "__source_lsn": [20]}),
        folder / "shop.document+0+0000000005.snappy.parquet",
    )
    files = raw_files(Location.parse(str(folder)), "debezium_flattened")
    table = replace(_table("debezium_flattened", folder=folder), unchanged_value=PLACEHOLDER)
    # file 3 deletes key 13, which file 5 updates after: two rounds; without file 5 (or file 3), one
    for batch, one in ((files, False), (files[:5], True), (files[:3], True), (files[3:], False)):
        facts = {}
        assert refused_files(table, batch, placeholders={}, one_round=facts) == []
        assert facts == {"m": one}, [f.name for f in batch]
    facts = {}
    refused_files(_table("debezium_flattened", folder=folder), files, placeholders={}, one_round=facts)
    assert facts == {}, "a source without a placeholder: nothing to say"

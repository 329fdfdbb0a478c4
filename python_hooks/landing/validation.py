"""A batch's validation on the Python side: the change events of a raw file that the batch's own validation
(macros/cdc/validation.sql: `cdc_validation_checks`, over what staging makes of the file) would refuse,
counted as pyarrow reads the file, so that the hooks refuse the file before they change anything. A schema
change is a write too: a file that brings a new column and an unknown operation must leave no column
(found by `make fuzz`, 2026-12-03).

The checks, each in the words the batch's refusal uses (`KEY_WORDS`, `TIMESTAMP_WORDS`, `SEQUENCE_WORDS`,
`OPERATION_WORDS`):
- a key column null (but in a truncate, which has no key);
- the commit timestamp null: DMS's timestamp column (or its text where Spark surely reads no timestamp: not
  of a shape Spark reads, or a date that does not exist: `not_timestamps`), Debezium's `__source_ts_ms` or
  `source.ts_ms`/`ts_ms`;
- the change sequence null or not 35 digits: a Debezium event without a source position in a file whose name
  is not the S3 sink's `<topic>+<partition>+<offset>`, or whose position is not digits (a negative LSN, MySQL
  `pos` or `row`); a DMS `AR_H_CHANGE_SEQ` that is not digits once trimmed (a null or empty one falls back on
  the file name, which always makes 35 digits);
- an unknown operation (DMS `Op` after trim and upper case, a missing one is an insert; Debezium's `__op`/
  `op` mapped r, c -> I, u -> U, d -> D, t -> T).

Where this side cannot tell as Spark would (a key staging decodes from text, a timestamp text of an odd
shape), it counts nothing, and the batch's validation in Spark, which runs on every batch, refuses the file:
this side may miss a bad event, never refuses a good one. `tests/pytest/test_validation_pinned.py` holds
the two sides together (the same counts on the same hostile files, for every producer).

Beside the checks, two facts the batch plans from: whether a file holds its source's placeholder for a value
not sent (`holds_value`, meta.cdc_unchanged_value): a batch none of whose files holds it skips the fill
(macros/cdc/unchanged.sql); and, for such a source, whether the fill's rules that follow a delete can change a
value (`FillFacts`): a batch where they cannot fills in one round. Where this side cannot tell, it says the file
holds the placeholder, and the rules may.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from python_hooks.project.tables import CdcTable

KNOWN_OPERATIONS = ("I", "U", "D", "T")
DEBEZIUM_OPERATIONS = {"r": "I", "c": "I", "u": "U", "d": "D", "t": "T"}
# What each check says in a refusal: the words of cdc_validation_checks (the key check names its column).
KEY_WORDS = "null or missing key column {key}"
TIMESTAMP_WORDS = (
    "null commit timestamp (_cdc_ts, from the producer's commit-time column: DMS last_update_time or the task's"
    " TimestampColumnName, Debezium source.ts_ms or __source_ts_ms)"
)
SEQUENCE_WORDS = (
    "null or malformed change sequence (_cdc_seq: 35 digits, from DMS AR_H_CHANGE_SEQ or the Debezium source position)"
)
OPERATION_WORDS = (
    "unknown operation {operations} (the producer's operation column: Op, __op or op; known: I, U, D and"
    " Debezium's r, c, u, d, t)"
)
# The S3 sink's file name, as staging reads the Kafka position from it (stg_debezium_changes_sql).
KAFKA_NAME = re.compile(r"\+([0-9]+)\+([0-9]+)\.[^+]*$")
LONG_MAX = 2**63 - 1
# Around a timestamp's text, more than Spark trims (its ASCII whitespace): never less.
TRIMMED = r"^[\s\x00-\x20\x7f-\x9f]+|[\s\x00-\x20\x7f-\x9f]+$"
# The shapes of text Spark may read as a timestamp (a superset: a text outside them surely is not one), and the
# parts of a date with a four-digit year, whose month and day must exist.
TIMESTAMP_TEXT = r"(?s)^(?:[+-]?\d+(?:-\d{1,2}(?:-\d{1,2}(?:[ T].*)?)?)?|T?\d{1,2}:\d{1,2}.*)$"
DATE_PARTS = r"^(?P<year>\d{4})-(?P<month>\d{1,2})(?:-(?P<day>\d{1,2}))?"
DAYS_IN_MONTH = pa.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], pa.int64())


@dataclass
class FileChecks:
    """The events of one raw file that fail each check, summed over its row groups (`add`)."""

    table: CdcTable
    file_name: str
    null_keys: dict[str, int] = field(default_factory=dict)
    null_timestamps: int = 0
    bad_sequences: int = 0  # null or not 35 digits
    unknown: int = 0
    unknown_operations: set[str] = field(default_factory=set)
    undecided: bool = False  # a row group counted nothing: pyarrow could not compare as staging does

    def add(self, group: pa.Table) -> None:
        """Counts the failing events of one row group; a column of a type pyarrow cannot compare as staging
        does counts nothing (Spark decides)."""
        try:
            self._add(group)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            self.undecided = True

    def _add(self, group: pa.Table) -> None:
        columns = _by_lower(group)
        producer = self.table.producer
        operation = _operations(producer, columns, group.num_rows)
        if operation is not None:
            unknown = pc.invert(pc.fill_null(pc.is_in(operation, pa.array(KNOWN_OPERATIONS)), False))
            self.unknown += _count(unknown)
            bad = pc.filter(operation, unknown)
            self.unknown_operations |= {"null" if v is None else f"'{v}'" for v in bad.to_pylist()}
        for key in self.table.keys:
            value = _key(producer, columns, key.lower())
            if value is None or operation is None:
                continue
            # as `_cdc_op <> 'T' and key is null` counts: a null operation is not counted
            counted = pc.and_kleene(pc.not_equal(operation, "T"), pc.is_null(value))
            self.null_keys[key] = self.null_keys.get(key, 0) + _count(counted)
        self.null_timestamps += _null_timestamps(self.table, columns)
        self.bad_sequences += _bad_sequences(producer, columns, self.file_name, group.num_rows)

    def failures(self) -> list[str]:
        """`<n> change event(s) with <what>`, one per failing check, in cdc_validation_checks' order."""
        found = [(n, KEY_WORDS.format(key=key)) for key, n in self.null_keys.items()]
        found += [(self.null_timestamps, TIMESTAMP_WORDS), (self.bad_sequences, SEQUENCE_WORDS)]
        operations = ", ".join(sorted(self.unknown_operations)[:5])
        found.append((self.unknown, OPERATION_WORDS.format(operations=operations)))
        return [f"{n} change event(s) with {what}" for n, what in found if n > 0]


POOLED_ROWS = 100_000  # small files are checked together, up to this many events at a time


@dataclass
class _Reading:
    """One file's row groups as they are read: held for a pooled check while they are few, else checked
    as they come (`checks`), so that a large file is never held whole."""

    table: CdcTable
    index: int
    file_name: str
    limit: int
    groups: list[pa.Table] = field(default_factory=list)
    rows: int = 0
    checks: FileChecks | None = None

    def add(self, group: pa.Table) -> None:
        if self.checks is None and self.rows + group.num_rows <= self.limit:
            self.groups.append(group)
            self.rows += group.num_rows
            return
        if self.checks is None:
            self.checks = FileChecks(self.table, self.file_name)
            for held in self.groups:
                self.checks.add(held)
            self.groups = []
        self.checks.add(group)


class PooledChecks:
    """`FileChecks` of many files at the cost of few: the row groups of small files of one schema (and, for
    Debezium, of one kind of name: `kafka_named`) are checked together, in one pass of each check over all
    their events, since a check's count over them is the sum of its counts per file. Only when that pass
    finds a failing event (or cannot tell: `FileChecks.undecided`) is each of those files checked alone, for
    the refusal that names it. `reading(index, name)` before a file is read (its `add` takes the row
    groups), `done(reading)` once it was read whole; `failures()`: each failing file's index -> its
    `FileChecks.failures()`."""

    def __init__(self, table: CdcTable, pooled_rows: int = POOLED_ROWS) -> None:
        self.table = table
        self.pooled_rows = pooled_rows
        self._pools: dict[tuple, list[_Reading]] = {}
        self._rows: dict[tuple, int] = {}
        self._failures: dict[int, list[str]] = {}

    def reading(self, index: int, file_name: str) -> _Reading:
        return _Reading(self.table, index, file_name, self.pooled_rows)

    def done(self, reading: _Reading) -> None:
        if reading.checks is not None:  # a large file, checked as it was read
            self._record(reading.index, reading.checks)
            return
        if not reading.groups:
            return
        schema = reading.groups[0].schema
        kafka = None if self.table.producer == "dms" else kafka_named(reading.file_name)
        key = (tuple((f.name, str(f.type), f.nullable) for f in schema), kafka)
        self._pools.setdefault(key, []).append(reading)
        self._rows[key] = self._rows.get(key, 0) + reading.rows
        if self._rows[key] >= self.pooled_rows:
            self._check(key)

    def failures(self) -> dict[int, list[str]]:
        for key in list(self._pools):
            self._check(key)
        return self._failures

    def _check(self, key: tuple) -> None:
        readings = self._pools.pop(key)
        self._rows.pop(key)
        pooled = FileChecks(self.table, readings[0].file_name)
        try:
            pooled.add(pa.concat_tables([g for r in readings for g in r.groups]).combine_chunks())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pooled.undecided = True
        if not pooled.undecided and not pooled.failures():
            return
        for reading in readings:  # a failing event among them: each file alone, for the refusal that names it
            checks = FileChecks(self.table, reading.file_name)
            for group in reading.groups:
                checks.add(group)
            self._record(reading.index, checks)

    def _record(self, index: int, checks: FileChecks) -> None:
        failures = checks.failures()
        if failures:
            self._failures[index] = failures


def holds_value(rows: pa.Table, value: str) -> bool:
    """Whether any text or binary value of `rows` is `value`, looking into lists and structs (a Debezium
    envelope's `before`/`after`); True also for a column of a type this does not look into (a map, a union),
    so that False is sure: no event of these rows carries `value` in any column."""
    text, binary = pa.scalar(value, pa.string()), pa.scalar(value.encode(), pa.binary())

    def holds(column: pa.ChunkedArray | pa.Array) -> bool:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return bool(pc.any(pc.equal(column, text.cast(kind))).as_py())
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
            return bool(pc.any(pc.equal(column.cast(pa.binary()), binary)).as_py())
        if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
            return holds(pc.list_flatten(column))
        if pa.types.is_struct(kind):
            return any(holds(pc.struct_field(column, [i])) for i in range(kind.num_fields))
        if pa.types.is_dictionary(kind):
            return holds(column.cast(kind.value_type))
        return pa.types.is_nested(kind) or pa.types.is_union(kind)

    return any(holds(column) for column in rows.columns)


# How many events of a batch FillFacts keeps keys and positions of; a batch of more fills in two rounds.
FILL_FACTS_MAX_EVENTS = 200_000


@dataclass
class FillFacts:
    """What a batch's fill of its source's placeholder (macros/cdc/unchanged.sql) needs to know of its deletes,
    gathered over the row groups of its files (`add`, from the reading threads). The fill's rules that follow a
    delete can change a value only when an insert or update of a key comes at or after a delete of that key in
    the batch (its segment is not the first), or a create shares its position with a delete (rule 2's key
    change). Without either, one round of rules 1 and 3 decides what two rounds of all three would (`one_round`),
    and so it does for a batch with no delete at all. A position is staging's order (`_cdc_ts`, `_cdc_seq`): a
    Debezium event's commit time in milliseconds and its LSN, compared as the files hold them (staging pads the
    LSN to 35 digits, which keeps their order); keys as the files hold them where staging reads them so that
    equal stays equal and different stays different (integers, texts). For anything else (a key of another type
    or one staging decodes, meta.debezium_types; an event without an LSN, whose position staging takes from the
    Kafka offset; a DMS file; more than FILL_FACTS_MAX_EVENTS events) this side cannot tell, and a batch with a
    delete takes two rounds."""

    table: CdcTable
    deletes: bool = False
    undecided: bool = False
    events: int = 0
    key_kinds: set = field(default_factory=set)  # (key index, integer or text): one kind per key column
    first_delete: dict = field(default_factory=dict)  # key -> the position of its first delete
    last_change: dict = field(default_factory=dict)  # key -> the position of its last insert or update
    delete_positions: set = field(default_factory=set)
    create_positions: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        decoded = {column for column, _ in self.table.decoded_types}  # e.g. a text staging reads as a time
        self.undecided = not self.table.keys or any(name.lower() in decoded for name in self.table.keys)

    def add(self, group: pa.Table) -> None:
        try:
            self._add(group)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            with self.lock:
                self.deletes = self.undecided = True

    def one_round(self) -> bool:
        """Whether the batch's fill takes one round (see the class)."""
        with self.lock:
            if not self.deletes:
                return True
            if self.undecided or self.delete_positions & self.create_positions:
                return False
            return all(
                self.last_change[key] < position
                for key, position in self.first_delete.items()
                if key in self.last_change
            )

    def _add(self, group: pa.Table) -> None:
        columns = _by_lower(group)
        producer = self.table.producer
        operation = _operations(producer, columns, group.num_rows)
        if operation is None:
            with self.lock:
                self.deletes = self.undecided = True
            return
        deletes = bool(pc.any(pc.fill_null(pc.equal(operation, "D"), False)).as_py())
        keys = [_key(producer, columns, key.lower()) for key in self.table.keys]
        positions = _positions(producer, columns)
        with self.lock:
            self.deletes = self.deletes or deletes
            self.events += group.num_rows
            if self.undecided:
                return
            if positions is None or any(key is None or _kind(key.type) is None for key in keys):
                self.undecided = True
                return
            # a key column read as integers from one file and texts from another: staging casts them alike
            self.key_kinds |= {(index, _kind(key.type)) for index, key in enumerate(keys)}
            if len(self.key_kinds) > len(keys) or self.events > FILL_FACTS_MAX_EVENTS:
                self.undecided = True
                return
        values = list(zip(*(key.to_pylist() for key in keys), strict=True))
        with self.lock:
            for op, key, position in zip(operation.to_pylist(), values, positions, strict=True):
                if op == "D":
                    self.first_delete[key] = min(position, self.first_delete.get(key, position))
                    self.delete_positions.add(position)
                elif op in ("I", "U"):
                    self.last_change[key] = max(position, self.last_change.get(key, position))
                    if op == "I":
                        self.create_positions.add(position)


def _kind(kind: pa.DataType) -> str | None:
    """A key type whose values staging reads so that equal stays equal and different stays different: integers
    or texts; None for any other."""
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    return None


def _positions(producer: str, columns: dict) -> list[tuple[int, int]] | None:
    """Each Debezium event's position as staging orders it, (commit time in milliseconds, LSN), or None where
    this side cannot tell (DMS; a time or an LSN missing, null or not an integer)."""
    if producer == "dms":
        return None
    millis, lsn = _debezium_commit_time(producer, columns), _source_position(producer, columns)[0]
    if any(part is None or not pa.types.is_integer(part.type) or part.null_count for part in (millis, lsn)):
        return None
    return list(zip(millis.to_pylist(), lsn.to_pylist(), strict=True))


def kafka_named(file_name: str) -> bool:
    """A file named as the S3 sink names it (`<topic>+<partition>+<offset>`), whose offset staging reads."""
    match = KAFKA_NAME.search(file_name)
    return match is not None and int(match.group(2)) <= LONG_MAX


def _count(mask: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(pc.cast(pc.fill_null(mask, False), pa.int64())).as_py() or 0)


def _by_lower(group: pa.Table) -> dict[str, list[pa.ChunkedArray]]:
    """Columns by lower-case name, each name's spellings in the file's order (Spark resolves names so)."""
    columns: dict[str, list[pa.ChunkedArray]] = {}
    for name, column in zip(group.column_names, group.columns, strict=True):
        columns.setdefault(name.lower(), []).append(column)
    return columns


def _coalesce(spellings: Sequence[pa.ChunkedArray]) -> pa.ChunkedArray | None:
    """One column spelled in several cases across files is one column (cdc_coalesce_spellings)."""
    if not spellings:
        return None
    if len(spellings) == 1:
        return spellings[0]
    try:
        return pc.coalesce(*spellings)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # types differ: Spark decides
        return None


def _field(struct: pa.ChunkedArray | None, name: str) -> pa.ChunkedArray | None:
    """A struct's field by lower-case name, null where the struct is null."""
    if struct is None or not pa.types.is_struct(struct.type):
        return None
    names = [struct.type.field(i).name.lower() for i in range(struct.type.num_fields)]
    if name not in names:
        return None
    return struct.flatten()[names.index(name)]


def _text(column: pa.ChunkedArray | None) -> pa.ChunkedArray | None:
    if column is None:
        return None
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column
    if pa.types.is_integer(column.type) or pa.types.is_null(column.type):  # a column of nulls only: Spark's void
        return pc.cast(column, pa.string())
    return None  # another type: Spark decides


def _operations(producer: str, columns: dict, rows: int) -> pa.ChunkedArray | None:
    """Each event's operation as staging makes it (`_cdc_op`), or None when this side cannot tell."""
    if producer == "dms":
        if "op" not in columns:
            return pa.chunked_array([pa.array(["I"] * rows, pa.string())])
        raw = _text(_coalesce(columns["op"]))
        if raw is None:
            return None
        return pc.fill_null(pc.utf8_upper(pc.utf8_trim(raw, characters=" ")), "I")
    raw = _text(_coalesce(columns.get("__op" if producer == "debezium_flattened" else "op", [])))
    if raw is None:
        return None
    lower = pc.utf8_lower(raw)
    mapped = pc.utf8_upper(raw)
    for letter, operation in DEBEZIUM_OPERATIONS.items():
        mapped = pc.if_else(pc.fill_null(pc.equal(lower, letter), False), operation, mapped)
    return mapped


def _key(producer: str, columns: dict, key: str) -> pa.ChunkedArray | None:
    """A key column's values as staging reads them, or None (no such column: refused by the footer's check)."""
    if producer != "debezium_envelope":
        return _coalesce(columns.get(key, []))
    after_value = _field(_coalesce(columns.get("after", [])), key)
    before_value = _field(_coalesce(columns.get("before", [])), key)
    if after_value is None or before_value is None or after_value.type != before_value.type:
        return None  # a struct or its field missing, or two types: Spark decides
    after = _coalesce(columns["after"])
    return pc.if_else(pc.is_valid(after), after_value, before_value)


def _null_timestamps(table: CdcTable, columns: dict) -> int:
    """Events whose commit timestamp staging makes null."""
    if table.producer == "dms":
        value = _coalesce(columns.get((table.timestamp_column or "").lower(), []))
        if value is None:
            return 0  # no timestamp column: staging refuses the files in words of its own
        if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
            return value.null_count + _count(not_timestamps(value))
        if pa.types.is_floating(value.type):
            return _count(pc.or_kleene(pc.is_null(value), pc.invert(pc.is_finite(value))))
        return value.null_count
    value = _debezium_commit_time(table.producer, columns)
    return 0 if value is None else value.null_count


def _debezium_commit_time(producer: str, columns: dict) -> pa.ChunkedArray | None:
    """A Debezium event's commit time as the file holds it and staging reads it: `__source_ts_ms`, or
    `coalesce(source.ts_ms, ts_ms)`; None where there is none (or two of types pyarrow cannot coalesce)."""
    if producer == "debezium_flattened":
        return _coalesce(columns.get("__source_ts_ms", []))
    source_ts = _field(_coalesce(columns.get("source", [])), "ts_ms")
    top_ts = _coalesce(columns.get("ts_ms", []))
    candidates = [c for c in (source_ts, top_ts) if c is not None]
    return candidates[0] if len(candidates) == 1 else (_coalesce(candidates) if candidates else None)


def not_timestamps(texts: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """True for a text Spark surely reads as no timestamp (a null `cast(... as timestamp)`): not of a shape it
    reads, or a date that does not exist; null for a null."""
    trimmed = pc.replace_substring_regex(texts, pattern=TRIMMED, replacement="")
    shaped = pc.match_substring_regex(trimmed, TIMESTAMP_TEXT)
    parts = pc.extract_regex(trimmed, DATE_PARTS)
    dated = pc.fill_null(pc.is_valid(parts), False)

    def number(index: int, default: str) -> pa.ChunkedArray | pa.Array:
        text = pc.struct_field(parts, [index])
        usable = pc.and_(dated, pc.not_equal(pc.fill_null(text, ""), ""))
        return pc.cast(pc.if_else(usable, text, default), pa.int64())

    year, month, day = number(0, "2000"), number(1, "1"), number(2, "1")
    known_month = pc.and_(pc.greater_equal(month, 1), pc.less_equal(month, 12))
    length = pc.take(DAYS_IN_MONTH, pc.subtract(pc.min_element_wise(pc.max_element_wise(month, 1), 12), 1))
    leap = pc.or_(
        pc.and_(_divides(4, year), pc.invert(_divides(100, year))),
        _divides(400, year),
    )
    length = pc.add(length, pc.cast(pc.and_(leap, pc.equal(month, 2)), pa.int64()))
    known_day = pc.and_(pc.greater_equal(day, 1), pc.less_equal(day, length))
    exists = pc.or_(pc.invert(dated), pc.and_(known_month, known_day))
    return pc.invert(pc.and_(shaped, exists))


def _divides(divisor: int, values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    return pc.equal(pc.multiply(pc.divide(values, divisor), divisor), values)


def _bad_sequences(producer: str, columns: dict, file_name: str, rows: int) -> int:
    """Events whose `_cdc_seq` staging makes null or not 35 digits. DMS: `coalesce(lpad(nullif(trim(
    AR_H_CHANGE_SEQ), ''), 35, '0'), <from the file name>)`, bad where the trimmed text is not digits (the file
    name's fallback always makes 35 digits). Debezium: `coalesce(<source position>, <Kafka position>)`, bad where
    the position is not digits, or null in a file whose name gives no Kafka position."""
    if producer == "dms":
        text = _text(_coalesce(columns.get("ar_h_change_seq", [])))
        if text is None:
            return 0
        return _count(_not_padded_digits(pc.utf8_trim(text, characters=" "), 35))
    kafka = kafka_named(file_name)
    position = _position(producer, columns)
    if position is None:
        return 0 if kafka else rows
    present, malformed = position
    bad = malformed if kafka else pc.or_kleene(pc.invert(present), malformed)
    return _count(bad)


def _not_padded_digits(text: pa.ChunkedArray, width: int) -> pa.ChunkedArray:
    """Where Spark's `lpad(text, width, '0')` is not `width` digits (its first `width` characters, or the whole
    text left-padded with zeros): null where the text is null."""
    return pc.invert(pc.match_substring_regex(text, f"^(?:[0-9]{{{width}}}|[0-9]*$)"))


def _position(producer: str, columns: dict) -> tuple[pa.ChunkedArray, pa.ChunkedArray] | None:
    """Where an event has a source position (the LSN, or MySQL's file, position and row), and where that
    position is not digits as staging pads it (`lpad(cast(lsn as string), 35, '0')`; MySQL's `pos` to 20, `row`
    to 5); None for files that carry none. A position of a type whose text pyarrow cannot tell as Spark would
    counts as digits (Spark decides)."""
    lsn, file, pos, row = _source_position(producer, columns)
    if lsn is not None:
        return pc.is_valid(lsn), _malformed(lsn, 35)
    if pos is not None and file is not None:
        present, malformed = pc.and_(pc.is_valid(file), pc.is_valid(pos)), _malformed(pos, 20)
        if row is not None:
            present, malformed = pc.and_(present, pc.is_valid(row)), pc.or_(malformed, _malformed(row, 5))
        return present, pc.and_(present, malformed)
    return None


def _source_position(producer: str, columns: dict) -> tuple[pa.ChunkedArray | None, ...]:
    """A Debezium event's source position as the file holds it: (LSN, MySQL's file, pos, row), None where absent."""
    if producer == "debezium_flattened":
        fields = {name: _coalesce(columns[name]) for name in columns if name.startswith("__source_")}
        return tuple(fields.get(f"__source_{n}") for n in ("lsn", "file", "pos", "row"))
    source = _coalesce(columns.get("source", []))
    return tuple(_field(source, n) for n in ("lsn", "file", "pos", "row"))


def _malformed(part: pa.ChunkedArray, width: int) -> pa.ChunkedArray:
    """Where `lpad(cast(part as string), width, '0')` is not digits; false where pyarrow cannot tell."""
    text = _text(part)
    if text is None:
        return pc.and_(pc.is_valid(part), pa.scalar(False))
    return pc.fill_null(_not_padded_digits(text, width), False)

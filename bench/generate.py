"""DMS-format raw data at scale, vectorised with pyarrow.compute, deterministic from a seed.

Writes what AWS DMS writes to S3 with `DataFormat=parquet` (see ../shared/CDC_FORMATS.md and
sample_data/dms.py, whose file layout this follows):

    LOAD00000001.parquet ... LOAD0000000A.parquet   full load, no `Op`, `last_update_time` first
    20261101-091000000.parquet ...                  CDC, named by write time: `Op` first, then
                                                    `last_update_time`, the columns, `AR_H_CHANGE_SEQ`

The table is `orders`, 10 source columns (bigint key, bigint, strings, decimal, int, double,
timestamp, boolean). Each CDC batch holds `batch_rows` change events: 70% updates, 20% inserts,
10% deletes; 5% of the batch are late updates (committed during the previous batch's window, so
older than changes the pipeline may already have applied) landing in the batch's last file.
Updates draw keys with replacement, so one file can hold several changes of one key; commit
times are quantised to 100 ms, so `AR_H_CHANGE_SEQ` alone orders some changes. Deletes carry
the key only (the source's default REPLICA IDENTITY).

A table may be written with a subset of the columns (`columns`: the key, `amount` and
`quantity` at least, which the checksum reads), as the many-tables stage does. `generate_history`
writes a table built by CDC alone, from many small files, for the landing-history stage.

The generator also keeps what an independent replay needs to state the table's expected
content after every batch (`expected_state`, or row by row `expected_rows`): the last change per
key over all events, ordered by (commit time, AR_H_CHANGE_SEQ), deletes removed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

TIMESTAMP = pa.timestamp("us", tz="UTC")
KEY = "order_id"
SOURCE_SCHEMA = pa.schema(
    [
        (KEY, pa.int64()),
        ("customer_id", pa.int64()),
        ("order_status", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("quantity", pa.int32()),
        ("weight_kg", pa.float64()),
        ("order_ts", TIMESTAMP),
        ("ship_city", pa.string()),
        ("customer_email", pa.string()),
        ("is_gift", pa.bool_()),
    ]
)
STATUSES = ["placed", "paid", "packed", "shipped", "delivered", "returned", "cancelled"]
CITIES = [
    "Lisbon",
    "Lagos",
    "Lyon",
    "Pune",
    "Krakow",
    "Osaka",
    "Turin",
    "Bergen",
    "Austin",
    "Quito",
    "Dakar",
    "Perth",
    "Hanoi",
    "Leeds",
    "Cork",
    "Porto",
    "Seoul",
    "Lima",
    "Oslo",
    "Riga",
]

LOAD_TIME = dt.datetime(2026, 11, 1, 8, 0, 0, tzinfo=dt.timezone.utc)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
LOAD_US = (LOAD_TIME - EPOCH) // dt.timedelta(microseconds=1)
BATCH_EVERY = dt.timedelta(hours=1)  # batch b's changes start at LOAD_TIME + b hours
BATCH_WINDOW_MS = 10 * 60 * 1000  # ... and span 10 minutes of commits
TICK_MS = 100  # commit times quantised: ties are ordered by the sequence only
ORDER_TS_BASE_US = LOAD_US - 400 * 24 * 3600 * 10**6

MIX_INSERT, MIX_DELETE, LATE = 0.20, 0.10, 0.05
CHECKSUM_COLUMNS = (KEY, "amount", "quantity")  # what CHECKSUM_SQL reads: every table has them


class Rng:
    """Independent uniform streams from one seed: pc.random with a derived initializer per draw."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._draws = 0

    def uniform(self, n: int) -> pa.DoubleArray:
        self._draws += 1
        return pc.random(n, initializer=(self._seed * 1_000_003 + self._draws) % (2**63))

    def integers(self, n: int, low: int, high: int) -> pa.Int64Array:
        """Uniform integers in [low, high)."""
        scaled = pc.floor(pc.multiply(self.uniform(n), float(high - low)))
        return pc.add(pc.cast(scaled, pa.int64()), low)

    def permutation(self, n: int) -> pa.UInt64Array:
        return pc.sort_indices(self.uniform(n))


def _choice(rng: Rng, n: int, values: list[str]) -> pa.Array:
    indices = pc.cast(rng.integers(n, 0, len(values)), pa.int32())
    return pa.DictionaryArray.from_arrays(indices, pa.array(values)).cast(pa.string())


def _decimal_from_cents(cents: pa.Array, type_: pa.Decimal128Type) -> pa.Array:
    """Exact: the unscaled 128-bit integers of a scale-0 decimal, re-read with the target scale."""
    unscaled = pc.cast(cents, pa.decimal128(20, 0))
    return pa.Array.from_buffers(type_, len(unscaled), unscaled.buffers(), unscaled.null_count, unscaled.offset)


def _timestamps(micros: pa.Array) -> pa.Array:
    return pc.cast(micros, pa.int64()).cast(TIMESTAMP)


def row_images(keys: pa.Int64Array, rng: Rng) -> dict[str, pa.Array]:
    """Full row images for `keys`: stable columns derived from the key, the rest drawn anew."""
    n = len(keys)
    customer_id = pc.add(pc.divide(keys, 7), 1000)
    cents = rng.integers(n, 100, 2_500_000)
    return {
        KEY: keys,
        "customer_id": customer_id,
        "order_status": _choice(rng, n, STATUSES),
        "amount": _decimal_from_cents(cents, SOURCE_SCHEMA.field("amount").type),
        "quantity": pc.cast(rng.integers(n, 1, 100), pa.int32()),
        "weight_kg": pc.round(pc.multiply(rng.uniform(n), 40.0), 3),
        "order_ts": _timestamps(pc.add(pc.multiply(keys, 1_000_003), ORDER_TS_BASE_US)),
        "ship_city": _choice(rng, n, CITIES),
        "customer_email": pc.binary_join_element_wise(
            "customer", pc.cast(customer_id, pa.string()), "@example.com", ""
        ),
        "is_gift": pc.less(rng.uniform(n), 0.1),
    }


def _only(images: dict[str, pa.Array], columns: Sequence[str]) -> dict[str, pa.Array]:
    """The written columns, in the source schema's order."""
    return {name: images[name] for name in SOURCE_SCHEMA.names if name in columns}


def check_columns(columns: Sequence[str]) -> tuple[str, ...]:
    unknown = [c for c in columns if c not in SOURCE_SCHEMA.names]
    missing = [c for c in CHECKSUM_COLUMNS if c not in columns]
    if unknown or missing:
        raise ValueError(f"columns must be among {SOURCE_SCHEMA.names} and hold {CHECKSUM_COLUMNS}: got {columns}")
    return tuple(name for name in SOURCE_SCHEMA.names if name in columns)


def cdc_file_name(at: dt.datetime) -> str:
    return at.strftime("%Y%m%d-%H%M%S") + f"{at.microsecond // 1000:03d}.parquet"


def load_file_name(number: int) -> str:
    return f"LOAD{number:08X}.parquet"


@dataclass
class Batch:
    """One CDC batch as written: files in landing order, and the columns the replay needs."""

    number: int
    files: list[Path]
    events: pa.Table  # order_id, op, ts_us, seq, quantity, amount_cents


@dataclass
class TableData:
    """One generated source table: where its files are, and what the replay needs."""

    name: str
    rows: int
    batch_rows: int
    load_files: list[Path] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    load_quantity: pa.ChunkedArray | None = None  # by key - 1 (load keys are 1..rows)
    load_cents: pa.ChunkedArray | None = None
    load_sum_key_x_quantity: int = 0


def _write(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="snappy", row_group_size=131072)
    tmp.replace(path)


def _cents(amount: pa.Array) -> pa.Array:
    """Inverse of _decimal_from_cents (nulls stay null)."""
    unscaled = pa.Array.from_buffers(
        pa.decimal128(20, 0), len(amount), amount.buffers(), amount.null_count, amount.offset
    )
    return pc.cast(unscaled, pa.int64())


def write_full_load(
    out: Path, rows: int, file_rows: int, rng: Rng, columns: Sequence[str] = SOURCE_SCHEMA.names
) -> tuple[list[Path], pa.ChunkedArray, pa.ChunkedArray, int]:
    files, quantity, cents, key_x_quantity = [], [], [], 0
    for number, start in enumerate(range(1, rows + 1, file_rows), start=1):
        stop = min(start + file_rows, rows + 1)
        keys = pa.array(range(start, stop), pa.int64())
        image = row_images(keys, rng)
        written = {
            "last_update_time": _timestamps(pa.repeat(pa.scalar(LOAD_US), len(keys))),
            **_only(image, columns),
        }
        path = out / load_file_name(number)
        _write(pa.table(written), path)
        files.append(path)
        quantity.append(image["quantity"])
        cents.append(_cents(image["amount"]))
        key_x_quantity += pc.sum(pc.multiply(keys, pc.cast(image["quantity"], pa.int64()))).as_py()
    return files, pa.chunked_array(quantity, pa.int32()), pa.chunked_array(cents, pa.int64()), key_x_quantity


def _sample_distinct(values: pa.Array, n: int, rng: Rng) -> pa.Array:
    """n distinct values (fewer only if `values` is smaller), in random order."""
    if n >= len(values):
        return pc.take(values, rng.permutation(len(values)))
    picked = pa.array([], values.type)
    while len(picked) < n:
        draw = pc.take(values, rng.integers(int(n * 1.2) + 16, 0, len(values)))
        picked = pc.unique(pa.concat_arrays([picked, draw]))
    return picked.slice(0, n)


def _seq(ts_ms: pa.Array, batch: int, first_index: int) -> pa.Array:
    """AR_H_CHANGE_SEQ: 35 digits, commit time (ms) + batch + position: strictly increasing in commit order."""
    return pa.array(
        [f"{t:017d}{batch:06d}{first_index + i:012d}" for i, t in enumerate(ts_ms.to_pylist())], pa.string()
    )


def _cdc_table(ops: pa.Array, ts_ms: pa.Array, images: dict[str, pa.Array], seq: pa.Array) -> pa.Table:
    return pa.table(
        {
            "Op": ops,
            "last_update_time": _timestamps(pc.multiply(ts_ms, 1000)),
            **images,
            "AR_H_CHANGE_SEQ": seq,
        }
    )


def _images_for(ops: pa.Array, keys: pa.Array, rng: Rng) -> dict[str, pa.Array]:
    full = row_images(keys, rng)
    is_delete = pc.equal(ops, "D")
    return {
        name: (keys if name == KEY else pc.if_else(is_delete, pa.scalar(None, full[name].type), full[name]))
        for name in SOURCE_SCHEMA.names
    }


def write_batch(
    out: Path,
    number: int,
    batch_rows: int,
    files_per_batch: int,
    alive: pa.Array,
    next_key: int,
    previous_updates: pa.Array,
    rng: Rng,
    columns: Sequence[str] = SOURCE_SCHEMA.names,
    late_file: bool = True,
) -> tuple[Batch, pa.Array, int, pa.Array]:
    """Batch `number` (1-based). Returns the batch, the keys alive after it, the next new key and
    the keys it updated (late changes of the next batch revisit some of them). `late_file=False`:
    the late changes go at the end of the batch's last file instead of a file of their own."""
    n = batch_rows
    n_insert, n_delete = round(n * MIX_INSERT), round(n * MIX_DELETE)
    n_update = n - n_insert - n_delete
    n_late = min(round(n * LATE), n_update)
    n_ordered = n - n_late

    deleted = _sample_distinct(alive, n_delete, rng)
    updatable = pc.filter(alive, pc.invert(pc.is_in(alive, value_set=deleted)))
    updated = pc.take(updatable, rng.integers(n_update - n_late, 0, len(updatable)))

    # In-order changes, shuffled; inserts take increasing new keys in commit order (a sequence PK).
    ops = pa.concat_arrays(
        [
            pa.repeat(pa.scalar("I"), n_insert).cast(pa.string()),
            pa.repeat(pa.scalar("D"), n_delete).cast(pa.string()),
            pa.repeat(pa.scalar("U"), len(updated)).cast(pa.string()),
        ]
    )
    keys = pa.concat_arrays([pa.repeat(pa.scalar(0, pa.int64()), n_insert), deleted, updated])
    order = rng.permutation(n_ordered)
    ops, keys = pc.take(ops, order), pc.take(keys, order)
    is_insert = pc.equal(ops, "I")
    insert_rank = pc.cumulative_sum(pc.cast(is_insert, pa.int64()))
    keys = pc.if_else(is_insert, pc.add(insert_rank, next_key - 1), keys)

    start_ms = (LOAD_US // 1000) + number * (BATCH_EVERY // dt.timedelta(milliseconds=1))
    ticks = BATCH_WINDOW_MS // TICK_MS
    positions = pa.array(range(n_ordered), pa.int64())
    ts_ms = pc.add(pc.multiply(pc.divide(pc.multiply(positions, ticks), max(n_ordered, 1)), TICK_MS), start_ms)
    seq = _seq(ts_ms, number, 0)
    ordered = _cdc_table(ops, ts_ms, _only(_images_for(ops, keys, rng), columns), seq)

    # Late updates: committed in the previous batch's window, half of them on keys that batch
    # updated (so some are older than the row already applied), landing in this batch's last file.
    late_pool = (
        pc.filter(previous_updates, pc.is_in(previous_updates, value_set=updatable))
        if len(previous_updates)
        else updatable
    )
    n_revisit = min(n_late // 2, len(late_pool))
    late_keys = pa.concat_arrays(
        [
            pc.take(late_pool, rng.integers(n_revisit, 0, max(len(late_pool), 1)))
            if n_revisit
            else pa.array([], pa.int64()),
            pc.take(updatable, rng.integers(n_late - n_revisit, 0, len(updatable))),
        ]
    )
    window_ms = BATCH_EVERY // dt.timedelta(milliseconds=1)
    previous_start_ms = start_ms - (window_ms // 2 if number == 1 else window_ms)
    late_ticks = pc.cast(pc.floor(pc.multiply(rng.uniform(n_late), float(ticks))), pa.int64())
    late_ts_ms = pc.add(pc.multiply(late_ticks, TICK_MS), previous_start_ms)
    late_ts_ms = pc.take(late_ts_ms, pc.sort_indices(late_ts_ms))
    late_ops = pa.repeat(pa.scalar("U"), n_late).cast(pa.string())
    late = _cdc_table(
        late_ops, late_ts_ms, _only(_images_for(late_ops, late_keys, rng), columns), _seq(late_ts_ms, number, n_ordered)
    )

    # Files: the ordered changes split by time, each named when its window closes; then the late file.
    files = []
    window = dt.timedelta(milliseconds=BATCH_WINDOW_MS)
    batch_start = EPOCH + dt.timedelta(milliseconds=start_ms)
    count = max(1, min(files_per_batch, n_ordered))
    bounds = [round(i * n_ordered / count) for i in range(count + 1)]
    for i in range(count):
        part = ordered.slice(bounds[i], bounds[i + 1] - bounds[i])
        if i == count - 1 and n_late and not late_file:
            part = pa.concat_tables([part, late])
        path = out / cdc_file_name(batch_start + window * (i + 1) / count)
        _write(part, path)
        files.append(path)
    if n_late and late_file:
        path = out / cdc_file_name(batch_start + window + dt.timedelta(seconds=1))
        _write(late, path)
        files.append(path)

    replay_columns = _replay_columns(pa.concat_tables([ordered, late]))
    survivors = pc.filter(alive, pc.invert(pc.is_in(alive, value_set=deleted)))
    inserted = pc.filter(keys, is_insert)
    new_alive = pa.concat_arrays([survivors, inserted])
    return Batch(number, files, replay_columns), new_alive, next_key + n_insert, updated


def _replay_columns(events: pa.Table) -> pa.Table:
    """What the replay needs of a batch's change events."""
    return pa.table(
        {
            KEY: events[KEY],
            "op": events["Op"],
            "ts_us": pc.cast(events["last_update_time"], pa.int64()),
            "seq": events["AR_H_CHANGE_SEQ"],
            "quantity": pc.cast(events["quantity"], pa.int64()),
            "amount_cents": _cents(events["amount"].combine_chunks()),
        }
    )


def generate_table(
    out: Path,
    name: str,
    rows: int,
    batch_rows: int,
    batches: int,
    *,
    seed: int,
    load_file_rows: int = 500_000,
    files_per_batch: int = 4,
    columns: Sequence[str] = SOURCE_SCHEMA.names,
) -> TableData:
    """Write the full load and `batches` CDC batches of one table under `out` (one folder per
    landing step: `load/`, `batch_0001/`, ...), to be moved into the landing folder when due."""
    columns = check_columns(columns)
    rng = Rng(seed)
    data = TableData(name, rows, batch_rows)
    (data.load_files, data.load_quantity, data.load_cents, data.load_sum_key_x_quantity) = write_full_load(
        out / "load", rows, load_file_rows, rng, columns
    )
    alive = pa.array(range(1, rows + 1), pa.int64())
    next_key, previous = rows + 1, pa.array([], pa.int64())
    for number in range(1, batches + 1):
        batch, alive, next_key, previous = write_batch(
            out / f"batch_{number:04d}", number, batch_rows, files_per_batch, alive, next_key, previous, rng, columns
        )
        data.batches.append(batch)
    return data


HISTORY_FILE_EVERY_MS = 60_000  # one small CDC file a minute, before LOAD_TIME


def generate_history(
    out: Path, name: str, files: int, rows_per_file: int, batch_rows: int, *, seed: int, few_files: int = 5
) -> tuple[TableData, list[Path]]:
    """A table built by CDC alone: `files` small CDC files of inserts (`rows_per_file` each, one file
    a minute, the last one a minute before LOAD_TIME: `files` minutes of history), in `out/history/`,
    then one CDC batch of `batch_rows` changes (late updates included) in a single file, in
    `out/batch_0001/`. The TableData has no full load (`rows` 0): batches[0] is the history,
    batches[1] the new batch. Also returns the same history in `few_files` files (consecutive
    files concatenated, each named after its last one), in `out/history_few/`."""
    if not 0 < rows_per_file * TICK_MS < HISTORY_FILE_EVERY_MS:
        raise ValueError(f"rows_per_file must be in 1..{HISTORY_FILE_EVERY_MS // TICK_MS - 1}, got {rows_per_file}")
    rng = Rng(seed)
    rows = files * rows_per_file
    keys = pa.array(range(1, rows + 1), pa.int64())
    ops = pa.repeat(pa.scalar("I"), rows).cast(pa.string())
    position = pa.array(range(rows), pa.int64())
    file_index = pc.divide(position, rows_per_file)
    first_ms = LOAD_US // 1000 - files * HISTORY_FILE_EVERY_MS
    ts_ms = pc.add(
        pc.add(pc.multiply(file_index, HISTORY_FILE_EVERY_MS), first_ms),
        pc.multiply(pc.subtract(position, pc.multiply(file_index, rows_per_file)), TICK_MS),
    )
    history = _cdc_table(ops, ts_ms, _images_for(ops, keys, rng), _seq(ts_ms, 0, 0))

    def write_split(folder: Path, count: int) -> list[Path]:
        bounds = [round(i * files / count) for i in range(count + 1)]
        paths = []
        for first, stop in zip(bounds, bounds[1:], strict=False):
            written_at = EPOCH + dt.timedelta(milliseconds=first_ms + stop * HISTORY_FILE_EVERY_MS - 1)
            path = folder / cdc_file_name(written_at)
            _write(history.slice(first * rows_per_file, (stop - first) * rows_per_file), path)
            paths.append(path)
        return paths

    data = TableData(
        name, 0, batch_rows, load_quantity=pa.chunked_array([], pa.int32()), load_cents=pa.chunked_array([], pa.int64())
    )
    data.batches.append(Batch(0, write_split(out / "history", files), _replay_columns(history)))
    few = write_split(out / "history_few", max(1, min(few_files, files)))
    empty = pa.array([], pa.int64())
    batch, *_ = write_batch(out / "batch_0001", 1, batch_rows, 1, keys, rows + 1, empty, rng, late_file=False)
    data.batches.append(batch)
    return data, few


@dataclass(frozen=True)
class Checksum:
    """What must equal between a current-state table and the replay: row count, and sums
    over columns each change rewrites (a wrong version of any row changes them)."""

    rows: int
    sum_key_x_quantity: int
    sum_amount_cents: int
    sum_cdc_ts_offset_us: int

    def as_dict(self) -> dict[str, int]:
        return self.__dict__.copy()


CHECKSUM_SQL = (
    "select count(*), coalesce(sum(order_id * quantity), 0), "
    "coalesce(sum(cast(amount * 100 as bigint)), 0), "
    f"coalesce(sum(unix_micros(_cdc_ts) - {LOAD_US}), 0) from {{relation}}"
)


def table_checksum(sql, relation: str) -> Checksum:
    """The table's checksum, through the bench's SQL runner (bench/sql.py)."""
    row = sql.query(CHECKSUM_SQL.format(relation=relation))[0]
    return Checksum(*(int(v) for v in row))


def _last_changes(data: TableData, through_batch: int) -> pa.Table | None:
    """The last change per key over the batches numbered up to through_batch (a table without a full
    load has its history as batch 0), ordered by (commit time, AR_H_CHANGE_SEQ); None when there is none."""
    batches = [b.events for b in data.batches if b.number <= through_batch]
    if not batches:
        return None
    events = pa.concat_tables(batches)
    order = pc.sort_indices(events, sort_keys=[(KEY, "ascending"), ("ts_us", "descending"), ("seq", "descending")])
    events = events.take(order)
    keys = events[KEY].combine_chunks()
    first = (
        pa.concat_arrays([pa.array([True]), pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))])
        if len(keys)
        else pa.array([], pa.bool_())
    )
    return events.filter(first)


def expected_state(data: TableData, through_batch: int) -> Checksum:
    """Replay: the last change per key over the full load and batches 1..through_batch, ordered
    by (commit time, AR_H_CHANGE_SEQ); a key whose last change is a delete is absent. Computed
    from the generator's own columns with pyarrow, not from anything the pipeline wrote."""
    totals = {
        "rows": data.rows,
        "kq": data.load_sum_key_x_quantity,
        "cents": pc.sum(data.load_cents).as_py() or 0,
        "ts": 0,
    }
    last = _last_changes(data, through_batch)
    if last is None:
        return Checksum(totals["rows"], totals["kq"], totals["cents"], 0)

    # Load rows touched by any change leave the load's totals; the last change per key enters.
    touched_load = pc.filter(last[KEY], pc.less_equal(last[KEY], data.rows))
    positions = pc.subtract(touched_load, 1)
    totals["rows"] -= len(touched_load)
    totals["kq"] -= (
        pc.sum(pc.multiply(pc.cast(pc.take(data.load_quantity, positions), pa.int64()), touched_load)).as_py() or 0
    )
    totals["cents"] -= pc.sum(pc.take(data.load_cents, positions)).as_py() or 0
    live = last.filter(pc.not_equal(last["op"], "D"))
    totals["rows"] += live.num_rows
    totals["kq"] += pc.sum(pc.multiply(live[KEY], live["quantity"])).as_py() or 0
    totals["cents"] += pc.sum(live["amount_cents"]).as_py() or 0
    totals["ts"] += pc.sum(pc.subtract(live["ts_us"], LOAD_US)).as_py() or 0
    return Checksum(totals["rows"], totals["kq"], totals["cents"], totals["ts"])


def expected_rows(data: TableData, through_batch: int) -> pa.Table:
    """The replay row by row: one row per live key (order_id, ts_us, seq, quantity, amount_cents),
    full-load rows untouched by any change with the load's commit time and no sequence."""
    load_keys = pa.array(range(1, data.rows + 1), pa.int64())
    load = pa.table(
        {
            KEY: load_keys,
            "ts_us": pa.repeat(pa.scalar(LOAD_US, pa.int64()), data.rows),
            "seq": pa.nulls(data.rows, pa.string()),
            "quantity": pc.cast(data.load_quantity.combine_chunks(), pa.int64()),
            "amount_cents": data.load_cents.combine_chunks(),
        }
    )
    last = _last_changes(data, through_batch)
    if last is None:
        return load
    untouched = load.filter(pc.invert(pc.is_in(load_keys, value_set=last[KEY].combine_chunks())))
    live = last.filter(pc.not_equal(last["op"], "D")).select(load.column_names)
    return pa.concat_tables([untouched, live.cast(load.schema)])

"""Debezium sample output: MySQL `salesdb` (server `mysql`) and PostgreSQL `inventory` (server `pg`)
through Kafka Connect and the Confluent S3 sink writing Parquet.

Writes what the sink writes (see ../shared/CDC_FORMATS.md), one folder per topic:

    <landing_root>/debezium/topics/<topic>/partition=<p>/<topic>+<p>+<start offset, 10 digits>.snappy.parquet

The start offset in a name is the Kafka offset of the file's first record; the records of a file
have consecutive offsets, and offsets per (topic, partition) continue across files and stages.
All changes of one key go to one partition (a hash of the key modulo the partition count).

Two shapes:

- flat (`ExtractNewRecordState`, `add.fields=op,source.ts_ms`, `delete.handling.mode=rewrite`):
  the row (after-image, before-image for deletes), then `__op`, `__source_ts_ms`, `__deleted`.
  Truncates are dropped by the SMT, so a flat topic has none.
- envelope (PostgreSQL connector, `REPLICA IDENTITY FULL`): `before`, `after`, `op`, `ts_ms`,
  `source` (with `ts_ms` the commit time, `txId`, `lsn`), `transaction` (metadata disabled: null).
  Snapshot rows share the snapshot's `lsn` and `txId`; every later change has its own `lsn`.

The data is fixed (random choices come from a seeded `random.Random`): each topic is built as the
source's change log, in source order, and each event is then delivered in some stage. Delivery
differs from source order only for the deliberate hard cases, listed in `HARD_CASES` and marked
with "Hard case" where they are generated. Timestamps grow with source order, so only late events
and re-deliveries carry a timestamp older than an event delivered before them. They are sample time
(2026-11-01..04), moved to the demo's clock when written if CDC_SAMPLE_TIMES=now (sample_data/clock.py).
"""

from __future__ import annotations

import datetime as dt
import random
import zlib
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sample_data import clock

STAGES = 4
LANDING_FOLDER = Path("debezium") / "topics"

CUSTOMER = "mysql.salesdb.customer"
SALES_ORDER = "mysql.salesdb.sales_order"
PRODUCT = "pg.inventory.product"

# topic -> shape ('flat' | 'envelope'), key columns, number of Kafka partitions
TOPICS: dict[str, dict] = {
    CUSTOMER: {"shape": "flat", "key": ["id"], "partitions": 2},
    SALES_ORDER: {"shape": "flat", "key": ["order_id"], "partitions": 2},
    PRODUCT: {"shape": "envelope", "key": ["product_id"], "partitions": 1},
}

HARD_CASES: dict[str, dict[str, str]] = {
    CUSTOMER: {
        "seed scenario": "stage 1 snapshot of 1..30; stage 2 inserts 31, 32, updates 29, 30, deletes 27, 28",
        "several changes of one key in one file": "customer 32: c, u, u in stage 2",
        "equal __source_ts_ms, ordered by offset": "customer 31: c then u in the same millisecond (stage 2)",
        "late older event": "stage 3 re-sends customer 29's update committed before its stage-2 update, "
        "and customer 28's update committed before its stage-2 delete (must not bring 28 back)",
        "duplicate delivery": "customer 30's update twice in its stage-2 file and again in stage 3",
        "delete of a key that never existed": "customer 99 (stage 3)",
    },
    SALES_ORDER: {
        "several changes of one key in one file": "order 17: placed, shipped, delivered in stage 2",
        "equal __source_ts_ms, ordered by offset": "order 18: placed, then cancelled in the same millisecond (stage 2)",
        "late older event": "order 5's 'shipped', committed before its stage-2 'delivered', arrives in stage 3",
        "duplicate delivery": "order 10's 'shipped' twice in its stage-2 file and again in stage 4 "
        "(after its stage-3 'delivered')",
        "delete of a key that never existed": "order 999 (stage 3)",
        "delete": "order 16 (cancelled at the snapshot) purged in stage 4",
    },
    PRODUCT: {
        "several changes of one key in one file": "product 3: three updates in stage 2",
        "equal ts, ordered by lsn": "product 5: two updates in one transaction (stage 2)",
        "duplicate delivery (same lsn)": "product 6's update twice in stage 2 and again in stage 3; "
        "product 21's update of stage 3 again in stage 4",
        "delete of a key that never existed": "product 99 (stage 2)",
        "truncate, then new inserts": "stage 3: truncate, then inserts of 20, 21, 22 and a re-insert of 1",
        "late older event (older ts and lsn)": "product 20's first update, committed in stage 3 "
        "before its second, arrives in stage 4",
    },
}

START = dt.datetime(2026, 11, 1, 8, 0, 0, tzinfo=dt.timezone.utc)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")

FLAT_FIELDS = [
    pa.field("__op", pa.string()),
    pa.field("__source_ts_ms", pa.int64()),
    pa.field("__deleted", pa.string()),
]
CUSTOMER_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("mktsegment", pa.string()),
        *FLAT_FIELDS,
    ]
)
SALES_ORDER_SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("customer_id", pa.int32()),
        pa.field("order_ts", TIMESTAMP_MS),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("order_status", pa.string()),
        *FLAT_FIELDS,
    ]
)
PRODUCT_ROW = pa.struct(
    [
        pa.field("product_id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("in_stock", pa.bool_()),
    ]
)
PG_SOURCE = pa.struct(
    [
        pa.field("version", pa.string()),
        pa.field("connector", pa.string()),
        pa.field("name", pa.string()),
        pa.field("ts_ms", pa.int64()),
        pa.field("snapshot", pa.string()),
        pa.field("db", pa.string()),
        pa.field("schema", pa.string()),
        pa.field("table", pa.string()),
        pa.field("txId", pa.int64()),
        pa.field("lsn", pa.int64()),
    ]
)
TRANSACTION = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("total_order", pa.int64()),
        pa.field("data_collection_order", pa.int64()),
    ]
)
PRODUCT_SCHEMA = pa.schema(
    [
        pa.field("before", PRODUCT_ROW),
        pa.field("after", PRODUCT_ROW),
        pa.field("op", pa.string(), nullable=False),
        pa.field("ts_ms", pa.int64()),
        pa.field("source", PG_SOURCE, nullable=False),
        pa.field("transaction", TRANSACTION),
    ]
)
SCHEMAS = {CUSTOMER: CUSTOMER_SCHEMA, SALES_ORDER: SALES_ORDER_SCHEMA, PRODUCT: PRODUCT_SCHEMA}


def topic_dir(landing_root: Path, topic: str) -> Path:
    """The sink's folder of one topic under the landing root."""
    return Path(landing_root) / LANDING_FOLDER / topic


def _stage_start_ms(stage: int) -> int:
    """Source time at which stage `stage`'s changes begin (one day per stage)."""
    start = START + dt.timedelta(days=stage - 1)
    return (start - EPOCH) // dt.timedelta(milliseconds=1)


def _utc(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


class _Clock:
    """Source commit times of one stage, strictly increasing unless a step of 0 is asked for."""

    def __init__(self, stage: int) -> None:
        self.ms = _stage_start_ms(stage)

    def next(self, step: int = 1000) -> int:
        self.ms += step
        return self.ms


class _FlatTopic:
    """Events of a flattened topic in source order, and the stage each one is delivered in."""

    def __init__(self) -> None:
        self.stages: dict[int, list[dict]] = {stage: [] for stage in range(1, STAGES + 1)}

    def event(self, stage: int | None, op: str, row: dict, ts_ms: int) -> dict:
        """One change; delivered in `stage`, or held back (stage None) for a later `deliver`."""
        record = {**row, "__op": op, "__source_ts_ms": ts_ms, "__deleted": "true" if op == "d" else "false"}
        if stage is not None:
            self.stages[stage].append(record)
        return record

    def deliver(self, stage: int, record: dict) -> None:
        """(Re-)deliver an event: identical content, the next free offset of its partition."""
        self.stages[stage].append(dict(record))


# ---------------------------------------------------------------------------------------------
# mysql.salesdb.customer


def _customer(i: int, name: str | None = None, segment: str | None = None) -> dict:
    """Customer i; name and segment default to the snapshot's values."""
    return {
        "id": i,
        "name": name or f"Customer Name {i}",
        "mktsegment": segment or f"Market segment {i}",
    }


def _customer_events() -> dict[int, list[dict]]:
    topic = _FlatTopic()

    # Stage 1: the initial snapshot, every row read at the snapshot's time.
    snapshot_ms = _stage_start_ms(1)
    for i in range(1, 31):
        topic.event(1, "r", _customer(i), snapshot_ms)

    # Stage 2: the seed scenario (inserts 31, 32; updates 29, 30; deletes 27, 28) plus hard cases.
    clock = _Clock(2)
    # Hard case (late older event, newer change an update): this update of 29 is committed
    # before 29's seed update below but held back; stage 3 re-sends it (larger offset, older ts).
    late_29 = topic.event(None, "u", _customer(29, "Customer Name late 29", "Market segment late 29"), clock.next())
    # Hard case (late older event, newer change a delete): committed before 28's delete below,
    # re-sent in stage 3. It must not bring 28 back.
    late_28 = topic.event(None, "u", _customer(28, "Customer Name late 28"), clock.next())
    # Hard case (equal __source_ts_ms): 31 is inserted and updated in the same millisecond; only
    # the offset orders them, and the update ('Market segment 31') must win.
    same_ms = clock.next()
    topic.event(2, "c", _customer(31, segment="Market segment pending"), same_ms)
    topic.event(2, "u", _customer(31), same_ms)
    # Hard case (several changes of one key in one file): 32 is inserted and updated twice.
    topic.event(2, "c", _customer(32, "Customer Name draft 32", "Market segment pending"), clock.next())
    topic.event(2, "u", _customer(32, segment="Market segment pending"), clock.next())
    topic.event(2, "u", _customer(32), clock.next())
    topic.event(2, "u", _customer(29, "Customer Name update 29", "Market segment update 29"), clock.next())
    # Hard case (duplicate delivery): 30's update is delivered twice in this file and again in
    # stage 3. No other change of 30 shares its __source_ts_ms: with a tie, identical content
    # could not tell a re-delivery from a later change without a source position.
    update_30 = topic.event(2, "u", _customer(30, "Customer Name update 30", "Market segment update 30"), clock.next())
    topic.event(2, "d", _customer(27), clock.next())
    topic.event(2, "d", _customer(28), clock.next())
    topic.deliver(2, update_30)

    # Stage 3: ordinary changes, the late events and a re-delivery.
    clock = _Clock(3)
    topic.event(3, "u", _customer(5, segment="Market segment 5 gold"), clock.next())
    topic.deliver(3, late_29)
    topic.deliver(3, late_28)
    topic.event(3, "u", _customer(31, "Customer Name 31 Ltd"), clock.next())
    topic.deliver(3, update_30)
    # Hard case (delete of a key that never existed): customer 99 was never inserted.
    topic.event(3, "d", _customer(99), clock.next())
    topic.event(3, "u", _customer(12, segment="Market segment 12 silver"), clock.next())

    # Stage 4: ordinary changes, two of them to one key in one file.
    clock = _Clock(4)
    topic.event(4, "u", _customer(14, "Customer Name 14 GmbH"), clock.next())
    topic.event(4, "u", _customer(3, segment="Market segment 3 gold"), clock.next())
    topic.event(4, "u", _customer(14, "Customer Name 14 AG"), clock.next())
    topic.event(4, "u", _customer(31, "Customer Name 31 Ltd", "Market segment 31 gold"), clock.next())
    return topic.stages


# ---------------------------------------------------------------------------------------------
# mysql.salesdb.sales_order

NEXT_STATUS = {"placed": ["shipped", "shipped", "shipped", "cancelled"], "shipped": ["delivered"]}
SNAPSHOT_STATUS = ["placed"] * 10 + ["shipped"] * 3 + ["delivered"] * 2 + ["cancelled"]  # orders 1..16
NEW_ORDERS = {2: range(17, 29), 3: range(29, 37), 4: range(37, 41)}
HARD_CASE_ORDERS = {5, 10, 16, 17, 18}  # scripted below; the random moves leave them alone


def _sales_order_events() -> dict[int, list[dict]]:
    rng = random.Random(20261101)
    topic = _FlatTopic()
    orders: dict[int, dict] = {}  # the source table

    def new_order(order_id: int, customers: list[int], created_ms: int) -> dict:
        return {
            "order_id": order_id,
            "customer_id": rng.choice(customers),
            "order_ts": _utc(created_ms),
            "amount": Decimal(rng.randint(1_000, 99_999)).scaleb(-2),
            "order_status": "placed",
        }

    def change(stage: int | None, order_id: int, status: str, ts_ms: int) -> dict:
        orders[order_id] = {**orders[order_id], "order_status": status}
        return topic.event(stage, "u", orders[order_id], ts_ms)

    def random_moves(stage: int, clock: _Clock) -> None:
        for order_id in sorted(orders):
            status = orders[order_id]["order_status"]
            if order_id not in HARD_CASE_ORDERS and status in NEXT_STATUS and rng.random() < 0.6:
                change(stage, order_id, rng.choice(NEXT_STATUS[status]), clock.next(rng.randint(200, 5_000)))

    # Stage 1: snapshot of orders 1..16, placed in the hours before the snapshot.
    snapshot_ms = _stage_start_ms(1)
    customers = [i for i in range(1, 31) if i not in (27, 28)]
    for order_id, status in enumerate(SNAPSHOT_STATUS, start=1):
        orders[order_id] = {
            **new_order(order_id, customers, snapshot_ms - (17 - order_id) * 3_600_000),
            "order_status": status,
        }
        topic.event(1, "r", orders[order_id], snapshot_ms)

    customers += [31, 32]
    for stage in range(2, STAGES + 1):
        clock = _Clock(stage)
        if stage == 2:
            # Hard case (late older event): 5 is shipped, then delivered; the 'shipped' event is
            # held back and re-sent in stage 3, after 'delivered' (larger offset, older ts).
            late_5 = change(None, 5, "shipped", clock.next())
            # Hard case (duplicate delivery): 10's 'shipped' twice in this file (the second copy
            # at the end of the stage) and again in stage 4, after its stage-3 'delivered'.
            # No other change of 10 shares its __source_ts_ms.
            shipped_10 = change(2, 10, "shipped", clock.next())
        if stage == 3:
            topic.deliver(3, late_5)
            change(3, 10, "delivered", clock.next())
            # Hard case (delete of a key that never existed): order 999.
            ghost = {"order_id": 999, "customer_id": 7, "order_ts": _utc(clock.ms), "amount": Decimal("1.00")}
            topic.event(3, "d", {**ghost, "order_status": "placed"}, clock.next())
        if stage == 4:
            topic.deliver(4, shipped_10)
            # A real delete: the order cancelled before the snapshot is purged.
            topic.event(4, "d", orders.pop(16), clock.next())
        for order_id in NEW_ORDERS[stage]:
            created_ms = clock.next(rng.randint(200, 5_000))
            orders[order_id] = new_order(order_id, customers, created_ms)
            topic.event(stage, "c", orders[order_id], created_ms)
            if order_id == 17:
                # Hard case (several changes of one key in one file): placed, shipped, delivered.
                change(stage, 17, "shipped", clock.next())
                change(stage, 17, "delivered", clock.next())
            if order_id == 18:
                # Hard case (equal __source_ts_ms): 18 is cancelled in the millisecond it was
                # placed; only the offset says that 'cancelled' is last.
                change(stage, 18, "cancelled", created_ms)
        random_moves(stage, clock)
        if stage == 2:
            change(2, 5, "delivered", clock.next())  # the newer change that the late 'shipped' follows
            topic.deliver(2, shipped_10)  # the second copy in the same file
    return topic.stages


# ---------------------------------------------------------------------------------------------
# pg.inventory.product

PRODUCTS = [
    ("Espresso beans 1kg", "18.50", True),
    ("Filter papers x100", "3.20", True),
    ("Burr grinder", "129.00", True),
    ("Milk jug 600ml", "14.90", True),
    ("Pour-over dripper", "24.00", True),
    ("Gooseneck kettle", "59.95", True),
    ("Cold brew bottle", "21.40", False),
    ("Descaler 500ml", "9.99", True),
    ("Tamper 58mm", "34.00", True),
    ("Knock box", "27.50", True),
]


def _product(product_id: int, name: str, price: str, in_stock: bool = True) -> dict:
    return {"product_id": product_id, "name": name, "price": Decimal(price), "in_stock": in_stock}


class _EnvelopeTopic:
    """PostgreSQL change events in WAL order (lsn), and the stage each one is delivered in.

    Events of one transaction share `source.ts_ms` (the commit time) and `ts_ms` (the
    connector's processing time, a fixed lag after it), so both grow with the lsn."""

    LAG_MS = 35

    def __init__(self, first_lsn: int, first_tx: int) -> None:
        self.stages: dict[int, list[dict]] = {stage: [] for stage in range(1, STAGES + 1)}
        self.rows: dict[int, dict] = {}  # the source table, for before-images
        self.lsn = first_lsn
        self.tx = first_tx
        self.commit_ms = 0

    def snapshot(self, stage: int, rows: list[dict], ts_ms: int) -> None:
        """Initial snapshot: every row read in one transaction at one lsn."""
        self.begin(ts_ms)
        for n, row in enumerate(rows):
            self.rows[row["product_id"]] = row
            flag = "last" if n == len(rows) - 1 else "true"
            self.stages[stage].append(self._record("r", None, row, self.lsn, flag))

    def begin(self, commit_ms: int) -> None:
        self.tx += 1
        self.lsn += 4_096
        self.commit_ms = commit_ms

    def change(self, stage: int | None, op: str, row: dict | None = None, *, before: dict | None = None) -> dict:
        """One change in the current transaction: c/u take the new row, d the key's row (or an
        explicit before-image), t nothing. Delivered in `stage`, or held back if it is None."""
        self.lsn += 152
        if op == "c":
            before, after = None, row
        elif op == "u":
            before, after = self.rows[row["product_id"]], row
        elif op == "d":
            before, after = before or self.rows[row["product_id"]], None
        else:  # truncate
            before, after = None, None
        if op == "t":
            self.rows.clear()
        elif after is None:
            self.rows.pop(before["product_id"], None)
        else:
            self.rows[after["product_id"]] = after
        record = self._record(op, before, after, self.lsn, "false")
        if stage is not None:
            self.stages[stage].append(record)
        return record

    def deliver(self, stage: int, record: dict) -> None:
        """(Re-)deliver an event: identical content (same lsn), the next free offset."""
        self.stages[stage].append(dict(record))

    def _record(self, op: str, before: dict | None, after: dict | None, lsn: int, snapshot: str) -> dict:
        return {
            "before": before,
            "after": after,
            "op": op,
            "ts_ms": self.commit_ms + self.LAG_MS,
            "source": {
                "version": "2.7.3.Final",
                "connector": "postgresql",
                "name": "pg",
                "ts_ms": self.commit_ms,
                "snapshot": snapshot,
                "db": "inventory",
                "schema": "public",
                "table": "product",
                "txId": self.tx,
                "lsn": lsn,
            },
            "transaction": None,
        }


def _product_events() -> dict[int, list[dict]]:
    topic = _EnvelopeTopic(first_lsn=0x2A0F_3B00, first_tx=7_700)

    # Stage 1: the initial snapshot of products 1..10.
    topic.snapshot(1, [_product(i, *spec) for i, spec in enumerate(PRODUCTS, start=1)], _stage_start_ms(1))

    # Stage 2: change batch.
    clock = _Clock(2)
    topic.begin(clock.next())
    topic.change(2, "c", _product(11, "Scale 0.1g", "45.00"))
    topic.change(2, "c", _product(12, "Cupping spoon", "8.50"))
    # Hard case (several changes of one key in one file): three transactions update product 3.
    topic.begin(clock.next())
    topic.change(2, "u", _product(3, "Burr grinder", "119.00"))
    topic.begin(clock.next())
    topic.change(2, "u", _product(3, "Burr grinder", "119.00", False))
    topic.begin(clock.next())
    topic.change(2, "u", _product(3, "Burr grinder", "109.00", False))
    # Hard case (equal ts): two updates of product 5 in one transaction share ts_ms and
    # source.ts_ms; only the lsn orders them (the name change is last).
    topic.begin(clock.next())
    topic.change(2, "u", _product(5, "Pour-over dripper", "26.00"))
    topic.change(2, "u", _product(5, "Pour-over dripper V60", "26.00"))
    # Hard case (duplicate delivery): product 6's update twice in this file, again in stage 3,
    # always with the same lsn.
    topic.begin(clock.next())
    update_6 = topic.change(2, "u", _product(6, "Gooseneck kettle", "64.95"))
    topic.begin(clock.next())
    topic.change(2, "d", _product(8, *PRODUCTS[7]))
    # Hard case (delete of a key that never existed): product 99.
    topic.begin(clock.next())
    topic.change(2, "d", before=_product(99, "Discontinued sample", "0.01", False))
    topic.begin(clock.next())
    topic.change(2, "u", _product(2, "Filter papers x100", "3.50"))
    topic.deliver(2, update_6)

    # Stage 3: a re-delivery, changes, then a truncate followed by new inserts.
    clock = _Clock(3)
    topic.deliver(3, update_6)
    topic.begin(clock.next())
    topic.change(3, "u", _product(1, "Espresso beans 1kg", "19.50"))
    topic.change(3, "u", _product(4, "Milk jug 600ml", "15.90", False))
    # Hard case (truncate): removes every row whose last change is older than it.
    topic.begin(clock.next())
    topic.change(3, "t")
    topic.begin(clock.next())
    topic.change(3, "c", _product(20, "Espresso machine", "899.00"))
    topic.change(3, "c", _product(21, "Knock box XL", "32.00"))
    topic.change(3, "c", _product(1, "Espresso beans 1kg (new blend)", "21.00"))
    topic.change(3, "c", _product(22, "Travel mug", "19.00"))
    # Hard case (late older event): 20's first update is held back and arrives in stage 4, after
    # its second update (older source.ts_ms, ts_ms and lsn than an event delivered before it).
    topic.begin(clock.next())
    late_20 = topic.change(None, "u", _product(20, "Espresso machine", "849.00"))
    topic.begin(clock.next())
    topic.change(3, "u", _product(20, "Espresso machine", "799.00"))
    # Hard case (duplicate delivery in a later file): 21's update arrives again in stage 4.
    topic.begin(clock.next())
    update_21 = topic.change(3, "u", _product(21, "Knock box XL", "29.00"))

    # Stage 4: the late event, a re-delivery, and more changes.
    clock = _Clock(4)
    topic.deliver(4, late_20)
    topic.deliver(4, update_21)
    topic.begin(clock.next())
    topic.change(4, "d", _product(22, "Travel mug", "19.00"))
    topic.change(4, "c", _product(23, "Cleaning brush", "6.50"))
    topic.begin(clock.next())
    topic.change(4, "u", _product(23, "Cleaning brush", "5.50"))
    topic.change(4, "u", _product(1, "Espresso beans 1kg (new blend)", "21.00", False))
    return topic.stages


_BUILDERS = {CUSTOMER: _customer_events, SALES_ORDER: _sales_order_events, PRODUCT: _product_events}


def as_written(record: dict) -> dict:
    """A record as written: its times (`__source_ts_ms`, `order_ts`, the envelope's `ts_ms` and
    `source.ts_ms`) on the demo's clock if CDC_SAMPLE_TIMES=now; the record itself otherwise."""
    if not clock.enabled():
        return record
    result = dict(record)
    for name in ("__source_ts_ms", "ts_ms"):
        if result.get(name) is not None:
            result[name] = clock.ms(result[name])
    if result.get("order_ts") is not None:
        result["order_ts"] = clock.at(result["order_ts"])
    if isinstance(result.get("source"), dict):
        result["source"] = {**result["source"], "ts_ms": clock.ms(result["source"]["ts_ms"])}
    return result


def _partition(topic: str, record: dict) -> int:
    """Kafka's default partitioner for keyed records: hash(key) mod partitions (crc32 here).
    A truncate has no key and goes to partition 0."""
    spec = TOPICS[topic]
    if spec["shape"] == "envelope":
        row = record["after"] or record["before"]
        if row is None:
            return 0
    else:
        row = record
    key = "|".join(str(row[column]) for column in spec["key"])
    return zlib.crc32(key.encode()) % spec["partitions"]


def write_stage(landing_root: Path, stage: int) -> list[Path]:
    """Write stage `stage` (1-based) of every topic under `<landing_root>/debezium/topics/`.

    Offsets come from the fixed plan, not from the folder: writing stages 1..k in order (or any
    one stage alone) always gives the same files."""
    if not 1 <= stage <= STAGES:
        raise ValueError(f"stage must be 1..{STAGES}, got {stage}")
    written = []
    for topic, spec in TOPICS.items():
        per_partition = {
            s: [[r for r in records if _partition(topic, r) == p] for p in range(spec["partitions"])]
            for s, records in _BUILDERS[topic]().items()
        }
        for partition in range(spec["partitions"]):
            records = per_partition[stage][partition]
            if not records:
                continue
            offset = sum(len(per_partition[earlier][partition]) for earlier in range(1, stage))
            folder = topic_dir(landing_root, topic) / f"partition={partition}"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{topic}+{partition}+{offset:010d}.snappy.parquet"
            table = pa.Table.from_pylist([as_written(r) for r in records], schema=SCHEMAS[topic])
            pq.write_table(table, path, compression="snappy")
            written.append(path)
    return written

"""Source schema changes, written as the producers write them after a DDL at the source.

Each function appends new raw files after the regular sample stages (it reads what is already in
the landing folder to continue offsets and to know the current rows):

- `mysql_status_column`: the seed's MySQL change on salesdb.customer,
  `ALTER TABLE customer ADD COLUMN status VARCHAR(20) NOT NULL; UPDATE customer SET status = 'Green';`
  Debezium then sends an update of every row whose after-image has `status` before the `__` fields.
- `dms_new_types`: crm.customer_master gains `credit_limit numeric(18,4)` and `birth_date date`.
- `dms_upper_case_country`: a DMS file that spells crm.customer_address's `country` as `COUNTRY`.
- `mysql_order_customer_bigint`: salesdb.sales_order.customer_id widened from int to bigint.
- `mysql_order_channel_column`: salesdb.sales_order gains `channel varchar(10)`, set on one order.
- `pg_product_weight_column`: inventory.product gains `weight_g integer` (the full envelope's `before`/`after`).
- `dms_city_becomes_int`: crm.customer_address.city changes from string to int (not a safe change).
- `dms_hostile_names`: crm.customer_master gains columns named `loyalty tier`, `select`, and one with
  a backtick.

Times are sample time (DDL_TIME, 2026-11-06), moved to the demo's clock when written if
CDC_SAMPLE_TIMES=now (sample_data/clock.py), file names included.
"""

from __future__ import annotations

import datetime as dt
import zlib
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sample_data import clock, debezium, dms

UTC = dt.timezone.utc
DDL_TIME = dt.datetime(2026, 11, 6, 9, 0, 0, tzinfo=UTC)


# ---------------------------------------------------------------------------------------- Debezium


def _topic_rows(folder: Path) -> tuple[list[dict], dict[int, int]]:
    """All records of a flat topic in (ts, partition, offset) order, and the next offset per partition."""
    records, next_offset = [], {}
    for path in folder.glob("partition=*/*.parquet"):
        _, partition, start = path.name.split(".snappy")[0].rsplit("+", 2)
        table = pq.ParquetFile(path).read()
        for position, row in enumerate(table.to_pylist()):
            records.append((row["__source_ts_ms"], int(partition), int(start) + position, row))
        next_offset[int(partition)] = max(next_offset.get(int(partition), 0), int(start) + table.num_rows)
    return [r[3] for r in sorted(records, key=lambda r: r[:3])], next_offset


def _current_rows(records: list[dict], key: str) -> dict:
    state = {}
    for row in records:
        if row["__op"] == "d":
            state.pop(row[key], None)
        else:
            state[row[key]] = row
    return state


def _write_flat(landing: Path, topic: str, rows: list[dict], schema: pa.Schema, key: str) -> list[Path]:
    folder = debezium.topic_dir(landing, topic)
    _, next_offset = _topic_rows(folder)
    partitions = debezium.TOPICS[topic]["partitions"]
    by_partition: dict[int, list[dict]] = {}
    for row in rows:
        by_partition.setdefault(zlib.crc32(str(row[key]).encode()) % partitions, []).append(row)
    written = []
    for partition, part_rows in sorted(by_partition.items()):
        start = next_offset.get(partition, 0)
        path = folder / f"partition={partition}" / f"{topic}+{partition}+{start:010d}.snappy.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(part_rows, schema=schema), path, compression="snappy")
        written.append(path)
    return written


def mysql_status_column(landing: Path) -> list[Path]:
    """The seed: a NOT NULL `status` column, then `UPDATE customer SET status = 'Green'`."""
    records, _ = _topic_rows(debezium.topic_dir(landing, debezium.CUSTOMER))
    current = _current_rows(records, "id")
    ts = int(DDL_TIME.timestamp() * 1000)
    schema = pa.schema(
        [
            pa.field("id", pa.int32(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("mktsegment", pa.string()),
            pa.field("status", pa.string()),
            pa.field("__op", pa.string()),
            pa.field("__source_ts_ms", pa.int64()),
            pa.field("__deleted", pa.string()),
        ]
    )
    rows = [
        {
            "id": row["id"],
            "name": row["name"],
            "mktsegment": row["mktsegment"],
            "status": "Green",
            "__op": "u",
            "__source_ts_ms": clock.ms(ts + i),
            "__deleted": "false",
        }
        for i, row in enumerate(sorted(current.values(), key=lambda r: r["id"]))
    ]
    return _write_flat(landing, debezium.CUSTOMER, rows, schema, "id")


def mysql_order_customer_bigint(landing: Path, order_id: int = 900, later: int = 0) -> list[Path]:
    """`ALTER TABLE sales_order MODIFY customer_id BIGINT`, then a new order and an update (another order
    `later` seconds after, in a file of its own: the new type's files keep coming)."""
    schema = pa.schema(
        [
            pa.field("order_id", pa.int64(), nullable=False),
            pa.field("customer_id", pa.int64()),
            pa.field("order_ts", debezium.TIMESTAMP_MS),
            pa.field("amount", pa.decimal128(12, 2)),
            pa.field("order_status", pa.string()),
            pa.field("__op", pa.string()),
            pa.field("__source_ts_ms", pa.int64()),
            pa.field("__deleted", pa.string()),
        ]
    )
    ts = int(DDL_TIME.timestamp() * 1000) + 5_000 + later * 1000
    rows = [
        {
            "order_id": order_id,
            "customer_id": 3_000_000_000,
            "order_ts": clock.at(DDL_TIME),
            "amount": Decimal("12.50"),
            "order_status": "placed",
            "__op": "c",
            "__source_ts_ms": clock.ms(ts),
            "__deleted": "false",
        },
        {
            "order_id": order_id,
            "customer_id": 3_000_000_000,
            "order_ts": clock.at(DDL_TIME),
            "amount": Decimal("12.50"),
            "order_status": "shipped",
            "__op": "u",
            "__source_ts_ms": clock.ms(ts + 1),
            "__deleted": "false",
        },
    ]
    return _write_flat(landing, debezium.SALES_ORDER, rows, schema, "order_id")


def mysql_order_channel_column(landing: Path) -> list[Path]:
    """`ALTER TABLE sales_order ADD COLUMN channel VARCHAR(10)`, then `UPDATE sales_order SET channel = 'web'` on
    the order of the smallest id: one file of the topic's types so far plus `channel` (before the bigint change of
    `mysql_order_customer_bigint`, so that a later promotion leaves it in one group with the files before it)."""
    folder = debezium.topic_dir(landing, debezium.SALES_ORDER)
    records, _ = _topic_rows(folder)
    current = _current_rows(records, "order_id")
    first = current[min(current)]
    stage_schema = pq.read_schema(next(folder.glob("partition=*/*.parquet")))
    names = [f.name for f in stage_schema if not f.name.startswith("__")]
    schema = pa.schema(
        [*(stage_schema.field(n) for n in names), pa.field("channel", pa.string())]
        + [f for f in stage_schema if f.name.startswith("__")]
    )
    ts = int(DDL_TIME.timestamp() * 1000) + 1_000
    row = {**{n: first[n] for n in names}, "channel": "web", "__op": "u", "__source_ts_ms": clock.ms(ts)}
    row.update({f.name: first[f.name] for f in stage_schema if f.name.startswith("__") and f.name not in row})
    row["__deleted"] = "false"
    return _write_flat(landing, debezium.SALES_ORDER, [row], schema, "order_id")


def pg_product_weight_column(landing: Path, product_id: int = 30, later: int = 0) -> list[Path]:
    """`ALTER TABLE product ADD COLUMN weight_g integer` on PostgreSQL, then a new product and an update of it
    (`later` seconds after, in a file of its own: the new schema's files keep coming). The full envelope's
    `before` and `after` gain the field, so the topic's files hold two types of those columns."""
    row_type = pa.struct([*debezium.PRODUCT_ROW, pa.field("weight_g", pa.int32())])
    schema = pa.schema(
        [
            pa.field("before", row_type),
            pa.field("after", row_type),
            *(f for f in debezium.PRODUCT_SCHEMA if f.name not in ("before", "after")),
        ]
    )
    folder = debezium.topic_dir(landing, debezium.PRODUCT)
    events = [e for path in folder.glob("partition=*/*.parquet") for e in pq.ParquetFile(path).read().to_pylist()]
    lsn = max(e["source"]["lsn"] for e in events) + 4_096
    commit = int(DDL_TIME.timestamp() * 1000) + 5_000 + later * 1000
    created = {
        "product_id": product_id,
        "name": "Dosing cup",
        "price": Decimal("12.00"),
        "in_stock": True,
        "weight_g": 80,
    }
    updated = {**created, "price": Decimal("11.00")}

    def record(op: str, before: dict | None, after: dict | None, n: int) -> dict:
        source = {**events[0]["source"], "ts_ms": clock.ms(commit + n), "snapshot": "false", "lsn": lsn + 152 * n}
        return {"before": before, "after": after, "op": op, "ts_ms": clock.ms(commit + n + 35), "source": source}

    rows = [record("c", None, created, 0), record("u", created, updated, 1)]
    path = folder / "partition=0" / f"{debezium.PRODUCT}+0+{len(events):010d}.snappy.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="snappy")
    return [path]


# --------------------------------------------------------------------------------------------- DMS


def _dms_file(landing: Path, table: str, name: str, columns: dict[str, pa.Array]) -> Path:
    folder = Path(landing) / "dms" / dms.SCHEMA / table
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / clock.dms_file_name(name)
    pq.write_table(pa.table(columns), path, compression="snappy")
    return path


def _seq(ts: dt.datetime, n: int) -> str:
    return ts.strftime("%Y%m%d%H%M%S") + f"{n:021d}"


def dms_new_types(landing: Path) -> list[Path]:
    """`ALTER TABLE customer_master ADD credit_limit numeric(18,4), ADD birth_date date`, then updates."""
    ts = [clock.at(DDL_TIME + dt.timedelta(minutes=i)) for i in range(3)]
    customers = [dms.as_written(c) for c in (dms._customer(1, 2), dms._customer(2, 1), dms._customer(24))]
    columns = {
        "Op": pa.array(["U", "U", "I"]),
        "last_update_time": pa.array(ts, dms.TIMESTAMP),
        **{name: pa.array([c[name] for c in customers], typ) for name, typ in dms.TABLES["customer_master"].items()},
        "credit_limit": pa.array([Decimal("1234.5678"), None, Decimal("99999999999999.9999")], pa.decimal128(18, 4)),
        "birth_date": pa.array([dt.date(1990, 5, 17), dt.date(1985, 1, 2), None], pa.date32()),
        "AR_H_CHANGE_SEQ": pa.array([_seq(t, 900 + i) for i, t in enumerate(ts)]),
    }
    return [_dms_file(landing, "customer_master", "20261106-091500000.parquet", columns)]


def dms_upper_case_country(landing: Path) -> list[Path]:
    """A CDC file whose `country` column is spelled `COUNTRY` (a replication task re-created)."""
    ts = [clock.at(DDL_TIME + dt.timedelta(minutes=5 + i)) for i in range(2)]
    return [
        _dms_file(
            landing,
            "customer_address",
            "20261106-093000000.parquet",
            {
                "Op": pa.array(["U", "I"]),
                "last_update_time": pa.array(ts, dms.TIMESTAMP),
                "customer_id": pa.array([2, 24], pa.int64()),
                "city": pa.array(["Porto", "Nairobi"]),
                "COUNTRY": pa.array(["Portugal", "Kenya"]),
                "row_audit_ts": pa.array(ts, dms.TIMESTAMP),
                "AR_H_CHANGE_SEQ": pa.array([_seq(t, 910 + i) for i, t in enumerate(ts)]),
            },
        )
    ]


def dms_city_becomes_int(landing: Path) -> list[Path]:
    """`city` arrives as an integer (a broken source change): the table must stop, nothing else."""
    ts = clock.at(DDL_TIME + dt.timedelta(minutes=20))
    return [
        _dms_file(
            landing,
            "customer_address",
            "20261106-100000000.parquet",
            {
                "Op": pa.array(["U"]),
                "last_update_time": pa.array([ts], dms.TIMESTAMP),
                "customer_id": pa.array([3], pa.int64()),
                "city": pa.array([75001], pa.int32()),
                "country": pa.array(["France"]),
                "row_audit_ts": pa.array([ts], dms.TIMESTAMP),
                "AR_H_CHANGE_SEQ": pa.array([_seq(ts, 920)]),
            },
        )
    ]


HOSTILE = ["loyalty tier", "select", "odd`name", "größe"]


def dms_hostile_names(landing: Path) -> list[Path]:
    """New columns whose names are legal at the source and hostile in SQL."""
    ts = clock.at(DDL_TIME + dt.timedelta(minutes=30))
    customer = dms.as_written(dms._customer(4, 3))
    return [
        _dms_file(
            landing,
            "customer_master",
            "20261106-103000000.parquet",
            {
                "Op": pa.array(["U"]),
                "last_update_time": pa.array([ts], dms.TIMESTAMP),
                **{name: pa.array([customer[name]], typ) for name, typ in dms.TABLES["customer_master"].items()},
                "loyalty tier": pa.array(["gold"]),
                "select": pa.array([7], pa.int32()),
                "odd`name": pa.array([True]),
                "größe": pa.array([1.5], pa.float64()),
                "AR_H_CHANGE_SEQ": pa.array([_seq(ts, 930)]),
            },
        )
    ]

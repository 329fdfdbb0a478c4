"""The live capture's sink (python_hooks/live/sink.py) and engine settings (capture.py), without a JVM or
a database: Kafka's partitioner against Kafka's own values, Kafka Connect's schemas and JSON values to
Parquet as the S3 sink writes them, the files' names, rolling, atomic writes and the offsets recovered
after a kill."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from python_hooks.landing.files import is_raw_file, raw_files
from python_hooks.live import capture, source
from python_hooks.live.config import CONFIG_EXAMPLE, MARKER_PREFIX, TABLES, LiveConfig, config_from_env
from python_hooks.live.sink import (
    CONNECT_SCHEMA_KEY,
    ParquetSink,
    arrow_schema,
    arrow_value,
    kafka_partition,
    murmur2,
    recover_partition,
)

TOPIC = "pglive.shop.customer"
# The value schema of a flattened shop.customer event, as Debezium 3.6's JsonConverter wrote it (abridged).
CUSTOMER_SCHEMA = {
    "type": "struct",
    "name": "pglive.shop.customer.Value",
    "optional": False,
    "fields": [
        {"type": "int32", "optional": False, "field": "customer_id"},
        {"type": "int16", "optional": True, "field": "rank"},
        {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "version": 1, "field": "birth_date"},
        {
            "type": "bytes",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "12"},
            "field": "balance",
        },
        {"type": "string", "optional": False, "name": "io.debezium.time.ZonedTimestamp", "field": "signed_up_at"},
        {"type": "array", "items": {"type": "string", "optional": True}, "optional": True, "field": "tags"},
        {"type": "bytes", "optional": True, "field": "photo"},
        {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "field": "connect_date"},
        {"type": "string", "optional": True, "field": "__op"},
        {"type": "int64", "optional": True, "field": "__source_lsn"},
    ],
}


def payload(customer_id: int, op: str = "c", **changes) -> dict:
    return {
        "customer_id": customer_id,
        "rank": 3,
        "birth_date": -3653,
        "balance": "AeI6",  # 123450 unscaled: 1234.50
        "signed_up_at": "2026-11-03T10:00:00.654321Z",
        "tags": ["vip", None],
        "photo": base64.b64encode(b"\x00\xff").decode(),
        "connect_date": 1,
        "__op": op,
        "__source_lsn": 1000 + customer_id,
        **changes,
    }


def record(customer_id: int, schema: dict = CUSTOMER_SCHEMA, **changes) -> tuple[str, str]:
    key = {"schema": {"type": "struct", "fields": []}, "payload": {"customer_id": customer_id}}
    return json.dumps(key), json.dumps({"schema": schema, "payload": payload(customer_id, **changes)})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def files(root: Path) -> list[tuple[str, int]]:
    return [(path.name, pq.ParquetFile(str(path)).metadata.num_rows) for path in raw_files(root / TOPIC, "debezium")]


def test_murmur2_and_the_partition_are_kafkas():
    # Kafka's UtilsTest vectors, and a JsonConverter key whose partition Kafka's Utils gave (2 partitions).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"abc") == 479470107
    key = (
        '{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"customer_id"}],'
        '"optional":false,"name":"pglive.shop.customer.Key"},"payload":{"customer_id":1}}'
    )
    assert murmur2(key.encode()) == 198130568
    assert kafka_partition(key.encode(), 2) == 0
    assert kafka_partition(b"abc", 2) == 1
    assert kafka_partition(None, 2) == 0


def test_connect_schema_becomes_the_parquet_schema_the_s3_sink_writes():
    schema = arrow_schema(CUSTOMER_SCHEMA)
    assert [(f.name, f.type, f.nullable) for f in schema] == [
        ("customer_id", pa.int32(), False),
        ("rank", pa.int32(), True),  # int16 -> Avro int -> INT32
        ("birth_date", pa.int32(), True),  # Debezium's Date stays days since the epoch
        ("balance", pa.decimal128(12, 2), False),
        ("signed_up_at", pa.string(), False),  # ZonedTimestamp is text
        ("tags", pa.list_(pa.field("element", pa.string())), True),
        ("photo", pa.binary(), True),
        ("connect_date", pa.date32(), True),  # only Kafka Connect's own logical types get one
        ("__op", pa.string(), True),
        ("__source_lsn", pa.int64(), True),
    ]
    assert json.loads(schema.metadata[CONNECT_SCHEMA_KEY]) == CUSTOMER_SCHEMA


def test_json_values_are_decoded_decimals_exactly():
    row = arrow_value(CUSTOMER_SCHEMA, payload(7, balance="/w=="))
    assert row["balance"] == Decimal("-0.01") and row["balance"].as_tuple().exponent == -2
    assert arrow_value(CUSTOMER_SCHEMA, payload(7))["balance"] == Decimal("1234.50")
    assert row["photo"] == b"\x00\xff"
    assert row["tags"] == ["vip", None]
    assert str(row["connect_date"]) == "1970-01-02"
    assert row["birth_date"] == -3653


def test_files_roll_at_flush_size_and_schema_change_with_consecutive_offsets(tmp_path: Path):
    clock = Clock()
    sink = ParquetSink(tmp_path, {TOPIC: 1}, flush_size=3, rotate_ms=60_000, clock=clock)
    landings = [sink.put(TOPIC, *record(i)) for i in range(1, 6)]
    assert [landing.landed for landing in landings] == [True, True, True, False, False]
    assert files(tmp_path) == [(f"{TOPIC}+0+0000000000.snappy.parquet", 3)]
    # A column added at the source: the open file is closed, the new schema starts a file of its own.
    wider = {
        **CUSTOMER_SCHEMA,
        "fields": [
            *CUSTOMER_SCHEMA["fields"][:-2],
            {"type": "string", "optional": True, "field": "phone"},
            *CUSTOMER_SCHEMA["fields"][-2:],
        ],
    }
    sink.put(TOPIC, *record(6, wider, phone="+41"))
    assert all(landing.landed for landing in landings)
    sink.flush_all()
    assert files(tmp_path) == [
        (f"{TOPIC}+0+0000000000.snappy.parquet", 3),
        (f"{TOPIC}+0+0000000003.snappy.parquet", 2),
        (f"{TOPIC}+0+0000000005.snappy.parquet", 1),
    ]
    newest = pq.ParquetFile(tmp_path / TOPIC / "partition=0" / f"{TOPIC}+0+0000000005.snappy.parquet")
    assert newest.schema_arrow.names[-3:] == ["phone", "__op", "__source_lsn"]
    assert newest.metadata.row_group(0).column(0).compression == "SNAPPY"
    assert sink.next_offsets() == {TOPIC: {0: 6}}


def test_rotate_interval_closes_a_file_when_no_other_record_comes(tmp_path: Path):
    clock = Clock()
    sink = ParquetSink(tmp_path, {TOPIC: 1}, flush_size=100, rotate_ms=1000, clock=clock)
    landing = sink.put(TOPIC, *record(1))
    clock.now = 0.5
    sink.flush_due()
    assert not landing.landed and files(tmp_path) == []
    clock.now = 1.0
    sink.flush_due()
    assert landing.landed and files(tmp_path) == [(f"{TOPIC}+0+0000000000.snappy.parquet", 1)]


def test_records_the_sink_does_not_write_land_at_once(tmp_path: Path):
    sink = ParquetSink(tmp_path, {TOPIC: 1}, flush_size=10, rotate_ms=1000)
    assert sink.put(TOPIC, '{"payload": {"customer_id": 1}}', None).landed  # a tombstone
    assert sink.put("__debezium-heartbeat.pglive", None, '{"schema": {}, "payload": {}}').landed
    assert sink.buffered() == 0


def test_keys_spread_over_partitions_as_kafka_would(tmp_path: Path):
    sink = ParquetSink(tmp_path, {TOPIC: 2}, flush_size=100, rotate_ms=1000)
    for i in range(1, 21):
        sink.put(TOPIC, *record(i))
    sink.flush_all()
    written = {
        path.parent.name: pq.read_table(path)["customer_id"].to_pylist() for path in (tmp_path / TOPIC).glob("*/*")
    }
    assert set(written) == {"partition=0", "partition=1"}
    for folder, ids in written.items():
        assert {kafka_partition(record(i)[0].encode(), 2) for i in ids} == {int(folder.split("=")[1])}


def test_a_killed_writer_leaves_only_a_hidden_file_and_offsets_continue(tmp_path: Path):
    sink = ParquetSink(tmp_path, {TOPIC: 1}, flush_size=2, rotate_ms=1000)
    for i in range(1, 6):
        sink.put(TOPIC, *record(i))
    folder = tmp_path / TOPIC / "partition=0"
    leftover = folder / f".{TOPIC}+0+0000000004.snappy.parquet.tmp"
    leftover.write_bytes(b"PAR1 half a file")
    assert not is_raw_file(leftover.relative_to(tmp_path / TOPIC))
    writer = recover_partition(folder, TOPIC, 0)  # a new start: the open record (5) was never written
    assert writer.next_offset == 4 and not leftover.exists()
    names = sorted(path.name for path in folder.iterdir())
    assert names == [f"{TOPIC}+0+0000000000.snappy.parquet", f"{TOPIC}+0+0000000002.snappy.parquet"]


def test_engine_settings_flatten_exactly_the_flattened_tables(tmp_path: Path):
    config = LiveConfig(folder=tmp_path, pg_port=15433, landing_root=tmp_path / "landing", flush_size=10, rotate_ms=10)
    properties = capture.engine_properties(dataclasses.replace(config, password="from-the-environment"))
    pattern = re.compile(properties["predicates.flattened.pattern"])
    assert {table.topic for table in TABLES if pattern.fullmatch(table.topic)} == {
        table.topic for table in TABLES if table.shape == "flattened"
    }
    assert properties["skipped.operations"] == "none"  # Debezium drops truncates by default
    assert properties["offset.storage.file.filename"] == str(tmp_path / "capture" / "offsets.dat")
    assert properties["transforms.unwrap.add.fields"] == "op,source.ts_ms,source.lsn"
    assert properties["database.password"] == "from-the-environment"
    assert "database.password" not in capture.engine_properties(config)


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [(MARKER_PREFIX, "token-1"), ("someone-else", None)],
)
def test_drain_markers_are_told_from_other_messages(prefix: str, expected: str | None):
    content = base64.b64encode(b"token-1").decode()
    value = json.dumps({"payload": {"op": "m", "message": {"prefix": prefix, "content": content}}})
    assert capture.marker_token(value) == expected


class EngineRecord:
    """What the engine hands the capture: a JSON key and value, its topic, its source offset."""

    def __init__(self, customer_id: int, op: str, offset: dict) -> None:
        self._key, self._value = record(customer_id, op=op)
        self.offset = offset

    def destination(self) -> str:
        return TOPIC

    def key(self) -> str:
        return self._key

    def value(self) -> str:
        return self._value

    def sourceRecord(self) -> EngineRecord:  # noqa: N802 (the Java method's name)
        return self

    def sourceOffset(self) -> dict:  # noqa: N802
        return self.offset


class Committer:
    """Debezium's RecordCommitter: the offset committed at the end of each batch, and what had landed then."""

    def __init__(self, landing: Path) -> None:
        self.landing = landing
        self.marked: dict | None = None
        self.commits: list[tuple[dict | None, list[str]]] = []

    def markProcessed(self, record: EngineRecord) -> None:  # noqa: N802
        self.marked = record.offset

    def markBatchFinished(self) -> None:  # noqa: N802
        ops = [op for path in sorted(self.landing.rglob("*.parquet")) for op in pq.read_table(path)["__op"].to_pylist()]
        self.commits.append((self.marked, ops))


def test_no_change_of_the_stream_lands_while_a_restart_would_take_the_snapshot_again(tmp_path: Path):
    """A restart from an offset inside the snapshot (or from none) takes the whole snapshot again, which
    deletes nothing: a row deleted meanwhile would stay. So while the committed offset is there, nothing
    of the stream may be in a file. Customers 1, 8, 9, 10 go to partition 0, 2 and 3 to partition 1."""
    config = LiveConfig(
        folder=tmp_path, pg_port=15433, landing_root=tmp_path / "landing", flush_size=3, rotate_ms=60_000
    )
    live = capture.Capture(config)
    committer = Committer(config.landing_root)
    snapshot = [
        EngineRecord(1, "r", {"snapshot": "INITIAL", "last_snapshot_record": False}),
        EngineRecord(2, "r", {"snapshot": "INITIAL", "last_snapshot_record": False}),
        EngineRecord(3, "r", {"snapshot": "INITIAL", "last_snapshot_record": True}),
    ]
    stream = [EngineRecord(i, "c", {"lsn": 100 + i, "lsn_proc": 100 + i}) for i in (8, 9, 10)]
    live.handle(snapshot, committer)
    live.handle(stream, committer)  # partition 0's file fills up and rolls; partition 1's stays open

    for committed, landed in committer.commits:
        restarts_in_snapshot = committed is None or ("snapshot" in committed and not committed["last_snapshot_record"])
        assert not (restarts_in_snapshot and set(landed) - {"r"}), (committed, landed)
    assert committer.commits[-1] == ({"lsn": 110, "lsn_proc": 110}, ["r", "c", "c", "c", "r", "r"])


def test_the_offsets_copy_follows_every_rewrite(tmp_path: Path):
    """The copy of offsets.dat a start falls back to is the last one committed, also when Kafka rewrote the
    file with as many bytes within one tick of the file system's clock."""
    config = LiveConfig(folder=tmp_path, pg_port=15433, landing_root=tmp_path / "landing", flush_size=3, rotate_ms=10)
    live = capture.Capture(config)
    config.capture_dir.mkdir(parents=True)
    config.offsets_file.write_bytes(b"offsets at lsn 1000")
    live._backup_offsets()
    stat = config.offsets_file.stat()
    config.offsets_file.write_bytes(b"offsets at lsn 2000")
    os.utime(config.offsets_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    live._backup_offsets()
    assert capture.backup_file(config).read_bytes() == b"offsets at lsn 2000"


def test_a_config_file_points_the_capture_at_any_postgresql(tmp_path: Path):
    """CDC_LIVE_CONFIG names the server, the tables (key, shape, partitions) and the placeholder; the engine,
    the sink's topics and `pg-up`'s refusal follow it. The example in config.py is a valid file."""
    example = tmp_path / "example.yml"
    example.write_text(CONFIG_EXAMPLE)
    environ = {
        "CDC_LIVE_DIR": str(tmp_path),
        "CDC_LANDING_ROOT": str(tmp_path / "landing"),
        "CDC_LIVE_CONFIG": str(example),
    }
    config = config_from_env({**environ, "CDC_LIVE_PG_PASSWORD": "secret"})
    assert config.external and not config.demo
    assert [(t.topic, t.key, t.shape, t.partitions) for t in config.tables] == [
        ("app.sales.orders", ("order_id",), "flattened", 2)
    ]
    properties = capture.engine_properties(config)
    assert (properties["database.hostname"], properties["database.port"], properties["database.dbname"]) == (
        "db.internal",
        "5432",
        "app",
    )
    assert (properties["database.user"], properties["database.password"]) == ("debezium", "secret")
    assert properties["table.include.list"] == r"sales\.orders"
    assert properties["unavailable.value.placeholder"] == "__debezium_unavailable_value"
    assert re.fullmatch(properties["predicates.flattened.pattern"], "app.sales.orders")
    assert "secret" not in repr(config)
    with pytest.raises(SystemExit, match="a server of your own"):
        source.up(config)

    own = tmp_path / "own.yml"
    own.write_text(
        "connection: {database: inventory}\n"
        "tables:\n"
        "  - {name: stock.item, key: [warehouse, sku], shape: envelope}\n"
        "  - {name: stock.note, key: id}\n"
    )
    config = config_from_env({**environ, "CDC_LIVE_CONFIG": str(own)})
    assert not config.external and config.pg_host == "127.0.0.1" and config.database == "inventory"
    assert [(t.topic, t.key, t.shape) for t in config.tables] == [
        ("pglive.stock.item", ("warehouse", "sku"), "envelope"),
        ("pglive.stock.note", ("id",), "flattened"),
    ]
    assert capture.engine_properties(config)["table.include.list"] == r"stock\.item,stock\.note"

    for text, said in [
        ("tables: []", "no `tables:` list"),
        ("tables: [{name: item, key: [id]}]", "is not schema.table"),
        ("tables: [{name: s.item}]", "no key columns"),
        ("tables: [{name: s.item, key: [id], shape: wide}]", "neither flattened nor envelope"),
        ('tables: [{name: "s.it\'em", key: [id]}]', "is not a name"),
        ("tables: [{name: s.item, key: [id]}]\nslots: x", "unknown setting(s) slots"),
    ]:
        own.write_text(text)
        with pytest.raises(SystemExit, match=re.escape(said)):
            config_from_env({**environ, "CDC_LIVE_CONFIG": str(own)})

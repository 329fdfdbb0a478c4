"""The Debezium sample (sample_data/debezium.py) and its replay oracle (oracles/replay_debezium.py), in pure
Python: file layout as the Confluent S3 sink writes it, schemas, the seed scenario, each hard case
found in the raw data, determinism, and the replay's rules on hand-made topics."""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oracles.replay_debezium import replay_topic
from sample_data.debezium import STAGES, TOPICS, topic_dir, write_stage

CUSTOMER = "mysql.salesdb.customer"
SALES_ORDER = "mysql.salesdb.sales_order"
PRODUCT = "pg.inventory.product"
UTC = dt.timezone.utc


# ---------------------------------------------------------------------------------------------
# fixtures and raw-data helpers


@pytest.fixture(scope="module")
def landing_upto(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    """Landing root holding stages 1..k, written in order into an empty folder (cached per k)."""
    roots: dict[int, Path] = {}

    def make(k: int) -> Path:
        if k not in roots:
            root = tmp_path_factory.mktemp(f"landing_upto_{k}")
            for stage in range(1, k + 1):
                write_stage(root, stage)
            roots[k] = root
        return roots[k]

    return make


@pytest.fixture(scope="module")
def landing(landing_upto: Callable[[int], Path]) -> Path:
    return landing_upto(STAGES)


def replay(root: Path, topic: str) -> dict[tuple, dict]:
    return replay_topic(topic_dir(root, topic), TOPICS[topic]["shape"], TOPICS[topic]["key"])


def files(root: Path, topic: str) -> list[tuple[int, int, Path]]:
    """(partition, start offset, path) of every file of the topic, in Kafka order."""
    found = []
    for path in topic_dir(root, topic).glob("partition=*/*.parquet"):
        start = int(path.name.rsplit("+", 1)[1].split(".")[0])
        found.append((int(path.parent.name.split("=")[1]), start, path))
    return sorted(found)


def events(root: Path, topic: str) -> list[dict]:
    """Every record, normalised: file, partition, offset, key, op, ts (source), lsn, content."""
    shape, key = TOPICS[topic]["shape"], TOPICS[topic]["key"]
    result = []
    for partition, start, path in files(root, topic):
        for index, record in enumerate(pq.ParquetFile(path).read().to_pylist()):
            if shape == "envelope":
                image = record["after"] or record["before"]
                op, ts, lsn = record["op"], record["source"]["ts_ms"], record["source"]["lsn"]
            else:
                image, op, ts, lsn = record, record["__op"], record["__source_ts_ms"], None
            result.append(
                {
                    "file": path.name,
                    "partition": partition,
                    "offset": start + index,
                    "key": None if image is None else tuple(image[c] for c in key),
                    "op": op,
                    "ts": ts,
                    "lsn": lsn,
                    "content": repr(record),
                    "record": record,
                }
            )
    return result


def by_key(evs: list[dict]) -> dict[tuple, list[dict]]:
    grouped = defaultdict(list)
    for e in evs:
        if e["key"] is not None:
            grouped[e["key"]].append(e)
    return grouped


def utc_ms(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)


# ---------------------------------------------------------------------------------------------
# layout and schemas


def test_layout_names_offsets_and_compression(landing: Path, tmp_path: Path) -> None:
    returned = {p for stage in range(1, STAGES + 1) for p in write_stage(tmp_path, stage)}
    on_disk = {p for p in (tmp_path / "debezium" / "topics").rglob("*") if p.is_file()}
    assert returned == on_disk
    assert {p.parent.parent.name for p in on_disk} == set(TOPICS)
    for topic, spec in TOPICS.items():
        found = files(landing, topic)
        assert {p for _, _, p in found} == {p for p in topic_dir(landing, topic).rglob("*") if p.is_file()}
        assert {partition for partition, _, _ in found} == set(range(spec["partitions"]))
        for partition in range(spec["partitions"]):
            expected_offset = 0
            in_partition = [(start, path) for p, start, path in found if p == partition]
            assert len(in_partition) == STAGES, f"{topic} partition {partition}: one file per stage"
            for start, path in in_partition:
                assert path.parent.name == f"partition={partition}"
                assert re.fullmatch(rf"{re.escape(topic)}\+{partition}\+\d{{10}}\.snappy\.parquet", path.name)
                assert start == expected_offset, f"{path.name}: offsets must continue the partition"
                metadata = pq.ParquetFile(path).metadata
                assert metadata.num_rows > 0
                assert metadata.row_group(0).column(0).compression == "SNAPPY"
                assert {
                    metadata.row_group(g).column(c).compression
                    for g in range(metadata.num_row_groups)
                    for c in range(metadata.num_columns)
                } == {"SNAPPY"}
                expected_offset += metadata.num_rows


@pytest.mark.parametrize("topic", list(TOPICS))
def test_every_key_in_one_partition(landing: Path, topic: str) -> None:
    partitions = {k: {e["partition"] for e in evs} for k, evs in by_key(events(landing, topic)).items()}
    assert all(len(p) == 1 for p in partitions.values()), {k: p for k, p in partitions.items() if len(p) > 1}
    assert set().union(*partitions.values()) == set(range(TOPICS[topic]["partitions"]))


def test_flat_schemas(landing: Path) -> None:
    meta = [("__op", pa.string()), ("__source_ts_ms", pa.int64()), ("__deleted", pa.string())]
    expected = {
        CUSTOMER: [("id", pa.int32()), ("name", pa.string()), ("mktsegment", pa.string()), *meta],
        SALES_ORDER: [
            ("order_id", pa.int64()),
            ("customer_id", pa.int32()),
            ("order_ts", pa.timestamp("ms", tz="UTC")),
            ("amount", pa.decimal128(12, 2)),
            ("order_status", pa.string()),
            *meta,
        ],
    }
    for topic, columns in expected.items():
        for _, _, path in files(landing, topic):
            schema = pq.read_schema(path)
            assert [(f.name, f.type) for f in schema] == columns, path.name
        for e in events(landing, topic):
            assert e["op"] in {"r", "c", "u", "d"}
            assert e["record"]["__deleted"] == ("true" if e["op"] == "d" else "false")


def test_envelope_schema(landing: Path) -> None:
    row = pa.struct(
        [
            ("product_id", pa.int64()),
            ("name", pa.string()),
            ("price", pa.decimal128(10, 2)),
            ("in_stock", pa.bool_()),
        ]
    )
    source_fields = [
        "version",
        "connector",
        "name",
        "ts_ms",
        "snapshot",
        "db",
        "schema",
        "table",
        "txId",
        "lsn",
    ]
    for _, _, path in files(landing, PRODUCT):
        schema = pq.read_schema(path)
        assert schema.names == ["before", "after", "op", "ts_ms", "source", "transaction"]
        assert schema.field("before").type == row and schema.field("after").type == row
        assert schema.field("ts_ms").type == pa.int64()
        source = schema.field("source").type
        assert [source.field(i).name for i in range(source.num_fields)] == source_fields
        assert source.field("ts_ms").type == pa.int64() and source.field("lsn").type == pa.int64()
        assert source.field("txId").type == pa.int64()
        transaction = schema.field("transaction").type
        assert [transaction.field(i).name for i in range(transaction.num_fields)] == [
            "id",
            "total_order",
            "data_collection_order",
        ]
    for e in events(landing, PRODUCT):
        record, source = e["record"], e["record"]["source"]
        assert (source["connector"], source["name"], source["db"], source["schema"], source["table"]) == (
            "postgresql",
            "pg",
            "inventory",
            "public",
            "product",
        )
        assert record["ts_ms"] >= source["ts_ms"]
        if e["op"] in ("r", "c"):
            assert record["before"] is None and record["after"] is not None
        elif e["op"] == "u":
            assert record["before"] is not None and record["after"] is not None
        elif e["op"] == "d":
            assert record["before"] is not None and record["after"] is None
        else:
            assert e["op"] == "t" and record["before"] is None and record["after"] is None


@pytest.mark.parametrize("topic", list(TOPICS))
def test_stage_one_is_the_snapshot(landing_upto: Callable[[int], Path], topic: str) -> None:
    first = events(landing_upto(1), topic)
    assert first and {e["op"] for e in first} == {"r"}
    later = [e for e in events(landing_upto(STAGES), topic) if e["content"] not in {f["content"] for f in first}]
    assert later and "r" not in {e["op"] for e in later}
    if topic == PRODUCT:
        flags = [e["record"]["source"]["snapshot"] for e in first]
        assert flags == ["true"] * (len(first) - 1) + ["last"]
        assert {e["record"]["source"]["snapshot"] for e in later} == {"false"}


# ---------------------------------------------------------------------------------------------
# timestamps


@pytest.mark.parametrize("topic", [CUSTOMER, SALES_ORDER])
def test_flat_timestamps_grow_except_late_events_and_redeliveries(landing: Path, topic: str) -> None:
    out_of_order = 0
    for partition in range(TOPICS[topic]["partitions"]):
        seen: set[str] = set()
        newest_of_key: dict[tuple, int] = {}
        newest = 0
        for e in sorted((e for e in events(landing, topic) if e["partition"] == partition), key=lambda e: e["offset"]):
            if e["ts"] < newest and e["content"] not in seen:
                out_of_order += 1
                assert newest_of_key.get(e["key"], -1) > e["ts"], f"{topic} offset {e['offset']}: not a late event"
            seen.add(e["content"])
            newest = max(newest, e["ts"])
            newest_of_key[e["key"]] = max(newest_of_key.get(e["key"], 0), e["ts"])
    assert out_of_order >= 1


@pytest.mark.parametrize("topic", [CUSTOMER, SALES_ORDER])
def test_flat_duplicates_never_tie_with_another_change(landing: Path, topic: str) -> None:
    """With equal __source_ts_ms a re-delivery could not be told from a later change."""
    for key, evs in by_key(events(landing, topic)).items():
        copies = defaultdict(int)
        for e in evs:
            copies[e["content"]] += 1
        by_ts = defaultdict(set)
        for e in evs:
            by_ts[e["ts"]].add(e["content"])
        for ts, contents in by_ts.items():
            if len(contents) > 1:
                assert all(copies[c] == 1 for c in contents), f"{topic} key {key}: duplicate ties at {ts}"


def test_envelope_timestamps_grow_with_lsn(landing: Path) -> None:
    ordered = sorted(events(landing, PRODUCT), key=lambda e: e["lsn"])
    ts_ms = [e["record"]["ts_ms"] for e in ordered]
    source_ts = [e["ts"] for e in ordered]
    assert ts_ms == sorted(ts_ms) and source_ts == sorted(source_ts)
    # one lsn is one change: distinct contents never share (lsn, key)
    contents = defaultdict(set)
    for e in ordered:
        contents[(e["lsn"], e["key"])].add(e["content"])
    assert all(len(c) == 1 for c in contents.values())


# ---------------------------------------------------------------------------------------------
# hard cases, found in the raw data


@pytest.mark.parametrize("topic", list(TOPICS))
def test_several_changes_of_one_key_in_one_file(landing: Path, topic: str) -> None:
    per_file = defaultdict(set)
    for e in events(landing, topic):
        if e["op"] in ("c", "u", "d"):
            per_file[(e["file"], e["key"])].add(e["content"])
    assert any(len(contents) >= 3 for contents in per_file.values())


@pytest.mark.parametrize("topic", list(TOPICS))
def test_equal_source_ts_ordered_only_by_position(landing: Path, topic: str) -> None:
    pairs = []
    for key, evs in by_key(events(landing, topic)).items():
        changes = [e for e in evs if e["op"] != "r"]
        for a in changes:
            for b in changes:
                if a["ts"] == b["ts"] and a["content"] != b["content"] and a["offset"] < b["offset"]:
                    pairs.append((key, a, b))
    assert pairs
    for _key, a, b in pairs:
        if TOPICS[topic]["shape"] == "envelope":
            assert a["lsn"] != b["lsn"] and a["record"]["ts_ms"] == b["record"]["ts_ms"]
        else:
            assert a["partition"] == b["partition"]


@pytest.mark.parametrize("topic", list(TOPICS))
def test_late_older_event(landing: Path, topic: str) -> None:
    found = []
    for key, evs in by_key(events(landing, topic)).items():
        for late in evs:
            earlier_files = [e for e in evs if e["offset"] < late["offset"] and e["file"] != late["file"]]
            if late["content"] in {e["content"] for e in earlier_files}:
                continue  # a re-delivery, not a late event
            for newer in earlier_files:
                if newer["ts"] > late["ts"] and (newer["lsn"] is None or newer["lsn"] > late["lsn"]):
                    found.append((key, late["op"], newer["op"]))
    assert found
    if topic == CUSTOMER:
        # one late event follows a newer update, one a newer delete
        assert {(k, newer) for k, _, newer in found} >= {((29,), "u"), ((28,), "d")}


@pytest.mark.parametrize("topic", list(TOPICS))
def test_duplicate_delivery_in_one_file_and_in_a_later_file(landing: Path, topic: str) -> None:
    files_of = defaultdict(list)
    for e in events(landing, topic):
        files_of[e["content"]].append((e["file"], e["offset"], e["lsn"]))
    in_one_file = [c for c, where in files_of.items() if len({f for f, _, _ in where}) < len(where)]
    in_later_file = [c for c, where in files_of.items() if len({f for f, _, _ in where}) > 1]
    assert in_one_file and in_later_file
    for content in in_one_file + in_later_file:
        where = files_of[content]
        assert len({offset for _, offset, _ in where}) == len(where), "a re-delivery gets a new offset"
        assert len({lsn for _, _, lsn in where}) == 1


@pytest.mark.parametrize("topic", list(TOPICS))
def test_delete_of_a_key_that_never_existed(landing: Path, topic: str) -> None:
    ghosts = [k for k, evs in by_key(events(landing, topic)).items() if {e["op"] for e in evs} == {"d"}]
    assert ghosts
    for k in ghosts:
        assert k not in replay(landing, topic)


def test_truncate_then_inserts(landing_upto: Callable[[int], Path]) -> None:
    evs = events(landing_upto(3), PRODUCT)
    truncates = [e for e in evs if e["op"] == "t"]
    assert len(truncates) == 1 and truncates[0]["key"] is None
    truncate_lsn = truncates[0]["lsn"]
    after = by_key([e for e in evs if e["lsn"] > truncate_lsn])
    assert after, "inserts follow the truncate"

    before = replay(landing_upto(2), PRODUCT)
    result = replay(landing_upto(3), PRODUCT)
    removed = set(before) - set(after)
    assert removed, "the truncate removes rows not changed after it"
    assert not removed & set(result)
    # exactly the keys whose last change after the truncate is not a delete survive
    survivors = {k for k, changes in after.items() if max(changes, key=lambda e: e["lsn"])["op"] != "d"}
    assert set(result) == survivors
    assert (1,) in before and (1,) in survivors, "a truncated key is inserted again"


# ---------------------------------------------------------------------------------------------
# the seed scenario and the expected values, through the replay


def test_seed_scenario_after_stage_2(landing_upto: Callable[[int], Path]) -> None:
    state = replay(landing_upto(2), CUSTOMER)
    expected = {(i,): (f"Customer Name {i}", f"Market segment {i}", "I") for i in range(1, 27)}
    expected[(29,)] = ("Customer Name update 29", "Market segment update 29", "U")
    expected[(30,)] = ("Customer Name update 30", "Market segment update 30", "U")
    expected[(31,)] = ("Customer Name 31", "Market segment 31", "U")  # equal ts: the later offset wins
    expected[(32,)] = ("Customer Name 32", "Market segment 32", "U")  # several changes in one file
    assert {k: (r["name"], r["mktsegment"], r["_cdc_op"]) for k, r in state.items()} == expected
    assert all(isinstance(r["id"], int) and r["id"] == k[0] for k, r in state.items())
    assert state[(1,)]["_cdc_ts"] == dt.datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def test_seed_scenario_after_all_stages(landing: Path) -> None:
    state = replay(landing, CUSTOMER)
    assert len(state) == 30
    assert max(k[0] for k in state) == 32
    assert (27,) not in state and (28,) not in state, "28's late update must not bring it back"
    for i in (29, 30):
        assert (state[(i,)]["name"], state[(i,)]["mktsegment"]) == (
            f"Customer Name update {i}",
            f"Market segment update {i}",
        )
    raw = [e for e in events(landing, CUSTOMER) if e["key"] == (29,)]
    winner = [e for e in raw if e["record"]["name"] == "Customer Name update 29"]
    assert state[(29,)]["_cdc_ts"] == utc_ms(winner[0]["ts"])
    assert state[(29,)]["_cdc_ts"].tzinfo is not None


def test_sales_order_values(landing_upto: Callable[[int], Path]) -> None:
    state = replay(landing_upto(STAGES), SALES_ORDER)
    evs = events(landing_upto(STAGES), SALES_ORDER)
    assert {e["key"][0] for e in evs} == set(range(1, 41)) | {999}
    assert set(state) == {(i,) for i in range(1, 41)} - {(16,)}
    status = {k[0]: r["order_status"] for k, r in state.items()}
    assert (status[5], status[10], status[17], status[18]) == (
        "delivered",
        "delivered",
        "delivered",
        "cancelled",
    )
    assert replay(landing_upto(2), SALES_ORDER)[(5,)]["order_status"] == "delivered"
    assert replay(landing_upto(3), SALES_ORDER)[(5,)]["order_status"] == "delivered", "late 'shipped' ignored"
    row = state[(17,)]
    assert isinstance(row["amount"], Decimal) and row["amount"].as_tuple().exponent == -2
    assert row["order_ts"].tzinfo is not None and row["order_ts"] <= row["_cdc_ts"]
    # every order follows placed -> shipped -> delivered or placed -> cancelled
    moves = {("placed", "shipped"), ("shipped", "delivered"), ("placed", "cancelled")}
    for key, changes in by_key(evs).items():
        unique = {e["content"]: e for e in changes if e["op"] != "d"}.values()
        path = [e["record"]["order_status"] for e in sorted(unique, key=lambda e: (e["ts"], e["offset"]))]
        assert all((a, b) in moves for a, b in zip(path, path[1:], strict=False)), f"order {key}: {path}"


def test_product_values(landing_upto: Callable[[int], Path]) -> None:
    stage2 = replay(landing_upto(2), PRODUCT)
    assert (8,) not in stage2 and (99,) not in stage2 and len(stage2) == 11
    assert stage2[(3,)]["price"] == Decimal("109.00") and stage2[(3,)]["in_stock"] is False
    assert stage2[(5,)]["name"] == "Pour-over dripper V60", "equal ts: the larger lsn wins"
    assert stage2[(6,)]["price"] == Decimal("64.95")
    final = replay(landing_upto(STAGES), PRODUCT)
    assert set(final) == {(1,), (20,), (21,), (23,)}
    assert final[(20,)]["price"] == Decimal("799.00"), "the late update (849.00) is older"
    assert final[(21,)]["price"] == Decimal("29.00")
    assert (final[(1,)]["name"], final[(1,)]["in_stock"], final[(1,)]["_cdc_op"]) == (
        "Espresso beans 1kg (new blend)",
        False,
        "U",
    )
    assert final[(23,)]["_cdc_ts"] == dt.datetime(2026, 11, 4, 8, 0, 2, tzinfo=UTC)


# ---------------------------------------------------------------------------------------------
# determinism


def test_generation_is_deterministic(landing: Path, tmp_path: Path) -> None:
    other = tmp_path / "again"
    for stage in range(1, STAGES + 1):
        write_stage(other, stage)
    ours = {p.relative_to(landing): p.read_bytes() for p in landing.rglob("*.parquet")}
    theirs = {p.relative_to(other): p.read_bytes() for p in other.rglob("*.parquet")}
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert pq.read_table(landing / name).equals(pq.read_table(other / name)), name
    assert ours == theirs
    # a stage written alone into an empty folder gives the same files (offsets from the plan)
    alone = tmp_path / "alone"
    written = write_stage(alone, 3)
    assert len(written) == sum(spec["partitions"] for spec in TOPICS.values())
    assert all(ours[p.relative_to(alone)] == p.read_bytes() for p in written)
    with pytest.raises(ValueError):
        write_stage(tmp_path / "bad", STAGES + 1)


# ---------------------------------------------------------------------------------------------
# the replay's rules on hand-made topics


def _write(folder: Path, partition: int, offset: int, rows: list[dict], schema: pa.Schema) -> None:
    path = folder / f"partition={partition}" / f"t+{partition}+{offset:010d}.snappy.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="snappy")


def _pg(op: str, lsn: int, before: dict | None = None, after: dict | None = None) -> dict:
    return {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": lsn * 10 + 5,
        "source": {"ts_ms": lsn * 10, "lsn": lsn},
    }


def test_replay_envelope_rules(tmp_path: Path) -> None:
    row = pa.struct([("id", pa.int64()), ("v", pa.string())])
    schema = pa.schema(
        [
            ("before", row),
            ("after", row),
            ("op", pa.string()),
            ("ts_ms", pa.int64()),
            ("source", pa.struct([("ts_ms", pa.int64()), ("lsn", pa.int64())])),
        ]
    )
    one, two, three, four = ({"id": i, "v": f"v{i}"} for i in (1, 2, 3, 4))
    late_two = {"id": 2, "v": "late"}
    _write(
        tmp_path,
        0,
        0,
        [_pg("r", 1, after=one), _pg("r", 1, after=two), _pg("u", 5, one, {"id": 1, "v": "x"})],
        schema,
    )
    _write(
        tmp_path,
        0,
        3,
        [_pg("t", 9), _pg("c", 10, after=three), _pg("c", 11, after=four), _pg("c", 10, after=three)],
        schema,
    )
    # later file: a late update of 2 from before the truncate, a delete of 4, an unknown delete,
    # and a re-delivery of 3's insert
    _write(
        tmp_path,
        0,
        7,
        [
            _pg("u", 7, two, late_two),
            _pg("d", 12, before=four),
            _pg("d", 13, before={"id": 9, "v": "?"}),
            _pg("c", 10, after=three),
        ],
        schema,
    )
    state = replay_topic(tmp_path, "envelope", ["id"])
    assert state == {(3,): {"id": 3, "v": "v3", "_cdc_op": "I", "_cdc_ts": utc_ms(100)}}


def test_replay_flat_rules(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int32()), ("v", pa.string()), ("__op", pa.string()), ("__source_ts_ms", pa.int64())])

    def ev(i: int, v: str, op: str, ts: int) -> dict:
        return {"id": i, "v": v, "__op": op, "__source_ts_ms": ts}

    _write(
        tmp_path,
        0,
        0,
        [ev(1, "a", "r", 100), ev(1, "b", "u", 200), ev(1, "c", "u", 200), ev(1, "c", "u", 200)],
        schema,
    )
    _write(tmp_path, 1, 0, [ev(2, "a", "c", 150), ev(2, "a", "d", 300)], schema)
    # later file of partition 0: a late older event and a re-delivery
    _write(tmp_path, 0, 4, [ev(1, "late", "u", 150), ev(1, "b", "u", 200), ev(3, "z", "d", 50)], schema)
    state = replay_topic(tmp_path, "flat", ["id"])
    assert state == {(1,): {"id": 1, "v": "c", "_cdc_op": "U", "_cdc_ts": utc_ms(200)}}
    with pytest.raises(ValueError):
        replay_topic(tmp_path, "json", ["id"])

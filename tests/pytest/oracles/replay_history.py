"""Independent oracle for the SCD2 models, replayed in pure Python from the raw change files.

Written from ../shared/CDC_FORMATS.md and the history rules below, not from the models' SQL:

- a table's changes apply in commit order (DMS: last_update_time, then AR_H_CHANGE_SEQ, full-load
  rows first; flattened Debezium: __source_ts_ms, then partition and offset), a re-delivered
  Debezium event (same content) counts once; I and U write the row image, D removes the key;
- `customer_snapshot` / `dim_customer`: a dbt snapshot (timestamp strategy, hard_deletes new_record)
  taken once per run of the join of the three customer tables, keyed by customer id, whose
  `updated_at` is the latest commit among the joined rows and the deletes of the rows that are
  gone; a customer gone from all three tables ends at the commit time of the delete that removed
  its last row, with a deletion version that keeps its last attributes;
- `sales_order_status_history`: every change a version from its commit time to the next change's;
  of several changes at one commit time only the last counts; a delete of a live order starts a
  deletion version with the order's last attributes; a delete of an order that is gone does nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

from oracles.replay_debezium import read_events as read_debezium_events
from oracles.replay_dms import read_events as read_dms_events

OPEN_END = dt.datetime(9999, 12, 31)
UNKNOWN_MEMBER_FROM = dt.datetime(1900, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)
FLAT_OP = {"r": "I", "c": "I", "u": "U", "d": "D"}

CUSTOMER_ATTRIBUTES = [
    "first_name",
    "last_name",
    "employer_name",
    "email_id",
    "city",
    "country",
    "sales_customer_name",
    "market_segment",
]
ORDER_ATTRIBUTES = ["customer_id", "order_ts", "amount", "order_status"]


def _naive_utc(value):
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


# ---------------------------------------------------------------------------------------------
# Change events of one table, in commit order: (key, op, ts, row)


def dms_changes(folder: Path, key: str) -> list[tuple]:
    events = sorted(
        read_dms_events(folder),
        key=lambda e: (e["ts"], not e["full_load"], e["seq"] or "", e["file"], e["position"]),
    )
    return [
        (e["row"][key], e["op"], _naive_utc(e["ts"]), {k: _naive_utc(v) for k, v in e["row"].items()}) for e in events
    ]


def flat_changes(topic_dir: Path, key: str) -> list[tuple]:
    events = sorted(
        read_debezium_events(topic_dir), key=lambda e: (e["record"]["__source_ts_ms"], e["partition"], e["offset"])
    )
    seen, changes = set(), []
    for event in events:
        record = event["record"]
        content = tuple(sorted(record.items()))
        if content in seen:  # at-least-once delivery: the same event again
            continue
        seen.add(content)
        row = {k: _naive_utc(v) for k, v in record.items() if not k.startswith("__")}
        ts = EPOCH + dt.timedelta(milliseconds=record["__source_ts_ms"])
        changes.append((row[key], FLAT_OP[record["__op"]], ts, row))
    return changes


def table_state(changes: Iterable[tuple]) -> tuple[dict, dict]:
    """(live, removed): live key -> (row, commit time of its last change); removed key -> commit
    time of the delete that removed it, for keys that are gone."""
    live: dict = {}
    removed: dict = {}
    for key, op, ts, row in changes:
        if op == "D":
            if key in live:
                del live[key]
                removed[key] = ts
        else:
            live[key] = (row, ts)
            removed.pop(key, None)
    return live, removed


# ---------------------------------------------------------------------------------------------
# Customers: the join, and a snapshot of it per run


def joined_customers(landing: Path) -> dict[int, dict]:
    """customer id -> {attributes..., updated_at, deleted} as the snapshot source holds it now."""
    crm = Path(landing) / "dms" / "crm"
    master = table_state(dms_changes(crm / "customer_master", "customer_id"))
    address = table_state(dms_changes(crm / "customer_address", "customer_id"))
    sales = table_state(flat_changes(Path(landing) / "debezium" / "topics" / "mysql.salesdb.customer", "id"))
    tables = {"master": master, "address": address, "sales": sales}

    ids = set()
    for live, removed in tables.values():
        ids |= set(live) | set(removed)
    customers = {}
    for customer_id in ids:
        times, rows = [], {}
        for name, (live, removed) in tables.items():
            if customer_id in live:
                rows[name], ts = live[customer_id]
                times.append(ts)
            elif customer_id in removed:
                times.append(removed[customer_id])
        m, a, s = rows.get("master", {}), rows.get("address", {}), rows.get("sales", {})
        customers[int(customer_id)] = {
            "first_name": m.get("first_name"),
            "last_name": m.get("last_name"),
            "employer_name": m.get("employer_name"),
            "email_id": m.get("email_id"),
            "city": a.get("city"),
            "country": a.get("country"),
            "sales_customer_name": s.get("name"),
            "market_segment": s.get("mktsegment"),
            "updated_at": max(times),
            "deleted": not rows,
        }
    return customers


class CustomerSnapshot:
    """A dbt snapshot (timestamp strategy, hard_deletes new_record) of the joined customers,
    with deletes ended at their commit time."""

    def __init__(self) -> None:
        self.versions: dict[int, list[dict]] = {}

    def run(self, joined: dict[int, dict]) -> None:
        for customer_id, source in joined.items():
            versions = self.versions.setdefault(customer_id, [])
            current = versions[-1] if versions else None
            if source["deleted"]:
                if current is not None and not current["is_deleted"]:
                    self._close_and_add(versions, {**current, "valid_from": source["updated_at"], "is_deleted": True})
                continue
            attributes = {name: source[name] for name in CUSTOMER_ATTRIBUTES}
            if current is None or current["is_deleted"] or source["updated_at"] > current["valid_from"]:
                self._close_and_add(versions, {**attributes, "valid_from": source["updated_at"], "is_deleted": False})
        for customer_id, versions in self.versions.items():
            # a customer that vanished without a tombstone would end at the run time: never here
            assert customer_id in joined or not versions or versions[-1]["is_deleted"], customer_id

    @staticmethod
    def _close_and_add(versions: list[dict], version: dict) -> None:
        if versions:
            versions[-1]["valid_to"] = version["valid_from"]
        versions.append({**version, "valid_to": OPEN_END})

    def dim_rows(self) -> dict[tuple, dict]:
        """(customer_id, valid_from) -> dim_customer row without customer_sk, unknown member included."""
        rows = {}
        for customer_id, versions in self.versions.items():
            for version in versions:
                rows[(customer_id, version["valid_from"])] = {
                    "customer_id": customer_id,
                    **{name: version[name] for name in CUSTOMER_ATTRIBUTES},
                    "valid_from": version["valid_from"],
                    "valid_to": version["valid_to"],
                    "is_current": version["valid_to"] == OPEN_END,
                    "is_deleted": version["is_deleted"],
                }
        rows[(None, UNKNOWN_MEMBER_FROM)] = {
            "customer_id": None,
            **{name: None for name in CUSTOMER_ATTRIBUTES},
            "valid_from": UNKNOWN_MEMBER_FROM,
            "valid_to": OPEN_END,
            "is_current": True,
            "is_deleted": False,
        }
        return rows


def version_at(dim_rows: dict[tuple, dict], customer_id, when: dt.datetime) -> tuple | None:
    """The (customer_id, valid_from) of the customer's version valid at `when`, or None."""
    for (cid, valid_from), row in dim_rows.items():
        if cid is not None and cid == customer_id and valid_from <= when < row["valid_to"]:
            return cid, valid_from
    return None


# ---------------------------------------------------------------------------------------------
# Sales orders: every change a version


def order_history(landing: Path) -> dict[tuple, dict]:
    """(order_id, valid_from) -> sales_order_status_history row (without lineage columns)."""
    changes = flat_changes(Path(landing) / "debezium" / "topics" / "mysql.salesdb.sales_order", "order_id")
    per_order: dict[int, dict[dt.datetime, tuple]] = {}
    for order_id, op, ts, row in changes:
        per_order.setdefault(order_id, {})[ts] = (op, row)  # the last change at one commit time wins

    history = {}
    for order_id, instants in per_order.items():
        versions, live_row = [], None
        for ts in sorted(instants):
            op, row = instants[ts]
            if op == "D":
                if live_row is not None:
                    versions.append({**live_row, "valid_from": ts, "is_deleted": True, "_cdc_op": "D"})
                live_row = None
            else:
                live_row = {name: row[name] for name in ORDER_ATTRIBUTES}
                versions.append({**live_row, "valid_from": ts, "is_deleted": False, "_cdc_op": op})
        for position, version in enumerate(versions):
            following = versions[position + 1] if position + 1 < len(versions) else None
            valid_to = following["valid_from"] if following else OPEN_END
            history[(order_id, version["valid_from"])] = {
                "order_id": order_id,
                **version,
                "valid_to": valid_to,
                "is_current": following is None,
            }
    return history

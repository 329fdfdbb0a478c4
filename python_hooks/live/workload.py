"""The live source's workload: OLTP transactions on the `shop` tables that meet every case the pipeline
must survive, in a fixed order, with values from a seeded random generator (the same seed, the same
values; keys continue from the tables' largest, so it can run again and again).

`seed_rows` fills empty tables (what a capture's initial snapshot then reads). `run_workload`, one run:

 1. new customers, every column type with and without nulls (an array with a null element, dates
    before 1970, negative balances, timestamps with microseconds in several time zones);
 2. one customer updated four times in one transaction, and a customer inserted, updated and deleted
    in one transaction;
 3. orders: lines inserted (a long TOASTed note on some), updated without touching the note, deleted;
 4. documents with bodies larger than the TOAST threshold, updated without touching the body (the
    capture gets no value for it), one body replaced, one document deleted;
 5. ALTER TABLE shop.customer ADD COLUMN phone, then rows with it;
 6. shop.customer.loyalty_points widened from integer to bigint, then values above 2^31;
 7. a primary key updated (customer_id changed);
 8. TRUNCATE shop.order_line, then new lines, some with the keys of truncated ones;
 9. ALTER TABLE shop.order_line ADD COLUMN gift_wrap, then rows with it;
10. `rounds` small random transactions of inserts, updates and deletes on every table;
11. customers deleted (REPLICA IDENTITY DEFAULT: the delete logs the key only).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import random
import string
import time
import uuid
from collections import Counter
from collections.abc import Callable
from decimal import Decimal

import psycopg
from psycopg.types.json import Jsonb

from python_hooks.live.config import LiveConfig

log = logging.getLogger(__name__)

UTC = dt.timezone.utc
TOAST_BYTES = 6000  # a body or note this long is stored out of line (STORAGE EXTERNAL: from about 2 kB)
NAMES = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret", "Niklaus"]
ZONES = [dt.timezone(dt.timedelta(hours=h)) for h in (-8, -3, 0, 1, 5, 9)]


class Workload:
    """One connection to the source, the random generator, and what was done (`counts`)."""

    def __init__(self, connection: psycopg.Connection, rng: random.Random, pause: float = 0.0) -> None:
        self.connection = connection
        self.rng = rng
        self.pause = pause
        self.counts: Counter[str] = Counter()

    # -- values -------------------------------------------------------------------------------

    def text(self, length: int) -> str:
        """Letters and spaces, random enough that a long one does not compress under the TOAST threshold."""
        return "".join(self.rng.choices(string.ascii_letters + "     ", k=length))

    def customer(self, customer_id: int) -> dict:
        rng = self.rng
        return {
            "customer_id": customer_id,
            "full_name": f"{rng.choice(NAMES)} {customer_id}",
            "email": None if rng.random() < 0.2 else f"c{customer_id}@example.com",
            "is_active": rng.random() < 0.8,
            "birth_date": None if rng.random() < 0.1 else dt.date(1940, 1, 1) + dt.timedelta(days=rng.randrange(24000)),
            "balance": Decimal(rng.randrange(-100000, 10000000)).scaleb(-2),
            "signed_up_at": dt.datetime(2020, 1, 1, tzinfo=rng.choice(ZONES))
            + dt.timedelta(seconds=rng.randrange(200_000_000), microseconds=rng.randrange(1_000_000)),
            "preferences": None
            if rng.random() < 0.3
            else Jsonb({"lang": rng.choice(["en", "fr", "de"]), "news": rng.random() < 0.5, "n": [1, 2]}),
            "external_ref": uuid.UUID(int=rng.getrandbits(128), version=4),
            "tags": rng.choice([None, [], ["vip"], ["new", "web"], ["vip", None]]),
        }

    def order_line(self, order_id: int, line_no: int) -> dict:
        rng = self.rng
        return {
            "order_id": order_id,
            "line_no": line_no,
            "product_code": f"P-{rng.randrange(1000):03d}",
            "quantity": rng.randrange(1, 50),
            "unit_price": Decimal(rng.randrange(1, 10_000_000)).scaleb(-3),
            "discount": None if rng.random() < 0.5 else Decimal(rng.randrange(0, 5000)).scaleb(-4),
            "ordered_at": dt.datetime(2026, 11, 1)
            + dt.timedelta(seconds=rng.randrange(2_000_000), microseconds=rng.randrange(1_000_000)),
            "shipped_on": None if rng.random() < 0.4 else dt.date(2026, 11, 1) + dt.timedelta(days=rng.randrange(30)),
            "packing_slip": None if rng.random() < 0.5 else rng.randbytes(rng.randrange(1, 40)),
            "note": None if rng.random() < 0.6 else self.text(rng.choice([40, TOAST_BYTES])),
        }

    def document(self, document_id: int) -> dict:
        body = self.text(TOAST_BYTES + self.rng.randrange(6000))
        return {
            "document_id": document_id,
            "title": f"Document {document_id}",
            "revision": 1,
            "body": body,
            "checksum": hashlib.sha256(body.encode()).digest(),
            "updated_at": dt.datetime.now(UTC),
        }

    # -- statements -----------------------------------------------------------------------------

    def insert(self, table: str, row: dict) -> None:
        columns = ", ".join(row)
        values = ", ".join(f"%({name})s" for name in row)
        self.connection.execute(f"insert into shop.{table} ({columns}) values ({values})", row)
        self.counts["inserts"] += 1

    def update(self, table: str, key: dict, changes: dict) -> int:
        assignments = ", ".join(f"{name} = %(set_{name})s" for name in changes)
        where = " and ".join(f"{name} = %(key_{name})s" for name in key)
        parameters = {**{f"set_{n}": v for n, v in changes.items()}, **{f"key_{n}": v for n, v in key.items()}}
        rows = self.connection.execute(f"update shop.{table} set {assignments} where {where}", parameters).rowcount
        self.counts["updates"] += rows
        return rows

    def delete(self, table: str, key: dict) -> int:
        where = " and ".join(f"{name} = %({name})s" for name in key)
        rows = self.connection.execute(f"delete from shop.{table} where {where}", key).rowcount
        self.counts["deletes"] += rows
        return rows

    def scalar(self, sql: str) -> object:
        row = self.connection.execute(sql).fetchone()
        return None if row is None else row[0]

    def keys(self, table: str, columns: str) -> list[tuple]:
        return [tuple(row) for row in self.connection.execute(f"select {columns} from shop.{table} order by {columns}")]

    def next_id(self, table: str, column: str) -> int:
        return int(self.scalar(f"select coalesce(max({column}), 0) + 1 from shop.{table}"))

    def transaction(self, what: str, body: Callable[[], None]) -> None:
        with self.connection.transaction():
            body()
        self.counts["transactions"] += 1
        log.debug("workload: %s", what)
        time.sleep(self.pause)

    def ddl(self, sql: str) -> None:
        with self.connection.transaction():
            self.connection.execute(sql)
        self.counts["schema changes"] += 1

    def column_type(self, table: str, column: str) -> str | None:
        return self.scalar(
            "select data_type from information_schema.columns where table_schema = 'shop' "
            f"and table_name = '{table}' and column_name = '{column}'"
        )


def _orders(work: Workload, count: int) -> list[tuple[int, int]]:
    """`count` new orders of 1 to 4 lines; their keys."""
    first = max(work.next_id("order_line", "order_id"), 10_000_000_000)
    keys = []
    for order_id in range(first, first + count):
        for line_no in range(1, work.rng.randrange(2, 6)):
            work.insert("order_line", work.order_line(order_id, line_no))
            keys.append((order_id, line_no))
    return keys


def seed_rows(connection: psycopg.Connection, rng: random.Random) -> Counter[str]:
    """Rows for the initial snapshot, in empty tables only."""
    work = Workload(connection, rng)
    if work.scalar("select count(*) from shop.customer") or work.scalar("select count(*) from shop.document"):
        log.info("workload: the tables hold rows already: not seeded again")
        return work.counts
    work.transaction("seed customers", lambda: [work.insert("customer", work.customer(i)) for i in range(1, 41)])
    work.transaction("seed orders", lambda: _orders(work, 12))
    work.transaction("seed documents", lambda: [work.insert("document", work.document(i)) for i in range(1, 6)])
    return work.counts


def run_workload(connection: psycopg.Connection, rng: random.Random, rounds: int, pause: float = 0.0) -> Counter[str]:
    """One run of the steps above (the module's docstring); `pause` seconds after each transaction."""
    work = Workload(connection, rng, pause)

    # 1. new customers
    first = work.next_id("customer", "customer_id")
    work.transaction(
        "new customers", lambda: [work.insert("customer", work.customer(i)) for i in range(first, first + 10)]
    )

    # 2. one key changed several times in one transaction; a key born and gone in one transaction
    def several_changes() -> None:
        key = {"customer_id": first}
        work.update("customer", key, {"balance": Decimal("10.00")})
        work.update("customer", key, {"email": "several@example.com"})
        work.update("customer", key, {"tags": ["changed", "twice"], "balance": Decimal("12.34")})
        work.update("customer", key, {"preferences": Jsonb({"lang": "it", "last": True})})
        brief = work.next_id("customer", "customer_id")
        work.insert("customer", work.customer(brief))
        work.update("customer", {"customer_id": brief}, {"full_name": "Brief"})
        work.delete("customer", {"customer_id": brief})

    work.transaction("one key changed four times, one born and deleted", several_changes)

    # 3. orders: lines inserted, updated (notes left alone), deleted
    lines: list[tuple[int, int]] = []
    work.transaction("new orders", lambda: lines.extend(_orders(work, 6)))

    def change_lines() -> None:
        for order_id, line_no in rng.sample(lines, 6):
            work.update("order_line", {"order_id": order_id, "line_no": line_no}, {"quantity": rng.randrange(1, 99)})
        for order_id, line_no in rng.sample(lines, 2):
            work.delete("order_line", {"order_id": order_id, "line_no": line_no})

    work.transaction("order lines updated and deleted", change_lines)

    # 4. documents larger than the TOAST threshold, updated without touching the body
    documents: list[int] = []

    def new_documents() -> None:
        start = work.next_id("document", "document_id")
        for document_id in range(start, start + 4):
            work.insert("document", work.document(document_id))
            documents.append(document_id)

    work.transaction("new documents", new_documents)

    def revise_documents() -> None:
        for document_id in documents[:3]:
            changes = {"title": f"Document {document_id} (revised)", "revision": 2, "updated_at": dt.datetime.now(UTC)}
            work.update("document", {"document_id": document_id}, changes)
        body = work.text(TOAST_BYTES + 1000)
        work.update("document", {"document_id": documents[3]}, {"body": body, "revision": 2})
        work.delete("document", {"document_id": documents[2]})

    work.transaction("documents revised without their body", revise_documents)

    # 5. a column added mid-stream
    work.ddl("alter table shop.customer add column if not exists phone text")

    def phones() -> None:
        start = work.next_id("customer", "customer_id")
        for customer_id in range(start, start + 3):
            work.insert("customer", {**work.customer(customer_id), "phone": f"+41 79 {customer_id:07d}"})
        for (customer_id,) in rng.sample(work.keys("customer", "customer_id"), 3):
            work.update("customer", {"customer_id": customer_id}, {"phone": "+1 555 0100"})

    work.transaction("rows with the new column", phones)

    # 6. integer -> bigint
    if work.column_type("customer", "loyalty_points") == "integer":
        work.ddl("alter table shop.customer alter column loyalty_points type bigint")

    def big_points() -> None:
        for (customer_id,) in rng.sample(work.keys("customer", "customer_id"), 3):
            work.update("customer", {"customer_id": customer_id}, {"loyalty_points": 2**31 + rng.randrange(10**9)})

    work.transaction("values beyond integer", big_points)

    # 7. a primary key changed
    def new_key() -> None:
        (old,) = rng.choice(work.keys("customer", "customer_id"))
        work.update("customer", {"customer_id": old}, {"customer_id": work.next_id("customer", "customer_id") + 100})

    work.transaction("a primary key changed", new_key)

    # 8. TRUNCATE, then lines again, some with the keys of truncated ones
    old_lines = work.keys("order_line", "order_id, line_no")
    work.transaction("truncate", lambda: work.connection.execute("truncate shop.order_line"))
    work.counts["truncates"] += 1

    def after_truncate() -> None:
        for order_id, line_no in old_lines[:3]:
            work.insert("order_line", work.order_line(order_id, line_no))
        _orders(work, 2)

    work.transaction("lines after the truncate", after_truncate)

    # 9. a column added to the envelope's table
    work.ddl("alter table shop.order_line add column if not exists gift_wrap boolean")

    def gift_wrap() -> None:
        for order_id, line_no in _orders(work, 2):
            work.update("order_line", {"order_id": order_id, "line_no": line_no}, {"gift_wrap": rng.random() < 0.5})

    work.transaction("lines with the new column", gift_wrap)

    # 10. random small transactions
    for round_no in range(rounds):
        work.transaction(f"random round {round_no}", lambda: _random_changes(work))

    # 11. deletes (REPLICA IDENTITY DEFAULT: key only)
    def deletes() -> None:
        for (customer_id,) in rng.sample(work.keys("customer", "customer_id"), 3):
            work.delete("customer", {"customer_id": customer_id})

    work.transaction("customers deleted", deletes)
    return work.counts


def _random_changes(work: Workload) -> None:
    rng = work.rng
    for _ in range(rng.randrange(1, 6)):
        table = rng.choice(["customer", "order_line", "document"])
        action = rng.choices(["insert", "update", "delete"], weights=[4, 5, 1])[0]
        if table == "customer":
            keys = work.keys("customer", "customer_id")
            if action == "insert" or not keys:
                work.insert("customer", work.customer(work.next_id("customer", "customer_id")))
            elif action == "update":
                changes = {
                    "balance": Decimal(rng.randrange(-100000, 1000000)).scaleb(-2),
                    "is_active": rng.random() < 0.5,
                }
                work.update("customer", {"customer_id": rng.choice(keys)[0]}, changes)
            else:
                work.delete("customer", {"customer_id": rng.choice(keys)[0]})
        elif table == "order_line":
            keys = work.keys("order_line", "order_id, line_no")
            if action == "insert" or not keys:
                _orders(work, 1)
            else:
                order_id, line_no = rng.choice(keys)
                key = {"order_id": order_id, "line_no": line_no}
                if action == "update":
                    work.update("order_line", key, {"unit_price": Decimal(rng.randrange(1, 999999)).scaleb(-3)})
                else:
                    work.delete("order_line", key)
        else:
            keys = work.keys("document", "document_id")
            if action == "insert" or not keys:
                work.insert("document", work.document(work.next_id("document", "document_id")))
            elif action == "update":
                (document_id,) = rng.choice(keys)
                work.update("document", {"document_id": document_id}, {"revision": rng.randrange(3, 99)})
            else:
                work.delete("document", {"document_id": rng.choice(keys)[0]})


def run(config: LiveConfig, seed: int, rounds: int, only_seed: bool, pause: float = 0.0) -> Counter[str]:
    """Seed empty tables, then (unless `only_seed`) one workload run; says what it did and where."""
    if not config.demo:
        raise SystemExit("live workload: changes the demo's `shop` tables only; unset CDC_LIVE_CONFIG")
    started = time.monotonic()
    rng = random.Random(seed)
    with psycopg.connect(config.conninfo()) as connection:
        connection.autocommit = True  # each step opens its own transaction
        counts = seed_rows(connection, rng)
        if not only_seed:
            counts += run_workload(connection, rng, rounds, pause)
    done = ", ".join(
        f"{counts[name]} {name}"
        for name in ("transactions", "inserts", "updates", "deletes", "truncates", "schema changes")
        if counts[name]
    )
    log.info("workload: %s on %s in %.1f s", done or "nothing", config.conninfo(), time.monotonic() - started)
    return counts

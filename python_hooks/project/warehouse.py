"""The one seam between the Python hooks and the warehouse: SQL through the dbt adapter of the
target dbt runs on, so the same command works on every target. On `local` that adapter drives the
process's embedded Spark session; on `cluster` it is a Thrift connection (a scheduler host needs only
Python and the profile).

    with Warehouse.open(["--target", "cluster"]) as warehouse:
        rows = warehouse.query("select ...")       # a list of tuples
        warehouse.execute("alter table ...")       # DDL/DML: no result fetched

`execute` never fetches a result: PyHive fails with "'NoneType' object is not iterable" when asked
for the result of a DDL/DML statement on Spark 3.5.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from python_hooks.project import env
from python_hooks.project.dbt_args import dbt_option, project_dir_of, target_of
from python_hooks.project.meta import META_TABLES, SNAPSHOT_TABLES, meta_schema
from python_hooks.project.sql import quote_ident, quoted_relation, sql_string

# How `make run` tells its dbt build whether the warehouse has one writer (macros/cdc/publish.sql: cdc_single_writer).
SINGLE_WRITER_VARIABLE = "CDC_SINGLE_WRITER"
# The schemas the hooks found (a `show tables` in them answered), handed to the build so that dbt need not
# list every schema once per schema it builds in (macros/spark/list_schemas.sql).
SCHEMAS_VARIABLE = "CDC_EXISTING_SCHEMAS"
# The hooks' listings of schemas (`show table extended` rows), still true when the build starts, handed to it
# so that dbt's relation cache is filled without listing them again (macros/spark/list_relations.sql); only
# while they fit one environment variable as a process could pass it on (under Linux's 128 KiB).
LISTINGS_VARIABLE = "CDC_LISTED_RELATIONS"
LISTINGS_MAX_CHARS = 120_000


@dataclass
class Warehouse:
    adapter: object
    target: str
    schema: str
    _tables: dict[str, set[str]] = field(default_factory=dict, repr=False)
    # per schema (lower case): tables a query just read, so they exist, though the schema was not listed
    _read: dict[str, set[str]] = field(default_factory=dict, repr=False)
    # the schemas a listing found, lower case (kept across `execute`: the hooks drop no schema)
    existing_schemas: set[str] = field(default_factory=set, repr=False)
    _snapshots: dict[str, str | None] | None = field(default=None, repr=False)
    # per schema (lower case): its tables' columns as one listing reported them (`listed_columns`)
    _columns: dict[str, dict[str, list[tuple[str, str]]]] = field(default_factory=dict, repr=False)
    # per schema (lower case): the rows of a listing that succeeded, [namespace, tableName, isTemporary, information]
    _listings: dict[str, list[list]] = field(default_factory=dict, repr=False)
    # the answer of `_meta_listing` (name, lower case -> information; None: the listing failed), while `_meta_asked`
    _meta_listed: dict[str, str] | None = field(default=None, repr=False)
    _meta_asked: bool = field(default=False, repr=False)

    @classmethod
    def open(cls, dbt_args: Sequence[str] = ()) -> Warehouse:
        """The adapter of the profile's target, or of `--target` in `dbt_args` (dbt's own options:
        --target/-t, --project-dir, --profiles-dir; DBT_PROJECT_DIR as dbt reads it)."""
        # dbt is imported here, not at the top: a command that never opens the warehouse starts fast.
        from dbt.adapters.factory import get_adapter, register_adapter
        from dbt.config.runtime import RuntimeConfig
        from dbt.flags import set_from_args
        from dbt.mp_context import get_mp_context
        from dbt_common.context import set_invocation_context

        env.apply_defaults()
        args = argparse.Namespace(
            project_dir=project_dir_of(dbt_args) or str(env.PROJECT_ROOT),
            profiles_dir=dbt_option(dbt_args, "--profiles-dir") or os.environ["DBT_PROFILES_DIR"],
            target=target_of(dbt_args),
            profile=None,
            threads=None,
            vars={},
        )
        set_invocation_context(os.environ)
        set_from_args(args, None)
        config = RuntimeConfig.from_args(args)
        register_adapter(config, get_mp_context())
        return cls(adapter=get_adapter(config), target=config.target_name, schema=config.credentials.schema)

    @property
    def meta_schema(self) -> str:
        """The pipeline's own tables (python_hooks/project/meta.py)."""
        return meta_schema(self.schema)

    @property
    def single_writer(self) -> bool:
        """One process writes this warehouse: the embedded target (dbt-spark's `session` method: Spark in
        this process, on its own Derby metastore, project/embedded_lock.py). Said by the profile, so no
        statement asks it; `make run` hands it to the macros (cdc_single_writer: SINGLE_WRITER_VARIABLE)."""
        credentials = getattr(getattr(self.adapter, "config", None), "credentials", None)
        return str(getattr(credentials, "method", "")).lower() == "session"

    def query(self, sql: str) -> list[tuple]:
        with self.adapter.connection_named("python_hooks"):
            _, table = self.adapter.execute(sql, fetch=True)
        return [tuple(row) for row in table.rows]

    def records(self, sql: str) -> list[dict]:
        """The rows of a query as dicts by the result's own column names (a `select *` needs no
        `describe` first); a name the server prefixes with its relation (`t.column`) is the column's."""
        with self.adapter.connection_named("python_hooks"):
            _, table = self.adapter.execute(sql, fetch=True)
        names = [str(name).rsplit(".", 1)[-1] for name in table.column_names]
        return [dict(zip(names, row, strict=True)) for row in table.rows]

    def execute(self, sql: str, *, tables_changed: bool = True) -> None:
        """`tables_changed`: whether the statement may create or drop a table (then the listings are
        asked again); an INSERT or a procedure call keeps them."""
        if tables_changed:
            self._tables.clear()
            self._read.clear()
            self._columns.clear()
            self._listings.clear()
        self._snapshots = None
        self._meta_asked = False
        with self.adapter.connection_named("python_hooks"):
            self.adapter.execute(sql, fetch=False)

    def tables(self, schema: str) -> set[str]:
        """The tables of a schema, lower case (empty when it does not exist); one listing per schema
        until the next `execute`."""
        key = schema.lower()
        if key not in self._tables and key in self._listings:  # listed since the last `execute`
            self._tables[key] = {str(row[1]).lower() for row in self._listings[key] if not row[2]}
        if key not in self._tables:
            try:  # show tables: (namespace, tableName, isTemporary); one statement, no `show databases` first
                rows = self.query(f"show tables in {quote_ident(schema)}")
            except Exception as error:  # a schema not created yet has no table
                if not _schema_missing(error):
                    raise
                rows = []
            else:
                self.existing_schemas.add(key)
            self._tables[key] = {row[1].lower() for row in rows if not row[2]}
        return self._tables[key]

    def table_exists(self, schema: str, identifier: str) -> bool:
        if identifier.lower() in self._read.get(schema.lower(), ()):
            return True
        return identifier.lower() in self.tables(schema)

    def has_meta_tables(self, names: Sequence[str]) -> bool:
        """Whether every meta table of `names` exists: one listing of the meta tables by name (`_meta_listing`,
        which `meta_snapshots` then reads too), so a run needs no listing of the whole meta schema."""
        listed = self._meta_listing()

        def exists(name: str) -> bool:
            if listed is not None and name in META_TABLES:
                return name.lower() in listed
            return self.table_exists(self.meta_schema, name)

        return all(exists(name) for name in names)

    def meta_snapshots(self) -> dict[str, str | None]:
        """The newest snapshot id (text; None before the first commit) of each meta table of SNAPSHOT_TABLES that
        exists, kept until the next `execute` (which may commit to one of them). Iceberg's Hive catalog keeps it
        among the table's properties (`current-snapshot-id`, with `snapshot-count`), so the listing of
        `_meta_listing` says it; a table whose listing lacks them is asked in one query of its refs."""
        if self._snapshots is None:
            listed = self._meta_listing()
            if listed is None:
                names = [name for name in SNAPSHOT_TABLES if self.table_exists(self.meta_schema, name)]
                self._snapshots = self._newest_snapshots(names)
            else:
                found = {name: listed[name.lower()] for name in SNAPSHOT_TABLES if name.lower() in listed}
                snapshots = {name: listed_snapshot(information) for name, information in found.items()}
                unknown = [name for name, snapshot in snapshots.items() if snapshot is UNLISTED]
                self._snapshots = {**snapshots, **self._newest_snapshots(unknown)}
        return self._snapshots

    def _meta_listing(self) -> dict[str, str] | None:
        """The meta tables of META_TABLES that exist, by name (lower case), each with the `information` of its
        `show table extended` row: one listing of those names (`like 'a|b|...'`: the meta schema's other tables,
        a staging model's raw and landing tables, are not read), kept until the next `execute` (which may commit
        to one of them). Empty when the schema does not exist; None when the listing fails otherwise (then the
        callers ask `show tables` and the refs)."""
        meta = self.meta_schema.lower()
        if not self._meta_asked:
            self._meta_asked, self._meta_listed = True, None
            names = sql_string("|".join(META_TABLES))
            try:
                rows = self.records(f"show table extended in {quote_ident(self.meta_schema)} like {names}")
            except Exception as error:  # noqa: BLE001 - no schema yet: no table; anything else: the callers ask
                if not _schema_missing(error):
                    return None
                rows = []
            else:
                self.existing_schemas.add(meta)
            wanted = {name.lower() for name in META_TABLES}
            self._meta_listed = {
                str(row.get("tableName")).lower(): str(row.get("information") or "")
                for row in rows
                if not row.get("isTemporary") and str(row.get("tableName")).lower() in wanted
            }
            self._read.setdefault(meta, set()).update(self._meta_listed)
        return self._meta_listed

    def current_snapshots(self, schema: str, identifiers: Sequence[str]) -> dict[str, str | None]:
        """The current snapshot id (text; None before the first commit) of each table of `identifiers` in `schema`,
        by name as given. On the embedded target, as this process's Iceberg catalog holds each table (`_held_snapshots`:
        no statement). Otherwise one listing of those names, which reads the metastore only (no table's metadata
        file, as a query of each one's refs would), and one query of the refs of a table whose listing does not say
        (`listed_snapshot`). A table that does not exist: None."""
        if not identifiers:
            return {}
        held = self._held_snapshots(schema, identifiers) if self.single_writer else None
        if held is not None:
            return held
        plain = all(re.fullmatch(r"[A-Za-z0-9_]+", name) for name in identifiers)
        pattern = sql_string("|".join(identifiers) if plain else "*")
        rows = self.records(f"show table extended in {quote_ident(schema)} like {pattern}")
        listed = {
            str(row.get("tableName")).lower(): listed_snapshot(str(row.get("information") or ""))
            for row in rows
            if not row.get("isTemporary")
        }
        found = {name: listed.get(name.lower()) for name in identifiers}
        unlisted = [name for name, snapshot in found.items() if snapshot is UNLISTED]
        if unlisted:
            parts = [
                f"(select max(snapshot_id) from {quoted_relation(schema, name)}.refs where name = 'main')"
                for name in unlisted
            ]
            row = self.query("select " + ", ".join(parts))[0]
            found.update({name: None if v is None else str(v) for name, v in zip(unlisted, row, strict=True)})
        return found

    def _held_snapshots(self, schema: str, identifiers: Sequence[str]) -> dict[str, str | None] | None:
        """Each table's current snapshot id as the Iceberg catalog of this process's Spark session holds it, read
        through py4j: the catalog caches the tables the run loaded, a commit through it moves the cached table to
        its new snapshot, and a table not cached (or no longer) is loaded from the metastore. Exact on the embedded
        target only, where this process is the warehouse's one writer (python_hooks/project/embedded_lock.py).
        A listing of 20 tables after a run took 0.9 s, this 0.02 s (bench/TUNING.md, round 34). None, and the
        listing answers, when this process has no Spark session yet (one made here would lack the profile's
        settings) or a table is not one the catalog loads (it does not exist, or is not Iceberg's)."""
        from pyspark import SparkContext  # the embedded target only: dbt-spark's session is in this process

        if SparkContext._active_spark_context is None:
            return None
        session = process_session()
        load = session._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable
        found: dict[str, str | None] = {}
        try:
            for name in identifiers:
                snapshot = load(session._jsparkSession, f"{quote_ident(schema)}.{quote_ident(name)}").currentSnapshot()
                found[name] = None if snapshot is None else str(snapshot.snapshotId())
        except Exception:  # noqa: BLE001 - any table the catalog does not load: the listing says what it is
            return None
        return found

    def _newest_snapshots(self, names: Sequence[str]) -> dict[str, str | None]:
        """One query: the newest snapshot id of each meta table of `names` (text; None before its first commit)."""
        if not names:
            return {}
        parts = [
            f"(select max(snapshot_id) from {quoted_relation(self.meta_schema, name)}.refs where name = 'main')"
            for name in names
        ]
        row = self.query("select " + ", ".join(parts))[0]
        return {name: None if v is None else str(v) for name, v in zip(names, row, strict=True)}

    def columns(self, schema: str, identifier: str) -> list[tuple[str, str]] | None:
        """(name, Spark type) of a table's columns; None when it does not exist. An Iceberg table's come
        from one listing of its schema (`listed_columns`), so a run asks once per schema, not once per
        table; a table that listing cannot tell is described."""
        if not self.table_exists(schema, identifier):
            return None
        listed = self.listed_columns(schema).get(identifier.lower())
        if listed is not None:
            return listed
        columns = []
        for name, data_type, *_ in self.query(f"describe table {quoted_relation(schema, identifier)}"):
            if not name or name.startswith("#"):
                break  # partitioning and detail sections follow the columns
            columns.append((name, data_type))
        return columns

    def listed_columns(self, schema: str) -> dict[str, list[tuple[str, str]]]:
        """The columns of a schema's Iceberg tables by table (lower case), from one `show table extended`:
        the metastore keeps each table's Iceberg schema in its `current-schema` property, updated at every
        commit. Left out: a table whose schema has a type without a plain Spark spelling here (nested, time)
        or is too long for the property (32,672 characters). Empty when the listing fails (the metastore
        cannot parse a column type of some table of the schema): then each table is described."""
        key = schema.lower()
        if key not in self._columns:
            try:
                rows = self.records(f"show table extended in {quote_ident(schema)} like '*'")
            except Exception:  # noqa: BLE001 - a type the metastore cannot parse, or no schema: describe each
                rows = []
            else:
                self.existing_schemas.add(key)
                self._listings[key] = [
                    [row.get("namespace"), row.get("tableName"), bool(row.get("isTemporary")), row.get("information")]
                    for row in rows
                ]
            listed = {}
            for row in rows:
                columns = iceberg_columns(str(row.get("information") or ""))
                if columns is not None and not row.get("isTemporary"):
                    listed[str(row["tableName"]).lower()] = columns
            self._columns[key] = listed
        return self._columns[key]

    def listings(self) -> dict[str, list[list]]:
        """The listings still true (no statement that may create or drop a table ran since), by schema, each
        row's `information` cut to what dbt's relation cache reads (`relation_information`)."""
        return {
            schema: [[*row[:3], relation_information(str(row[3] or ""))] for row in rows]
            for schema, rows in self._listings.items()
        }

    def listed_metadata(self, schema: str) -> dict[str, str]:
        """Where each Iceberg table of a schema keeps its current metadata file (its `metadata_location`
        property), by table (lower case), from the same listing as `listed_columns` (no statement when it
        was listed since the last `execute`). Empty when the listing fails."""
        return self._listed(schema, lambda information: (found := METADATA_LOCATION.search(information)) and found[1])

    def listed_property(self, schema: str, key: str) -> dict[str, str]:
        """The value of property `key` of each table or view of a schema that has it, by name (lower case),
        from the same listing as `listed_columns` (`listed_value`)."""
        return self._listed(schema, lambda information: listed_value(information, key))

    def _listed(self, schema: str, read) -> dict[str, str]:
        """What `read` finds in the listing text of each table or view of a schema (no temporary view), by name
        (lower case), where it finds something."""
        self.listed_columns(schema)
        found = {}
        for _, name, temporary, information in self._listings.get(schema.lower(), []):
            value = None if temporary else read(str(information or ""))
            if value:
                found[str(name).lower()] = value
        return found

    def close(self) -> None:
        self.adapter.cleanup_connections()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


# Iceberg's primitive types (its schema JSON) as Spark's `describe` spells them.
SPARK_TYPES = {
    "boolean": "boolean",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "date": "date",
    "timestamp": "timestamp_ntz",
    "timestamptz": "timestamp",
    "string": "string",
    "uuid": "string",
    "binary": "binary",
}
# Iceberg's Hive catalog keeps the path of the table's current metadata file among its properties.
METADATA_LOCATION = re.compile(r"(?:^|[\[,\s])metadata_location=(\S+?\.metadata\.json)(?=[,\]\s]|$)")
DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
FIXED = re.compile(r"fixed\[\d+\]")


# What dbt-spark reads of a relation's `show table extended` text when it fills its cache (the type, the provider),
# and the project's macros (macros/snapshot/snapshot.sql: table_type=ICEBERG among the properties).
KEPT_INFORMATION = ("Catalog:", "Database:", "Namespace:", "Table:", "Owner:", "Type:", "Provider:", "Location:")


def process_session():
    """This process's Spark session, through which py4j reaches its JVM: on the embedded target dbt-spark's (the
    `session` method), which dbt's first statement made with the profile's settings."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()


# What `meta_snapshots` answers for a table whose listing does not say its snapshot (not Iceberg's Hive catalog).
UNLISTED = object()


def listed_value(information: str, key: str) -> str | None:
    """The value of property `key` in a `show table extended` row's text (its `Table Properties: [k=v, ...]` line,
    sorted by key). A value holds no space, comma or bracket. The table's schema (`current-schema`, JSON whose
    column names may hold any text) is skipped: the first `key=` of what is left is the property's."""
    line = next((x for x in information.splitlines() if x.startswith("Table Properties:")), "")
    start = line.find("current-schema=")
    if start >= 0:
        try:
            _, end = json.JSONDecoder().raw_decode(line, start + len("current-schema="))
        except ValueError:
            end = len(line)
        line = line[:start] + line[end:]
    value = re.search(rf"(?:^|[\[,\s]){re.escape(key)}=([^\s,\]]+)", line)
    return value[1] if value else None


def listed_snapshot(information: str):
    """A table's current snapshot id (text) from its listing, as Iceberg's Hive catalog keeps it at each commit:
    `snapshot-count` always, `current-snapshot-id` while there is one. None: no snapshot yet; UNLISTED: the
    listing does not say."""
    if listed_value(information, "snapshot-count") is None:
        return UNLISTED
    return listed_value(information, "current-snapshot-id")


def relation_information(information: str) -> str:
    """A `show table extended` row's text without what no build reads (columns, view text, the table's
    properties but its Iceberg table type and snapshot count, which the table materialization reads:
    macros/spark/table.sql): a listing of hundreds of tables fits an environment variable."""
    lines = [line for line in information.splitlines() if line.startswith(KEPT_INFORMATION)]
    if "table_type=ICEBERG" in information:
        count = listed_value(information, "snapshot-count")
        lines.append(f"Table Properties: [{f'snapshot-count={count}, ' if count else ''}table_type=ICEBERG]")
    return "\n".join(lines) + "\n"


def iceberg_columns(information: str) -> list[tuple[str, str]] | None:
    """(name, Spark type) from a `show table extended` row's text: the `current-schema` JSON that Iceberg's
    Hive catalog stores among the table's properties. None when it is absent or has a type this does not
    spell (a nested one: then the caller describes the table)."""
    marker = "current-schema="
    start = information.find(marker)
    if start < 0:
        return None
    try:
        schema, _ = json.JSONDecoder().raw_decode(information, start + len(marker))
    except ValueError:
        return None
    columns = []
    for field_ in schema.get("fields", []) if isinstance(schema, dict) else []:
        kind = field_.get("type")
        if not isinstance(kind, str):
            return None
        spark_type = SPARK_TYPES.get(kind)
        if spark_type is None and (decimal := DECIMAL.fullmatch(kind)):
            spark_type = f"decimal({decimal[1]},{decimal[2]})"
        if spark_type is None and FIXED.fullmatch(kind):
            spark_type = "binary"
        if spark_type is None:
            return None
        columns.append((field_["name"], spark_type))
    return columns or None


def state_dir() -> Path:
    """Client-side state of the hooks (the footer cache, the staging views' fingerprints, the ledger's
    answer): in this machine's folder of the target's warehouse (CDC_STATE_DIR: the warehouse itself
    when it is local, python_hooks/project/env.py)."""
    return Path(env.local_state_dir()) / "_python_hooks"


def write_state(path: Path, text: str) -> None:
    """Write a state file of the hooks atomically: a temporary file in the same folder, then a rename
    (a crash leaves the old file or the new one, never half of one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as tmp:
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def keep(path: Path, relation: str, snapshot: str, rows) -> None:
    """Keeps a meta table's rows (anything JSON holds) as of one of its snapshots in the hooks' state folder: an
    Iceberg snapshot never changes, so they are the table's while that snapshot is its newest (`read_kept`)."""
    write_state(path, json.dumps({"relation": relation, "snapshot": snapshot, "rows": rows}))


def read_kept(path: Path, relation: str, snapshot: str | None):
    """The rows `keep` wrote to `path` for `relation` as of `snapshot`; None when there are none (no snapshot,
    another table or snapshot, a missing or damaged file: then the caller reads the table)."""
    if snapshot is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data["relation"] == relation and data["snapshot"] == snapshot:
            return data["rows"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _schema_missing(error: Exception) -> bool:
    """Spark's answer to a statement on a schema that does not exist (embedded or through Thrift)."""
    text = str(error)
    return "SCHEMA_NOT_FOUND" in text or "NoSuchNamespaceException" in text or "NoSuchDatabaseException" in text

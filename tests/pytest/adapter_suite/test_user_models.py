"""What an analyst's own models hit on this stack and the project's overrides fix (issue 30), each proved
through dbt on the suite's target (local, or cluster with ADAPTER_SUITE_TARGET), in the suite's small projects
with the project's macros loaded: seeds (macros/spark/seed.sql), a model changing materialization
(macros/spark/create_view_as.sql, drop_relation.sql), a dropped schema (drop_schema.sql), a view too long for the
local metastore (create_view_as.sql), a snapshot with a list unique_key (macros/snapshot/snapshot.sql), run_query
of a DDL statement (macros/spark/run_query.sql, which the cluster target needs) and `dbt show` of a model with a
sql_header (macros/spark/show.sql: dbt Labs' class, moved here from test_commands.py, which make test leaves out)."""

from __future__ import annotations

import itertools
from pathlib import Path
from urllib.parse import urlparse

import pytest
from dbt.tests.adapter.dbt_show.test_dbt_show import BaseShowSqlHeader
from dbt.tests.util import get_manifest, run_dbt, run_dbt_and_capture, write_file

from helpers.adapter_suite import EMPTIED_FOLDERS_KEPT, LOCAL_FILES_ONLY, SUITE_TARGET
from helpers.paths import PROJECT

# An empty cell in each column, a quote, a backslash, a comma, the text None (a string) and null (null to dbt).
SEED_CSV = """id,name,amount,flag,day,at
1,plain,1.50,true,2024-01-31,2024-01-31 10:20:30
2,,2,false,,
3,O'Brien \\ co,,,2024-02-29,
4,"a, b",-0.25,true,2024-03-01,2024-03-01 00:00:01
5,None,,,,
6,null,0,false,2024-12-31,2024-12-31 23:59:59
"""
# As read back: each value as Spark's `cast(... as string)` writes it (the same through the session and through PyHive,
# which returns dates, timestamps and decimals as text), and the columns' types beside.
SEED_TYPES = ["bigint", "string", "decimal(10,2)", "boolean", "date", "timestamp"]
SEED_EXPECTED = [
    ("1", "plain", "1.50", "true", "2024-01-31", "2024-01-31 10:20:30"),
    ("2", None, "2.00", "false", None, None),
    ("3", "O'Brien \\ co", None, None, "2024-02-29", None),
    ("4", "a, b", "-0.25", "true", "2024-03-01", "2024-03-01 00:00:01"),
    ("5", "None", None, None, None, None),
    ("6", None, "0.00", "false", "2024-12-31", "2024-12-31 23:59:59"),
]


def _rows(project, relation: str) -> list[tuple]:
    return [tuple(row) for row in project.run_sql(f"select * from {relation} order by 1", fetch="all")]


def _seed_rows(project, relation: str) -> tuple[list[str], list[tuple]]:
    """The seed's column types, and its rows with every value as text (SEED_EXPECTED)."""
    described = project.run_sql(f"describe table {relation}", fetch="all")
    columns = list(itertools.takewhile(lambda row: row[0] and not row[0].startswith("#"), described))
    text = ", ".join(f"cast(`{row[0]}` as string)" for row in columns)
    rows = project.run_sql(f"select {text} from {relation} order by id", fetch="all")
    return [row[1] for row in columns], [tuple(row) for row in rows]


def _files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def _write_model(project, name: str, config: str, version: int) -> None:
    write_file(MODEL_SQL.format(config=config, version=version), project.project_root, "models", f"{name}.sql")


def _location(project, relation: str) -> Path:
    rows = project.run_sql(f"describe table extended {relation}", fetch="all")
    return Path(urlparse(next(row[1] for row in rows if row[0] == "Location")).path)


class TestProjectMacrosLoaded:
    """The suite's projects really load this project's macros: its overrides win over dbt-spark's."""

    def test_overrides_come_from_the_project(self, project):
        run_dbt(["parse"])
        macros = get_manifest(project.project_root).macros
        for name in (
            "spark__drop_relation",
            "spark__drop_schema",
            "spark__create_view_as",
            "spark__load_csv_rows",
            "run_query",
        ):
            (macro,) = [m for m in macros.values() if m.name == name and m.package_name == "test"]
            assert str(PROJECT / "macros") in macro.original_file_path, macro.original_file_path


class TestSeedEmptyCells:
    """dbt-labs/dbt-adapters#487: an empty cell is null (not 'None'), quotes and backslashes load as written,
    for a non-Iceberg (no file_format) and an Iceberg seed."""

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"plain.csv": SEED_CSV, "on_iceberg.csv": SEED_CSV}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        types = {"amount": "decimal(10,2)"}
        return {
            "seeds": {
                "test": {
                    "plain": {"+column_types": types},
                    "on_iceberg": {"+column_types": types, "+file_format": "iceberg"},
                }
            }
        }

    def test_values_as_written(self, project):
        results = run_dbt(["seed"])
        assert len(results) == 2
        for seed in ("plain", "on_iceberg"):
            assert _seed_rows(project, f"{project.test_schema}.{seed}") == (SEED_TYPES, SEED_EXPECTED), seed

    def test_iceberg_reloaded_same_rows(self, project):
        """A second load (dbt build reloads a seed) gives the same rows, not twice as many."""
        run_dbt(["seed", "--select", "on_iceberg"])
        assert _seed_rows(project, f"{project.test_schema}.on_iceberg") == (SEED_TYPES, SEED_EXPECTED)

    @EMPTIED_FOLDERS_KEPT  # dbt-spark reloads a seed by dropping its table and creating it again
    def test_plain_reloaded_same_rows(self, project):
        run_dbt(["seed", "--select", "plain"])
        assert _seed_rows(project, f"{project.test_schema}.plain") == (SEED_TYPES, SEED_EXPECTED)


RUN_QUERY_MACRO = """
{% macro probe_run_query() %}
    {%- set table = target.schema ~ '.probed' -%}
    {%- set created = run_query('/* made by the probe */\n  create table ' ~ table ~ ' (id int) using iceberg') -%}
    {%- set inserted = run_query('insert into ' ~ table ~ ' values (2), (1)') -%}
    {%- set selected = run_query('-- read back\nselect id from ' ~ table ~ ' order by id') -%}
    {%- set shown = run_query('show tables in ' ~ target.schema) -%}
    {%- set ids = selected.columns[0].values() | map('int') | list -%}
    {{ log('probe: ' ~ created.rows | length ~ ' ' ~ inserted.rows | length ~ ' ' ~ ids
           ~ ' ' ~ ('probed' in shown.columns[1].values()), info=True) }}
{% endmacro %}
"""


class TestRunQueryStatements:
    """dbt-labs/dbt-adapters#481: run_query of a DDL or DML statement gives an empty table (through the Thrift
    Server, PyHive failed to fetch its result), and of a query its rows, whatever comments lead it."""

    @pytest.fixture(scope="class")
    def macros(self):
        return {"probe_run_query.sql": RUN_QUERY_MACRO}

    def test_statements_and_queries(self, project):
        _, output = run_dbt_and_capture(["run-operation", "probe_run_query"])
        assert "probe: 0 0 [1, 2] True" in output, output[-2000:]
        assert _rows(project, f"{project.test_schema}.probed") == [(1,), (2,)]


MODEL_SQL = "{{{{ config({config}) }}}}\nselect {version} as id, 'v{version}' as version"
# Each step: the model's config and whether its relation is then a view. The non-Iceberg steps come first: once an
# Iceberg table of the name was dropped, a non-Iceberg one cannot follow (test_iceberg_table_to_parquet_table).
SWITCHES = [
    ("materialized='view'", "view"),
    ("materialized='table'", "table"),
    ("materialized='view'", "view"),
    ("materialized='incremental', incremental_strategy='append'", "table"),
    ("materialized='view'", "view"),
    ("materialized='table', file_format='parquet'", "table"),
    ("materialized='table'", "table"),
    ("materialized='view'", "view"),
    ("materialized='table', file_format='iceberg'", "table"),
    ("materialized='view'", "view"),
    ("materialized='incremental', file_format='iceberg', unique_key='id', incremental_strategy='merge'", "table"),
    ("materialized='table', file_format='iceberg'", "table"),
    ("materialized='view'", "view"),
]


class TestMaterializationSwitches:
    """A model changes materialization (view, table, incremental) and file format, run after run, with no
    manual drop: a view's metadata is kept out of the table folder of its name (create_view_as.sql)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"switching.sql": MODEL_SQL.format(config=SWITCHES[0][0], version=0)}

    @EMPTIED_FOLDERS_KEPT  # the non-Iceberg steps create a table where one of its name was dropped
    def test_switch_back_and_forth(self, project):
        relation = f"{project.test_schema}.switching"
        for version, (config, kind) in enumerate(SWITCHES):
            _write_model(project, "switching", config, version)
            run_dbt(["run"])
            assert _rows(project, relation) == [(version, f"v{version}")], config
            described = {row[0]: row[1] for row in project.run_sql(f"describe table extended {relation}", fetch="all")}
            assert (described["Type"] == "VIEW") == (kind == "view"), (config, described["Type"])

    @LOCAL_FILES_ONLY
    @pytest.mark.xfail(
        strict=True,
        reason="`drop table purge` of an Iceberg table deletes the files it references, never folders "
        "(apache/iceberg#9869, closed as intended): its empty data/ and metadata/ folders stay, and Spark refuses to "
        "create a managed non-Iceberg table over them (LOCATION_ALREADY_EXISTS); docs/models.md",
    )
    def test_iceberg_table_to_parquet_table(self, project):
        for version, config in enumerate(("materialized='table', file_format='iceberg'", "materialized='table'")):
            _write_model(project, "switching", config, version)
            run_dbt(["run"])


class TestIcebergTableReplaced:
    """A table model on Iceberg is replaced in one statement, as upstream means to (macros/spark/table.sql), though
    the listing says `Provider: hive`: no drop is sent, so the table is never missing while a run builds it. It keeps
    the version its last build replaced and no older one: a build that finds two snapshots expires the replaced
    versions with their files, as the drop's `purge` deleted them (cdc_replaced_versions_due). A view made a table
    again is still dropped first."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"replaced.sql": MODEL_SQL.format(config="materialized='table', file_format='iceberg'", version=1)}

    def test_replaced_not_dropped(self, project):
        relation = f"{project.test_schema}.replaced"
        run_dbt(["run"])
        _write_model(project, "replaced", "materialized='table', file_format='iceberg'", 2)
        _, output = run_dbt_and_capture(["--debug", "run"])
        assert "drop table" not in output.lower(), "an Iceberg table model is replaced, not dropped"
        assert "create or replace table" in output.lower()
        assert _rows(project, relation) == [(2, "v2")]
        snapshots = project.run_sql(f"select snapshot_id from {relation}.snapshots order by committed_at", fetch="all")
        assert len(snapshots) == 2, "the version the build replaced is kept"
        assert _rows(project, f"{relation} version as of {snapshots[0][0]}") == [(1, "v1")]
        _write_model(project, "replaced", "materialized='table', file_format='iceberg'", 3)
        run_dbt(["run"])
        assert _rows(project, relation) == [(3, "v3")]
        assert len(project.run_sql(f"select snapshot_id from {relation}.snapshots", fetch="all")) == 1
        assert _rows(project, f"(select file_path from {relation}.all_data_files)") == _rows(
            project, f"(select file_path from {relation}.files)"
        ), "the replaced versions' files are no snapshot's"
        _write_model(project, "replaced", "materialized='view'", 4)
        run_dbt(["run"])
        _write_model(project, "replaced", "materialized='table', file_format='iceberg'", 5)
        run_dbt(["run"])
        assert _rows(project, relation) == [(5, "v5")]


@LOCAL_FILES_ONLY
class TestDropDeletesFiles:
    """A non-Iceberg managed table's folder goes with it when a model drops it (drop_relation.sql: `purge`;
    without it SparkSessionCatalog keeps the files, apache/iceberg#12790), and an Iceberg table's files too."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"dropped.sql": MODEL_SQL.format(config="materialized='table'", version=1)}

    def test_table_files_removed(self, project):
        relation = f"{project.test_schema}.dropped"
        for config in ("materialized='table'", "materialized='table', file_format='iceberg'"):
            _write_model(project, "dropped", config, 1)
            run_dbt(["run"])
            folder = _location(project, relation)
            assert _files(folder), folder
            _write_model(project, "dropped", "materialized='view'", 2)
            run_dbt(["run"])
            assert not _files(folder), (config, folder)


class TestDropSchemaDropsTables:
    """apache/iceberg#2374: dbt's drop_schema drops each table through Iceberg (drop_schema.sql), so the schema made
    again at once takes a table of the same name (the local target's Iceberg table cache no longer answers that the
    dropped one exists), and the dropped tables' files are deleted."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"kept.sql": MODEL_SQL.format(config="materialized='table', file_format='iceberg'", version=1)}

    def _drop_schema(self, project) -> None:
        with project.adapter.connection_named("__test"):
            project.adapter.drop_schema(project.adapter.Relation.create(schema=project.test_schema))

    @LOCAL_FILES_ONLY
    def test_files_deleted(self, project):
        run_dbt(["run"])
        folder = _location(project, f"{project.test_schema}.kept")
        assert _files(folder), folder
        self._drop_schema(project)
        assert not _files(folder), folder

    def test_schema_made_again_at_once(self, project):
        run_dbt(["run"])
        self._drop_schema(project)
        run_dbt(["run"])
        assert _rows(project, f"{project.test_schema}.kept") == [(1, "v1")]


# A view whose SQL is over 32,700 characters: 700 columns of about 50 characters each.
LONG_VIEW_SQL = "select " + ",\n       ".join(f"'{'x' * 30}' as column_with_a_long_name_{i:04d}" for i in range(700))


class TestLongView:
    """A view's SQL longer than the local target's embedded metastore stores (32,700 characters) is refused there in
    one sentence that says what to do (create_view_as.sql), not with Derby's truncation error; the cluster's
    PostgreSQL metastore stores it."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"long_view.sql": LONG_VIEW_SQL}

    def test_long_view(self, project):
        assert len(LONG_VIEW_SQL) > 32_700
        if SUITE_TARGET == "local":
            _, output = run_dbt_and_capture(["run"], expect_pass=False)
            assert f"its SQL is {len(LONG_VIEW_SQL)} characters" in output, output[-2000:]
            assert "materialize it as a table" in output and "truncation" not in output, output[-2000:]
        else:
            run_dbt(["run"])
            relation = f"{project.test_schema}.long_view"
            assert _rows(project, f"(select column_with_a_long_name_0699 from {relation})") == [("x" * 30,)]


SNAPSHOT_SOURCE_SQL = """
select 1 as region, 10 as shop, 'a' as name, cast('2024-01-01 00:00:00' as timestamp) as updated_at
union all select 1, 11, 'b', cast('2024-01-01 00:00:00' as timestamp)
union all select 2, 10, 'c', cast('2024-01-01 00:00:00' as timestamp)
"""
SNAPSHOT_SOURCE_CHANGED_SQL = """
select 1 as region, 10 as shop, 'a2' as name, cast('2024-01-02 00:00:00' as timestamp) as updated_at
union all select 1, 11, 'b', cast('2024-01-01 00:00:00' as timestamp)
union all select 2, 10, 'c', cast('2024-01-01 00:00:00' as timestamp)
union all select 2, 11, 'd', cast('2024-01-02 00:00:00' as timestamp)
"""
SNAPSHOT_YML = """
snapshots:
  - name: shops_history
    relation: ref('shops')
    config:
      unique_key: [region, shop]
      strategy: timestamp
      updated_at: updated_at
      file_format: iceberg
"""


class TestSnapshotListUniqueKey:
    """dbt-labs/dbt-adapters#2101: with a list unique_key, the snapshot keeps its own columns only (no
    dbt_unique_key_1..N) and its history is right after a change."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"shops.sql": "{{ config(materialized='table', file_format='iceberg') }}" + SNAPSHOT_SOURCE_SQL}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"shops_history.yml": SNAPSHOT_YML}

    def test_no_stray_columns(self, project):
        run_dbt(["run"])
        run_dbt(["snapshot"])
        write_file(
            "{{ config(materialized='table', file_format='iceberg') }}" + SNAPSHOT_SOURCE_CHANGED_SQL,
            project.project_root,
            "models",
            "shops.sql",
        )
        run_dbt(["run"])
        run_dbt(["snapshot"])
        relation = f"{project.test_schema}.shops_history"
        described = [row[0] for row in project.run_sql(f"describe table {relation}", fetch="all")]
        columns = described[: described.index("")] if "" in described else described
        assert columns == [
            "region", "shop", "name", "updated_at",
            "dbt_scd_id", "dbt_updated_at", "dbt_valid_from", "dbt_valid_to",
        ]  # fmt: skip
        history = project.run_sql(
            f"select region, shop, name, dbt_valid_to is null from {relation} order by region, shop, name", fetch="all"
        )
        assert [tuple(row) for row in history] == [
            (1, 10, "a", False),
            (1, 10, "a2", True),
            (1, 11, "b", True),
            (2, 10, "c", True),
            (2, 11, "d", True),
        ]


class TestShowSqlHeader(BaseShowSqlHeader):
    """The project's get_show_sql describes the query to find its timestamp columns (issue 41): with the model's
    sql_header in front, which here defines the CTE the query reads."""

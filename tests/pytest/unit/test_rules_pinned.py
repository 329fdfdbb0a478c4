"""Rules that both the SQL side (macros) and the Python side need, held together: each Python
constant or function against the macro that says the same in SQL, rendered with Jinja as dbt
renders it (only the macro's own helpers stubbed). docs/ARCHITECTURE.md names each rule's home."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import jinja2
import pytest

from python_hooks.commands.accounting import ACCOUNTING_PREFIX, ACCOUNTING_VARIABLE
from python_hooks.evolution.staging_views import FINGERPRINTS_VARIABLE, PROPERTY, UNCHANGED_VARIABLE
from python_hooks.evolution.types import compare_types
from python_hooks.landing import validation
from python_hooks.landing.files import HIDDEN_PREFIXES, RAW_SUFFIX, probe_name
from python_hooks.landing.pending import RAW_PATH_FILTER_SQL
from python_hooks.personal_data.subjects import SECRET_ENV, hash_sql
from python_hooks.project.meta import META_READY_VARIABLE, REGISTERS_EMPTY_VARIABLE, meta_schema
from python_hooks.project.producers import (
    DEBEZIUM_DECODED_TYPES,
    DEFAULT_TIMESTAMP_COLUMN,
    DMS_METADATA_COLUMNS,
    METADATA_COLUMNS,
)
from python_hooks.project.sql import sql_string
from python_hooks.project.warehouse import SINGLE_WRITER_VARIABLE

MACROS = Path(__file__).resolve().parents[3] / "macros" / "cdc"


def _macros(name: str, **context):
    """The macros of macros/cdc/<name>, callable from Python, with `context` for what they call of
    dbt's and other files'. The macros here return strings: `{{ return(x) }}` then renders as x."""
    environment = jinja2.Environment(extensions=["jinja2.ext.do"])
    template = environment.from_string((MACROS / name).read_text(encoding="utf-8"))
    return template.make_module({"return": lambda value: value, **context})


def _call(macro, *args) -> str:
    return str(macro(*args)).strip()


def test_the_meta_schema_is_named_alike():
    macros = _macros("meta.sql", target={"schema": "lake"})
    assert _call(macros.cdc_meta_schema) == meta_schema("lake") == "lake_cdc_meta"


def test_the_subject_hash_is_computed_alike():
    macros = _macros("erasure.sql", cdc_sql_string=_macros("landing.sql").cdc_sql_string)
    for subject, value_sql in [("customer", "`id`"), ("it's", "cast(x as string)")]:
        assert _call(macros.cdc_subject_hash_sql, subject, value_sql) == hash_sql(subject, value_sql)
    assert f"${{env:{SECRET_ENV}}}" in hash_sql("customer", "`id`")


def test_the_listing_probe_is_named_alike():
    executed: list[str] = []

    class Adapter:  # what cdc_execute calls: the probe's DDL is recorded, not run
        def execute(self, sql, **_):
            executed.append(sql)

    macros = _macros(
        "landing.sql",
        adapter=Adapter(),
        cdc_meta_relation=lambda identifier: identifier,
        local_md5=lambda text: hashlib.md5(text.encode()).hexdigest(),
    )
    for folder in ["/data/landing/dms/crm/customer", "s3a://bucket/landing/debezium/topics/x.y.z"]:
        assert _call(macros.cdc_landing_probe, "crm", "customer", folder) == probe_name("crm", "customer", folder + "/")
    assert any("binaryFile" in sql for sql in executed)


def test_the_staging_read_lists_files_as_python_does():
    """The staging view's catalog table reads what landing/files.py lists: every subfolder, Parquet
    files only (Spark itself leaves out hidden names, as HIDDEN_PREFIXES says), and is swapped in
    under one name per staging model and folder."""
    executed: list[str] = []

    class Adapter:
        def execute(self, sql, **_):
            executed.append(sql)

    landing = _macros("landing.sql")
    macros = _macros(
        "landing.sql",
        adapter=Adapter(),
        cdc_meta_relation=lambda identifier: identifier,
        cdc_sql_string=landing.cdc_sql_string,
        local_md5=lambda text: hashlib.md5(text.encode()).hexdigest(),
    )
    folder = "/data/landing/dms/crm/it's here"
    raw = _call(macros.cdc_landing_raw_table, "stg_crm__customer", folder)
    assert raw == f"raw__stg_crm__customer__{hashlib.md5(folder.encode()).hexdigest()[:8]}"
    create = next(sql for sql in executed if sql.startswith("create table"))
    assert "'recursiveFileLookup' 'true'" in create
    assert f"'pathGlobFilter' '*{RAW_SUFFIX}'" in create
    assert create.endswith("location " + sql_string(folder))
    assert executed[-1] == f"alter table {raw}__next rename to {raw}", "built beside the view's table, then swapped in"


def test_sql_strings_are_quoted_alike():
    macros = _macros("landing.sql")
    for text in ["plain", "it's", "back\\slash", "both \\' quote"]:
        assert _call(macros.cdc_sql_string, text) == sql_string(text)


def test_the_listing_rule_is_written_alike():
    macros = _macros("landing.sql")
    listing = _call(macros.cdc_landing_listing_sql, "probe", "/data/landing/dms/crm/customer")
    assert RAW_PATH_FILTER_SQL in " ".join(listing.split())
    hidden = re.search(r"regexp\(path, '/\[([^\]]+)\]", RAW_PATH_FILTER_SQL).group(1)
    assert set(hidden) == {prefix[0] for prefix in HIDDEN_PREFIXES}


@pytest.mark.parametrize(
    ("rule", "pattern"),
    [
        ("default timestamp column", r"or '(\w+)' -%\}"),
        ("metadata columns", r"set metadata_names = \['(\w+)', '(\w+)'"),
    ],
)
def test_dms_metadata_is_named_alike(rule, pattern):
    text = (MACROS / "staging_dms.sql").read_text(encoding="utf-8")
    found = re.search(pattern, text)
    assert found, f"macros/cdc/staging_dms.sql no longer says its {rule} as expected: update this test"
    expected = (DEFAULT_TIMESTAMP_COLUMN,) if rule == "default timestamp column" else DMS_METADATA_COLUMNS
    assert found.groups() == expected


def test_debezium_metadata_is_metadata_for_python_too():
    text = (MACROS / "staging_debezium.sql").read_text(encoding="utf-8")
    required = re.search(r"for required in \[('__[^\]]+)\]", text).group(1)
    names = {name.strip(" '") for name in required.split(",")}
    assert names and names <= METADATA_COLUMNS


def test_a_batch_of_one_plain_file_is_read_without_a_glob():
    """A glob lists the whole folder at every statement that resolves it; one file whose path holds
    no glob character is named as it is (the same file either way)."""
    landing = _macros("landing.sql")
    macros = _macros("landing.sql", cdc_glob_escape=landing.cdc_glob_escape, cdc_quote=landing.cdc_quote)
    folder = "/data/landing/dms/crm/customer"
    assert _call(macros.cdc_files_relation, folder, ["2024/01/20240102-000000000.parquet"]) == (
        f"parquet.`{folder}/2024/01/20240102-000000000.parquet`"
    )
    assert _call(macros.cdc_files_relation, folder, ["odd[1].parquet"]) == f"parquet.`{folder}/{{odd\\[1\\].parquet}}`"
    two = _call(macros.cdc_files_relation, folder, ["a.parquet", "b.parquet"])
    assert two == f"parquet.`{folder}/{{a.parquet,b.parquet}}`"


def test_debezium_named_types_are_decoded_alike():
    """Every Debezium type Python plans a decoded type for, staging decodes, and no other."""

    class Refused(Exception):
        pass

    class Exceptions:
        @staticmethod
        def raise_compiler_error(message):
            raise Refused(message)

    macros = _macros("staging_debezium.sql", exceptions=Exceptions())
    node = {"source_name": "shop", "name": "t"}
    rendered = {name: _call(macros.cdc_debezium_decode, "`c`", name, node) for name in DEBEZIUM_DECODED_TYPES}
    assert rendered == {
        "io.debezium.time.Date": "date_add(date'1970-01-01', `c`)",
        "io.debezium.time.MicroTimestamp": "timestamp_micros(`c`)",
        "io.debezium.time.Timestamp": "timestamp_millis(`c`)",
        "io.debezium.time.ZonedTimestamp": "cast(`c` as timestamp)",
    }
    assert set(DEBEZIUM_DECODED_TYPES.values()) == {"date", "timestamp"}
    with pytest.raises(Refused, match="io.debezium.time.MicroTime"):
        macros.cdc_debezium_decode("`c`", "io.debezium.time.MicroTime", node)


def test_a_snapshot_widens_a_column_as_the_hooks_promote_one():
    """macros/snapshot/widening.sql's `cdc_iceberg_widens` (which snapshot columns are altered) says
    what python_hooks/evolution/types.py's `compare_types` calls a promotion, for the types a snapshot
    column can have; any other change (date -> timestamp: dbt's own snapshot test) is not altered."""
    environment = jinja2.Environment(extensions=["jinja2.ext.do"])
    source = (MACROS.parent / "snapshot" / "widening.sql").read_text(encoding="utf-8")
    widens = environment.from_string(source).make_module({"return": lambda value: value}).cdc_iceberg_widens
    # (no tinyint or smallint: Iceberg stores them as int, so a snapshot column never has them)
    types = ["int", "bigint", "float", "double", "decimal(10,2)", "decimal(12,2)", "decimal(12,3)"]
    types += ["date", "timestamp", "string", "boolean", "DECIMAL(9, 2)", "INT"]
    for old in types:
        for new in types:
            promoted = compare_types(old, new).relation == "promote"
            assert (str(widens(old, new)).strip() == "True") is promoted, (old, new)


@pytest.mark.parametrize(
    ("macro", "handed"),
    [
        ("batch_log.sql", f"env_var('{ACCOUNTING_VARIABLE}', '') == 'run'"),
        ("batch_log.sql", f"log('{ACCOUNTING_PREFIX}'"),
        ("meta.sql", f"env_var('{META_READY_VARIABLE}', '') == '1'"),
        ("publish.sql", f"env_var('{SINGLE_WRITER_VARIABLE}', '')"),
        ("erasure.sql", f"env_var('{REGISTERS_EMPTY_VARIABLE}', '') == '1'"),
        ("landing.sql", f"env_var('{UNCHANGED_VARIABLE}', '[]')"),
        ("landing.sql", f"env_var('{FINGERPRINTS_VARIABLE}', '{{}}')"),
        ("../spark/create_view_as.sql", f"'{PROPERTY}' = "),
    ],
)
def test_what_make_run_hands_to_the_macros_is_named_alike(macro, handed):
    """commands/run.py hands these facts to its dbt build; a macro that read another name would never see them
    (the ledger and the batch log would then never be written by a `make run`)."""
    assert handed in (MACROS / macro).read_text(encoding="utf-8")


def test_the_batch_refuses_events_in_the_words_the_hooks_use():
    """python_hooks/landing/validation.py counts, before anything changes, the events that cdc_validation_checks
    counts in the batch (macros/cdc/validation.sql): the same checks in the same order and words, the same known
    operations, and the same Debezium operation letters as staging maps (staging_debezium.sql). That both count
    the same events: tests/pytest/test_validation_pinned.py."""

    class Returned(Exception):
        pass

    def give_back(value):  # a macro's text (cdc_unknown_op) rendered in place; the list of checks given back
        if isinstance(value, str):
            return value
        raise Returned(value)

    macros = (
        jinja2.Environment(extensions=["jinja2.ext.do"])
        .from_string((MACROS / "validation.sql").read_text(encoding="utf-8"))
        .make_module({"return": give_back, "cdc_quote": lambda name: f"`{name}`"})
    )
    with pytest.raises(Returned) as returned:
        macros.cdc_validation_checks(["customer_id", "region"])
    words = [what for _, what in returned.value.args[0]]
    expected = [validation.KEY_WORDS.format(key=key) for key in ("customer_id", "region")]
    expected += [validation.TIMESTAMP_WORDS, validation.SEQUENCE_WORDS, "unknown operation"]
    assert words == expected
    source = (MACROS / "validation.sql").read_text(encoding="utf-8")
    said_after = validation.OPERATION_WORDS.split("{operations}")[1]
    assert f'"{said_after.rstrip(")")}' in source.replace('"\n                    ~ "', "")
    known = re.search(r"_cdc_op not in \(([^)]*)\)", source).group(1)
    assert tuple(re.findall(r"'(\w)'", known)) == validation.KNOWN_OPERATIONS
    staging = (MACROS / "staging_debezium.sql").read_text(encoding="utf-8")
    letters = dict(re.findall(r"when '(\w)' then '(\w)'", staging))
    assert letters == validation.DEBEZIUM_OPERATIONS

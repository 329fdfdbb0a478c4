"""The text add-source writes: the source entry with every setting the staging macros and the hooks
read, the models ymls with the contract's doc blocks and tests, and the two one-line models."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Sequence

import yaml

from python_hooks.project.producers import DEFAULT_TIMESTAMP_COLUMN
from python_hooks.project.sql import quote_ident
from python_hooks.sources.model import PLAIN_IDENTIFIER, AddSourceError, Column, RawTable, Request

# libyaml's parser when PyYAML has it (the wheels do): the same documents, about ten times faster, which a
# project of hundreds of tables needs (add-source reads every models yml of the project for each table).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str):
    """yaml.safe_load, with libyaml's parser when there is one."""
    return yaml.load(text, Loader=SAFE_LOADER)


def compose_yaml(text: str) -> yaml.Node | None:
    """yaml.compose (the node tree, with line and column marks), safe, with libyaml's parser when there is one."""
    return yaml.compose(text, Loader=SAFE_LOADER)


FRESHNESS = [
    "freshness:",
    "  warn_after: {count: 12, period: hour}",
    "  error_after: {count: 24, period: hour}",
]


def yaml_str(value: str) -> str:
    """`value` as a YAML scalar that reads back as the same string: plain when it can be."""
    candidates = [json.dumps(value, ensure_ascii=False), json.dumps(value)]
    if re.match(r"^[A-Za-z_][A-Za-z0-9_ ().,]*$", value) and not value.endswith(" "):
        candidates.insert(0, value)
    for candidate in candidates:
        try:
            if load_yaml(f"k: {candidate}") == {"k": value}:
                return candidate
        except yaml.YAMLError:
            continue
    raise AddSourceError(f"{value!r} cannot be written in YAML")


def _needs_quoting(name: str) -> bool:
    """A column name Spark SQL cannot use bare (dbt's tests then quote it: `quote: true`)."""
    return not PLAIN_IDENTIFIER.match(name)


def _sql_expression(name: str) -> str:
    return name if not _needs_quoting(name) else quote_ident(name)


def _jinja_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _folded(key: str, text: str) -> list[str]:
    return [f"{key}: >", *textwrap.wrap(text, width=96, initial_indent="  ", subsequent_indent="  ")]


def indent_lines(lines: Sequence[str], spaces: int) -> list[str]:
    return [(" " * spaces + line) if line else "" for line in lines]


def _item(lines: Sequence[str]) -> list[str]:
    """A mapping's lines as a block-sequence item: `- ` before the first, two spaces before the rest."""
    return ["- " + lines[0], *indent_lines(lines[1:], 2)]


def source_settings(request: Request, raw: RawTable) -> list[str]:
    """The source-level settings (a mapping's lines, without name and description)."""
    lines = [
        "# A source is a folder of Parquet files, read by path: `parquet.`<folder>``.",
        "schema: parquet",
        "quoting:",
        "  identifier: true",
        "meta:",
    ]
    if request.producer == "dms":
        ts = request.timestamp_column or DEFAULT_TIMESTAMP_COLUMN
        lines += [
            "  cdc_producer: dms",
            "  # DMS endpoint setting TimestampColumnName: the commit time of each change.",
            f"  dms_timestamp_column: {yaml_str(ts)}",
            "config:",
            "  # Freshness = the newest commit timestamp in the raw files (`dbt source freshness`): it goes",
            "  # stale when the DMS task stops delivering, or when the source has had no change for that long.",
            f"  loaded_at_field: {yaml_str(_sql_expression(ts))}",
        ]
    else:
        ts = "__source_ts_ms" if raw.shape == "flattened" else "source.ts_ms"
        lines += [
            "  cdc_producer: debezium",
            f"  debezium_shape: {raw.shape}",
            "config:",
            f"  # Freshness = the newest commit timestamp in the raw files (`{ts}`, epoch millis): it goes",
            "  # stale when the connector or the S3 sink stops, or when the database has had no change for that long.",
            f"  loaded_at_field: timestamp_millis({ts})",
        ]
    return lines + indent_lines(FRESHNESS, 2)


def source_description(request: Request, raw: RawTable) -> str:
    if request.producer == "dms":
        schema = request.raw_names[0]
        return (
            f"TODO: describe the source system. Replicated by AWS DMS to the raw zone as Parquet (S3 target,"
            f" `DataFormat=parquet`, `TimestampColumnName={request.timestamp_column}`): one folder per table under"
            f" `$CDC_LANDING_ROOT/dms/{schema}/`, full-load `LOAD*.parquet`, then timestamp-named CDC files."
        )
    server = request.raw_names[0].split(".")[0]
    shape = (
        "Flattened by `ExtractNewRecordState` (`add.fields=op,source.ts_ms`, `delete.handling.mode=rewrite`)."
        if raw.shape == "flattened"
        else "With the full change-event envelope (`before`, `after`, `op`, `ts_ms`, `source`, `transaction`)."
    )
    return (
        f"TODO: describe the source system. Streamed by Debezium (server name `{server}`) to Kafka and written"
        f" to the raw zone as Parquet by the Confluent S3 sink, one folder per topic under"
        f" `$CDC_LANDING_ROOT/debezium/topics/`. {shape}"
    )


def _column_description(column: Column, keys: Sequence[str]) -> str:
    role = " (key column)" if column.staging_name in keys else ""
    unknown = " Only nulls so far: add its data_type." if column.data_type is None else ""
    return f"TODO: describe {column.name}{role}.{unknown}"


def table_entry(request: Request, raw: RawTable, keys: Sequence[str], shape: str | None = None) -> list[str]:
    """One table of a source, as a block-sequence item. `shape`: the table's own Debezium shape (its
    source has the other); the Debezium named types its footers declare go to `meta.debezium_types`."""
    identifier = "{{ env_var('CDC_LANDING_ROOT') }}/" + request.landing_path
    what = "DMS full load + CDC" if request.producer == "dms" else f"Debezium topic {request.raw_names[0]}"
    lines = [
        f"name: {request.table_name}",
        f"identifier: {yaml_str(identifier)}",
    ]
    named = {column.name: column.debezium_type for column in raw.columns if column.debezium_type}
    connector = raw.connector.connector if raw.connector else None
    unchanged = connector.unchanged_value if connector else None
    if shape or named or unchanged:
        lines.append("meta:")
        if shape:
            lines.append(f"  debezium_shape: {shape}")
        if unchanged:
            lines.append(f"  # {connector.label}: a value it did not send arrives as this placeholder; the row")
            lines.append("  # keeps the value it had (macros/cdc/unchanged.sql)")
            lines.append(f"  cdc_unchanged_value: {yaml_str(unchanged)}")
        if named:
            lines.append("  # Debezium's named types, decoded by staging (macros/cdc/staging_debezium.sql)")
            pairs = ", ".join(f"{yaml_str(name)}: {value}" for name, value in named.items())
            lines.append(f"  debezium_types: {{{pairs}}}")
    lines += [
        f"description: {yaml_str(f'TODO: describe {request.label}. One row per change event ({what}).')}",
        "columns:",
    ]
    for column in raw.columns:
        entry = [f"name: {yaml_str(column.name)}"]
        if _needs_quoting(column.name):
            entry.append("quote: true")
        if column.data_type is not None:
            entry.append(f"data_type: {yaml_str(column.data_type)}")
        entry.append(f"description: {yaml_str(_column_description(column, keys))}")
        lines += indent_lines(_item(entry), 2)
    return _item(lines)


def sources_file(request: Request, raw: RawTable, keys: Sequence[str]) -> str:
    entry = [
        f"name: {request.source_name}",
        *_folded("description", source_description(request, raw)),
        *source_settings(request, raw),
        "tables:",
        *indent_lines(table_entry(request, raw, keys), 2),
    ]
    return "\n".join(["version: 2", "", "sources:", *indent_lines(_item(entry), 2)]) + "\n"


def _cdc_column(name: str, tests: list | None = None) -> dict:
    column: dict = {"name": name, "description": f'{{{{ doc("{name[1:]}") }}}}'}
    if tests:
        column["data_tests"] = tests
    return column


def _accepted(values: list[str]) -> dict:
    return {"accepted_values": {"arguments": {"values": values}}}


def _business_column(column: Column, keys: Sequence[str], tests: list | None = None) -> dict:
    entry: dict = {"name": column.staging_name}
    if _needs_quoting(column.staging_name):
        entry["quote"] = True
    entry["description"] = _column_description(column, keys)
    if tests:
        entry["data_tests"] = tests
    return entry


def staging_model(request: Request, raw: RawTable, keys: Sequence[str]) -> dict:
    return {
        "name": request.staging_model,
        "description": f'{{{{ doc("staging_model") }}}}\n\nGrain: one change event of `{request.label}`.',
        "columns": [
            *(_business_column(c, keys) for c in raw.columns),
            _cdc_column("_cdc_op", ["not_null", _accepted(["I", "U", "D", "T"])]),
            _cdc_column("_cdc_ts", ["not_null"]),
            _cdc_column(
                "_cdc_seq", ["not_null", {"expression_is_true": {"arguments": {"expression": "rlike '^[0-9]{35}$'"}}}]
            ),
            _cdc_column("_cdc_source_file", ["not_null"]),
        ],
    }


def current_model(request: Request, raw: RawTable, keys: Sequence[str]) -> dict:
    grain = ", ".join(f"`{key}`" for key in keys)
    model: dict = {
        "name": request.current_model,
        "description": f'{{{{ doc("current_state_model") }}}}\n\nGrain: one live `{request.label}` row per {grain}.',
    }
    if len(keys) > 1:
        arguments: dict = {"combination_of_columns": list(keys)}
        if any(_needs_quoting(key) for key in keys):
            arguments["quote_columns"] = True
        model["data_tests"] = [{"unique_combination_of_columns": {"arguments": arguments}}]
    key_tests = ["unique", "not_null"] if len(keys) == 1 else ["not_null"]
    model["columns"] = [
        *(_business_column(c, keys, key_tests if c.staging_name in keys else None) for c in raw.columns),
        _cdc_column("_cdc_op", ["not_null", _accepted(["I", "U"])]),
        _cdc_column("_cdc_ts", ["not_null"]),
        _cdc_column("_cdc_seq", ["not_null"]),
        _cdc_column("_cdc_source_file", ["not_null"]),
        _cdc_column("_cdc_row_hash"),
        _cdc_column("_cdc_applied_at", ["not_null"]),
    ]
    return model


def dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def models_file(model: dict) -> str:
    return "version: 2\n\n" + dump({"models": [model]})


def staging_sql(request: Request) -> str:
    macro = "stg_dms_changes" if request.producer == "dms" else "stg_debezium_changes"
    return f"{{{{ {macro}('{request.source_name}', '{request.table_name}') }}}}\n"


def current_sql(request: Request, keys: Sequence[str]) -> str:
    unique_key = ", ".join(_jinja_str(key) for key in keys)
    return f"{{{{ cdc_current_state('{request.staging_model}', unique_key=[{unique_key}]) }}}}\n"

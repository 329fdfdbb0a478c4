"""`python -m python_hooks add-source`: add a source table to the project from its raw files' footers.

    python -m python_hooks add-source dms <schema> <table> --key col[,col]
    python -m python_hooks add-source debezium <server.database.table> --key col[,col]

Reads the Parquet footers (never the data) of the files already in the table's landing folder
(`$CDC_LANDING_ROOT/dms/<schema>/<table>/`, date subfolders included, or
`$CDC_LANDING_ROOT/debezium/topics/<topic>/partition=*/`), and writes what docs/sources.md ("Pointing it at real
DMS output") lists: the source entry with every setting the staging macros and the hooks read, its
business columns and their types; the two one-line models; a models yml for each with the contract's
doc blocks and tests (not_null on each key column, unique or unique_combination_of_columns on the key).

An existing source of the same name gets the table appended to its entry, in the file that declares it
(dbt accepts a source name in two files, but each file's source-level settings then apply only to its
own tables: a second entry would have to repeat, and keep in step, the producer, the timestamp column
and the freshness). The same goes for `_<source>__models.yml` in the two model folders. Appending keeps
every existing line as it is; the result is parsed and compared before anything is written.

Everything is checked before the first write: an existing file, model or source table, a key column
missing from a raw file, a folder without Parquet file, a producer that differs from the existing
source's. A refusal is one line (`AddSourceError`) and writes nothing.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from python_hooks.project.producers import DEFAULT_TIMESTAMP_COLUMN
from python_hooks.project.storage import Location, StorageError
from python_hooks.sources.model import (
    DBT_NAME,
    KAFKA_TOPIC,
    PRODUCERS,
    AddSourceError,
    FileWrite,
    Plan,
    RawTable,
    Request,
)
from python_hooks.sources.raw_table import read_raw_table
from python_hooks.sources.yml import (
    compose_yaml,
    current_model,
    current_sql,
    dump,
    indent_lines,
    load_yaml,
    models_file,
    sources_file,
    staging_model,
    staging_sql,
    table_entry,
)

LANDING_ROOT_JINJA = re.compile(r"\{\{\s*env_var\(\s*['\"]CDC_LANDING_ROOT['\"]\s*\)\s*\}\}")


def parse_keys(values: Sequence[str]) -> tuple[str, ...]:
    """`--key a,b` (repeatable) -> ('a', 'b')."""
    keys = [part.strip() for value in values for part in value.split(",")]
    if not keys or any(not key for key in keys):
        raise AddSourceError(f"--key {','.join(values)!r}: give the key columns as col[,col], none empty")
    lowered = [key.lower() for key in keys]
    duplicates = sorted({key for key in lowered if lowered.count(key) > 1})
    if duplicates:
        raise AddSourceError(f"--key names {', '.join(map(repr, duplicates))} twice")
    return tuple(keys)


def _check_folder_name(kind: str, name: str) -> None:
    if not name or name in (".", "..") or any(c in name for c in "/\\{}") or any(ord(c) < 32 for c in name):
        raise AddSourceError(
            f"{kind} {name!r}: not a landing folder name this command writes (no /, \\, braces or control characters)"
        )


def build_request(
    producer: str,
    names: Sequence[str],
    keys: Sequence[str],
    source_name: str | None = None,
    table_name: str | None = None,
    timestamp_column: str | None = None,
) -> Request:
    """The request, its names checked; dbt names default to the raw names in lower case."""
    if producer not in PRODUCERS:
        raise AddSourceError(f"unknown producer {producer!r}: dms or debezium")
    if producer == "dms":
        if len(names) != 2:
            raise AddSourceError(f"add-source dms takes <schema> <table>, not {' '.join(names) or 'nothing'}")
        _check_folder_name("DMS schema", names[0])
        _check_folder_name("DMS table", names[1])
        default_source, default_table = names[0].lower(), names[1].lower()
    else:
        if len(names) != 1:
            raise AddSourceError(f"add-source debezium takes one topic (server.database.table), not {' '.join(names)}")
        topic = names[0]
        if not KAFKA_TOPIC.match(topic) or topic in (".", ".."):
            raise AddSourceError(f"topic {topic!r}: a Kafka topic name has only letters, digits, '.', '_' and '-'")
        parts = topic.split(".")
        if len(parts) < 3 and not source_name:
            raise AddSourceError(
                f"topic {topic!r} is not server.database.table: name the dbt source with --source-name"
            )
        default_source = parts[-2].lower() if len(parts) >= 2 else ""
        default_table = parts[-1].lower()
        if timestamp_column:
            raise AddSourceError("--timestamp-column is for DMS (Debezium events carry source.ts_ms)")
    source, table = source_name or default_source, table_name or default_table
    for option, value in (("--source-name", source), ("--table-name", table)):
        if not DBT_NAME.match(value):
            raise AddSourceError(
                f"{value!r} is not a dbt name (lower-case letters, digits, _; not starting with a digit):"
                f" choose one with {option}"
            )
    return Request(producer, tuple(names), source, table, parse_keys(keys), timestamp_column)


def _yml_files(project_dir: Path) -> list[Path]:
    try:
        project = load_yaml((project_dir / "dbt_project.yml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise AddSourceError(f"{project_dir} is not a dbt project: {error}".splitlines()[0]) from None
    found = []
    for folder in project.get("model-paths") or ["models"]:
        found += sorted(p for p in (project_dir / folder).rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file())
    return found


def _load(path: Path) -> dict:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise AddSourceError(f"{path} does not parse as YAML: {str(error).splitlines()[0]}") from None
    return data if isinstance(data, dict) else {}


def _mapping_value(node, key: str):
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def append_item(
    path: Path, text: str, locate: Callable[[yaml.Node], yaml.Node | None], item: Sequence[str], blank_line: bool
) -> str:
    """`text` with `item` (block-sequence item lines at indent 0) appended to the block list that
    `locate` finds, every existing line kept as it is."""
    sequence = locate(compose_yaml(text))
    if not isinstance(sequence, yaml.SequenceNode) or sequence.flow_style or not sequence.value:
        raise AddSourceError(f"cannot append to {path}: the list is not a block list with an entry; add it by hand")
    lines = text.splitlines(keepends=True)
    first, last = sequence.value[0], sequence.value[-1]
    dash = lines[first.start_mark.line].rfind("-", 0, first.start_mark.column + 1)
    if dash < 0:
        raise AddSourceError(f"cannot append to {path}: unusual layout of its list; add the entry by hand")
    end = last.end_mark
    at = end.line if end.column == 0 else end.line + 1
    at = min(at, len(lines))
    if at == len(lines) and lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    new = ([""] if blank_line else []) + indent_lines(item, dash)
    return "".join(lines[:at] + [line + "\n" for line in new] + lines[at:])


@dataclass(frozen=True)
class _Existing:
    sources: list[tuple[Path, dict]]  # (file, source entry) of every source in the project
    models: dict[str, Path]  # model name -> the yml that describes it


def _existing(project_dir: Path) -> _Existing:
    sources, models = [], {}
    for path in _yml_files(project_dir):
        data = _load(path)
        for entry in data.get("sources") or []:
            if isinstance(entry, dict):
                sources.append((path, entry))
        for entry in data.get("models") or []:
            if isinstance(entry, dict) and "name" in entry:
                models.setdefault(str(entry["name"]), path)
    return _Existing(sources, models)


def check_source_fits(path: Path, entry: dict, request: Request, raw: RawTable | None, project_dir: Path) -> None:
    """Refuses a table whose producer or DMS timestamp column differs from the existing source's: its
    source-level settings would be wrong for it. (A Debezium table of another shape gets its own
    `meta.debezium_shape`: `own_shape`.)"""
    meta = entry.get("meta") or {}
    producer = meta.get("cdc_producer", "dms")
    rel = path.relative_to(project_dir)
    if producer != request.producer:
        raise AddSourceError(
            f"source {request.source_name!r} ({rel}) is a {producer} source, this table is {request.producer}:"
            " choose another name with --source-name"
        )
    if request.producer == "dms":
        theirs = meta.get("dms_timestamp_column", DEFAULT_TIMESTAMP_COLUMN)
        if theirs.lower() != (request.timestamp_column or "").lower():
            raise AddSourceError(
                f"source {request.source_name!r} ({rel}) reads the timestamp column {theirs!r}, not"
                f" {request.timestamp_column!r}: pass --timestamp-column {theirs}, or another --source-name"
            )


def own_shape(entry: dict, raw: RawTable) -> str | None:
    """The table's Debezium shape when it is not its existing source's (then the table's meta says it)."""
    source_shape = (entry.get("meta") or {}).get("debezium_shape") or "flattened"
    return raw.shape if raw.producer == "debezium" and raw.shape != source_shape else None


def _source_append(
    path: Path, entry: dict, request: Request, raw: RawTable, keys: Sequence[str], project_dir: Path
) -> FileWrite:
    """The table appended to the existing source `entry` of `path`, if its settings fit the table."""
    check_source_fits(path, entry, request, raw, project_dir)
    shape = own_shape(entry, raw)
    text = path.read_text(encoding="utf-8")

    def locate(root):
        for node in getattr(_mapping_value(root, "sources"), "value", []):
            name = _mapping_value(node, "name")
            if isinstance(name, yaml.ScalarNode) and name.value == request.source_name:
                return _mapping_value(node, "tables")
        return None

    new_text = append_item(path, text, locate, table_entry(request, raw, keys, shape), blank_line=True)
    expected = _load(path)
    for source in expected["sources"]:
        if isinstance(source, dict) and source.get("name") == request.source_name:
            source["tables"].append(load_yaml(_dump_lines(table_entry(request, raw, keys, shape)))[0])
    if load_yaml(new_text) != expected:
        raise AddSourceError(f"cannot append to {path} safely (unusual layout): add the table entry by hand")
    return FileWrite(path, new_text, "append")


def _dump_lines(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def _models_write(path: Path, model: dict) -> FileWrite:
    if not path.exists():
        return FileWrite(path, models_file(model), "create")
    text = path.read_text(encoding="utf-8")
    item = dump([model]).splitlines()
    new_text = append_item(path, text, lambda root: _mapping_value(root, "models"), item, blank_line=False)
    expected = _load(path)
    expected["models"].append(model)
    if load_yaml(new_text) != expected:
        raise AddSourceError(f"cannot append to {path} safely (unusual layout): add the model by hand")
    return FileWrite(path, new_text, "append")


def _landing_key(identifier: str) -> str:
    """An identifier with its landing-root expression spelled one way, and no trailing slash."""
    return LANDING_ROOT_JINJA.sub("$CDC_LANDING_ROOT", identifier).rstrip("/")


def plan(project_dir: Path, request: Request, raw: RawTable) -> Plan:
    """Every file to create or append to, each checked: nothing is written here."""
    project_dir = Path(project_dir)
    names = {c.staging_name: c for c in raw.columns}
    keys = tuple(names[key.lower()].staging_name for key in request.keys)
    existing = _existing(project_dir)
    landing = "{{ env_var('CDC_LANDING_ROOT') }}/" + request.landing_path
    for path, entry in existing.sources:
        for table in entry.get("tables") or []:
            if not isinstance(table, dict):
                continue
            rel = path.relative_to(project_dir)
            if entry.get("name") == request.source_name and str(table.get("name", "")).lower() == request.table_name:
                raise AddSourceError(f"source {request.label} already exists in {rel}")
            if _landing_key(str(table.get("identifier", ""))) == _landing_key(landing):
                raise AddSourceError(
                    f"the landing folder {request.landing_path} is already read by source"
                    f" {entry.get('name')}.{table.get('name')} ({rel})"
                )
    for model in (request.staging_model, request.current_model):
        if model in existing.models:
            raise AddSourceError(
                f"model {model} is already described in {existing.models[model].relative_to(project_dir)}"
            )
        for suffix in (".sql", ".py"):
            for found in (project_dir / "models").rglob(model + suffix):
                raise AddSourceError(f"model {model} already exists: {found}")

    staging_dir = project_dir / "models" / "staging" / request.source_name
    current_dir = project_dir / "models" / "current_state" / request.source_name
    writes: list[FileWrite] = []
    declared = [(path, entry) for path, entry in existing.sources if entry.get("name") == request.source_name]
    if len(declared) > 1:
        files = ", ".join(sorted({str(path.relative_to(project_dir)) for path, _ in declared}))
        raise AddSourceError(
            f"source {request.source_name!r} is declared in several files ({files}): add the table by hand"
        )
    if declared:
        writes.append(_source_append(*declared[0], request, raw, keys, project_dir))
    else:
        writes.append(
            FileWrite(staging_dir / f"_{request.source_name}__sources.yml", sources_file(request, raw, keys), "create")
        )
    writes += [
        FileWrite(staging_dir / f"{request.staging_model}.sql", staging_sql(request), "create"),
        _models_write(staging_dir / f"_{request.source_name}__models.yml", staging_model(request, raw, keys)),
        FileWrite(current_dir / f"{request.current_model}.sql", current_sql(request, keys), "create"),
        _models_write(current_dir / f"_{request.source_name}__models.yml", current_model(request, raw, keys)),
    ]
    for write in writes:
        if write.action == "create" and write.path.exists():
            raise AddSourceError(f"{write.path} already exists: not overwritten, nothing written")
    return Plan(request, raw, keys, tuple(writes))


def apply(plan_: Plan) -> None:
    """Write the plan: new files first, then the appends (each file replaced in one rename)."""
    for write in sorted(plan_.writes, key=lambda w: w.action != "create"):
        write.path.parent.mkdir(parents=True, exist_ok=True)
        if write.action == "create":
            with write.path.open("x", encoding="utf-8") as handle:
                handle.write(write.text)
        else:
            tmp = write.path.with_name(f".{write.path.name}.add-source")
            tmp.write_text(write.text, encoding="utf-8")
            os.replace(tmp, write.path)


def add_source(
    project_dir: Path,
    landing_root: str,
    producer: str,
    names: Sequence[str],
    keys: Sequence[str],
    source_name: str | None = None,
    table_name: str | None = None,
    timestamp_column: str | None = None,
    write: bool = True,
) -> Plan:
    """The whole command: check, read the footers, plan, write (unless `write` is false)."""
    project_dir = Path(project_dir)
    if not (project_dir / "dbt_project.yml").is_file():
        raise AddSourceError(f"{project_dir} has no dbt_project.yml: pass the project with --project-dir")
    request = build_request(producer, names, keys, source_name, table_name, timestamp_column)
    try:
        root = Location.parse(landing_root)
    except StorageError as error:
        raise AddSourceError(f"CDC_LANDING_ROOT: {error}") from None
    if not root.reachable:
        raise AddSourceError(
            f"CDC_LANDING_ROOT={landing_root}: add-source reads footers on this machine or on S3 (s3a://) only;"
            " point it at a copy of a few of the table's files for this command"
        )
    declared = [
        (path, entry) for path, entry in _existing(project_dir).sources if entry.get("name") == request.source_name
    ]
    if producer == "dms" and request.timestamp_column is None:
        # The existing source's column (its meta wins in staging), else DMS's usual name.
        meta = (declared[0][1].get("meta") or {}) if declared else {}
        request = dataclasses.replace(
            request, timestamp_column=str(meta.get("dms_timestamp_column") or DEFAULT_TIMESTAMP_COLUMN)
        )
    for path, entry in declared:
        check_source_fits(path, entry, request, None, project_dir)
    folder = root.join(request.landing_path)
    raw = read_raw_table(producer, folder, request.keys, request.timestamp_column, request.label)
    result = plan(project_dir, request, raw)
    if write:
        apply(result)
    return result


TRUNCATES_NOT_SEEN = (
    "truncates not seen: ExtractNewRecordState drops Debezium's truncate events, so after a TRUNCATE at the"
    " source this table keeps rows the source no longer has; for a table that is ever truncated write its"
    " topic with the full envelope (no ExtractNewRecordState on it), which carries them, and add it again"
)


def producer_lines(raw: RawTable) -> list[str]:
    """What add-source inferred about a Debezium producer and why, and what a flattened topic cannot see."""
    if raw.producer != "debezium" or raw.connector is None:
        return []
    inference = raw.connector
    if inference.connector is None:
        lines = [
            f"connector: not recognised ({inference.reason}); if it is PostgreSQL's with TOASTed columns under"
            " REPLICA IDENTITY DEFAULT (or Oracle's with LOBs), add `cdc_unchanged_value: __debezium_unavailable_value`"
            " to the table's meta"
        ]
    else:
        wrote = "wrote " if inference.connector.unchanged_value else ""
        lines = [f"connector: {inference.connector.label} ({inference.reason}); {wrote}{inference.connector.setting}"]
    if raw.shape == "flattened":
        lines.append(TRUNCATES_NOT_SEEN)
    return lines


def summary(plan_: Plan, project_dir: Path, landing_root: str, target: str, default_project: Path) -> list[str]:
    """What the command prints: what it read, what it wrote, what to run next."""
    request, raw = plan_.request, plan_.raw
    project_dir = Path(project_dir)
    shape = f" ({raw.shape})" if raw.shape else ""
    lines = [
        f"read the footers of {len(raw.files)} raw file(s) of {request.producer}{shape} table {request.label} in"
        f" {raw.folder} (CDC_LANDING_ROOT={landing_root}, target {target})",
        "columns: "
        + ", ".join(f"{c.staging_name} {c.data_type or '(only nulls so far)'}" for c in raw.columns)
        + f"; key: {', '.join(plan_.keys)}",
    ]
    lines += producer_lines(raw)
    for write in plan_.writes:
        verb = "created " if write.action == "create" else "appended"
        lines.append(f"{verb} {write.path.relative_to(project_dir)}")
    same = project_dir.resolve() == Path(default_project).resolve()
    project = "" if same else f" --project-dir {project_dir}"
    lines += [
        "next: replace the TODO descriptions, then build and test the new models:",
        "  make run" if same else f"  python -m python_hooks run{project}",
        f"  dbt test --select {request.staging_model}+{project}",
    ]
    return lines

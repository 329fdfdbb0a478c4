"""The staging views a run need not create again.

A staging view is a query over every raw file of its folder; its SQL depends on the union schema of
those files (which columns, their types), on the groups of files Spark must read apart
(cdc_raw_file_groups), on the personal-data registers, on its source's yml and on the project's own
code, never on which files there are: a view over the folder reads each new file by itself. Creating it again costs a
merge of every file's footer (the raw catalog table made again, then Spark's analysis of the view), so with
months of files a run would pay for all of them at every batch.

So `make run` fingerprints what the view's SQL is made of, from what the schema-evolution hook already
knows (the footer cache's union schema, the file groups), and hands each fingerprint to the build
(CDC_STAGING_FINGERPRINTS): a view it builds keeps its fingerprint among its own properties (`cdc_fingerprint`,
macros/spark/create_view_as.sql), written in the same statement as its SQL. A view whose listed fingerprint (the
schema's one `show table extended`, which the hooks read anyway) equals the run's is left as it is
(CDC_STAGING_UNCHANGED, macros/spark/view.sql): its SQL is not rendered, no footer is read. Its data tests still
run. Anything else builds it as before: a plain `dbt run` (which writes no fingerprint), `--full-refresh`, a changed
model, macro, schema, file group or register.

The same on both targets: the fingerprint lives with the view, not on the run's machine, so on the cluster two
runs at once each find the view as the other left it (a view with the run's fingerprint is what the run would
build; any other is built again, as before).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

UNCHANGED_VARIABLE = "CDC_STAGING_UNCHANGED"  # read by macros/cdc/landing.sql: cdc_staging_view_unchanged
FINGERPRINTS_VARIABLE = "CDC_STAGING_FINGERPRINTS"  # read by macros/cdc/landing.sql: cdc_staging_view_fingerprint
PROPERTY = "cdc_fingerprint"  # the view's property that holds it (macros/spark/create_view_as.sql)


def project_code(manifest) -> str:
    """The SQL of every macro of the project and of the dbt version: a change in any of them may
    change how staging SQL is written, so it makes every view be built again once."""
    from dbt.version import __version__ as dbt_version

    root = getattr(getattr(manifest, "metadata", None), "project_name", None)
    digest = hashlib.sha256(dbt_version.encode())
    for unique_id in sorted(manifest.macros):
        macro = manifest.macros[unique_id]
        if root is None or macro.package_name == root:
            digest.update(unique_id.encode())
            digest.update(macro.macro_sql.encode())
    return digest.hexdigest()


def source_text(source) -> str:
    """What staging reads of its source's yml: the folder, the meta (producer settings, subjects,
    personal-data columns, the table's and the source's) and the declared columns."""
    columns = {name: [column.data_type, column.meta] for name, column in (source.columns or {}).items()}
    return json.dumps(
        [source.unique_id, source.identifier, source.meta, source.source_meta, columns], sort_keys=True, default=str
    )


def fingerprint(node, inputs: str, code: str, registers: str, source: str = "") -> str:
    """What a staging view's SQL is made of: the model (its code, config and relation), its source's
    yml (`source_text`), the raw files' union schema and file groups (`inputs`), the project's macros
    and the registers."""
    config = node.config.to_dict() if hasattr(node.config, "to_dict") else dict(node.config)
    parts = [
        node.unique_id,
        node.relation_name or "",
        node.raw_code,
        json.dumps(config, sort_keys=True, default=str),
        source,
        inputs,
        code,
        registers,
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def unchanged(found: Mapping[str, tuple[str, str, str]], stamped: Mapping[tuple[str, str], str]) -> set[str]:
    """The staging models (name -> (schema, identifier, fingerprint), `fingerprints`) whose view exists with
    the same fingerprint among its properties (`stamped`: (schema, identifier) lower case -> the listed
    `cdc_fingerprint`)."""
    return {
        name
        for name, (schema, identifier, print_) in found.items()
        if stamped.get((schema.lower(), identifier.lower())) == print_
    }


def registers_state(warehouse, registers: Iterable[str]) -> str:
    """The current snapshot of each personal-data register: an erasure or a rectification may
    change the SQL of the views of the sources that declare subjects (macros/cdc/erasure.sql)."""
    snapshots = warehouse.meta_snapshots()
    states = [str(snapshots[name]) for name in registers if name in snapshots]
    return json.dumps(states) if states else ""


def fingerprints(manifest, staging_models: Iterable[str], inputs: Mapping[str, str], registers: str) -> dict:
    """staging model -> (schema, identifier, fingerprint), for the view models among `staging_models`
    whose inputs the schema-evolution hook gave (it skips tables with nothing new or refused)."""
    nodes = {n.name: n for n in manifest.nodes.values() if n.resource_type == "model"}
    code = None
    found = {}
    for name in staging_models:
        node = nodes.get(name)
        if node is None or name not in inputs or node.config.get("materialized") != "view":
            continue
        code = code or project_code(manifest)
        sources = [manifest.sources[s] for s in node.depends_on.nodes if s in manifest.sources]
        source = "".join(source_text(s) for s in sources)
        found[name] = (node.schema, node.alias or node.name, fingerprint(node, inputs[name], code, registers, source))
    return found

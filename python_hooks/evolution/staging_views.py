"""The staging views a run need not create again.

A staging view is a query over every raw file of its folder; its SQL depends on the union schema of
those files (which columns, their types), on the groups of files Spark must read apart
(cdc_raw_file_groups), on the personal-data registers, on its source's yml and on the project's own
code, never on which files there are: a view over the folder reads each new file by itself. Creating it again costs a
merge of every file's footer (`describe` of the folder with `spark.sql.parquet.mergeSchema`, then
Spark's analysis of the view), so with months of files a run would pay for all of them at every batch.

So `make run` (embedded target: one writer) fingerprints what the view's SQL is made of, from what the
schema-evolution hook already knows (the footer cache's union schema, the file groups), and keeps the
fingerprint of the view it built in `$CDC_WAREHOUSE/_python_hooks/staging_views.json`. When the
fingerprint is unchanged and the view exists, dbt is told (CDC_STAGING_UNCHANGED) and the view's
materialization (macros/spark/view.sql) leaves it as it is: its SQL is not rendered, no footer is read.
Its data tests still run. Anything else builds it as before: a plain `dbt run`, `--full-refresh`, the
cluster target, a changed model, macro, schema, file group or register.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from python_hooks.project.warehouse import write_state

log = logging.getLogger(__name__)

UNCHANGED_VARIABLE = "CDC_STAGING_UNCHANGED"  # read by macros/cdc/landing.sql: cdc_staging_view_unchanged
STATE_FILE = "staging_views.json"


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


class StagingViews:
    """The fingerprints of the staging views `make run` built, in the hooks' state folder (`state_file`:
    another file for other nodes kept the same way, evolution/seeds.py)."""

    def __init__(self, state_dir: Path, state_file: str = STATE_FILE) -> None:
        self.path = Path(state_dir) / state_file
        self.views: dict[str, dict[str, str]] = self._load()

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:  # only an optimisation: every view is built again
            log.warning("%s is unreadable (%s): every node it records is built again", self.path, error)
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            str(k): {"relation": str(v.get("relation")), "fingerprint": str(v.get("fingerprint"))}
            for k, v in data.items()
            if isinstance(v, dict)
        }

    def unchanged(self, found: Mapping[str, tuple[str, str, str]], exists) -> set[str]:
        """The staging models (name -> (schema, identifier, fingerprint), `fingerprints`) whose view
        was built from the same fingerprint and still exists (`exists(schema, identifier)`)."""
        same = set()
        for name, (schema, identifier, print_) in found.items():
            known = self.views.get(name)
            if known == {"relation": f"{schema}.{identifier}", "fingerprint": print_} and exists(schema, identifier):
                same.add(name)
        return same

    def record(self, built: Mapping[str, tuple[str, str, str]], failed: Iterable[str] = ()) -> None:
        """Remember the views dbt built (or kept) this run; forget those whose build failed."""
        for name, (schema, identifier, print_) in built.items():
            self.views[name] = {"relation": f"{schema}.{identifier}", "fingerprint": print_}
        for name in failed:
            self.views.pop(name, None)
        write_state(self.path, json.dumps(self.views, indent=1, sort_keys=True))


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

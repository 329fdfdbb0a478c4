"""Every source, model, snapshot, seed, exposure and column of the project has a description.

    python scripts/check_docs_coverage.py [TARGET_DIR]      (default: target)

`make docs` (`python -m python_hooks docs`) runs this check after building the site; the logic is
in python_hooks/commands/docs_coverage.py (`check`), this script is its command line. It reads dbt's artifacts
(`dbt parse` or `dbt docs generate` writes them): `manifest.json` for what the yml files declare,
and `catalog.json` when it lists relations (a warehouse that was built) for the columns the tables
really have, so that a column missing from the yml is found too. Doc blocks count: their text is in
the manifest.

Failures (a gap each, exit status 1): a model, snapshot, seed, source, source table, exposure or
yml-declared column without a description; a column in the warehouse that its yml does not list.

Warnings (reported, exit status 0): a column in the warehouse that its yml does not list, when
schema evolution added it. The schema-evolution hooks add a source's new column to its
current-state table before anyone could describe it (docs/sources.md),
and from there it flows into the staging view, the snapshot and the marts that select `*`. Such a
column is recognised thus: `<schema>_cdc_meta.schema_evolution_log` has an `add_column` row for a
table whose relation (schema and identifier) is a node of the manifest, the column's name equals the
logged column_name case-insensitively, and the node the catalog lists it in is that table, upstream of
it (its staging view, its source) or downstream of it (by the manifest's depends_on). The same name in
an unrelated model, or the column renamed downstream, is still a gap. The warning names the date and
the table of the evolution and the yml to describe it in. `python -m python_hooks docs` saves the
log's added columns to `<TARGET_DIR>/cdc_schema_evolution.json`, which this script reads; without that
file (only `dbt docs generate` ran) nothing is recognised and every such column is a gap.
"""

from __future__ import annotations

import sys

# python_hooks is importable in the project's venv (its start-up hook puts the project on the path).
from python_hooks.commands.docs_coverage import Coverage, check, main

__all__ = ["Coverage", "check", "main"]

if __name__ == "__main__":
    sys.exit(main())

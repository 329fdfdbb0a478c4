"""What `make run` leaves out of its `dbt build` (commands/run.py), from the manifest alone:

- `idle_descendants`: the models and snapshots whose current-state tables upstream all received nothing;
- `downstream_nodes`: every model and snapshot downstream of a current-state table (`--downstream-every`);
- `guaranteed_tests`: the data tests that check what a batch guarantees itself, so they would only read
  the tables again to find what cannot be there;
- `meta_tests`: the data tests of the pipeline's own tables (the `cdc_meta` source), which the run writes
  after its build: inside the build they would read the earlier runs' rows again, whole;
- the tests of the seeds the run does not load again (evolution/seeds.py).

`dbt build`, `dbt test` by hand, `--full-refresh` and CI run every test over whole tables: an analyst's
habits do not change; this is the scheduled run's economy.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

from python_hooks.project.session import project_state
from python_hooks.project.tables import CdcTable, tests_reading_only

# The contract columns a batch fills (staging and current state): never null once the batch is applied.
# _cdc_op, _cdc_ts, _cdc_seq: a batch with a null one is refused before any write (macros/cdc/validation.sql);
# _cdc_source_file: the raw file's name (staging); _cdc_applied_at: the run's timestamp (the MERGE).
CONTRACT_NOT_NULL = ("_cdc_op", "_cdc_ts", "_cdc_seq", "_cdc_source_file", "_cdc_applied_at")
# The operations a batch lets through: staging's events are refused unless one of these (validation.sql);
# a current-state row is an insert or an update (deletes and truncates delete rows).
STAGING_OPERATIONS = {"I", "U", "D", "T"}
TABLE_OPERATIONS = {"I", "U"}
# The sequence's format, as staging's data tests say it (expression_is_true on _cdc_seq): the batch refuses
# any other before a write (cdc_validation_checks: null or malformed change sequence).
SEQUENCE_FORMAT = "rlike '^[0-9]{35}$'"


def idle_descendants(manifest, tables: Sequence[CdcTable], idle: set[str]) -> set[str]:
    """The models and snapshots downstream of current-state tables, every one of which is idle this run
    (snapshots, marts, analysts' models over tables that received nothing): left out of the build with
    their tests, since their inputs did not change. A node with no current-state table upstream (a
    model over seeds only) is built as before."""
    current = {t.model for t in tables}
    upstream: dict[str, set[str]] = {}

    def tables_above(unique_id: str) -> set[str]:
        if unique_id not in upstream:
            node = manifest.nodes.get(unique_id)
            found = set()
            if node is not None:
                if node.resource_type == "model" and node.name in current:
                    found.add(node.name)
                for parent in getattr(node.depends_on, "nodes", ()):
                    found |= tables_above(parent)
            upstream[unique_id] = found
        return upstream[unique_id]

    return {
        node.name
        for unique_id, node in manifest.nodes.items()
        if node.resource_type in ("model", "snapshot")
        and node.name not in current
        and tables_above(unique_id)
        and tables_above(unique_id) <= idle
    }


def downstream_nodes(manifest, tables: Sequence[CdcTable]) -> set[str]:
    """The models and snapshots downstream of any current-state table: what a turn of `run --every` holds
    back under `--downstream-every` (commands/downstream.py), with their tests."""
    return idle_descendants(manifest, tables, {t.model for t in tables})


def downstream_of(manifest, tables: Sequence[CdcTable], model: str) -> set[str]:
    """The models and snapshots with the current-state table `model` upstream."""
    others = {t.model for t in tables} - {model}
    return downstream_nodes(manifest, tables) - idle_descendants(manifest, tables, others)


def guaranteed_tests(manifest, applied: Sequence[CdcTable]) -> set[str]:
    """The data tests of the applied tables (`applied`: current-state tables whose batch runs) and of their
    staging models that check only what the batch itself guarantees: not_null on a contract column or on
    the key, unique on a one-column key (the MERGE keeps one row per key), accepted_values on _cdc_op that
    admit every operation the batch lets through, a staging model's _cdc_seq format (SEQUENCE_FORMAT),
    unique_combination_of_columns on exactly a composite key. Any other test (another expression, a
    relationship, a test of the analyst's own) runs as before."""
    staging = {t.staging_model: t for t in applied}
    current = {t.model: t for t in applied}
    names = set()
    for node in manifest.nodes.values():
        metadata = getattr(node, "test_metadata", None)
        if node.resource_type != "test" or metadata is None or metadata.namespace not in (None, "dbt"):
            continue
        parents = list(getattr(node.depends_on, "nodes", ()))
        if len(parents) != 1:
            continue
        model = parents[0].split(".")[-1]
        table = current.get(model)
        events = staging.get(model)
        if table is None and events is None:
            continue
        column = str(metadata.kwargs.get("column_name") or getattr(node, "column_name", "") or "").strip('`"')
        keys = (table or events).keys
        if metadata.name == "not_null" and (column in CONTRACT_NOT_NULL or (table is not None and column in keys)):
            names.add(node.name)
        elif metadata.name == "unique" and table is not None and keys == (column,):
            names.add(node.name)
        elif metadata.name == "unique_combination_of_columns" and table is not None and _is_key(metadata, keys):
            names.add(node.name)
        elif metadata.name == "expression_is_true" and column == "_cdc_seq" and events is not None:
            if " ".join(str(metadata.kwargs.get("expression") or "").split()) == SEQUENCE_FORMAT:
                names.add(node.name)
        elif metadata.name == "accepted_values" and column == "_cdc_op":
            allowed = {str(v) for v in metadata.kwargs.get("values") or ()}
            if allowed >= (TABLE_OPERATIONS if table is not None else STAGING_OPERATIONS):
                names.add(node.name)
    return names


def _is_key(metadata, keys: Sequence[str]) -> bool:
    """A unique_combination_of_columns test's columns are the table's key, each once (the batch refuses a null
    key column, so no null groups them either)."""
    columns = metadata.kwargs.get("combination_of_columns")
    if isinstance(columns, str) or not columns:
        return False
    named = [str(column).strip('`"').lower() for column in columns]
    return len(named) == len(keys) and set(named) == {key.lower() for key in keys}


META_SOURCE = "cdc_meta"  # models/pipeline/_cdc_meta__sources.yml: the batch log, the ledger, the registers


def meta_tests(manifest) -> set[str]:
    """The data tests that read only the pipeline's own tables (sources of META_SOURCE)."""
    meta = {uid for uid, source in manifest.sources.items() if source.source_name == META_SOURCE}
    return set(tests_reading_only(manifest, meta).values())


SELECTING = ("--select", "-s", "--models", "-m", "--selector")
SELECTION = (*SELECTING, "--exclude")


def selects(dbt_args: Sequence[str]) -> bool:
    """The caller chose nodes (--select/-s/--models/-m, --selector)."""
    return any(arg.split("=")[0] in SELECTING for arg in dbt_args)


def selection_args(dbt_args: Sequence[str]) -> list[str]:
    """The options of `dbt_args` that choose nodes (SELECTION), each with its values, in their order:
    what `dbt ls` needs to resolve the same selection as the build."""
    chosen: list[str] = []
    taking = False
    for arg in dbt_args:
        if arg.startswith("-"):
            taking = arg.split("=")[0] in SELECTION
            if taking:
                chosen.append(arg)
            taking = taking and "=" not in arg
        elif taking:
            chosen.append(arg)
    return chosen


# Selection methods whose answer depends on more than the manifest (a state folder, the last run's results, the
# sources' freshness, a selectors file): resolved at every run, never kept (`selected_nodes`).
UNKEPT_SELECTION = ("state:", "result:", "source_status:", "--selector")
# Per runner, the last selection it resolved, with what it was resolved on; gone with the runner.
_RESOLVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def selection_key(chosen: Sequence[str], manifest, common_args: Sequence[str]) -> tuple | None:
    """What a selection's answer depends on (`chosen`: selection_args), or None when that is more than the manifest
    (a method in UNKEPT_SELECTION): then it is never kept."""
    if any(marker in arg for arg in chosen for marker in UNKEPT_SELECTION):
        return None
    return tuple(chosen), project_state(manifest, common_args)


def selected_nodes(runner, manifest, dbt_args: Sequence[str], common_args: Sequence[str]) -> set[str] | None:
    """The names of the models, snapshots and seeds the caller's selection in `dbt_args` chooses, as dbt
    resolves it (`dbt ls` on the manifest already parsed: no Spark statement); None without a selection,
    or when dbt cannot resolve it (the build then says why). A loop's runs resolve it once: kept per runner while
    the project is as it was parsed then (session.project_state) and the selection the same (0.27 s of a warm
    run's hooks, bench/TUNING.md round 46), unless it names a method in UNKEPT_SELECTION."""
    if not selects(dbt_args):
        return None
    chosen = selection_args(dbt_args)
    key = selection_key(chosen, manifest, common_args)
    kept = _RESOLVED.get(runner)
    if key is not None and kept is not None and kept[0] == key:
        return set(kept[1])
    given = getattr(runner, "manifest", None)
    runner.manifest = manifest
    try:
        listed = runner.invoke(
            [
                "ls",
                *chosen,
                *("--resource-type", "model", "--resource-type", "snapshot", "--resource-type", "seed"),
                *("--output", "name", "--log-level", "none"),
                *common_args,
            ]
        )
    finally:
        runner.manifest = given
    if not listed.success or listed.result is None:
        return None
    names = {str(name) for name in listed.result}
    if key is not None:
        _RESOLVED[runner] = (key, frozenset(names))
    return names

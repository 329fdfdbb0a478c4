"""Writing a run's results: `latest.json` (everything) and `latest.md` (the tables for humans);
`latest-cluster.json` / `latest-cluster.md` for a run on the cluster target, `latest-s3.json` /
`latest-s3.md` for one with BENCH_STORAGE=s3, so that neither overwrites the local figures."""

from __future__ import annotations

import json
from pathlib import Path

RATIO_KEYS = ("R1", "R2", "R3", "R4", "S", "M", "Z", "H", "F", "peak_heap_fraction")
ENDINGS_WITH_BREAKDOWN = (
    "incremental batch",
    "full refresh",
    "stock dbt-spark merge",
    "incremental run (make run)",
    "idle run (make run)",
    "files: initial build",
)
TARGET_NOTES = {
    "local": "Target `local`: dbt and the bench in one embedded Spark session.",
    "cluster": "Target `cluster`: dbt and the bench's own SQL in sessions of the cluster's Spark Thrift Server "
    "(master {master}).",
}


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(results: dict) -> str:
    scale, machine, memory = results["scale"], results["machine"], results["peak_memory"]
    target = results.get("target", "local")
    remote = target != "local"
    lines = [
        "# CDC pipeline benchmark",
        "",
        f"{_fmt(scale['rows'])} rows, batches of {_fmt(scale['batch_rows'])} changes "
        f"({scale['batch_mix']}), {scale['batches']} batch(es) per table, scaled table "
        f"{scale['scale_factor']}x = {_fmt(scale['scaled_rows'])} rows. "
        f"Machine: {machine['cores']} cores ({machine['cpu']}), {_fmt(machine['memory_mb'])} MB, "
        f"Spark {machine['spark']}, Iceberg {machine['iceberg']}, Java {machine['java']}. "
        f"Run {results['started_at']}, {results['elapsed_seconds']} s in all"
        + (f"; patches: {', '.join(results['settings']['patches'])}" if results["settings"]["patches"] else "")
        + ".",
        TARGET_NOTES.get(target, f"Target `{target}`.").format(
            master=results["settings"]["spark"].get("spark.master", "unknown")
        )
        + " "
        + _storage_note(results),
        "",
        "| ratio | measured | goal | met | definition |",
        "|---|---:|---:|:-:|---|",
    ]
    for key in RATIO_KEYS:
        value = results.get(key)
        met = "–" if value is None else "yes" if results["met"][key] else "**no**"
        shown = _fmt(value) if value is not None else "not run" if key != "peak_heap_fraction" else "n/a"
        lines.append(f"| {key} | {shown} | ≤ {results['goals'][key]} | {met} | {results['definitions'][key]} |")
    lines += [
        "",
        f"Tables equal to the replay after every checked stage: {'yes' if results['correct'] else '**NO**'}.",
        (
            "CPU time: n/a on this target (the work runs in the Thrift Server's and the executors' JVMs, "
            "not in this process)."
            if remote
            else "The same ratios on CPU time (JVM + dbt; what other processes competing for the cores do not "
            "inflate): " + ", ".join(f"{k} {_fmt(v)}" for k, v in results["details"]["cpu_time_ratios"].items()) + "."
        )
        + f" Load average (1 min) at start {machine['load_average_1m_at_start']}, "
        f"at end {machine['load_average_1m_at_end']}.",
        "Peak driver memory: n/a on this target (the driver is the Thrift Server's JVM)."
        if remote
        else f"Peak driver memory: heap {_fmt(memory['driver_heap_peak_mb'])} MB "
        f"of {_fmt(memory['driver_heap_max_mb'])} MB ({_fmt(memory.get('driver_heap_peak_fraction'))} of the "
        f"maximum; after garbage collection at most {_fmt(memory.get('driver_heap_after_gc_peak_mb'))} MB, "
        f"{_fmt(memory.get('driver_heap_after_gc_peak_fraction'))}), "
        f"process RSS {_fmt(memory['driver_rss_peak_mb'])} MB.",
        *_new_stage_notes(results),
        "",
        "| stage | seconds | CPU seconds | rows | rows/s | peak heap MB | heap / max | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for stage in results["stages"]:
        lines.append(
            f"| {stage['stage']} | {_fmt(stage['seconds'])} | {_fmt(stage.get('cpu_seconds'))} | "
            f"{_fmt(stage.get('rows'))} | "
            f"{_fmt(stage.get('rows_per_second'))} | {_fmt(stage.get('peak_heap_mb'))} | "
            f"{_fmt(stage.get('peak_heap_fraction'))} | {_fmt(stage.get('peak_rss_mb'))} |"
        )
    counted = [stage for stage in results["stages"] if stage.get("counts")]
    if counted:
        lines += [
            "",
            "What each `make run` of the many-tables stages sent and committed (statements from dbt's events; commits"
            " from the tables' snapshots; tests/pytest/test_statement_budget.py holds the same counts):",
            "",
            "| stage | statements | the run's own | most by one table's node | data tests | most commits to one table"
            " | commits to the meta tables |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for stage in counted:
            counts = stage["counts"]
            meta = ", ".join(f"{table} {n}" for table, n in counts["meta_commits"].items() if n) or "none"
            lines.append(
                f"| {stage['stage']} | {counts['statements']} | {counts['run_statements']} | "
                f"{counts['node_statements_max']} | {counts['test_statements']} | "
                f"{counts['table_commits_max']} | {meta} |"
            )
    stock = results.get("stock")
    if stock:
        others = stock["others_by_kind"]
        lines += [
            "",
            f"Rows the stock dbt-spark model (`{stock['model']}`) gets wrong after the batch, against the replay "
            f"({_fmt(stock['replay_rows'])} rows):",
            "",
            "| kind | rows |",
            "|---|---:|",
            "| deleted keys still present (the stock MERGE cannot delete) | "
            f"{_fmt(stock['by_kind']['deleted_keys_present'])} |",
            f"| late (older) changes that overwrote newer values | {_fmt(stock['by_kind']['late_overwrote_newer'])} |",
            f"| others: a newer change of the batch skipped (late, older than the table's max(last_update_time)) "
            f"| {_fmt(others['batch_change_skipped'])} |",
            f"| others: key missing | {_fmt(others['missing_key'])} |",
            f"| others: other differences | {_fmt(others['other'])} |",
            f"| **all wrong rows** | {_fmt(stock['wrong_rows'])} |",
        ]
    for label, detail in results["breakdown"].items():
        if not label.endswith(ENDINGS_WITH_BREAKDOWN):
            continue
        lines += ["", f"Where the time of {label} goes:", "", "| part | seconds |", "|---|---:|"]
        for category, seconds in detail["seconds_by_category"].items():
            lines.append(f"| {category} | {_fmt(seconds)} |")
    return "\n".join(lines) + "\n"


def _storage_note(results: dict) -> str:
    """Where the raw files and the tables were (BENCH_STORAGE): every figure depends on it."""
    details = results.get("storage_details") or {}
    if results.get("storage", "local") == "s3":
        return (
            f"Storage `s3`: landing zone `{details.get('landing')}` and warehouse `{details.get('warehouse')}` on a "
            f"local S3 server ({details.get('server')}, {details.get('endpoint')}); the hand-written jobs, the floor "
            "and the stock model read and write the same bucket."
        )
    return "Storage `local`: landing zone and warehouse on this machine's disk."


def _new_stage_notes(results: dict) -> list[str]:
    """One line each on the many-tables, idle and history stages, when they ran."""
    notes = []
    scale = results["scale"]
    if results.get("many"):
        notes.append(
            f"Many tables (M, Z): {results['many']['tables']} tables of {_fmt(scale['many_rows'])} rows "
            f"({len(results['many']['columns'])} columns), batches of {_fmt(scale['many_batch_rows'])} changes each."
        )
    idle = results.get("idle")
    if idle:
        notes.append(
            f"Idle run: {_fmt(idle['parse_and_session_seconds'])} s of dbt parse + cdc_create_meta_tables; "
            + (
                "no Iceberg commit on any of the tables."
                if not idle["tables_committed"]
                else f"**{idle['tables_committed']} table(s) got a commit**."
            )
        )
    erased = results.get("erasure")
    if erased:
        notes.append(
            f"Erasure (bench/erasure.py): {erased['customers']} customers erased from the 1x table, its raw files and "
            f"older snapshots in {_fmt(erased['seconds'])} s ({erased['raw_files_rewritten']} raw files rewritten, "
            f"{erased['snapshots_expired']} snapshots expired, {erased['files_removed']} files removed)."
        )
    history = results.get("history")
    if history:
        notes.append(
            f"Landing history (H): {_fmt(history['history']['applied_files'])} applied files of "
            f"{_fmt(scale['history_file_rows'])} rows each against the same rows in "
            f"{history['history_few']['applied_files']} files, then one new file of "
            f"{_fmt(history['new_file_changes'])} changes; layout `{history['layout']}`."
        )
    return notes


def result_names(target: str, storage: str = "local") -> tuple[str, str]:
    """`latest.json`, `latest.md` on `local` with local storage; `latest-<target>`, `latest-<storage>`
    (`latest-s3`) or both (`latest-<target>-<storage>`) otherwise."""
    stem = "-".join(["latest", *(part for part in (target, storage) if part != "local")])
    return f"{stem}.json", f"{stem}.md"


def write_results(results: dict, directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_name, md_name = result_names(results.get("target", "local"), results.get("storage", "local"))
    json_path, md_path = directory / json_name, directory / md_name
    for path, text in ((json_path, json.dumps(results, indent=2, default=str) + "\n"), (md_path, markdown(results))):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return json_path, md_path

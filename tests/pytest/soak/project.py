"""The project the soak runs: a copy of this project's dbt files without its sample sources, to which
each soak table is added as a user adds one (`python -m python_hooks add-source`, from the files already
landed), one subject declared on two of them (`meta.cdc_subjects`, docs/personal-data.md), and the
retention's time window set to SOAK_RETENTION_DAYS (the day is accelerated: see soak/__init__.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from helpers.paths import PROJECT
from soak.producers import KEY, SUBJECT, Table, holders

# What the copy takes: the macros, the project's own models (the pipeline's meta tables as a source, the
# contract's doc blocks) and generic tests; not the sample sources, their marts, snapshots and seeds.
COPIED = ("macros", "models/pipeline", "models/docs", "tests/generic")
RETENTION_DAYS = re.compile(r"^(\s+days:\s*)7(\s*)$", re.MULTILINE)


def make_project(folder: Path, retention_days: float) -> Path:
    folder.mkdir(parents=True)
    text = (PROJECT / "dbt_project.yml").read_text(encoding="utf-8")
    text, count = RETENTION_DAYS.subn(lambda m: f"{m.group(1)}{retention_days:g}{m.group(2)}", text)
    if count != 2:
        raise RuntimeError(f"dbt_project.yml: expected the two cdc_retention 'days: 7' lines, found {count}")
    (folder / "dbt_project.yml").write_text(text, encoding="utf-8")
    for name in COPIED:
        if (PROJECT / name).is_dir():
            shutil.copytree(PROJECT / name, folder / name)
    return folder


def add_sources(project: Path, tables: list[Table], environ: dict[str, str]) -> list[str]:
    """`add-source` for each table, as a user runs it; the lines it printed. RuntimeError on a refusal."""
    said = []
    for table in tables:
        done = subprocess.run(
            [sys.executable, "-m", "python_hooks", *table.add_source_args(), "--project-dir", str(project)],
            env=environ,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"add-source {table.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        said += done.stdout.splitlines()
    return said


def declare_subject(project: Path, tables: list[Table]) -> None:
    """meta.cdc_subjects on the holder tables' source entries (the erasure's holders)."""
    for table in holders(tables):
        path = project / "models" / "staging" / table.source / f"_{table.source}__sources.yml"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        entry = next(
            t
            for source in data["sources"]
            if source["name"] == table.source
            for t in source["tables"]
            if t["name"] == table.name
        )
        entry.setdefault("meta", {})["cdc_subjects"] = {SUBJECT: KEY}
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")

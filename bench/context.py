"""The run context every stage gets: `Settings` (the BENCH_* environment, the stage groups it selects)
and `Run` (the target's dbt, the bench's own SQL session, the stage timer, where the files are (its
`storage`), and what the stages record for the results: checks against the replay, statement
breakdowns, merge steps, table layouts).

The stage modules (orders, stock, erasure, many, history) take a `Run`; bench/run.py builds it and
calls them in order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import LAYOUTS, BenchDbt
from bench.instrument import Stages
from bench.sql import TARGETS, Sql
from bench.storage import STORAGES, BenchStorage
from python_hooks.project.storage import Location

# What BENCH_STAGES selects, in the order they run; a group runs the groups it needs too.
STAGE_GROUPS = ("orders", "stock", "erasure", "scaled", "many", "idle", "history")
NEEDS = {"stock": ("orders",), "erasure": ("orders",), "scaled": ("orders",), "idle": ("many",)}


@dataclass(frozen=True)
class Settings:
    rows: int = 5_000_000
    batch_fraction: float = 0.01
    batches: int = 2
    scale_factor: int = 4
    seed: int = 20261101
    load_file_rows: int = 500_000
    files_per_batch: int = 4
    patches: tuple[str, ...] = ()
    ref: str | None = None
    scaled_baselines: bool = True
    compact: bool = True
    target: str = "local"
    storage: str = "local"
    stages: tuple[str, ...] = STAGE_GROUPS
    many_tables: int = 20
    many_rows: int = 100_000
    many_batch: int = 1_000
    many_batches: int = 2
    history_files: int = 5_000
    history_file_rows: int = 4
    history_batch: int = 1_000
    history_layout: str = "flat"
    erased_customers: int = 10

    @property
    def batch_rows(self) -> int:
        return max(1, round(self.rows * self.batch_fraction))

    def runs(self, group: str) -> bool:
        return group in self.groups

    @property
    def groups(self) -> tuple[str, ...]:
        """The selected stage groups and those they need, in the order they run."""
        wanted = set(self.stages)
        for group in self.stages:
            wanted.update(NEEDS.get(group, ()))
        if not self.scale_factor:
            wanted.discard("scaled")
        return tuple(g for g in STAGE_GROUPS if g in wanted)

    @classmethod
    def from_env(cls, environ=os.environ) -> Settings:
        def number(name, cast, default):
            value = environ.get(name, "").strip()
            return cast(value) if value else default

        settings = cls(
            rows=number("BENCH_ROWS", int, cls.rows),
            batch_fraction=number("BENCH_BATCH_FRACTION", float, cls.batch_fraction),
            batches=number("BENCH_BATCHES", int, cls.batches),
            scale_factor=number("BENCH_SCALE_FACTOR", int, cls.scale_factor),
            seed=number("BENCH_SEED", int, cls.seed),
            load_file_rows=number("BENCH_LOAD_FILE_ROWS", int, cls.load_file_rows),
            files_per_batch=number("BENCH_FILES_PER_BATCH", int, cls.files_per_batch),
            patches=tuple(p.strip() for p in environ.get("BENCH_PATCH", "").split(",") if p.strip()),
            ref=environ.get("BENCH_REF", "").strip() or None,
            scaled_baselines=environ.get("BENCH_SCALED_BASELINES", "1").strip() not in ("0", "false", "no"),
            compact=environ.get("BENCH_COMPACT", "1").strip() not in ("0", "false", "no"),
            target=environ.get("BENCH_TARGET", "").strip() or cls.target,
            storage=environ.get("BENCH_STORAGE", "").strip() or cls.storage,
            stages=tuple(g.strip() for g in environ.get("BENCH_STAGES", "").split(",") if g.strip()) or cls.stages,
            many_tables=number("BENCH_MANY_TABLES", int, cls.many_tables),
            many_rows=number("BENCH_MANY_ROWS", int, cls.many_rows),
            many_batch=number("BENCH_MANY_BATCH", int, cls.many_batch),
            many_batches=number("BENCH_MANY_BATCHES", int, cls.many_batches),
            history_files=number("BENCH_HISTORY_FILES", int, cls.history_files),
            history_file_rows=number("BENCH_HISTORY_FILE_ROWS", int, cls.history_file_rows),
            history_batch=number("BENCH_HISTORY_BATCH", int, cls.history_batch),
            history_layout=environ.get("BENCH_HISTORY_LAYOUT", "").strip() or cls.history_layout,
            erased_customers=number("BENCH_ERASED_CUSTOMERS", int, cls.erased_customers),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        settings = self
        if settings.rows < 10 or settings.batches < 1 or settings.scale_factor < 0:
            raise ValueError(f"BENCH_ROWS >= 10, BENCH_BATCHES >= 1, BENCH_SCALE_FACTOR >= 0, got {settings}")
        if not 0 < settings.batch_fraction <= 1:
            raise ValueError(f"BENCH_BATCH_FRACTION must be in (0, 1], got {settings.batch_fraction}")
        if settings.target not in TARGETS:
            raise ValueError(f"BENCH_TARGET must be one of {', '.join(TARGETS)}, got {settings.target!r}")
        if settings.storage not in STORAGES:
            raise ValueError(f"BENCH_STORAGE must be one of {', '.join(STORAGES)}, got {settings.storage!r}")
        if settings.storage != "local" and settings.target != "local":
            raise ValueError(
                f"BENCH_STORAGE={settings.storage} runs on the local target only: the cluster's warehouse is "
                "the one `make cluster-up` set, and its executors would not reach the bench's own S3 server"
            )
        unknown = [g for g in settings.stages if g not in STAGE_GROUPS]
        if unknown:
            raise ValueError(f"BENCH_STAGES: unknown group(s) {unknown}; the groups are {', '.join(STAGE_GROUPS)}")
        if min(settings.many_tables, settings.many_rows, settings.many_batch, settings.many_batches) < 1:
            raise ValueError("BENCH_MANY_TABLES, BENCH_MANY_ROWS, BENCH_MANY_BATCH and BENCH_MANY_BATCHES must be >= 1")
        if settings.erased_customers < 1:
            raise ValueError("BENCH_ERASED_CUSTOMERS must be >= 1")
        if min(settings.history_files, settings.history_file_rows, settings.history_batch) < 1:
            raise ValueError("BENCH_HISTORY_FILES, BENCH_HISTORY_FILE_ROWS and BENCH_HISTORY_BATCH must be >= 1")
        if settings.history_layout not in LAYOUTS:
            raise ValueError(
                f"BENCH_HISTORY_LAYOUT must be one of {', '.join(LAYOUTS)}, got {settings.history_layout!r}"
            )


@dataclass
class Run:
    settings: Settings
    work: Path
    schema: str
    stages: Stages
    dbt: BenchDbt
    storage: BenchStorage
    checks: list = field(default_factory=list)
    breakdowns: dict = field(default_factory=dict)
    merge_steps: dict = field(default_factory=dict)
    layouts: dict = field(default_factory=dict)
    sql: Sql | None = None

    @property
    def landing(self) -> Location:
        """CDC_LANDING_ROOT: a folder of the work folder, or s3a://<bucket>/landing (bench/storage.py)."""
        return self.storage.landing

    def relation(self, table: str) -> str:
        return f"{self.schema}_current.bench__{table}"

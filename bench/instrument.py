"""Measuring instruments: stage timer with the Spark driver's peak memory (on `local`, where the
driver is this process's JVM), and a per-statement profile of every SQL statement dbt sends (from
dbt's own SQLQuery / SQLQueryStatus events, on every target)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)
MB = 1024 * 1024


# --- SQL statements dbt runs ------------------------------------------------------------------


@dataclass
class Statement:
    sql: str
    node: str
    start: float
    end: float | None = None  # when the next statement started (or the invocation ended)
    execute: float | None = None  # dbt's SQLQueryStatus.elapsed: the execute call only

    @property
    def seconds(self) -> float:
        return (self.end or self.start) - self.start


class SqlProfile:
    """A dbtRunner callback recording every statement. A statement's time is from its start to the
    next statement's start in the same thread (dbt runs each node in one of its threads and sends its
    events from there): it includes fetching the result (Spark runs a query lazily, when dbt fetches
    it) and the Jinja in between. A node's last one ends when the node finishes; a statement of the run
    (no node, or a hook's: the hooks', dbt's metadata) when a node starts, since its thread then waits for the nodes,
    or when the caller says a dbt command starts (`close`); a thread's last one when the invocation
    returns."""

    def __init__(self) -> None:
        self.statements: list[Statement] = []
        self._open: dict[int, Statement] = {}  # per thread, its statement still running

    def __call__(self, msg) -> None:
        try:
            self._record(msg)
        except Exception:  # a callback that raises would fail the dbt run it observes
            log.exception("SqlProfile could not record a dbt event")

    def _record(self, msg) -> None:
        name = msg.info.name
        thread = threading.get_ident()
        if name == "SQLQuery":
            now = time.perf_counter()
            previous = self._open.get(thread)
            if previous is not None and previous.end is None:
                previous.end = now
            node = getattr(getattr(msg.data, "node_info", None), "unique_id", "") or ""
            self._open[thread] = Statement(msg.data.sql, node, now)
            self.statements.append(self._open[thread])
        elif name == "SQLQueryStatus" and thread in self._open:
            self._open[thread].execute = float(msg.data.elapsed)
        elif name == "NodeFinished" and thread in self._open:
            self._end(self._open[thread], time.perf_counter())
        elif name == "NodeStart":
            now = time.perf_counter()
            for statement in self._open.values():
                if _of_the_run(statement.node):
                    self._end(statement, now)

    @staticmethod
    def _end(statement: Statement, at: float) -> None:
        if statement.end is None:
            statement.end = at

    def close(self, at: float) -> None:
        for statement in self._open.values():
            self._end(statement, at)


# The nodes whose statements are not the run's own, as the budget test counts them (a seed's count as the run's).
NODE_STATEMENTS = ("model.", "test.", "snapshot.")


def _of_the_run(node: str) -> bool:
    """A statement of the run, not of a model, test, snapshot or seed: the hooks' (dbt's on-run-start and
    on-run-end statements carry their hook's node, `operation.<project>.<hook>`) and dbt's metadata (none)."""
    return not node or node.startswith("operation.")


def statement_counts(statements: list[Statement], models: list[str]) -> dict:
    """What a run sent, counted as tests/pytest/test_statement_budget.py counts it: statements in all, the
    run's own (every statement not of a model, test or snapshot node: hooks, plan, dbt's metadata, accounting),
    the most any of `models` (current-state model nodes, by name) sent, and the data tests'."""
    per_node: dict[str, int] = {}
    for statement in statements:
        per_node[statement.node] = per_node.get(statement.node, 0) + 1
    nodes = [per_node.get(node, 0) for node in per_node if node.startswith("model.") and node.split(".")[-1] in models]
    return {
        "statements": len(statements),
        "run_statements": sum(n for node, n in per_node.items() if not node.startswith(NODE_STATEMENTS)),
        "node_statements_max": max(nodes, default=0),
        "test_statements": sum(n for node, n in per_node.items() if node.startswith("test.")),
    }


# What each statement of a current-state batch is for: first matching rule wins (see macros/cdc/*.sql).
MERGE_INTO = "merge: write target (INSERT, MERGE INTO, branch publish)"
CATEGORIES: list[tuple[str, str]] = [
    (MERGE_INTO, r"^merge into |^insert into (?!\S*_cdc_meta\.)|fast_forward|^alter table \S+ (create|drop) branch"),
    ("batch views", r"^uncache table|^drop view if exists \S*__cdc_"),
    ("compaction check / compaction", r"\.files\b|rewrite_data_files|rewrite_position_delete_files"),
    ("merge: read pinned batch, last change per key", r"^cache table \S*__cdc_changes(_\w+)?\b"),
    ("merge: compare with target (classify)", r"__cdc_classified(_\w+)?\b"),
    ("merge: validate batch, count outcomes", r"count_if\("),
    ("merge: tombstones, truncates", r"cdc_tombstones|_cdc_spool/|__cdc_changes(_\w+)?\b"),
    ("find new files, ledger", r"cdc_file_ledger|group by _cdc_source_file|__cdc_batch_files\b"),
    (
        "staging view (listing, footers)",
        r"binaryfile|^describe query|\blanding__|create (or replace )?view|^drop view if exists \S*stg_",
    ),
    ("batch views", r"__cdc_events(_\w+)?\b|__dbt_tmp\b|^uncache table|^drop view"),
    ("dbt metadata (show, describe)", r"^show |^describe "),
    ("meta tables (on-run-start)", r"^create database|^create table if not exists|^set "),
]
_RULES = [(category, re.compile(pattern)) for category, pattern in CATEGORIES]
_COMMENT = re.compile(r"^\s*/\*.*?\*/", re.S)


_LINE_COMMENTS = re.compile(r"^(\s*--[^\n]*(\n|$))+")


def normalise(sql: str) -> str:
    """The statement without dbt's leading query comment (and leading `--` lines, as dbt-spark's
    MERGE has), lower case, whitespace collapsed."""
    return " ".join(_LINE_COMMENTS.sub("", _COMMENT.sub("", sql, count=1)).lower().split())


def categorise(sql: str) -> str:
    text = normalise(sql)
    for category, rule in _RULES:
        if rule.search(text):
            return category
    return "other"


# A breakdown keeps the slowest statements only: 200 tables send thousands, and the results are committed.
SLOWEST_KEPT = 200


def breakdown(statements: list[Statement], wall: float) -> dict:
    """Seconds per category, how many statements, the SLOWEST_KEPT slowest of them (slowest first), and dbt's own
    time (no statement running)."""
    per_category: dict[str, float] = {}
    for statement in statements:
        category = categorise(statement.sql)
        per_category[category] = per_category.get(category, 0.0) + statement.seconds
    in_sql = sum(s.seconds for s in statements)
    per_category["dbt itself (parse, compile, no SQL running)"] = max(wall - in_sql, 0.0)
    return {
        "seconds_by_category": {k: round(v, 3) for k, v in sorted(per_category.items(), key=lambda kv: -kv[1])},
        "statement_count": len(statements),
        "statements": [
            {"seconds": round(s.seconds, 3), "category": categorise(s.sql), "sql": normalise(s.sql)[:160]}
            for s in sorted(statements, key=lambda s: -s.seconds)[:SLOWEST_KEPT]
        ],
    }


def merge_step_seconds(statements: list[Statement]) -> float:
    """cdc_apply_batch's work on the batch: from reading the pinned batch (`cache table ..__cdc_changes`,
    or, for a small batch that is not cached, its validation aggregate) to the end of its last write to
    the target (INSERT, MERGE INTO, branch publish; the last one's execute time only)."""
    categories = [categorise(s.sql) for s in statements]
    reads = ("merge: read pinned batch, last change per key", "merge: validate batch, count outcomes")
    first = next((i for i, c in enumerate(categories) if c in reads), None)
    last = next((i for i in range(len(categories) - 1, -1, -1) if categories[i] == MERGE_INTO), None)
    if first is None or last is None:
        return 0.0
    merge = statements[last]
    return sum(s.seconds for s in statements[first:last]) + (
        merge.execute if merge.execute is not None else merge.seconds
    )


# --- Spark driver memory ----------------------------------------------------------------------


def _proc_status(pid: int) -> dict[str, int]:
    values = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, amount, _unit = line.split()
                values[name.rstrip(":")] = int(amount) * 1024
    return values


def _cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system) of this Python process plus, when known, the Spark JVM's."""
    times = os.times()
    total = times.user + times.system
    if pid:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _reset_peak_rss(pid: int) -> bool:
    """Linux: writing 5 to clear_refs resets VmHWM (peak RSS) to the current RSS."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


@dataclass
class StageRecord:
    name: str
    seconds: float
    rows: int | None = None
    cpu_seconds: float | None = None
    peak_heap_mb: float | None = None
    peak_rss_mb: float | None = None
    peak_heap_after_gc_mb: float | None = None
    max_heap_mb: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def peak_heap_fraction(self) -> float | None:
        if self.peak_heap_mb is None or not self.max_heap_mb:
            return None
        return self.peak_heap_mb / self.max_heap_mb

    def as_dict(self) -> dict:
        result = {"stage": self.name, "seconds": round(self.seconds, 3)}
        if self.cpu_seconds is not None:
            result["cpu_seconds"] = round(self.cpu_seconds, 3)
        if self.rows is not None:
            result["rows"] = self.rows
            result["rows_per_second"] = round(self.rows / self.seconds) if self.seconds > 0 else None
        result["peak_heap_mb"] = None if self.peak_heap_mb is None else round(self.peak_heap_mb)
        fraction = self.peak_heap_fraction
        result["peak_heap_fraction"] = None if fraction is None else round(fraction, 3)
        result["peak_heap_after_gc_mb"] = (
            None if self.peak_heap_after_gc_mb is None else round(self.peak_heap_after_gc_mb)
        )
        result["peak_rss_mb"] = None if self.peak_rss_mb is None else round(self.peak_rss_mb)
        result.update(self.extra)
        return result


def _max_heap(jvm) -> int:
    """The heap's maximum: the JVM's MaxHeapSize (-Xmx, spark.driver.memory). Runtime.maxMemory() is that only
    under G1: the parallel collector leaves out a survivor space it may grow into, so the heap in use could pass it."""
    try:
        bean_class = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
        bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_class)
        return int(bean.getVMOption("MaxHeapSize").getValue())
    except Exception:  # not HotSpot
        return int(jvm.java.lang.Runtime.getRuntime().maxMemory())


class DriverMemory:
    """Samples the Spark driver's JVM heap in use (py4j, MemoryMXBean) in a thread, and reads the
    JVM process's peak RSS (Linux VmHWM, reset at each stage's start). In local mode the driver
    JVM runs every task, so this is the memory the whole job needs.

    The heap in use includes garbage not collected yet: the JVM lets it grow towards the maximum
    before collecting, so its peak says how full the heap got, not how much the job holds. The
    heap after the last collection (the heap pools' CollectionUsage, summed) is sampled too: its
    peak is closer to what the job needs live."""

    def __init__(self, interval: float = 0.1) -> None:
        self._interval = interval
        self._spark = None
        self._pid: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._peak_heap = 0
        self._peak_after_gc = 0
        self._heap_pools: list = []
        self.max_heap: int | None = None
        self.overall_peak_heap = 0
        self.overall_peak_after_gc = 0
        self.overall_peak_rss = 0

    def attach(self, spark) -> None:
        if self._spark is not None:
            return
        self._spark = spark
        jvm = spark.sparkContext._jvm
        self._pid = int(jvm.java.lang.ProcessHandle.current().pid())
        self.max_heap = _max_heap(jvm)
        self._heap_pools = [
            pool
            for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
            if pool.getType().name() == "HEAP"
        ]
        self._thread = threading.Thread(target=self._sample_loop, name="bench-heap-sampler", daemon=True)
        self._thread.start()

    def _heap_used(self) -> int:
        bean = self._spark.sparkContext._jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
        return int(bean.getHeapMemoryUsage().getUsed())

    def _heap_after_gc(self) -> int:
        total = 0
        for pool in self._heap_pools:
            usage = pool.getCollectionUsage()
            total += int(usage.getUsed()) if usage is not None else 0
        return total

    def _sample(self) -> None:
        used, after_gc = self._heap_used(), self._heap_after_gc()
        with self._lock:
            self._peak_heap = max(self._peak_heap, used)
            self.overall_peak_heap = max(self.overall_peak_heap, used)
            self._peak_after_gc = max(self._peak_after_gc, after_gc)
            self.overall_peak_after_gc = max(self.overall_peak_after_gc, after_gc)

    def _sample_loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._sample()
            except Exception:  # the JVM is going away
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def cpu_seconds(self) -> float:
        return _cpu_seconds(self._pid)

    def begin(self) -> None:
        with self._lock:
            self._peak_heap = 0
            self._peak_after_gc = 0
        if self._pid:
            _reset_peak_rss(self._pid)

    def end(self) -> tuple[float | None, float | None]:
        if not self._spark:
            return None, None
        with contextlib.suppress(Exception):
            self._sample()
        status = _proc_status(self._pid) if self._pid else {}
        rss = status.get("VmHWM")
        if rss:
            self.overall_peak_rss = max(self.overall_peak_rss, rss)
        with self._lock:
            return (self._peak_heap / MB if self._peak_heap else None), (rss / MB if rss else None)

    def stage_peak_after_gc(self) -> float | None:
        with self._lock:
            return self._peak_after_gc / MB if self._peak_after_gc else None


class RemoteDriver:
    """The `cluster` target: the driver is the Thrift Server's JVM and the tasks run in the
    executors', other processes (other machines, in production). The client measures neither their
    heap nor their CPU time: every memory and CPU figure of the run is None ("n/a")."""

    max_heap: int | None = None
    overall_peak_heap = 0
    overall_peak_after_gc = 0
    overall_peak_rss = 0

    def stop(self) -> None:
        pass

    def cpu_seconds(self) -> float | None:
        return None

    def begin(self) -> None:
        pass

    def end(self) -> tuple[float | None, float | None]:
        return None, None

    def stage_peak_after_gc(self) -> float | None:
        return None


class Stages:
    """Times named stages and records each with the driver's peak memory during it."""

    def __init__(self, memory: DriverMemory | RemoteDriver) -> None:
        self.memory = memory
        self.records: list[StageRecord] = []

    @contextlib.contextmanager
    def stage(self, name: str, rows: int | None = None):
        record = StageRecord(name, 0.0, rows)
        log.info("stage %s ...", name)
        self.memory.begin()
        cpu = self.memory.cpu_seconds()
        start = time.perf_counter()
        try:
            yield record
        finally:
            record.seconds = time.perf_counter() - start
            # CPU time is what contention for the cores does not inflate: the JVM's and dbt's.
            record.cpu_seconds = None if cpu is None else self.memory.cpu_seconds() - cpu
            record.peak_heap_mb, record.peak_rss_mb = self.memory.end()
            record.peak_heap_after_gc_mb = self.memory.stage_peak_after_gc()
            record.max_heap_mb = self.memory.max_heap / MB if self.memory.max_heap else None
            self.records.append(record)
            log.info("stage %s: %.2f s", name, record.seconds)

    def get(self, name: str) -> StageRecord:
        return next(r for r in self.records if r.name == name)


def jvm_pid_rss(spark) -> int | None:
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    return _proc_status(pid).get("VmRSS")


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def memory_total_mb() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return None


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)

"""The live capture: Debezium's PostgreSQL connector in its embedded engine (pydbzengine: the engine in
a JVM inside this process, through JPype) reading the live source's pgoutput slot, first an initial
snapshot (op `r`), then the stream; its events go to sink.py, which writes them as the S3 sink would.

Records reach the sink as Kafka Connect's JsonConverter serializes them (with schemas), after the
transforms a Kafka Connect deployment would run: ExtractNewRecordState on the flattened tables' topics
(`add.fields=op,source.ts_ms,source.lsn`, deletes rewritten with `__deleted`), nothing on the others.
Debezium's own topics (heartbeats, transaction metadata, logical decoding messages) are not written.

Delivery is at least once, never less. A record is marked processed (Debezium then commits the source
offset to $CDC_LIVE_DIR/capture/offsets.dat, after every batch: `offset.flush.interval.ms=0`) only when
it and every record before it is in a file renamed into place. A kill therefore loses nothing: records
not yet in a file have no committed offset and are read again from the slot by the next start, and
records in a file whose offset was not committed yet are written a second time (as through Kafka).

Except inside the initial snapshot: there a committed offset does not mean "read again from here" but "take
the whole snapshot again" (Debezium's rule for a snapshot it did not finish), and a second snapshot is no
replay: a row deleted between the two is in the first and in no delete event, so it stays in the landing
zone for good. Hence the snapshot's last record (its source offset says `last_snapshot_record`) writes every
open file, as a drain marker does: the snapshot is landed and its end committed before a single change of
the stream is buffered, and every restart from then on streams from the slot. (A kill inside the snapshot
itself still takes it again, as Kafka Connect does.)

One capture per folder: the PID file names it. SIGTERM or Ctrl-C stops it cleanly (the open files are
written and their offsets committed, then the engine stops); `live capture-stop` sends SIGTERM.
`live drain` writes a marker into the WAL (a logical decoding message, MARKER_PREFIX) and waits until
the capture has landed every change committed before it (the marker makes it write its open files).
"""

from __future__ import annotations

import base64
import collections
import datetime as dt
import functools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import jpype
from pydbzengine import DebeziumEngine
from pydbzengine.engine.jvm import ensure_jvm_started

from python_hooks.live import source
from python_hooks.live.config import MARKER_PREFIX, LiveConfig
from python_hooks.live.sink import ParquetSink
from python_hooks.project.warehouse import write_state

log = logging.getLogger(__name__)

LOG4J = Path(__file__).with_name("log4j2.properties")
# A JVM beside Spark on a 2-core laptop: small. -Xrs leaves SIGTERM and SIGINT to Python.
JVM_OPTIONS = ["-Xms64m", "-Xmx384m", "-Xrs"]
HEARTBEAT_MS = 1000
STOP_SECONDS = 60  # a clean stop: the last files written, offsets committed, the engine stopped
START_SECONDS = 120
MARKERS_KEPT = 20


def engine_properties(config: LiveConfig) -> dict[str, str]:
    """The Debezium engine's configuration: the connector, its offsets, the transforms."""
    flattened = [table.topic for table in config.tables if table.shape == "flattened"]
    properties = {
        "name": "cdc-live",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(config.offsets_file),
        "offset.flush.interval.ms": "0",
        "database.hostname": config.pg_host,
        "database.port": str(config.pg_port),
        "database.user": config.user,
        "database.dbname": config.database,
        "topic.prefix": config.topic_prefix,
        "plugin.name": "pgoutput",
        "slot.name": config.slot,
        "publication.name": config.publication,
        "publication.autocreate.mode": "filtered",
        # a list of regular expressions, each matched against the whole schema.table
        "table.include.list": ",".join(re.escape(table.qualified) for table in config.tables),
        "unavailable.value.placeholder": config.placeholder,
        "snapshot.mode": "initial",
        # Debezium skips truncates unless told otherwise; the pipeline knows what to do with them.
        "skipped.operations": "none",
        # The S3 sink drops tombstones (behavior.on.null.values=ignore): none are made, so offsets stay consecutive.
        "tombstones.on.delete": "false",
        "provide.transaction.metadata": "true",
        "heartbeat.interval.ms": str(HEARTBEAT_MS),
        "message.prefix.include.list": MARKER_PREFIX,
        "poll.interval.ms": "200",
        "converter.schemas.enable": "true",
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.unwrap.add.fields": "op,source.ts_ms,source.lsn",
        "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
        "transforms.unwrap.predicate": "flattened",
        "predicates": "flattened",
        "predicates.flattened.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        # no flattened topic: a pattern no topic name matches
        "predicates.flattened.pattern": "|".join(re.escape(topic) for topic in flattened) or "(?!)",
    }
    if config.password:
        properties["database.password"] = config.password
    return properties


# ---------------------------------------------------------------------------------------------
# the running capture


@jpype.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer", deferred=True)
class _Consumer:
    """The engine's consumer: hands each batch to the capture; an error stops the engine."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.error: BaseException | None = None

    @jpype.JOverride
    def handleBatch(self, records, committer) -> None:  # noqa: N802 (the Java interface's name)
        try:
            self.capture.handle(records, committer)
        except BaseException as error:
            self.error = error
            log.error("capture: %s", error, exc_info=True)
            raise

    @jpype.JOverride
    def supportsTombstoneEvents(self) -> bool:  # noqa: N802
        return True

    # What pydbzengine's DebeziumEngine.run asks of its consumer.
    def set_change_handler(self, handler: object) -> None:
        pass

    def clear_error(self) -> None:
        self.error = None

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error


class _Engine(DebeziumEngine):
    """pydbzengine's engine with our consumer, which marks a record processed only once it landed."""

    def __init__(self, properties: dict[str, str], capture: Capture) -> None:
        super().__init__(properties=properties, handler=capture, format="json", jvm_opts=capture.jvm_options)
        self._capture = capture

    @functools.cached_property
    def consumer(self) -> _Consumer:
        ensure_jvm_started(jvm_opts=self.jvm_opts)
        return _Consumer(self._capture)


class Capture:
    """The state of one running capture: the sink, the records not yet landed, the drain markers."""

    def __init__(self, config: LiveConfig) -> None:
        self.config = config
        self.sink = ParquetSink(
            config.topics_root,
            {table.topic: table.partitions for table in config.tables},
            config.flush_size,
            config.rotate_ms,
        )
        self.pending: collections.deque = collections.deque()  # (record, landing, marker token or None)
        self.markers: list[str] = []
        self.phase = "starting"
        self.stop_requested = threading.Event()
        self.stopped_cleanly = threading.Event()
        self.offsets_copied: bytes | None = None
        self.jvm_options = [
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={LOG4J}",
            f"-Dcdc.live.log={config.log_file('capture')}",
        ]

    def handle(self, records, committer) -> None:
        """One batch from the engine: into the sink; then every record landed so far, in order, marked."""
        for record in records:
            topic = str(record.destination())
            key, value = record.key(), record.value()
            value = None if value is None else str(value)
            landing = self.sink.put(topic, None if key is None else str(key), value)
            token = None
            if topic == self.config.heartbeat_topic:
                self.phase = "streaming"
            elif topic == self.config.message_topic and value is not None:
                token = marker_token(value)
                if token:
                    self.sink.flush_all()  # everything before the marker lands now
            if ends_snapshot(record):
                self.sink.flush_all()  # the whole snapshot lands before the stream (the module's docstring)
            self.pending.append((record, landing, token))
        if self.stop_requested.is_set():
            self.sink.flush_all()
        else:
            self.sink.flush_due()
        while self.pending and self.pending[0][1].landed:
            record, _, token = self.pending.popleft()
            committer.markProcessed(record)
            if token:
                self.markers = [*self.markers, token][-MARKERS_KEPT:]
        committer.markBatchFinished()
        self._backup_offsets()
        self.write_state()
        if self.stop_requested.is_set() and not self.pending:
            self.stopped_cleanly.set()

    def write_state(self) -> None:
        state = {
            "pid": os.getpid(),
            "phase": self.phase,
            "updated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "files_written": self.sink.files_written,
            "records_written": self.sink.records_written,
            "records_buffered": self.sink.buffered(),
            "records_not_committed": len(self.pending),
            "next_offsets": self.sink.next_offsets(),
            "markers_landed": self.markers,
        }
        write_state(self.config.state_file, json.dumps(state, indent=2) + "\n")

    def _backup_offsets(self) -> None:
        """Kafka's FileOffsetBackingStore rewrites offsets.dat in place: a kill in the middle of that write
        would leave it unreadable. After each commit (complete when markBatchFinished returns) a copy is
        kept, renamed into place, which `restore_offsets` falls back to. A rewrite is told by the file's bytes
        (a few hundred), not by its size and mtime: offsets of the same length written within one tick of
        the file system's clock would leave the copy older than it needs to be."""
        try:
            content = self.config.offsets_file.read_bytes()
        except FileNotFoundError:
            return
        if content != self.offsets_copied:
            temporary = self.config.offsets_file.with_name(f".{self.config.offsets_file.name}.bak.tmp")
            temporary.write_bytes(content)
            os.replace(temporary, backup_file(self.config))
            self.offsets_copied = content


def ends_snapshot(record) -> bool:
    """The snapshot's last record: its source offset (Kafka Connect's, from the engine) says so."""
    offset = record.sourceRecord().sourceOffset()
    return offset is not None and str(offset.get("last_snapshot_record")).lower() == "true"


def marker_token(value: str) -> str | None:
    """The token of a drain marker (a logical decoding message with MARKER_PREFIX), else None."""
    message = (json.loads(value).get("payload") or {}).get("message") or {}
    if message.get("prefix") != MARKER_PREFIX or message.get("content") is None:
        return None
    return base64.b64decode(message["content"]).decode()


def backup_file(config: LiveConfig) -> Path:
    return config.offsets_file.with_name(config.offsets_file.name + ".bak")


def restore_offsets(config: LiveConfig) -> None:
    """Before the engine starts: an offsets file Java cannot read (a kill while it was rewritten) is
    replaced by the last copy (`Capture._backup_offsets`): older, so some changes come twice, none is lost."""
    if not config.offsets_file.exists() or _readable(config.offsets_file):
        return
    backup = backup_file(config)
    if backup.exists() and _readable(backup):
        log.warning("capture: %s was unreadable (a kill while it was written): using %s", config.offsets_file, backup)
        shutil.copyfile(backup, config.offsets_file)
        return
    raise SystemExit(
        f"capture: {config.offsets_file} is unreadable and has no readable copy: remove it to start again with a "
        "new snapshot (every row is delivered again)"
    )


def _readable(path: Path) -> bool:
    """Java can deserialize the offsets file (the JVM must run)."""
    stream = None
    try:
        stream = jpype.JClass("java.io.ObjectInputStream")(jpype.JClass("java.io.FileInputStream")(str(path)))
        stream.readObject()
        return True
    except jpype.JException:
        return False
    finally:
        if stream is not None:
            stream.close()


# ---------------------------------------------------------------------------------------------
# commands: run (foreground), start (detached), stop, drain, status


def running_pid(config: LiveConfig) -> int | None:
    """The PID in the capture's PID file if that process is alive and a live capture."""
    try:
        pid = int(config.pid_file.read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if "python_hooks live capture" in command else None


def read_state(config: LiveConfig) -> dict:
    try:
        return json.loads(config.state_file.read_text())
    except (OSError, ValueError):
        return {}


def _last_error(log_file: Path) -> str:
    """The last ERROR line of the capture's log, for a one-line refusal."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()[-400:]
    except OSError:
        return ""
    errors = [line for line in lines if " ERROR " in line or line.startswith("ERROR")]
    return errors[-1].split(": ", 1)[-1][:300] if errors else ""


def _detail_log(config: LiveConfig) -> None:
    """This process's log lines also go to the capture's log file (Debezium's lines are there too),
    unless its stderr is that file already (a detached capture)."""
    log_file = config.log_file("capture")
    log_file.touch()
    stderr, target = os.fstat(2), log_file.stat()
    if (stderr.st_dev, stderr.st_ino) == (target.st_dev, target.st_ino):
        return
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [python] %(name)s: %(message)s"))
    logging.getLogger("python_hooks").addHandler(handler)


def _where(config: LiveConfig) -> str:
    where = f"{config.pg_host}:{config.pg_port}/{config.database}"
    return where + (" (CDC_LIVE_CONFIG)" if config.external else f"  {config.postgres.pgdata}")


def _start_it(config: LiveConfig) -> str:
    return "start that server, or check CDC_LIVE_CONFIG's connection" if config.external else "`live pg-up` first"


def run(config: LiveConfig) -> int:
    """Capture until SIGTERM or Ctrl-C; 0 after a clean stop, 1 when the engine stopped by itself."""
    other = running_pid(config)
    if other and other != os.getpid():
        raise SystemExit(f"a live capture already runs for {config.folder} (pid {other}): `live capture-stop` first")
    if not source.running(config):
        raise SystemExit(f"the live source does not answer ({_where(config)}): {_start_it(config)}")
    for folder in (config.capture_dir, config.log_file("capture").parent):
        folder.mkdir(parents=True, exist_ok=True)
    config.pid_file.write_text(f"{os.getpid()}\n")
    _detail_log(config)
    capture = Capture(config)
    engine = _Engine(engine_properties(config), capture)
    ensure_jvm_started(jvm_opts=capture.jvm_options)
    restore_offsets(config)
    capture.write_state()
    resumed = "resuming from " + str(config.offsets_file) if config.offsets_file.exists() else "initial snapshot first"
    log.info(
        "capture: Debezium's PostgreSQL connector on %s:%d/%s (slot %s), %s; files in %s (flush.size %d, rotate %d ms)",
        config.pg_host,
        config.pg_port,
        config.database,
        config.slot,
        resumed,
        config.topics_root,
        config.flush_size,
        config.rotate_ms,
    )
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: capture.stop_requested.set())
    thread = threading.Thread(target=_run_engine, args=(engine,), name="debezium-engine", daemon=True)
    thread.start()
    closing = False
    while thread.is_alive():
        thread.join(0.5)
        if capture.stop_requested.is_set() and not closing:
            capture.stopped_cleanly.wait(5 * HEARTBEAT_MS / 1000)
            closing = True
            engine.close()
    capture.phase = "stopped"
    capture.write_state()
    config.pid_file.unlink(missing_ok=True)
    summary = (
        f"{capture.sink.files_written} files, {capture.sink.records_written} records written to {config.topics_root}; "
        f"log {config.log_file('capture')}"
    )
    if capture.stop_requested.is_set():
        log.info("capture: stopped (%s)", summary)
        return 0
    reason = _last_error(config.log_file("capture")) or "see the log"
    log.error("capture: the engine stopped by itself: %s (%s)", reason, summary)
    return 1


def _run_engine(engine: _Engine) -> None:
    try:
        engine.run()
    except Exception as error:  # the engine's or the consumer's error: logged, run() reports it
        log.error("capture: %s", error)


def start(config: LiveConfig) -> int:
    """Start a capture in the background (its output to the capture's log) and wait until it streams."""
    pid = running_pid(config)
    if pid:
        log.info("capture: already running (pid %d); log %s", pid, config.log_file("capture"))
        return pid
    if not source.running(config):
        raise SystemExit(f"the live source does not answer ({_where(config)}): {_start_it(config)}")
    config.log_file("capture").parent.mkdir(parents=True, exist_ok=True)
    config.state_file.unlink(missing_ok=True)
    with config.log_file("capture").open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "python_hooks", "live", "capture"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the shell that started it does not stop it
        )
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            reason = _last_error(config.log_file("capture")) or "see the log"
            raise SystemExit(f"capture: stopped while starting: {reason} ({config.log_file('capture')})")
        if read_state(config).get("phase") == "streaming":
            log.info(
                "capture: streaming (pid %d); files in %s; log %s",
                process.pid,
                config.topics_root,
                config.log_file("capture"),
            )
            return process.pid
        time.sleep(0.5)
    raise SystemExit(
        f"capture: not streaming after {START_SECONDS} s (pid {process.pid}): see {config.log_file('capture')}"
    )


def stop(config: LiveConfig) -> None:
    """Stop the capture by PID: SIGTERM (its open files written, offsets committed), SIGKILL after STOP_SECONDS."""
    pid = running_pid(config)
    if pid is None:
        config.pid_file.unlink(missing_ok=True)
        log.info("capture: not running (%s)", config.folder)
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline and running_pid(config):
        time.sleep(0.2)
    if running_pid(config):
        log.warning("capture (pid %d) did not stop within %d s: killed", pid, STOP_SECONDS)
        os.kill(pid, signal.SIGKILL)
        config.pid_file.unlink(missing_ok=True)
    log.info("capture: stopped (pid %d); files in %s", pid, config.topics_root)


def drain(config: LiveConfig, seconds: float) -> float:
    """Wait until every change committed so far is in a file; returns the seconds it took."""
    if running_pid(config) is None:
        raise SystemExit(f"no live capture runs for {config.folder}: `live capture --detach` first")
    started = time.monotonic()
    token = uuid.uuid4().hex
    source.query(config, f"select pg_logical_emit_message(true, '{MARKER_PREFIX}', '{token}')")
    while time.monotonic() - started < seconds:
        if token in read_state(config).get("markers_landed", []):
            return time.monotonic() - started
        if running_pid(config) is None:
            raise SystemExit(f"the live capture stopped while draining: see {config.log_file('capture')}")
        time.sleep(0.2)
    raise SystemExit(
        f"the live capture did not land the changes within {seconds:.0f} s: see {config.log_file('capture')}"
    )


def status(config: LiveConfig) -> bool:
    """One line per part; True when the source and a capture run."""
    pg = source.running(config)
    print(f"source    {'running' if pg else 'stopped':<8} {_where(config)}")
    if pg:
        print(f"slot      {source.slot_lag(config) or f'none yet (the first capture makes {config.slot})'}")
    for table in config.tables:
        seen = "truncates not seen" if table.shape == "flattened" else "truncates applied"
        print(
            f"table     {table.qualified} key ({', '.join(table.key)}), {table.shape} ({seen}),"
            f" {table.partitions} partition(s): {config.topic_dir(table.topic)}"
        )
    pid = running_pid(config)
    state = read_state(config)
    print(f"capture   {f'running (pid {pid})' if pid else 'stopped':<8} {state.get('phase', '-')}")
    if state:
        print(
            f"files     {state.get('files_written', 0)} written by its last run "
            f"({state.get('records_written', 0)} records), {state.get('records_buffered', 0)} records in open files; "
            f"{config.topics_root}"
        )
    print(f"offsets   {config.offsets_file}\nlogs      {config.log_file('capture').parent}")
    return pg and pid is not None

"""The last lines of `make run` (python_hooks.pipeline.run_summary), from dbt results as dbtRunner returns them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from python_hooks.commands.summary import WHAT_TO_DO, run_summary, spark_file_error
from python_hooks.project.session import META_FAILED, SessionError, create_meta_tables


def _result(*nodes: tuple[str, str, str | None], exception=None):
    def node(name: str) -> SimpleNamespace:
        return SimpleNamespace(name=name, resource_type="test" if name.startswith("not_null") else "model")

    results = [SimpleNamespace(status=s, node=node(n), message=m) for n, s, m in nodes]
    return SimpleNamespace(
        result=SimpleNamespace(results=results) if exception is None else None,
        exception=exception,
        success=exception is None and all(s in ("success", "pass") for _, s, _ in nodes),
    )


def test_a_clean_run_says_nothing_more():
    assert run_summary(_result(("a", "success", "OK"), ("t", "pass", None)), [], set()) == []


def test_refusals_and_failures_come_last_with_what_to_do():
    message = (
        "Compilation Error in model crm__customer_address (models/current_state/crm/crm__customer_address.sql)\n"
        "  cdc_current_state refused the batch for `s`.`t`; nothing was applied and the table is unchanged:\n"
        "    raw file 20261103-120000000.parquet: 2 change event(s) with unknown operation 'X'\n\n"
        "    > in macro cdc_validate_batch (macros/cdc/merge.sql)\n"
    )
    lines = run_summary(
        _result(("crm__customer_master", "success", "OK"), ("crm__customer_address", "error", message),
                ("customer_snapshot", "skipped", None), ("not_null_x", "skipped", None)),
        ["crm__x: column city: string -> int is not a safe change"],
        {"crm__x", "stg_crm__x"},
    )  # fmt: skip
    assert lines[0] == "this run refused or failed 2 thing(s); every other table was built:"
    assert lines[1] == "refused: crm__x: column city: string -> int is not a safe change"
    assert lines[2] == "not built this run: crm__x, stg_crm__x"
    assert lines[3].startswith("failed: crm__customer_address: cdc_current_state refused the batch for `s`.`t`")
    assert lines[4] == "  raw file 20261103-120000000.parquet: 2 change event(s) with unknown operation 'X'"
    assert lines[5] == "skipped (they depend on the above): customer_snapshot"
    assert lines[-1] == WHAT_TO_DO and len(lines) == 7
    assert not any("Compilation Error" in line for line in lines)


def test_a_build_that_did_not_start_is_named():
    lines = run_summary(_result(exception=RuntimeError("Could not connect")), [], set())
    assert lines[1] == "failed: dbt build: Could not connect"


def test_a_run_with_nothing_new_ran_no_build_and_reports_nothing():
    from dbt.cli.main import dbtRunnerResult

    assert run_summary(dbtRunnerResult(success=True), [], set()) == []


def test_a_spark_plan_stays_in_the_log():
    message = (
        "Runtime Error\n  [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `x` cannot be resolved.; line 7 pos 44;\n"
        "  'Sort ['_cdc_source_file ASC NULLS FIRST], true\n  +- 'Project [*]\n"
    )
    lines = run_summary(_result(("m", "error", message)), [], set())
    assert lines[1] == "failed: m: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `x` cannot be resolved.; line 7 pos 44;"
    assert lines[2] == WHAT_TO_DO


def test_a_long_refusal_is_cut():
    message = "cdc_current_state refused the batch\n" + "\n".join(f"raw file f{i}: bad" for i in range(30))
    lines = run_summary(_result(("m", "error", message)), [], set())
    assert len(lines) == 1 + 12 + 1 and lines[-2] == "  ... (20 more lines in logs/dbt.log)"


def test_an_s3_failure_spark_met_is_the_one_line_the_python_side_says(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    message = (
        "Runtime Error in model crm__t (models/current_state/crm/crm__t.sql)\n"
        "  An error occurred while calling o41.sql.\n"
        "  : java.nio.file.AccessDeniedException: s3a://lake/landing/dms/crm/t: getFileStatus on"
        " s3a://lake/landing/dms/crm/t: com.amazonaws.services.s3.model.AmazonS3Exception: Forbidden"
        " (Service: Amazon S3; Status Code: 403; Error Code: 403 Forbidden)\n"
        "  \tat org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:255)\n"
    )
    lines = run_summary(_result(("crm__t", "error", message)), [], set())
    assert lines[1] == (
        "failed: crm__t: S3 at http://127.0.0.1:9 refused bucket lake (AccessDenied) with the keys of"
        " AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: check both variables (and AWS_REGION)"
    )
    assert lines[2] == WHAT_TO_DO


def test_the_state_tables_refused_on_s3_are_the_one_line_the_python_side_says(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    monkeypatch.setenv("CDC_WAREHOUSE", "s3a://lake/warehouse")
    said = (
        "org.apache.hadoop.hive.ql.metadata.HiveException: MetaException(message:Got exception:"
        " java.nio.file.AccessDeniedException s3a://lake/warehouse/s_cdc_meta.db: getFileStatus on"
        " s3a://lake/warehouse/s_cdc_meta.db: com.amazonaws.services.s3.model.AmazonS3Exception: Forbidden"
        " (Service: Amazon S3; Status Code: 403; Error Code: 403 Forbidden)"
    )

    class Runner:
        def __init__(self, message: str) -> None:
            self.message = message

        def invoke(self, args):
            results = [SimpleNamespace(message=self.message)]
            return SimpleNamespace(success=False, exception=None, result=SimpleNamespace(results=results))

    with pytest.raises(SessionError) as refused:
        create_meta_tables(Runner(said), [])
    assert str(refused.value) == (
        "S3 at http://127.0.0.1:9 refused bucket lake (AccessDenied) with the keys of AWS_ACCESS_KEY_ID /"
        " AWS_SECRET_ACCESS_KEY: check both variables (and AWS_REGION)"
    )
    with pytest.raises(SessionError) as other:
        create_meta_tables(Runner("Database Error: something else"), [])
    assert str(other.value) == META_FAILED


def test_a_raw_file_spark_cannot_read_is_one_line_naming_file_and_table():
    """Spark's words for an unreadable data page fail every node that reads the file (the staging view's
    tests first): one line for them all, naming the file and its table, in words (issue 29)."""
    folder = "/tmp/l and 'q'/dms/crm/customer_address"
    message = (
        "Runtime Error in test not_null_stg_crm__customer_address__cdc_seq (models/staging/crm/_crm__models.yml)\n"
        "  An error occurred while calling o556.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1788.0 failed 1 times,"
        " most recent failure: Lost task 0.0: org.apache.spark.SparkException: Encountered error while reading file"
        f" file://{folder.replace(' ', '%20')}/20261103-101000000.parquet. Details:\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(QueryExecutionErrors.scala:863)\n"
        "Caused by: java.io.IOException: FAILED_TO_UNCOMPRESS(5)\n"
    )
    table = SimpleNamespace(
        folder=folder,
        model="crm__customer_address",
        staging_model="stg_crm__customer_address",
        source="crm.customer_address",
    )
    other = SimpleNamespace(
        folder="/tmp/l/dms/crm/customer_master", model="crm__customer_master", staging_model="stg_x", source="crm.x"
    )
    result = _result(("not_null_stg_crm__customer_address__cdc_seq", "error", message),
                     ("expression_is_true_stg_crm__customer_address__cdc_seq", "error", message),
                     ("accepted_values_stg_crm__customer_address__op", "error",
                      "An error occurred while calling o1198.collectToPython.\n: org.apache.spark.SparkException: x"),
                     ("crm__customer_address", "skipped", None))  # fmt: skip
    # the third test's Spark message names no file: it reads the same staging view, so it joins the line
    result.result.results[2].node.depends_on = SimpleNamespace(nodes=["model.p.stg_crm__customer_address"])
    lines = run_summary(result, [], set(), [other, table])
    naming = [line for line in lines if "20261103-101000000.parquet" in line]
    assert naming == [
        f"failed: crm__customer_address (source crm.customer_address): raw file {folder}/20261103-101000000.parquet"
        " could not be read: its Parquet pages or footer do not decode (damaged in storage or by its producer, or"
        " cut short), or a Hadoop checksum file beside it (.<name>.crc) is damaged; nothing of the batch was"
        " applied. Replace it with a good copy under the same name (and delete a stale .crc), or delete it"
        " (Spark says: FAILED_TO_UNCOMPRESS(5)); it failed not_null_stg_crm__customer_address__cdc_seq,"
        " expression_is_true_stg_crm__customer_address__cdc_seq, accepted_values_stg_crm__customer_address__op"
    ], lines
    assert not any("o556" in line or "o1198" in line or "org.apache" in line for line in lines), lines


# Spark 3.5's words when a raw file is gone between the run's listing and its read (from a real run: a file
# of a DataFrame deleted before its collect), and Hadoop's local file system's for a file it may not read.
_GONE = (
    "An error occurred while calling o654.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, most"
    " recent failure: Lost task 0.0 in stage 1.0 (TID 1) (192.0.2.2 executor driver):"
    " org.apache.spark.SparkFileNotFoundException: File file:{file} does not exist\n"
    "It is possible the underlying files have been updated. You can explicitly invalidate the cache in Spark by"
    " running 'REFRESH TABLE tableName' command in SQL or by recreating the Dataset/DataFrame involved.\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.readCurrentFileNotFoundError("
    "QueryExecutionErrors.scala:781)\n"
)
_DENIED = (
    "An error occurred while calling o654.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, most"
    " recent failure: Lost task 0.0 in stage 1.0 (TID 1) (192.0.2.2 executor driver):"
    " org.apache.spark.SparkFileNotFoundException: {file} (Permission denied)\n"
    "It is possible the underlying files have been updated. You can explicitly invalidate the cache in Spark by"
    " running 'REFRESH TABLE tableName' command in SQL or by recreating the Dataset/DataFrame involved.\n"
)


@pytest.mark.parametrize(
    ("spark_said", "words"),
    [
        (_GONE, "is gone since the run listed it (deleted or moved while the run ran)"),
        (_DENIED, "cannot be read: permission denied to the user running Spark"),
    ],
    ids=["gone", "permission-denied"],
)
def test_a_raw_file_gone_or_denied_when_spark_reads_it_is_one_line_naming_it(spark_said: str, words: str):
    """The staging view's data tests, each 'An error occurred while calling o654.collectToPython' (issue 43):
    one line for them all naming the file and the table, in words, and what to do."""
    folder = "/tmp/l and 'q'/dms/crm/customer_address"
    file = f"{folder}/20261103-101000000.parquet"
    table = SimpleNamespace(
        folder=folder,
        model="crm__customer_address",
        staging_model="stg_crm__customer_address",
        source="crm.customer_address",
    )
    tests = [f"not_null_stg_crm__customer_address__{c}" for c in ("cdc_seq", "cdc_ts", "cdc_op", "customer_id")]
    result = _result(
        *[(t, "error", spark_said.format(file=file)) for t in tests], ("crm__customer_address", "skipped", None)
    )
    lines = run_summary(result, [], set(), [table])
    naming = [line for line in lines if "20261103-101000000.parquet" in line]
    assert len(naming) == 1, lines
    assert naming[0].startswith(f"failed: crm__customer_address (source crm.customer_address): raw file {file} ")
    assert words in naming[0] and f"it failed {tests[0]}, {tests[1]}, {tests[2]} and 1 more" in naming[0], naming
    assert not any("o654" in line or "org.apache" in line for line in lines), lines
    assert lines[-1] == WHAT_TO_DO


def test_a_damaged_checksum_file_spark_meets_unwrapped_is_one_line_naming_file_and_table():
    """Hadoop's local file system checks a .crc beside the file; a staging test meets it without Spark's
    'Encountered error while reading file' (found by the fuzz corpus, damaged_crc): still one worded line."""
    folder = "/tmp/landing/dms/crm/customer_address"
    message = (
        "  An error occurred while calling o17351.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 6095.0 failed 1 times,"
        " most recent failure: Lost task 0.0 (TID 5737) (192.0.2.2 executor driver):"
        f" org.apache.hadoop.fs.ChecksumException: Checksum error: file:{folder}/20261103-101000000.parquet at 0"
        " exp: -735932489 got: 1369772809\n"
    )
    table = SimpleNamespace(
        folder=folder, model="crm__customer_address", staging_model="stg_crm__customer_address", source="crm.x"
    )
    found = spark_file_error(message, [table])
    assert found is not None, message
    model, line = found
    assert model == "crm__customer_address"
    assert "20261103-101000000.parquet" in line and ".crc" in line and "nothing of the batch was applied" in line
    assert "ChecksumException" not in line and "o17351" not in line
    assert spark_file_error(message.replace("ChecksumException: Checksum error", "IOException: other"), [table]) is None


class _Writes:
    """A console that keeps each write() apart, as a terminal receives them."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def _model_result(name: str, status: str = "applied; recorded at the end of the run"):
    node = SimpleNamespace(node_name=name)
    return SimpleNamespace(
        info=SimpleNamespace(name="LogModelResult"),
        data=SimpleNamespace(node_info=node, status=status, execution_time=1.25),
    )


def test_progress_writes_each_line_whole_from_many_threads():
    """dbt's threads report at once: each table's line is one write ending in its newline (print() writes
    the newline apart, and two threads' lines came out as one line and an empty one)."""
    import threading

    from python_hooks.commands.run import Progress

    console = _Writes()
    progress = Progress(stream=console)
    names = [f"t{n:02d}" for n in range(40)]
    progress.tables = set(names)
    threads = [threading.Thread(target=progress, args=(_model_result(name),)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    line = "  {}: applied; recorded at the end of the run (1.2 s)\n"
    assert sorted(console.writes) == sorted(line.format(name) for name in names)
    assert progress.done == 40

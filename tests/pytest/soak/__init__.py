"""`make soak`: a simulated day of the pipeline, as a scheduler runs it (issue 29, part 3).

    PYTHONPATH=.:tests/pytest .venv/bin/python -m soak        (make soak)

SOAK_TABLES (20) tables, half DMS and half Debezium (soak/producers.py), are added to a copy of the
project's dbt files with `add-source` (soak/project.py). Then, minute by minute for SOAK_MINUTES (1440)
simulated minutes, as fast as the machine goes: one raw file per table per minute as its producer writes
it, late files and re-delivered ones; `python -m python_hooks run` (`make run`) every SOAK_RUN_EVERY (5)
minutes, SOAK_KILL_RATE (1 %) of the runs killed with SIGKILL at a random kill point of a random table
(or the runs SOAK_KILL_RUNS names); `python -m python_hooks maintain` (`make maintain`) every
SOAK_MAINTAIN_EVERY (60) minutes; one column added at the source of table 1 (SOAK_SCHEMA_CHANGE_AT,
40 % of the day) and one subject erased (`erase`, SOAK_ERASE_AT, the run minute nearest 60 %). The
commands are the project's own, on the embedded target with the soak's own warehouse, landing root and
schema, under SOAK_WORK (target/soak). SOAK_MODE says how a scheduler starts them (soak/commands.py):
`loop` (the default) in one long-lived process, as `run --every --maintain-every` runs all day, started
again after a kill, as a supervisor starts a loop again; `processes` each in a process of its own, as cron
starts `make run`.

At the end (soak/checks.py): every table equals the pure-Python replay, the batch log equals the replay's
counts, storage is within the retention settings, run time is flat, the schema change and the erasure
happened. The work folder then holds runs.jsonl, run_seconds.png and report.md (soak/report.py).

The day is accelerated, so a retention of 7 days would keep every snapshot of the soak: the copy sets the
time window of the models' `cdc_retention` to SOAK_RETENTION_DAYS (0) and keeps its count (keep_last 10),
which is then what the storage check holds each table to. The pipeline's meta tables keep the code's
default window (7 days): their snapshots are reported, not bounded. Other knobs: SOAK_SEED (29),
SOAK_ROWS (200 full-load rows per table), SOAK_CHANGES (6 changes per table per minute), SOAK_FLAT_FACTOR
(1.5), SOAK_RUN_TIMEOUT (1800 s per command), SOAK_MODE (loop).
"""

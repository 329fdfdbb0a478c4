"""Sample raw change files, written exactly as AWS DMS and Debezium write them.

Their times are fixed dates, 2026-11-01 to 2026-11-06 UTC, which tests and replays rely on. With
CDC_SAMPLE_TIMES=now (what `make demo` sets: `CDC_SAMPLE_TIMES=now python -m sample_data.demo`)
every timestamp written is moved to just before the moment the process started writing, keeping
the order and ties of all of them and the spacing within each stretch of changes, so that
`dbt source freshness` passes on the demo's data (sample_data/clock.py says how).
"""

"""Python run around dbt (`python -m python_hooks --help`), in layers; imports go one way, down
(`make lint` checks it: the import-linter contract in .importlinter):

cli            the command line: one click group, each command a few lines
commands/      run (the pipeline), status, maintain, docs (+ docs_coverage), add_source, personal_data
               (erase / rectify), environment; summary (a run's last lines)
cluster/       the shared target on this machine: config, processes, metastore, spark, launcher
objectstore/   a local S3 server on this machine (SeaweedFS): server (up, down, status)
live/          a live PostgreSQL source captured by Debezium's embedded engine: config, source, capture, sink,
               workload, compare, latency
personal_data/ a data subject erased or rectified: subjects, raw_files, registers, erase, rectify
sources/       a new source table from its landing folder: model, raw_table, yml, add_source
evolution/     schema evolution before dbt: footers, types, the pure plan, apply
landing/       the landing zone: THE listing rule, delivery order, empty files, files waiting
project/       the seam to everything else: env (defaults, the venv start-up hook), embedded_lock,
               dbt_args, session (one parse, meta tables, one warehouse per command), warehouse (SQL
               through the dbt adapter), tables (CdcTable from the manifest), producers (the only
               reader of a source's producer settings), meta (the pipeline's own tables), sql (quoting),
               iceberg (Iceberg's procedures), faults (kill points), object_store (the standard AWS
               variables, a pyarrow S3 filesystem from them, the local S3 server's state), storage
               (a landing location on this machine or on S3: listed, opened, joined), postgres (a
               private PostgreSQL server: started, psql, stopped by PID)
"""

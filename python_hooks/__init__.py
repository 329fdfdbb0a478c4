"""Python run around dbt, one module per job (`python -m python_hooks --help`):

env            environment defaults for dbt, applied by the venv's start-up hook
embedded_lock  one process at a time on the embedded warehouse, refused in one line
warehouse      the one seam to the warehouse: SQL through the dbt adapter of the target
footers, schema_plan, evolve   schema evolution of the current-state tables from raw Parquet footers
pipeline       `make run`: the hooks, then `dbt build`
maintain       `make maintain`: compaction, manifest rewrite, snapshot expiry, orphan-file removal
status         `make status`: where each table stands, from the batch log; the table that ends a run
add_source     `python -m python_hooks add-source`: a new source table in one command
docs           `make docs`: the dbt docs site with live row counts, the docs coverage check
erase          right to be forgotten: a data subject erased from tables, raw files and older snapshots
cluster        `make cluster-up|down|status`: the shared target on this machine
"""

{#- The pipeline's own state, in Iceberg tables of the `<target schema>_cdc_meta` schema:
    - cdc_file_ledger: which raw files each current-state model has applied (an optimisation:
      a file in the ledger is not read again; correctness never depends on it);
    - cdc_tombstones: the newest delete seen per key, so that a late, older change cannot bring
      a deleted row back (the current-state tables hard-delete);
    - schema_evolution_log: every column the Python hooks added or promoted;
    - cdc_raw_file_groups: raw files Spark must read apart because they disagree on a column's
      type (written by the hooks, read by staging);
    - erasure_register: the keyed hash of every erased data subject key, and rectification_register:
      the keyed hash of every rectified old value with its correction, which staging consults
      (macros/cdc/erasure.sql); erasure_log: what each erasure or rectification did, no personal data
      (python_hooks/personal_data/);
    - cdc_batch_log: one row per current-state model per run that had raw files to apply: what the
      batch read, what it did to the table, what it ignored and why, what was refused, and the lag
      (macros/cdc/batch_log.sql; docs: models/pipeline/_cdc_meta__sources.yml).
    Created by `on-run-start`; safe to run any number of times. `make run` creates them only when one is
    missing (python_hooks/project/session.py: its one listing of the schema) and then hands
    CDC_META_READY=1 to its dbt build, whose on-run-start creates nothing. -#}

{% macro cdc_meta_schema() -%}
    {{ return(target.schema ~ '_cdc_meta') }}
{%- endmacro %}


{% macro cdc_meta_relation(identifier) -%}
    {{ return(api.Relation.create(schema=cdc_meta_schema(), identifier=identifier, type='table')) }}
{%- endmacro %}


{% macro cdc_meta_ready() -%}
    {#- Whether the run's hooks made sure every meta table exists (`make run`'s build, either target:
        CDC_META_READY=1, python_hooks/project/meta.py). -#}
    {{ return(env_var('CDC_META_READY', '') == '1') }}
{%- endmacro %}


{% macro cdc_meta_table_exists(identifier) -%}
    {#- Whether meta table `identifier` exists. In `make run`'s build (either target) the hooks' session
        made sure every one does (cdc_meta_ready): no statement. Otherwise dbt looks it up, which lists
        the whole meta schema (`show table extended`, not kept in dbt's cache: seconds a call on the cluster,
        where the meta schema holds a raw table per staging model). -#}
    {%- if cdc_meta_ready() -%}
        {{ return(true) }}
    {%- endif -%}
    {{ return(load_relation(cdc_meta_relation(identifier)) is not none) }}
{%- endmacro %}


{% macro cdc_meta_table_definitions() -%}
    {#- Each meta table: its name, its columns (SQL) and whether it is partitioned by model_name (one file per
        model per write: a batch reads only its model's ledger and tombstone rows, and a model's files of the
        ledger, tombstones and batch log are compacted together, cdc_compact_meta). -#}
    {{ return([
        ('cdc_file_ledger', [
            'model_name string',
            'file_name string',
            'change_events bigint',
            'invocation_id string',
            'applied_at timestamp'
        ], true),
        ('cdc_tombstones', [
            'model_name string',
            'key_json string',
            '_cdc_ts timestamp',
            '_cdc_seq string',
            '_cdc_source_file string',
            'recorded_at timestamp'
        ], true),
        ('schema_evolution_log', [
            'run_id string',
            'table_name string',
            'column_name string',
            'action string',
            'old_type string',
            'new_type string',
            'applied_at timestamp'
        ], false),
        ('cdc_raw_file_groups', [
            'staging_model string',
            'group_id int',
            'file_names array<string>',
            'column_types string'
        ], false),
        ('erasure_register', [
            'subject string',
            'key_hash string',
            'erased_at timestamp'
        ], false),
        ('rectification_register', [
            'subject string',
            'key_hash string',
            'column_name string',
            'value_hash string',
            'new_value string',
            'rectified_at timestamp'
        ], false),
        ('erasure_log', [
            'run_id string',
            'action string',
            'subject string',
            'key_hashes array<string>',
            'reason string',
            'started_at timestamp',
            'finished_at timestamp',
            'tables_touched array<string>',
            'rows_changed map<string, bigint>',
            'raw_files_rewritten array<string>',
            'snapshots_expired bigint',
            'files_removed bigint'
        ], false),
        ('cdc_batch_log', [
            'run_id string',
            'model_name string',
            'status string',
            'build_mode string',
            'started_at timestamp',
            'finished_at timestamp',
            'seconds double',
            'files bigint',
            'change_events bigint',
            'rows_inserted bigint',
            'rows_updated bigint',
            'rows_deleted bigint',
            'ignored_older bigint',
            'ignored_redelivered bigint',
            'ignored_tombstoned bigint',
            'ignored_truncated bigint',
            'superseded bigint',
            'deletes_without_row bigint',
            'truncates bigint',
            'files_refused bigint',
            'refusal string',
            'newest_commit_at timestamp',
            'lag_seconds double',
            'snapshot_id bigint'
        ], true)
    ]) }}
{%- endmacro %}


{% macro cdc_create_meta_tables() %}
    {%- if execute and not cdc_meta_ready() -%}
        {%- do cdc_execute('create database if not exists ' ~ cdc_meta_schema()) -%}
        {#- One listing of the schema's table names (the metastore's, no table loaded): a table that exists
            costs no statement, so a plain `dbt run`/`build`/`test` sends two statements here, not nine. A
            table created meanwhile by another run is left as it is (`if not exists`). -#}
        {%- set present = run_query('show tables in ' ~ cdc_meta_schema()).columns[1].values() | map('lower') | list -%}
        {%- for identifier, columns, partitioned in cdc_meta_table_definitions() if identifier not in present -%}
            {%- do cdc_execute(
                'create table if not exists ' ~ cdc_meta_relation(identifier) ~ ' (' ~ columns | join(', ') ~ ')'
                ~ ' using iceberg' ~ (' partitioned by (model_name)' if partitioned else '')
                ~ " tblproperties ('format-version' = '2')"
            ) -%}
        {%- endfor -%}
    {%- endif -%}
    {#- The hook's own SQL is empty (its statements ran above): dbt runs no statement for it. -#}
{% endmacro %}

{#- The batch log, `<schema>_cdc_meta.cdc_batch_log`: one row per current-state model per run that
    had raw files to apply (docs: models/pipeline/_cdc_meta__sources.yml): written at the end of the model's
    batch, or in `make run` once per run for every batch (cdc_account, python_hooks/commands/accounting.py).

    What a batch did, counted by the same queries that apply it (macros/cdc/merge.sql, validation.sql):
      - every change event of the batch's files is counted once, by what became of it: a truncate;
        superseded by a newer change of its key in the batch; a copy of another event of the batch
        (re-delivered); older than a truncate (ignored_truncated); older than its key's delete
        recorded by an earlier batch (ignored_tombstoned); and, for the last change of each key,
        compared with the key's row: older (ignored_older), the same event again (re-delivered), a
        delete with no row to delete, or an insert, update or delete of a row;
      - rows_deleted adds the rows a truncate removed.

    When it is written, so that it never claims what did not happen: after the table's commit (and
    the batch's tombstones), before the ledger records the batch's files. A run killed before its
    row leaves no row (in `make run`, for no table of its build); if the table had committed, the next
    run reads the same files (they are not in the ledger) and logs their changes as re-delivered: the
    table already holds them. A refused batch writes a row with status 'refused' (nothing else: no
    table commit, no ledger entry). A run with nothing new writes no row: a scheduler calling every few
    minutes commits nothing. -#}

{% macro cdc_batch_counts(files) %}
    {#- The batch-level counts, summed over the batch's files (the rows of cdc_batch_files_sql,
        macros/cdc/merge.sql): change_events, truncates, redelivered, superseded, ignored_truncated,
        ignored_tombstoned, newest_commit_at, last_deletes (the last changes per key that are
        deletes), and each file's change events (file_events, for the ledger). -#}
    {%- set counts = {'file_events': {}} -%}
    {%- for name in ['change_events', 'truncates', 'redelivered', 'superseded', 'ignored_truncated',
            'ignored_tombstoned', 'last_deletes'] -%}
        {%- do counts.update({name: files | map(attribute=name) | map('int') | sum}) -%}
    {%- endfor -%}
    {%- set newest = files | map(attribute='newest_commit_at') | reject('none') | list -%}
    {%- do counts.update({'newest_commit_at': newest | max if newest else none}) -%}
    {%- for row in files -%}
        {%- do counts.file_events.update({row['_cdc_source_file']: row['change_events'] | int}) -%}
    {%- endfor -%}
    {{ return(counts) }}
{% endmacro %}


{% macro cdc_stash_outcome(record, outcome) %}
    {#- Keeps what the merge counted in the batch's record (cdc_stage_batch), for the log row
        (cdc_batch_log_row), the run's table (cdc_run_table_row) and the ledger (each file's change
        events, `file_events`): the counts as plain values by column name (`record.counts`; the newest
        commit as text), no relation and no view. -#}
    {%- set counts = {} -%}
    {%- for name, value in outcome.items() -%}
        {%- if name == 'newest_commit_at' -%}
            {%- do counts.update({name: (value ~ '') if value is not none else none}) -%}
        {%- elif name == 'file_events' -%}
            {%- do record.update({'file_events': value}) -%}
        {%- else -%}
            {%- do counts.update({name: value | int}) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- do record.update({'counts': counts}) -%}
{% endmacro %}


{% macro cdc_run_table_row(record, refused=none) %}
    {#- What the table that ends `make run` says of the batch (python_hooks/commands/status.py: run_table),
        by the batch log's column names, as plain values: the run prints it from the line the batch logs
        (cdc_account), so it reads no table. -#}
    {%- if refused -%}
        {{ return({'status': 'refused', 'files_refused': refused.files | int}) }}
    {%- endif -%}
    {%- set row = {'status': 'applied', 'files_refused': 0} -%}
    {%- do row.update(record.counts) -%}
    {{ return(row) }}
{% endmacro %}


{% macro cdc_outcome(batch, classified=none, rows_truncated=0) %}
    {#- The log row's counts: `batch` from cdc_batch_counts; `classified` the counts of the last
        changes by their outcome against the table (a dict, from step 5 of the merge; on a full
        build, where the table was empty, inserts and deletes without a row). -#}
    {%- set c = classified or {} -%}
    {{ return({
        'change_events': batch.change_events,
        'truncates': batch.truncates,
        'rows_inserted': c.get('insert', 0),
        'rows_updated': c.get('update', 0),
        'rows_deleted': c.get('delete', 0) + rows_truncated,
        'ignored_older': c.get('older', 0),
        'ignored_redelivered': batch.redelivered + c.get('redelivered', 0),
        'ignored_tombstoned': batch.ignored_tombstoned,
        'ignored_truncated': batch.ignored_truncated,
        'superseded': batch.superseded,
        'deletes_without_row': c.get('no_row', 0),
        'newest_commit_at': batch.newest_commit_at,
        'file_events': batch.file_events,
    }) }}
{% endmacro %}


{% macro cdc_accounting_deferred() -%}
    {#- Pure, from a fact handed over: `make run` writes every batch's batch-log row and ledger rows
        once per run, after its dbt build, one INSERT into each table for all of them
        (CDC_ACCOUNTING=run; python_hooks/commands/accounting.py), so a model node commits only its
        own table (and its tombstones). A plain dbt command writes them at the end of each batch. -#}
    {{ return(env_var('CDC_ACCOUNTING', '') == 'run') }}
{%- endmacro %}


{% macro cdc_account(target, log_row, ledger_rows=none, tombstones=[], tombstone_rows=[], reset=false, ledger_files=none, run_table_row=none) %}
    {#- Records a batch: its batch-log row (cdc_batch_log_row: literals, one per column in the table's order;
        deferred, without the table's snapshot_id, which the run adds), then its ledger rows (cdc_ledger_rows,
        each a list of literals), now (the ledger's INSERT is the statement dbt reports for the model) or,
        deferred, as a line the run collects (python_hooks/commands/accounting.py: ACCOUNTING_PREFIX), with
        its tombstones (merge.sql: cdc_record_tombstones; as rows of literals, `tombstone_rows`, or as
        SELECTs of a folder it spooled, `tombstones`), whether the model's
        ledger and tombstone rows of before go first (`reset`: a table created empty in this run) and the
        raw file names its ledger rows hold (`ledger_files`: the run's ledger cache follows them) and what the
        run's table says of it (`run_table_row`, cdc_run_table_row). The run
        inserts every batch's rows as one VALUES list per table: a union of hundreds of SELECTs was a Spark
        task per SELECT (bench/TUNING.md, round 22). -#}
    {%- if cdc_accounting_deferred() -%}
        {#- `meta_files`: when the run compacts the model's partitions of the meta tables (cdc_compaction). -#}
        {%- set compaction = cdc_compaction_settings() -%}
        {{ log('cdc-accounting: ' ~ tojson({'model': target.identifier, 'schema': target.schema,
            'batch_log': log_row, 'ledger': ledger_rows,
            'ledger_files': ledger_files, 'tombstones': tombstones, 'tombstone_rows': tombstone_rows, 'reset': reset,
            'run_table_row': run_table_row,
            'meta_files': compaction.meta_files if compaction.enabled else none})) }}
    {%- else -%}
        {%- do cdc_execute('insert into ' ~ cdc_meta_relation('cdc_batch_log') ~ ' select ' ~ (log_row | join(', '))
            ~ ', snapshot.snapshot_id from (select max(refs.snapshot_id) as snapshot_id from ' ~ target
            ~ ".refs as refs where refs.name = 'main') as snapshot") -%}
        {%- if ledger_rows -%}
            {%- call statement('main') -%}
                insert into {{ cdc_meta_relation('cdc_file_ledger') }} {{ cdc_values_sql(ledger_rows) }}
            {%- endcall -%}
        {%- endif -%}
    {%- endif -%}
{% endmacro %}


{% macro cdc_values_sql(rows) -%}
    {#- Rows of literals (each a list of SQL expressions that need no input) as one VALUES list. -#}
    {%- set tuples = [] -%}
    {%- for row in rows -%}
        {%- do tuples.append('(' ~ (row | join(', ')) ~ ')') -%}
    {%- endfor -%}
    {{ return('values ' ~ (tuples | join(', '))) }}
{%- endmacro %}


{% macro cdc_log_batch(target, record, refused=none) %}
    {#- Records the batch's row of cdc_batch_log (cdc_account), alone: a refused batch (`refused`:
        {'files': files refused, 'events': change events read, 'reason': the first line of the
        refusal}; the row then counts nothing as applied). -#}
    {%- do cdc_account(target, cdc_batch_log_row(target, record, refused), run_table_row=cdc_run_table_row(record, refused)) -%}
{% endmacro %}


{% macro cdc_batch_log_row(target, record, refused=none) %}
    {#- The batch's row of cdc_batch_log as literals, one per column in the table's order (macros/cdc/meta.sql)
        but the last, snapshot_id, which its INSERT adds (cdc_account; deferred, the run, from one listing of
        the schema: python_hooks/commands/accounting.py: record). From the batch's `record` (cdc_stage_batch):
        its build mode, start and count of files (`summary`) and the merge's counts (`counts`,
        cdc_stash_outcome). When the row is written later (deferred), the batch's end is a literal of now,
        not the INSERT's time. -#}
    {%- set finished = cdc_now_literal() if cdc_accounting_deferred() else 'current_timestamp()' -%}
    {%- set started = record.summary.started_at -%}
    {%- set counted = ['rows_inserted', 'rows_updated', 'rows_deleted', 'ignored_older', 'ignored_redelivered',
        'ignored_tombstoned', 'ignored_truncated', 'superseded', 'deletes_without_row', 'truncates'] -%}
    {%- set row = [
        cdc_sql_string(invocation_id),
        cdc_sql_string(target.identifier),
        "'refused'" if refused else "'applied'",
        cdc_sql_string(record.summary.build_mode),
        started,
        finished,
        '(unix_micros(' ~ finished ~ ') - unix_micros(' ~ started ~ ')) / 1e6',
        'cast(' ~ (record.summary.files | int) ~ ' as bigint)',
    ] -%}
    {%- if refused -%}
        {%- do row.append('cast(' ~ (refused.events | int) ~ ' as bigint)') -%}
        {%- for name in counted -%}
            {%- do row.append('cast(0 as bigint)') -%}
        {%- endfor -%}
        {%- do row.extend(['cast(' ~ (refused.files | int) ~ ' as bigint)', cdc_sql_string(refused.reason),
            'cast(null as timestamp)', 'cast(null as double)']) -%}
    {%- else -%}
        {%- set counts = record.counts -%}
        {%- set newest = 'cast(null as timestamp)' if counts.newest_commit_at is none
            else cdc_timestamp_literal(counts.newest_commit_at) -%}
        {%- for name in ['change_events'] + counted -%}
            {%- do row.append('cast(' ~ counts[name] ~ ' as bigint)') -%}
        {%- endfor -%}
        {%- do row.extend(['cast(0 as bigint)', 'cast(null as string)', newest,
            '(unix_micros(' ~ finished ~ ') - unix_micros(' ~ newest ~ ')) / 1e6']) -%}
    {%- endif -%}
    {{ return(row) }}
{% endmacro %}


{% macro cdc_ledger_rows(target, record, counted) %}
    {#- The batch's rows of cdc_file_ledger as literals: one per raw file (`record.file_counts`,
        cdc_stage_batch), with its change events as the listing counted them (`counted`) or as the merge's
        aggregate did (`record.file_events`; a file with no row is recorded too, with 0). -#}
    {%- set applied_at = cdc_now_literal() if cdc_accounting_deferred() else 'current_timestamp()' -%}
    {%- set file_events = record.get('file_events') or {} -%}
    {%- set rows = [] -%}
    {%- for file in record.file_counts -%}
        {%- set events = file[1] if counted else file_events.get(file[0], 0) -%}
        {%- do rows.append([cdc_sql_string(target.identifier), cdc_sql_string(file[0]),
            'cast(' ~ (events | int) ~ ' as bigint)', cdc_sql_string(invocation_id), applied_at]) -%}
    {%- endfor -%}
    {{ return(rows) }}
{% endmacro %}

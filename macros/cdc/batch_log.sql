{#- The batch log, `<schema>_cdc_meta.cdc_batch_log`: one row per current-state model per run that
    had raw files to apply, written by the model's own batch (docs: models/pipeline/_cdc_meta__sources.yml).

    What a batch did, counted by the same queries that apply it (macros/cdc/merge.sql):
      - every change event of the batch's files is counted once, by what became of it: a truncate;
        superseded by a newer change of its key in the batch; a copy of another event of the batch
        (re-delivered); older than a truncate (ignored_truncated); older than its key's delete
        recorded by an earlier batch (ignored_tombstoned); and, for the last change of each key,
        compared with the key's row: older (ignored_older), the same event again (re-delivered), a
        delete with no row to delete, or an insert, update or delete of a row;
      - rows_deleted adds the rows a truncate removed.

    When it is written, so that it never claims what did not happen: after the table's commit (and
    the batch's tombstones), before the ledger records the batch's files. A run killed before its
    row leaves no row; if the table had committed, the next run reads the same files (they are not
    in the ledger) and logs their changes as re-delivered: the table already holds them. A refused
    batch writes a row with status 'refused' (nothing else: no table commit, no ledger entry). A
    run with nothing new writes no row: a scheduler calling every few minutes commits nothing. -#}

{% macro cdc_batch_outcomes_sql(events, tombstones, keys) %}
    {#- The batch-level counts: one row (change_events, truncates, redelivered, superseded,
        ignored_truncated, ignored_tombstoned, newest_commit_at), from the batch's events and the
        model's tombstones, by the rules of step 3 of the merge (cdc_batch_changes_sql). -#}
    select
        count(*) as change_events,
        count_if(_cdc_op = 'T') as truncates,
        count_if(_cdc_outcome = 'redelivered') as redelivered,
        count_if(_cdc_outcome = 'superseded') as superseded,
        count_if(_cdc_outcome = 'truncated') as ignored_truncated,
        count_if(_cdc_outcome = 'tombstoned') as ignored_tombstoned,
        max(_cdc_ts) as newest_commit_at
    from (
        {{ cdc_batch_changes_sql(events, tombstones, keys, outcomes=true) }}
        union all
        select 'T' as _cdc_op, events._cdc_ts, cast(null as string) as _cdc_outcome
        from {{ events }} as events
        where events._cdc_op = 'T'
    ) as outcomes
{% endmacro %}


{% macro cdc_stash_outcome(target, outcome) %}
    {#- Keeps what the merge counted, for the post-hook that writes the log row (cdc_log_batch):
        a session view of literals, dropped with the batch's other views. -#}
    {%- set columns = [] -%}
    {%- for name, value in outcome.items() -%}
        {%- if name == 'newest_commit_at' -%}
            {%- do columns.append(("cast('" ~ value ~ "' as timestamp)" if value is not none else 'cast(null as timestamp)') ~ ' as ' ~ name) -%}
        {%- else -%}
            {%- do columns.append('cast(' ~ (value | int) ~ ' as bigint) as ' ~ name) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- do cdc_execute('create or replace temporary view ' ~ cdc_batch_view(target, 'outcome') ~ ' as select ' ~ (columns | join(', '))) -%}
{% endmacro %}


{% macro cdc_outcome(batch, classified=none, rows_truncated=0) %}
    {#- The log row's counts: `batch` from cdc_batch_outcomes_sql; `classified` the counts of the last
        changes by their outcome against the table (a dict, from step 5; none on a full build, where
        the table was empty). -#}
    {%- set c = classified or {} -%}
    {{ return({
        'change_events': batch[0],
        'truncates': batch[1],
        'rows_inserted': c.get('insert', 0),
        'rows_updated': c.get('update', 0),
        'rows_deleted': c.get('delete', 0) + rows_truncated,
        'ignored_older': c.get('older', 0),
        'ignored_redelivered': batch[2] + c.get('redelivered', 0),
        'ignored_tombstoned': batch[5],
        'ignored_truncated': batch[4],
        'superseded': batch[3],
        'deletes_without_row': c.get('no_row', 0),
        'newest_commit_at': batch[6],
    }) }}
{% endmacro %}


{% macro cdc_log_batch(target, files_view, refused=none) %}
    {#- Inserts the batch's row into cdc_batch_log: counts from the stashed outcome, files and start
        time from the batch's files view. `refused`: {'files': files refused, 'events': change events
        read, 'reason': the first line of the refusal}; the row then counts nothing as applied. -#}
    {%- set outcome = cdc_batch_view(target, 'outcome') -%}
    {%- set counted = ['rows_inserted', 'rows_updated', 'rows_deleted', 'ignored_older', 'ignored_redelivered',
        'ignored_tombstoned', 'ignored_truncated', 'superseded', 'deletes_without_row', 'truncates'] -%}
    {%- set snapshot = cdc_current_snapshot(target) -%}
    {%- set sql -%}
        insert into {{ cdc_meta_relation('cdc_batch_log') }}
        select
            {{ cdc_sql_string(invocation_id) }} as run_id,
            {{ cdc_sql_string(target.identifier) }} as model_name,
            {{ "'refused'" if refused else "'applied'" }} as status,
            files.build_mode,
            files.started_at,
            current_timestamp() as finished_at,
            (unix_micros(current_timestamp()) - unix_micros(files.started_at)) / 1e6 as seconds,
            files.files,
        {%- if refused %}
            cast({{ refused.events | int }} as bigint) as change_events,
            {%- for name in counted %}
            cast(0 as bigint) as {{ name }},
            {%- endfor %}
            cast({{ refused.files | int }} as bigint) as files_refused,
            {{ cdc_sql_string(refused.reason) }} as refusal,
            cast(null as timestamp) as newest_commit_at,
            cast(null as double) as lag_seconds,
        {%- else %}
            outcome.change_events,
            {%- for name in counted %}
            outcome.{{ name }},
            {%- endfor %}
            cast(0 as bigint) as files_refused,
            cast(null as string) as refusal,
            outcome.newest_commit_at,
            (unix_micros(current_timestamp()) - unix_micros(outcome.newest_commit_at)) / 1e6 as lag_seconds,
        {%- endif %}
            cast({{ snapshot if snapshot is not none else 'null' }} as bigint) as snapshot_id
        from (
            select
                first(build_mode) as build_mode,
                first(started_at) as started_at,
                count(file_name) as files
            from {{ files_view }}
        ) as files
        {%- if not refused %}
        cross join {{ outcome }} as outcome
        {%- endif %}
    {%- endset -%}
    {%- do cdc_execute(sql) -%}
{% endmacro %}

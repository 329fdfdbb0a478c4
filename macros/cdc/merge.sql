{#- The `cdc_merge` incremental strategy: applies a batch of change events to a current-state
    Iceberg table in one atomic step (one commit, or a branch published at once). Rules, enforced
    here and nowhere else:
      - the last change per key wins, ordered by (_cdc_ts, _cdc_seq);
      - a change applies only if it is newer than the row it would touch: the row keeps the
        _cdc_ts/_cdc_seq that produced it, so late, older updates and deletes are ignored, and a
        re-delivered change (equal, not newer) changes nothing;
      - I/U upsert, D deletes; a delete leaves a tombstone (cdc_tombstones) so that a late older
        change cannot re-insert a deleted key;
      - T (a Debezium truncate, no key) deletes every row older than it and leaves a table-wide
        tombstone (key_json '*'), so older changes that arrive later are ignored too;
      - a re-delivered event with the same commit time and the same content as the row is the
        same event: it changes nothing, even when its position differs (flattened Debezium);
        only changes that change something reach the table, and none means no commit;
      - a batch with a null key, timestamp, sequence or an unknown operation is refused whole,
        before anything is written, with the file and the column named. -#}

{% macro get_incremental_cdc_merge_sql(arg_dict) %}
    {{ return(cdc_merge_batch_sql(arg_dict['target_relation'], arg_dict['temp_relation'], arg_dict['unique_key'])) }}
{% endmacro %}


{% macro cdc_key_columns(unique_key, target) -%}
    {%- if unique_key is none or unique_key | length == 0 -%}
        {{ exceptions.raise_compiler_error("cdc_merge on " ~ target ~ " needs unique_key (the source's primary key columns)") }}
    {%- endif -%}
    {{ return([unique_key] if unique_key is string else unique_key | list) }}
{%- endmacro %}


{% macro cdc_column_names(relation) -%}
    {{ return(cdc_landing_columns_of('select * from ' ~ relation) | map(attribute='name') | list) }}
{%- endmacro %}


{% macro cdc_is_newer(new, old) -%}
    ({{ old }}._cdc_ts is null
        or {{ new }}._cdc_ts > {{ old }}._cdc_ts
        or ({{ new }}._cdc_ts = {{ old }}._cdc_ts and {{ new }}._cdc_seq > {{ old }}._cdc_seq))
{%- endmacro %}


{% macro cdc_merge_batch_sql(target, events, unique_key, into_empty=false) %}
    {#- `into_empty`: the target was created empty in this run (first build, --full-refresh) and the
        batch is every raw file: nothing to compare with, so steps 5-6 are one INSERT. -#}
    {%- set keys = cdc_key_columns(unique_key, target) -%}
    {%- set changes = cdc_batch_view(target, 'changes') -%}
    {%- set classified = cdc_batch_view(target, 'classified') -%}
    {%- set tombstone_table = cdc_meta_relation('cdc_tombstones') -%}
    {%- set model_name = cdc_sql_string(target.identifier) -%}
    {%- set noop = "select 'no change to apply' as cdc_merge" -%}

    {#- 0. No new file: no commit at all, so a rerun leaves every snapshot as it was. -#}
    {%- set pending = run_query(
        'select count(*) from ' ~ cdc_batch_view(target, 'batch_files') ~ ' where file_name is not null'
    ).columns[0].values()[0] -%}
    {%- if pending == 0 -%}
        {{ return(noop) }}
    {%- endif -%}

    {#- 1-3. One read of the pinned batch: every change event, ranked per key (last change: commit
           time, sequence, file), each marked with what became of it within the batch (superseded,
           a copy, older than a truncate or than its key's tombstone) and cached (on disk for a full
           build, whose batch is every raw file and need not fit in memory). Then one aggregate of
           the cached batch per file gives the validation (a bad batch is refused here, before
           anything is written), the newest truncate, the batch log's counts and each file's events
           for the ledger. The batch's deletes become tombstones only after the target has committed
           (7): a write to cdc_tombstones would make Spark drop every cached query that reads it. -#}
    {%- set tombstones = '(select * from ' ~ tombstone_table ~ ' where model_name = ' ~ model_name ~ ')' -%}
    {%- do cdc_execute(
        'cache table ' ~ changes
        ~ (" options ('storageLevel' 'DISK_ONLY')" if into_empty else '')
        ~ ' as ' ~ cdc_batch_changes_sql(events, tombstones, keys, every_event=true)
    ) -%}
    {%- set files = run_query(cdc_batch_files_sql(changes, keys)).rows -%}
    {%- set truncate = cdc_validate_batch(target, files, keys) -%}
    {%- do cdc_fault_point('after_validate') -%}
    {%- set batch_outcome = cdc_batch_counts(files) -%}
    {%- set last = cdc_last_changes(changes) -%}
    {%- set rows_truncated = 0 -%}
    {%- set deletes = batch_outcome.last_deletes > 0 -%}

    {#- 4b. A truncate: a table-wide tombstone, then every row older than it goes. (The cached batch
           reads the tombstones, so Spark computes it again once: its result is the same, since a
           truncate is older than every change it lets through.) -#}
    {%- if truncate is not none -%}
        {%- set truncate_ts = "cast('" ~ truncate[0] ~ "' as timestamp)" -%}
        {%- set truncate_seq = cdc_sql_string(truncate[1]) -%}
        {%- do cdc_execute(
            'insert into ' ~ tombstone_table ~ ' select ' ~ model_name ~ ", '*', "
            ~ truncate_ts ~ ', ' ~ truncate_seq ~ ", 'truncate', current_timestamp()"
        ) -%}
        {%- set older_than_truncate = '_cdc_ts < ' ~ truncate_ts
            ~ ' or (_cdc_ts = ' ~ truncate_ts ~ ' and _cdc_seq <= ' ~ truncate_seq ~ ')' -%}
        {%- set rows_truncated = run_query('select count(*) from ' ~ target ~ ' where ' ~ older_than_truncate).columns[0].values()[0] -%}
        {%- do cdc_execute('delete from ' ~ target ~ ' where ' ~ older_than_truncate) -%}
    {%- endif -%}

    {%- set target_columns = cdc_column_names(target) -%}
    {%- set source_columns = cdc_column_names(events) | map('lower') | list -%}
    {%- if into_empty -%}
        {#- 5-6 of a full build: every last change but a delete, inserted. -#}
        {%- set last_count = batch_outcome.change_events - batch_outcome.truncates - batch_outcome.redelivered
            - batch_outcome.superseded - batch_outcome.ignored_truncated - batch_outcome.ignored_tombstoned -%}
        {%- do cdc_stash_outcome(target, cdc_outcome(batch_outcome,
            {'insert': last_count - batch_outcome.last_deletes, 'no_row': batch_outcome.last_deletes}, rows_truncated)) -%}
        {{ return(cdc_insert_changes_sql(target, last, cdc_merge_values(target_columns, source_columns))) }}
    {%- endif -%}

    {#- 5. Only the changes that change something: newer than the row they touch, and not the same
           event again (same commit time and same content: a re-delivery with a new position).
           An Iceberg write commits even when no row changes, so an empty set skips it. Every
           last change is classified once (`classified`: insert, update, delete, or why it changes
           nothing, counted for the batch log). The target is read at one snapshot
           (`read_snapshot`), the base of step 6's publish. -#}
    {%- set state = cdc_table_state(target) -%}
    {%- set single_writer = cdc_single_writer() -%}
    {%- do cdc_drop_stale_branches(target, state.branches, 0 if single_writer else 3600) -%}
    {%- set read_snapshot = state.snapshot -%}
    {%- set current_rows = target if read_snapshot is none
        else '(select * from ' ~ target ~ ' version as of ' ~ read_snapshot ~ ')' -%}
    {#- On the single-writer target, a small table (its data files within cdc_one_merge_max_bytes)
        takes the whole batch in one MERGE, inserts included: its outer join then broadcasts the
        table, one commit publishes the batch, no branch is needed, and the comparison is not
        cached (the MERGE repeats it on the rows it joins). A larger table keeps the append +
        matched-only MERGE (6), which never shuffles the table. Not on a shared target: there
        another run could commit between the comparison and the MERGE, and the batch log would
        count what that run applied; the branch's publish check (cdc_publish_branch) catches it. -#}
    {%- set one_merge = single_writer and read_snapshot is not none and state.bytes <= cdc_one_merge_max_bytes() -%}
    {%- set effective_sql = cdc_effective_changes_sql(last, current_rows, keys, outcome=true) -%}
    {%- if not one_merge -%}
        {%- do cdc_execute('cache table ' ~ classified ~ ' as ' ~ effective_sql) -%}
    {%- endif -%}
    {%- set by_outcome = {} -%}
    {%- for row in run_query('select _cdc_outcome, count(*) from '
            ~ (('(' ~ effective_sql ~ ') as classified') if one_merge else classified) ~ ' group by _cdc_outcome').rows -%}
        {%- do by_outcome.update({row[0]: row[1]}) -%}
    {%- endfor -%}
    {%- do cdc_stash_outcome(target, cdc_outcome(batch_outcome, by_outcome, rows_truncated)) -%}
    {%- set matched = by_outcome.get('update', 0) + by_outcome.get('delete', 0) > 0 -%}
    {%- set inserts = by_outcome.get('insert', 0) > 0 -%}
    {%- if not matched and not inserts -%}
        {%- if deletes -%}
            {%- do cdc_record_tombstones(target, last) -%}
        {%- endif -%}
        {{ return(noop) }}
    {%- endif -%}

    {#- 6. The writes: new keys are appended, changes to existing rows are one MERGE with only
           WHEN MATCHED clauses. A MERGE with WHEN NOT MATCHED is an outer join that Spark can
           only run by shuffling the whole target; without it, the batch is broadcast and the
           target is only scanned, so the cost follows the batch, not the table.
           Appends go to a branch of the table made from `read_snapshot`, which then replaces main
           in one step (fast_forward) only if main is still that snapshot: readers see the whole
           batch or none of it, and when another writer committed to the table meanwhile (a second
           run of the same model on a shared target) nothing is published and the run fails with
           a message; the next run applies the batch to the new state. A MERGE alone needs no
           branch: it re-checks its conditions on the rows it joins, and Iceberg refuses its commit
           if another commit touched them (serializable isolation). The embedded target, where one
           process at a time opens the warehouse (python_hooks/project/embedded_lock.py), appends to main
           directly when a batch has only new keys.
           The INSERT reads the classified changes; its commit makes Spark drop that cache (it reads
           the target), so the MERGE reads the cached batch's last changes and repeats step 5's
           comparison in its conditions, on the rows it joins. -#}
    {%- set values = cdc_merge_values(target_columns, source_columns) -%}
    {%- if one_merge -%}
        {%- do cdc_pause_point('before_publish') -%}
        {%- do cdc_fault_point('during_merge') -%}
        {%- do cdc_execute(cdc_merge_matched_sql(target, last, keys, target_columns, values, inserts=inserts)) -%}
        {%- do cdc_fault_point('after_merge') -%}
        {%- if deletes -%}
            {%- do cdc_record_tombstones(target, last) -%}
            {%- do cdc_fault_point('after_tombstones') -%}
        {%- endif -%}
        {{ return("select 'batch applied' as cdc_merge") }}
    {%- endif -%}
    {%- set on_branch = inserts and read_snapshot is not none and (matched or not single_writer) -%}
    {%- set branch = cdc_batch_branch(target) if on_branch else none -%}
    {%- set written = target ~ '.' ~ cdc_quote('branch_' ~ branch) if on_branch else target -%}
    {%- if on_branch -%}
        {%- do cdc_execute('alter table ' ~ target ~ ' create branch ' ~ cdc_quote(branch) ~ ' as of version ' ~ read_snapshot) -%}
        {%- do cdc_fault_point('after_branch_created') -%}
    {%- endif -%}
    {%- if inserts -%}
        {%- do cdc_fault_point('during_insert') -%}
        {%- do cdc_execute(cdc_insert_changes_sql(
            written, '(select * from ' ~ classified ~ " where _cdc_outcome = 'insert')", values)) -%}
        {%- do cdc_fault_point('after_insert') -%}
    {%- endif -%}
    {%- do cdc_pause_point('before_publish') -%}
    {%- if matched -%}
        {%- do cdc_fault_point('during_merge') -%}
        {%- do cdc_execute(cdc_merge_matched_sql(written, last, keys, target_columns, values)) -%}
        {%- do cdc_fault_point('after_merge') -%}
    {%- endif -%}
    {%- if on_branch -%}
        {%- do cdc_publish_branch(target, branch, read_snapshot) -%}
        {%- do cdc_fault_point('after_publish') -%}
    {%- endif -%}
    {#- 7. The batch's deletes become tombstones, once the target has committed (then the post-hook
           records the batch's files in the ledger). -#}
    {%- if deletes -%}
        {%- do cdc_record_tombstones(target, last) -%}
        {%- do cdc_fault_point('after_tombstones') -%}
    {%- endif -%}
    {{ return("select 'batch applied' as cdc_merge") }}
{% endmacro %}


{% macro cdc_merge_matched_sql(target, changes, keys, target_columns, values, inserts=false) %}
    {#- Step 6 for the keys that have a row: the last changes, applied only when newer than the row
        and not the same event again (the conditions of step 5). No WHEN NOT MATCHED: an inner
        join, which Spark broadcasts. `inserts`: a small table's one MERGE, which also inserts the
        new keys (an outer join). -#}
merge into {{ target }} as t
using {{ changes }} as s
on {% for key in keys %}t.{{ cdc_quote(key) }} = s.{{ cdc_quote(key) }}{{ ' and ' if not loop.last }}{% endfor %}
when matched and s._cdc_op = 'D' and {{ cdc_is_newer('s', 't') }} then delete
when matched and s._cdc_op <> 'D' and {{ cdc_is_newer('s', 't') }}
    and not (s._cdc_op = t._cdc_op and s._cdc_ts = t._cdc_ts and s._cdc_row_hash = t._cdc_row_hash) then update set
    {%- for column in target_columns %}
    t.{{ cdc_quote(column) }} = {{ values[loop.index0] }}{{ ',' if not loop.last }}
    {%- endfor %}
{%- if inserts %}
when not matched and s._cdc_op <> 'D' then insert (
    {%- for column in target_columns %}
    {{ cdc_quote(column) }}{{ ',' if not loop.last }}
    {%- endfor %}
) values (
    {%- for column in target_columns %}
    {{ values[loop.index0] }}{{ ',' if not loop.last }}
    {%- endfor %}
)
{%- endif %}
{% endmacro %}


{% macro cdc_validate_batch(target, files, keys) %}
    {#- Refuses a batch with a null key, commit timestamp or sequence, or an unknown operation,
        naming each file and how many of its events are bad; nothing has been written yet. `files`:
        the rows of cdc_batch_files_sql (one per raw file of the batch, read from the cached batch,
        so validation costs no scan of its own). Returns the batch's newest truncate as
        [timestamp text, sequence], or none. -#}
    {%- set checks = cdc_validation_checks(keys) -%}
    {%- set first_check = 11 -%}  {#- the column of check 1 in cdc_batch_files_sql -#}
    {%- set problems = [] -%}
    {%- set bad_files = [] -%}
    {%- set truncates = [] -%}
    {%- for row in files -%}
        {%- if row[2] is not none -%}
            {%- do truncates.append(row[2]) -%}
        {%- endif -%}
        {%- for check in checks -%}
            {%- set failures = row[first_check + loop.index0] -%}
            {%- if failures > 0 -%}
                {%- set what = check[1] if not loop.last else "unknown operation " ~ row[3]
                    ~ " (the producer's operation column: Op, __op or op; known: I, U, D and Debezium's r, c, u, d, t)" -%}
                {%- do problems.append("  raw file " ~ row[0] ~ ": " ~ failures ~ " change event(s) with " ~ what) -%}
                {%- if row[0] not in bad_files -%}
                    {%- do bad_files.append(row[0]) -%}
                {%- endif -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endfor -%}
    {%- if problems -%}
        {%- set events_read = files | map(attribute=1) | map('int') | sum -%}
        {%- do cdc_log_batch(target, cdc_batch_view(target, 'batch_files'), refused={
            'files': bad_files | length, 'events': events_read,
            'reason': 'cdc_merge refused the batch:' ~ (problems | join(';')) | replace('  raw file', ' raw file')}) -%}
        {%- do cdc_drop_batch_views(target) -%}
        {{ exceptions.raise_compiler_error(
            "cdc_merge refused the batch for " ~ target ~ "; nothing was applied and the table is unchanged:\n"
            ~ (problems | join("\n"))
            ~ "\nFix or remove the file(s) in the landing folder and run again; the other tables are not affected.") }}
    {%- endif -%}
    {{ return((truncates | max).split('|', 1) if truncates else none) }}
{% endmacro %}


{% macro cdc_validation_checks(keys) -%}
    {#- What makes a change event invalid, as [condition counted, words for the refusal]. -#}
    {%- set checks = [] -%}
    {%- for key in keys -%}
        {%- do checks.append(("count_if(_cdc_op <> 'T' and " ~ cdc_quote(key) ~ " is null)", "null or missing key column " ~ key)) -%}
    {%- endfor -%}
    {%- do checks.append(("count_if(_cdc_ts is null)", "null commit timestamp (_cdc_ts, from the producer's commit-time column: DMS last_update_time or the task's TimestampColumnName, Debezium source.ts_ms or __source_ts_ms)")) -%}
    {%- do checks.append(("count_if(_cdc_seq is null)", "null change sequence (_cdc_seq)")) -%}
    {%- do checks.append(("count_if" ~ cdc_unknown_op(), "unknown operation")) -%}
    {{ return(checks) }}
{%- endmacro %}


{% macro cdc_unknown_op() -%}
    {{ return("(_cdc_op is null or _cdc_op not in ('I', 'U', 'D', 'T'))") }}
{%- endmacro %}


{% macro cdc_batch_files_sql(changes, keys) %}
    {#- One row per raw file of the batch, from the cached batch (`changes`, every event with its
        `_cdc_batch_outcome`): everything a batch needs to know before it writes, in one query:
        0 file, 1 change events, 2 newest truncate (fixed-width text, so the greatest is the newest
        (_cdc_ts, _cdc_seq)), 3 the unknown operations (at most 5, for the message), 4 truncates,
        5 redelivered, 6 superseded, 7 ignored as older than a truncate, 8 ignored as older than a
        tombstone, 9 newest commit time, 10 the last changes per key that are deletes,
        11.. the validation checks (cdc_validation_checks). -#}
        select
            _cdc_source_file,
            count(*) as change_events,
            max(case when _cdc_op = 'T' then concat(date_format(_cdc_ts, 'yyyy-MM-dd HH:mm:ss.SSSSSS'), '|', _cdc_seq) end) as newest_truncate,
            array_join(slice(array_sort(collect_set(case when {{ cdc_unknown_op() }}
                then coalesce(concat("'", _cdc_op, "'"), 'null') end)), 1, 5), ', ') as unknown_ops,
            count_if(_cdc_batch_outcome = 'truncate') as truncates,
            count_if(_cdc_batch_outcome = 'redelivered') as redelivered,
            count_if(_cdc_batch_outcome = 'superseded') as superseded,
            count_if(_cdc_batch_outcome = 'truncated') as ignored_truncated,
            count_if(_cdc_batch_outcome = 'tombstoned') as ignored_tombstoned,
            max(_cdc_ts) as newest_commit_at,
            count_if(_cdc_batch_outcome is null and _cdc_op = 'D') as last_deletes
            {%- for check in cdc_validation_checks(keys) %},
            {{ check[0] }} as check_{{ loop.index }}
            {%- endfor %}
        from {{ changes }}
        group by _cdc_source_file
        order by _cdc_source_file
{% endmacro %}


{% macro cdc_last_changes(changes) -%}
    {#- The last change per key that passes the truncate and tombstone guards, from the cached batch. -#}
    {{ return('(select * from ' ~ changes ~ ' where _cdc_batch_outcome is null)') }}
{%- endmacro %}


{% macro cdc_batch_changes_sql(events, tombstones, keys, every_event=false) %}
    {#- Step 3 of the merge, as one query over the batch `events`: the last change per key, minus the
        changes older than the key's tombstone or a truncate. `tombstones` holds this model's rows
        of cdc_tombstones (key_json, _cdc_ts, _cdc_seq).
        `every_event`: instead, every change event of the batch (the one read of its files that the
        merge caches), with `_cdc_batch_outcome`: 'truncate' (a Debezium truncate), 'superseded' (a
        newer change of its key in the batch), 'redelivered' (a copy of a newer-ranked event of the
        batch: same key, operation, time and content), 'truncated', 'tombstoned', or null for the
        last changes that go on to be compared with the table (cdc_last_changes); the batch's
        validation and the batch log's counts are one aggregate over it (cdc_batch_files_sql).
        Subqueries, not CTEs: the merge caches this query (`cache table ... as`), and Spark 3.5
        never matches a cached plan that holds a CTE (its ids differ at every analysis,
        SPARK-46741), so every later read of the cached view would compute it again. -#}
    {%- set key_list -%}
        {% for key in keys %}{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
    {%- endset -%}
    {%- set key_json -%}
        to_json(named_struct({% for key in keys %}{{ cdc_sql_string(key) }}, {{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}))
    {%- endset -%}
    {%- set order_by = 'events._cdc_ts desc, events._cdc_seq desc, events._cdc_source_file desc' -%}
    {%- set after_truncate = '(truncated.newest is null or ' ~ cdc_is_newer('latest', 'truncated.newest') ~ ')' -%}
    {%- set after_tombstone -%}
        (tombstones.key_json is null or latest._cdc_op = 'D' or {{ cdc_is_newer('latest', 'tombstones.newest') }})
    {%- endset %}
        select
            latest.*
        {%- if every_event %},
            case
                when latest._cdc_op = 'T' then 'truncate'
                when latest._cdc_change_rank > 1 and latest._cdc_copy_rank > 1 then 'redelivered'
                when latest._cdc_change_rank > 1 then 'superseded'
                when not {{ after_truncate }} then 'truncated'
                when not {{ after_tombstone }} then 'tombstoned'
            end as _cdc_batch_outcome
        {%- endif %}
        from (
            select
                ranked.*,
                {{ key_json }} as _cdc_key_json
            from (
                select
                    events.*,
                    row_number() over (
                        partition by events._cdc_op = 'T', {{ key_list }} order by {{ order_by }}
                    ) as _cdc_change_rank
                    {%- if every_event %},
                    row_number() over (
                        partition by events._cdc_op = 'T', {{ key_list }}, events._cdc_op, events._cdc_ts, events._cdc_row_hash
                        order by {{ order_by }}
                    ) as _cdc_copy_rank
                    {%- endif %}
                from {{ events }} as events
                {%- if not every_event %}
                where events._cdc_op <> 'T'
                {%- endif %}
            ) as ranked
            {%- if not every_event %}
            where ranked._cdc_change_rank = 1
            {%- endif %}
        ) as latest
        cross join (
            select max(struct(truncates._cdc_ts, truncates._cdc_seq)) as newest
            from (
                select events._cdc_ts, events._cdc_seq from {{ events }} as events where events._cdc_op = 'T'
                union all
                select tombstones._cdc_ts, tombstones._cdc_seq from {{ tombstones }} as tombstones
                where tombstones.key_json = '*'
            ) as truncates
        ) as truncated
        left join (
            select
                tombstones.key_json,
                max(struct(tombstones._cdc_ts, tombstones._cdc_seq)) as newest
            from {{ tombstones }} as tombstones
            group by tombstones.key_json
        ) as tombstones
            on latest._cdc_key_json = tombstones.key_json
        {%- if not every_event %}
        where
            {{ after_truncate }}
            and {{ after_tombstone }}
        {%- endif %}
{% endmacro %}

{% macro cdc_effective_changes_sql(changes, current_rows, keys, outcome=false) %}
    {#- Step 5 of the merge: the changes that change something, newer than the row they touch and
        not the same event again. `outcome`: instead, every change with `_cdc_outcome`, what it
        does to the table: 'insert', 'update', 'delete', or why it changes nothing: 'older' (than
        the key's row), 'redelivered' (the row's own event: same time and sequence, or same time
        and content), 'no_row' (a delete of a key with no row). -#}
    {%- set key_list -%}
        {% for key in keys %}{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
    {%- endset -%}
    {%- set same_event -%}
        changes._cdc_op = current_rows._cdc_op
        and changes._cdc_ts = current_rows._cdc_ts
        and changes._cdc_row_hash = current_rows._cdc_row_hash
    {%- endset %}
        select
            changes.*
            {%- if outcome %},
            case
                when current_rows._cdc_ts is null then if(changes._cdc_op = 'D', 'no_row', 'insert')
                when not {{ cdc_is_newer('changes', 'current_rows') }} then
                    if(changes._cdc_ts = current_rows._cdc_ts and changes._cdc_seq = current_rows._cdc_seq, 'redelivered', 'older')
                when {{ same_event }} then 'redelivered'
                when changes._cdc_op = 'D' then 'delete'
                else 'update'
            end as _cdc_outcome
            {%- endif %}
        from {{ changes }} as changes
        left join (
            {#- Only the rows the batch touches: a semi-join with the batch's keys, broadcast (a batch
                is small; the hint because the planner may not know its size), so the target is
                scanned once and never shuffled. -#}
            select /*+ BROADCAST(batch_keys) */
                {% for key in keys %}current_rows.{{ cdc_quote(key) }}, {% endfor -%}
                current_rows._cdc_op,
                current_rows._cdc_ts,
                current_rows._cdc_seq,
                current_rows._cdc_row_hash
            from {{ current_rows }} as current_rows
            left semi join (select {{ key_list }} from {{ changes }}) as batch_keys
                on {% for key in keys %}current_rows.{{ cdc_quote(key) }} = batch_keys.{{ cdc_quote(key) }}{{ ' and ' if not loop.last }}{% endfor %}
        ) as current_rows
            on {% for key in keys %}changes.{{ cdc_quote(key) }} = current_rows.{{ cdc_quote(key) }}{{ ' and ' if not loop.last }}{% endfor %}
        {%- if not outcome %}
        where
            case
                when current_rows._cdc_ts is null then changes._cdc_op <> 'D'
                else {{ cdc_is_newer('changes', 'current_rows') }}
                    and not ({{ same_event }})
            end
        {%- endif %}
{% endmacro %}


{% macro cdc_merge_result_sql(current_rows, events, tombstones, keys) %}
    {#- The table a run leaves, as a query: what the MERGE of steps 3-6 does to `current_rows`
        (delete, update, insert), for dbt unit tests of the merge rules. `current_rows` has the
        batch's columns, in the batch's order (rows are unioned by position); the two helper
        columns of step 3 come along. Truncates are out of scope. -#}
        with

        effective as (

            {{ cdc_effective_changes_sql('(' ~ cdc_batch_changes_sql(events, tombstones, keys) ~ ')', current_rows, keys) }}

        ),

        untouched as (

            select
                current_rows.*,
                cast(null as int) as _cdc_change_rank,
                cast(null as string) as _cdc_key_json
            from {{ current_rows }} as current_rows
            left anti join effective
                on {% for key in keys %}current_rows.{{ cdc_quote(key) }} = effective.{{ cdc_quote(key) }}{{ ' and ' if not loop.last }}{% endfor %}

        ),

        upserted as (

            select *
            from effective
            where _cdc_op <> 'D'

        )

        select * from untouched
        union all
        select * from upserted
{% endmacro %}


{% macro cdc_unit_test_tombstones() -%}
    {#- The cdc_tombstones rows a unit test starts from: none (a unit test overrides this macro). -#}
    {{ return("(select cast(null as string) as key_json, cast(null as timestamp) as _cdc_ts, cast(null as string) as _cdc_seq where false)") }}
{%- endmacro %}


{% macro cdc_merge_values(target_columns, source_columns) -%}
    {#- What a MERGE or an append writes to each target column: this run's timestamp to
        _cdc_applied_at, the batch's value (`s.<column>`), or null for a column the batch no longer
        has. -#}
    {%- set values = [] -%}
    {%- for column in target_columns -%}
        {%- if column | lower == '_cdc_applied_at' -%}
            {%- do values.append(cdc_run_timestamp()) -%}
        {%- elif column | lower in source_columns -%}
            {%- do values.append('s.' ~ cdc_quote(column)) -%}
        {%- else -%}
            {%- do values.append('null') -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(values) }}
{%- endmacro %}


{% macro cdc_insert_changes_sql(target, changes, values) -%}
    {#- Appends the changes `changes` (a relation or a subquery) but the deletes: the new keys of a
        batch, or every last change on a full build (a table created empty in this run). -#}
insert into {{ target }}
select
    {%- for value in values %}
    {{ value }}{{ ',' if not loop.last }}
    {%- endfor %}
from {{ changes }} as s
where s._cdc_op <> 'D'
{%- endmacro %}


{% macro cdc_record_tombstones(target, changes) %}
    {#- The batch's deletes (in `changes`, step 3) become tombstones, once the target has committed
        (step 7, or the post-hook of a full build). Not before: a write to cdc_tombstones makes Spark
        drop its cache of every query that reads it (the batch's changes, the effective changes),
        and the MERGE would compute them again. Safe in this order: if this commit fails, the
        ledger does not record the batch, the rerun applies it again, its deletes find no row (no
        MERGE) and are recorded then. -#}
    {%- do cdc_execute(
        'insert into ' ~ cdc_meta_relation('cdc_tombstones')
        ~ ' select ' ~ cdc_sql_string(target.identifier) ~ ', _cdc_key_json, _cdc_ts, _cdc_seq, _cdc_source_file,'
        ~ ' current_timestamp() from ' ~ changes ~ " where _cdc_op = 'D'"
    ) -%}
{% endmacro %}


{% macro cdc_current_snapshot(target) -%}
    {#- The id of the snapshot `main` points at, none for a table without one. -#}
    {%- set rows = run_query('select snapshot_id from ' ~ target ~ ".refs where name = 'main'").rows -%}
    {{ return(rows[0][0] | int if rows | length > 0 else none) }}
{%- endmacro %}


{% macro cdc_single_writer() -%}
    {#- True on a warehouse only one process can write: the `local` target, an embedded Spark
        (`spark.master` local[...]) on an embedded Derby metastore, which one process at a time opens
        (python_hooks/project/embedded_lock.py refuses a second one). (The metastore URL itself is redacted
        by Spark's SET.) -#}
    {%- if not execute -%}
        {{ return(false) }}
    {%- endif -%}
    {%- set rows = run_query('set spark.master').rows -%}
    {{ return(rows | length > 0 and (rows[0][1] or '').startswith('local')) }}
{%- endmacro %}


{% macro cdc_batch_branch(target) -%}
    {#- A branch name of this run's own: concurrent runs never touch each other's branch. The epoch
        second in it tells a branch left behind by a killed run (cdc_drop_stale_branches). -#}
    {{ return('cdc_batch_' ~ cdc_epoch_seconds() ~ '_' ~ invocation_id[:8]) }}
{%- endmacro %}


{% macro cdc_epoch_seconds() -%}
    {%- set now = modules.datetime.datetime.utcnow() - modules.datetime.datetime(1970, 1, 1) -%}
    {{ return(now.total_seconds() | int) }}
{%- endmacro %}


{% macro cdc_table_state(target) -%}
    {#- One query for what a batch needs to know of its table: the snapshot `main` points at (none
        for a table without one), the names of its branches, and the bytes of its data files then. -#}
    {%- set state = {'snapshot': none, 'branches': [], 'bytes': 0} -%}
    {%- for row in run_query(
            'select refs.name, refs.type, refs.snapshot_id, snapshots.summary[' ~ "'total-files-size'" ~ ']'
            ~ ' from ' ~ target ~ '.refs as refs left join ' ~ target ~ '.snapshots as snapshots'
            ~ ' on refs.snapshot_id = snapshots.snapshot_id').rows -%}
        {%- if row[0] == 'main' -%}
            {%- do state.update({'snapshot': row[2] | int, 'bytes': (row[3] or 0) | int}) -%}
        {%- elif row[1] | upper == 'BRANCH' -%}
            {%- do state.branches.append(row[0]) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(state) }}
{%- endmacro %}


{% macro cdc_one_merge_max_bytes() -%}
    {#- Up to which size of its data files a table takes a batch in one MERGE (see step 5):
        the model's +cdc_one_merge_max_bytes, else CDC_ONE_MERGE_MAX_BYTES, else 32 MiB. -#}
    {{ return((config.get('cdc_one_merge_max_bytes') or env_var('CDC_ONE_MERGE_MAX_BYTES', '33554432')) | int) }}
{%- endmacro %}


{% macro cdc_drop_stale_branches(target, branches, older_than_seconds=3600) %}
    {#- Branches of runs that died before publishing or dropping them (kill -9, a lost race): they
        change nothing a reader sees, but keep their data files from expiry. Dropped by the next batch
        of the table: every one on a single-writer target (no other run can be writing), else once an
        hour old. -#}
    {%- set now = cdc_epoch_seconds() -%}
    {%- for branch in branches if branch.startswith('cdc_batch_') -%}
        {%- set parts = branch.split('_') -%}
        {%- set created = parts[2] | int(-1) if parts | length == 4 else -1 -%}
        {%- if created >= 0 and now - created >= older_than_seconds -%}
            {{ log('cdc: dropping branch ' ~ branch ~ ' of ' ~ target ~ ', left by a run that did not finish', info=true) }}
            {%- do cdc_execute('alter table ' ~ target ~ ' drop branch if exists ' ~ cdc_quote(branch)) -%}
        {%- endif -%}
    {%- endfor -%}
{% endmacro %}


{% macro cdc_publish_branch(target, branch, read_snapshot) %}
    {#- Makes the batch's branch the table's main in one step, if main is still `read_snapshot`.
        fast_forward itself refuses when main is not an ancestor of the branch; checking first
        gives the user a sentence instead of Iceberg's stack trace. -#}
    {%- set now_snapshot = cdc_current_snapshot(target) -%}
    {%- if now_snapshot != read_snapshot -%}
        {%- do cdc_execute('alter table ' ~ target ~ ' drop branch if exists ' ~ cdc_quote(branch)) -%}
        {%- do cdc_drop_batch_views(target) -%}
        {{ exceptions.raise_compiler_error(
            "cdc_merge: another writer committed to " ~ target ~ " while this run applied its batch (snapshot "
            ~ read_snapshot ~ " became " ~ now_snapshot ~ "); nothing of this batch was published and the table is "
            ~ "as the other writer left it. The next run applies the batch to the new state.") }}
    {%- endif -%}
    {%- do cdc_execute(
        'call spark_catalog.system.fast_forward(table => ' ~ cdc_sql_string(target.schema ~ '.' ~ target.identifier)
        ~ ", branch => 'main', to => " ~ cdc_sql_string(branch) ~ ')'
    ) -%}
    {%- do cdc_execute('alter table ' ~ target ~ ' drop branch ' ~ cdc_quote(branch)) -%}
{% endmacro %}


{% macro cdc_pause_point(name) %}
    {#- A named point of a batch where a run can be made to wait, for tests of what other processes
        see meanwhile and of a run killed there: CDC_PAUSE_AT=<name> (every model) or
        <name>:<model> makes it sleep up to CDC_PAUSE_SECONDS (default 30) inside the warehouse, in a
        task that holds one executor core. With CDC_PAUSE_RELEASE=<database>, it sleeps 2 s at a time
        and goes on as soon as that database exists (the test creates it when it has seen what it
        wanted), so a generous bound costs nothing. Nothing happens when CDC_PAUSE_AT is unset. -#}
    {%- set wanted = env_var('CDC_PAUSE_AT', '').split(':') -%}
    {%- if wanted[0] == name and (wanted | length == 1 or wanted[1] == this.identifier) -%}
        {%- set seconds = env_var('CDC_PAUSE_SECONDS', '30') | int -%}
        {%- set release = env_var('CDC_PAUSE_RELEASE', '') -%}
        {%- set step = 2 if release else seconds -%}
        {{ log('cdc: pause point ' ~ name ~ ' of ' ~ this ~ ' reached: waiting ' ~ seconds ~ ' s', info=true) }}
        {%- set state = namespace(waited=0, released=false) -%}
        {%- for _ in range(((seconds + step - 1) // step) if step > 0 else 0) -%}
            {%- if not state.released -%}
                {%- set chunk = [step, seconds - state.waited] | min -%}
                {%- do cdc_execute("select reflect('java.lang.Thread', 'sleep', cast(" ~ (chunk * 1000) ~ " as bigint))") -%}
                {%- set state.waited = state.waited + chunk -%}
                {%- if release and run_query('show databases like ' ~ cdc_sql_string(release)) | length > 0 -%}
                    {%- set state.released = true -%}
                {%- endif -%}
            {%- endif -%}
        {%- endfor -%}
        {{ log('cdc: pause point ' ~ name ~ ' of ' ~ this ~ ' passed' ~ (' (released after ' ~ state.waited ~ ' s)' if state.released else ''), info=true) }}
    {%- endif -%}
{% endmacro %}


{% macro cdc_fault_point(name, relation=none) %}
    {#- A named point of a run where it can be killed, for the fault injection tests
        (tests/pytest/test_faults.py): CDC_KILL_AT=<name> or <name>:<model> logs
        "cdc: kill point <name> of <relation> reached", and the process that runs dbt through
        python_hooks (`make run`) kills itself with SIGKILL when it sees that line
        (python_hooks/project/faults.py): at once, or, for a `during_*` point placed before a statement,
        CDC_KILL_DELAY seconds later (default 1), while the statement runs. Nothing happens when unset. -#}
    {%- set wanted = env_var('CDC_KILL_AT', '').split(':') -%}
    {%- if wanted[0] == name -%}
        {%- set relation = relation if relation is not none else this -%}
        {%- if wanted | length == 1 or wanted[1] == relation.identifier -%}
            {{ log('cdc: kill point ' ~ name ~ ' of ' ~ relation ~ ' reached', info=true) }}
        {%- endif -%}
    {%- endif -%}
{% endmacro %}

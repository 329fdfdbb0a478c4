{#- Applying a batch of change events to a current-state Iceberg table in one atomic step (one
    commit, or a branch published at once): `cdc_apply_batch`, called by the cdc_current_state
    materialization (materialization.sql); the rules as queries are in rules.sql, the validation in
    validation.sql, the publish in publish.sql, the test points in fault_points.sql. Rules, enforced
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

{% macro cdc_key_columns(unique_key, target) -%}
    {%- if unique_key is none or unique_key | length == 0 -%}
        {{ exceptions.raise_compiler_error("cdc_current_state on " ~ target ~ " needs unique_key (the source's primary key columns)") }}
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


{% macro cdc_apply_batch(target, events, unique_key, record, into_empty=false, target_columns=none, source_columns=none, unchanged={}) %}
    {#- Applies the batch `events` (a relation of change events with _cdc_row_hash) to `target`, by
        the rules above; called by the materialization (materialization.sql). `into_empty`: the
        target was created empty in this run (first build, --full-refresh) and the batch is every
        raw file: nothing to compare with, so steps 5-6 are one INSERT. `record`: the batch's record
        (cdc_stage_batch), which gets the merge's counts for the batch log. `target_columns`,
        `source_columns`: the two relations' columns, when the caller knows them. `unchanged`: the
        columns whose placeholder keeps the row's value (unchanged.sql). -#}
    {%- set keys = cdc_key_columns(unique_key, target) -%}
    {%- set changes = cdc_batch_view(target, 'changes') -%}
    {%- set classified = cdc_batch_view(target, 'classified') -%}
    {%- set tombstone_table = cdc_meta_relation('cdc_tombstones') -%}
    {%- set model_name = cdc_sql_string(target.identifier) -%}

    {#- 0. No new file: the materialization does not call this, so nothing is committed and a rerun
           leaves every snapshot as it was. -#}

    {#- 1-3. One read of the pinned batch: every change event, ranked per key (last change: commit
           time, sequence, file), each marked with what became of it within the batch (superseded,
           a copy, older than a truncate or than its key's tombstone). Then one aggregate of it per
           file gives the validation (a bad batch is refused here, before anything is written), the
           newest truncate, the batch log's counts, each file's events for the ledger and, in `make
           run`, the tombstones of a few deletes. The batch's deletes become tombstones only after the
           target has committed (7): a write to cdc_tombstones would make Spark drop every cached
           query that reads it.
           The read is cached (on disk for a full build, whose batch is every raw file and need not fit
           in memory), except for a small batch of a small table on the single-writer target, which
           the run's plan says is within cdc_uncached_batch_max_bytes: its two reads (the aggregate,
           the MERGE) read its few raw files twice, which costs less than caching them and dropping the
           cache (raw files are never rewritten once landed, but by an erasure, which on this target
           cannot run beside a run). -#}
    {#- (A table created empty in this run reads every raw file again: no tombstone of before counts.) -#}
    {%- set tombstones = '(select * from ' ~ tombstone_table ~ ' where model_name = ' ~ model_name
        ~ (' and false' if into_empty else '') ~ ')' -%}
    {#- The table as the batch finds it (step 5 reads it at that snapshot): from the run's plan, else
        asked. A table on the 'merge' path (cdc_write_path) takes the whole batch in one MERGE
        (step 6), and its last changes are classified against the table at that snapshot in
        the same query as the validation (`classified_now`: no query of its own). -#}
    {%- set state = none if into_empty else (cdc_planned_state(target.identifier) or cdc_table_state(target)) -%}
    {%- set single_writer = cdc_single_writer() -%}
    {%- set one_merge = cdc_write_path(state) == 'merge' -%}
    {%- set batch_bytes = cdc_run_plan().get(target.identifier, {}).get('bytes') -%}
    {%- set shuffled = one_merge and cdc_merge_shuffles(state) -%}
    {%- set uncached = one_merge and not shuffled and batch_bytes is not none and batch_bytes <= cdc_uncached_batch_max_bytes() -%}
    {%- set named_reads = '' -%}
    {%- if uncached -%}
        {#- In the aggregate, the batch's events (read three times: ranked, their truncates, their keys)
            and the tombstones (twice) are each named once, in a CTE. Spark analyses a raw file read once
            per reference, and each analysis is a job that reads Parquet footers for the schema; a CTE
            is analysed once and then inlined. (Not the cached query: Spark never matches a cached plan
            that holds a CTE, see cdc_batch_changes_sql.) -#}
        {%- set named_reads = 'with __cdc_events as (select * from ' ~ events ~ ' as events), '
            ~ '__cdc_tombstones as (select * from ' ~ tombstones ~ ' as tombstones) ' -%}
        {%- set changes = '(' ~ cdc_batch_changes_sql('__cdc_events', '__cdc_tombstones', keys, every_event=true) ~ ')' -%}
    {%- else -%}
        {%- do cdc_execute(
            'cache table ' ~ changes
            ~ (" options ('storageLevel' 'DISK_ONLY')" if into_empty else '')
            ~ ' as ' ~ cdc_batch_changes_sql(events, tombstones, keys, every_event=true)
        ) -%}
        {%- do record.views.append('changes') -%}
    {%- endif -%}
    {%- set read_as_found = none if state is none else (
        target if state.snapshot is none else '(select * from ' ~ target ~ ' version as of ' ~ state.snapshot ~ ')') -%}
    {%- set deferred = cdc_accounting_deferred() -%}
    {#- On the 'merge' path, each last change is compared with the table in the same pass (the table's
        rows of the batch's keys, found from the raw events or the cached batch: no second computation
        of the batch). The rows come in file order, sorted here (an ORDER BY would cost Spark two jobs). -#}
    {%- set files = run_query(named_reads ~ cdc_batch_files_sql(changes, keys,
        current_rows=read_as_found if one_merge else none, batch_keys='__cdc_events' if uncached else changes,
        deletes=deferred)).rows | sort(attribute='_cdc_source_file', case_sensitive=true) -%}
    {%- if record.get('view_read') -%}
        {%- do cdc_keep_files_read(record, files | map(attribute='_cdc_source_file') | list) -%}
    {%- endif -%}
    {%- set truncate = cdc_validate_batch(target, files, keys, record) -%}
    {%- do cdc_fault_point('after_validate') -%}
    {%- set batch_outcome = cdc_batch_counts(files) -%}
    {#- The last changes: of the cached batch, or, uncached, the cheaper query that ranks only them,
        with the newest truncate the aggregate compared them with, and the tombstones only when the
        aggregate found a change they stop (no second read of either otherwise). -#}
    {%- set last = ('(' ~ cdc_batch_changes_sql(events, tombstones, keys, truncate_bound=cdc_truncate_bound(files),
        tombstoned=batch_outcome.ignored_tombstoned > 0) ~ ')') if uncached else cdc_last_changes(changes) -%}
    {%- set effective_sql = none if state is none else cdc_effective_changes_sql(last, read_as_found, keys, outcome=true) -%}
    {%- set classified_now = cdc_classified_counts(files) if one_merge else none -%}
    {%- set rows_truncated = 0 -%}
    {%- set deletes = batch_outcome.last_deletes > 0 -%}
    {%- if deferred and deletes and batch_outcome.last_deletes <= cdc_tombstone_literals_max() -%}
        {#- A few deletes, in `make run` (either target): their tombstones are literals the run inserts
            once for every batch (no statement here). -#}
        {%- do record.update({'deletes': cdc_tombstone_literals(files)}) -%}
    {%- endif -%}

    {#- 4b. A truncate: a table-wide tombstone, then every row older than it goes. (The cached batch
           reads the tombstones, so Spark computes it again once: its result is the same, since a
           truncate is older than every change it lets through.) -#}
    {%- if truncate is not none -%}
        {%- set truncate_ts = cdc_timestamp_literal(truncate[0]) -%}
        {%- set truncate_seq = cdc_sql_string(truncate[1]) -%}
        {%- do cdc_write_tombstones(target, 'select ' ~ model_name ~ " as model_name, '*' as key_json, "
            ~ truncate_ts ~ ' as _cdc_ts, ' ~ truncate_seq ~ " as _cdc_seq, 'truncate' as _cdc_source_file,"
            ~ ' current_timestamp() as recorded_at', 'truncate', record) -%}
        {%- set older_than_truncate = '_cdc_ts < ' ~ truncate_ts
            ~ ' or (_cdc_ts = ' ~ truncate_ts ~ ' and _cdc_seq <= ' ~ truncate_seq ~ ')' -%}
        {%- set rows_truncated = run_query('select count(*) from ' ~ target ~ ' where ' ~ older_than_truncate).columns[0].values()[0] -%}
        {%- do cdc_execute('delete from ' ~ target ~ ' where ' ~ older_than_truncate) -%}
    {%- endif -%}

    {%- set target_columns = target_columns if target_columns is not none else cdc_column_names(target) -%}
    {%- set source_columns = (source_columns if source_columns is not none else cdc_column_names(events)) | map('lower') | list -%}
    {%- if into_empty -%}
        {#- 5-6 of a full build: every last change but a delete, inserted; then the deletes become
            tombstones. -#}
        {%- set last_count = batch_outcome.change_events - batch_outcome.truncates - batch_outcome.redelivered
            - batch_outcome.superseded - batch_outcome.ignored_truncated - batch_outcome.ignored_tombstoned -%}
        {%- do cdc_stash_outcome(record, cdc_outcome(batch_outcome,
            {'insert': last_count - batch_outcome.last_deletes, 'no_row': batch_outcome.last_deletes}, rows_truncated)) -%}
        {%- do cdc_execute(cdc_insert_changes_sql(target, last, cdc_merge_values(target_columns, source_columns))) -%}
        {%- if deletes -%}
            {%- do cdc_record_tombstones(target, last, record) -%}
        {%- endif -%}
        {{ return(none) }}
    {%- endif -%}

    {#- 5. Only the changes that change something: newer than the row they touch, and not the same
           event again (same commit time and same content: a re-delivery with a new position).
           An Iceberg write commits even when no row changes, so an empty set skips it. Every
           last change is classified once (`classified`: insert, update, delete, or why it changes
           nothing, counted for the batch log). The target is read at one snapshot
           (`read_snapshot`), the base of step 6's publish. -#}
    {%- if truncate is not none -%}
        {#- The truncate changed the table: the comparison reads it as it is now. -#}
        {%- set state = cdc_table_state(target) -%}
        {%- set effective_sql = cdc_effective_changes_sql(last, target if state.snapshot is none
            else '(select * from ' ~ target ~ ' version as of ' ~ state.snapshot ~ ')', keys, outcome=true) -%}
        {%- set classified_now = none -%}
    {%- endif -%}
    {%- do cdc_drop_stale_branches(target, state.branches, 0 if single_writer else 3600) -%}
    {%- set read_snapshot = state.snapshot -%}
    {#- The one MERGE takes inserts too: its outer join broadcasts a small table and shuffles a large
        one behind a bloom filter (cdc_merge_shuffles), one commit publishes the batch, and the
        comparison is not cached (the MERGE repeats it on the rows it joins). The 'split' path (a table
        above a cdc_one_merge_max_bytes a user set) appends and runs a matched-only MERGE (6), which never
        shuffles the table. On a shared target another run could commit between the comparison and the MERGE,
        and the batch log would count what that run applied: there a batch with new keys is written
        to a branch on either path, and the branch's publish check (cdc_publish_branch) catches it. -#}
    {%- if not one_merge -%}
        {%- do cdc_execute('cache table ' ~ classified ~ ' as ' ~ effective_sql) -%}
        {%- do record.views.append('classified') -%}
    {%- endif -%}
    {%- set by_outcome = {} -%}
    {%- if classified_now is not none -%}
        {%- do by_outcome.update(classified_now) -%}
    {%- else -%}
        {%- for row in run_query('select _cdc_outcome, count(*) from '
                ~ (('(' ~ effective_sql ~ ') as classified') if one_merge else classified) ~ ' group by _cdc_outcome').rows -%}
            {%- do by_outcome.update({row[0]: row[1]}) -%}
        {%- endfor -%}
    {%- endif -%}
    {%- do cdc_stash_outcome(record, cdc_outcome(batch_outcome, by_outcome, rows_truncated)) -%}
    {%- if state.layout is not none -%}
        {#- The table's delete layout after this batch, for its upkeep (maintenance.sql), from the
            totals before it: merge-on-read writes each updated row again and marks the old one
            deleted, in one more delete file (at least). -#}
        {%- set changed = by_outcome.get('update', 0) + by_outcome.get('delete', 0) -%}
        {%- do record.update({'layout': {
            'data_rows': state.layout.data_rows + by_outcome.get('insert', 0) + by_outcome.get('update', 0),
            'deleted_rows': state.layout.deleted_rows + changed,
            'delete_files': state.layout.delete_files + (1 if changed > 0 else 0)}}) -%}
    {%- endif -%}
    {%- set matched = by_outcome.get('update', 0) + by_outcome.get('delete', 0) > 0 -%}
    {%- set inserts = by_outcome.get('insert', 0) > 0 -%}
    {%- if not matched and not inserts -%}
        {%- if deletes -%}
            {%- do cdc_record_tombstones(target, last, record) -%}
        {%- endif -%}
        {{ return(none) }}
    {%- endif -%}

    {#- 6. The writes. The one-MERGE path ('merge') inserts, updates and deletes in one MERGE. The split
           path appends the new keys and changes the rows that exist with a MERGE with only WHEN MATCHED
           clauses: a MERGE with WHEN NOT MATCHED is an outer join that Spark can only run by shuffling
           the whole target; without it, the batch is broadcast and the target is only scanned, so the
           cost follows the batch, not the table. The INSERT reads the classified changes; its commit
           makes Spark drop that cache (it reads the target), so the MERGE reads the cached batch's last
           changes and repeats step 5's comparison in its conditions, on the rows it joins.
           A branch made from `read_snapshot` takes the writes when the split path has both (two commits)
           and, on a shared target, any batch with new keys (its counts were classified against that
           snapshot, `classified_now` on the one-MERGE path). It replaces main in one step (fast_forward)
           only if main is still that snapshot: readers see the whole batch or none of it, and when
           another writer committed meanwhile (a second run of the same model on a shared target)
           nothing is published and the run fails with a message; the next run applies the batch to
           the new state. A MERGE alone needs no branch: it re-checks its conditions on the rows it
           joins, and Iceberg refuses its commit if another commit touched them (serializable
           isolation). The embedded target, where one process at a time opens the warehouse
           (python_hooks/project/embedded_lock.py), appends to main directly when a batch has only new keys. -#}
    {%- set values = cdc_merge_values(target_columns, source_columns) -%}
    {%- set on_branch = inserts and read_snapshot is not none and (not single_writer or (matched and not one_merge)) -%}
    {%- set branch = cdc_batch_branch(target) if on_branch else none -%}
    {%- set written = target ~ '.' ~ cdc_quote('branch_' ~ branch) if on_branch else target -%}
    {%- if on_branch -%}
        {%- do cdc_execute('alter table ' ~ target ~ ' create branch ' ~ cdc_quote(branch) ~ ' as of version ' ~ read_snapshot) -%}
        {%- do cdc_fault_point('after_branch_created') -%}
    {%- endif -%}
    {%- if inserts and not one_merge -%}
        {%- do cdc_fault_point('during_insert') -%}
        {%- do cdc_execute(cdc_insert_changes_sql(
            written, '(select * from ' ~ classified ~ " where _cdc_outcome = 'insert')", values)) -%}
        {%- do cdc_fault_point('after_insert') -%}
    {%- endif -%}
    {%- do cdc_pause_point('before_publish') -%}
    {%- if matched or one_merge -%}
        {%- do cdc_fault_point('during_merge') -%}
        {%- if shuffled -%}
            {#- A table above cdc_merge_broadcast_max_bytes: the MERGE's outer join cannot broadcast it, so
                it is a shuffle join, and Spark filters the table's side with a bloom filter of the batch's
                keys before the shuffle (its runtime filter: the cached batch, filtered, is the creation
                side; spark.sql.optimizer.runtime.bloomFilter.* in the profile), so only the rows of the
                batch's keys are shuffled. Spark injects it only into a join it plans as a shuffle join
                from both sides' sizes, and the batch is small enough to broadcast: for this one statement
                nothing is broadcast by its estimated size (AQE still broadcasts by measured size,
                spark.sql.adaptive.autoBroadcastJoinThreshold). The setting is the session's: another
                thread's statement meanwhile is planned the same way, with the same result, and so is every
                later one of a session whose MERGE failed before the reset. -#}
            {%- do cdc_execute('set spark.sql.autoBroadcastJoinThreshold = -1') -%}
        {%- endif -%}
        {%- do cdc_execute(cdc_merge_matched_sql(written, last, keys, target_columns, values,
            inserts=inserts and one_merge, unchanged=unchanged)) -%}
        {%- if shuffled -%}
            {%- do cdc_execute('reset spark.sql.autoBroadcastJoinThreshold') -%}
        {%- endif -%}
        {%- do cdc_fault_point('after_merge') -%}
    {%- endif -%}
    {%- if on_branch -%}
        {%- do cdc_publish_branch(target, branch, read_snapshot) -%}
        {%- do cdc_fault_point('after_publish') -%}
    {%- endif -%}
    {#- 7. The batch's deletes become tombstones, once the target has committed (then the post-hook
           records the batch's files in the ledger). -#}
    {%- if deletes -%}
        {%- do cdc_record_tombstones(target, last, record) -%}
        {%- do cdc_fault_point('after_tombstones') -%}
    {%- endif -%}
    {{ return(none) }}
{% endmacro %}


{% macro cdc_write_path(state) -%}
    {#- Pure, from facts: which of the two write paths a batch takes (cdc_apply_batch, step 6), on
        either target.
        - 'merge': one MERGE inserts, updates and deletes. Every table that exists, unless its data
          files are above cdc_one_merge_max_bytes (unset by default). Its outer join broadcasts a small
          table and shuffles a large one behind a bloom filter (cdc_merge_shuffles); the batch's counts
          are classified in the validation's query, against the snapshot read.
        - 'split': the new keys are appended and the rows that exist are changed by a MERGE with only
          WHEN MATCHED clauses (an inner join: the batch is broadcast, the table only scanned, so the
          cost follows the batch at any table size); when a batch has both, they go to a branch made
          from the snapshot read, published in one fast-forward. Every other batch: a table above that
          limit, and a table created empty in this run (a first build or --full-refresh: nothing to compare, every
          last change is appended).
        On a shared target a batch with new keys is written to a branch on either path (step 6).
        Both run in `make test` on the embedded target (CDC_ONE_MERGE_MAX_BYTES=0 forces 'split',
        CDC_MERGE_BROADCAST_MAX_BYTES=0 the shuffled MERGE: tests/pytest/test_write_paths.py) and on the cluster (tests/pytest/test_cluster.py). -#}
    {%- set limit = cdc_one_merge_max_bytes() -%}
    {%- if state is not none and state.snapshot is not none and (limit is none or state.bytes <= limit) -%}
        {{ return('merge') }}
    {%- endif -%}
    {{ return('split') }}
{%- endmacro %}


{% macro cdc_keep_files_read(record, read) -%}
    {#- A full build read through the staging view, filtered by the names the folder's listing pinned
        (cdc_stage_batch): only the pinned files the view read (`read`: the names of the aggregate's rows)
        are the batch's, for its log (a refused batch's too) and the ledger. Another (a file the hooks had
        not registered in a folder read in groups, a file of no row) waits for the next batch, which reads
        it by its path. -#}
    {%- set kept = [] -%}
    {%- for file in record.file_counts if file[0] in read -%}
        {%- do kept.append(file) -%}
    {%- endfor -%}
    {%- do record.update({'file_counts': kept}) -%}
    {%- do record.summary.update({'files': kept | length}) -%}
{%- endmacro %}


{% macro cdc_merge_shuffles(state) -%}
    {#- Pure, from facts: whether a batch's one MERGE is a shuffle join with a bloom filter on the table's
        side (its data files above cdc_merge_broadcast_max_bytes) rather than a broadcast of the table
        (cdc_apply_batch, step 6). Such a batch is cached: a bloom filter is built only from a cached or
        stored relation, not from the raw files' read. -#}
    {{ return(state is not none and state.bytes > cdc_merge_broadcast_max_bytes()) }}
{%- endmacro %}


{% macro cdc_merge_matched_sql(target, changes, keys, target_columns, values, inserts=false, unchanged={}) %}
    {#- Step 6 for the keys that have a row: the last changes, applied only when newer than the row
        and not the same event again (the conditions of step 5). No WHEN NOT MATCHED: an inner
        join, which Spark broadcasts. `inserts`: the 'merge' path's one MERGE, which also inserts the
        new keys (an outer join). `unchanged`: columns whose placeholder keeps the row's value. -#}
merge into {{ target }} as t
using {{ changes }} as s
on {{ cdc_same_key('t', 's', keys) }}
when matched and s._cdc_op = 'D' and {{ cdc_is_newer('s', 't') }} then delete
when matched and s._cdc_op <> 'D' and {{ cdc_is_newer('s', 't') }}
    and not (s._cdc_op = t._cdc_op and s._cdc_ts = t._cdc_ts and s._cdc_row_hash = t._cdc_row_hash) then update set
    {%- for column in target_columns %}
    t.{{ cdc_quote(column) }} = {{ cdc_unchanged_update_value(column, values[loop.index0], unchanged) }}{{ ',' if not loop.last }}
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


{% macro cdc_record_tombstones(target, changes, record) %}
    {#- The batch's deletes (in `changes`, step 3) become tombstones, once the target has committed
        (step 7, or the post-hook of a full build). Not before: a write to cdc_tombstones makes Spark
        drop its cache of every query that reads it (the batch's changes, the effective changes),
        and the MERGE would compute them again. Safe in this order: if this commit fails, the
        ledger does not record the batch, the rerun applies it again, its deletes find no row (no
        MERGE) and are recorded then. When the batch's aggregate brought them (`record.deletes`,
        literal rows), the run inserts them as they are, in one VALUES list with every batch's
        (`record.tombstone_rows`, the columns of cdc_tombstones): no statement in the batch. -#}
    {%- if record.get('deletes') -%}
        {%- set recorded_at = cdc_now_literal() -%}
        {%- for delete in record.deletes -%}
            {%- do record.tombstone_rows.append([cdc_sql_string(target.identifier)] + delete + [recorded_at]) -%}
        {%- endfor -%}
    {%- else -%}
        {%- do cdc_write_tombstones(target, 'select ' ~ cdc_sql_string(target.identifier) ~ ' as model_name,'
            ~ ' _cdc_key_json as key_json, _cdc_ts, _cdc_seq, _cdc_source_file, current_timestamp() as recorded_at'
            ~ ' from ' ~ changes ~ " where _cdc_op = 'D'", 'deletes', record) -%}
    {%- endif -%}
{% endmacro %}


{% macro cdc_uncached_batch_max_bytes() -%}
    {#- Up to how many bytes of raw files a small table's batch is read twice instead of cached
        (step 1-3). -#}
    {{ return(4 * 1024 * 1024) }}
{%- endmacro %}


{% macro cdc_tombstones_spooled() -%}
    {#- Pure, from facts handed over: whether a batch with more deletes than cdc_tombstone_literals_max
        spools its tombstones for the run to insert, once for every batch (`make run` on the
        single-writer target: CDC_TOMBSTONE_SPOOL and CDC_ACCOUNTING). A few deletes are handed to the
        run as literal rows whenever the accounting is the run's, on either target (cdc_apply_batch). -#}
    {{ return(env_var('CDC_TOMBSTONE_SPOOL', '') != '' and cdc_accounting_deferred()) }}
{%- endmacro %}


{% macro cdc_tombstone_literals_max() -%}
    {#- Up to how many deletes a batch hands its tombstones to the run as literal rows; more are
        spooled to Parquet (cdc_write_tombstones): a statement's text stays small. -#}
    {{ return(1000) }}
{%- endmacro %}


{% macro cdc_tombstone_literals(files) -%}
    {#- The batch's deletes (cdc_batch_files_sql's `deletes_json`) as rows of literals (key_json, commit
        time, sequence, file). -#}
    {%- set rows = [] -%}
    {%- for row in files -%}
        {%- for delete in fromjson(row['deletes_json'] or '[]') -%}
            {%- do rows.append([cdc_sql_string(delete[0]), 'cast(' ~ cdc_sql_string(delete[1]) ~ ' as timestamp)',
                cdc_sql_string(delete[2]), cdc_sql_string(row['_cdc_source_file'])]) -%}
        {%- endfor -%}
    {%- endfor -%}
    {{ return(rows) }}
{%- endmacro %}


{% macro cdc_write_tombstones(target, rows_sql, kind, record) %}
    {#- Writes tombstone rows (`rows_sql`, the columns of cdc_tombstones) now, or, in `make run` on the
        single-writer target, to this model's spool folder for `kind` (Parquet files, no table, no
        commit: CDC_TOMBSTONE_SPOOL, handed by python_hooks/commands/run.py), which the run inserts into
        cdc_tombstones once for every batch, with the batch log and the ledger
        (python_hooks/commands/accounting.py). The folder is the batch's (`record.tombstones`): a
        folder an earlier, killed run left is overwritten, and never read unless this batch wrote it. -#}
    {%- if cdc_tombstones_spooled() -%}
        {%- set folder = env_var('CDC_TOMBSTONE_SPOOL') ~ '/' ~ target.schema ~ '/' ~ target.identifier ~ '/' ~ kind -%}
        {%- do cdc_execute('insert overwrite directory ' ~ cdc_sql_string(folder) ~ ' using parquet ' ~ rows_sql) -%}
        {%- do record.tombstones.append('select * from parquet.' ~ cdc_quote(folder)) -%}
    {%- else -%}
        {%- do cdc_execute('insert into ' ~ cdc_meta_relation('cdc_tombstones') ~ ' ' ~ rows_sql) -%}
    {%- endif -%}
{% endmacro %}

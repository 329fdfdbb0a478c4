{#- How a batch reaches a table: its state (snapshot, branches, size), the writer rule of the target,
    the one-MERGE threshold, and the branch a batch with new keys and changes is published from. -#}

{% macro cdc_table_state(target) -%}
    {#- One query for what a batch needs to know of its table: the snapshot `main` points at (none
        for a table without one), the names of its branches, the bytes of its data files then, and
        its delete layout then (`layout`: data rows, position-deleted rows, delete files, from the
        snapshot's summary totals; none when the summary lacks them). -#}
    {%- set state = {'snapshot': none, 'branches': [], 'bytes': 0, 'layout': none} -%}
    {%- set totals = {'bytes': 'total-files-size', 'data_rows': 'total-records',
        'deleted_rows': 'total-position-deletes', 'delete_files': 'total-delete-files'} -%}
    {%- set sql -%}
        select refs.name, refs.type, refs.snapshot_id
            {%- for name, total in totals.items() %}, snapshots.summary[{{ cdc_sql_string(total) }}] as {{ name }}{% endfor %}
        from {{ target }}.refs as refs left join {{ target }}.snapshots as snapshots
            on refs.snapshot_id = snapshots.snapshot_id
    {%- endset -%}
    {%- for row in run_query(sql).rows -%}
        {%- if row['name'] == 'main' -%}
            {%- do state.update({'snapshot': row['snapshot_id'] | int, 'bytes': (row['bytes'] or 0) | int}) -%}
            {%- if row['data_rows'] is not none and row['deleted_rows'] is not none and row['delete_files'] is not none -%}
                {%- do state.update({'layout': {'data_rows': row['data_rows'] | int,
                    'deleted_rows': row['deleted_rows'] | int, 'delete_files': row['delete_files'] | int}}) -%}
            {%- endif -%}
        {%- elif row['type'] | upper == 'BRANCH' -%}
            {%- do state.branches.append(row['name']) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(state) }}
{%- endmacro %}


{% macro cdc_one_merge_max_bytes() -%}
    {#- Up to which size of its data files a table takes a batch in one MERGE (cdc_write_path): the
        model's +cdc_one_merge_max_bytes, else CDC_ONE_MERGE_MAX_BYTES, else none (every table). -#}
    {%- set limit = config.get('cdc_one_merge_max_bytes') or env_var('CDC_ONE_MERGE_MAX_BYTES', '') -%}
    {{ return(none if limit == '' else limit | int) }}
{%- endmacro %}


{% macro cdc_merge_broadcast_max_bytes() -%}
    {#- Up to which size of its data files a table is broadcast into its batch's MERGE; above it the MERGE
        is a shuffle join whose table side Spark filters first with a bloom filter of the batch's keys
        (cdc_apply_batch, step 6): the model's +cdc_merge_broadcast_max_bytes, else
        CDC_MERGE_BROADCAST_MAX_BYTES, else 32 MiB. -#}
    {{ return((config.get('cdc_merge_broadcast_max_bytes') or env_var('CDC_MERGE_BROADCAST_MAX_BYTES', '33554432')) | int) }}
{%- endmacro %}


{% macro cdc_current_snapshot(target) -%}
    {#- The id of the snapshot `main` points at, none for a table without one. -#}
    {%- set rows = run_query('select snapshot_id from ' ~ target ~ ".refs where name = 'main'").rows -%}
    {{ return(rows[0][0] | int if rows | length > 0 else none) }}
{%- endmacro %}


{% macro cdc_single_writer() -%}
    {#- True on a warehouse only one process can write: the `local` target, an embedded Spark
        (dbt-spark's `session` method, `spark.master` local[...]) on an embedded Derby metastore, which
        one process at a time opens (python_hooks/project/embedded_lock.py refuses a second one). `make run`
        hands the answer over (CDC_SINGLE_WRITER, from the profile: python_hooks/project/warehouse.py,
        Warehouse.single_writer); a plain dbt command asks Spark (the metastore URL itself is redacted
        by Spark's SET). -#}
    {%- if not execute -%}
        {{ return(false) }}
    {%- endif -%}
    {%- set handed = env_var('CDC_SINGLE_WRITER', '') -%}
    {%- if handed -%}
        {{ return(handed == '1') }}
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
            "cdc_current_state: another writer committed to " ~ target ~ " while this run applied its batch (snapshot "
            ~ read_snapshot ~ " became " ~ now_snapshot ~ "); nothing of this batch was published and the table is "
            ~ "as the other writer left it. The next run applies the batch to the new state.") }}
    {%- endif -%}
    {%- do cdc_execute(
        'call spark_catalog.system.fast_forward(table => ' ~ cdc_sql_string(target.schema ~ '.' ~ target.identifier)
        ~ ", branch => 'main', to => " ~ cdc_sql_string(branch) ~ ')'
    ) -%}
    {%- do cdc_execute('alter table ' ~ target ~ ' drop branch ' ~ cdc_quote(branch)) -%}
{% endmacro %}

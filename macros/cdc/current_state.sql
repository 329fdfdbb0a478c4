{#- Current-state models: one Iceberg table per source table, kept equal to the replay of every
    change event by the `cdc_current_state` materialization (materialization.sql). A model is one
    line:

        {{ cdc_current_state('stg_crm__customer_master', unique_key=['customer_id']) }}

    Its SQL says what the table is made of (the staging model's change events); the
    materialization reads only the batch's new files and applies them (docs/ARCHITECTURE.md). -#}

{% macro cdc_current_state(staging_model, unique_key) %}
    {{ config(
        materialized='cdc_current_state',
        file_format='iceberg',
        unique_key=unique_key,
        on_schema_change='append_new_columns',
        cdc_staging_model=staging_model,
    ) }}
    {%- set events = ref(staging_model) -%}
    {%- if execute and model.resource_type == 'unit_test' -%}
        {#- A dbt unit test: the merge rules over the given rows, as the table the run leaves
            (`ref(staging_model)` = the batch with _cdc_row_hash, `this` = the table before it). -#}
        {%- set empty_table = '(select * from ' ~ events ~ ' where false)' -%}
        {%- set table_before = this if this is not none and is_incremental() else empty_table %}
{{ cdc_merge_result_sql(table_before, events, cdc_unit_test_tombstones(), cdc_key_columns(unique_key, model.name)) }}
    {%- else %}
select
    *,
    cast(null as bigint) as _cdc_row_hash,
    {{ cdc_run_timestamp() }} as _cdc_applied_at
from {{ events }}
    {%- endif %}
{% endmacro %}


{% macro cdc_row_hash(columns) -%}
    {#- A fingerprint of a row's business columns (xxhash64 skips nulls, so a column added later
        and still null leaves it unchanged): tells a re-delivered event from a new one. -#}
    {%- set business = [] -%}
    {%- for column in columns if not column.startswith('_cdc_') -%}
        {%- do business.append(cdc_quote(column)) -%}
    {%- endfor -%}
    {{ return('xxhash64(' ~ (business | join(', ')) ~ ')') }}
{%- endmacro %}


{% macro cdc_run_timestamp() -%}
    {#- One timestamp for the whole dbt invocation: when the rows written by this run were applied. -#}
    {{ return(cdc_timestamp_literal(run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f'))) }}
{%- endmacro %}


{% macro cdc_batch_view(target, suffix) -%}
    {#- Session-scoped temporary views holding one model's batch, named for this dbt invocation: a
        view left by a failed batch earlier in the same Spark session (a test process, `run --every`)
        never collides with this one, so a batch need not look for leftovers first. `make run` drops
        such leftovers after a failed build (python_hooks/commands/run.py: _drop_batch_views). -#}
    {{ return(api.Relation.create(identifier=target.identifier ~ '__cdc_' ~ suffix ~ '_' ~ invocation_id[:8],
        type='view').include(database=false, schema=false)) }}
{%- endmacro %}


{% macro cdc_sql_string_list(values) -%}
    {%- set literals = [] -%}
    {%- for value in values -%}
        {%- do literals.append(cdc_sql_string(value)) -%}
    {%- endfor -%}
    {{ return(literals | join(', ')) }}
{%- endmacro %}


{% macro cdc_staging_reader(staging_model) -%}
    {#- How to read a batch's files the way the staging model does: its source node and the project
        macro that renders its SQL for given files, when the staging model is the one-line call of
        stg_dms_changes / stg_debezium_changes; none for another staging model (then the batch is read
        through the staging view, filtered by file name). -#}
    {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.name == staging_model -%}
        {%- set names = [] -%}
        {%- for macro_id in node.depends_on.macros -%}
            {%- do names.append(macro_id.split('.')[-1]) -%}
        {%- endfor -%}
        {%- set producer = 'dms' if 'stg_dms_changes' in names
            else ('debezium' if 'stg_debezium_changes' in names else none) -%}
        {%- if producer is not none and node.sources | length == 1 -%}
            {{ return({'producer': producer, 'source': cdc_source_node(node.sources[0][0], node.sources[0][1])}) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(none) }}
{%- endmacro %}


{% macro cdc_stage_batch(target, staging_model, events, full_build, keys=[]) %}
    {#- Pins this run's batch: the raw files not applied yet (all files on a full build), by name, so
        that every later step reads the same files even while new ones land. An incremental batch
        reads those files only, with the staging model's SQL (cdc_staging_reader); nothing new
        reads no raw file at all. A full build reads the staging view (its catalog table knows the
        columns of every file: no footer is read again) filtered by the names the folder's listing
        pinned; the merge's aggregate counts each file's events, and a pinned file of which the view
        read nothing (one the hooks had not registered in a folder read in groups, or an empty file) is
        left to the next run (`record.view_read`: merge.sql, cdc_keep_files_read). -#}
    {#- Where a test removes a planned raw file before the batch reads it (a lifecycle rule). -#}
    {%- do cdc_pause_point('before_batch') -%}
    {%- set mode = 'full' if full_build else 'incremental' -%}
    {%- set reader = cdc_staging_reader(staging_model) -%}
    {%- set events_view = cdc_batch_view(target, 'events') -%}
    {%- set file_counts = [] -%}
    {%- set from_plan = false -%}
    {%- if reader is none -%}
        {#- A staging model of the user's own: the staging view, one scan of its file names (but the
            applied ones, on an incremental batch). -#}
        {%- set applied = [] -%}
        {%- if not full_build -%}
            {%- set ledger = cdc_meta_relation('cdc_file_ledger') -%}
            {%- set applied = run_query('select distinct file_name from ' ~ ledger
                ~ ' where model_name = ' ~ cdc_sql_string(target.identifier)).columns[0].values() | list -%}
        {%- endif -%}
        {%- set pending = run_query(
            'select _cdc_source_file, count(*) from ' ~ events
            ~ (' where _cdc_source_file not in (' ~ cdc_sql_string_list(applied) ~ ')' if applied else '')
            ~ ' group by _cdc_source_file order by _cdc_source_file') -%}
        {%- set files = pending.columns[0].values() | list -%}
        {%- for row in pending.rows -%}
            {%- do file_counts.append([row[0], row[1] | int]) -%}
        {%- endfor -%}
    {%- else -%}
        {%- set pending = none if full_build else cdc_planned_files(reader.source, target.identifier) -%}
        {%- set from_plan = pending is not none -%}
        {%- if pending is none -%}
            {%- set pending = cdc_landing_pending(reader.source, target.identifier, every_file=full_build) -%}
        {%- endif -%}
        {%- set files = pending | map(attribute='name') | list -%}
        {%- for file in pending -%}
            {#- The count of each file's change events comes from the batch itself (the merge's aggregate). -#}
            {%- do file_counts.append([file.name, none]) -%}
        {%- endfor -%}
        {%- set business = [] -%}
        {%- if files and not full_build -%}
            {%- set paths = pending | map(attribute='path') | list -%}
            {#- The staging SQL names its columns (`business`): no need to ask Spark. -#}
            {%- set batch_sql = cdc_dms_changes(reader.source, staging_model, paths, columns=business)
                if reader.producer == 'dms' else cdc_debezium_changes(reader.source, staging_model, paths, columns=business) -%}
        {%- endif -%}
    {%- endif -%}
    {%- if full_build or reader is none -%}
        {#- The staging view, filtered by the pinned names. -#}
        {%- set batch_sql = 'select * from ' ~ events
            ~ (' where _cdc_source_file in (' ~ cdc_sql_string_list(files) ~ ')' if files else ' where false') -%}
    {%- endif -%}
    {#- When the batch started, for the batch log (a literal: the row is written later). -#}
    {%- set started_at = cdc_now_literal() -%}
    {%- if full_build or (files and reader is none) -%}
        {#- (The view's columns: a full build reads it, whichever reader.) -#}
        {%- set business = cdc_column_names(events) -%}
    {%- elif files and not business -%}
        {%- set business = cdc_landing_columns_of(batch_sql) | map(attribute='name') | list -%}
    {%- endif -%}
    {#- A source's placeholder for a value it did not send (unchanged.sql): filled from the batch and,
        on an incremental batch, the table's stored rows; not looked for in a batch of the plan's files
        none of which holds it, as the hooks found reading them. -#}
    {%- set unchanged_value = cdc_unchanged_value(reader.source if reader is not none else none)
        if (files or full_build) and keys
            and not (from_plan and cdc_planned_without_placeholder(target.identifier)) else none -%}
    {%- set batch_columns = cdc_landing_columns_of(batch_sql) if unchanged_value else [] -%}
    {%- set unchanged = cdc_unchanged_columns(unchanged_value, batch_columns) -%}
    {%- if unchanged -%}
        {#- The stored rows at the snapshot the batch starts from: the batch's own writes must not
            change what its fill reads (a cached batch that reads the table is read again after a write);
            the snapshot from the run's plan, else asked. -#}
        {#- (Its columns as of that snapshot: Iceberg reads a snapshot with its own schema, without a
            column the hooks added since.) -#}
        {%- set planned = none if full_build else cdc_planned_state(target.identifier) -%}
        {%- set stored_snapshot = none if full_build
            else (planned.snapshot if planned is not none else cdc_current_snapshot(target)) -%}
        {%- set stored = none if stored_snapshot is none
            else '(select * from ' ~ target ~ ' version as of ' ~ stored_snapshot ~ ')' -%}
        {%- set batch_sql = cdc_fill_unchanged_sql(batch_sql, batch_columns | map(attribute='name') | list, unchanged, keys,
            stored=stored, stored_columns=[] if stored is none else cdc_column_names(stored),
            table=target.identifier, one_round=from_plan and cdc_planned_fill_one_round(target.identifier)) -%}
    {%- endif -%}
    {#- The batch's change events, as a subquery the merge reads once (no view: nothing to create
        or drop); none when nothing is new (no raw file is read). `counted`: the listing counted each
        file's change events (else the merge counts them: `record.file_events`). `record`: what the batch
        log and the ledger read (batch_log.sql: cdc_batch_log_row, cdc_ledger_rows): the files
        (`file_counts`: [name, change events or none]), the merge's counts (`counts`, plain values, set by
        cdc_stash_outcome), the batch views created (`views`), and the batch log's own (`summary`: its
        build mode, start and count of files). -#}
    {%- set events_sql = '(select *, ' ~ cdc_row_hash(business) ~ ' as _cdc_row_hash from (' ~ batch_sql ~ ') as batch)'
        if files or full_build else none -%}
    {{ return({
        'files': files,
        'events': events_sql,
        'events_view': events_view,
        'record': {'file_counts': file_counts, 'counts': none, 'views': [], 'tombstones': [], 'tombstone_rows': [],
            'summary': {'build_mode': mode, 'started_at': started_at, 'files': files | length},
            'view_read': full_build and reader is not none},
        'columns': (business + ['_cdc_row_hash']) if files or full_build else [],
        'counted': reader is none,
        'unchanged': unchanged,
    }) }}
{% endmacro %}


{% macro cdc_drop_batch_views(target, views=none) %}
    {#- Drops a model's batch views (dropping a cached view uncaches it). `views`: the suffixes of
        the views this batch created (its record's `views`), else every one there can be. -#}
    {%- set suffixes = views if views is not none else ['classified', 'changes', 'events'] -%}
    {%- for suffix in suffixes -%}
        {%- do cdc_execute('drop view if exists ' ~ cdc_batch_view(target, suffix)) -%}
    {%- endfor -%}
{% endmacro %}

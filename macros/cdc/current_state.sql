{#- Current-state models: one Iceberg table per source table, kept equal to the replay of every
    change event, through the `cdc_merge` incremental strategy. A model is one line:

        {{ cdc_current_state('stg_crm__customer_master', unique_key=['customer_id']) }}

    How a run works (see docs/ARCHITECTURE.md):
      1. render  list the raw files not yet in the ledger, pin them by name in the batch views;
      2. main    first build / --full-refresh: create the empty table (the model selects no row);
                 incremental: `get_incremental_cdc_merge_sql` merges the batch;
      3. hook    `cdc_finish_batch`: on a first build, insert the whole batch now; then record the
                 batch's deletes as tombstones and its files in the ledger, drop the batch views,
                 and compact the table when its delete files call for it (maintenance.sql). -#}

{% macro cdc_current_state(staging_model, unique_key) %}
    {{ config(
        materialized='incremental',
        incremental_strategy='cdc_merge',
        file_format='iceberg',
        unique_key=unique_key,
        on_schema_change='append_new_columns',
        post_hook="{{ cdc_finish_batch() }}",
    ) }}
    {%- set events = ref(staging_model) -%}
    {%- if execute and model.resource_type == 'unit_test' -%}
        {#- A dbt unit test: the merge rules over the given rows, as the table the run leaves
            (`ref(staging_model)` = the batch with _cdc_row_hash, `this` = the table before it). -#}
        {%- set empty_table = '(select * from ' ~ events ~ ' where false)' -%}
        {%- set table_before = this if this is not none and is_incremental() else empty_table %}
{{ cdc_merge_result_sql(table_before, events, cdc_unit_test_tombstones(), cdc_key_columns(unique_key, model.name)) }}
    {%- elif execute -%}
        {%- set full_build = not is_incremental() -%}
        {%- set batch = cdc_stage_batch(this, events, full_build) -%}
select
    *,
    {{ cdc_run_timestamp() }} as _cdc_applied_at
from {{ batch.events_view }}
        {%- if full_build %}
where false
        {%- endif %}
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
    {{ return("cast('" ~ run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f') ~ "' as timestamp)") }}
{%- endmacro %}


{% macro cdc_batch_view(target, suffix) -%}
    {#- Session-scoped temporary views holding one model's batch. -#}
    {{ return(api.Relation.create(identifier=target.identifier ~ '__cdc_' ~ suffix, type='view').include(database=false, schema=false)) }}
{%- endmacro %}


{% macro cdc_applied_files(target) -%}
    {%- set ledger = cdc_meta_relation('cdc_file_ledger') -%}
    {%- if load_relation(ledger) is none -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set result = run_query(
        'select distinct file_name from ' ~ ledger
        ~ ' where model_name = ' ~ cdc_sql_string(target.identifier)
    ) -%}
    {{ return(result.columns[0].values() | list) }}
{%- endmacro %}


{% macro cdc_sql_string_list(values) -%}
    {%- set literals = [] -%}
    {%- for value in values -%}
        {%- do literals.append(cdc_sql_string(value)) -%}
    {%- endfor -%}
    {{ return(literals | join(', ')) }}
{%- endmacro %}


{% macro cdc_stage_batch(target, events, full_build) %}
    {#- Pins this run's batch: the raw files not applied yet (all files on a full build), by name,
        so that every later step reads the same files even while new ones land. -#}
    {%- do cdc_drop_batch_views(target) -%}  {#- left over by a failed run in this session -#}
    {%- set applied = [] if full_build else cdc_applied_files(target) -%}
    {%- set pending_sql -%}
        select _cdc_source_file, count(*) as change_events
        from {{ events }}
        {%- if applied %}
        where _cdc_source_file not in ({{ cdc_sql_string_list(applied) }})
        {%- endif %}
        group by _cdc_source_file
        order by _cdc_source_file
    {%- endset -%}
    {%- set pending = run_query(pending_sql) -%}
    {%- set files = pending.columns[0].values() | list -%}
    {%- set mode = 'full' if full_build else 'incremental' -%}

    {%- set files_view = cdc_batch_view(target, 'batch_files') -%}
    {%- set rows = [] -%}
    {%- for row in pending.rows -%}
        {%- do rows.append('(' ~ cdc_sql_string(row[0]) ~ ', ' ~ (row[1] | int) ~ ', ' ~ cdc_sql_string(mode) ~ ')') -%}
    {%- endfor -%}
    {%- if not rows -%}
        {%- do rows.append('(cast(null as string), cast(0 as bigint), ' ~ cdc_sql_string(mode) ~ ')') -%}
    {%- endif -%}
    {%- do cdc_execute(
        'create or replace temporary view ' ~ files_view
        ~ ' as select * from values ' ~ (rows | join(', '))
        ~ ' as batch_files(file_name, change_events, build_mode)'
    ) -%}

    {%- set events_view = cdc_batch_view(target, 'events') -%}
    {%- do cdc_execute(
        'create or replace temporary view ' ~ events_view
        ~ ' as select *, ' ~ cdc_row_hash(cdc_column_names(events)) ~ ' as _cdc_row_hash from ' ~ events
        ~ (' where _cdc_source_file in (' ~ cdc_sql_string_list(files) ~ ')' if files else ' where false')
    ) -%}
    {{ return({'files': files, 'events_view': events_view, 'files_view': files_view}) }}
{% endmacro %}


{% macro cdc_finish_batch() %}
    {#- Post-hook of every current-state model. -#}
    {%- if execute -%}
        {%- set files_view = cdc_batch_view(this, 'batch_files') -%}
        {%- set batch = run_query('select file_name, change_events, build_mode from ' ~ files_view) -%}
        {%- set model_name = cdc_sql_string(this.identifier) -%}
        {%- if batch.rows[0][2] == 'full' -%}
            {#- First build or --full-refresh: the table was created empty; apply everything. -#}
            {%- do cdc_execute('delete from ' ~ cdc_meta_relation('cdc_file_ledger') ~ ' where model_name = ' ~ model_name) -%}
            {%- do cdc_execute('delete from ' ~ cdc_meta_relation('cdc_tombstones') ~ ' where model_name = ' ~ model_name) -%}
            {%- do cdc_execute(cdc_merge_batch_sql(this, cdc_batch_view(this, 'events'), config.get('unique_key'), into_empty=true)) -%}
        {%- endif -%}
        {%- if batch.rows[0][0] is not none -%}
            {%- do cdc_record_tombstones(this) -%}
            {%- do cdc_execute(
                'insert into ' ~ cdc_meta_relation('cdc_file_ledger')
                ~ ' select ' ~ model_name ~ ', file_name, change_events, '
                ~ cdc_sql_string(invocation_id) ~ ', current_timestamp() from ' ~ files_view
            ) -%}
        {%- endif -%}
        {%- do cdc_drop_batch_views(this) -%}
        {%- if batch.rows[0][2] != 'full' and batch.rows[0][0] is not none -%}
            {%- set compaction = cdc_compaction_settings() -%}  {#- maintenance.sql -#}
            {%- do cdc_compact(this, compaction) -%}
            {%- do cdc_compact_meta(this.identifier, compaction) -%}
        {%- endif -%}
    {%- endif -%}
    select 1
{% endmacro %}


{% macro cdc_drop_batch_views(target) %}
    {%- for suffix in ['effective', 'changes', 'batch_events'] -%}
        {%- do cdc_execute('uncache table if exists ' ~ cdc_batch_view(target, suffix)) -%}
    {%- endfor -%}
    {%- for suffix in ['effective', 'changes', 'batch_events', 'events', 'batch_files'] -%}
        {%- do cdc_execute('drop view if exists ' ~ cdc_batch_view(target, suffix)) -%}
    {%- endfor -%}
{% endmacro %}

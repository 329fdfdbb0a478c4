{#- Exact SCD2 history from change events: every change a version. Used by models/history/. -#}

{% macro scd2_open_end() -%}
    {#- valid_to of a current version (the seed's rec_exp_dt of an open version). Snapshots set the
        same value in yml: dbt_valid_to_current = "cast('9999-12-31 00:00:00' as timestamp)". -#}
    cast('9999-12-31 00:00:00' as timestamp)
{%- endmacro %}


{% macro scd2_watermark(relation, column='_cdc_applied_at') -%}
    {#- The newest `column` already in an incremental model: rows written after it are new. -#}
    (select coalesce(max({{ column }}), cast('1900-01-01' as timestamp)) from {{ relation }})
{%- endmacro %}


{% macro cdc_change_log_pending_files(current_state, change_log) %}
    {#- Raw files a change log has still to read: the files the current-state model has applied
        (its rows in cdc_file_ledger), minus the files the log already holds events of. Following the
        current-state table's ledger, not the landing folder, keeps the history in step with the current
        state at every run boundary; a late file is applied whatever its name or timestamps.
        Both sides from an hour before the start of the last run that appended on (the log's newest
        `_cdc_applied_at`): a file recorded earlier was read by that run or one before it, so a run reads
        what the last runs recorded, not the log's whole history (the hour: clocks of dbt and of the
        warehouse apart, a run that recorded its ledger after its log). -#}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set ledger = cdc_meta_relation('cdc_file_ledger') -%}
    {%- if not cdc_meta_table_exists('cdc_file_ledger') -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set since = none if change_log is none else '(' ~ scd2_watermark(change_log) ~ ' - interval 1 hour)' -%}
    {%- set pending_sql -%}
        select distinct applied.file_name
        from {{ ledger }} as applied
        {%- if change_log is not none %}
        left anti join (
            select distinct _cdc_source_file from {{ change_log }}
            where _cdc_applied_at >= {{ since }}
        ) as logged
            on applied.file_name = logged._cdc_source_file
        {%- endif %}
        where applied.model_name = {{ cdc_sql_string(current_state.identifier) }}
            and applied.change_events > 0
            {%- if change_log is not none %}
            and applied.applied_at >= {{ since }}
            {%- endif %}
        order by applied.file_name
    {%- endset -%}
    {{ return(run_query(pending_sql).columns[0].values() | list) }}
{% endmacro %}


{% macro cdc_change_log(staging_model, current_state_model) %}
    {#- An append-only copy of the change events of the raw files the current-state model has
        applied, each with its content hash and the run that read it. -#}
    {%- set events = ref(staging_model) -%}
    {%- set current_state = ref(current_state_model) -%}
    {%- set files = cdc_change_log_pending_files(current_state, this if is_incremental() else none) -%}
    {%- set business = [] -%}
    {%- if execute -%}
        {%- for column in adapter.get_columns_in_relation(events) if not column.name.startswith('_cdc_') -%}
            {%- do business.append(adapter.quote(column.name)) -%}
        {%- endfor -%}
    {%- endif %}

with

events as (

    select * from {{ events }}
    {%- if files %}
    where _cdc_source_file in ({% for file in files %}{{ cdc_sql_string(file) }}{{ ', ' if not loop.last }}{% endfor %})
    {%- else %}
    where false
    {%- endif %}

),

logged as (

    select
        events.*,
        {%- if business %}
        xxhash64({{ business | join(', ') }}) as _cdc_row_hash,
        {%- else %}
        cast(null as bigint) as _cdc_row_hash,
        {%- endif %}
        {{ cdc_run_timestamp() }} as _cdc_applied_at
    from events

)

select * from logged
{% endmacro %}


{% macro cdc_change_history(change_log_model, unique_key) %}
    {#- The versions of the keys that have new changes in the log (every key on a first build or a
        full refresh), recomputed from all their changes:
          - a change delivered twice (same key, commit time, operation and content) counts once;
          - of several changes of a key at one commit time only the last (by _cdc_seq) is a version:
            the ones before it were never visible;
          - an insert or update starts a version with its row image; a delete of a live key starts a
            deletion version (is_deleted) that keeps the attributes of the version it ends; a delete
            of a key already gone or never seen is no version, but stays in the log, so that a late
            older change that lands before it is still ended by it;
          - valid_from is the commit time, valid_to the next version's valid_from (or open).
        The `scd2_versions` strategy then merges them: only rows that differ are written. -#}
    {%- set change_log = ref(change_log_model) -%}
    {%- set keys = [unique_key] if unique_key is string else unique_key | list -%}
    {%- set attributes = [] -%}
    {%- if execute -%}
        {%- for column in adapter.get_columns_in_relation(change_log)
            if not column.name.startswith('_cdc_') and column.name not in keys -%}
            {%- do attributes.append(adapter.quote(column.name)) -%}
        {%- endfor -%}
    {%- endif -%}
    {%- set key_list = keys | map('string') | list | join(', ') %}

with

change_log as (

    select * from {{ change_log }}

),

{%- if is_incremental() %}

changed_keys as (

    select distinct {{ key_list }}
    from change_log
    where _cdc_applied_at > {{ scd2_watermark(this) }}

),

key_changes as (

    select change_log.*
    from change_log
    left semi join changed_keys
        on {% for key in keys %}change_log.{{ key }} = changed_keys.{{ key }}{{ ' and ' if not loop.last }}{% endfor %}

),
{%- else %}

key_changes as (

    select * from change_log

),
{%- endif %}

distinct_changes as (

    select
        key_changes.*,
        row_number() over (
            partition by {{ key_list }}, _cdc_ts, _cdc_op, _cdc_row_hash
            order by _cdc_seq, _cdc_source_file
        ) as delivery_rank
    from key_changes
    -- a truncate has no key: the history would have to end every key with it; refuse it loudly
    where
        case
            when {% for key in keys %}{{ key }} is null{{ ' or ' if not loop.last }}{% endfor %}
                then raise_error(concat(
                    '{{ change_log_model }}: a change without a key (a truncate?) in ', _cdc_source_file,
                    '; cdc_change_history does not support truncates')) is null
            else true
        end

),

instants as (

    select
        distinct_changes.*,
        row_number() over (
            partition by {{ key_list }}, _cdc_ts
            order by _cdc_seq desc, _cdc_source_file desc
        ) as instant_rank
    from distinct_changes
    where delivery_rank = 1

),

steps as (

    select
        instants.*,
        lag(_cdc_op) over (partition by {{ key_list }} order by _cdc_ts) as previous_op,
        lag(struct({{ attributes | join(', ') }})) over (partition by {{ key_list }} order by _cdc_ts) as previous_row
    from instants
    where instant_rank = 1

),

versions as (

    select
        {%- for key in keys %}
        {{ key }},
        {%- endfor %}
        {%- for attribute in attributes %}
        case when _cdc_op = 'D' then previous_row.{{ attribute }} else {{ attribute }} end as {{ attribute }},
        {%- endfor %}
        _cdc_ts as valid_from,
        _cdc_op = 'D' as is_deleted,
        _cdc_op,
        _cdc_seq,
        _cdc_source_file
    from steps
    where _cdc_op in ('I', 'U')
        or (_cdc_op = 'D' and previous_op in ('I', 'U'))

),

history as (

    select
        {%- for key in keys %}
        {{ key }},
        {%- endfor %}
        {%- for attribute in attributes %}
        {{ attribute }},
        {%- endfor %}
        valid_from,
        coalesce(
            lead(valid_from) over (partition by {{ key_list }} order by valid_from),
            {{ scd2_open_end() }}
        ) as valid_to,
        lead(valid_from) over (partition by {{ key_list }} order by valid_from) is null as is_current,
        is_deleted,
        _cdc_op,
        _cdc_seq,
        _cdc_source_file,
        {{ cdc_run_timestamp() }} as _cdc_applied_at
    from versions

)

select * from history
{% endmacro %}

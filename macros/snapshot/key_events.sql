{#- The change events that can still decide when a key left a current-state table, kept as a small table that
    each run brings up to date from the files it applied, so that cdc_key_removals reads them instead of every
    raw event of the staging model (whose cost grew with the folder's history: bench/TUNING.md round 41). -#}

{% macro cdc_key_events(staging_model, current_state_model, key) %}
    {#- The model's own rows from before, plus the staging events of the raw files applied since, compacted
        to what cdc_key_removals (key_removals.sql) needs, so that it finds from them exactly what it would
        find from every event: per key, its last insert/update and the deletes after it (every delete when
        it has none: a late insert may still land before them); every truncate (no key). An event of
        before dropped here can never matter again: a delete older than the key's last insert/update
        stays older, whatever lands later.
        The files read: those the current-state model's ledger lists from the start of the run that built
        this table last (`_cdc_ledger_watermark`) on, and those of this run's batch, not in the ledger
        yet (`make run` records it after the build: the run's plan, or the folder's listing minus the
        ledger); a staging model of the user's own (no raw folder the project reads) gives every event.
        Reading a file twice changes nothing (the same events, compacted the same way), so a build that
        failed, or a run that recorded its ledger after this model, only makes the next build read a few
        files again. The first build and --full-refresh read every event. -#}
    {%- set events = ref(staging_model) -%}
    {%- set current_state = ref(current_state_model) -%}
    {%- set quoted_key = adapter.quote(key) -%}
    {%- set previous = load_relation(this) if execute and not flags.FULL_REFRESH else none -%}
    {%- set files = none -%}
    {%- if previous is not none -%}
        {%- set files = [] -%}
        {%- if cdc_meta_table_exists('cdc_file_ledger') -%}
            {%- do files.extend(run_query(
                'select distinct file_name from ' ~ cdc_meta_relation('cdc_file_ledger')
                ~ ' where model_name = ' ~ cdc_sql_string(current_state.identifier)
                ~ ' and applied_at >= ' ~ scd2_watermark(this, '_cdc_ledger_watermark')
            ).columns[0].values()) -%}
        {%- endif -%}
        {%- set reader = cdc_staging_reader(staging_model) -%}
        {%- set pending = none if reader is none else cdc_planned_files(reader.source, current_state.identifier) -%}
        {%- if reader is not none and pending is none -%}
            {%- set pending = cdc_landing_pending(reader.source, current_state.identifier) -%}
        {%- endif -%}
        {%- if pending is none or files | length + pending | length > cdc_key_events_files_max() -%}
            {%- set files = none -%}
        {%- else -%}
            {%- do files.extend(pending | map(attribute='name')) -%}
        {%- endif -%}
    {%- endif %}

with

events as (

    {%- if previous is not none %}

    select {{ quoted_key }}, _cdc_op, _cdc_ts, _cdc_seq from {{ this }}

    union all
    {%- endif %}

    select {{ quoted_key }}, _cdc_op, _cdc_ts, _cdc_seq from {{ events }}
    {%- if files is not none %}
    where {% if files %}_cdc_source_file in ({{ cdc_sql_string_list(files | unique | sort) }}){% else %}false{% endif %}
    {%- endif %}

),

last_live as (

    select
        {{ quoted_key }} as key_value,
        max(struct(_cdc_ts, _cdc_seq)) as change_position
    from events
    where _cdc_op in ('I', 'U')
    group by {{ quoted_key }}

),

kept as (

    select distinct events.*
    from events
    left join last_live
        on events.{{ quoted_key }} = last_live.key_value
    where
        events._cdc_op = 'T'
        or (events._cdc_op in ('I', 'U') and struct(events._cdc_ts, events._cdc_seq) = last_live.change_position)
        or (
            events._cdc_op = 'D'
            and (last_live.key_value is null or struct(events._cdc_ts, events._cdc_seq) > last_live.change_position)
        )

)

select
    kept.*,
    -- the next build reads the ledger's rows from the start of this run on (`applied_at` is the warehouse's
    -- clock: its time now if that is earlier, dbt's clock being ahead), so a file a run of another process
    -- recorded after this build read the ledger is read then
    least({{ cdc_run_timestamp() }}, current_timestamp()) as _cdc_ledger_watermark
from kept
{% endmacro %}


{% macro cdc_key_events_files_max() -%}
    {#- Above how many files to read a build reads every event instead, in one scan of the staging view: a
        list of names that long (a table not built for a long while) costs more than it saves. -#}
    {{ return(5000) }}
{%- endmacro %}

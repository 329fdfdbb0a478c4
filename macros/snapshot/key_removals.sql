{#- When did each key leave a current-state table? A current-state table hard-deletes, so the
    commit time of the change that removed a key is only in the change events. -#}

{% macro cdc_key_removals(events, key) %}
    {#- One row per key whose last insert/update is followed by a delete or a truncate, in
        (_cdc_ts, _cdc_seq) order: `removed_at` is the commit time of the first such change, the one
        that removed the key. Keys live in the current state have none, unless the table is behind
        its staging events (files landed after it ran); use it only for keys the table lacks.
        `events`: the change events (the key, `_cdc_op`, `_cdc_ts`, `_cdc_seq`), the ones of a staging
        model that can still matter, as `cdc_key_events` keeps them (key_events.sql). -#}
with

changes as (

    select
        {{ adapter.quote(key) }} as key_value,
        _cdc_op,
        struct(_cdc_ts, _cdc_seq) as change_position
    from {{ events }}

),

last_live as (

    select
        key_value,
        max(change_position) as change_position
    from changes
    where _cdc_op in ('I', 'U')
    group by key_value

),

removals as (

    select
        last_live.key_value,
        changes.change_position
    from last_live
    inner join changes
        on changes.key_value = last_live.key_value
        and changes._cdc_op = 'D'
        and changes.change_position > last_live.change_position

    union all

    select
        last_live.key_value,
        truncates.change_position
    from last_live
    inner join changes as truncates
        on truncates._cdc_op = 'T'
        and truncates.change_position > last_live.change_position

),

first_removal as (

    select
        key_value as {{ adapter.quote(key) }},
        min(change_position)._cdc_ts as removed_at
    from removals
    group by key_value

)

select * from first_removal
{% endmacro %}

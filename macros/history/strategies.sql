{#- Incremental strategies of the history and mart models (dispatched by macros/spark/custom_incremental_strategies.sql).
    None of them commits when it has nothing to write: an Iceberg MERGE or INSERT commits a new
    table snapshot even when it changes no row, and a rerun with no new data must change nothing. -#}

{% macro scd2_noop_sql() -%}
    select 'no change to apply' as incremental_result
{%- endmacro %}


{% macro scd2_relation_is_empty(relation) -%}
    {{ return(run_query('select 1 from ' ~ relation ~ ' limit 1').rows | length == 0) }}
{%- endmacro %}


{% macro get_incremental_append_nonempty_sql(arg_dict) %}
    {#- `append`, but no commit for an empty batch. -#}
    {%- if scd2_relation_is_empty(arg_dict['temp_relation']) -%}
        {{ return(scd2_noop_sql()) }}
    {%- endif -%}
    {{ return(get_insert_into_sql(arg_dict['temp_relation'], arg_dict['target_relation'])) }}
{% endmacro %}


{% macro get_incremental_merge_nonempty_sql(arg_dict) %}
    {#- dbt-spark's `merge` on unique_key, but no commit for an empty batch. -#}
    {%- if scd2_relation_is_empty(arg_dict['temp_relation']) -%}
        {{ return(scd2_noop_sql()) }}
    {%- endif -%}
    {{ return(get_merge_sql(arg_dict['target_relation'], arg_dict['temp_relation'], arg_dict['unique_key'],
                            dest_columns=none, incremental_predicates=arg_dict['incremental_predicates'])) }}
{% endmacro %}


{% macro scd2_changes_view(target) -%}
    {{ return(api.Relation.create(identifier=target.identifier ~ '__scd2_changes', type='view').include(database=false, schema=false)) }}
{%- endmacro %}


{% macro scd2_drop_changes_view() %}
    {#- Post-hook of models on the scd2_versions strategy: drops (and uncaches) the diff it merged. -#}
    {%- if execute -%}
        {%- do cdc_execute('drop view if exists ' ~ scd2_changes_view(this)) -%}
    {%- endif -%}
    select 1
{% endmacro %}


{% macro get_incremental_scd2_versions_sql(arg_dict) %}
    {#- Replaces the versions of every key in the batch by the batch's versions, in one MERGE.
        The batch holds ALL versions of each key it names (unique_key: the entity key; a version is
        identified by the entity key and `valid_from`). Versions of those keys that the batch lacks
        are deleted, changed ones updated (closing a previous version is an update of its valid_to),
        new ones inserted; keys absent from the batch are not touched. Only rows that differ in a
        column other than _cdc_applied_at are written, and none means no MERGE at all.
        The model sets `post_hook="{{ scd2_drop_changes_view() }}"` to drop the cached diff. -#}
    {%- set target = arg_dict['target_relation'] -%}
    {%- set batch = arg_dict['temp_relation'] -%}
    {%- set unique_key = arg_dict['unique_key'] -%}
    {%- if not unique_key -%}
        {{ exceptions.raise_compiler_error("scd2_versions on " ~ target ~ " needs unique_key (the entity key, without valid_from)") }}
    {%- endif -%}
    {%- set keys = [unique_key] if unique_key is string else unique_key | list -%}
    {%- set target_columns = adapter.get_columns_in_relation(target) | map(attribute='name') | list -%}
    {%- set batch_columns = adapter.get_columns_in_relation(batch) | map(attribute='name') | map('lower') | list -%}
    {%- set compared = [] -%}
    {%- for column in target_columns if column | lower != '_cdc_applied_at' and column | lower in batch_columns -%}
        {%- do compared.append(column) -%}
    {%- endfor -%}
    {%- set changes = scd2_changes_view(target) -%}

    {%- set changes_sql -%}
        with

        batch as (

            select * from {{ batch }}

        ),

        batch_keys as (

            select distinct {% for key in keys %}{{ adapter.quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
            from batch

        ),

        existing as (

            select target_rows.*
            from {{ target }} as target_rows
            left semi join batch_keys
                on {% for key in keys %}target_rows.{{ adapter.quote(key) }} = batch_keys.{{ adapter.quote(key) }}{{ ' and ' if not loop.last }}{% endfor %}

        )

        select
            case
                when existing.valid_from is null then 'insert'
                when batch.valid_from is null then 'delete'
                else 'update'
            end as _scd2_action,
            {%- for key in keys %}
            coalesce(batch.{{ adapter.quote(key) }}, existing.{{ adapter.quote(key) }}) as _scd2_key_{{ loop.index }},
            {%- endfor %}
            coalesce(batch.valid_from, existing.valid_from) as _scd2_valid_from,
            batch.*
        from batch
        full outer join existing
            on {% for key in keys %}batch.{{ adapter.quote(key) }} = existing.{{ adapter.quote(key) }} and {% endfor -%}
            batch.valid_from = existing.valid_from
        where existing.valid_from is null
            or batch.valid_from is null
            or not (
                {%- for column in compared %}
                batch.{{ adapter.quote(column) }} <=> existing.{{ adapter.quote(column) }}{{ ' and' if not loop.last }}
                {%- endfor %}
            )
    {%- endset -%}
    {%- do cdc_execute('drop view if exists ' ~ changes) -%}
    {%- do cdc_execute('cache table ' ~ changes ~ ' as ' ~ changes_sql) -%}
    {%- if scd2_relation_is_empty(changes) -%}
        {%- do cdc_execute('drop view if exists ' ~ changes) -%}
        {{ return(scd2_noop_sql()) }}
    {%- endif -%}

    {%- set values = cdc_merge_values(target_columns, batch_columns) %}

merge into {{ target }} as t
using {{ changes }} as s
on {% for key in keys %}t.{{ adapter.quote(key) }} = s._scd2_key_{{ loop.index }} and {% endfor -%}
    t.valid_from = s._scd2_valid_from
when matched and s._scd2_action = 'delete' then delete
when matched and s._scd2_action = 'update' then update set
    {%- for column in target_columns %}
    t.{{ adapter.quote(column) }} = {{ values[loop.index0] }}{{ ',' if not loop.last }}
    {%- endfor %}
when not matched and s._scd2_action = 'insert' then insert (
    {%- for column in target_columns %}
    {{ adapter.quote(column) }}{{ ',' if not loop.last }}
    {%- endfor %}
) values (
    {%- for value in values %}
    {{ value }}{{ ',' if not loop.last }}
    {%- endfor %}
)
{% endmacro %}

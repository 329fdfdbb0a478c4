{#- Overrides dbt-core's snapshot_staging_table and build_snapshot_table for Spark, for snapshots that opt in
    with `meta: {cdc_deleted_column: <column>}`: a hard delete ends a version at the delete's COMMIT time, and
    new_record deletion records keep their attributes (works around dbt-labs/dbt-core#11949, open: on Spark
    they are all null, because dbt-core copies only the columns its `get_columns_in_relation` macro lists and
    dbt-spark's returns `describe` rows, not columns). Every other snapshot gets upstream's SQL unchanged.

    Why the commit time: dbt-core ends a deleted key at snapshot_get_time(), the time dbt ran, while every
    other version boundary of a timestamp-strategy snapshot is a source commit time. Mixed, they misorder:
    a key re-inserted by a change committed before the run that saw its delete (a late file) gets a
    deletion version that ends before it starts. No upstream option changes it.

    The opt-in contract for the snapshot's source query:
      - live rows have <column> = false and are snapshotted as usual (timestamp strategy);
      - a row with <column> = true is a tombstone: a key that has left the source, whose `updated_at`
        (the strategy's updated_at column) is the commit time of the delete. Its key counts as absent
        for `hard_deletes`, and the version it ends closes at that time instead of at the run time.
        A new_record deletion record starts at that time, keeps the attributes of the version it
        follows (read from the snapshot's current version), and takes the tombstone's non-null
        columns (<column> itself, `updated_at`, and e.g. the run that wrote it).
    A key missing from the source without a tombstone still ends at the run time, as upstream. -#}

{% macro snapshot_cdc_deleted_column() -%}
    {%- set meta = config.get('meta') or {} -%}
    {{ return(meta.get('cdc_deleted_column')) }}
{%- endmacro %}


{% macro snapshot_live_rows_sql(source_sql, deleted_column) -%}
    select * from (
        {{ source_sql }}
    ) as snapshot_source
    where not coalesce({{ adapter.quote(deleted_column) }}, false)
{%- endmacro %}


{% macro spark__build_snapshot_table(strategy, sql) %}
    {%- set deleted_column = snapshot_cdc_deleted_column() -%}
    {%- if deleted_column -%}
        {#- A key already deleted before the first snapshot never had a version: no row for it. -#}
        {%- set sql = snapshot_live_rows_sql(sql, deleted_column) -%}
    {%- endif -%}
    {{ dbt.default__build_snapshot_table(strategy, sql) }}
{% endmacro %}


{% macro spark__snapshot_staging_table(strategy, source_sql, target_relation) -%}
    {%- set deleted_column = snapshot_cdc_deleted_column() -%}
    {%- if not deleted_column -%}
        {{ dbt.default__snapshot_staging_table(strategy, source_sql, target_relation) }}
    {%- else -%}
        {{ snapshot_staging_table_with_commit_time_deletes(strategy, source_sql, target_relation, deleted_column) }}
    {%- endif -%}
{%- endmacro %}


{% macro snapshot_staging_table_with_commit_time_deletes(strategy, source_sql, target_relation, deleted_column) -%}
    {%- if config.get('strategy') != 'timestamp' -%}
        {{ exceptions.raise_compiler_error(
            "snapshot " ~ model.name ~ ": meta.cdc_deleted_column needs the timestamp strategy "
            ~ "(a tombstone's updated_at is the delete's commit time)") }}
    {%- endif -%}
    {%- set columns = config.get('snapshot_table_column_names') or get_snapshot_table_column_names() -%}
    {%- set keys = [strategy.unique_key] if strategy.unique_key is string else strategy.unique_key | list -%}
    {%- set new_record = strategy.hard_deletes == 'new_record' -%}
    {%- set source_columns = get_columns_in_query(source_sql) -%}
    {%- set snapshot_columns = adapter.get_columns_in_relation(target_relation) | map(attribute='name') | list -%}
    {%- set updated_at = adapter.quote(strategy.updated_at) -%}
    {%- set valid_to_current = config.get('dbt_valid_to_current') -%}

    {%- set is_deletion_record -%}
        {%- if new_record -%}
        (staged.dbt_change_type = 'insert' and staged.{{ columns.dbt_is_deleted }} = 'True')
        {%- else -%}
        false
        {%- endif -%}
    {%- endset -%}
    {%- set staged_keys = ['staged.dbt_unique_key'] if keys | length == 1 else [] -%}
    {%- if keys | length > 1 -%}
        {%- for key in keys -%}
            {%- do staged_keys.append('staged.dbt_unique_key_' ~ loop.index) -%}
        {%- endfor -%}
    {%- endif %}

with

staged as (

    {{ dbt.default__snapshot_staging_table(strategy, snapshot_live_rows_sql(source_sql, deleted_column), target_relation) | indent(4) }}

),

tombstones as (

    select * from (
        {{ source_sql }}
    ) as snapshot_source
    where {{ adapter.quote(deleted_column) }}

),

current_versions as (

    select * from {{ target_relation }}
    where {{ columns.dbt_valid_to }} is null
        {%- if valid_to_current %}
        or {{ columns.dbt_valid_to }} = {{ valid_to_current }}
        {%- endif %}

),

commit_time_deletes as (

    -- `delete` rows (they end a version, found by dbt_scd_id) and deletion records (they follow the
    -- current version, found by key) take the delete's commit time from the key's tombstone. A
    -- deletion record takes the attributes of the version it follows (dbt-core copies them only
    -- where its column check works, which it does not on Spark) overlaid with the tombstone's.
    select
        staged.dbt_change_type,
        {%- for column in source_columns %}
        {%- if column in keys %}
        case when {{ is_deletion_record }} then followed.{{ adapter.quote(column) }} else staged.{{ adapter.quote(column) }} end
            as {{ adapter.quote(column) }},
        {%- else %}
        case
            when {{ is_deletion_record }} then coalesce(
                tombstones.{{ adapter.quote(column) }},
                {%- if column in snapshot_columns %}
                followed.{{ adapter.quote(column) }},
                {%- endif %}
                staged.{{ adapter.quote(column) }})
            else staged.{{ adapter.quote(column) }}
        end as {{ adapter.quote(column) }},
        {%- endif %}
        {%- endfor %}
        {%- for staged_key in staged_keys %}
        {{ staged_key }},
        {%- endfor %}
        case when {{ is_deletion_record }} then coalesce(tombstones.{{ updated_at }}, staged.{{ columns.dbt_updated_at }})
            else staged.{{ columns.dbt_updated_at }} end as {{ columns.dbt_updated_at }},
        case when {{ is_deletion_record }} then coalesce(tombstones.{{ updated_at }}, staged.{{ columns.dbt_valid_from }})
            else staged.{{ columns.dbt_valid_from }} end as {{ columns.dbt_valid_from }},
        case when staged.dbt_change_type = 'delete' then coalesce(tombstones.{{ updated_at }}, staged.{{ columns.dbt_valid_to }})
            else staged.{{ columns.dbt_valid_to }} end as {{ columns.dbt_valid_to }},
        case
            when {{ is_deletion_record }} and tombstones.{{ updated_at }} is not null
                then {{ snapshot_hash_arguments(["'deleted'"] + snapshot_prefixed(keys, 'followed.') + ['tombstones.' ~ updated_at]) }}
            else staged.{{ columns.dbt_scd_id }}
        end as {{ columns.dbt_scd_id }}
        {%- if new_record %},
        staged.{{ columns.dbt_is_deleted }}
        {%- endif %}
    from staged
    left join current_versions as ended
        on staged.dbt_change_type = 'delete'
        and ended.{{ columns.dbt_scd_id }} = staged.{{ columns.dbt_scd_id }}
    left join current_versions as followed
        on {{ is_deletion_record }}
        {%- for key in keys %}
        and followed.{{ adapter.quote(key) }} = {{ staged_keys[loop.index0] }}
        {%- endfor %}
    left join tombstones
        on {% for key in keys -%}
        tombstones.{{ adapter.quote(key) }} = coalesce(ended.{{ adapter.quote(key) }}, followed.{{ adapter.quote(key) }})
        {%- if not loop.last %} and {% endif %}
        {%- endfor %}

)

select * from commit_time_deletes
{%- endmacro %}


{% macro snapshot_prefixed(columns, prefix) -%}
    {%- set prefixed = [] -%}
    {%- for column in columns -%}
        {%- do prefixed.append(prefix ~ adapter.quote(column)) -%}
    {%- endfor -%}
    {{ return(prefixed) }}
{%- endmacro %}

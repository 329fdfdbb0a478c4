{{ config(materialized='view') }}

{#- Attributes: every column of the snapshot but its key, validity and bookkeeping columns, so that
    a column the sources add later (schema evolution) reaches the dimension too. -#}
{%- set attributes = scd2_attribute_columns(ref('customer_snapshot'), exclude=['customer_id', 'updated_at']) %}

with

snapshot as (

    select * from {{ ref('customer_snapshot') }}

),

versions as (

    select
        -- stable: the customer and the commit time its version starts at, never a row number
        xxhash64(customer_id, dbt_valid_from) as customer_sk,
        customer_id,
        {%- for attribute in attributes %}
        {{ cdc_quote(attribute.name) }},
        {%- endfor %}
        dbt_valid_from as valid_from,
        dbt_valid_to as valid_to,
        dbt_valid_to = {{ scd2_open_end() }} as is_current,
        coalesce(dbt_is_deleted = 'True', false) as is_deleted,
        _cdc_applied_at
    from snapshot

),

unknown_member as (

    select
        cast(-1 as bigint) as customer_sk,
        cast(null as bigint) as customer_id,
        {%- for attribute in attributes %}
        cast(null as {{ attribute.data_type }}) as {{ cdc_quote(attribute.name) }},
        {%- endfor %}
        cast('1900-01-01 00:00:00' as timestamp) as valid_from,
        {{ scd2_open_end() }} as valid_to,
        true as is_current,
        false as is_deleted,
        cast(null as timestamp) as _cdc_applied_at

),

dim_customer as (

    select * from versions
    union all
    select * from unknown_member

)

select * from dim_customer

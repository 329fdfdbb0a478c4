{#- The snapshot source of shop_customer_snapshot: the live `shop.customer` rows (the current-state
    table, flattened), plus a tombstone row per customer that has left it (see the model's yml). -#}

{%- set attributes = cdc_joined_attributes([
    {'alias': 'customer', 'relation': ref('shop__customer'), 'exclude': ['customer_id']},
]) %}

with

customer as (

    select * from {{ ref('shop__customer') }}

),

removals as (

    {{ cdc_key_removals(ref('int_shop__customer_key_events'), 'customer_id') | indent(4) }}

),

customer_ids as (

    select customer_id from customer
    union
    select customer_id from removals

),

versions as (

    select
        customer_ids.customer_id,
        {%- for attribute in attributes %}
        {{ attribute }},
        {%- endfor %}
        -- the commit time of the row's last change; for a tombstone, of the delete that removed it (a
        -- live row's own wins: removals are only meant for keys the table lacks, macros/snapshot/key_removals.sql)
        coalesce(customer._cdc_ts, removals.removed_at) as updated_at,
        customer.customer_id is null as _cdc_deleted,
        {{ cdc_run_timestamp() }} as _cdc_applied_at

    from customer_ids
    left join customer
        on customer_ids.customer_id = customer.customer_id
    left join removals
        on customer_ids.customer_id = removals.customer_id

)

select * from versions

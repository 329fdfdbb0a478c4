{#- The snapshot source of customer_snapshot: the current-state join of the CRM customer master,
    its address and the sales system's customer on the customer id, one row per customer, plus a
    tombstone row per customer that has left all three (see the model's yml). -#}

{%- set attributes = cdc_joined_attributes([
    {'alias': 'customer_master', 'relation': ref('crm__customer_master'),
     'exclude': ['customer_id', 'row_audit_ts']},
    {'alias': 'customer_address', 'relation': ref('crm__customer_address'),
     'exclude': ['customer_id', 'row_audit_ts']},
    {'alias': 'sales_customer', 'relation': ref('salesdb__customer'),
     'exclude': ['id', 'customer_id'], 'rename': {'name': 'sales_customer_name', 'mktsegment': 'market_segment'}},
]) %}

with

customer_master as (

    select * from {{ ref('crm__customer_master') }}

),

customer_address as (

    select * from {{ ref('crm__customer_address') }}

),

sales_customer as (

    select
        *,
        cast(id as bigint) as customer_id
    from {{ ref('salesdb__customer') }}

),

master_removals as (

    {{ cdc_key_removals(ref('int_crm__customer_master_key_events'), 'customer_id') | indent(4) }}

),

address_removals as (

    {{ cdc_key_removals(ref('int_crm__customer_address_key_events'), 'customer_id') | indent(4) }}

),

sales_removals as (

    select
        cast(id as bigint) as customer_id,
        removed_at
    from (
        {{ cdc_key_removals(ref('int_salesdb__customer_key_events'), 'id') | indent(8) }}
    ) as removals

),

customer_ids as (

    select customer_id from customer_master
    union
    select customer_id from customer_address
    union
    select customer_id from sales_customer
    union
    select customer_id from master_removals
    union
    select customer_id from address_removals
    union
    select customer_id from sales_removals

),

joined as (

    select
        customer_ids.customer_id,
        {%- for attribute in attributes %}
        {{ attribute }},
        {%- endfor %}
        -- the latest commit among the joined rows, and among the deletes of the rows that are gone
        greatest(
            customer_master._cdc_ts,
            customer_address._cdc_ts,
            sales_customer._cdc_ts,
            case when customer_master.customer_id is null then master_removals.removed_at end,
            case when customer_address.customer_id is null then address_removals.removed_at end,
            case when sales_customer.customer_id is null then sales_removals.removed_at end
        ) as updated_at,
        (
            customer_master.customer_id is null
            and customer_address.customer_id is null
            and sales_customer.customer_id is null
        ) as _cdc_deleted,
        {{ cdc_run_timestamp() }} as _cdc_applied_at

    from customer_ids
    left join customer_master
        on customer_ids.customer_id = customer_master.customer_id
    left join customer_address
        on customer_ids.customer_id = customer_address.customer_id
    left join sales_customer
        on customer_ids.customer_id = sales_customer.customer_id
    left join master_removals
        on customer_ids.customer_id = master_removals.customer_id
    left join address_removals
        on customer_ids.customer_id = address_removals.customer_id
    left join sales_removals
        on customer_ids.customer_id = sales_removals.customer_id

)

select * from joined

{{ config(
    materialized='incremental',
    incremental_strategy='merge_nonempty',
    unique_key='order_id',
) }}

with

order_versions as (

    select * from {{ ref('sales_order_status_history') }}

),

customer_versions as (

    select * from {{ ref('dim_customer') }}
    where customer_sk <> -1

),

order_statuses as (

    select * from {{ ref('order_statuses') }}

),

{% if is_incremental() %}
-- orders whose history changed since the last run, orders of customers with a new version, and
-- orders whose status has a new name in the code list
touched_orders as (

    select order_versions.order_id
    from order_versions
    where order_versions._cdc_applied_at > {{ scd2_watermark(this) }}

    union

    select order_versions.order_id
    from order_versions
    inner join customer_versions
        on cast(order_versions.customer_id as bigint) = customer_versions.customer_id
    where customer_versions._cdc_applied_at > {{ scd2_watermark(this) }}

    union

    -- orders whose status the seed order_statuses has renamed since their row was written
    select fct_rows.order_id
    from {{ this }} as fct_rows
    left join order_statuses
        on fct_rows.order_status = order_statuses.order_status
    where not fct_rows.order_status_name <=> order_statuses.order_status_name

),
{% endif %}

current_orders as (

    select order_versions.*
    from order_versions
    {% if is_incremental() %}
    left semi join touched_orders
        on order_versions.order_id = touched_orders.order_id
    {% endif %}
    where order_versions.is_current

),

point_in_time as (

    select
        current_orders.order_id,
        current_orders.customer_id,
        current_orders.order_ts,
        current_orders.amount,
        current_orders.order_status,
        order_statuses.order_status_name,
        current_orders.valid_from as order_status_valid_from,
        current_orders.is_deleted,
        coalesce(customer_versions.customer_sk, -1) as customer_sk
    from current_orders
    left join customer_versions
        on cast(current_orders.customer_id as bigint) = customer_versions.customer_id
            and current_orders.order_ts >= customer_versions.valid_from
            and current_orders.order_ts < customer_versions.valid_to
    left join order_statuses
        on current_orders.order_status = order_statuses.order_status

),

changed as (

    select point_in_time.*
    from point_in_time
    {% if is_incremental() %}
    -- only rows that differ from what the table holds
    left anti join {{ this }} as fct_rows
        on point_in_time.order_id = fct_rows.order_id
            and point_in_time.customer_sk <=> fct_rows.customer_sk
            and point_in_time.customer_id <=> fct_rows.customer_id
            and point_in_time.order_ts <=> fct_rows.order_ts
            and point_in_time.amount <=> fct_rows.amount
            and point_in_time.order_status <=> fct_rows.order_status
            and point_in_time.order_status_name <=> fct_rows.order_status_name
            and point_in_time.order_status_valid_from <=> fct_rows.order_status_valid_from
            and point_in_time.is_deleted <=> fct_rows.is_deleted
    {% endif %}

),

fct_sales_order as (

    select
        changed.order_id,
        changed.customer_sk,
        changed.customer_id,
        changed.order_ts,
        changed.amount,
        changed.order_status,
        changed.order_status_name,
        changed.order_status_valid_from,
        changed.is_deleted,
        {{ cdc_run_timestamp() }} as _cdc_applied_at
    from changed

)

select * from fct_sales_order

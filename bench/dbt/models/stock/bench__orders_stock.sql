{#- The stock dbt-spark peer of bench__orders (R4): what an analyst writes without this project.
    The raw DMS folder read directly, changes newer than the table's newest kept, the last change
    per key, and dbt-spark's own `merge` strategy (MERGE INTO ... UPDATE SET * / INSERT *).
    Op stays a column: the stock merge cannot delete. The bench creates the table from the
    pipeline's table before the measured batch, so that both start from the same rows. -#}
{{
    config(
        materialized='incremental',
        incremental_strategy='merge',
        unique_key='order_id',
        file_format='iceberg',
        schema='current',
    )
}}

with

changes as (

    select * from {{ source('bench', 'orders') }}
    {% if is_incremental() %}
    where last_update_time > (select max(last_update_time) from {{ this }})
    {% endif %}

),

latest as (

    select
        changes.*,
        row_number() over (
            partition by changes.order_id
            order by changes.last_update_time desc, changes.AR_H_CHANGE_SEQ desc
        ) as change_rank

    from changes

)

select
    order_id,
    customer_id,
    order_status,
    amount,
    quantity,
    weight_kg,
    order_ts,
    ship_city,
    customer_email,
    is_gift,
    Op,
    last_update_time,
    AR_H_CHANGE_SEQ

from latest
where change_rank = 1

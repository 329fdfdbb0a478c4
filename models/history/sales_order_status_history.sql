{{ config(
    incremental_strategy='scd2_versions',
    unique_key=['order_id'],
    post_hook="{{ scd2_drop_changes_view() }}",
) }}

{{ cdc_change_history('sales_order_change_log', unique_key=['order_id']) }}

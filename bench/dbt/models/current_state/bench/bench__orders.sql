{{ cdc_current_state('stg_bench__orders', unique_key=['order_id']) }}

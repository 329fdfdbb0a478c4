{{ cdc_current_state('stg_bench__orders_scaled', unique_key=['order_id']) }}

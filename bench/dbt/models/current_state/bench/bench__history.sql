{{ cdc_current_state('stg_bench__history', unique_key=['order_id']) }}

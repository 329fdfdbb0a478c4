{{ cdc_current_state('stg_bench__history_few', unique_key=['order_id']) }}

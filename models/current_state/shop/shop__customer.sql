{{ cdc_current_state('stg_shop__customer', unique_key=['customer_id']) }}

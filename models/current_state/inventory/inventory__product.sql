{{ cdc_current_state('stg_inventory__product', unique_key=['product_id']) }}

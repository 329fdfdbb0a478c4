{{ cdc_current_state('stg_salesdb__sales_order', unique_key=['order_id']) }}

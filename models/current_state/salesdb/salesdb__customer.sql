{{ cdc_current_state('stg_salesdb__customer', unique_key=['id']) }}

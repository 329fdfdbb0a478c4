{{ cdc_current_state('stg_crm__customer_address', unique_key=['customer_id']) }}

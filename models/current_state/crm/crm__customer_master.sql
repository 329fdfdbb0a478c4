{{ cdc_current_state('stg_crm__customer_master', unique_key=['customer_id']) }}

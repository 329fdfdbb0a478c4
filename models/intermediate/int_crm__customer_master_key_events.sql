{{ cdc_key_events('stg_crm__customer_master', 'crm__customer_master', 'customer_id') }}

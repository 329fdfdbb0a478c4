{{ cdc_key_events('stg_crm__customer_address', 'crm__customer_address', 'customer_id') }}

{{ cdc_key_events('stg_shop__customer', 'shop__customer', 'customer_id') }}

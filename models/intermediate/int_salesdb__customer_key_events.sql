{{ cdc_key_events('stg_salesdb__customer', 'salesdb__customer', 'id') }}

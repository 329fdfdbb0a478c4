{{ stg_debezium_changes('shop', 'customer') }}

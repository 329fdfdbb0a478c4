{{ stg_debezium_changes('shop', 'document') }}

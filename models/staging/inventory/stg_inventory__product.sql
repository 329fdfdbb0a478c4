{{ stg_debezium_changes('inventory', 'product') }}

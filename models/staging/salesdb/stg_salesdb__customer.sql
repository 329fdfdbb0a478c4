{{ stg_debezium_changes('salesdb', 'customer') }}

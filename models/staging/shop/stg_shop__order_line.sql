{{ stg_debezium_changes('shop', 'order_line') }}

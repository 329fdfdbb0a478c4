{{ stg_debezium_changes('salesdb', 'sales_order') }}

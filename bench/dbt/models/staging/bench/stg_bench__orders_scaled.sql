{{ stg_dms_changes('bench', 'orders_scaled') }}

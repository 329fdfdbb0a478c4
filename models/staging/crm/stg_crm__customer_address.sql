{{ stg_dms_changes('crm', 'customer_address') }}

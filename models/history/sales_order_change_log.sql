{{ config(incremental_strategy='append_nonempty') }}

{{ cdc_change_log('stg_salesdb__sales_order', current_state_model='salesdb__sales_order') }}

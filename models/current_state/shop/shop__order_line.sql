{{ cdc_current_state('stg_shop__order_line', unique_key=['order_id', 'line_no']) }}

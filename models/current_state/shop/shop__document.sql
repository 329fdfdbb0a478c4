{{ cdc_current_state('stg_shop__document', unique_key=['document_id']) }}

{{ stg_dms_changes('bench', 'history') }}

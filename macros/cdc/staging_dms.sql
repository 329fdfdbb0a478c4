{#- Staging for AWS DMS Parquet output (S3 target): one row per change event, in the contract
    every current-state model reads:

      <business columns>  source names in lower case, source types
      _cdc_op             'I' | 'U' | 'D'   (full-load rows, which have no Op, are 'I')
      _cdc_ts             commit timestamp  (the TimestampColumnName column)
      _cdc_seq            35-digit string, a total order of the table's changes (see below)
      _cdc_source_file    raw file name

    _cdc_seq is AR_H_CHANGE_SEQ when the file has it. Otherwise it is derived from the file name
    and the row's position in the file, which DMS writes in commit order:
      full load  LOAD<hex n>.parquet      '0' + n (9 digits) + row index (25 digits)
      CDC        <yyyymmdd-hhmmssfff>.parquet   the 17 digits of the name + row index (18 digits)
    so full-load rows order before CDC rows and CDC files order by their write time. -#}

{% macro stg_dms_changes(source_name, table_name) %}
    {%- set source_relation = source(source_name, table_name) -%}
    {%- if not execute or cdc_staging_view_unchanged() -%}
        select 1 as _cdc_placeholder
    {%- else -%}
        {{ cdc_dms_changes(cdc_source_node(source_name, table_name), model.name) }}
    {%- endif -%}
{% endmacro %}


{% macro cdc_dms_changes(node, staging_model, files=none, columns=none) %}
    {#- The staging SQL of the source `node`: over every raw file of its folder (the staging view), or,
        given `files` (paths relative to the folder), over those files only (a batch, read by the
        current-state model: cdc_stage_batch). `columns`: a list that gets the SQL's column names, in
        order (so that its caller need not ask Spark for them). -#}
    {#- The table's meta wins over its source's, as for every producer setting
        (python_hooks/project/producers.py reads the same settings). -#}
    {%- set ts_column = node.meta.get('dms_timestamp_column')
        or node.source_meta.get('dms_timestamp_column') or 'last_update_time' -%}
    {%- set folder = cdc_landing_folder(node) -%}
    {%- set file_count = cdc_landing_file_count(node.source_name, node.name, folder) if files is none else files | length -%}
    {%- if file_count == 0 -%}
        {{ cdc_empty_changes(node) }}
    {%- else -%}
        {%- set parts = [] -%}
        {%- for read in cdc_landing_reads(staging_model, folder, file_count, files) -%}
            {%- set raw_columns = read.get('raw_columns') or cdc_planned_raw_columns(staging_model, files)
                or cdc_landing_columns_of('select * from ' ~ read.relation) -%}
            {%- set sql = stg_dms_changes_sql(read.relation, raw_columns, ts_column, node, where=read.get('where')) -%}
            {%- if columns is not none and loop.first -%}
                {%- do columns.extend((read.types.keys() | list) if read.types is not none
                    else stg_dms_business_columns(raw_columns, ts_column)) -%}
                {%- do columns.extend(['_cdc_op', '_cdc_ts', '_cdc_seq', '_cdc_source_file']) -%}
            {%- endif -%}
            {%- do parts.append(cdc_cast_columns(sql, read.types, stg_dms_business_columns(raw_columns, ts_column))) -%}
        {%- endfor -%}
        {{ cdc_apply_personal_data_registers(parts | join('\nunion all\n'), node) }}
    {%- endif -%}
{% endmacro %}


{% macro stg_dms_business_columns(raw_columns, ts_column) -%}
    {#- The business columns of DMS raw columns, as stg_dms_changes_sql selects them: lower case, in
        the files' order, without DMS's own (Op, AR_H_CHANGE_SEQ, the timestamp column). -#}
    {%- set metadata_names = ['op', 'ar_h_change_seq', ts_column | lower] -%}
    {%- set names = [] -%}
    {%- for column in raw_columns if column.name | lower not in metadata_names and column.name | lower not in names -%}
        {%- do names.append(column.name | lower) -%}
    {%- endfor -%}
    {{ return(names) }}
{%- endmacro %}


{% macro stg_dms_changes_sql(relation, raw_columns, ts_column, node, where=none) %}
    {%- set by_lower = {} -%}
    {%- for column in raw_columns -%}
        {%- do by_lower.setdefault(column.name | lower, []).append(column.name) -%}
    {%- endfor -%}
    {%- if ts_column | lower not in by_lower -%}
        {{ exceptions.raise_compiler_error(
            "Raw files in " ~ relation ~ " (source " ~ node.source_name ~ "." ~ node.name
            ~ ") have no timestamp column '" ~ ts_column ~ "': set the DMS endpoint's "
            ~ "TimestampColumnName, or meta.dms_timestamp_column on the source.") }}
    {%- endif -%}
    {%- set row_index = 'cast(_metadata.row_index as string)' -%}
    {%- set fallback_seq -%}
        case
            when _metadata.file_name like 'LOAD%'
                then concat(
                    '0',
                    lpad(conv(substr(_metadata.file_name, 5, 8), 16, 10), 9, '0'),
                    lpad({{ row_index }}, 25, '0')
                )
            else concat(
                rpad(substr(regexp_replace(_metadata.file_name, '[^0-9]', ''), 1, 17), 17, '0'),
                lpad({{ row_index }}, 18, '0')
            )
        end
    {%- endset -%}

select
    {%- for name in stg_dms_business_columns(raw_columns, ts_column) %}
    {{ cdc_coalesce_spellings(by_lower[name]) }} as {{ cdc_quote(name) }},
    {%- endfor %}
    {%- if 'op' in by_lower %}
    coalesce(upper(trim({{ cdc_coalesce_spellings(by_lower['op']) }})), 'I') as _cdc_op,
    {%- else %}
    'I' as _cdc_op,
    {%- endif %}
    cast({{ cdc_coalesce_spellings(by_lower[ts_column | lower]) }} as timestamp) as _cdc_ts,
    {%- if 'ar_h_change_seq' in by_lower %}
    coalesce(
        lpad(nullif(trim({{ cdc_coalesce_spellings(by_lower['ar_h_change_seq']) }}), ''), 35, '0'),
        {{ fallback_seq | indent(8) }}
    ) as _cdc_seq,
    {%- else %}
    {{ fallback_seq | indent(4) }} as _cdc_seq,
    {%- endif %}
    {{ cdc_file_name_sql() }} as _cdc_source_file

from {{ relation }}
{%- if where %}
where {{ where }}
{%- endif %}
{% endmacro %}


{% macro cdc_coalesce_spellings(spellings) -%}
    {#- One column spelled in several cases across files (COUNTRY / country) is one column. -#}
    {%- if spellings | length == 1 -%}
        {{ return(cdc_quote(spellings[0])) }}
    {%- else -%}
        {%- set quoted = [] -%}
        {%- for spelling in spellings -%}
            {%- do quoted.append(cdc_quote(spelling)) -%}
        {%- endfor -%}
        {{ return('coalesce(' ~ (quoted | join(', ')) ~ ')') }}
    {%- endif -%}
{%- endmacro %}


{% macro cdc_empty_changes(node) %}
    {#- No raw file yet: an empty result with the columns the source yml declares. -#}
select
    {%- for column in node.columns.values() if column.data_type %}
    cast(null as {{ column.data_type }}) as {{ cdc_quote(column.name | lower) }},
    {%- endfor %}
    cast(null as string) as _cdc_op,
    cast(null as timestamp) as _cdc_ts,
    cast(null as string) as _cdc_seq,
    cast(null as string) as _cdc_source_file
where false
{% endmacro %}

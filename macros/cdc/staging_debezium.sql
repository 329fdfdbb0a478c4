{#- Staging for Debezium change events written to Parquet by the Confluent S3 sink:
    `<topic folder>/partition=<p>/<topic>+<p>+<start offset>.snappy.parquet`. Emits the same
    contract as the DMS staging (see staging_dms.sql), so `cdc_current_state` serves both unchanged.

    Two shapes, chosen per source table by `meta.debezium_shape` in the sources yml:
      flattened  ExtractNewRecordState: the row (the before-image for deletes), then `__op`,
                 `__source_ts_ms`, `__deleted`, and any other `__source_*` fields added;
      envelope   `before`, `after`, `op`, `ts_ms`, `source`, `transaction`.

      _cdc_op   r, c -> 'I';  u -> 'U';  d -> 'D';  t -> 'T' (truncate: no key)
      _cdc_ts   source.ts_ms (`__source_ts_ms`): the commit time at the source
      _cdc_seq  the source position when the events carry it, as 35 digits:
                  PostgreSQL  lsn (35 digits)
                  MySQL       binlog file number (10) + pos (20) + row (5)
                otherwise the Kafka position: partition (5) + offset of the record (30).
                A re-delivered event keeps its source position, so it is equal, not newer.

    Debezium's named types arrive as plain numbers or text (time.precision.mode=adaptive, the S3
    sink's AvroData: docs/DEBEZIUM_REAL_OUTPUT.md, 1): a source table's `meta.debezium_types`
    (column: Kafka Connect schema name) has staging decode them (`cdc_debezium_decode`); the types
    they become are python_hooks/project/producers.py: DEBEZIUM_DECODED_TYPES, which the schema hook
    uses for the same columns (tests/pytest/unit/test_rules_pinned.py holds the two together). -#}

{% macro stg_debezium_changes(source_name, table_name) %}
    {%- set source_relation = source(source_name, table_name) -%}
    {%- if not execute or cdc_staging_view_unchanged() -%}
        select 1 as _cdc_placeholder
    {%- else -%}
        {{ cdc_debezium_changes(cdc_source_node(source_name, table_name), model.name) }}
    {%- endif -%}
{% endmacro %}


{% macro cdc_debezium_changes(node, staging_model, files=none, columns=none) %}
    {#- As cdc_dms_changes: every raw file of the folder, or only `files` (relative paths); `columns`
        gets the SQL's column names. -#}
    {%- set shape = node.meta.get('debezium_shape') or node.source_meta.get('debezium_shape') or 'flattened' -%}
    {%- if shape not in ['flattened', 'envelope'] -%}
        {{ exceptions.raise_compiler_error(
            "source " ~ node.source_name ~ "." ~ node.name ~ ": meta.debezium_shape must be 'flattened' or "
            ~ "'envelope', not '" ~ shape ~ "'") }}
    {%- endif -%}
    {%- set folder = cdc_landing_folder(node) -%}
    {%- set file_count = cdc_landing_file_count(node.source_name, node.name, folder) if files is none else files | length -%}
    {%- if file_count == 0 -%}
        {{ cdc_empty_changes(node) }}
    {%- else -%}
        {%- set parts = [] -%}
        {%- for read in cdc_landing_reads(staging_model, folder, file_count, files) -%}
            {%- set fields = [] -%}
            {%- set planned = {} -%}
            {%- for struct_column in ['after', 'before', 'source'] -%}
                {%- do planned.update({struct_column: (read.get('raw_fields') or {}).get(struct_column)
                    or cdc_planned_struct_fields(staging_model, files, struct_column)}) -%}
            {%- endfor -%}
            {%- set sql = stg_debezium_changes_sql(read.relation, shape, node, fields,
                read.get('raw_columns') or cdc_planned_raw_columns(staging_model, files), where=read.get('where'),
                planned_fields=planned) -%}
            {%- do parts.append(cdc_cast_columns(sql, read.types, fields)) -%}
            {%- if columns is not none and loop.first -%}
                {%- do columns.extend(((read.types.keys() | list) if read.types is not none else fields)
                    + ['_cdc_op', '_cdc_ts', '_cdc_seq', '_cdc_source_file']) -%}
            {%- endif -%}
        {%- endfor -%}
        {{ cdc_apply_personal_data_registers(parts | join('\nunion all\n'), node) }}
    {%- endif -%}
{% endmacro %}


{% macro cdc_struct_fields(files, struct_column, planned_fields={}) -%}
    {#- A struct column's fields: from the run's plan when it has them (`planned_fields`:
        cdc_planned_struct_fields), else asked of Spark. -#}
    {{ return(planned_fields.get(struct_column) or cdc_landing_columns_of(
        'select ' ~ cdc_quote(struct_column) ~ '.* from ' ~ files)) }}
{%- endmacro %}


{% macro stg_debezium_changes_sql(files, shape, node, business=[], top=none, where=none, planned_fields={}) %}
    {#- `business` gets the business columns' names as the SQL selects them (lower case); `top`: the
        files' columns when the caller knows them (cdc_planned_raw_columns), and `planned_fields` their
        struct columns' fields (cdc_planned_struct_fields); `where`: which of the relation's files to read
        (cdc_landing_open_read). -#}
    {%- set top = top or cdc_landing_columns_of('select * from ' ~ files) -%}
    {%- set top_names = top | map(attribute='name') | map('lower') | list -%}
    {%- set kafka_position -%}
        concat(
            lpad(regexp_extract(_metadata.file_name, '\\+([0-9]+)\\+([0-9]+)\\.[^+]*$', 1), 5, '0'),
            lpad(cast(
                cast(regexp_extract(_metadata.file_name, '\\+([0-9]+)\\+([0-9]+)\\.[^+]*$', 2) as bigint)
                + _metadata.row_index as string), 30, '0')
        )
    {%- endset -%}

    {%- if shape == 'envelope' -%}
        {%- for required in ['op', 'source'] if required not in top_names -%}
            {{ exceptions.raise_compiler_error(
                "source " ~ node.source_name ~ "." ~ node.name ~ " is configured as a Debezium envelope, "
                ~ "but its files have no '" ~ required ~ "' column (columns: " ~ (top_names | join(', ')) ~ ")") }}
        {%- endfor -%}
        {%- set fields = [] -%}
        {%- for struct_column in ['after', 'before'] if struct_column in top_names -%}
            {%- for field in cdc_struct_fields(files, struct_column, planned_fields) -%}
                {%- if field.name | lower not in fields | map('lower') | list -%}
                    {%- do fields.append(field.name) -%}
                {%- endif -%}
            {%- endfor -%}
        {%- endfor -%}
        {%- set source_fields = cdc_struct_fields(files, 'source', planned_fields) | map(attribute='name') | map('lower') | list -%}
        {%- set op = 'op' -%}
        {%- set ts = 'coalesce(source.ts_ms, ts_ms)' -%}
        {%- if 'lsn' in source_fields -%}
            {%- set position = "lpad(cast(source.lsn as string), 35, '0')" -%}
        {%- elif 'pos' in source_fields and 'file' in source_fields -%}
            {%- set position = cdc_mysql_position('source.file', 'source.pos', 'source.row' if 'row' in source_fields else '0') -%}
        {%- else -%}
            {%- set position = none -%}
        {%- endif -%}
    {%- else -%}
        {%- for required in ['__op', '__source_ts_ms'] if required not in top_names -%}
            {{ exceptions.raise_compiler_error(
                "source " ~ node.source_name ~ "." ~ node.name ~ " is configured as flattened Debezium "
                ~ "(ExtractNewRecordState with add.fields=op,source.ts_ms), but its files have no '" ~ required
                ~ "' column (columns: " ~ (top_names | join(', ')) ~ ")") }}
        {%- endfor -%}
        {%- set fields = [] -%}
        {%- for column in top if not column.name.startswith('__') -%}
            {%- do fields.append(column.name) -%}
        {%- endfor -%}
        {%- set op = '`__op`' -%}
        {%- set ts = '`__source_ts_ms`' -%}
        {%- if '__source_lsn' in top_names -%}
            {%- set position = "lpad(cast(`__source_lsn` as string), 35, '0')" -%}
        {%- elif '__source_pos' in top_names and '__source_file' in top_names -%}
            {%- set position = cdc_mysql_position('`__source_file`', '`__source_pos`',
                '`__source_row`' if '__source_row' in top_names else '0') -%}
        {%- else -%}
            {%- set position = none -%}
        {%- endif -%}
    {%- endif %}

    {%- set named_types = cdc_debezium_named_types(node) %}
    {%- do business.extend(fields | map('lower') | list) %}

select
    {%- for name in fields %}
    {%- if shape == 'envelope' %}
    {%- set value = 'case when after is not null then after.' ~ cdc_quote(name) ~ ' else before.' ~ cdc_quote(name) ~ ' end' %}
    {%- else %}
    {%- set value = cdc_quote(name) %}
    {%- endif %}
    {{ cdc_debezium_decode(value, named_types.get(name | lower), node) }} as {{ cdc_quote(name | lower) }},
    {%- endfor %}
    case lower({{ op }})
        when 'r' then 'I'
        when 'c' then 'I'
        when 'u' then 'U'
        when 'd' then 'D'
        when 't' then 'T'
        else upper({{ op }})
    end as _cdc_op,
    timestamp_millis({{ ts }}) as _cdc_ts,
    {%- if position %}
    coalesce({{ position }}, {{ kafka_position | indent(4) }}) as _cdc_seq,
    {%- else %}
    {{ kafka_position | indent(4) }} as _cdc_seq,
    {%- endif %}
    {{ cdc_file_name_sql() }} as _cdc_source_file

from {{ files }}
{%- if where %}
where {{ where }}
{%- endif %}
{% endmacro %}


{% macro cdc_mysql_position(file, pos, row) -%}
    concat(
        lpad(regexp_extract({{ file }}, '([0-9]+)$', 1), 10, '0'),
        lpad(cast({{ pos }} as string), 20, '0'),
        lpad(cast({{ row }} as string), 5, '0')
    )
{%- endmacro %}


{% macro cdc_debezium_named_types(node) -%}
    {#- column (lower case) -> Debezium's Kafka Connect schema name, from the source table's
        `meta.debezium_types` (the table's meta over the source's). -#}
    {%- set declared = node.meta.get('debezium_types') or node.source_meta.get('debezium_types') or {} -%}
    {%- set named = {} -%}
    {%- for column, name in declared.items() -%}
        {%- do named.update({column | lower: name}) -%}
    {%- endfor -%}
    {{ return(named) }}
{%- endmacro %}


{% macro cdc_debezium_decode(value, named_type, node) -%}
    {#- A Debezium value as its source type: io.debezium.time.Date (days since 1970-01-01) -> date,
        MicroTimestamp (micros, no zone) and Timestamp (millis) -> timestamp at that UTC wall clock,
        ZonedTimestamp (ISO-8601 text, UTC) -> timestamp; none: the value as it is. -#}
    {%- if named_type is none -%}
        {{ return(value) }}
    {%- elif named_type == 'io.debezium.time.Date' -%}
        {{ return("date_add(date'1970-01-01', " ~ value ~ ")") }}
    {%- elif named_type == 'io.debezium.time.MicroTimestamp' -%}
        {{ return('timestamp_micros(' ~ value ~ ')') }}
    {%- elif named_type == 'io.debezium.time.Timestamp' -%}
        {{ return('timestamp_millis(' ~ value ~ ')') }}
    {%- elif named_type == 'io.debezium.time.ZonedTimestamp' -%}
        {{ return('cast(' ~ value ~ ' as timestamp)') }}
    {%- else -%}
        {{ exceptions.raise_compiler_error(
            "source " ~ node.source_name ~ "." ~ node.name ~ ": meta.debezium_types names '" ~ named_type
            ~ "', which staging does not decode (io.debezium.time.Date, MicroTimestamp, Timestamp, ZonedTimestamp)") }}
    {%- endif -%}
{%- endmacro %}

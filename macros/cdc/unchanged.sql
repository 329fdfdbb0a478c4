{#- A value the source did not send: Debezium's `__debezium_unavailable_value` for a TOASTed column an
    update left alone under REPLICA IDENTITY DEFAULT (docs/DEBEZIUM_REAL_OUTPUT.md, 3). A source that
    sets `meta.cdc_unchanged_value` has its string and binary columns read so: such a value means
    "as before". Within a batch it takes the value of the key's previous change that has one
    (`cdc_fill_unchanged_sql`, when the batch is staged); against the table the row keeps its stored
    value (`cdc_unchanged_update_value`, in the MERGE's update). A source without the setting is read
    as before: no window, no extra statement. -#}

{% macro cdc_unchanged_columns(source_node, batch_sql) -%}
    {#- column -> the SQL literal of the placeholder in that column's type, for the string and binary
        columns of `batch_sql`; {} when the source sets no `meta.cdc_unchanged_value`. -#}
    {%- set value = none if source_node is none
        else (source_node.meta.get('cdc_unchanged_value') or source_node.source_meta.get('cdc_unchanged_value')) -%}
    {%- set columns = {} -%}
    {%- if value -%}
        {%- for column in cdc_landing_columns_of(batch_sql) if not column.name.startswith('_cdc_') -%}
            {%- set data_type = column.data_type | lower -%}
            {%- if data_type == 'string' -%}
                {%- do columns.update({column.name: cdc_sql_string(value)}) -%}
            {%- elif data_type == 'binary' -%}
                {%- do columns.update({column.name: 'cast(' ~ cdc_sql_string(value) ~ ' as binary)'}) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(columns) }}
{%- endmacro %}


{% macro cdc_fill_unchanged_sql(batch_sql, columns, unchanged, keys) %}
    {#- The batch's events with each placeholder replaced by the value of the key's latest earlier
        change (commit time, sequence, file) that carries one, when the batch has it; else the
        placeholder stays, for the MERGE to keep the table's value. A struct around the value tells
        a real null (kept) from a placeholder (skipped by `ignore nulls`). -#}
        select
        {%- for column in columns %}
            {%- if column in unchanged %}
            case
                when batch.{{ cdc_quote(column) }} = {{ unchanged[column] }} then coalesce(
                    last_value(
                        if(batch.{{ cdc_quote(column) }} = {{ unchanged[column] }}, null, named_struct('v', batch.{{ cdc_quote(column) }})),
                        true
                    ) over (
                        partition by {% for key in keys %}batch.{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
                        order by batch._cdc_ts, batch._cdc_seq, batch._cdc_source_file
                        rows between unbounded preceding and 1 preceding
                    ),
                    named_struct('v', batch.{{ cdc_quote(column) }})
                ).v
                else batch.{{ cdc_quote(column) }}
            end as {{ cdc_quote(column) }}{{ ',' if not loop.last }}
            {%- else %}
            batch.{{ cdc_quote(column) }}{{ ',' if not loop.last }}
            {%- endif %}
        {%- endfor %}
        from ({{ batch_sql }}) as batch
{% endmacro %}


{% macro cdc_unchanged_update_value(column, value, unchanged) -%}
    {#- What the MERGE's update writes to `column`: the row's stored value when the change carries the
        placeholder, else `value`. -#}
    {%- if column in unchanged -%}
        {{ return('case when s.' ~ cdc_quote(column) ~ ' = ' ~ unchanged[column] ~ ' then t.' ~ cdc_quote(column)
            ~ ' else ' ~ value ~ ' end') }}
    {%- endif -%}
    {{ return(value) }}
{%- endmacro %}

{#- Overrides dbt-spark 1.11's spark__load_csv_rows: a seed's values are written into its INSERT as SQL
    literals, not bound. Works around dbt-labs/dbt-adapters#487 (open): the session connection quotes
    every bound value, so an empty CSV cell loaded as the string 'None', not null, and a value holding a
    quote broke the statement. Otherwise as upstream: the same batches, the same casts to the column's
    type (or its `column_types`), the first statement returned for the compiled file. -#}
{% macro spark__load_csv_rows(model, agate_table) %}
    {%- set batch_size = get_batch_size() -%}
    {%- set column_override = model['config'].get('column_types', {}) -%}
    {%- set column_types = [] -%}
    {%- for col_name in agate_table.column_names -%}
        {%- do column_types.append(column_override.get(col_name, adapter.convert_type(agate_table, loop.index0))) -%}
    {%- endfor -%}
    {%- set statements = [] -%}
    {%- for chunk in agate_table.rows | batch(batch_size) -%}
        {%- set sql -%}
            insert into {{ this.render() }} values
            {% for row in chunk -%}
                ({%- for value in row -%}
                    cast({{ cdc_seed_literal(value) }} as {{ column_types[loop.index0] }})
                    {%- if not loop.last %}, {% endif -%}
                {%- endfor -%})
                {%- if not loop.last %},{% endif %}
            {% endfor %}
        {%- endset -%}
        {%- do adapter.add_query(sql, abridge_sql_log=True) -%}
        {%- if loop.first -%}
            {%- do statements.append(sql) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(statements[0]) }}
{% endmacro %}


{% macro cdc_seed_literal(value) -%}
    {#- One CSV value (as agate parsed it) as a Spark SQL literal: null for an empty cell, a number or a
        boolean as itself, anything else as a string literal (backslashes and quotes escaped, as Spark's
        default parser reads them) that the caller casts to the column's type. -#}
    {%- if value is none -%}
        null
    {%- elif value is boolean -%}
        {{ 'true' if value else 'false' }}
    {%- elif value is number -%}
        {{ value }}
    {%- else -%}
        {%- set text = value.strftime('%Y-%m-%d %H:%M:%S.%f') if value.hour is defined else value | string -%}
        '{{ text | replace('\\', '\\\\') | replace("'", "\\'") }}'
    {%- endif -%}
{%- endmacro %}

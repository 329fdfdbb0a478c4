{#- Overrides dbt's get_show_sql (global project, macros/adapters/show.sql) for `dbt show`: timestamp
    columns are shown as their text ('0001-01-01 00:00:00'), not fetched as Python datetimes. pyspark's
    collect turns a timestamp into a datetime with datetime.fromtimestamp, which fails for the first
    day of year 1 (CPython's fold check looks a day earlier: "year 0 is out of range"), whatever the
    time zone; the value stored in the table is right (issue 41). Every other column, and a query
    without a timestamp column, is shown as upstream does. The columns are described with the model's
    sql_header in front, which may define what the query reads (a CTE: dbt's BaseShowSqlHeader). -#}
{% macro get_show_sql(compiled_code, sql_header, limit) -%}
    {%- if sql_header is not none -%}
    {{ sql_header }}
    {%- endif %}
    {%- set columns = cdc_landing_columns_of((sql_header ~ '\n' if sql_header is not none else '') ~ compiled_code) if execute else [] -%}
    {%- if columns | selectattr('data_type', 'in', ['timestamp', 'timestamp_ntz']) | list %}
    select
        {%- for column in columns %}
        {% if column.data_type in ('timestamp', 'timestamp_ntz') -%}
        cast(shown.{{ cdc_quote(column.name) }} as string) as {{ cdc_quote(column.name) }}
        {%- else -%}
        shown.{{ cdc_quote(column.name) }}
        {%- endif %}{{ ',' if not loop.last }}
        {%- endfor %}
    from ({{ compiled_code }}) as shown
    {%- if limit is not none %}
    limit {{ limit }}
    {%- endif %}
    {%- else %}
    {{ get_limit_subquery_sql(compiled_code, limit) }}
    {%- endif %}
{%- endmacro %}

{#- Overrides dbt's run_query (global project): a statement that returns no rows (DDL and DML: create,
    drop, insert, merge, ...) is run without fetching a result, and its result is an empty table, as
    on the session method. Works around dbt-labs/dbt-adapters#481 (open): through the Thrift Server,
    PyHive fails to fetch the result of such a statement ("'NoneType' object is not iterable"), so on
    the cluster target every run_query of a DDL statement failed, and with it every dbt unit test (the
    unit materialization creates its temporary view with run_query) and any analyst macro doing the
    same. A query (select, with, show, describe, set, call, ...) is fetched as upstream. -#}
{% macro run_query(sql) %}
    {%- call statement('run_query_statement', fetch_result=cdc_returns_rows(sql), auto_begin=false) -%}
        {{ sql }}
    {%- endcall -%}
    {% do return(load_result('run_query_statement').table) %}
{% endmacro %}


{% macro cdc_returns_rows(sql) -%}
    {#- False for a statement Spark answers without a result set: its first keyword, after leading
        blanks and SQL comments, is one of DDL/DML's. Anything unrecognised is fetched (upstream's way). -#}
    {%- set leading = modules.re.match('^(?:\\s+|--[^\\n]*(?:\\n|$)|/\\*.*?\\*/)*([A-Za-z]+)', sql | string, modules.re.S) -%}
    {%- set no_rows = ['create', 'drop', 'alter', 'insert', 'merge', 'update', 'delete', 'truncate', 'use',
                       'refresh', 'cache', 'uncache', 'clear', 'msck', 'analyze', 'comment', 'load', 'repair'] -%}
    {{ return(leading is none or leading.group(1) | lower not in no_rows) }}
{%- endmacro %}

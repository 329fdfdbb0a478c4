{#- Overrides dbt-spark 1.11's spark__create_view_as: drops the view before creating it.
    Works around apache/iceberg#15490: with SparkSessionCatalog on a Hive metastore, views are
    Iceberg views and `create or replace view` keeps serving the OLD SQL text from the metastore,
    so a staging view would never pick up new raw columns. Otherwise identical to upstream. -#}
{% macro spark__create_view_as(relation, sql) -%}
    {%- if execute -%}
        {%- do cdc_execute('drop view if exists ' ~ relation) -%}
    {%- endif -%}
    {{ dbt.spark__create_view_as(relation, sql) }}
{%- endmacro %}

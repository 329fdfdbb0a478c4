{% macro spark__drop_schema(relation) -%}
    {#- Overrides dbt-spark 1.11's spark__drop_schema: drops the schema's tables and views one by one
        (drop_relation.sql: a table with `purge`) before the schema itself. Works around
        apache/iceberg#2374 (closed, unfixed): with Iceberg's SparkSessionCatalog, `drop schema ... cascade`
        goes to the Hive metastore alone, so Iceberg never sees its tables dropped: their data and metadata
        files stay in the warehouse, and the catalog's table cache (on the local target) still answers
        that they exist, so creating a table of the same name in the schema made again failed with
        TABLE_OR_VIEW_ALREADY_EXISTS for up to 30 s (dbt's adapter tests drop their schema after each
        test). Temporary views (listed with every schema) are left alone. -#}
    {%- if adapter.check_schema_exists(relation.database, relation.schema) -%}
        {%- for row in list_relations_without_caching(relation) if not row[2] -%}
            {%- do adapter.drop_relation(api.Relation.create(
                schema=relation.schema, identifier=row[1],
                type=('view' if 'Type: VIEW' in row[3] else 'table'))) -%}
        {%- endfor -%}
    {%- endif -%}
    {%- call statement('drop_schema') -%}
        drop schema if exists {{ relation }} cascade
    {%- endcall -%}
{%- endmacro %}

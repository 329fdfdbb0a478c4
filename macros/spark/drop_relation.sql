{% macro spark__drop_relation(relation) -%}
    {#- Overrides dbt-spark 1.11's spark__drop_relation: a table is dropped with `purge` (apache/iceberg#12790).
        dbt-spark drops a table with a plain `drop table` (an incremental model's --full-refresh, a model
        that changes materialization). On Iceberg that forgets the table but leaves every data and
        metadata file in place, unreferenced: the warehouse grows at every full refresh, and the old
        rows stay on disk where no snapshot expiry or erasure can reach them (docs/personal-data.md).
        `purge` deletes them with the table. A managed table that is not Iceberg (parquet, or no
        `file_format`) needs it too on this stack: Iceberg's SparkSessionCatalog drops it through the
        Hive metastore without deleting its folder (apache/iceberg#12790), so without `purge` its
        files stay and the next `create table` of that name fails with LOCATION_ALREADY_EXISTS. An
        external table's files stay either way, as Spark documents. -#}
    {%- call statement('drop_relation', auto_begin=False) -%}
        drop {{ relation.type }} if exists {{ relation }}{{ ' purge' if relation.type == 'table' else '' }}
    {%- endcall -%}
{%- endmacro %}

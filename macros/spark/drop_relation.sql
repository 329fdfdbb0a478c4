{% macro spark__drop_relation(relation) -%}
    {#- dbt-spark drops a table with a plain `drop table` (an incremental model's --full-refresh, a model
        that changes materialization). On Iceberg that forgets the table but leaves every data and
        metadata file in place, unreferenced: the warehouse grows at every full refresh, and the old
        rows stay on disk where no snapshot expiry or erasure can reach them (README "Personal data").
        `purge` deletes them with the table. On a table that is not Iceberg it changes nothing that
        matters: Spark never deletes an external table's files, and a managed table's go either way. -#}
    {%- call statement('drop_relation', auto_begin=False) -%}
        drop {{ relation.type }} if exists {{ relation }}{{ ' purge' if relation.type == 'table' else '' }}
    {%- endcall -%}
{%- endmacro %}

{#- Overrides dbt-spark 1.11's spark__list_relations_without_caching (`show table extended in <schema> like '*'`,
    one per schema dbt's relation cache needs). In `make run`'s build on the embedded target, the hooks hand the
    rows of the listings they made themselves and that no statement has changed since (CDC_LISTED_RELATIONS,
    python_hooks/project/warehouse.py: LISTINGS_VARIABLE): those are the answer, with no statement. A schema
    they did not list, and any other dbt command, is listed as upstream does. -#}
{% macro spark__list_relations_without_caching(relation) -%}
    {%- set handed = env_var('CDC_LISTED_RELATIONS', '') -%}
    {%- if handed -%}
        {%- set listed = fromjson(handed) -%}
        {%- if relation.schema | lower in listed -%}
            {{ return(listed[relation.schema | lower]) }}
        {%- endif -%}
    {%- endif -%}
    {%- call statement('list_relations_without_caching', fetch_result=True) -%}
        show table extended in {{ relation.schema }} like '*'
    {%- endcall -%}
    {{ return(load_result('list_relations_without_caching').table) }}
{%- endmacro %}

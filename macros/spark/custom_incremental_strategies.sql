{#- Overrides dbt-spark 1.11: lets incremental models use custom strategies such as `scd2_versions` and `merge_nonempty`.
    Works around dbt-labs/dbt-adapters#833 (open): dbt-spark validates the strategy against its
    built-ins and never calls `get_incremental_<strategy>_sql`, unlike dbt-core's default
    materialization. Built-in strategies behave exactly as upstream. -#}

{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}
    {%- set builtin = ['append', 'merge', 'insert_overwrite', 'microbatch'] -%}
    {%- if raw_strategy in builtin -%}
        {%- do return(dbt.dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format)) -%}
    {%- endif -%}
    {#- Raises "'get_incremental_<strategy>_sql' macro not found" for an unknown strategy. -#}
    {%- do adapter.get_incremental_strategy_macro(context, raw_strategy) -%}
    {%- do return(raw_strategy) -%}
{% endmacro %}


{% macro dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
    {%- if strategy in ['append', 'merge', 'insert_overwrite', 'microbatch'] -%}
        {{ dbt.dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) }}
    {%- else -%}
        {%- set strategy_macro = adapter.get_incremental_strategy_macro(context, strategy) -%}
        {{ strategy_macro({
            'target_relation': target,
            'temp_relation': source,
            'existing_relation': existing,
            'unique_key': unique_key,
            'dest_columns': none,
            'incremental_predicates': incremental_predicates,
        }) }}
    {%- endif -%}
{% endmacro %}

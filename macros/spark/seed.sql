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


{#- dbt's seed materialization, except for a seed that `make run` found as it last loaded it, its tests
    passed (cdc_seed_unchanged, python_hooks/evolution/seeds.py): its table is left as it is, unless it is
    missing (then it is loaded as always). -#}
{% materialization seed, adapter='spark' -%}
    {%- if cdc_seed_unchanged() and load_relation(this) is not none -%}
        {#- dbt's seed task reads the CSV's rows back from the result (for `--show`): read here, not written -#}
        {%- do store_result('agate_table', response='OK', agate_table=load_agate_table()) -%}
        {%- call noop_statement('main', 'UNCHANGED', 'UNCHANGED', 0) -%}
            -- {{ this }}: the CSV, its config and the project's macros are as when it was last loaded
        {%- endcall -%}
        {{ return({'relations': [this.incorporate(type='table')]}) }}
    {%- endif -%}
    {{ return(context['materialization_seed_default']()) }}
{%- endmaterialization %}


{% macro cdc_seed_unchanged() -%}
    {#- Whether `make run` found this seed as it last loaded it (CDC_SEEDS_UNCHANGED, written by
        python_hooks/evolution/seeds.py). -#}
    {{ return(model is defined and model.name in fromjson(env_var('CDC_SEEDS_UNCHANGED', '[]'))) }}
{%- endmacro %}

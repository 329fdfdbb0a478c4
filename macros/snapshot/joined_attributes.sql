{#- The attribute columns of a join of current-state tables on one key, following the tables'
    schemas as they evolve: a column a source adds later reaches the join (and the snapshot and
    dimension built on it) without a model change. -#}

{% macro cdc_joined_attributes(tables) %}
    {#- tables: a list of {alias, relation, exclude: [columns], rename: {column: name}}.
        Returns one select expression per business column (never the pipeline's `_cdc_` columns or
        the excluded ones), `<alias>.<column> as <name>`: the rename if given, else the column's own
        name, else, when another table already uses that name, `<alias>_<column>`.
        Empty while dbt parses (the columns are read at execute time). -#}
    {%- set expressions = [] -%}
    {%- if not execute -%}
        {{ return(expressions) }}
    {%- endif -%}
    {%- set taken = [] -%}
    {%- for table in tables -%}
        {%- for column in adapter.get_columns_in_relation(table.relation) -%}
            {%- set name = column.name | lower -%}
            {%- if not name.startswith('_cdc_') and name not in (table.exclude or []) -%}
                {%- set output = (table.rename or {}).get(name, name) -%}
                {%- if output in taken -%}
                    {%- set output = table.alias ~ '_' ~ name -%}
                {%- endif -%}
                {%- do taken.append(output) -%}
                {%- do expressions.append(table.alias ~ '.' ~ cdc_quote(column.name) ~ ' as ' ~ cdc_quote(output)) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endfor -%}
    {{ return(expressions) }}
{% endmacro %}


{% macro scd2_attribute_columns(relation, exclude) %}
    {#- The columns of an SCD2 relation that are attributes: not its key or validity columns (given
        in `exclude`), not dbt's `dbt_` nor the pipeline's `_cdc_` columns. A list of Columns. -#}
    {%- set attributes = [] -%}
    {%- if execute -%}
        {%- for column in adapter.get_columns_in_relation(relation) -%}
            {%- set name = column.name | lower -%}
            {%- if not name.startswith('dbt_') and not name.startswith('_cdc_') and name not in exclude -%}
                {%- do attributes.append(column) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(attributes) }}
{% endmacro %}

{#- dbt_utils.unique_combination_of_columns, for this project (see expression_is_true.sql): the
    grain test of a model whose key is several columns (a current-state table with a composite
    `unique_key`, a history table keyed by key + valid_from). Fails with one row per duplicated
    combination and its count. Nulls are values here (they group together), as in dbt_utils.

        data_tests:
          - unique_combination_of_columns:
              arguments:
                combination_of_columns: [order_id, line_number]
-#}

{% test unique_combination_of_columns(model, combination_of_columns, quote_columns=false) %}

{%- if combination_of_columns is string or combination_of_columns | length == 0 -%}
    {{ exceptions.raise_compiler_error(
        "unique_combination_of_columns on " ~ model ~ ": combination_of_columns must be a list of column names") }}
{%- endif -%}
{%- set columns = [] -%}
{%- for column in combination_of_columns -%}
    {%- do columns.append(adapter.quote(column) if quote_columns else column) -%}
{%- endfor %}

with

validation_errors as (

    select
        {%- for column in columns %}
        {{ column }},
        {%- endfor %}
        count(*) as n_records
    from {{ model }}
    group by {{ columns | join(', ') }}
    having count(*) > 1

)

select * from validation_errors

{% endtest %}

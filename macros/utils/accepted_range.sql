{#- dbt_utils.accepted_range, for this project (see expression_is_true.sql): every value of the
    column lies between min_value and max_value (inclusive by default; either bound may be left
    out, not both). Fails on every row outside; as in dbt_utils, nulls pass (pair with not_null).
    Bounds are SQL expressions: numbers, or e.g. "current_timestamp()".

        columns:
          - name: amount
            data_tests:
              - accepted_range:
                  arguments:
                    min_value: 0
-#}

{% test accepted_range(model, column_name, min_value=none, max_value=none, inclusive=true) %}

{%- if min_value is none and max_value is none -%}
    {{ exceptions.raise_compiler_error(
        "accepted_range on " ~ model ~ "." ~ column_name ~ ": give min_value, max_value or both") }}
{%- endif -%}
{%- set operator = '=' if inclusive else '' %}

with

validation_errors as (

    select *
    from {{ model }}
    where
        false
        {%- if min_value is not none %}
        or not ({{ column_name }} >{{ operator }} {{ min_value }})
        {%- endif %}
        {%- if max_value is not none %}
        or not ({{ column_name }} <{{ operator }} {{ max_value }})
        {%- endif %}

)

select * from validation_errors

{% endtest %}

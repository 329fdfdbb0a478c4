{#- dbt_utils.expression_is_true, for this project (dbt Hub is unreachable, so no dbt_utils): same
    name, same arguments, same result, so moving to dbt_utils is a matter of prefixing the test.
    Fails on every row where the expression is false. As in dbt_utils, a null result passes:
    pair it with not_null where null is wrong too. With a column, the expression is appended to it:

        columns:
          - name: amount
            data_tests:
              - expression_is_true:
                  arguments:
                    expression: ">= 0"
-#}

{% test expression_is_true(model, expression, column_name=none) %}

select *
from {{ model }}
where not ({{ column_name ~ ' ' if column_name }}{{ expression }})

{% endtest %}

{% macro cdc_iceberg_widens(old_type, new_type) %}
    {#- True when Iceberg can widen a column of type `old_type` to `new_type` in place: int -> bigint,
        float -> double, decimal(P,S) -> decimal(P2,S) with P2 > P (Spark's type strings, any case).
        The same rule as python_hooks/evolution/types.py's `compare_types(...) == 'promote'` for these
        types; tests/pytest/unit/test_rules_pinned.py holds the two together. -#}
    {%- set old = (old_type or '') | lower | replace(' ', '') -%}
    {%- set new = (new_type or '') | lower | replace(' ', '') -%}
    {%- set ints = {'tinyint': 1, 'byte': 1, 'smallint': 2, 'short': 2, 'int': 3, 'integer': 3, 'bigint': 4, 'long': 4} -%}
    {%- if old in ints and new in ints -%}
        {{ return(ints[new] > ints[old] and ints[new] >= 4) }}
    {%- elif old in ('float', 'real') and new == 'double' -%}
        {{ return(true) }}
    {%- elif old.startswith('decimal(') and new.startswith('decimal(') -%}
        {%- set old_parts = old[8:-1].split(',') -%}
        {%- set new_parts = new[8:-1].split(',') -%}
        {{ return(old_parts | length == 2 and new_parts | length == 2
                  and old_parts[1] == new_parts[1]
                  and (new_parts[0] | int) > (old_parts[0] | int)) }}
    {%- else -%}
        {{ return(false) }}
    {%- endif -%}
{% endmacro %}

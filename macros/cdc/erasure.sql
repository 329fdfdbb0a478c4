{#- The erasure register's side in SQL (python_hooks/erase.py writes the register).

    A data subject (e.g. `customer`) is declared where it lives, in `meta.cdc_subjects` of a source
    table or of a model/snapshot: `{customer: customer_id}`, the column holding the subject's key.
    The register (`<schema>_cdc_meta.erasure_register`) holds, per erased subject key, a keyed hash:
    sha2('<secret>|<subject>|<key>', 256), the secret being the environment variable
    CDC_ERASURE_SECRET. The secret never enters the SQL text: Spark substitutes `${env:...}` in a
    statement with the driver's environment variable before parsing it (spark.sql.variable.substitute),
    so compiled SQL, dbt's logs and the register hold the reference, never the value.

    Every staging read of a source that declares subjects (the staging view, a batch's pending
    files) leaves out the change events of an erased subject: a late file, a re-delivered file or
    a --full-refresh cannot bring an erased subject back. -#}

{% macro cdc_subject_hash_sql(subject, value_sql) -%}
    {#- The keyed hash of a subject key, as python_hooks/erase.py computes it. -#}
    {{ return("sha2(concat('${env:CDC_ERASURE_SECRET}', '|', " ~ cdc_sql_string(subject) ~ ", '|', cast(" ~ value_sql ~ " as string)), 256)") }}
{%- endmacro %}


{% macro cdc_erasure_check_value() -%}
    {#- The register's check row (subject '*', key 'register-check'): tells a missing or different secret
        apart from "nothing erased". -#}
    {{ return('register-check') }}
{%- endmacro %}


{% macro cdc_without_erased(sql, node) %}
    {#- The staging SQL `sql` of source `node` without the change events of erased subjects. One
        query of the register (only for a source that declares subjects, and only once something
        was erased); none of the key values enter the SQL. -#}
    {%- set subjects = node.meta.get('cdc_subjects') or {} -%}
    {%- if not subjects or not execute -%}
        {{ return(sql) }}
    {%- endif -%}
    {%- set register = cdc_meta_relation('erasure_register') -%}
    {%- if load_relation(register) is none -%}
        {{ return(sql) }}
    {%- endif -%}
    {%- set quoted = [] -%}
    {%- for subject in subjects -%}
        {%- do quoted.append(cdc_sql_string(subject)) -%}
    {%- endfor -%}
    {%- set subject_list = quoted | join(', ') -%}
    {%- set counts = run_query(
        'select count_if(subject in (' ~ subject_list ~ ')),'
        ~ " count_if(subject = '*'),"
        ~ " count_if(subject = '*' and key_hash = " ~ cdc_subject_hash_sql('*', cdc_sql_string(cdc_erasure_check_value())) ~ ')'
        ~ ' from ' ~ register
    ).rows[0] -%}
    {%- if counts[0] == 0 -%}
        {{ return(sql) }}
    {%- endif -%}
    {%- if counts[2] == 0 -%}
        {{ exceptions.raise_compiler_error(
            "source " ~ node.source_name ~ "." ~ node.name ~ ": the erasure register " ~ register ~ " holds "
            ~ counts[0] ~ " erased subject key(s), but CDC_ERASURE_SECRET is not set here or is not the secret they "
            ~ "were hashed with, so erased subjects cannot be recognised. Set it (on the cluster target: in the "
            ~ "environment of `make cluster-up`) and run again; nothing was read.") }}
    {%- endif -%}
    {%- set conditions = [] -%}
    {%- for subject, column in subjects.items() -%}
        {%- do conditions.append(
            'not exists (select 1 from ' ~ register ~ ' as erased where erased.subject = ' ~ cdc_sql_string(subject)
            ~ ' and erased.key_hash = ' ~ cdc_subject_hash_sql(subject, 'changes.' ~ cdc_quote(column | lower)) ~ ')') -%}
    {%- endfor -%}
    {{ return('select changes.* from (\n' ~ sql ~ '\n) as changes\nwhere ' ~ (conditions | join('\n    and '))) }}
{% endmacro %}

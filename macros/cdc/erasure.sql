{#- The side in SQL of the two personal-data registers (python_hooks/personal_data/ writes them).

    A data subject (e.g. `customer`) is declared where it lives, in `meta.cdc_subjects` of a source
    table or of a model/snapshot: `{customer: customer_id}`, the column holding the subject's key;
    its personal columns (those a rectification may change) in `meta.cdc_personal_data`:
    `{customer: [email_id, ...]}` (or `{customer: {name: sales_customer_name}}` where a model renames
    the source's column).

    - erasure_register: per erased subject key, a keyed hash sha2('<secret>|<subject>|<key>', 256);
    - rectification_register: per rectified (subject, key, column, old value), a keyed hash
      sha2('<secret>|<subject>|<column>|<key>|<old value>', 256) and the corrected value.
    The secret is the environment variable CDC_ERASURE_SECRET and never enters the SQL text: Spark
    substitutes `${env:...}` in a statement with the driver's environment variable before parsing it
    (spark.sql.variable.substitute), so compiled SQL, dbt's logs and the registers hold the reference.

    Every staging read of a source that declares subjects (the staging view, a batch's pending
    files) leaves out the change events of an erased subject and replaces a rectified old value by
    its correction: a late file, a re-delivered file or a --full-refresh brings back neither an
    erased subject nor a rectified value. A value the source changes after the rectification is
    not in the register and passes as it is. -#}

{% macro cdc_subject_hash_sql(subject, value_sql) -%}
    {#- The keyed hash of a subject key, as python_hooks/personal_data/ computes it. -#}
    {{ return("sha2(concat('${env:CDC_ERASURE_SECRET}', '|', " ~ cdc_sql_string(subject) ~ ", '|', cast(" ~ value_sql ~ " as string)), 256)") }}
{%- endmacro %}


{% macro cdc_value_hash_sql(subject, column, key_sql, value_sql) -%}
    {#- The keyed hash of a rectified (subject, column, key, old value), as python_hooks/personal_data/ computes it. -#}
    {{ return("sha2(concat('${env:CDC_ERASURE_SECRET}', '|', " ~ cdc_sql_string(subject) ~ ", '|', "
        ~ cdc_sql_string(column) ~ ", '|', cast(" ~ key_sql ~ " as string), '|', cast(" ~ value_sql ~ " as string)), 256)") }}
{%- endmacro %}


{% macro cdc_erasure_check_value() -%}
    {#- The register's check row (subject '*', key 'register-check'): tells a missing or different secret
        apart from "nothing erased". -#}
    {{ return('register-check') }}
{%- endmacro %}


{% macro cdc_personal_data_columns(meta, subject) -%}
    {#- {attribute: column} of `meta.cdc_personal_data[subject]`: a list (same names) or a mapping. -#}
    {%- set declared = (meta.get('cdc_personal_data') or {}).get(subject) or [] -%}
    {%- set columns = {} -%}
    {%- if declared is mapping -%}
        {%- for attribute, column in declared.items() -%}
            {%- do columns.update({attribute | lower: column | lower}) -%}
        {%- endfor -%}
    {%- else -%}
        {%- for column in declared -%}
            {%- do columns.update({column | lower: column | lower}) -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(columns) }}
{%- endmacro %}


{% macro cdc_apply_personal_data_registers(sql, node) %}
    {#- The staging SQL `sql` of source `node` without the change events of erased subjects, and with
        rectified old values replaced. For a source that declares subjects, one query per register that
        exists (none of the key values enter the SQL); nothing more until something was erased or
        rectified. None at all when `make run` found both registers never written (CDC_REGISTERS_EMPTY). -#}
    {%- set subjects = node.meta.get('cdc_subjects') or {} -%}
    {%- if not subjects or not execute or env_var('CDC_REGISTERS_EMPTY', '') == '1' -%}
        {{ return(sql) }}
    {%- endif -%}
    {%- set quoted = [] -%}
    {%- for subject in subjects -%}
        {%- do quoted.append(cdc_sql_string(subject)) -%}
    {%- endfor -%}
    {%- set subject_list = quoted | join(', ') -%}
    {%- set register = cdc_meta_relation('erasure_register') -%}
    {%- set corrections = cdc_meta_relation('rectification_register') -%}
    {%- set counts = [0, 0, 0] -%}
    {%- if cdc_meta_table_exists('erasure_register') -%}
        {%- set counts = run_query(
            'select count_if(subject in (' ~ subject_list ~ ')),'
            ~ " count_if(subject = '*'),"
            ~ " count_if(subject = '*' and key_hash = " ~ cdc_subject_hash_sql('*', cdc_sql_string(cdc_erasure_check_value())) ~ ')'
            ~ ' from ' ~ register
        ).rows[0] -%}
    {%- endif -%}
    {%- set rectified = [] -%}
    {%- set personal = {} -%}
    {%- for subject in subjects -%}
        {%- for attribute, column in cdc_personal_data_columns(node.meta, subject).items() -%}
            {%- do personal.update({subject ~ '|' ~ attribute: column}) -%}
        {%- endfor -%}
    {%- endfor -%}
    {%- if personal and cdc_meta_table_exists('rectification_register') -%}
        {%- for row in run_query(
            'select distinct subject, column_name from ' ~ corrections ~ ' where subject in (' ~ subject_list ~ ')'
        ).rows -%}
            {%- if (row[0] ~ '|' ~ row[1]) in personal -%}
                {%- do rectified.append({'subject': row[0], 'attribute': row[1], 'column': personal[row[0] ~ '|' ~ row[1]]}) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {%- if counts[0] == 0 and not rectified -%}
        {{ return(sql) }}
    {%- endif -%}
    {%- if counts[2] == 0 -%}
        {{ exceptions.raise_compiler_error(
            "source " ~ node.source_name ~ "." ~ node.name ~ ": the personal-data registers in " ~ cdc_meta_schema()
            ~ " hold erased or rectified subject keys, but CDC_ERASURE_SECRET is not set here or is not the secret "
            ~ "they were hashed with, so those subjects cannot be recognised. Set it (on the cluster target: in the "
            ~ "environment of `make cluster-up`) and run again; nothing was read.") }}
    {%- endif -%}
    {%- if counts[0] > 0 -%}
        {%- set conditions = [] -%}
        {%- for subject, column in subjects.items() -%}
            {%- do conditions.append(
                'not exists (select 1 from ' ~ register ~ ' as erased where erased.subject = ' ~ cdc_sql_string(subject)
                ~ ' and erased.key_hash = ' ~ cdc_subject_hash_sql(subject, 'changes.' ~ cdc_quote(column | lower)) ~ ')') -%}
        {%- endfor -%}
        {%- set sql = 'select changes.* from (\n' ~ sql ~ '\n) as changes\nwhere ' ~ (conditions | join('\n    and ')) -%}
    {%- endif -%}
    {%- if not rectified -%}
        {{ return(sql) }}
    {%- endif -%}
    {#- one left join per rectified column, on the keyed hash of (subject, column, key, value) -#}
    {%- set by_column = {} -%}
    {%- set joins = [] -%}
    {%- for item in rectified -%}
        {%- set alias = 'rectified_' ~ loop.index -%}
        {%- set key_sql = 'changes.' ~ cdc_quote(subjects[item.subject] | lower) -%}
        {%- set value_sql = 'changes.' ~ cdc_quote(item.column) -%}
        {%- do by_column.setdefault(item.column, []).append(alias) -%}
        {%- do joins.append(
            'left join (select value_hash, max(new_value) as new_value from ' ~ corrections
            ~ ' where subject = ' ~ cdc_sql_string(item.subject) ~ ' and column_name = ' ~ cdc_sql_string(item.attribute)
            ~ ' group by value_hash) as ' ~ alias
            ~ '\n    on ' ~ alias ~ '.value_hash = ' ~ cdc_value_hash_sql(item.subject, item.attribute, key_sql, value_sql)) -%}
    {%- endfor -%}
    {%- set selected = [] -%}
    {%- for column in cdc_landing_columns_of(sql) -%}
        {%- set name = column.name | lower -%}
        {%- if name in by_column -%}
            {%- set replaced = [] -%}
            {%- for alias in by_column[name] -%}
                {%- do replaced.append('when ' ~ alias ~ '.value_hash is not null then cast(' ~ alias ~ '.new_value as ' ~ column.data_type ~ ')') -%}
            {%- endfor -%}
            {%- do selected.append('case ' ~ (replaced | join(' ')) ~ ' else changes.' ~ cdc_quote(column.name) ~ ' end as ' ~ cdc_quote(column.name)) -%}
        {%- else -%}
            {%- do selected.append('changes.' ~ cdc_quote(column.name)) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return('select ' ~ (selected | join(',\n    ')) ~ '\nfrom (\n' ~ sql ~ '\n) as changes\n' ~ (joins | join('\n'))) }}
{% endmacro %}

{#- Reading the landing zone: which raw files a source folder holds, and their union schema. -#}

{% macro cdc_source_node(source_name, table_name) -%}
    {%- for node in graph.sources.values() -%}
        {%- if node.source_name == source_name and node.name == table_name -%}
            {{ return(node) }}
        {%- endif -%}
    {%- endfor -%}
    {{ exceptions.raise_compiler_error("source('" ~ source_name ~ "', '" ~ table_name ~ "') is not defined") }}
{%- endmacro %}


{% macro cdc_landing_folder(source_relation) -%}
    {#- The source identifier is the folder of the table's raw Parquet files. -#}
    {%- set folder = source_relation.identifier -%}
    {%- if not folder.startswith('/') and '://' not in folder -%}
        {{ exceptions.raise_compiler_error(
            "Landing folder '" ~ folder ~ "' of " ~ source_relation ~ " must be absolute: "
            ~ "set CDC_LANDING_ROOT to an absolute path or an s3a:// URI.") }}
    {%- endif -%}
    {{ return(folder) }}
{%- endmacro %}


{% macro cdc_landing_file_count(source_name, table_name, folder) -%}
    {#- Lists the folder through a binaryFile catalog table: unlike a path query, a catalog table
        over a missing or empty folder reads as empty instead of failing, and only the listing is
        read (no file content). -#}
    {%- set probe = cdc_meta_relation('landing__' ~ source_name ~ '__' ~ table_name) -%}
    {%- do run_query('drop table if exists ' ~ probe) -%}
    {%- do run_query(
        'create table ' ~ probe
        ~ ' (path string, modificationTime timestamp, length bigint, content binary)'
        ~ ' using binaryFile location ' ~ cdc_sql_string(folder)
    ) -%}
    {%- set result = run_query(
        "select count(*) from " ~ probe
        ~ " where path like '%.parquet' and not regexp(path, '/[._][^/]*$')"
    ) -%}
    {{ return(result.columns[0].values()[0] | int) }}
{%- endmacro %}


{% macro cdc_landing_columns(folder) -%}
    {#- Union schema of every Parquet file in the folder (spark.sql.parquet.mergeSchema=true):
        a list of {name, data_type}. Footers only. -#}
    {{ return(cdc_landing_columns_of('select * from parquet.' ~ cdc_quote(folder))) }}
{%- endmacro %}


{% macro cdc_landing_columns_of(query) -%}
    {%- set result = run_query('describe query ' ~ query) -%}
    {%- set columns = [] -%}
    {%- for row in result.rows -%}
        {%- if row[0] and not row[0].startswith('#') -%}
            {%- do columns.append({'name': row[0], 'data_type': row[1]}) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(columns) }}
{%- endmacro %}


{% macro cdc_sql_string(value) -%}
    {#- A SQL string literal: backslashes and single quotes escaped. -#}
    {{ return("'" ~ (value | string).replace('\\', '\\\\').replace("'", "\\'") ~ "'") }}
{%- endmacro %}


{% macro cdc_quote(identifier) -%}
    {#- A Spark identifier quoted for any name: spaces, dots, reserved words, backticks, unicode. -#}
    {{ return('`' ~ (identifier | string).replace('`', '``') ~ '`') }}
{%- endmacro %}

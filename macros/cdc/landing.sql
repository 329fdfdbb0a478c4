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
    {%- do cdc_execute('drop table if exists ' ~ probe) -%}
    {%- do cdc_execute(
        'create table ' ~ probe
        ~ ' (path string, modificationTime timestamp, length bigint, content binary)'
        ~ ' using binaryFile location ' ~ cdc_sql_string(folder)
    ) -%}
    {#- The session caches a catalog table's file listing by name, even across drop and create. -#}
    {%- do cdc_execute('refresh table ' ~ probe) -%}
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


{% macro cdc_execute(sql) -%}
    {#- Runs a statement whose result nobody reads (DDL, DML, cache, procedure calls) without
        fetching a result: on the cluster target (Thrift Server, PyHive), fetching the result of a
        DDL/DML statement fails with "'NoneType' object is not iterable". run_query is for queries. -#}
    {%- do adapter.execute(sql, auto_begin=false, fetch=false) -%}
{%- endmacro %}


{% macro cdc_quote(identifier) -%}
    {#- A Spark identifier quoted for any name: spaces, dots, reserved words, backticks, unicode. -#}
    {{ return('`' ~ (identifier | string).replace('`', '``') ~ '`') }}
{%- endmacro %}


{% macro cdc_landing_reads(staging_model, folder, all_files, file_count) -%}
    {#- What staging reads: one relation over every file, or, when the Python hooks found raw files
        that disagree on a column's type (cdc_raw_file_groups), one relation per group of files
        with the business column types to cast to (Spark cannot read int and bigint files as one). -#}
    {%- set registry = cdc_meta_relation('cdc_raw_file_groups') -%}
    {%- set reads = [] -%}
    {%- if load_relation(registry) is not none -%}
        {%- set groups = run_query(
            'select to_json(file_names), column_types from ' ~ registry
            ~ ' where staging_model = ' ~ cdc_sql_string(staging_model) ~ ' order by group_id'
        ) -%}
        {%- for row in groups.rows -%}
            {%- do reads.append({
                'relation': 'parquet.' ~ cdc_quote(folder ~ '/{' ~ (fromjson(row[0]) | join(',')) ~ '}'),
                'files': fromjson(row[0]) | length,
                'types': fromjson(row[1]),
            }) -%}
        {%- endfor -%}
    {%- endif -%}
    {%- set registered = namespace(files=0) -%}
    {%- for read in reads -%}
        {%- set registered.files = registered.files + read.files -%}
    {%- endfor -%}
    {%- set registered = registered.files -%}
    {%- if reads and registered != file_count -%}
        {{ exceptions.raise_compiler_error(
            staging_model ~ ": the landing folder " ~ folder ~ " holds " ~ file_count ~ " raw files but the last "
            ~ "schema-evolution run registered " ~ registered ~ " (its files disagree on a column's type and "
            ~ "must be read in groups). Run the hooks first: `python -m python_hooks evolve` (`make run` does).") }}
    {%- endif -%}
    {%- if not reads -%}
        {%- do reads.append({'relation': 'parquet.' ~ cdc_quote(all_files), 'types': none}) -%}
    {%- endif -%}
    {{ return(reads) }}
{%- endmacro %}


{% macro cdc_cast_columns(sql, types) -%}
    {#- The staging SQL of one group of files, with its business columns cast to the types of the
        whole table (a column the group lacks is null). -#}
    {%- if types is none -%}
        {{ return(sql) }}
    {%- endif -%}
    {%- set columns = [] -%}
    {%- set present = cdc_landing_columns_of(sql) | map(attribute='name') | map('lower') | list -%}
    {%- for name, data_type in types.items() -%}
        {%- if name in present -%}
            {%- do columns.append('cast(grouped.' ~ cdc_quote(name) ~ ' as ' ~ data_type ~ ') as ' ~ cdc_quote(name)) -%}
        {%- else -%}
            {%- do columns.append('cast(null as ' ~ data_type ~ ') as ' ~ cdc_quote(name)) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return('select ' ~ (columns | join(', ')) ~ ', grouped._cdc_op, grouped._cdc_ts, grouped._cdc_seq, '
        ~ 'grouped._cdc_source_file from (' ~ sql ~ ') as grouped') }}
{%- endmacro %}

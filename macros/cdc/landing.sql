{#- Reading the landing zone: which raw files a source folder holds, and their union schema. -#}

{% macro cdc_source_node(source_name, table_name) -%}
    {%- for node in graph.sources.values() -%}
        {%- if node.source_name == source_name and node.name == table_name -%}
            {{ return(node) }}
        {%- endif -%}
    {%- endfor -%}
    {{ exceptions.raise_compiler_error("source('" ~ source_name ~ "', '" ~ table_name ~ "') is not defined") }}
{%- endmacro %}


{% macro cdc_landing_folder(node) -%}
    {#- The identifier of the source `node` (a graph source) is the folder of the table's raw Parquet
        files: the files directly in it, or in subfolders (DMS's DatePartitionEnabled
        <yyyy>/<mm>/<dd>/, the S3 sink's partition=<p>/). -#}
    {%- set folder = node.identifier -%}
    {%- if not folder.startswith('/') and '://' not in folder -%}
        {{ exceptions.raise_compiler_error(
            "Landing folder '" ~ folder ~ "' of source " ~ node.source_name ~ "." ~ node.name ~ " must be absolute: "
            ~ "set CDC_LANDING_ROOT to an absolute path or an s3a:// URI.") }}
    {%- endif -%}
    {{ return(folder.rstrip('/')) }}
{%- endmacro %}


{% macro cdc_landing_probe(source_name, table_name, folder) -%}
    {#- A binaryFile catalog table over the folder: its listing (path, length, modificationTime; the
        content is never read). Unlike a path query, a catalog table over a missing or empty folder
        reads as empty instead of failing. Its name holds a hash of the folder, so a moved landing root
        gets a table of its own (python_hooks/landing/files.py: probe_name names it the same way).
        Refreshed before every read: the session caches a catalog table's listing. -#}
    {%- set probe = cdc_meta_relation('landing__' ~ source_name ~ '__' ~ table_name ~ '__' ~ local_md5(folder)[:8]) -%}
    {%- do cdc_execute(
        'create table if not exists ' ~ probe
        ~ ' (path string, modificationTime timestamp, length bigint, content binary)'
        ~ " using binaryFile options ('recursiveFileLookup' 'true') location " ~ cdc_sql_string(folder)
    ) -%}
    {%- do cdc_execute('refresh table ' ~ probe) -%}
    {{ return(probe) }}
{%- endmacro %}


{% macro cdc_landing_listing_sql(probe, folder) -%}
    {#- The raw files of a probe: file name (what the ledger and _cdc_source_file hold) and path
        relative to the folder. Hidden files (. or _) and other files than Parquet are not raw files. -#}
    {%- set prefix = folder ~ '/' -%}
    {%- if prefix.startswith('file:') -%}
        {%- set prefix = '/' ~ prefix[5:].lstrip('/') -%}
    {%- endif -%}
    {%- set prefix_sql = cdc_sql_string(prefix) -%}
        select
            regexp_extract(path, '[^/]*$', 0) as file_name,
            case when instr(path, {{ prefix_sql }}) > 0
                then substr(path, instr(path, {{ prefix_sql }}) + {{ prefix | length }})
                else regexp_extract(path, '[^/]*$', 0)
            end as file_path
        from {{ probe }}
        where path like '%.parquet' and not regexp(path, '/[._][^/]*$')
{%- endmacro %}


{% macro cdc_landing_file_count(source_name, table_name, folder) -%}
    {#- The raw files of the folder: as `make run`'s hooks listed them this run (CDC_LANDING_FILE_COUNTS,
        python_hooks/commands/run.py: the listing every batch, the schema hook and the file groups they registered
        read; single-writer target), else counted from the folder's probe. -#}
    {%- set listed = fromjson(env_var('CDC_LANDING_FILE_COUNTS', '{}')).get(folder) -%}
    {%- if listed is not none -%}
        {{ return(listed | int) }}
    {%- endif -%}
    {%- set probe = cdc_landing_probe(source_name, table_name, folder) -%}
    {%- set result = run_query('select count(*) from (' ~ cdc_landing_listing_sql(probe, folder) ~ ')') -%}
    {{ return(result.columns[0].values()[0] | int) }}
{%- endmacro %}


{% macro cdc_landing_pending(node, model_name, every_file=false) -%}
    {#- The raw files of source `node` that the ledger does not list for `model_name` (`every_file`: all,
        a full build's), as [file_name, file_path] rows, oldest name first: one query over the folder's
        listing and the model's ledger partition, so its cost follows the folder's size in names, never
        its content or its footers. Two files with one name in different subfolders are refused (the
        ledger and _cdc_source_file know a file by its name). -#}
    {%- set folder = cdc_landing_folder(node) -%}
    {%- set probe = cdc_landing_probe(node.source_name, node.name, folder) -%}
    {%- set sql -%}
        select listing.file_name, listing.file_path
        from ({{ cdc_landing_listing_sql(probe, folder) }}) as listing
        {%- if not every_file %}
        left anti join (
            select file_name from {{ cdc_meta_relation('cdc_file_ledger') }}
            where model_name = {{ cdc_sql_string(model_name) }}
        ) as ledger
            on listing.file_name = ledger.file_name
        {%- endif %}
    {%- endset -%}
    {#- Sorted here, and one name's copies counted here: an ORDER BY and a window would cost Spark a
        shuffle and a sort of the listing (0.7 s for 5,000 files). -#}
    {%- set rows = run_query(sql).rows | sort(attribute='file_path', case_sensitive=true)
        | sort(attribute='file_name', case_sensitive=true) -%}
    {%- set pending = [] -%}
    {%- for row in rows -%}
        {%- if not loop.first and row[0] == loop.previtem[0] -%}
            {%- set copies = rows | selectattr('file_name', 'equalto', row[0]) | list -%}
            {{ exceptions.raise_compiler_error(
                "cdc_current_state refused the batch for " ~ model_name ~ ": the landing folder " ~ folder ~ " of source "
                ~ node.source_name ~ "." ~ node.name ~ " holds " ~ copies | length ~ " raw files named " ~ row[0]
                ~ " (one of them " ~ copies[0][1] ~ "); file names must be unique in a table's folder. Nothing was applied.") }}
        {%- endif -%}
        {%- do pending.append({'name': row[0], 'path': row[1]}) -%}
    {%- endfor -%}
    {{ return(pending) }}
{%- endmacro %}


{% macro cdc_run_plan() -%}
    {#- What `make run` listed and evolved before dbt started (CDC_RUN_PLAN, written by
        python_hooks/commands/run.py from landing/pending.py and evolution/apply.py): per current-state
        model, {folder, files, and, for a table the hooks evolved, columns (its columns after
        evolution), staging_model, grouped (whether its raw files are read in groups), raw_columns and
        raw_fields (the batch's files' column names and struct fields, when the files agree), group_columns (those
        Spark merges from each file group's files, by group id) and state (its snapshot, branches, size and delete
        layout)}, in parts: CDC_RUN_PLAN, then CDC_RUN_PLAN_2 to
        CDC_RUN_PLAN_<CDC_RUN_PLAN_PARTS> (python_hooks/landing/pending.py: plan_parts). Empty for a
        plain `dbt run`, a shared target, a folder Python does not list: then each model asks Spark. -#}
    {%- set plan = fromjson(env_var('CDC_RUN_PLAN', '{}')) -%}
    {%- for part in range(2, (env_var('CDC_RUN_PLAN_PARTS', '1') | int) + 1) -%}
        {%- do plan.update(fromjson(env_var(['CDC_RUN_PLAN', part] | join('_'), '{}'))) -%}
    {%- endfor -%}
    {{ return(plan) }}
{%- endmacro %}


{% macro cdc_planned_files(node, model_name) -%}
    {#- The raw files of the run's plan for `model_name` (the folder's files minus the ledger's, the
        same rule as cdc_landing_pending), as [{name, path}], or none when the run has no plan for it:
        then the model lists them itself. -#}
    {%- set entry = cdc_run_plan().get(model_name) -%}
    {%- if entry is none or entry.folder != cdc_landing_folder(node) -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set files = [] -%}
    {%- for file in entry.files -%}
        {%- do files.append({'name': file[0], 'path': file[1]}) -%}
    {%- endfor -%}
    {{ return(files) }}
{%- endmacro %}


{% macro cdc_planned_columns(model_name) -%}
    {#- The table's column names as the hooks left it this run, or none (not in the plan): ask Spark. -#}
    {{ return(cdc_run_plan().get(model_name, {}).get('columns')) }}
{%- endmacro %}


{% macro cdc_planned_without_placeholder(model_name) -%}
    {#- True when the hooks read every file of the run's plan for `model_name` and none holds its source's
        placeholder for a value not sent (python_hooks/landing/validation.py: holds_value): a batch of the
        plan's files then skips the fill (unchanged.sql). -#}
    {{ return(cdc_run_plan().get(model_name, {}).get('no_placeholder', false)) }}
{%- endmacro %}


{% macro cdc_planned_fill_one_round(model_name) -%}
    {#- True when the hooks read every file of the run's plan for `model_name` and no delete among them can
        change what the fill finds (python_hooks/landing/validation.py: FillFacts): the batch's fill then
        takes one round (unchanged.sql). -#}
    {{ return(cdc_run_plan().get(model_name, {}).get('fill_one_round', false)) }}
{%- endmacro %}


{% macro cdc_planned_state(model_name) -%}
    {#- The table's state as the hooks read it this run, for every planned table in one query
        (python_hooks/project/iceberg.py: table_states; the same as cdc_table_state, publish.sql), or
        none (not in the plan): ask Spark. -#}
    {{ return(cdc_run_plan().get(model_name, {}).get('state')) }}
{%- endmacro %}


{% macro cdc_planned_raw_columns(staging_model, files) -%}
    {#- The raw columns of a batch (`files`: their paths in the folder) whose files' footers name the same
        columns in the same order, and the same fields in each struct column, as the hooks read them this run
        (names only, in the files' order: what Spark's describe of the files, or of any group of them, gives),
        or none: ask Spark. -#}
    {%- set entry = cdc_planned_raw_entry(staging_model, files) -%}
    {{ return(none if entry is none else cdc_named_columns(entry.raw_columns)) }}
{%- endmacro %}


{% macro cdc_planned_struct_fields(staging_model, files, struct_column) -%}
    {#- The field names of a struct column (a Debezium envelope's `before`, `after`, `source`) of the same
        batch, as cdc_planned_raw_columns, in the form of cdc_landing_columns_of; none: ask Spark. -#}
    {%- set entry = cdc_planned_raw_entry(staging_model, files) -%}
    {%- set names = none if entry is none else (entry.get('raw_fields') or {}).get(struct_column | lower) -%}
    {{ return(none if names is none else cdc_named_columns(names)) }}
{%- endmacro %}


{% macro cdc_planned_raw_entry(staging_model, files) -%}
    {#- The run's plan entry of the batch of `staging_model` that reads exactly `files`, when it holds the
        files' raw columns (python_hooks/commands/run.py); else none. -#}
    {%- for entry in cdc_run_plan().values() if files is not none and entry.get('staging_model') == staging_model
            and entry.get('raw_columns') and entry.files | map(attribute=1) | list == files -%}
        {{ return(entry) }}
    {%- endfor -%}
    {{ return(none) }}
{%- endmacro %}


{% macro cdc_planned_group_columns(staging_model, group_id) -%}
    {#- The raw columns and struct fields of one file group of `staging_model` (its id in cdc_raw_file_groups),
        as Spark merges them from its files, when the hooks registered it this run and could tell them from the
        footers (python_hooks/evolution/apply.py: group_columns), in the forms of cdc_planned_raw_columns and
        cdc_planned_struct_fields; else raw_columns none and raw_fields empty: staging asks Spark. -#}
    {%- for entry in cdc_run_plan().values() if entry.get('staging_model') == staging_model -%}
        {%- set planned = (entry.get('group_columns') or {}).get(group_id | string) -%}
        {%- if planned is not none -%}
            {%- set fields = {} -%}
            {%- for struct_column, names in planned.raw_fields.items() -%}
                {%- do fields.update({struct_column: cdc_named_columns(names)}) -%}
            {%- endfor -%}
            {{ return({'raw_columns': cdc_named_columns(planned.raw_columns), 'raw_fields': fields}) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return({'raw_columns': none, 'raw_fields': {}}) }}
{%- endmacro %}


{% macro cdc_named_columns(names) -%}
    {#- Column names as [{name, data_type: none}], the form of cdc_landing_columns_of without the types. -#}
    {%- set columns = [] -%}
    {%- for name in names -%}
        {%- do columns.append({'name': name, 'data_type': none}) -%}
    {%- endfor -%}
    {{ return(columns) }}
{%- endmacro %}


{% macro cdc_planned_groups(staging_model) -%}
    {#- Whether the hooks registered file groups for `staging_model` this run (true/false), or none
        when the plan does not say: then cdc_raw_file_groups is read. -#}
    {%- for entry in cdc_run_plan().values() if entry.get('staging_model') == staging_model -%}
        {{ return(entry.get('grouped')) }}
    {%- endfor -%}
    {{ return(none) }}
{%- endmacro %}


{% macro cdc_staging_view_unchanged() -%}
    {#- Whether `make run` found this model's staging view as it last built it, from the same raw
        union schema, file groups, registers and project code (CDC_STAGING_UNCHANGED, written by
        python_hooks/evolution/staging_views.py from the fingerprint among the view's properties): its
        SQL is then not rendered (no footer is read) and the view is left as it is (macros/spark/view.sql). -#}
    {{ return(model is defined and model.name in fromjson(env_var('CDC_STAGING_UNCHANGED', '[]'))) }}
{%- endmacro %}


{% macro cdc_staging_view_fingerprint() -%}
    {#- The fingerprint `make run` gave this model's staging view (CDC_STAGING_FINGERPRINTS, written by
        python_hooks/evolution/staging_views.py), or none: the view keeps it among its properties
        (macros/spark/create_view_as.sql), where the next run's hooks read it from their listing. -#}
    {{ return(fromjson(env_var('CDC_STAGING_FINGERPRINTS', '{}')).get(model.name) if model is defined else none) }}
{%- endmacro %}


{% macro cdc_landing_raw_table(staging_model, folder, columns=none) -%}
    {#- A Parquet catalog table over every raw file of the folder, which the staging view reads: the
        files in it and in its subfolders (DMS's <yyyy>/<mm>/<dd>/, the S3 sink's partition=<p>/, no
        partition column), hidden ones (. or _) left out, as python_hooks/landing/files.py lists them.
        Spark merges the files' footers once, here, and keeps the union schema in the catalog: a
        statement that reads the view lists the folder but merges no footer again (a path relation,
        parquet.`folder`, merges every footer each time a statement resolves it: seconds per
        statement for a folder of thousands of files). Built beside the one it replaces and swapped
        in, so the view keeps reading the previous one if this build fails. The session keeps no
        listing of it (spark.sql.filesourceTableRelationCacheSize 0, profiles/profiles.yml): every
        statement sees the files as they are. `columns` ({name, data_type}): the table's, said, where the
        folder's files disagree on a type and no merge can find them (cdc_landing_open_read). -#}
    {%- set name = 'raw__' ~ staging_model ~ '__' ~ local_md5(folder)[:8] -%}
    {%- set raw = cdc_meta_relation(name) -%}
    {%- set next = cdc_meta_relation(name ~ '__next') -%}
    {%- set declared = [] -%}
    {%- for column in columns or [] -%}
        {%- do declared.append(cdc_quote(column.name) ~ ' ' ~ column.data_type) -%}
    {%- endfor -%}
    {%- do cdc_execute('drop table if exists ' ~ next) -%}
    {%- do cdc_execute(
        'create table ' ~ next ~ ((' (' ~ declared | join(', ') ~ ')') if declared else '')
        ~ " using parquet options ('recursiveFileLookup' 'true', 'pathGlobFilter' '*.parquet'"
        ~ (", 'mergeSchema' 'true'" if not declared else '') ~ ') location ' ~ cdc_sql_string(folder)
    ) -%}
    {%- do cdc_execute('drop table if exists ' ~ raw) -%}
    {%- do cdc_execute('alter table ' ~ next ~ ' rename to ' ~ raw) -%}
    {{ return(raw) }}
{%- endmacro %}


{% macro cdc_glob_escape(path) -%}
    {#- A file path as a literal in a Hadoop glob pattern. -#}
    {%- set escaped = namespace(text=path | string) -%}
    {%- for char in ['\\', '{', '}', '[', ']', '*', '?', ','] -%}
        {%- set escaped.text = escaped.text.replace(char, '\\' ~ char) -%}
    {%- endfor -%}
    {{ return(escaped.text) }}
{%- endmacro %}


{% macro cdc_files_relation(folder, paths) -%}
    {#- A Parquet relation over some files of a folder (paths relative to it), in one glob; one file
        whose path holds no glob character is named as it is: a glob lists the whole folder at every
        statement that resolves it (0.3 s for 5,000 files), a plain path reads one file's status. -#}
    {%- set plain = folder ~ '/' ~ paths[0] if paths | length == 1 else none -%}
    {%- if plain is not none and plain == cdc_glob_escape(plain) -%}
        {{ return('parquet.' ~ cdc_quote(plain)) }}
    {%- else -%}
        {%- set escaped = [] -%}
        {%- for path in paths -%}
            {%- do escaped.append(cdc_glob_escape(path)) -%}
        {%- endfor -%}
        {{ return('parquet.' ~ cdc_quote(cdc_glob_escape(folder) ~ '/{' ~ (escaped | join(',')) ~ '}')) }}
    {%- endif -%}
{%- endmacro %}


{% macro cdc_file_name_sql() -%}
    {#- A change event's raw file name (`_cdc_source_file`) as the folder's listing, the hooks and the ledger
        know it: Spark's `_metadata.file_name` is URL-encoded (a space is %20, a % is %25), and url_decode
        reads a '+', which that encoding keeps, as a space: it is escaped first. -#}
    url_decode(replace(_metadata.file_name, '+', '%2B'))
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
        DDL/DML statement fails with "'NoneType' object is not iterable". The project's run_query
        (macros/spark/run_query.sql) guesses that from the statement's first word; this says it. -#}
    {%- do adapter.execute(sql, auto_begin=false, fetch=false) -%}
{%- endmacro %}


{% macro cdc_quote(identifier) -%}
    {#- A Spark identifier quoted for any name: spaces, dots, reserved words, backticks, unicode. -#}
    {{ return('`' ~ (identifier | string).replace('`', '``') ~ '`') }}
{%- endmacro %}


{% macro cdc_landing_reads(staging_model, folder, file_count, files=none) -%}
    {#- What staging reads: one relation over every file (cdc_landing_raw_table), or over `files`
        only (a batch: paths relative to the folder); or, when the Python hooks found raw files that
        disagree on a column's type (cdc_raw_file_groups), one relation per group of files with the
        business column types to cast to (Spark cannot read int and bigint files as one). A group
        without column types lists the files the hooks left out (python_hooks/evolution/apply.py:
        LEFT_OUT_GROUP; applied files changed in place, which the hooks warned about): registered,
        never read. The view reads the open group (OPEN_GROUP: the files at the union's types, which the
        producer's new files join) as the folder less the other groups' files (cdc_landing_open_read), so
        its SQL does not change, nor grow, as files land. -#}
    {%- set registry = cdc_meta_relation('cdc_raw_file_groups') -%}
    {%- set reads = [] -%}
    {%- set covered = [] -%}
    {%- set left_out = [] -%}
    {%- set open = [] -%}
    {%- if cdc_planned_groups(staging_model) is not false and cdc_meta_table_exists('cdc_raw_file_groups') -%}
        {%- set groups = run_query(
            'select to_json(file_names), column_types, group_id from ' ~ registry
            ~ ' where staging_model = ' ~ cdc_sql_string(staging_model) ~ ' order by group_id'
        ) -%}
        {%- for row in groups.rows -%}
            {%- set group_files = fromjson(row[0]) -%}
            {%- if row[1] is none -%}
                {%- do left_out.extend(group_files) -%}
            {%- else -%}
                {%- do covered.extend(group_files) -%}
                {%- set read_files = group_files if files is none else group_files | select('in', files) | list -%}
                {%- set planned = cdc_planned_group_columns(staging_model, row[2]) -%}
                {%- if files is none and row[2] == -2 -%}  {#- OPEN_GROUP (python_hooks/evolution/apply.py) -#}
                    {%- do open.append({'files': group_files, 'types': fromjson(row[1]), 'planned': planned}) -%}
                {%- elif read_files -%}
                    {%- do reads.append({
                        'relation': cdc_files_relation(folder, read_files),
                        'files': read_files | length,
                        'types': fromjson(row[1]),
                        'raw_columns': planned.raw_columns,
                        'raw_fields': planned.raw_fields,
                    }) -%}
                {%- endif -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {%- set open_read = cdc_landing_open_read(staging_model, folder, open[0].files, open[0].types,
        covered | reject('in', open[0].files) | list + left_out, open[0].planned) if open else none -%}
    {%- if open_read is not none -%}
        {%- do reads.append(open_read) -%}
    {%- elif open -%}
        {%- do reads.append({'relation': cdc_files_relation(folder, open[0].files), 'files': open[0].files | length,
            'types': open[0].types, 'raw_columns': open[0].planned.raw_columns,
            'raw_fields': open[0].planned.raw_fields}) -%}
    {%- endif -%}
    {%- if covered or left_out -%}
        {#- A batch's file the hooks left out or did not register is `missing`; the view counts both. -#}
        {%- set missing = [] if files is none else files | reject('in', covered) | list -%}
        {%- set registered = covered | length + left_out | length if files is none
            else file_count - missing | length -%}
        {%- if open_read is not none and registered <= file_count -%}
            {#- The view reads the files that landed since the hooks registered the folder's with the open
                group (a live capture writes during the run). -#}
        {%- elif files is none and registered < file_count -%}
            {#- The staging view, while files keep landing (a live capture): the hooks registered the
                folder's files a moment ago and more came since. The view reads the registered ones; the
                next run's hooks register the others (a batch reads only files the hooks listed). -#}
            {%- do exceptions.warn(
                staging_model ~ ": " ~ (file_count - registered) ~ " raw file(s) landed in " ~ folder
                ~ " since the schema-evolution hooks registered " ~ registered ~ ": the view reads "
                ~ ("those " ~ registered if not left_out else (covered | length) ~ " of those (the hooks left out "
                    ~ left_out | length ~ " applied file(s) changed in place since, and warned about each)")
                ~ "; the next run reads the ones that landed since") -%}
        {%- elif registered != file_count -%}
            {{ exceptions.raise_compiler_error(
                staging_model ~ ": the landing folder " ~ folder ~ " holds " ~ file_count ~ " raw files"
                ~ (" to read" if files is not none else "") ~ " but the last schema-evolution run registered "
                ~ registered ~ " (its files disagree on a column's type and must be read in groups). Run the "
                ~ "hooks first: `python -m python_hooks evolve` (`make run` does).") }}
        {%- endif -%}
    {%- elif files is none -%}
        {%- do reads.append({'relation': cdc_landing_raw_table(staging_model, folder), 'types': none}) -%}
    {%- else -%}
        {%- do reads.append({'relation': cdc_files_relation(folder, files), 'types': none}) -%}
    {%- endif -%}
    {{ return(reads) }}
{%- endmacro %}


{% macro cdc_landing_open_read(staging_model, folder, open_files, types, others, planned) -%}
    {#- The staging view's read of the open group (cdc_landing_reads): the folder's catalog table
        (cdc_landing_raw_table) with the columns Spark reads from the group's files (a struct's fields quoted,
        cdc_ddl_type), the other groups' files left out by the names the hooks list (`where`, on
        cdc_file_name_sql: Spark skips them before opening them). The hooks register an open group only when its
        columns can be declared (evolution/apply.py: readable_as_table); should Spark still find a field name
        that is not a plain identifier, a column of nulls only (void) or two spellings of one name, the group is
        read as a list of files (and the view's fingerprint, which does not name them, keeps it until the next
        schema change: said in a warning). The read's raw columns are the table's, declared here; its struct fields
        those of the run's plan (`planned`: cdc_planned_group_columns). -#}
    {%- set found = cdc_landing_columns_of('select * from ' ~ cdc_files_relation(folder, open_files)) -%}
    {%- set columns = [] -%}
    {%- for column in found -%}
        {%- do columns.append({'name': column.name, 'data_type': cdc_ddl_type(column.data_type)}) -%}
    {%- endfor -%}
    {%- set names = columns | map(attribute='name') | map('lower') | list -%}
    {%- set kinds = found | map(attribute='data_type') | map('lower') | join(' ') -%}
    {%- if none in columns | map(attribute='data_type') | list or 'void' in kinds
            or names | unique | list | length != names | length -%}
        {%- do exceptions.warn(staging_model ~ ": the raw files at the promoted types in " ~ folder ~ " cannot be "
            ~ "read as one table (a struct field name that is not a plain identifier, a column of nulls only or two "
            ~ "spellings of one name): the staging view lists them, and reads the files that land later once the "
            ~ "hooks register a schema change") -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set excluded = [] -%}
    {%- for path in others -%}
        {%- do excluded.append(cdc_sql_string(path.split('/') | last)) -%}
    {%- endfor -%}
    {{ return({
        'relation': cdc_landing_raw_table(staging_model, folder, columns),
        'where': (cdc_file_name_sql() ~ ' not in (' ~ excluded | join(', ') ~ ')') if excluded else none,
        'files': open_files | length,
        'types': types,
        'raw_columns': found,
        'raw_fields': planned.raw_fields,
    }) }}
{%- endmacro %}


{% macro cdc_ddl_type(data_type) -%}
    {#- A type as Spark prints it (`describe`: struct<id:int,tags:array<string>>) as a table's DDL declares it,
        every struct field name quoted (struct<`id`:int,`tags`:array<string>>), as the project quotes every
        identifier it declares (Spark's parser also takes these plain names unquoted, keywords such as Debezium's
        source.schema and source.table included). None when a field name is not a plain identifier (letters,
        digits, underscores): in Spark's print it cannot be told from the type's syntax. -#}
    {%- set quoted = modules.re.sub('([<,])([A-Za-z_][A-Za-z0-9_]*):', '\\1`\\2`:', data_type) -%}
    {{ return(quoted if quoted.count(':') == quoted.count('`:') else none) }}
{%- endmacro %}


{% macro cdc_cast_columns(sql, types, business) -%}
    {#- The staging SQL of one group of files, with its business columns cast to the types of the
        whole table (a column the group lacks is null). `business`: the business columns the SQL selects
        (lower case), as its producer's macro named them. -#}
    {%- if types is none -%}
        {{ return(sql) }}
    {%- endif -%}
    {%- set columns = [] -%}
    {%- set present = business | map('lower') | list -%}
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

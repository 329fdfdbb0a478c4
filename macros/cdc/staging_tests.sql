{#- The data tests of a staging view, in a run that has a plan (`make run`: CDC_RUN_PLAN), check the
    raw files this run applies, not every raw file ever landed.

    A staging view reads every file of its folder, so its tests (the change-event contract: `_cdc_op`
    in I/U/D/T, no null timestamp, sequence or file name; models/staging/*/_*__models.yml) would scan
    the folder's whole history at every run: with a file a minute, a day's 1,440 files made six tests
    of one table take 9.6 s against 2.9 s for 16 files (bench/staging_tests.py, bench/TUNING.md
    "Round 7"), and a scheduled run grew with history; filtered to 5 files, 1.3 s. The files a run applies were checked by no earlier run, and
    those applied before were checked when they were applied: a test reads the view with the plan's
    file names (`_cdc_source_file` is Parquet's `_metadata.file_name`, which Spark uses to skip the
    other files before it opens any), or nothing when the plan has no file for it.

    Everything else reads the whole view, as dbt does: a plain `dbt build` or `dbt test` (an analyst,
    CI), `--full-refresh`, the shared target (no plan), a test of another model, or a folder the plan
    does not hold (a plan too long for its variable keeps some tables only: landing/pending.py). -#}
{% macro spark__get_where_subquery(relation) -%}
    {%- set files = cdc_staging_test_files() if execute else none -%}
    {%- if files is none -%}
        {{ return(dbt.default__get_where_subquery(relation)) }}
    {%- endif -%}
    {%- set where = config.get('where', '') -%}
    {%- set only = ('_cdc_source_file in (' ~ cdc_sql_string_list(files) ~ ')') if files else 'false' -%}
    {%- set filtered -%}
        (select * from {{ relation }} where {{ only }}{{ (' and (' ~ where ~ ')') if where else '' }}) dbt_subquery
    {%- endset -%}
    {{ return(filtered) }}
{%- endmacro %}


{% macro cdc_staging_test_files() -%}
    {#- The names of the raw files this run's plan applies from the folder of the staging model this
        test is on (every current-state model reading that folder), or none: read the whole view. -#}
    {%- if flags.FULL_REFRESH or model.resource_type != 'test' -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set plan = fromjson(env_var('CDC_RUN_PLAN', '{}')) -%}
    {%- set attached = model.get('attached_node') or '' -%}
    {%- if not plan or not attached.startswith('model.') -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set reader = cdc_staging_reader(attached.split('.')[-1]) -%}
    {%- if reader is none -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set folder = cdc_landing_folder(reader.source) -%}
    {%- set names = [] -%}
    {%- set found = [] -%}
    {%- for entry in plan.values() if entry.folder == folder -%}
        {%- do found.append(1) -%}
        {%- for file in entry.files -%}
            {%- do names.append(file[0]) -%}
        {%- endfor -%}
    {%- endfor -%}
    {{ return((names | unique | list) if found else none) }}
{%- endmacro %}

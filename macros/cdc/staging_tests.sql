{#- The data tests of a staging view, in a run that has a plan (`make run`), check the raw files this
    run applies, not every raw file ever landed.

    A staging view reads every file of its folder, so its tests (the change-event contract: `_cdc_op`
    in I/U/D/T, no null timestamp, sequence or file name; models/staging/*/_*__models.yml) would scan
    the folder's whole history at every run: with a file a minute, a day's 1,440 files made six tests
    of one table take 9.6 s against 2.9 s for 16 files (bench/staging_tests.py, bench/TUNING.md
    "Round 7"), and a scheduled run grew with history; filtered to 5 files, 1.3 s. The files a run
    applies were checked by no earlier run, and those applied before were checked when they were
    applied: a test reads the view filtered to the names `make run` hands over in CDC_STAGING_TEST_FILES
    (python_hooks/commands/run.py: per staging model, the plan's file names as SQL literals;
    `_cdc_source_file` is Parquet's `_metadata.file_name`, decoded (landing.sql: cdc_file_name_sql), which
    Spark uses to skip the other files before it opens any).

    Everything else reads the whole view, as dbt does: a plain `dbt build` or `dbt test` (an analyst,
    CI), `--full-refresh`, the shared target (no plan), a test of another model.

    This macro calls no other project macro on purpose: every data test depends on it, and dbt's partial
    parsing fails ("depends on a node named 'customer_snapshot' which was not found") when a macro a
    snapshot's yml tests depend on changes; a call to another file's macro would make every edit of
    that file trip it. -#}
{% macro spark__get_where_subquery(relation) -%}
    {%- set attached = (model.get('attached_node') or '') if execute and model.resource_type == 'test' else '' -%}
    {%- set files = fromjson(env_var('CDC_STAGING_TEST_FILES', '{}')).get(attached.split('.')[-1])
        if attached.startswith('model.') else none -%}
    {%- if files is none -%}
        {{ return(dbt.default__get_where_subquery(relation)) }}
    {%- endif -%}
    {%- set where = config.get('where', '') -%}
    {%- set filtered -%}
        (select * from {{ relation }} where {{ ('_cdc_source_file in (' ~ files ~ ')') if files else 'false' }}
        {{- (' and (' ~ where ~ ')') if where else '' }}) dbt_subquery
    {%- endset -%}
    {{ return(filtered) }}
{%- endmacro %}

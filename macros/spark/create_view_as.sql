{#- Overrides dbt-spark 1.11's spark__create_view_as: drops the view before creating it, and keeps the
    view's metadata out of the folder a table of the same name would use. Works around:
    - apache/iceberg#15490: with SparkSessionCatalog on a Hive metastore, views are Iceberg views and
      `create or replace view` keeps serving the OLD SQL text from the metastore, so a staging view would
      never pick up new raw columns: the view is dropped first.
    - an Iceberg view's metadata lives by default in the table location of its name (<schema>/<name>/
      metadata/), and dropping the view leaves that folder behind, empty: a model switched from a view
      to a non-Iceberg table (no `file_format`, or parquet) then fails with LOCATION_ALREADY_EXISTS,
      which is why dbt-spark skips its own test of this on the session method. The view's metadata goes
      to <schema>/_views/<name>/ instead (its `location` property), where no table ever goes.
    - on the local target, the embedded Derby metastore stores a view's SQL in a LONG VARCHAR column of at most
      32,700 characters: a longer view failed deep in the metastore (Iceberg's CommitStateUnknownException,
      "A truncation error was encountered trying to shrink LONG VARCHAR"). It is refused before, in words.
    - a staging view built by `make run` keeps the fingerprint of what its SQL is made of
      (cdc_staging_view_fingerprint, python_hooks/evolution/staging_views.py), in the same statement.
    Otherwise as upstream (column docs, comment, contract). -#}
{% macro spark__create_view_as(relation, sql) -%}
    {%- if execute and (sql | length) > 32700 and cdc_metastore_is_derby() -%}
        {{ exceptions.raise_compiler_error(
            "view " ~ relation ~ ": its SQL is " ~ (sql | length) ~ " characters, and the local target's "
            ~ "embedded metastore stores at most 32,700 for a view; materialize it as a table (or ephemeral), "
            ~ "or build it on the cluster target") }}
    {%- endif -%}
    {%- if execute -%}
        {%- do cdc_execute('drop view if exists ' ~ relation) -%}
    {%- endif -%}
    create view {{ relation }}
    {% if config.persist_column_docs() -%}
        (
        {{ get_persist_docs_column_list(model.columns, get_columns_in_query(sql)) }}
        )
    {% endif %}
    {{ comment_clause() }}
    {%- set contract_config = config.get('contract') -%}
    {%- if contract_config.enforced -%}
        {{ get_assert_columns_equivalent(sql) }}
    {%- endif %}
    {%- if execute %}
    {%- set fingerprint = cdc_staging_view_fingerprint() %}
    tblproperties ('location' = '{{ cdc_view_metadata_location(relation) }}'
        {%- if fingerprint %}, 'cdc_fingerprint' = {{ cdc_sql_string(fingerprint) }}{% endif %})
    {%- endif %}
    as
        {{ sql }}
{%- endmacro %}


{% macro cdc_view_metadata_location(relation) -%}
    {#- Where a view's Iceberg metadata is written: <schema location>/_views/<name>. -#}
    {%- set found = namespace(location=none) -%}
    {%- for row in run_query('describe schema extended ' ~ adapter.quote(relation.schema)).rows -%}
        {%- if row[0] | lower == 'location' -%}
            {%- set found.location = row[1] -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if found.location is none -%}
        {{ exceptions.raise_compiler_error('no location for schema ' ~ relation.schema ~ ': cannot place view ' ~ relation) }}
    {%- endif -%}
    {{ found.location.rstrip('/') }}/_views/{{ relation.identifier }}
{%- endmacro %}


{% macro cdc_metastore_is_derby() -%}
    {#- True on the local target: its metastore is embedded Derby, whose JDBC driver its profile names
        (profiles/profiles.yml; Spark redacts the connection URL). -#}
    {%- set rows = run_query('set spark.hadoop.javax.jdo.option.ConnectionDriverName').rows -%}
    {{ return((rows | length) > 0 and 'derby' in (rows[0][1] | string | lower)) }}
{%- endmacro %}

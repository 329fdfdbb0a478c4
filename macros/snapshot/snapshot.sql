{#- Overrides dbt-spark 1.11's snapshot materialization so that snapshots on Iceberg work run after run.
    Works around dbt-labs/dbt-adapters#489 (open): with Iceberg's SparkSessionCatalog on a Hive metastore,
    `show table extended` (dbt-spark's relation cache) reports an Iceberg table as `Provider: hive`, so the
    second run fails with "The existing table ... is in another format than 'delta' or 'iceberg' or 'hudi'".
    Differences from upstream, nothing else:
      1. an existing table is Iceberg when its listing holds Iceberg's `table_type=ICEBERG` property
         (`cdc_is_iceberg_listed`), else its format is read from `describe table extended` (its `Provider` row);
      2. the staging relation is a cached session temporary view: never an Iceberg view in the
         metastore (see apache/iceberg#15490), never left behind in the `default` schema, and its
         query (the snapshot's source, the snapshot's current rows) runs once, not once per use;
      3. when the staging relation holds no change, no MERGE runs: an Iceberg MERGE commits a snapshot
         even when it changes nothing, and a rerun with no new data must leave the table as it was;
      4. with a list `unique_key`, the staging relation's dbt_unique_key_1..N columns stay out of the
         snapshot, as in dbt's default materialization (dbt-labs/dbt-adapters#2101);
      5. a column whose type the source widened as Iceberg allows (a current-state table's int promoted
         to bigint by the hooks) is widened in the snapshot too (`snapshot_promote_columns`): dbt-spark's
         expand_target_column_types widens nothing but strings, and the MERGE would cast a value above
         2^31 back to int and fail. Any other type difference is left as dbt-spark leaves it. -#}

{% materialization snapshot, adapter='spark' %}

  {%- set target_table = model.get('alias', model.get('name')) -%}

  {%- set strategy_name = config.get('strategy') -%}
  {%- set unique_key = config.get('unique_key') %}
  {%- set file_format = config.get('file_format') or 'parquet' -%}
  {%- set grant_config = config.get('grants') -%}

  {% set target_relation_exists, target_relation = get_or_create_relation(
          database=none,
          schema=model.schema,
          identifier=target_table,
          type='table') -%}

  {%- if file_format not in ['delta', 'iceberg', 'hudi'] -%}
    {% set invalid_format_msg -%}
      Invalid file format: {{ file_format }}
      Snapshot functionality requires file_format be set to 'delta' or 'iceberg' or 'hudi'
    {%- endset %}
    {% do exceptions.raise_compiler_error(invalid_format_msg) %}
  {% endif %}

  {%- if target_relation_exists -%}
    {%- set target_relation = snapshot_relation_with_table_format(target_relation) -%}
    {%- if not target_relation.is_delta and not target_relation.is_iceberg and not target_relation.is_hudi -%}
      {% set invalid_format_msg -%}
        The existing table {{ model.schema }}.{{ target_table }} is in another format than 'delta' or 'iceberg' or 'hudi'
      {%- endset %}
      {% do exceptions.raise_compiler_error(invalid_format_msg) %}
    {% endif %}
  {% endif %}

  {% if not adapter.check_schema_exists(model.database, model.schema) %}
    {% do create_schema(model.schema) %}
  {% endif %}

  {%- if not target_relation.is_table -%}
    {% do exceptions.relation_wrong_type(target_relation, 'table') %}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}

  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {% set strategy_macro = strategy_dispatch(strategy_name) %}
  {% set strategy = strategy_macro(model, "snapshotted_data", "source_data", model['config'], target_relation_exists) %}

  {% if not target_relation_exists %}

      {% set build_sql = build_snapshot_table(strategy, model['compiled_code']) %}
      {% set final_sql = create_table_as(False, target_relation, build_sql) %}

  {% else %}

      {% set columns = config.get("snapshot_table_column_names") or get_snapshot_table_column_names() %}

      {{ adapter.valid_snapshot_target(target_relation, columns) }}

      {% set staging_table = snapshot_build_staging_view(strategy, sql, target_relation) %}

      -- this may no-op if the database does not require column expansion
      {% do adapter.expand_target_column_types(from_relation=staging_table,
                                               to_relation=target_relation) %}
      {% do snapshot_promote_columns(staging_table, target_relation) %}

      {#- The staging relation's own columns, never copied to the snapshot: with a list `unique_key`
          also dbt_unique_key_1..N (dbt-labs/dbt-adapters#2101: dbt-spark rejects only dbt_unique_key,
          so the snapshot gained one stray column per key part; dbt's default materialization does this). -#}
      {% set remove_columns = ['dbt_change_type', 'DBT_CHANGE_TYPE', 'dbt_unique_key', 'DBT_UNIQUE_KEY'] %}
      {% if unique_key is iterable and unique_key is not string %}
          {% for key in unique_key %}
              {% do remove_columns.append('dbt_unique_key_' ~ loop.index) %}
              {% do remove_columns.append('DBT_UNIQUE_KEY_' ~ loop.index) %}
          {% endfor %}
      {% endif %}

      {% set missing_columns = adapter.get_missing_columns(staging_table, target_relation)
                                   | rejectattr('name', 'in', remove_columns)
                                   | list %}

      {% do create_columns(target_relation, missing_columns) %}

      {% set source_columns = adapter.get_columns_in_relation(staging_table)
                                   | rejectattr('name', 'in', remove_columns)
                                   | list %}

      {% set quoted_source_columns = [] %}
      {% for column in source_columns %}
        {% do quoted_source_columns.append(adapter.quote(column.name)) %}
      {% endfor %}

      {% set pending = run_query('select count(*) from ' ~ staging_table).columns[0].values()[0] %}
      {% if pending == 0 %}
        {% set final_sql = "select 'no change to snapshot' as snapshot_result" %}
      {% else %}
        {% set final_sql = snapshot_merge_sql(
              target = target_relation,
              source = staging_table,
              insert_cols = quoted_source_columns
           )
        %}
      {% endif %}

  {% endif %}

  {% do cdc_fault_point('during_snapshot') %}
  {% call statement('main') %}
      {{ final_sql }}
  {% endcall %}

  {% set should_revoke = should_revoke(target_relation_exists, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}

  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks, inside_transaction=True) }}

  {{ adapter.commit() }}

  {% if staging_table is defined %}
      {% do post_snapshot(staging_table) %}
  {% endif %}

  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}

{% endmaterialization %}


{% macro snapshot_relation_with_table_format(relation) %}
    {#- The relation with is_iceberg / is_delta / is_hudi set: Iceberg from dbt's listing when it says so
        (`cdc_is_iceberg_listed`, macros/spark/table.sql: no statement), else from the table's own metadata. -#}
    {%- if cdc_is_iceberg_listed(relation) -%}
        {{ return(relation.incorporate(is_iceberg=true)) }}
    {%- endif -%}
    {#- A namespace: a plain `set` inside the loop would be forgotten after it (Jinja's loop scope). -#}
    {%- set found = namespace(provider=none) -%}
    {%- for row in run_query('describe table extended ' ~ relation).rows -%}
        {%- if row[0] == 'Provider' -%}
            {%- set found.provider = (row[1] or '') | lower -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(relation.incorporate(
        is_iceberg=relation.is_iceberg or found.provider == 'iceberg',
        is_delta=relation.is_delta or found.provider == 'delta',
        is_hudi=relation.is_hudi or found.provider == 'hudi',
    )) }}
{% endmacro %}


{% macro snapshot_build_staging_view(strategy, sql, target_relation) %}
    {#- The snapshot's changes (dbt's snapshot_staging_table), computed once into a cached session
        temporary view; post_snapshot drops it (which uncaches it). -#}
    {%- set staging_view = api.Relation.create(
        identifier=target_relation.identifier ~ '__dbt_tmp', type='view'
    ).include(database=false, schema=false) -%}
    {% call statement('build_snapshot_staging_relation') %}
        drop view if exists {{ staging_view }}
    {% endcall %}
    {% call statement('build_snapshot_staging_relation') %}
        cache table {{ staging_view }} as
        {{ snapshot_staging_table(strategy, sql, target_relation) }}
    {% endcall %}
    {{ return(staging_view) }}
{% endmacro %}


{% macro snapshot_promote_columns(from_relation, to_relation) %}
    {#- Each column of to_relation (the snapshot) whose type the staging relation (the snapshot's rows
        and the source's) widened in a way Iceberg allows (`cdc_iceberg_widens`: int -> bigint,
        float -> double, a decimal's precision raised) is altered to it. Any other difference is left
        as dbt-spark leaves it: the MERGE assigns the value to the snapshot's type (a date column
        taking dbt's timestamp `dbt_updated_at`, say), and the snapshot keeps working. -#}
    {%- set snapshot_types = {} -%}
    {%- for column in adapter.get_columns_in_relation(to_relation) -%}
        {%- do snapshot_types.update({column.name | lower: column.data_type | lower}) -%}
    {%- endfor -%}
    {%- for column in adapter.get_columns_in_relation(from_relation) -%}
        {%- set old_type = snapshot_types.get(column.name | lower) -%}
        {%- set new_type = column.data_type | lower -%}
        {%- if old_type and old_type != new_type and cdc_iceberg_widens(old_type, new_type) -%}
            {%- do log('cdc: ' ~ to_relation ~ '.' ~ column.name ~ ' widened: ' ~ old_type ~ ' -> ' ~ new_type, info=true) -%}
            {%- do cdc_execute('alter table ' ~ to_relation ~ ' alter column ' ~ adapter.quote(column.name) ~ ' type ' ~ new_type) -%}
        {%- elif old_type and old_type != new_type -%}
            {%- do log('cdc: ' ~ to_relation ~ '.' ~ column.name ~ ' kept as ' ~ old_type ~ ' (the source has ' ~ new_type ~ ', not a widening Iceberg allows)') -%}
        {%- endif -%}
    {%- endfor -%}
{% endmacro %}

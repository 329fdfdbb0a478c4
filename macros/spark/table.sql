{#- Overrides dbt-spark 1.11's table materialization so that an Iceberg table model is replaced, not dropped and
    created again. Upstream replaces a Delta or Iceberg table in one statement (`create or replace table ... as`)
    "so we don't have the table unavailable", and drops any other first; it knows an Iceberg table from
    `show table extended`'s `Provider: iceberg`, which Iceberg's SparkSessionCatalog on a Hive metastore does not
    print (`Provider: hive`, dbt-labs/dbt-adapters#489; macros/snapshot/snapshot.sql works around the same). So
    every run dropped the project's table models (`purge`: their files deleted) and made them again: for the
    seconds between, an analyst's query or a snapshot reading one failed on a missing table. The differences from
    upstream: an existing table is Iceberg when its listing says `Provider: iceberg` or holds Iceberg's
    `table_type=ICEBERG` property (`cdc_is_iceberg_listed`, no statement), and the replaced versions are expired
    (`cdc_replaced_versions_due`), their files deleted, as the drop's `purge` deleted them: a table model is rebuilt
    whole at every run, and a copy per run would pile up until `make maintain`. -#}
{% materialization table, adapter = 'spark', supported_languages=['sql', 'python'] %}
  {%- set language = model['language'] -%}
  {%- set identifier = model['alias'] -%}
  {%- set grant_config = config.get('grants') -%}

  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=identifier) -%}
  {%- set target_relation = api.Relation.create(identifier=identifier,
                                                schema=schema,
                                                database=database,
                                                type='table') -%}

  {{ run_hooks(pre_hooks) }}

  {% if old_relation is not none %}
    {% set file_format = config.get('file_format', validator=validation.any[basestring]) %}
    {% set is_delta = (old_relation.is_delta and file_format == 'delta') %}
    {% set is_iceberg = (cdc_is_iceberg_listed(old_relation) and file_format == 'iceberg') %}
    {% set old_relation_type = old_relation.type %}
  {% else %}
    {% set is_delta = false %}
    {% set is_iceberg = false %}
    {% set old_relation_type = target_relation.type %}
  {% endif %}

  {% if not is_delta and not is_iceberg %}
    {% set existing_relation = target_relation %}
    {{ adapter.drop_relation(existing_relation.incorporate(type=old_relation_type)) }}
  {% endif %}

  {%- call statement('main', language=language) -%}
    {{ create_table_as(False, target_relation, compiled_code, language) }}
  {%- endcall -%}

  {% if is_iceberg and cdc_replaced_versions_due(old_relation) %}
    {% set now = modules.datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M:%S.%f') ~ '+00:00' %}
    {% do cdc_execute("call spark_catalog.system.expire_snapshots(table => " ~ cdc_sql_string(target_relation | string)
        ~ ", older_than => timestamp " ~ cdc_sql_string(now) ~ ", retain_last => 1)") %}
  {% endif %}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}

  {% do persist_docs(target_relation, model) %}

  {% do persist_constraints(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]})}}

{% endmaterialization %}


{% macro cdc_is_iceberg_listed(relation) -%}
    {#- Whether a relation of dbt's cache (a `show table extended` row) is an Iceberg table: `Provider: iceberg`,
        or, from Iceberg's SparkSessionCatalog on a Hive metastore (`Provider: hive`), its `table_type=ICEBERG`
        property. A view is not. -#}
    {{ return(relation.type == 'table' and (relation.is_iceberg
        or 'table_type=ICEBERG' in (relation.information or ''))) }}
{%- endmacro %}


{% macro cdc_replaced_versions_due(relation) -%}
    {#- Pure: whether the build of an Iceberg table model that replaced `relation` (a row of dbt's relation cache,
        listed before the build) expires the versions it replaced. A table model keeps the version before its
        last build (one step of time travel, an analyst's comparison with the last run) and no older one: the
        replaced versions go, their files with them, at every other build, when the listing counted two
        snapshots or more before it (Iceberg's Hive catalog keeps `snapshot-count` among the table's
        properties at each commit, python_hooks/project/warehouse.py: relation_information). Not listed (a
        catalog that does not say): at every build. `expire_snapshots` costs about as much as the small
        table's build itself (bench/TUNING.md, round 42). The properties are sorted by key: `current-schema`,
        whose JSON may hold any text, comes before `snapshot-count`, so the last match is the property (a listing
        without the property whose column names hold `snapshot-count=1,` would read it from them: `make run`'s
        listing holds no column name). -#}
    {%- set line = (relation.information or '').split('Table Properties:') | last -%}
    {%- set found = modules.re.findall('[\\[,\\s]snapshot-count=([0-9]+)[,\\]]', line.split('\n') | first) -%}
    {{ return(not found or (found | last | int) >= 2) }}
{%- endmacro %}

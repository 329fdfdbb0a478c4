{#- Compaction of the current-state tables: merge-on-read's upkeep.

    A merge-on-read MERGE writes the changed rows to new data files and marks the old rows deleted
    in position-delete files; every read then applies those deletes. As batches add up, reads pay
    for more and more of them, so after a batch the table is compacted once the deleted rows pass
    a fraction of the table and a count, or the delete files a count (model config `cdc_compaction`,
    dbt_project.yml):

        +cdc_compaction:
          deleted_rows_fraction: 0.10   # position-deleted rows / data rows
          min_deleted_rows: 10000       # and at least this many (CDC_COMPACTION_MIN_DELETED_ROWS)
          delete_files: 100             # delete files behind the current snapshot
          meta_files: 50                # this model's files in cdc_tombstones / cdc_file_ledger / cdc_batch_log
          # enabled: false              # e.g. when an external maintenance job compacts

    `min_deleted_rows`: a read applies a few thousand position deletes in no time, so a small table
    is not compacted for its share of deleted rows (it was two commits and a job every few batches
    for the demo's tables, which read no faster after it); its delete files still count, and
    `make maintain` compacts every table that has any.

    Compaction rewrites the data files that have deletes (`rewrite_data_files`, which with
    random keys is most of the table: the cost of a copy-on-write batch, paid once every few
    batches instead of at every batch) and, in the same call, drops the delete files that no
    longer point at a live row (two Iceberg commits of the same rows: a failure leaves the table
    correct, only not compacted). The pipeline's own tables get one
    small file per batch each (a model's tombstones, ledger and batch log rows): once
    a model has `meta_files` of them, they are bin-packed into one. Snapshots are not expired here,
    after a batch: `make maintain` (python_hooks/commands/maintain.py) does that, with manifest rewrite and
    orphan-file removal, by each model's `cdc_retention`, and runs `cdc_compact_current_state`. -#}

{% macro cdc_compaction_settings() -%}
    {%- set defaults = {'enabled': true, 'deleted_rows_fraction': 0.10, 'delete_files': 100, 'meta_files': 50,
        'min_deleted_rows': env_var('CDC_COMPACTION_MIN_DELETED_ROWS', '10000') | int} -%}
    {%- set settings = config.get('cdc_compaction') or {} -%}
    {%- set merged = {} -%}
    {%- do merged.update(defaults) -%}
    {%- do merged.update(settings) -%}
    {{ return(merged) }}
{%- endmacro %}


{% macro cdc_delete_layout(target) -%}
    {#- Data rows, position-deleted rows and delete files behind the table's current snapshot
        (Iceberg's `files` metadata table: manifests only, no data file is read). -#}
    {%- set row = run_query('select ' ~ (cdc_delete_layout_sql(target) | join(', '))).rows[0] -%}
    {{ return(cdc_delete_layout_of(row)) }}
{%- endmacro %}


{% macro cdc_delete_layout_sql(target) -%}
    {%- set parts = [] -%}
    {%- for aggregate in [
            'coalesce(sum(case when content = 0 then record_count end), 0)',
            'coalesce(sum(case when content = 1 then record_count end), 0)',
            'count_if(content <> 0)'] -%}
        {%- do parts.append('(select ' ~ aggregate ~ ' from ' ~ target ~ '.files)') -%}
    {%- endfor -%}
    {{ return(parts) }}
{%- endmacro %}


{% macro cdc_delete_layout_of(row) -%}
    {{ return({'data_rows': row[0] | int, 'deleted_rows': row[1] | int, 'delete_files': row[2] | int}) }}
{%- endmacro %}


{% macro cdc_upkeep_after_batch(target, settings, layout=none) %}
    {#- After a batch: whatever compaction is due (cdc_compact, cdc_compact_meta). `layout`: the
        table's delete layout after the batch, when the batch knows it (merge.sql: its table's summary
        totals before it, plus the rows its MERGE changes); else it is read, with the model's files in
        the meta tables, in one query. In `make run` the meta tables are compacted once per run
        instead (python_hooks/commands/accounting.py: compact_meta), like their accounting. -#}
    {%- if settings.enabled -%}
        {%- set meta = not cdc_accounting_deferred() -%}
        {%- set parts = ([] if layout is not none else cdc_delete_layout_sql(target))
            + (cdc_meta_file_counts_sql(target.identifier) if meta else []) -%}
        {%- set row = run_query('select ' ~ (parts | join(', '))).rows[0] if parts else [] -%}
        {%- if layout is none -%}
            {%- set layout = cdc_delete_layout_of(row) -%}
            {%- set row = row[3:] -%}
        {%- endif -%}
        {%- do cdc_compact(target, settings, layout=layout) -%}
        {%- if meta -%}
            {%- do cdc_compact_meta(target.identifier, settings, files=row) -%}
        {%- endif -%}
    {%- endif -%}
{% endmacro %}


{% macro cdc_compaction_due(layout, settings) -%}
    {#- Pure: whether a table with this delete layout must be compacted. -#}
    {%- if not settings.enabled or layout.delete_files == 0 -%}
        {{ return(false) }}
    {%- endif -%}
    {{ return(
        layout.delete_files >= settings.delete_files
        or layout.deleted_rows >= [settings.deleted_rows_fraction * [layout.data_rows, 1] | max,
                                   settings.min_deleted_rows | int] | max
    ) }}
{%- endmacro %}


{% macro cdc_compact(target, settings=none, layout=none) %}
    {#- Compacts `target` when due by `settings` (cdc_compaction_settings()), or whenever it has
        delete files if settings is none; returns the layout it found (or was given). -#}
    {%- set layout = layout if layout is not none else cdc_delete_layout(target) -%}
    {%- set due = layout.delete_files > 0 if settings is none else cdc_compaction_due(layout, settings) -%}
    {%- if due -%}
        {%- set name = cdc_sql_string(target.schema ~ '.' ~ target.identifier) -%}
        {{ log('cdc compaction of ' ~ target ~ ': ' ~ layout.deleted_rows ~ ' deleted rows of ' ~ layout.data_rows
            ~ ' in ' ~ layout.delete_files ~ ' delete file(s)', info=true) }}
        {%- do cdc_fault_point('during_compaction', target) -%}
        {#- One call, one job: every data file with a delete is rewritten, and the delete files that
            then point at no live data file are dropped in the same call (`remove-dangling-deletes`;
            the tables write one delete file per data file, `write.delete.granularity: file` in
            dbt_project.yml, so each delete file dangles once its data file is rewritten). -#}
        {%- do cdc_execute(
            'call spark_catalog.system.rewrite_data_files(table => ' ~ name
            ~ ", options => map('delete-file-threshold', '1', 'remove-dangling-deletes', 'true'))"
        ) -%}
    {%- endif -%}
    {{ return(layout) }}
{% endmacro %}


{% macro cdc_compact_current_state(select=none) %}
    {#- `dbt run-operation cdc_compact_current_state [--args '{select: [model, ...]}']`: compacts
        every current-state table (or the selected ones) that has delete files, due or not. -#}
    {%- for node in graph.nodes.values()
        if node.resource_type == 'model' and node.config.get('materialized') == 'cdc_current_state'
        and (select is none or node.name in select) -%}
        {%- set relation = adapter.get_relation(database=none, schema=node.schema, identifier=node.alias) -%}
        {%- if relation is not none -%}
            {%- do cdc_compact(relation) -%}
        {%- endif -%}
    {%- endfor -%}
{% endmacro %}


{% macro cdc_meta_tables_compacted() -%}
    {{ return(['cdc_tombstones', 'cdc_file_ledger', 'cdc_batch_log']) }}
{%- endmacro %}


{% macro cdc_meta_file_counts_sql(model_name) -%}
    {#- The files of one model's partition of each of cdc_meta_tables_compacted(), as scalar subqueries. -#}
    {%- set counts = [] -%}
    {%- for identifier in cdc_meta_tables_compacted() -%}
        {%- do counts.append(
            '(select count(*) from ' ~ cdc_meta_relation(identifier) ~ '.files where partition.model_name = '
            ~ cdc_sql_string(model_name) ~ ')'
        ) -%}
    {%- endfor -%}
    {{ return(counts) }}
{%- endmacro %}


{% macro cdc_compact_meta(model_name, settings, files=none) %}
    {#- Bin-packs one model's partition of cdc_tombstones, cdc_file_ledger and cdc_batch_log once it
        holds `meta_files` files (one per batch that wrote to it); `files`: their counts, when known. -#}
    {%- if settings.enabled -%}
        {%- set tables = cdc_meta_tables_compacted() -%}
        {%- if files is none -%}
            {%- set files = run_query('select ' ~ (cdc_meta_file_counts_sql(model_name) | join(', '))).rows[0] -%}
        {%- endif -%}
        {%- for identifier in tables -%}
            {%- set relation = cdc_meta_relation(identifier) -%}
            {%- if files[loop.index0] >= settings.meta_files -%}
            {%- do cdc_execute(
                'call spark_catalog.system.rewrite_data_files(table => '
                ~ cdc_sql_string(relation.schema ~ '.' ~ relation.identifier)
                ~ ', where => ' ~ cdc_sql_string('model_name = ' ~ cdc_sql_string(model_name))
                ~ ", options => map('min-input-files', '2'))"
            ) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{% endmacro %}

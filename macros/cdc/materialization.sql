{#- The `cdc_current_state` materialization: owns a current-state model's whole batch, from pinning
    its raw files to the ledger (docs/ARCHITECTURE.md, "A batch"). The model's SQL is only what it
    means (the staging model's events, for docs and compile); nothing runs while a model renders,
    and there is no post-hook.

      1. pin     the raw files not in the ledger (the run's plan, or the folder's listing minus the
                 ledger: cdc_stage_batch), read through the staging model's SQL over those files;
      2. build   first build / --full-refresh / a view in the way: the table is created empty from
                 the batch's columns, and the whole batch goes in through the same rules
                 (cdc_apply_batch, into_empty); otherwise new columns of the batch are added
                 (on_schema_change) and the batch is merged (cdc_apply_batch);
      3. record  the batch's row in the batch log, then its files in the ledger (the statement
                 dbt reports as the model's `main`), then the batch views are dropped and the
                 table compacted when its delete files call for it (maintenance.sql). -#}

{% materialization cdc_current_state, adapter='spark' %}
    {%- set target = this.incorporate(type='table') -%}
    {%- set existing = load_relation(this) -%}
    {%- set unique_key = config.get('unique_key') -%}
    {%- set staging_model = config.get('cdc_staging_model') -%}
    {%- set full_build = existing is none or existing.is_view or should_full_refresh() -%}
    {%- set grant_config = config.get('grants') -%}

    {{ run_hooks(pre_hooks) }}
    {%- if full_build and load_relation(ref(staging_model)) is none -%}
        {#- A first build reads the staging view: without it, Spark's error would name no model. -#}
        {{ exceptions.raise_compiler_error("cdc_current_state: " ~ target ~ " is built from its staging model "
            ~ staging_model ~ ", which is not in the warehouse yet: select it too (--select +" ~ model.name
            ~ ", or --select " ~ staging_model ~ " " ~ model.name ~ "). Nothing was written.") }}
    {%- endif -%}

    {%- set batch = cdc_stage_batch(target, staging_model, ref(staging_model), full_build,
        cdc_key_columns(unique_key, target)) -%}
    {%- do cdc_fault_point('after_pin') -%}
    {%- set model_name = cdc_sql_string(target.identifier) -%}

    {%- if full_build -%}
        {%- if existing is not none -%}
            {%- do adapter.drop_relation(existing) -%}
        {%- endif -%}
        {%- call statement('main') -%}
            {{ create_table_as(False, target, 'select *, ' ~ cdc_run_timestamp() ~ ' as _cdc_applied_at from '
                ~ batch.events ~ ' as events where false') }}
        {%- endcall -%}
        {%- do persist_constraints(target, model) -%}
        {%- if batch.files -%}
            {#- The table was created empty in this run: the model's ledger and tombstones start again,
                now, or in `make run` when the run records the batch (`record.reset`: a node writes only
                its own table; the batch reads no tombstone, cdc_apply_batch). -#}
            {%- if cdc_accounting_deferred() -%}
                {%- do batch.record.update({'reset': true}) -%}
            {%- else -%}
                {%- do cdc_execute('delete from ' ~ cdc_meta_relation('cdc_file_ledger') ~ ' where model_name = ' ~ model_name) -%}
                {%- do cdc_execute('delete from ' ~ cdc_meta_relation('cdc_tombstones') ~ ' where model_name = ' ~ model_name) -%}
            {%- endif -%}
            {%- do cdc_apply_batch(target, batch.events, unique_key, batch.record, into_empty=true,
                source_columns=batch.columns) -%}
        {%- endif -%}
    {%- elif batch.files -%}
        {#- The table's columns as the hooks left them (`make run`'s plan), else asked. -#}
        {%- set target_columns = cdc_planned_columns(target.identifier) or cdc_column_names(target) -%}
        {%- set known = target_columns | map('lower') | list -%}
        {%- if batch.columns | map('lower') | reject('in', known) | list -%}
            {#- Columns the hooks did not add (a plain `dbt run`): as the model's on_schema_change says,
                which reads them from a relation (the only batch view made for it). -#}
            {%- do cdc_execute('create or replace temporary view ' ~ batch.events_view ~ ' as select * from '
                ~ batch.events ~ ' as events') -%}
            {%- do batch.record.views.append('events') -%}
            {%- do process_schema_changes(config.get('on_schema_change', 'append_new_columns'), batch.events_view, existing) -%}
            {%- set target_columns = cdc_column_names(target) -%}
        {%- endif -%}
        {%- do cdc_apply_batch(target, batch.events, unique_key, batch.record,
            target_columns=target_columns, source_columns=batch.columns, unchanged=batch.unchanged) -%}
    {%- endif -%}

    {%- if batch.files -%}
        {#- The batch log's row, after the table's commit and before the ledger's (batch_log.sql:
            cdc_account, now or once per run). -#}
        {#- (The ledger's rows first: their time is not after the batch log's end.) -#}
        {%- set ledger_rows = cdc_ledger_rows(target, batch.record, batch.counted) -%}
        {%- do cdc_account(target, cdc_batch_log_row(target, batch.record), ledger_rows,
            tombstones=batch.record.tombstones, tombstone_rows=batch.record.tombstone_rows,
            reset=batch.record.get('reset', false),
            ledger_files=batch.record.file_counts | map('first') | list,
            run_table_row=cdc_run_table_row(batch.record)) -%}
        {%- if cdc_accounting_deferred() and not full_build -%}
            {%- do store_result('main', response='applied; recorded at the end of the run') -%}
        {%- endif -%}
    {%- elif not full_build -%}
        {#- Nothing new: no commit, no statement; dbt reports the model as done. -#}
        {%- do store_result('main', response='nothing new') -%}
    {%- endif -%}
    {%- do cdc_drop_batch_views(target, views=batch.record.views) -%}
    {%- if batch.files and not full_build -%}
        {%- do cdc_upkeep_after_batch(target, cdc_compaction_settings(), layout=batch.record.get('layout')) -%}  {#- maintenance.sql -#}
    {%- endif -%}

    {%- do apply_grants(target, grant_config, should_revoke(existing, full_refresh_mode=full_build)) -%}
    {%- do persist_docs(target, model) -%}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [target]}) }}
{% endmaterialization %}

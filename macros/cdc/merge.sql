{#- The `cdc_merge` incremental strategy: applies a batch of change events to a current-state
    Iceberg table in one MERGE INTO. Rules, enforced here and nowhere else:
      - the last change per key wins, ordered by (_cdc_ts, _cdc_seq);
      - a change applies only if it is newer than the row it would touch: the row keeps the
        _cdc_ts/_cdc_seq that produced it, so late, older updates and deletes are ignored, and a
        re-delivered change (equal, not newer) changes nothing;
      - I/U upsert, D deletes; a delete leaves a tombstone (cdc_tombstones) so that a late older
        change cannot re-insert a deleted key;
      - T (a Debezium truncate, no key) deletes every row older than it and leaves a table-wide
        tombstone (key_json '*'), so older changes that arrive later are ignored too;
      - a re-delivered event with the same commit time and the same content as the row is the
        same event: it changes nothing, even when its position differs (flattened Debezium);
        only changes that change something reach the MERGE, and none means no commit;
      - a batch with a null key, timestamp, sequence or an unknown operation is refused whole,
        before anything is written, with the file and the column named. -#}

{% macro get_incremental_cdc_merge_sql(arg_dict) %}
    {{ return(cdc_merge_batch_sql(arg_dict['target_relation'], arg_dict['temp_relation'], arg_dict['unique_key'])) }}
{% endmacro %}


{% macro cdc_key_columns(unique_key, target) -%}
    {%- if unique_key is none or unique_key | length == 0 -%}
        {{ exceptions.raise_compiler_error("cdc_merge on " ~ target ~ " needs unique_key (the source's primary key columns)") }}
    {%- endif -%}
    {{ return([unique_key] if unique_key is string else unique_key | list) }}
{%- endmacro %}


{% macro cdc_column_names(relation) -%}
    {{ return(cdc_landing_columns_of('select * from ' ~ relation) | map(attribute='name') | list) }}
{%- endmacro %}


{% macro cdc_is_newer(new, old) -%}
    ({{ old }}._cdc_ts is null
        or {{ new }}._cdc_ts > {{ old }}._cdc_ts
        or ({{ new }}._cdc_ts = {{ old }}._cdc_ts and {{ new }}._cdc_seq > {{ old }}._cdc_seq))
{%- endmacro %}


{% macro cdc_merge_batch_sql(target, events, unique_key) %}
    {%- set keys = cdc_key_columns(unique_key, target) -%}
    {%- set batch_events = cdc_batch_view(target, 'batch_events') -%}
    {%- set changes = cdc_batch_view(target, 'changes') -%}
    {%- set effective = cdc_batch_view(target, 'effective') -%}
    {%- set tombstone_table = cdc_meta_relation('cdc_tombstones') -%}
    {%- set model_name = cdc_sql_string(target.identifier) -%}
    {%- set noop = "select 'no change to apply' as cdc_merge" -%}

    {#- 0. No new file: no commit at all, so a rerun leaves every snapshot as it was. -#}
    {%- set pending = run_query(
        'select count(*) from ' ~ cdc_batch_view(target, 'batch_files') ~ ' where file_name is not null'
    ).columns[0].values()[0] -%}
    {%- if pending == 0 -%}
        {{ return(noop) }}
    {%- endif -%}

    {#- 1. Read the pinned batch once. -#}
    {%- do run_query('cache table ' ~ batch_events ~ ' as select * from ' ~ events) -%}

    {#- 2. Refuse bad input before writing anything. -#}
    {%- do cdc_validate_batch(target, batch_events, keys) -%}

    {#- 3. Last change per key, minus changes older than the key's tombstone or a truncate. -#}
    {%- set tombstones = '(select * from ' ~ tombstone_table ~ ' where model_name = ' ~ model_name ~ ')' -%}
    {%- set changes_sql = cdc_batch_changes_sql(batch_events, tombstones, keys) -%}
    {%- do run_query('cache table ' ~ changes ~ ' as ' ~ changes_sql) -%}

    {#- 4. Tombstones before the target: if the MERGE then fails, a rerun re-applies the same
           deletes (equal is not newer for the tombstone guard, and deletes always pass it). -#}
    {%- if run_query("select count(*) from " ~ changes ~ " where _cdc_op = 'D'").columns[0].values()[0] > 0 -%}
        {%- do run_query(
            'insert into ' ~ tombstone_table
            ~ ' select ' ~ model_name ~ ', _cdc_key_json, _cdc_ts, _cdc_seq, _cdc_source_file, current_timestamp()'
            ~ " from " ~ changes ~ " where _cdc_op = 'D'"
        ) -%}
    {%- endif -%}

    {#- 4b. A truncate: a table-wide tombstone, then every row older than it goes. -#}
    {%- set truncate = run_query(
        "select _cdc_ts, _cdc_seq from " ~ batch_events ~ " where _cdc_op = 'T'"
        ~ " order by _cdc_ts desc, _cdc_seq desc limit 1"
    ) -%}
    {%- if truncate.rows | length > 0 -%}
        {%- set truncate_ts = "cast('" ~ truncate.rows[0][0].strftime('%Y-%m-%d %H:%M:%S.%f') ~ "' as timestamp)" -%}
        {%- set truncate_seq = cdc_sql_string(truncate.rows[0][1]) -%}
        {%- do run_query(
            'insert into ' ~ tombstone_table ~ ' select ' ~ model_name ~ ", '*', "
            ~ truncate_ts ~ ', ' ~ truncate_seq ~ ", 'truncate', current_timestamp()"
        ) -%}
        {%- do run_query(
            'delete from ' ~ target ~ ' where _cdc_ts < ' ~ truncate_ts
            ~ ' or (_cdc_ts = ' ~ truncate_ts ~ ' and _cdc_seq <= ' ~ truncate_seq ~ ')'
        ) -%}
    {%- endif -%}

    {#- 5. Only the changes that change something: newer than the row they touch, and not the same
           event again (same commit time and same content: a re-delivery with a new position).
           An Iceberg MERGE commits even when no row changes, so an empty set skips it. -#}
    {%- set effective_sql = cdc_effective_changes_sql(changes, target, keys) -%}
    {%- do run_query('cache table ' ~ effective ~ ' as ' ~ effective_sql) -%}
    {%- if run_query('select count(*) from ' ~ effective).columns[0].values()[0] == 0 -%}
        {{ return(noop) }}
    {%- endif -%}

    {#- 6. One MERGE: columns from the target, values from the batch (null for a column the
           source no longer sends). The guards repeat step 5: the MERGE is safe on its own. -#}
    {%- set source_columns = cdc_column_names(effective) | map('lower') | list -%}
    {%- set target_columns = cdc_column_names(target) -%}
    {%- set values = cdc_merge_values(target_columns, source_columns) %}

merge into {{ target }} as t
using {{ effective }} as s
on {% for key in keys %}t.{{ cdc_quote(key) }} = s.{{ cdc_quote(key) }}{{ ' and ' if not loop.last }}{% endfor %}
when matched and s._cdc_op = 'D' and {{ cdc_is_newer('s', 't') }} then delete
when matched and s._cdc_op <> 'D' and {{ cdc_is_newer('s', 't') }} then update set
    {%- for column in target_columns %}
    t.{{ cdc_quote(column) }} = {{ values[loop.index0] }}{{ ',' if not loop.last }}
    {%- endfor %}
when not matched and s._cdc_op <> 'D' then insert (
    {%- for column in target_columns %}
    {{ cdc_quote(column) }}{{ ',' if not loop.last }}
    {%- endfor %}
) values (
    {%- for value in values %}
    {{ value }}{{ ',' if not loop.last }}
    {%- endfor %}
)
{% endmacro %}


{% macro cdc_validate_batch(target, batch_events, keys) %}
    {%- set checks = [] -%}
    {%- for key in keys -%}
        {%- do checks.append(("count_if(_cdc_op <> 'T' and " ~ cdc_quote(key) ~ " is null)", "null key column " ~ key)) -%}
    {%- endfor -%}
    {%- do checks.append(("count_if(_cdc_ts is null)", "null commit timestamp (_cdc_ts: the producer's timestamp column)")) -%}
    {%- do checks.append(("count_if(_cdc_seq is null)", "null change sequence (_cdc_seq)")) -%}
    {%- do checks.append(("count_if(_cdc_op is null or _cdc_op not in ('I', 'U', 'D', 'T'))", "unknown operation (_cdc_op: the producer's operation column, Op or op)")) -%}
    {%- set sql -%}
        select * from (
            select
                _cdc_source_file
                {%- for check in checks %},
                {{ check[0] }} as check_{{ loop.index }}
                {%- endfor %}
            from {{ batch_events }}
            group by _cdc_source_file
        )
        where {% for check in checks %}check_{{ loop.index }} > 0{{ ' or ' if not loop.last }}{% endfor %}
        order by _cdc_source_file
    {%- endset -%}
    {%- set bad = run_query(sql) -%}
    {%- if bad.rows | length > 0 -%}
        {%- set problems = [] -%}
        {%- for row in bad.rows -%}
            {%- for check in checks -%}
                {%- set failures = row[loop.index] -%}
                {%- if failures > 0 -%}
                    {%- do problems.append("  raw file " ~ row[0] ~ ": " ~ failures ~ " change event(s) with " ~ check[1]) -%}
                {%- endif -%}
            {%- endfor -%}
        {%- endfor -%}
        {%- do cdc_drop_batch_views(target) -%}
        {{ exceptions.raise_compiler_error(
            "cdc_merge refused the batch for " ~ target ~ "; nothing was applied and the table is unchanged:\n"
            ~ (problems | join("\n"))
            ~ "\nFix or remove the file(s) in the landing folder and run again; the other tables are not affected.") }}
    {%- endif -%}
{% endmacro %}


{% macro cdc_batch_changes_sql(events, tombstones, keys) %}
    {#- Step 3 of the merge, as one query: the last change per key of the batch `events`, minus the
        changes older than the key's tombstone or a truncate. `tombstones` holds this model's rows
        of cdc_tombstones (key_json, _cdc_ts, _cdc_seq). -#}
    {%- set key_list -%}
        {% for key in keys %}{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
    {%- endset -%}
    {%- set key_json -%}
        to_json(named_struct({% for key in keys %}{{ cdc_sql_string(key) }}, {{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}))
    {%- endset %}
        with

        events as (

            select * from {{ events }}

        ),

        ranked as (

            select
                events.*,
                row_number() over (
                    partition by {{ key_list }}
                    order by events._cdc_ts desc, events._cdc_seq desc, events._cdc_source_file desc
                ) as _cdc_change_rank
            from events
            where events._cdc_op <> 'T'

        ),

        latest as (

            select
                ranked.*,
                {{ key_json }} as _cdc_key_json
            from ranked
            where ranked._cdc_change_rank = 1

        ),

        tombstones as (

            select
                key_json,
                max(struct(_cdc_ts, _cdc_seq)) as newest
            from {{ tombstones }}
            group by key_json

        ),

        truncated as (

            select max(struct(_cdc_ts, _cdc_seq)) as newest
            from (
                select _cdc_ts, _cdc_seq from events where _cdc_op = 'T'
                union all
                select _cdc_ts, _cdc_seq from {{ tombstones }}
                where key_json = '*'
            )

        )

        select latest.*
        from latest
        cross join truncated
        left join tombstones
            on latest._cdc_key_json = tombstones.key_json
        where
            (truncated.newest is null or {{ cdc_is_newer('latest', 'truncated.newest') }})
            and (
                tombstones.key_json is null
                or latest._cdc_op = 'D'
                or {{ cdc_is_newer('latest', 'tombstones.newest') }}
            )
{% endmacro %}


{% macro cdc_effective_changes_sql(changes, current_rows, keys) %}
    {#- Step 5 of the merge: the changes that change something, newer than the row they touch and
        not the same event again. -#}
    {%- set key_list -%}
        {% for key in keys %}{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
    {%- endset %}
        select changes.*
        from {{ changes }} as changes
        left join (select {{ key_list }}, _cdc_op, _cdc_ts, _cdc_seq, _cdc_row_hash from {{ current_rows }}) as current_rows
            on {% for key in keys %}changes.{{ cdc_quote(key) }} = current_rows.{{ cdc_quote(key) }}{{ ' and ' if not loop.last }}{% endfor %}
        where
            case
                when current_rows._cdc_ts is null then changes._cdc_op <> 'D'
                else {{ cdc_is_newer('changes', 'current_rows') }}
                    and not (
                        changes._cdc_op = current_rows._cdc_op
                        and changes._cdc_ts = current_rows._cdc_ts
                        and changes._cdc_row_hash = current_rows._cdc_row_hash
                    )
            end
{% endmacro %}


{% macro cdc_merge_result_sql(current_rows, events, tombstones, keys) %}
    {#- The table a run leaves, as a query: what the MERGE of steps 3-6 does to `current_rows`
        (delete, update, insert), for dbt unit tests of the merge rules. `current_rows` has the
        batch's columns, in the batch's order (rows are unioned by position); the two helper
        columns of step 3 come along. Truncates are out of scope. -#}
        with

        effective as (

            {{ cdc_effective_changes_sql('(' ~ cdc_batch_changes_sql(events, tombstones, keys) ~ ')', current_rows, keys) }}

        ),

        untouched as (

            select
                current_rows.*,
                cast(null as int) as _cdc_change_rank,
                cast(null as string) as _cdc_key_json
            from {{ current_rows }} as current_rows
            left anti join effective
                on {% for key in keys %}current_rows.{{ cdc_quote(key) }} = effective.{{ cdc_quote(key) }}{{ ' and ' if not loop.last }}{% endfor %}

        ),

        upserted as (

            select *
            from effective
            where _cdc_op <> 'D'

        )

        select * from untouched
        union all
        select * from upserted
{% endmacro %}


{% macro cdc_unit_test_tombstones() -%}
    {#- The cdc_tombstones rows a unit test starts from: none (a unit test overrides this macro). -#}
    {{ return("(select cast(null as string) as key_json, cast(null as timestamp) as _cdc_ts, cast(null as string) as _cdc_seq where false)") }}
{%- endmacro %}


{% macro cdc_merge_values(target_columns, source_columns) -%}
    {#- What a MERGE writes to each target column: this run's timestamp to _cdc_applied_at, the
        batch's value (`s.<column>`), or null for a column the batch no longer has. -#}
    {%- set values = [] -%}
    {%- for column in target_columns -%}
        {%- if column | lower == '_cdc_applied_at' -%}
            {%- do values.append(cdc_run_timestamp()) -%}
        {%- elif column | lower in source_columns -%}
            {%- do values.append('s.' ~ cdc_quote(column)) -%}
        {%- else -%}
            {%- do values.append('null') -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(values) }}
{%- endmacro %}

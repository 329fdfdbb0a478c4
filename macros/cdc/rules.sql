{#- The merge rules as pure queries: the last change per key with the tombstone and truncate
    guards (`cdc_batch_changes_sql`), the comparison with the table (`cdc_effective_changes_sql`),
    and, for dbt unit tests, the table a batch leaves (`cdc_merge_result_sql`). No statement runs
    here; merge.sql runs them. -#}

{% macro cdc_batch_changes_sql(events, tombstones, keys, every_event=false, truncate_bound='read', tombstoned=true) %}
    {#- Step 3 of the merge, as one query over the batch `events`: the last change per key, minus the
        changes older than the key's tombstone or a truncate. `tombstones` holds this model's rows
        of cdc_tombstones (key_json, _cdc_ts, _cdc_seq).
        `every_event`: instead, every change event of the batch (the one read of its files that the
        merge caches), with `_cdc_batch_outcome`: 'truncate' (a Debezium truncate), 'superseded' (a
        newer change of its key in the batch), 'redelivered' (a copy of a newer-ranked event of the
        batch: same key, operation, time and content), 'truncated', 'tombstoned', or null for the
        last changes that go on to be compared with the table (cdc_last_changes); the batch's
        validation and the batch log's counts are one aggregate over it (cdc_batch_files_sql).
        Subqueries, not CTEs: the merge caches this query (`cache table ... as`), and Spark 3.5
        never matches a cached plan that holds a CTE (its ids differ at every analysis,
        SPARK-46741), so every later read of the cached view would compute it again.
        The newest truncate (of the batch's `T` events and the model's table-wide tombstones) is read
        from both (`truncate_bound='read'`; every_event gives it in `_cdc_truncate_bound`), or is
        known: [commit time text, sequence] from the batch's aggregate (cdc_truncate_bound), or none
        for no truncate at all. Known, the query reads neither a second time. `tombstoned=false`: the
        batch's aggregate found no last change older than its key's tombstone, so the query does not
        read the tombstones again to find none. -#}
    {%- set key_list -%}
        {% for key in keys %}{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
    {%- endset -%}
    {%- set key_json -%}
        to_json(named_struct({% for key in keys %}{{ cdc_sql_string(key) }}, {{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}))
    {%- endset -%}
    {%- set order_by = 'events._cdc_ts desc, events._cdc_seq desc, events._cdc_source_file desc' -%}
    {%- set after_truncate = 'true' if truncate_bound is none
        else '(truncated.newest is null or ' ~ cdc_is_newer('latest', 'truncated.newest') ~ ')' -%}
    {%- set tombstoned = tombstoned or every_event -%}
    {%- set after_tombstone -%}
        {%- if tombstoned -%}
        (tombstones.key_json is null or latest._cdc_op = 'D' or {{ cdc_is_newer('latest', 'tombstones.newest') }})
        {%- else -%}
        true
        {%- endif -%}
    {%- endset %}
        select
            latest.*
        {%- if every_event %},
            case
                when latest._cdc_op = 'T' then 'truncate'
                when latest._cdc_change_rank > 1 and latest._cdc_copy_rank > 1 then 'redelivered'
                when latest._cdc_change_rank > 1 then 'superseded'
                when not {{ after_truncate }} then 'truncated'
                when not {{ after_tombstone }} then 'tombstoned'
            end as _cdc_batch_outcome,
            truncated.newest as _cdc_truncate_bound
        {%- endif %}
        from (
            select
                ranked.*,
                {{ key_json }} as _cdc_key_json
            from (
                select
                    events.*,
                    row_number() over (
                        partition by events._cdc_op = 'T', {{ key_list }} order by {{ order_by }}
                    ) as _cdc_change_rank
                    {%- if every_event %},
                    row_number() over (
                        partition by events._cdc_op = 'T', {{ key_list }}, events._cdc_op, events._cdc_ts, events._cdc_row_hash
                        order by {{ order_by }}
                    ) as _cdc_copy_rank
                    {%- endif %}
                from {{ events }} as events
                {%- if not every_event %}
                where events._cdc_op <> 'T'
                {%- endif %}
            ) as ranked
            {%- if not every_event %}
            where ranked._cdc_change_rank = 1
            {%- endif %}
        ) as latest
        {%- if truncate_bound == 'read' %}
        cross join (
            select max(struct(truncates._cdc_ts, truncates._cdc_seq)) as newest
            from (
                select events._cdc_ts, events._cdc_seq from {{ events }} as events where events._cdc_op = 'T'
                union all
                select tombstones._cdc_ts, tombstones._cdc_seq from {{ tombstones }} as tombstones
                where tombstones.key_json = '*'
            ) as truncates
        ) as truncated
        {%- elif truncate_bound is not none %}
        cross join (
            select named_struct('_cdc_ts', {{ cdc_timestamp_literal(truncate_bound[0]) }},
                '_cdc_seq', {{ cdc_sql_string(truncate_bound[1]) }}) as newest
        ) as truncated
        {%- endif %}
        {%- if tombstoned %}
        left join (
            select
                tombstones.key_json,
                max(struct(tombstones._cdc_ts, tombstones._cdc_seq)) as newest
            from {{ tombstones }} as tombstones
            group by tombstones.key_json
        ) as tombstones
            on latest._cdc_key_json = tombstones.key_json
        {%- endif %}
        {%- if not every_event %}
        where
            {{ after_truncate }}
            and {{ after_tombstone }}
        {%- endif %}
{% endmacro %}


{% macro cdc_last_changes(changes) -%}
    {#- The last change per key that passes the truncate and tombstone guards, from the cached batch.
        (A truncate's outcome is never null: `_cdc_op <> 'T'` changes no row, and is the comparison
        Spark's runtime filter wants on the side it builds a bloom filter from, cdc_merge_shuffles.) -#}
    {{ return('(select * from ' ~ changes ~ " where _cdc_batch_outcome is null and _cdc_op <> 'T')") }}
{%- endmacro %}


{% macro cdc_effective_changes_sql(changes, current_rows, keys, outcome=false) %}
    {#- Step 5 of the merge: the changes that change something, newer than the row they touch and
        not the same event again. `outcome`: instead, every change with `_cdc_outcome`, what it
        does to the table (cdc_outcome_sql). -#}
        select
            changes.*
            {%- if outcome %},
            {{ cdc_outcome_sql() }} as _cdc_outcome
            {%- endif %}
        from {{ changes }} as changes
        left join {{ cdc_rows_touched_sql(current_rows, changes, keys) }} as current_rows
            on {{ cdc_same_key('changes', 'current_rows', keys) }}
        {%- if not outcome %}
        where
            case
                when current_rows._cdc_ts is null then changes._cdc_op <> 'D'
                else {{ cdc_is_newer('changes', 'current_rows') }}
                    and not ({{ cdc_same_event() }})
            end
        {%- endif %}
{% endmacro %}


{% macro cdc_outcome_sql() -%}
    {#- What the last change `changes` does to the table's row `current_rows` (null: no row): 'insert',
        'update', 'delete', or why it changes nothing: 'older' (than the key's row), 'redelivered' (the
        row's own event: same time and sequence, or same time and content), 'no_row' (a delete of a key
        with no row). -#}
    case
        when current_rows._cdc_ts is null then if(changes._cdc_op = 'D', 'no_row', 'insert')
        when not {{ cdc_is_newer('changes', 'current_rows') }} then
            if(changes._cdc_ts = current_rows._cdc_ts and changes._cdc_seq = current_rows._cdc_seq, 'redelivered', 'older')
        when {{ cdc_same_event() }} then 'redelivered'
        when changes._cdc_op = 'D' then 'delete'
        else 'update'
    end
{%- endmacro %}


{% macro cdc_same_event() -%}
    (changes._cdc_op = current_rows._cdc_op
        and changes._cdc_ts = current_rows._cdc_ts
        and changes._cdc_row_hash = current_rows._cdc_row_hash)
{%- endmacro %}


{% macro cdc_same_key(left, right, keys) -%}
    {#- The join condition of two relations (aliases `left`, `right`) on the key columns. -#}
    {%- for key in keys %}{{ left }}.{{ cdc_quote(key) }} = {{ right }}.{{ cdc_quote(key) }}{{ ' and ' if not loop.last }}{% endfor -%}
{%- endmacro %}


{% macro cdc_rows_touched_sql(current_rows, batch, keys) %}
    {#- The rows of `current_rows` whose key is in `batch` (any relation with the key columns), with what
        the comparison needs: a semi-join with the batch's keys, broadcast (a batch is small; the hint
        because the planner may not know its size), so the target is scanned once and never shuffled. -#}
        (
            select /*+ BROADCAST(batch_keys) */
                {% for key in keys %}current_rows.{{ cdc_quote(key) }}, {% endfor -%}
                current_rows._cdc_op,
                current_rows._cdc_ts,
                current_rows._cdc_seq,
                current_rows._cdc_row_hash
            from {{ current_rows }} as current_rows
            left semi join (select {% for key in keys %}{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %} from {{ batch }}) as batch_keys
                on {{ cdc_same_key('current_rows', 'batch_keys', keys) }}
        )
{%- endmacro %}


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
                on {{ cdc_same_key('current_rows', 'effective', keys) }}

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

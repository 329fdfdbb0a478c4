{#- A batch's validation: what makes a change event invalid, and the one aggregate of the cached
    batch per file that finds it (with the batch log's counts), before anything is written. -#}

{% macro cdc_validate_batch(target, files, keys, record) %}
    {#- Refuses a batch with a null key or commit timestamp, a null or malformed sequence (not 35 digits),
        or an unknown operation,
        naming each file and how many of its events are bad; nothing has been written yet. `files`:
        the rows of cdc_batch_files_sql (one per raw file of the batch, read from the cached batch,
        so validation costs no scan of its own). Returns the batch's newest truncate as
        [timestamp text, sequence], or none. -#}
    {%- set checks = cdc_validation_checks(keys) -%}
    {%- set problems = [] -%}
    {%- set bad_files = [] -%}
    {%- for row in files -%}
        {%- for check in checks -%}
            {%- set failures = row['check_' ~ loop.index] -%}
            {%- if failures > 0 -%}
                {%- set what = check[1] if not loop.last else "unknown operation " ~ row['unknown_ops']
                    ~ " (the producer's operation column: Op, __op or op; known: I, U, D and Debezium's r, c, u, d, t)" -%}
                {%- do problems.append("  raw file " ~ row['_cdc_source_file'] ~ ": " ~ failures ~ " change event(s) with " ~ what) -%}
                {%- if row['_cdc_source_file'] not in bad_files -%}
                    {%- do bad_files.append(row['_cdc_source_file']) -%}
                {%- endif -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endfor -%}
    {%- if problems -%}
        {%- set events_read = files | map(attribute='change_events') | map('int') | sum -%}
        {%- do cdc_log_batch(target, record, refused={
            'files': bad_files | length, 'events': events_read,
            'reason': 'cdc_current_state refused the batch:' ~ (problems | join(';')) | replace('  raw file', ' raw file')}) -%}
        {%- do cdc_drop_batch_views(target) -%}
        {{ exceptions.raise_compiler_error(
            "cdc_current_state refused the batch for " ~ target ~ "; nothing was applied and the table is unchanged:\n"
            ~ (problems | join("\n"))
            ~ "\nFix or remove the file(s) in the landing folder and run again; the other tables are not affected.") }}
    {%- endif -%}
    {{ return(cdc_newest_commit_point(files, 'newest_truncate')) }}
{% endmacro %}


{% macro cdc_truncate_bound(files) -%}
    {#- The newest truncate the batch's changes were compared with (its own `T` events and the model's
        table-wide tombstones) as [commit time text, sequence], or none: from cdc_batch_files_sql's rows. -#}
    {{ return(cdc_newest_commit_point(files, 'truncate_bound')) }}
{%- endmacro %}


{% macro cdc_commit_time_text(ts) -%}
    {#- A commit time as fixed-width text (microseconds), so that text order is time order. -#}
    {{ return("date_format(" ~ ts ~ ", 'yyyy-MM-dd HH:mm:ss.SSSSSS')") }}
{%- endmacro %}


{% macro cdc_commit_point_text(ts, seq) -%}
    {#- A change's place in the order, (_cdc_ts, _cdc_seq), as one text whose greatest is the newest:
        read back by cdc_newest_commit_point. -#}
    {{ return("concat(" ~ cdc_commit_time_text(ts) ~ ", '|', " ~ seq ~ ")") }}
{%- endmacro %}


{% macro cdc_newest_commit_point(files, column) -%}
    {#- The greatest cdc_commit_point_text in `column` of cdc_batch_files_sql's rows, as [commit time
        text, sequence], or none. -#}
    {%- set points = files | map(attribute=column) | reject('none') | list -%}
    {{ return((points | max).split('|', 1) if points else none) }}
{%- endmacro %}


{% macro cdc_timestamp_literal(text) -%}
    {#- A commit time's text (cdc_commit_time_text, or a Python datetime's) as a Spark timestamp. -#}
    {{ return("cast(" ~ cdc_sql_string(text) ~ " as timestamp)") }}
{%- endmacro %}


{% macro cdc_now_literal() -%}
    {#- This moment (UTC) as a timestamp literal: a time the SQL is read later, not when it runs. -#}
    {{ return(cdc_timestamp_literal(modules.datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M:%S.%f'))) }}
{%- endmacro %}


{% macro cdc_validation_checks(keys) -%}
    {#- What makes a change event invalid, as [condition counted, words for the refusal]. -#}
    {%- set checks = [] -%}
    {%- for key in keys -%}
        {%- do checks.append(("count_if(_cdc_op <> 'T' and " ~ cdc_quote(key) ~ " is null)", "null or missing key column " ~ key)) -%}
    {%- endfor -%}
    {%- do checks.append(("count_if(_cdc_ts is null)", "null commit timestamp (_cdc_ts, from the producer's commit-time column: DMS last_update_time or the task's TimestampColumnName, Debezium source.ts_ms or __source_ts_ms)")) -%}
    {%- do checks.append(("count_if(_cdc_seq is null or not (_cdc_seq rlike '^[0-9]{35}$'))", "null or malformed change sequence (_cdc_seq: 35 digits, from DMS AR_H_CHANGE_SEQ or the Debezium source position)")) -%}
    {%- do checks.append(("count_if" ~ cdc_unknown_op(), "unknown operation")) -%}
    {{ return(checks) }}
{%- endmacro %}


{% macro cdc_unknown_op() -%}
    {{ return("(_cdc_op is null or _cdc_op not in ('I', 'U', 'D', 'T'))") }}
{%- endmacro %}


{% macro cdc_batch_files_sql(changes, keys, current_rows=none, batch_keys=none, deletes=false) %}
    {#- One row per raw file of the batch, in no order, from the batch (`changes`, every event with its
        `_cdc_batch_outcome`): everything a batch needs to know before it writes, in one query,
        read by column name: the file, its change events, the newest truncate (fixed-width text, so
        the greatest is the newest (_cdc_ts, _cdc_seq)), the newest of it and the model's table-wide
        tombstones (`truncate_bound`, the same for every file: cdc_truncate_bound), the unknown operations (at most 5, for the
        message), the counts of cdc_batch_counts and `check_<n>`, the events failing check n of
        cdc_validation_checks. `current_rows`: the table as the batch finds it; then each file's last
        changes are also compared with it in the same pass (cdc_outcome_sql: the table's rows whose key
        is in `batch_keys`, a relation with the key columns, joined to the last changes only) and counted
        per outcome (`outcome_<name>`, summed over the files by cdc_classified_counts). `deletes`: each
        file's last changes per key that are deletes, as a JSON array of [key_json, commit time text,
        sequence] (`deletes_json`, read by cdc_tombstone_literals). -#}
        select
            _cdc_source_file,
            count(*) as change_events,
            max(case when _cdc_op = 'T' then {{ cdc_commit_point_text('_cdc_ts', '_cdc_seq') }} end) as newest_truncate,
            max({{ cdc_commit_point_text('_cdc_truncate_bound._cdc_ts', '_cdc_truncate_bound._cdc_seq') }}) as truncate_bound,
            array_join(slice(array_sort(collect_set(case when {{ cdc_unknown_op() }}
                then coalesce(concat("'", _cdc_op, "'"), 'null') end)), 1, 5), ', ') as unknown_ops,
            count_if(_cdc_batch_outcome = 'truncate') as truncates,
            count_if(_cdc_batch_outcome = 'redelivered') as redelivered,
            count_if(_cdc_batch_outcome = 'superseded') as superseded,
            count_if(_cdc_batch_outcome = 'truncated') as ignored_truncated,
            count_if(_cdc_batch_outcome = 'tombstoned') as ignored_tombstoned,
            max(_cdc_ts) as newest_commit_at,
            count_if(_cdc_batch_outcome is null and _cdc_op = 'D') as last_deletes,
            {%- if deletes %}
            to_json(collect_list(case when _cdc_batch_outcome is null and _cdc_op = 'D' then array(_cdc_key_json,
                {{ cdc_commit_time_text('_cdc_ts') }}, _cdc_seq) end)) as deletes_json,
            {%- endif %}
            {%- if current_rows is not none %}
            {%- for name in cdc_outcomes() %}
            count_if(_cdc_outcome = {{ cdc_sql_string(name) }}) as outcome_{{ name }},
            {%- endfor %}
            {%- endif %}
            {%- for check in cdc_validation_checks(keys) %}
            {{ check[0] }} as check_{{ loop.index }}{{ ',' if not loop.last }}
            {%- endfor %}
        {%- if current_rows is none %}
        from {{ changes }}
        {%- else %}
        from (
            select
                changes.*,
                case when changes._cdc_batch_outcome is null then {{ cdc_outcome_sql() }} end as _cdc_outcome
            from {{ changes }} as changes
            left join {{ cdc_rows_touched_sql(current_rows, batch_keys, keys) }} as current_rows
                on {{ cdc_same_key('changes', 'current_rows', keys) }} and changes._cdc_batch_outcome is null
        ) as compared
        {%- endif %}
        group by _cdc_source_file
{% endmacro %}


{% macro cdc_outcomes() -%}
    {#- What a last change does to the table (cdc_effective_changes_sql's _cdc_outcome). -#}
    {{ return(['insert', 'update', 'delete', 'older', 'redelivered', 'no_row']) }}
{%- endmacro %}


{% macro cdc_classified_counts(files) -%}
    {#- The counts per outcome of cdc_batch_files_sql's `outcome_<name>` columns, summed over the
        batch's files, by column name; all 0 for a batch without rows. -#}
    {%- set counts = {} -%}
    {%- for name in cdc_outcomes() -%}
        {%- do counts.update({name: files | map(attribute='outcome_' ~ name) | map('int') | sum}) -%}
    {%- endfor -%}
    {{ return(counts) }}
{%- endmacro %}

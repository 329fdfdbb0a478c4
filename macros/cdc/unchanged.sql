{#- A value the source did not send: Debezium's `__debezium_unavailable_value` for a TOASTed column an
    update left alone under REPLICA IDENTITY DEFAULT (docs/DEBEZIUM_REAL_OUTPUT.md, 3). A source that
    sets `meta.cdc_unchanged_value` has its string, binary and array-of-string/binary columns read so
    (json/jsonb arrive as text): such a value means "as before". `cdc_fill_unchanged_sql`, when the
    batch is staged (cdc_stage_batch, current_state.sql), replaces it by the value the row had:

      1. the key's previous change in the batch (commit time, sequence, file), not before a delete of
         the key: a delete's non-key values are filler, and a key deleted and created again is a new row;
      2. else, for a create that shares its commit time and sequence (PostgreSQL's LSN) with a delete
         of another key, a primary key change: the old key's last value (its previous change in the
         batch, else its stored row), across partitions and files of the batch;
      3. else, when no delete of the key came before in the batch, the table's stored row.

    Rules 1 and 2 follow each other through two rounds (a key changed, then updated or changed again, in
    one batch); a batch of the run's plan none of whose deletes can change what the rules find takes
    rules 1 and 3 in one round (cdc_planned_fill_one_round). A placeholder still there after that (the
    old key's value is nowhere: its table was built after the change, its delete landed in another batch,
    or the chain is longer) is refused, in words, before anything is written. A source without the
    setting is read as before: no window, no join, no extra statement; so is a batch of the run's plan
    none of whose files holds the placeholder, which the hooks found reading them
    (cdc_planned_without_placeholder). The MERGE's update keeps the row's value for a placeholder too
    (cdc_unchanged_update_value), which after the fill only a re-delivery can meet. -#}

{% macro cdc_unchanged_value(source_node) -%}
    {#- The source's placeholder for a value it did not send (`meta.cdc_unchanged_value` on the table or
        the source), or none. -#}
    {{ return(none if source_node is none
        else (source_node.meta.get('cdc_unchanged_value') or source_node.source_meta.get('cdc_unchanged_value'))) }}
{%- endmacro %}


{% macro cdc_unchanged_columns(value, batch_columns) -%}
    {#- column -> the SQL literal of the placeholder `value` in that column's type, for the string, binary
        and array<string|binary> columns among `batch_columns` (the batch's, as cdc_landing_columns_of
        gives them); {} when there is no placeholder. -#}
    {%- set columns = {} -%}
    {%- if value -%}
        {%- set text = cdc_sql_string(value) -%}
        {%- set literals = {
            'string': text,
            'binary': 'cast(' ~ text ~ ' as binary)',
            'array<string>': 'array(' ~ text ~ ')',
            'array<binary>': 'array(cast(' ~ text ~ ' as binary))',
        } -%}
        {%- for column in batch_columns if not column.name.startswith('_cdc_') -%}
            {%- set data_type = column.data_type | lower | replace(' ', '') -%}
            {%- if data_type in literals -%}
                {%- do columns.update({column.name: literals[data_type]}) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(columns) }}
{%- endmacro %}


{% macro cdc_fill_unchanged_sql(batch_sql, columns, unchanged, keys, stored=none, stored_columns=[], table='', one_round=false) %}
    {#- The batch's events with each placeholder replaced by the value the row had (the rules at the
        top of this file); an unresolvable one raises an error naming the table, the key, the column
        and the file. `stored`: the current-state table (none on a full build: every file is in the
        batch), `stored_columns` its columns. `one_round`: the hooks found, reading the batch's files, that no
        insert or update of a key comes at or after a delete of that key and no create shares a delete's
        position (cdc_planned_fill_one_round); then every insert or update is in its key's first segment and
        rule 2 finds nothing, so rules 1 and 3 in one round decide what two rounds of all three would: the
        segment is 0, rule 2 is left out, and the same placeholders are refused. -#}
    {%- set passes = 1 if one_round else 2 -%}
    {%- set filled = [] -%}
    {%- for column in columns if column in unchanged and column | lower not in keys | map('lower') | list -%}
        {%- do filled.append(column) -%}
    {%- endfor -%}
    {%- set known = stored_columns | map('lower') | list -%}
    {%- set sql -%}
        select
            batch.*,
            {#- deletes of the key before this change in the batch: a key's "segment" -#}
            {%- if one_round %}
            0 as _cdc_fill_segment,
            {%- else %}
            count_if(batch._cdc_op = 'D') over (
                partition by {% for key in keys %}batch.{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
                order by batch._cdc_ts, batch._cdc_seq, batch._cdc_source_file
                rows between unbounded preceding and 1 preceding
            ) as _cdc_fill_segment,
            {%- endif %}
            {{ 'stored._cdc_fill_stored' if stored is not none else 'false' }} as _cdc_fill_stored
            {%- for column in filled %},
            {%- if stored is not none and column | lower in known %}
            named_struct('v', stored.{{ cdc_quote(column) }}) as _cdc_fill_stored_{{ loop.index }}
            {%- else %}
            if(false, named_struct('v', batch.{{ cdc_quote(column) }}), null) as _cdc_fill_stored_{{ loop.index }}
            {%- endif %}
            {%- endfor %}
        from ({{ batch_sql }}) as batch
        {%- if stored is not none %}
        left join (
            select {% for key in keys %}{{ cdc_quote(key) }}, {% endfor %}true as _cdc_fill_stored
            {%- for column in filled if column | lower in known %}, {{ cdc_quote(column) }}{% endfor %}
            from {{ stored }}
        ) as stored
            on {{ cdc_same_key('stored', 'batch', keys) }}
        {%- endif %}
    {%- endset -%}
    {%- set state = namespace(sql=sql) -%}
    {%- for pass in range(passes) -%}
        {%- set state.sql = cdc_fill_pass_sql(state.sql, columns, filled, unchanged, keys, loop.last, table, one_round) -%}
    {%- endfor -%}
    {{ return('select ' ~ cdc_fill_column_list(columns) ~ ' from (' ~ state.sql ~ ') as filled') }}
{% endmacro %}


{% macro cdc_fill_pass_sql(sql, columns, filled, unchanged, keys, last, table, one_round=false) %}
    {#- One round of rules 1 and 2 (and 3) over `sql` (the batch with its segment and stored values):
        a placeholder resolved; one not resolved stays for the next round, or on the `last` round
        raises the refusal. `one_round` (cdc_fill_unchanged_sql): rule 2 finds nothing, and is left out. -#}
    {%- set order = 'order by _cdc_ts, _cdc_seq, _cdc_source_file' -%}
    {%- set by_key -%}{% for key in keys %}{{ cdc_quote(key) }}{{ ', ' if not loop.last }}{% endfor %}{%- endset -%}
        with

        events as (
            select
                events.*
                {%- for column in filled %},
                {#- 1: the key's latest earlier value in its segment; a delete's filler never counts -#}
                last_value(
                    if(events._cdc_op = 'D' or events.{{ cdc_quote(column) }} = {{ unchanged[column] }}, null,
                        named_struct('v', events.{{ cdc_quote(column) }})),
                    true
                ) over (
                    partition by {{ by_key }}, events._cdc_fill_segment
                    {{ order }}
                    rows between unbounded preceding and 1 preceding
                ) as _cdc_fill_previous_{{ loop.index }}
                {%- endfor %}
            from ({{ sql }}) as events

        {%- if not one_round %}
        ),

        departed as (
            {#- 2: each delete's last value, by position: the create of a key change shares it -#}
            select
                _cdc_ts,
                _cdc_seq
                {%- for column in filled %},
                first(coalesce(_cdc_fill_previous_{{ loop.index }},
                    if(_cdc_fill_segment = 0 and _cdc_fill_stored, _cdc_fill_stored_{{ loop.index }}, null)), true)
                    as _cdc_fill_departed_{{ loop.index }}
                {%- endfor %}
            from events
            where _cdc_op = 'D'
            group by _cdc_ts, _cdc_seq
        {%- endif %}

        )

        select
            {%- for column in columns %}
            {%- if column in filled %}
            {%- set i = filled.index(column) + 1 %}
            case
                when events.{{ cdc_quote(column) }} = {{ unchanged[column] }} and events._cdc_op in ('I', 'U') then coalesce(
                    events._cdc_fill_previous_{{ i }},
                    {%- if not one_round %}
                    if(events._cdc_op = 'I', departed._cdc_fill_departed_{{ i }}, null),
                    {%- endif %}
                    {#- 3 -#}
                    if(events._cdc_fill_segment = 0 and events._cdc_fill_stored, events._cdc_fill_stored_{{ i }}, null),
                    {%- if not last %}
                    named_struct('v', events.{{ cdc_quote(column) }})
                    {%- else %}
                    raise_error(concat(
                        {{ cdc_sql_string(table ~ ': the change of key (') }},
                        {% for key in keys %}{{ cdc_sql_string(key ~ '=') }}, coalesce(cast(events.{{ cdc_quote(key) }} as string), 'null'),{{ " ', '," if not loop.last }} {% endfor %}
                        {{ cdc_sql_string(') in raw file ') }}, events._cdc_source_file,
                        {{ cdc_sql_string(' leaves column ' ~ column ~ ' as the placeholder for a value the source did not send (meta.cdc_unchanged_value), and its value is known neither from an earlier change of the key in this batch, nor from the old key of a key change, nor from the table: nothing was written. Give the table REPLICA IDENTITY FULL at the source, or rebuild the model from every file (--full-refresh) if the files hold the row\'s earlier value (macros/cdc/unchanged.sql)') }}
                    )) {#- typed by coalesce's other arms -#}
                    {%- endif %}
                ).v
                else events.{{ cdc_quote(column) }}
            end as {{ cdc_quote(column) }},
            {%- else %}
            events.{{ cdc_quote(column) }},
            {%- endif %}
            {%- endfor %}
            events._cdc_fill_segment,
            events._cdc_fill_stored
            {%- for column in filled %},
            events._cdc_fill_stored_{{ loop.index }}
            {%- endfor %}
        from events
        {%- if not one_round %}
        left join departed
            on departed._cdc_ts = events._cdc_ts and departed._cdc_seq = events._cdc_seq and events._cdc_op = 'I'
        {%- endif %}
{% endmacro %}


{% macro cdc_fill_column_list(columns) -%}
    {%- set quoted = [] -%}
    {%- for column in columns -%}
        {%- do quoted.append(cdc_quote(column)) -%}
    {%- endfor -%}
    {{ return(quoted | join(', ')) }}
{%- endmacro %}


{% macro cdc_unchanged_update_value(column, value, unchanged) -%}
    {#- What the MERGE's update writes to `column`: the row's stored value when the change carries the
        placeholder, else `value`. -#}
    {%- if column in unchanged -%}
        {{ return('case when s.' ~ cdc_quote(column) ~ ' = ' ~ unchanged[column] ~ ' then t.' ~ cdc_quote(column)
            ~ ' else ' ~ value ~ ' end') }}
    {%- endif -%}
    {{ return(value) }}
{%- endmacro %}

{#- SCD2: every key has exactly one current version (valid_to = open_end). A model whose deletes
    leave a key with no current version (snapshots with hard_deletes: invalidate) sets
    `allow_no_current: true`; more than one current version always fails.
    Fails with one row per offending key. -#}
{% test scd2_one_current_version(
    model,
    key_columns,
    valid_to='valid_to',
    open_end="cast('9999-12-31 00:00:00' as timestamp)",
    allow_no_current=false
) %}

with

versions as (

    select * from {{ model }}

),

per_key as (

    select
        {{ key_columns | join(', ') }},
        count_if({{ valid_to }} = {{ open_end }}) as current_versions
    from versions
    group by {{ key_columns | join(', ') }}

)

select * from per_key
where
    current_versions > 1
    {% if not allow_no_current %}
        or current_versions = 0
    {% endif %}

{% endtest %}

{#- SCD2: consecutive versions of a key meet exactly: valid_to of one = valid_from of the next, so
    that every instant between a key's first version and its last is covered once.
    The one exception is across a delete in models that end a deleted key's version without a
    deletion version (snapshots with hard_deletes: invalidate): there the key has no version
    between the delete and its return. Such a model passes `gap_after` = a SQL condition on the
    earlier version that is true when a delete ended it. Models with deletion versions
    (hard_deletes: new_record, is_deleted rows) need no exception: the deletion version fills the gap.
    Fails with each version whose end does not meet the next version's start. -#}
{% test scd2_versions_meet(model, key_columns, valid_from='valid_from', valid_to='valid_to', gap_after='false') %}

with

versions as (

    select
        *,
        lead({{ valid_from }}) over (
            partition by {{ key_columns | join(', ') }}
            order by {{ valid_from }}
        ) as next_version_start
    from {{ model }}

)

select * from versions
where next_version_start is not null
    and not ({{ valid_to }} = next_version_start)
    and not coalesce({{ gap_after }}, false)

{% endtest %}

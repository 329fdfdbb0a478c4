{#- SCD2: no two versions of a key are valid at the same time (ranges are [valid_from, valid_to)),
    and no two start at the same time. Fails with each version that overlaps an earlier one. -#}
{% test scd2_no_overlapping_versions(model, key_columns, valid_from='valid_from', valid_to='valid_to') %}

with

versions as (

    select
        {{ key_columns | join(', ') }},
        {{ valid_from }} as version_start,
        {{ valid_to }} as version_end,
        max({{ valid_to }}) over (
            partition by {{ key_columns | join(', ') }}
            order by {{ valid_from }}, {{ valid_to }}
            rows between unbounded preceding and 1 preceding
        ) as latest_earlier_end,
        count(*) over (
            partition by {{ key_columns | join(', ') }}, {{ valid_from }}
        ) as versions_starting_together
    from {{ model }}

)

select * from versions
where latest_earlier_end > version_start
    or versions_starting_together > 1

{% endtest %}

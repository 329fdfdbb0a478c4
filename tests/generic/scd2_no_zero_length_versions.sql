{#- SCD2: every version lasts: valid_from < valid_to (never null). Fails with the offending rows. -#}
{% test scd2_no_zero_length_versions(model, valid_from='valid_from', valid_to='valid_to') %}

select * from {{ model }}
where {{ valid_from }} is null
    or {{ valid_to }} is null
    or not {{ valid_from }} < {{ valid_to }}

{% endtest %}

"""Every dbt unit test of the project (`unit_tests:` in models/**/_*__unit_tests.yml) passes.

They check the staging normalization of each producer shape on given rows, in the Spark session
of the run; `dbt test` and `dbt build` run them too, this makes `make test` run all of them at once."""

from __future__ import annotations


def test_dbt_unit_tests_pass(dbt, spark, tmp_path):
    result = dbt("test", "--select", "test_type:unit", landing=tmp_path, schema="dbt_unit_tests")
    assert result.success, [(r.node.name, r.status, r.message) for r in result.result or []]
    ran = {r.node.name: r.status for r in result.result if r.node.resource_type == "unit_test"}
    assert {
        "stg_crm__customer_master_normalizes_dms_changes",
        "stg_salesdb__customer_normalizes_flattened_debezium_events",
        "stg_inventory__product_normalizes_debezium_envelopes",
    } <= set(ran), ran
    assert set(ran.values()) == {"pass"}, ran

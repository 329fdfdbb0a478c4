"""A loop's runs resolve the caller's selection once (python_hooks/commands/selection.py: selected_nodes): `dbt ls`
runs again only when the project was parsed from something else, or the selection changed, or it names a method
whose answer the manifest does not hold. No Spark: `dbt parse` and `dbt ls` only."""

from __future__ import annotations

from helpers.paths import PROJECT
from python_hooks.commands.selection import selected_nodes, selection_key
from python_hooks.project.session import dbt_runner, parse


def test_a_selection_is_resolved_again_only_when_the_project_or_the_selection_changed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CDC_SCHEMA", "first_schema")
    args = ["--project-dir", str(PROJECT), "--target-path", str(tmp_path / "target")]
    runner = dbt_runner()
    listed = []
    invoke = runner.invoke

    def counting(command, **kwargs):
        listed.extend(command[:1] if command[:1] == ["ls"] else [])
        return invoke(command, **kwargs)

    monkeypatch.setattr(runner, "invoke", counting)
    crm = ["--select", "stg_crm__customer_master+"]

    first = selected_nodes(runner, parse(runner, args), crm, args)
    assert {"stg_crm__customer_master", "crm__customer_master"} <= first and len(listed) == 1
    assert selected_nodes(runner, parse(runner, args), crm, args) == first and len(listed) == 1  # kept

    salesdb = ["--select", "stg_salesdb__sales_order+"]
    other = selected_nodes(runner, parse(runner, args), salesdb, args)
    assert "salesdb__sales_order" in other and "crm__customer_master" not in other and len(listed) == 2

    monkeypatch.setenv("CDC_SCHEMA", "second_schema")  # a variable the project reads: parsed from something else
    assert selected_nodes(runner, parse(runner, args), salesdb, args) == other and len(listed) == 3


def test_a_method_answered_by_more_than_the_manifest_is_never_kept(tmp_path) -> None:
    args = ["--project-dir", str(PROJECT), "--target-path", str(tmp_path / "target")]
    manifest = parse(dbt_runner(), args)
    assert selection_key(["--select", "tag:x+", "--exclude", "y"], manifest, args) is not None
    for chosen in (["-s", "state:modified+"], ["--select", "result:error+"], ["-s", "source_status:fresher+"]):
        assert selection_key(chosen, manifest, args) is None, chosen
    assert selection_key(["--selector", "nightly"], manifest, args) is None  # a selectors file, not in the manifest

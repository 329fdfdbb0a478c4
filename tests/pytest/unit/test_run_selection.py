"""What `make run` leaves out of its build (python_hooks/commands/selection.py), on a small synthetic manifest:
no dbt, no Spark."""

from __future__ import annotations

from types import SimpleNamespace

from python_hooks.commands.selection import guaranteed_tests, idle_descendants, selection_args, selects
from python_hooks.project.tables import CdcTable


def _table(model: str, keys: tuple[str, ...]) -> CdcTable:
    return CdcTable(model, "s", model, f"stg_{model}", "src", None, "dms", None, keys=keys)


def _node(name: str, kind: str = "model", parents: tuple[str, ...] = (), test=None, column: str = ""):
    metadata = None if test is None else SimpleNamespace(name=test[0], namespace=None, kwargs=test[1])
    return SimpleNamespace(
        name=name,
        resource_type=kind,
        depends_on=SimpleNamespace(nodes=list(parents)),
        test_metadata=metadata,
        column_name=column,
    )


def _manifest(*nodes) -> SimpleNamespace:
    return SimpleNamespace(nodes={f"{n.resource_type}.p.{n.name}": n for n in nodes})


def _test(name: str, model: str, test: str, **kwargs):
    return _node(name, "test", (f"model.p.{model}",), (test, kwargs))


A, B = _table("a", ("id",)), _table("b", ("k1", "k2"))
MANIFEST = _manifest(
    _node("stg_a"),
    _node("a", parents=("model.p.stg_a",)),
    _node("stg_b"),
    _node("b", parents=("model.p.stg_b",)),
    _node("snap_a", "snapshot", ("model.p.a",)),
    _node("mart_ab", parents=("model.p.a", "model.p.b")),
    _node("mart_a", parents=("snapshot.p.snap_a",)),
    _node("over_seed", parents=("seed.p.codes",)),
    _test("a_key_not_null", "a", "not_null", column_name="id"),
    _test("a_key_unique", "a", "unique", column_name="id"),
    _test("a_op_values", "a", "accepted_values", column_name="_cdc_op", values=["I", "U"]),
    _test("a_op_narrow", "a", "accepted_values", column_name="_cdc_op", values=["I"]),
    _test("a_name_not_null", "a", "not_null", column_name="name"),
    _test("a_ts_not_null", "a", "not_null", column_name="_cdc_ts"),
    _test("b_k1_unique", "b", "unique", column_name="k1"),
    _test("b_key_unique", "b", "unique_combination_of_columns", combination_of_columns=["k2", "K1"]),
    _test("b_k1_k1_unique", "b", "unique_combination_of_columns", combination_of_columns=["k1", "k1"]),
    _test("b_wider_unique", "b", "unique_combination_of_columns", combination_of_columns=["k1", "k2", "name"]),
    _test("stg_b_key_unique", "stg_b", "unique_combination_of_columns", combination_of_columns=["k1", "k2"]),
    _test("b_k1_not_null", "b", "not_null", column_name="k1"),
    _test("stg_a_op_values", "stg_a", "accepted_values", column_name="_cdc_op", values=["I", "U", "D", "T"]),
    _test("stg_a_op_short", "stg_a", "accepted_values", column_name="_cdc_op", values=["I", "U"]),
    _test("stg_a_seq_not_null", "stg_a", "not_null", column_name="_cdc_seq"),
    _test("stg_a_key_not_null", "stg_a", "not_null", column_name="id"),
    _test("stg_a_seq_format", "stg_a", "expression_is_true", expression="_cdc_seq rlike '^[0-9]{35}$'"),
    # as add-source writes it: the column's test, the format the batch refuses any other than
    _test("stg_a_seq_digits", "stg_a", "expression_is_true", column_name="_cdc_seq", expression="rlike '^[0-9]{35}$'"),
    _test("stg_a_seq_other", "stg_a", "expression_is_true", column_name="_cdc_seq", expression="rlike '^[0-9]+$'"),
    _test("a_seq_digits", "a", "expression_is_true", column_name="_cdc_seq", expression="rlike '^[0-9]{35}$'"),
    _test("mart_unique", "mart_ab", "unique", column_name="id"),
)


def test_only_what_the_batch_guarantees_is_left_out() -> None:
    assert guaranteed_tests(MANIFEST, [A, B]) == {
        "a_key_not_null",
        "a_key_unique",
        "a_op_values",
        "a_ts_not_null",
        "b_k1_not_null",
        "b_key_unique",
        "stg_a_op_values",
        "stg_a_seq_not_null",
        "stg_a_seq_digits",
    }


def test_tests_of_a_table_not_applied_are_not_touched() -> None:
    assert guaranteed_tests(MANIFEST, [B]) == {"b_k1_not_null", "b_key_unique"}
    assert guaranteed_tests(MANIFEST, [A]) & {"b_k1_not_null", "b_key_unique"} == set()


def test_nodes_below_idle_tables_only_are_left_out() -> None:
    assert idle_descendants(MANIFEST, [A, B], {"a", "stg_a"}) == {"snap_a", "mart_a"}
    assert idle_descendants(MANIFEST, [A, B], {"a", "stg_a", "b", "stg_b"}) == {"snap_a", "mart_a", "mart_ab"}
    assert idle_descendants(MANIFEST, [A, B], set()) == set()


def test_a_selection_of_the_callers_own() -> None:
    assert selects(["--select", "a"]) and selects(["-s", "a"]) and selects(["--selector=x"])
    assert not selects(["--full-refresh", "--exclude", "a"])


def test_the_selections_options_go_to_dbt_ls_with_their_values_and_nothing_else() -> None:
    args = ["--select", "a", "b+", "--full-refresh", "--exclude=c", "-s", "tag:x", "--threads", "4", "--selector", "y"]
    assert selection_args(args) == ["--select", "a", "b+", "--exclude=c", "-s", "tag:x", "--selector", "y"]
    assert selection_args(["--full-refresh", "--vars", "{a: 1}"]) == []


def test_only_tests_of_the_pipelines_own_tables_are_meta_tests():
    from python_hooks.commands.selection import META_SOURCE, meta_tests

    log, other = f"source.p.{META_SOURCE}.cdc_batch_log", "source.p.crm.customer"
    manifest = SimpleNamespace(
        sources={log: SimpleNamespace(source_name=META_SOURCE), other: SimpleNamespace(source_name="crm")},
        nodes={
            "test.p.log_unique": _node("log_unique", "test", (log,)),
            "test.p.log_and_model": _node("log_and_model", "test", (log, "model.p.a")),
            "test.p.crm_source": _node("crm_source", "test", (other,)),
            "test.p.singular": _node("singular", "test"),
            "model.p.over_log": _node("over_log", parents=(log,)),
        },
    )
    assert meta_tests(manifest) == {"log_unique"}

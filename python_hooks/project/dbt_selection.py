"""dbt's selection of nodes by name, answered from an index while `make run`'s build selects
(commands/run.py: run_pipeline).

`make run` hands `dbt build` an --exclude of every node it leaves out: the idle tables and their quiet
descendants, the tests each batch checks itself (commands/selection.py). dbt searches every node of the graph
for each name (QualifiedNameSelectorMethod.search calls is_selected_node per node, twice per build), so the
selection cost names x nodes: at 200 tables with add-source's tests, 2,800 names over 3,200 nodes took 82 s of a
318 s run, holding Python's lock (py-spy, bench/TUNING.md round 21).

`indexed_names()` makes the same method answer a name without a wildcard from an index of the nodes, built
once per set of nodes: the nodes dbt's own search yields, in the same order (tests/pytest/unit/
test_dbt_selection.py compares both). A name with a wildcard, and any dbt whose method is not the one
described here, take dbt's own search.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

WILDCARDS = ("*", "?", "[", "]")
_lock = threading.Lock()
_cached: dict = {}  # the last index: {"key": (manifest id, frozenset of node ids), "order": [...], "keys": {...}}


def _method():
    """dbt's name selector method class, or None when it is not the one this module knows."""
    try:
        from dbt.graph.selector_methods import QualifiedNameSelectorMethod
    except ImportError:
        return None
    search = getattr(QualifiedNameSelectorMethod, "search", None)
    if search is None or not hasattr(QualifiedNameSelectorMethod, "non_source_nodes"):
        return None
    return QualifiedNameSelectorMethod


def names_matching(fqn: list[str], is_versioned: bool) -> set[str]:
    """Every name without a wildcard that dbt's is_selected_node matches against `fqn` (the node's, or the
    node's without its package, as node_is_match asks both): the leaf (the model's name for a versioned
    model) and each dotted prefix of the fqn split on dots. The joined last two parts of a versioned model
    are indexed apart (`joined_name`)."""
    names = {fqn[-2] if is_versioned else fqn[-1]}
    flat = [item for segment in fqn for item in segment.split(".")]
    names.update(".".join(flat[: i + 1]) for i in range(len(flat)))
    return names


def joined_name(fqn: list[str]) -> str:
    """A versioned model's last two fqn parts joined by `_`, which a name matches when its own last two
    dot-separated parts, so joined, are equal."""
    return "_".join(fqn[-2:])


def _index(method, included_nodes) -> dict:
    key = (id(method.manifest), frozenset(included_nodes))
    with _lock:
        if _cached.get("key") == key:
            return _cached
    order, by_name, by_joined = [], {}, {}
    for position, (unique_id, node) in enumerate(method.non_source_nodes(included_nodes)):
        order.append(unique_id)
        versioned = bool(node.is_versioned)
        for fqn in (node.fqn, node.fqn[1:]):
            if not fqn:
                continue
            for name in names_matching(fqn, versioned):
                by_name.setdefault(name, set()).add(position)
            if versioned and len(fqn) >= 2:
                by_joined.setdefault(joined_name(fqn), set()).add(position)
    index = {"key": key, "order": order, "names": by_name, "joined": by_joined}
    with _lock:
        _cached.clear()
        _cached.update(index)
    return index


def _indexed_search(original):
    def search(self, included_nodes, selector: str) -> Iterator:
        if any(w in selector for w in WILDCARDS):
            yield from original(self, included_nodes, selector)
            return
        index = _index(self, included_nodes)
        found = set(index["names"].get(selector, ()))
        found |= index["joined"].get("_".join(selector.split(".")[-2:]), set())
        for position in sorted(found):
            yield index["order"][position]

    search.__doc__ = original.__doc__
    return search


@contextlib.contextmanager
def indexed_names() -> Iterator[bool]:
    """dbt's name selection from the index for the `with` block (True), or dbt's own (False: not the method
    this module knows)."""
    method = _method()
    if method is None:
        yield False
        return
    original = method.search
    method.search = _indexed_search(original)
    try:
        yield True
    finally:
        method.search = original
        with _lock:
            _cached.clear()

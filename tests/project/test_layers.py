"""The house has no import cycle: neither between trainplan's packages nor between modules."""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("trainplan")


def test_no_module_import_cycle(graph):
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _cycles(edges) == []


def test_no_package_import_cycle(graph):
    def pkg(m: str) -> str:
        return ".".join(m.split(".")[:2])
    edges: dict[str, set[str]] = {}
    for m in graph.modules:
        for d in graph.find_modules_directly_imported_by(m):
            if pkg(m) != pkg(d) and m.count(".") and d.count("."):
                edges.setdefault(pkg(m), set()).add(pkg(d))
    assert _cycles(edges) == []


def test_the_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]

"""Cycle detection: aliases that reach themselves without an object or array in between.

One stage of the translator (generator/typescript/translator.py), run over the finished
declarations. `type A = B | null; type B = A[]` is fine for tsc, but `type A = B | null;
type B = A & {…}` is not (TS2456): a reference that closes a cycle through unions and
intersections alone becomes `unknown`, with a warning. Strongly connected components find
those edges in one linear pass.
"""

from __future__ import annotations

from collections.abc import Iterator

from codemode_gen.generator.typescript import ast as t


def components(graph: dict[str, set[str]]) -> dict[str, str]:
    """Each node's strongly connected component (named by its root); iterative Tarjan, so
    long alias chains cannot exhaust the stack."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    component: dict[str, str] = {}
    for root in graph:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        while work:
            v, successors = work[-1]
            for w in successors:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component[w] = v
                        if w == v:
                            break
    return component


def _immediate_refs(node: t.TypeNode) -> set[str]:
    if isinstance(node, t.Ref):
        return {node.name}
    if isinstance(node, (t.Union, t.Intersection)):
        out: set[str] = set()
        for m in node.members:
            out |= _immediate_refs(m)
        return out
    return set()


def _replace_refs(node: t.TypeNode, names: set[str]) -> t.TypeNode:
    if isinstance(node, t.Ref) and node.name in names:
        return t.UNKNOWN
    if isinstance(node, t.Union):
        return t.union([_replace_refs(m, names) for m in node.members])
    if isinstance(node, t.Intersection):
        return t.intersection([_replace_refs(m, names) for m in node.members])
    return node


def break_direct_cycles(asts: dict[str, t.TypeNode]) -> list[tuple[str, set[str]]]:
    """Replace every reference that closes a cycle through unions/intersections only (TS
    rejects such aliases) with `unknown`, in `asts` itself. Returns each changed declaration
    with the names it no longer references, in `asts` order."""
    graph = {name: _immediate_refs(node) & asts.keys() for name, node in asts.items()}
    if not any(graph.values()):
        return []
    # An edge closes a cycle iff both ends are in one strongly connected component; one
    # linear pass instead of a reachability search from every name (quadratic on big
    # documents such as FHIR's 680 definitions).
    component = components(graph)
    broken: list[tuple[str, set[str]]] = []
    for name, targets in graph.items():
        bad = {v for v in targets if component[v] == component[name]}
        if bad:
            asts[name] = _replace_refs(asts[name], bad)
            broken.append((name, bad))
    return broken

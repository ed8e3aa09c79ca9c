"""generator/typescript/cycles.py: aliases that reach themselves without an object or array."""

from __future__ import annotations

import random

from codemode_gen.generator.typescript import NameScope, translate
from codemode_gen.generator.typescript.cycles import components


def test_cycle_breaking_finds_exactly_the_edges_reachability_finds() -> None:
    """The strongly-connected-component pass flags the same `$ref` edges as a reachability
    search from every name (what it replaced), on random reference graphs."""
    rng = random.Random(7)
    for _ in range(300):
        names = [f"N{i}" for i in range(rng.randint(1, 9))]
        graph = {n: {m for m in names if rng.random() < 0.25} for n in names}

        def reach(start: str, graph: dict[str, set[str]] = graph) -> set[str]:
            seen: set[str] = set()
            stack = list(graph[start])
            while stack:
                cur = stack.pop()
                if cur not in seen:
                    seen.add(cur)
                    stack.extend(graph[cur])
            return seen

        component = components(graph)
        for name, targets in graph.items():
            expected = {v for v in targets if name in reach(v)}
            assert {v for v in targets if component[v] == component[name]} == expected


def test_a_direct_cycle_becomes_unknown_with_a_warning() -> None:
    schema = {
        "$ref": "#/$defs/A",
        "$defs": {
            "A": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "null"}]},
            "B": {"allOf": [{"$ref": "#/$defs/A"}]},
        },
    }
    result = translate(schema, "Root", NameScope())
    assert any("recursive $ref to" in w and "emitted unknown" in w for w in result.warnings)

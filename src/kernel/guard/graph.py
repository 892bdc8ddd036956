"""Whole-tree findings: transitive reach (KG007) and layers (KG009) over the import graph.

Rules this module enforces:

- transitive reach follows runtime and literal dynamic imports (never typing-only
  ones) through the project's own modules, including package ``__init__``
  re-exports, and reports the shortest chain to each forbidden module with the line of
  every hop, one finding per (module importing the forbidden one, forbidden module);
- layers report direct imports of a higher layer and chains through modules that no
  layer names;
- a whole-tree finding round-trips through the cache as a plain tuple (`to_cached`,
  `from_cached`).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

import attrs

from kernel.guard.model import ChainLink, Rule, Violation, ViolationCode
from kernel.guard.patterns import covers, module_set, twin_of
from kernel.guard.scan import ImportFact, RawFinding

__all__ = ["Derived", "from_cached", "layer_breaks", "to_cached", "transitive"]

_Results = dict[str, tuple[list[ImportFact], list[RawFinding]]]

Derived = tuple[str, int, int, str, str, str, tuple[tuple[str, str, int, str], ...]]
"""A whole-tree finding (transitive, layers) as the cache stores it."""


def to_cached(v: Violation) -> Derived:
    """``v`` as the cache stores it (marshal holds only plain values)."""
    chain = tuple((c.module, c.path, c.line, c.imports) for c in v.chain)
    return (v.path, v.line, v.column, v.code.value, v.rule, v.message, chain)


def from_cached(item: Derived) -> Violation:
    """The finding `to_cached` stored."""
    path, line, column, code, rule, message, chain = item
    return Violation(
        path=path,
        line=line,
        column=column,
        code=ViolationCode(code),
        rule=rule,
        message=message,
        chain=tuple(ChainLink(module=m, path=p, line=n, imports=i) for m, p, n, i in chain),
    )


def layer_breaks(
    rule: Rule,
    files: Sequence[tuple[str, str, bool]],
    results: _Results,
    show: dict[str, str],
) -> list[Violation]:
    """KG009: every import (runtime, dynamic or typing-only: each is a dependency) of a
    higher layer by a module of the rule. An ancestor package is not a target: Python
    runs it for any submodule import, so ``from kernel import errors`` depends on
    ``kernel.errors``, not on ``kernel``'s re-exports."""
    out: list[Violation] = []
    for path, module, _pkg in files:
        if not covers(rule.modules, module):
            continue
        own = rule.layer_of(module)
        got = results.get(path)
        if own is None or got is None:
            continue
        for target_module, name, line, col, _kind in got[0]:
            targets = [target_module, f"{target_module}.{name}"] if name else [target_module]
            for target in targets:
                if module.startswith(target + ".") or target == module:
                    continue
                level = rule.layer_of(target)
                if level is not None and level < own:
                    out.append(
                        Violation(
                            path=show.get(path, path),
                            line=line,
                            column=col + 1,
                            code=ViolationCode.LAYER_VIOLATION,
                            rule=rule.name,
                            message=(
                                f"{module!r} (layer {own}: {', '.join(rule.layers[own])}) "
                                f"imports {target!r} of higher layer {level} "
                                f"({', '.join(rule.layers[level])})"
                            ),
                            chain=(
                                ChainLink(
                                    module=module,
                                    path=show.get(path, path),
                                    line=line,
                                    imports=target,
                                ),
                            ),
                        )
                    )
                    break
    out.extend(_layer_chains(rule, files, results, show))
    return out


def _layer_chains(
    rule: Rule,
    files: Sequence[tuple[str, str, bool]],
    results: _Results,
    show: dict[str, str],
) -> list[Violation]:
    """KG009 through modules outside the layers (as import-linter reports chains): a
    layered module that reaches a higher layer only through project modules no layer
    names; the shortest chain per higher module, every hop with its line."""
    where = {module: path for path, module, _k in files}
    graph = {
        module: _edges(results[path][0]) if path in results else []
        for module, path in where.items()
    }
    out: list[Violation] = []
    for path, module, _pkg in files:
        own = rule.layer_of(module) if covers(rule.modules, module) else None
        if own is None:
            continue
        parent: dict[str, tuple[str, int]] = {module: ("", 0)}
        queue = collections.deque([module])
        reported: set[str] = set()
        while queue:
            current = queue.popleft()
            for target, line, _col in graph.get(current, ()):
                if target not in where or target in parent:
                    continue
                level = rule.layer_of(target)
                if level is None:
                    parent[target] = (current, line)
                    queue.append(target)
                    continue
                if current == module or level >= own or target in reported:
                    continue  # direct edges are reported above; lower layers are fine
                reported.add(target)
                hops = [ChainLink(module=current, path=show.get(where[current], where[current]),
                                  line=line, imports=target)]  # fmt: skip
                node = current
                while node != module:
                    prev, pline = parent[node]
                    hops.append(ChainLink(module=prev, path=show.get(where[prev], where[prev]),
                                          line=pline, imports=node))  # fmt: skip
                    node = prev
                hops.reverse()
                trail = " -> ".join(f"{h.module}:{h.line}" for h in hops)
                out.append(
                    Violation(
                        path=show.get(path, path),
                        line=hops[0].line,
                        column=1,
                        code=ViolationCode.LAYER_VIOLATION,
                        rule=rule.name,
                        message=(
                            f"{module!r} (layer {own}) reaches {target!r} of higher layer "
                            f"{level} through {trail} -> {target}"
                        ),
                        chain=tuple(hops),
                    )
                )
    return out


def _edges(imports: Sequence[ImportFact]) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    for module, name, line, col, kind in imports:
        if kind == "typing":
            continue
        out.append((module, line, col))
        if name:
            out.append((f"{module}.{name}", line, col))
    return out


def transitive(
    rules: Sequence[Rule],
    files: Sequence[tuple[str, str, bool]],
    results: _Results,
    modules: dict[str, str],
    show: dict[str, str],
) -> list[Violation]:
    """KG007 of the ``transitive`` rules: forbidden modules reached through the
    project's own ``modules`` (name -> path), one finding per group."""
    graph: dict[str, list[tuple[str, int, int]]] = {}
    for module, path in modules.items():
        got = results.get(path)
        graph[module] = _edges(got[0]) if got else []
    out: list[Violation] = []
    for rule in rules:
        memo: dict[str, str | None] = {}
        # One finding per (module that imports the forbidden one, forbidden module):
        # the fix is there, so every guarded module reaching it through that import is
        # one group, shown by its shortest chain (on Django most findings were the same
        # few imports reached from hundreds of modules).
        groups: dict[tuple[str, str], list[Violation]] = {}
        for _path, module, _pkg in files:
            if not covers(rule.modules, module):
                continue
            for v in _reach(rule, module, graph, modules, show, memo=memo):
                groups.setdefault((v.chain[-1].module, v.chain[-1].imports), []).append(v)
        for (last, _target), found in groups.items():
            best = min(found, key=lambda v: (len(v.chain), v.path, v.line))
            if len(found) > 1:
                others = len(found) - 1
                best = attrs.evolve(
                    best,
                    message=f"{best.message} ({others} other module"
                    f"{'s reach' if others > 1 else ' reaches'} it through {last!r} too)",
                )
            out.append(best)
    return out


def _reach(
    rule: Rule,
    /,
    start: str,
    graph: dict[str, list[tuple[str, int, int]]],
    modules: dict[str, str],
    show: dict[str, str],
    *,
    memo: dict[str, str | None],
) -> list[Violation]:
    """BFS from ``start`` through project modules; shortest chain per broken pattern.

    The search does not continue through a forbidden module: the first forbidden hop
    is the finding, what lies behind it is noise.
    """
    parent: dict[str, tuple[str, int, int]] = {start: ("", 0, 0)}
    queue = collections.deque([start])
    found: dict[str, tuple[str, str, int]] = {}  # pattern -> (last module, target, line)
    while queue:
        current = queue.popleft()
        for target, line, col in graph.get(current, ()):
            if target in memo:
                pattern = memo[target]
            else:
                forbidden = module_set(rule.forbid_imports)
                pattern = memo[target] = next(
                    (
                        hit
                        for name in (target, *twin_of(target))
                        if (hit := forbidden.match(name)) is not None
                    ),
                    None,
                )
            if pattern is not None:
                if current != start and pattern not in found:
                    found[pattern] = (current, target, line)
                continue
            if target in modules and target not in parent:
                parent[target] = (current, line, col)
                queue.append(target)
    violations: list[Violation] = []
    for pattern, (last, target, line) in sorted(found.items()):
        hops = [
            ChainLink(
                module=last, path=show.get(modules[last], modules[last]), line=line, imports=target
            )
        ]
        node = last
        while node != start:
            prev, pline, _pcol = parent[node]
            hops.append(
                ChainLink(
                    module=prev,
                    path=show.get(modules[prev], modules[prev]),
                    line=pline,
                    imports=node,
                )
            )
            node = prev
        hops.reverse()
        first = hops[0]
        # The chain has at least two hops (direct imports are KG001, not KG007).
        first_col = parent[hops[1].module][2]
        trail = " -> ".join(f"{h.module}:{h.line}" for h in hops)
        violations.append(
            Violation(
                path=first.path,
                line=first.line,
                column=first_col + 1,
                code=ViolationCode.TRANSITIVE_IMPORT,
                rule=rule.name,
                message=(
                    f"reaches forbidden {target!r} (forbid-imports {pattern!r}) "
                    f"through {trail} -> {target}"
                ),
                chain=tuple(hops),
            )
        )
    return violations

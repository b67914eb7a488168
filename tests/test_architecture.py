"""The code's shape: layers that only import downward (import-linter, configured in
pyproject.toml), no module reaching into another's private names, and every gate in one room
listed once in the registry table."""

from __future__ import annotations

import ast
import pathlib

from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports

from rules.registry import (
    CODEMODS,
    EXTRACTORS,
    PLANNERS,
    RULES,
    TABLE,
    codemod_for,
    planners_for,
)

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("auditor", "rules")


def test_layers_contract_is_kept():
    assert lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True) == EXIT_STATUS_SUCCESS


def _modules():
    for pkg in PACKAGES:
        for p in sorted((REPO / pkg).rglob("*.py")):
            yield p, ".".join(p.relative_to(REPO).with_suffix("").parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_a_private_name_of_another():
    offences = []
    for path, mod in _modules():
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # local name -> our module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                for a in node.names:
                    if _private(a.name) and node.module != mod:
                        offences.append(f"{mod}: from {node.module} import {a.name}")
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in PACKAGES:
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                target = aliases.get(node.value.id)
                if target is not None and target != mod:
                    offences.append(f"{mod}: {node.value.id}.{node.attr}")
    assert offences == []


def test_every_gate_has_one_room_and_one_registry_line():
    codes = [e.rule.CODE for e in TABLE]
    assert len(codes) == len(set(codes)) == len(RULES)
    for e in TABLE:
        room = pathlib.Path(e.rule.__module__.replace(".", "/")).parent
        assert (REPO / room / "rule.py").is_file(), e.rule
        # another engine's variant of a gate keeps its fix beside it: planner_<engine>.py, codemod_<engine>.py
        suffix = "" if e.rule.ENGINES == ("vllm",) else f"_{e.rule.ENGINES[0]}"
        if e.planner is not None:
            assert e.planner.__module__ == f"{room.as_posix().replace('/', '.')}.planner{suffix}"
        if e.codemod is not None:
            assert e.codemod.startswith(f"{room.as_posix().replace('/', '.')}.codemod{suffix}:")
    # every blocking gate with a fix has a planner and a codemod for its engine, and every extractor is named once
    for code, rule in RULES.items():
        if rule.FIX_AVAILABLE:
            for engine in rule.ENGINES:
                assert rule.GATE in planners_for(engine) and codemod_for(rule.GATE, engine) in CODEMODS, code
    assert PLANNERS == planners_for("vllm")
    names = [x.name for x in EXTRACTORS]
    assert len(names) == len(set(names))


def test_readme_rule_table_is_the_generated_one():
    from auditor.render.rules import rules_markdown

    text = (REPO / "README.md").read_text()
    begin = text.index("-->\n", text.index("<!-- rules:begin")) + len("-->\n")
    assert text[begin:text.index("<!-- rules:end -->")] == rules_markdown()


def import_cycles(packages=PACKAGES) -> list[list[str]]:
    """The module-level import cycles of ``packages``: each strongly connected component of more
    than one module in the graph of every import that grimp (import-linter's graph) finds, those
    inside functions included, sorted. Empty when the imports form a DAG."""
    import grimp

    graph = grimp.build_graph(*packages)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):  # Tarjan, iteratively (no recursion limit)
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    scc.append(m)
                    if m == node:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return sorted(out)


def test_no_import_cycles():
    # the two of main 0fdae14 are gone: auditor.source.fetch <-> auditor.source.sources (the
    # progress bar) and rules.registry -> the planners -> rules.planning -> rules.registry (the
    # hand-fix hint); so is SGLang's facts <-> donor analysis (the vocabulary that needs both is
    # auditor.engines.sglang.vocabulary, above them)
    assert import_cycles() == []


def test_every_extractor_survives_pickle():
    """Extractors go to the summary pass's worker processes by pickle: one that does not pickle (a
    lambda as ``run`` or ``prefilter``) sends every job of the tree back in-process, and the scan
    loses its workers without a word."""
    import pickle

    from rules.registry import EXTRACTORS

    for x in EXTRACTORS:
        assert pickle.loads(pickle.dumps(x)).name == x.name, x.name

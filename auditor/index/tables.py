"""Module-level dict tables evaluated statically (no code runs): literals, ``**`` spreads,
keyword calls and simple dict comprehensions. Engines name which modules hold tables (for vLLM:
the model registry and the HF config registry) through an :class:`~auditor.index.summary.Extractor`.
"""

from __future__ import annotations

import ast
from typing import Any, Callable

#: The comparison operators evaluated statically, by ``ast`` operator type: ``==``, ``!=``,
#: ``in``, ``not in`` (each ``(left, right) -> bool``; may raise TypeError on odd operands).
COMPARISONS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class _Unresolvable(Exception):
    pass


def _eval_table(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate a literal table expression: dict/list/tuple/str literals, names of tables already
    evaluated, ``{**a, **b}``, ``dict(k=v)``/``Cls(k=v)`` keyword calls, and dict comprehensions
    ``{k: (m, a) for k, (m, a) in T.items() if a == "X"}``. Names not in ``env`` evaluate to
    ``("name", id)`` markers. Raises _Unresolvable for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval_table(e, env) for e in node.elts)
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        return ("name", node.id)
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                spread = _eval_table(v, env)
                if not isinstance(spread, dict):
                    raise _Unresolvable
                out.update(spread)
            else:
                out[_eval_table(k, env)] = _eval_table(v, env)
        return out
    if isinstance(node, ast.Call) and not node.args:
        out = {}
        for kw in node.keywords:
            if kw.arg is None:
                spread = _eval_table(kw.value, env)
                if not isinstance(spread, dict):
                    raise _Unresolvable
                out.update(spread)
            else:
                out[kw.arg] = _eval_table(kw.value, env)
        return out
    if isinstance(node, ast.DictComp) and len(node.generators) == 1:
        gen = node.generators[0]
        it = gen.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items"):
            raise _Unresolvable
        src = _eval_table(it.func.value, env)
        if not isinstance(src, dict):
            raise _Unresolvable
        out = {}
        for k, v in src.items():
            local = dict(env)
            _bind_target(gen.target, (k, v), local)
            if all(_eval_cond(c, local) for c in gen.ifs):
                out[_eval_table(node.key, local)] = _eval_table(node.value, local)
        return out
    raise _Unresolvable


def _bind_target(target: ast.AST, value: Any, env: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        if not isinstance(value, tuple) or len(value) != len(target.elts):
            raise _Unresolvable
        for t, v in zip(target.elts, value):
            _bind_target(t, v, env)
    else:
        raise _Unresolvable


def _eval_cond(node: ast.AST, env: dict[str, Any]) -> bool:
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a = _eval_table(node.left, env)
        b = _eval_table(node.comparators[0], env)
        compare = COMPARISONS.get(type(node.ops[0]))
        if compare is not None:
            return compare(a, b)
    if isinstance(node, ast.BoolOp):
        vals = [_eval_cond(v, env) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    raise _Unresolvable


def extract_tables(tree: ast.Module) -> dict[str, dict]:
    """Evaluate the module-level dict tables of a module, in order (later tables may spread
    earlier ones). Returns ``{name: {key: value}}``; tables that are not literal are skipped."""
    env: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            v = stmt.value
            if not isinstance(v, (ast.Dict, ast.DictComp, ast.Call)):
                continue
            if isinstance(v, ast.Call) and (v.args or not v.keywords):
                continue
            try:
                val = _eval_table(v, env)
            except (_Unresolvable, TypeError, ValueError):
                continue
            if isinstance(val, dict):
                env[targets[0].id] = val
                lines[targets[0].id] = stmt.lineno
    return {"tables": env, "lines": lines}


def _key_lines(tree: ast.Module, names: set[str]) -> dict[str, int]:
    """Line of each string key in the named module-level dict literals (registry rows)."""
    out: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if not any(isinstance(t, ast.Name) and t.id in names for t in targets):
                continue
            if isinstance(stmt.value, ast.Dict):
                for k in stmt.value.keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        out.setdefault(k.value, k.lineno)
            elif isinstance(stmt.value, ast.Call):
                for kw in stmt.value.keywords:
                    if kw.arg:
                        out.setdefault(kw.arg, kw.value.lineno)
    return out




def extract_all_tables(tree: ast.Module) -> dict:
    """Every literal module-level table of a module: ``{"tables": {name: {key: value}},
    "lines": {name: line}, "key_lines": {key: line}}``."""
    t = extract_tables(tree)
    t["key_lines"] = _key_lines(tree, set(t["tables"]))
    return t

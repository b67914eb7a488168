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


_MUTATORS = ("update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__")


def _mutate(stmt: ast.stmt, env: dict[str, Any], taint: dict[str, list]) -> bool:
    """Apply a module-level change of a table already evaluated (``T[k] = v``, ``del T[k]``,
    ``T.update(...)``, ``T.pop(k)``, ``T.setdefault(k, v)``, ``T.clear()``) to ``env``, as Python
    runs it; a change that cannot be evaluated is recorded in ``taint`` as ``(key or None,
    construct, line)`` (None: any row). Returns True when ``stmt`` changes a table."""
    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Call) and not node.keywords:
            raise _Unresolvable  # a call's result is not a literal (``dict()`` aside, nothing to follow)
        return _eval_table(node, env)

    def record(name: str, key: Any, what: str) -> None:
        taint.setdefault(name, []).append((key if isinstance(key, str) else None, what, stmt.lineno))

    if isinstance(stmt, (ast.Assign, ast.Delete)):
        targets = stmt.targets
        subs = [t for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id in env]
        if not subs:
            return False
        for t in subs:
            name, what = t.value.id, ast.unparse(stmt)[:80]
            try:
                k = _eval_table(t.slice, env)
                if isinstance(stmt, ast.Delete):
                    env[name].pop(k, None)
                else:
                    env[name][k] = value(stmt.value)
            except (_Unresolvable, TypeError, ValueError):
                k = t.slice.value if isinstance(t.slice, ast.Constant) else None
                record(name, k, what)
        return True
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in env
            and f.attr in _MUTATORS):
        return False
    name, what, table = f.value.id, ast.unparse(stmt)[:80], env[f.value.id]
    args = call.args
    try:
        if f.attr == "update":
            new: dict = {}
            for a in args:
                v = value(a)
                if not isinstance(v, dict):
                    raise _Unresolvable
                new.update(v)
            for kw in call.keywords:
                if kw.arg is None:
                    raise _Unresolvable
                new[kw.arg] = value(kw.value)
            table.update(new)
        elif f.attr in ("pop", "__delitem__") and args:
            table.pop(_eval_table(args[0], env), None)
        elif f.attr in ("setdefault", "__setitem__") and len(args) == 2:
            k = _eval_table(args[0], env)
            v = value(args[1])
            if f.attr == "setdefault":
                table.setdefault(k, v)
            else:
                table[k] = v
        elif f.attr == "clear" and not args:
            table.clear()
        else:
            raise _Unresolvable
    except (_Unresolvable, TypeError, ValueError):
        key = args[0].value if args and isinstance(args[0], ast.Constant) and f.attr != "update" else None
        record(name, key, what)
    return True


def extract_tables(tree: ast.Module) -> dict[str, dict]:
    """Evaluate the module-level dict tables of a module, in order (later tables may spread
    earlier ones), with the changes made to them after their literal (see :func:`_mutate`).
    Returns ``{"tables": {name: {key: value}}, "lines": {name: line}}`` plus, when some change
    cannot be evaluated, ``"unfollowable": {name: [(key or None, construct, line)]}`` (a table
    built by spreading a table inherits its entries); tables that are not literal are skipped."""
    env: dict[str, Any] = {}
    lines: dict[str, int] = {}
    taint: dict[str, list] = {}
    for stmt in tree.body:
        if _mutate(stmt, env, taint):
            continue
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
                name = targets[0].id
                env[name] = val
                lines[name] = stmt.lineno
                inherited = [e for n in ast.walk(v) if isinstance(n, ast.Name) and n.id in taint and n.id != name
                             for e in taint[n.id]]
                taint.pop(name, None)
                if inherited:
                    taint[name] = inherited
    out = {"tables": env, "lines": lines}
    if taint:
        out["unfollowable"] = taint
    return out


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

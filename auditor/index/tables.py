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
    evaluated, ``{**a, **b}``, ``dict(k=v)``/``SomeDict(k=v)`` keyword calls, and dict comprehensions
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
    if isinstance(node, ast.Call) and not node.args and _dict_like(node.func):
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


def _dict_like(func: ast.expr) -> bool:
    """A callee whose keyword call builds a dict of its keywords: ``dict``, or a class named as a
    dict (vLLM's ``LazyConfigDict(chatglm="ChatGLMConfig", ...)``); any other call is a value
    built at run time."""
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name == "dict" or name.endswith("Dict")


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

    def row_key(node: ast.AST) -> Any:
        k = _eval_table(node, env)
        if not isinstance(k, (str, int, float, bool)):
            raise _Unresolvable  # a name static evaluation cannot read (``T[_N] = v``): which row is not known
        return k

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
                k = row_key(t.slice)
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
            table.pop(row_key(args[0]), None)
        elif f.attr in ("setdefault", "__setitem__") and len(args) == 2:
            k = row_key(args[0])
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


#: Methods that change a dict or a list in place.
CONTAINER_MUTATORS = _MUTATORS + ("append", "extend", "insert", "remove", "__iadd__", "__ior__", "__init__")

#: Callables that only read a container passed to them (``dict(T)`` copies it).
_READERS = frozenset({"dict", "list", "tuple", "set", "frozenset", "len", "sorted", "iter", "any", "all",
                      "isinstance", "print", "repr", "str", "sum", "min", "max", "enumerate", "zip", "reversed",
                      "types.MappingProxyType", "MappingProxyType", "copy.copy", "copy.deepcopy"})


def hidden_changes(tree: ast.Module, names: set[str], skip: set[int] = frozenset()) -> dict[str, list]:
    """Changes of the module-level containers ``names`` that static evaluation of the module's
    straight-line statements does not follow: made inside a module-level loop, ``if``, ``try``,
    ``with`` or ``match``, inside a function or method body (which runs when it is called, at a time
    static analysis cannot tell), by handing the container to a call that may change it or keep it
    (``_fill(T)``: a function or class of the module is read, any other callee may), or nested in
    an expression (``x = T.pop(k)``).

    Args:
        tree: the parsed module (dead code already pruned).
        names: the container names to watch.
        skip: ``id()`` of the top-level statements the caller followed itself.

    Returns:
        ``{name: [(None, construct, line)]}`` (None: any row may change), in statement order.
    """
    out: dict[str, list] = {}
    defs = {st.name: st for st in tree.body if isinstance(st, (ast.FunctionDef, ast.ClassDef))}

    def hands_over(call: ast.Call, arg: ast.expr, depth: int = 0) -> bool:
        """True when ``call`` may change (or keep a reference to) the container ``arg`` it is
        given: a callee defined in this module is read (a class: its ``__init__``); any other
        callee is assumed to."""
        f = call.func
        fname = f.id if isinstance(f, ast.Name) else ast.unparse(f)
        if fname in _READERS:
            return False
        fn = defs.get(fname)
        if isinstance(fn, ast.ClassDef):
            fn = next((st for st in fn.body if isinstance(st, ast.FunctionDef) and st.name == "__init__"), None)
            skip_self = 1
        else:
            skip_self = 0
        if not isinstance(fn, ast.FunctionDef) or depth > 3:
            return True
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args][skip_self:]
        if arg in call.args:
            i = call.args.index(arg)
            if i >= len(params):
                return True
            param = params[i]
        else:
            param = next((k.arg for k in call.keywords if k.value is arg), None)
            if param is None:
                return True
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id == param and isinstance(node.ctx, ast.Store):
                return True  # rebound: what it holds then is not followed
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == param \
                    and not isinstance(node.ctx, ast.Load):
                return True
            if isinstance(node, ast.Call):
                g = node.func
                if isinstance(g, ast.Attribute) and isinstance(g.value, ast.Name) and g.value.id == param \
                        and g.attr in CONTAINER_MUTATORS:
                    return True
                for a in list(node.args) + [k.value for k in node.keywords]:
                    if isinstance(a, ast.Name) and a.id == param and hands_over(node, a, depth + 1):
                        return True
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Name) \
                    and node.value.id == param:
                return True  # kept under another name (``self.models = models``)
        return False

    def hit(name: str, node: ast.AST, where: str) -> None:
        what = f"{ast.unparse(node)[:80]}{where}"
        out.setdefault(name, []).append((None, what, getattr(node, "lineno", 0)))

    def watched(node: ast.AST, shadow: set[str]) -> str | None:
        return node.id if isinstance(node, ast.Name) and node.id in names and node.id not in shadow else None

    def walk(node: ast.AST, shadow: set[str], where: str, top: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            body = node.body if isinstance(node.body, list) else [node.body]
            glob = {n for st in body for x in ast.walk(st) if isinstance(x, ast.Global) for n in x.names}
            local = {x.id for st in body for x in ast.walk(st) if isinstance(x, ast.Name)
                     and isinstance(x.ctx, ast.Store)} - glob
            inner = shadow | params | local
            label = f" (in {node.name}(), line {node.lineno})" if not isinstance(node, ast.Lambda) else where
            for n in glob & names:
                out.setdefault(n, []).append((None, f"`global {n}` in {getattr(node, 'name', 'a lambda')}()",
                                              node.lineno))
            for st in body:
                walk(st, inner, label, False)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Subscript) and watched(x.value, shadow):
                        hit(x.value.id, node, where)
                    elif not top and isinstance(x, ast.Name) and watched(x, shadow) \
                            and not isinstance(x.ctx, ast.Load):
                        hit(x.id, node, where)  # rebound inside a loop, a branch or a function
            if isinstance(node, ast.AugAssign) and watched(node.target, shadow):
                hit(node.target.id, node, where)
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and watched(f.value, shadow) and f.attr in CONTAINER_MUTATORS:
                hit(f.value.id, node, where)
            else:
                for a in list(node.args) + [k.value for k in node.keywords]:
                    if watched(a, shadow) and hands_over(node, a):
                        hit(a.id, node, where)
        for child in ast.iter_child_nodes(node):
            walk(child, shadow, where, False)

    for st in tree.body:
        if id(st) in skip:
            continue
        compound = isinstance(st, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)) \
            or type(st).__name__ in ("Match", "TryStar")
        walk(st, set(), f" (in a module-level {type(st).__name__.lower()} at line {st.lineno})" if compound else "",
             not compound)
    return out


def extract_tables(tree: ast.Module) -> dict[str, dict]:
    """Evaluate the module-level dict tables of a module, in order (later tables may spread
    earlier ones), with the changes made to them after their literal (see :func:`_mutate`).
    Returns ``{"tables": {name: {key: value}}, "lines": {name: line}}`` plus, when some change
    cannot be evaluated, ``"unfollowable": {name: [(key or None, construct, line)]}`` (a table
    built by spreading a table inherits its entries; changes out of straight-line code are
    found by :func:`hidden_changes`), and ``"built": {name: (statement, line)}`` for the names
    whose last module-level assignment is not a table static evaluation can read (a
    comprehension over a call, ``getattr(...)``, a spread of a function's result): their value
    is built at run time, and the name is absent from ``tables``. ``T2 = T`` binds the same
    table (a change through either name counts for both)."""
    env: dict[str, Any] = {}
    lines: dict[str, int] = {}
    taint: dict[str, list] = {}
    built: dict[str, tuple[str, int]] = {}
    followed: set[int] = set()
    for stmt in tree.body:
        if _mutate(stmt, env, taint):
            followed.add(id(stmt))
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            v = stmt.value
            name = targets[0].id
            if isinstance(v, ast.Name) and v.id in env:
                env[name], lines[name] = env[v.id], stmt.lineno  # the same object: changes through either count
                built.pop(name, None)
                continue
            try:
                if not isinstance(v, (ast.Dict, ast.DictComp, ast.Call)) or (
                        isinstance(v, ast.Call) and (v.args or not v.keywords)):
                    raise _Unresolvable
                val = _eval_table(v, env)
            except (_Unresolvable, TypeError, ValueError):
                # not a literal table: its value is built when the module runs
                built[name] = (ast.unparse(stmt)[:100], stmt.lineno)
                env.pop(name, None)
                continue
            if isinstance(val, dict):
                built.pop(name, None)
                name = targets[0].id
                env[name] = val
                lines[name] = stmt.lineno
                inherited = [e for n in ast.walk(v) if isinstance(n, ast.Name) and n.id in taint and n.id != name
                             for e in taint[n.id]]
                taint.pop(name, None)
                if inherited:
                    taint[name] = inherited
    hidden = hidden_changes(tree, set(env), followed)
    for name, changes in hidden.items():
        taint.setdefault(name, []).extend(changes)
    # a table built from one that changes where it cannot be followed (when, is not known) inherits
    # those changes
    for name in list(env):
        for other, changes in hidden.items():
            if other != name and _spreads(tree, name, other):
                taint.setdefault(name, []).extend(e for e in changes if e not in taint.get(name, []))
    out = {"tables": env, "lines": lines}
    if taint:
        out["unfollowable"] = taint
    if built:
        out["built"] = built
    return out


def _spreads(tree: ast.Module, name: str, other: str) -> bool:
    """True when a module-level assignment of ``name`` reads ``other``."""
    for st in tree.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None and any(
                isinstance(t, ast.Name) and t.id == name for t in (st.targets if isinstance(st, ast.Assign)
                                                                   else [st.target])):
            if any(isinstance(n, ast.Name) and n.id == other for n in ast.walk(st.value)):
                return True
    return False


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

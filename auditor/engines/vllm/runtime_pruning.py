"""Which code of a registry method a name the table holds reaches, read statically.

vLLM's resolution methods test whether the table holds a name before anything else
(``if architecture in self.models: return architecture``; ``if model_arch not in self.models:
return None``; ``if all(arch not in self.models for arch in architectures) and ...:``): the code
such a test skips is not run for a row of the table, and what it does to other names (rewriting
them, testing them against other lists) cannot change how a row resolves.
"""

from __future__ import annotations

import ast


def architecture_names(fn: ast.FunctionDef, kinds: dict[int, str]) -> tuple[set[str], set[str]]:
    """``(names, lists)`` of ``fn`` that hold an architecture name or a list of them: its
    parameters after ``self`` at the positions of ``kinds`` (position -> ``"name"``/``"list"``),
    the names a loop or a comprehension over one of them binds, and names bound to one as it is
    (``a = arch``, ``a = architectures[0]``) or to what a method of the object returns for one
    (``a = self._normalize_arch(arch)``), to a fixed point."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    me = params[0] if params else None
    params = params[1:]
    names = {params[i] for i, k in kinds.items() if i < len(params) and k == "name"}
    lists = {params[i] for i, k in kinds.items() if i < len(params) and k == "list"}
    grown = True
    while grown:
        grown = False
        for n in ast.walk(fn):
            new: list[str] = []
            if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(n.iter, ast.Name) \
                    and n.iter.id in lists | names:
                new = [t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)]
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                v = n.value
                if isinstance(v, ast.Name) and v.id in names or isinstance(v, ast.Subscript) \
                        and isinstance(v.value, ast.Name) and v.value.id in lists and not isinstance(v.slice, ast.Slice) \
                        or method_call(v, me) and any(reads(a, names | lists) for a in v.args):
                    new = [n.targets[0].id]
            for x in new:
                if x not in names and x not in lists:
                    names.add(x)
                    grown = True
    return names, lists


def reads(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` reads one of ``names``."""
    return any(isinstance(x, ast.Name) and x.id in names for x in ast.walk(node))


def method_call(v: ast.AST, me: str | None) -> bool:
    """``v`` is ``self.m(...)``, ``me`` naming ``self``."""
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and isinstance(v.func.value, ast.Name) \
        and v.func.value.id == me


def is_table(node: ast.AST, me: str | None) -> bool:
    """``node`` is ``self.models`` or ``self.models.keys()``, ``me`` naming ``self``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys" \
            and not node.args:
        node = node.func.value
    return isinstance(node, ast.Attribute) and node.attr == "models" and isinstance(node.value, ast.Name) \
        and node.value.id == me


def _guard(test: ast.expr, me: str | None, names: set[str], lists: set[str]) -> bool | None:
    """The value of the ``if`` test ``test`` for a name the table holds (``architectures`` holding
    one): True/False when it tests only that, None when it depends on anything else."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        g = _guard(test.operand, me, names, lists)
        return None if g is None else not g
    if isinstance(test, ast.BoolOp):
        gs = [_guard(v, me, names, lists) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in gs else True if all(g is True for g in gs) else None
        return True if True in gs else False if all(g is False for g in gs) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.NotIn)) \
            and isinstance(test.left, ast.Name) and test.left.id in names and is_table(test.comparators[0], me):
        return isinstance(test.ops[0], ast.In)
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id in ("all", "any") \
            and len(test.args) == 1 and isinstance(test.args[0], ast.GeneratorExp):
        gen = test.args[0]
        if len(gen.generators) == 1 and not gen.generators[0].ifs and isinstance(gen.generators[0].iter, ast.Name) \
                and gen.generators[0].iter.id in lists and isinstance(gen.generators[0].target, ast.Name):
            inner = _guard(gen.elt, me, names | {gen.generators[0].target.id}, lists)
            if test.func.id == "all" and inner is False or test.func.id == "any" and inner is True:
                return inner
    return None


def _ends(body: list[ast.stmt]) -> bool:
    """The block ``body`` always leaves by its last statement."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def reached_statements(fn: ast.FunctionDef, names: set[str], lists: set[str]) -> list[ast.AST]:
    """The simple statements of ``fn``, and the tests/iterables of its compound ones, that a name
    the table holds reaches (see the module's docstring); a compound statement of another kind is
    kept whole."""
    args = fn.args.posonlyargs + fn.args.args
    me = args[0].arg if args else None
    out: list[ast.AST] = []

    def block(stmts: list[ast.stmt]) -> None:
        for st in stmts:
            if isinstance(st, ast.If):
                out.append(st.test)
                g = _guard(st.test, me, names, lists)
                if g is not False:
                    block(st.body)
                if g is not True:
                    block(st.orelse)
                if g is True and _ends(st.body) or g is False and _ends(st.orelse):
                    return
            elif isinstance(st, (ast.For, ast.AsyncFor)):
                out.append(st.iter)
                block(st.body)
                block(st.orelse)
            elif isinstance(st, ast.While):
                out.append(st.test)
                block(st.body)
                block(st.orelse)
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                out.extend(i.context_expr for i in st.items)
                block(st.body)
            elif isinstance(st, ast.Try):
                block(st.body)
                for h in st.handlers:
                    block(h.body)
                block(st.orelse)
                block(st.finalbody)
            else:
                out.append(st)
            if isinstance(st, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                return

    block(fn.body)
    return out

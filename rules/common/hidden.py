"""Constructs that change a model class's members past what its body says, which the index does
not follow: read by the ``interface`` gate (the target's MRO) and the ``aux-capture`` gate (the
holder's). Each makes the affected target ``unknown``, naming the construct and its ``file:line``:

- a class of the MRO that takes over attribute access (``__getattribute__``, ``__getattr__``,
  ``__setattr__``, ``__delattr__``): what a member read or write gives is its code's choice;
- a class-body attribute whose value is an instance of a tree class with ``__set_name__``: Python
  calls it with the owner class when the class statement ends, and it may change any member;
- a decorator of the tree (on a class of the MRO, or on one of the given members) whose wrapper
  reads a name of the decorator's scope that the decorator binds again after the wrapper is made:
  the wrapper calls what the name holds when it runs (the last binding), not what it was given.
"""

from __future__ import annotations

import ast

from auditor.index.facts import MethodFact
from auditor.index.providers import FactProvider
from auditor.index.targets import ClassRef, FunctionRef

#: The methods by which a class takes over its instances' attribute access.
ACCESS_HOOKS = ("__getattribute__", "__getattr__", "__setattr__", "__delattr__")

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _bound_names(node: ast.AST) -> set[str]:
    """The names a statement or target binds (assignment targets, loop and ``with`` targets,
    walrus, imports, ``del``)."""
    out: set[str] = set()
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        targets = [node.optional_vars]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        out |= {(a.asname or a.name).split(".")[0] for a in node.names}
    for t in targets:
        out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def _own_nodes(fn: ast.AST):
    """The nodes of ``fn``'s body, not descending into nested functions or classes (those are
    yielded themselves)."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, _FUNCS + (ast.ClassDef,)):
            todo.extend(ast.iter_child_nodes(n))


def rebound_closure(fn: ast.AST) -> tuple[str, int, int] | None:
    """``(name, line of the wrapper, line of the rebinding)`` when a function nested in ``fn``
    reads a name of ``fn``'s scope that ``fn`` binds again on a later line, else None."""
    own = list(_own_nodes(fn))
    binds: list[tuple[int, str]] = [(n.lineno, name) for n in own if isinstance(n, (ast.stmt, ast.NamedExpr))
                                    for name in _bound_names(n)]
    binds += [(n.lineno, name) for n in own if isinstance(n, ast.withitem) for name in _bound_names(n)
              if hasattr(n, "lineno")]
    args = fn.args
    local = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | {name for _, name in binds}
    for inner in own:
        if not isinstance(inner, _FUNCS):
            continue
        reads = {n.id for n in ast.walk(inner) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} & local
        end = getattr(inner, "end_lineno", inner.lineno)
        for line, name in sorted(binds):
            if name in reads and line > end:
                return name, inner.lineno, line
    return None


class DecoratorClosures(FactProvider):
    """:func:`rebound_closure` of a module-level function of the tree (key: ``(module, name)``),
    read from the module's syntax tree (only decorators of the tree get here)."""

    @classmethod
    def compute(cls, ctx, key):
        module, name = key
        tree = ctx.resolver.tree
        path = tree.path_of(module)
        if path is None:
            return None
        try:
            mod = ast.parse(tree.read(path))
        except (SyntaxError, ValueError, OSError, KeyError, RecursionError, MemoryError):
            return None
        defs = [n for n in mod.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
        return rebound_closure(defs[-1]) if defs else None


def _decorator(ctx, module: str, text: str, where: str) -> tuple[str, int] | None:
    """The unknown of a decorator written ``text`` in ``module`` when it is a function of the
    tree whose closure is rebound: ``(message, line)``; ``where`` says what it decorates."""
    r = ctx.resolver
    target = r.resolve_dotted(module, text.removesuffix("(...)"))
    if not isinstance(target, FunctionRef):
        return None
    hit = ctx.get(DecoratorClosures, (target.module, target.name))
    if hit is None:
        return None
    name, inner, line = hit
    path = r.tree.path_of(target.module)
    return (f"`@{text.replace('(...)', '(…)')}` on {where}: {target.name} ({path}) binds {name} again at "
            f"{path}:{line}, after the function at line {inner} that reads it is made, so that function calls "
            f"what {name} holds then: static analysis does not follow it", line)


def hidden_members(ctx, ref: ClassRef, members: tuple[str, ...] = ()) -> list[tuple[str, str | None, int | None]]:
    """What changes the members of class ``ref`` past its MRO's bodies (see the module docstring).

    Args:
        ctx: the audit context (``resolver``, ``get``).
        ref: the model class (the target, or its holder).
        members: the method names whose decorators to read (the protocol's methods).

    Returns:
        ``(message, path, line)`` per construct, in MRO order; empty when there is none.
    """
    r = ctx.resolver
    out = []
    for e in r.mro(ref).entries:
        c = r.cls(e) if isinstance(e, ClassRef) else None
        if c is None:
            continue
        path = r.tree.path_of(e.module)
        for hook in ACCESS_HOOKS:
            mf = c.methods.get(hook)
            if mf is not None:
                out.append((f"{e.name}.{hook} ({path}:{mf.line}) takes over attribute access on {ref.name}'s "
                            "instances: which members the engine finds there static analysis does not follow",
                            path, mf.line))
        for aname, af in c.attrs.items():
            if not (af.value or "").endswith("(...)"):
                continue
            t = r.resolve_dotted(e.module, af.value.removesuffix("(...)"))
            if isinstance(t, ClassRef) and r.lookup(t, "__set_name__") is not None:
                out.append((f"{e.name}.{aname} = {af.value.replace('(...)', '(…)')} ({path}:{af.line}): {t.name} "
                            f"defines __set_name__, which Python calls with {e.name} when its class statement ends and "
                            "which may change any member: static analysis does not follow it", path, af.line))
        for text in c.decorators:
            hit = _decorator(ctx, e.module, text, f"class {e.name} ({path}:{c.line})")
            if hit is not None:
                out.append((hit[0], r.tree.path_of(r.resolve_dotted(e.module, text.removesuffix("(...)")).module),
                            hit[1]))
        for name in members:
            mf = c.methods.get(name)
            if not isinstance(mf, MethodFact):
                continue
            for text in mf.decorators:
                hit = _decorator(ctx, e.module, text, f"{e.name}.{name} ({path}:{mf.line})")
                if hit is not None:
                    out.append((hit[0], r.tree.path_of(r.resolve_dotted(e.module, text.removesuffix("(...)")).module),
                                hit[1]))
    return out

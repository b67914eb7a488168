"""Why importing a module of the tree fails, read from its statements (never by importing it).

vLLM's registry imports a target's module when it first needs the class (its lazy registry);
a module whose import raises gives the engine no class at all. The statements checked are the
ones that always run when the module is imported (its top-level statements, not those inside an
``if`` or a ``try``), in order, and the first one that must raise is reported:

- ``from .x import name`` / ``import vllm.x`` of a module of the tree's package that the tree
  does not have (``ModuleNotFoundError``), or of a name that module binds nowhere (no statement
  of it binds the name, it has no star import, no module ``__getattr__``) and that is no
  sub-module of it (``ImportError``). The imported modules' own imports are not followed (a
  failure there would need the whole import graph, and the index's view of it is not exact);
- ``assert`` of a constant false value (``AssertionError``, unless Python runs with ``-O``);
- a call, as a statement, of a function defined above in the module whose first statement is
  a ``raise`` (``_refuse()``);
- a class statement whose bases, keywords, decorators or body (outside its functions) load a
  name bound nowhere in the module, nor in the class body, nor among the builtins
  (``NameError``). A module with a star import, a module ``__getattr__`` or a write to
  ``globals()`` is not checked for this (it may bind any name).

A module missing from a folder that could not be listed, one only present compiled
(``vllm/_C.abi3.so``), or a folder without ``__init__.py`` (a namespace package) is not
counted as missing.
"""

from __future__ import annotations

import ast
import builtins

from auditor.index.resolve import ClassRef, Resolver, Unresolved

_BUILTIN_NAMES = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__package__",
                                             "__loader__", "__builtins__", "__path__", "__annotations__",
                                             "__dict__", "__module__", "__qualname__"}
_SKIP = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.FunctionDef,
         ast.AsyncFunctionDef, ast.ClassDef)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str | None:
    """The absolute module of ``from ... import`` in ``module``, or None when it leaves the top."""
    if not node.level:
        return node.module
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    if node.level - 1 > len(base) - 1:
        return None
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _bound_by(node: ast.AST) -> set[str]:
    """The names one node binds in its scope (an assignment or deletion target, a definition, an
    import, a ``global``/``nonlocal``, an ``except ... as``, a ``match`` capture); empty for others."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return {node.id}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return set(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        return {node.name}
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest}
    return set()


def _all_bound(tree: ast.Module) -> set[str] | None:
    """Every name the module may bind anywhere (an over-approximation), or None when it may bind
    names it does not spell (a star import, a module ``__getattr__``, ``globals()``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars",
                                                                                               "exec", "eval"):
            return None
        names |= _bound_by(node)
    if "__getattr__" in names:
        return None
    return names


def _loads(node: ast.AST):
    """The names ``node`` loads when it is evaluated (not inside functions, lambdas or
    comprehensions, which run later or in a scope of their own)."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            yield n
            continue
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, _SKIP):
                todo.append(child)


def _class_name_error(cls: ast.ClassDef, bound: set[str]) -> tuple[int, str] | None:
    """``(line, name)`` of the first name a class statement loads at definition time that is
    bound nowhere (``bound``: the module's names), else None."""
    local: set[str] = set()
    for stmt in cls.body:
        for n in ast.walk(stmt):
            local |= _bound_by(n)
    exprs: list[ast.AST] = [*cls.decorator_list, *cls.bases, *cls.keywords]
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            exprs += [*stmt.decorator_list, *stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d)]
        elif isinstance(stmt, ast.ClassDef):
            inner = _class_name_error(stmt, bound | local)
            if inner is not None:
                return inner
        elif isinstance(stmt, ast.AnnAssign):  # annotations may be strings or postponed
            if stmt.value is not None:
                exprs.append(stmt.value)
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)):
            exprs.append(stmt)  # a statement that may not run (under if, try, a loop) is not checked
    for e in exprs:
        for n in _loads(e):
            if n.id not in bound and n.id not in local and n.id not in _BUILTIN_NAMES:
                return n.lineno, n.id
    return None


def module_import_failure(resolver: Resolver, module: str) -> tuple[str, int, str] | None:
    """Why importing ``module`` of the tree must raise, as ``(path, line, why)``, or None when no
    statement that always runs is seen to raise (see the module docstring). Memoised per resolver.

    Args:
        resolver: the tree's resolver.
        module: a dotted module the tree has.
    """
    memo = resolver.__dict__.setdefault("_import_failures", {})
    if module in memo:
        return memo[module]
    memo[module] = None  # an import cycle reads as no failure
    tree = resolver.tree
    s = tree.module(module)
    found = None
    if s is not None and not s.error:
        try:
            parsed = ast.parse(tree.read(s.path))
        except (SyntaxError, ValueError, RecursionError, MemoryError, KeyError, OSError):
            parsed = None
        if parsed is not None:
            bound = _all_bound(parsed)  # kept for :func:`_module_bound`: the module is parsed once
            resolver.__dict__.setdefault("_module_bound", {})[module] = bound
            found = _first_failure(resolver, s, parsed, bound)
    memo[module] = found
    return found


def _module_bound(resolver: Resolver, module: str) -> set[str] | None:
    """Every name module ``module`` may bind (see :func:`_all_bound`), or None when it may bind
    any name or cannot be parsed (memoised per resolver)."""
    memo = resolver.__dict__.setdefault("_module_bound", {})
    if module not in memo:
        s = resolver.tree.module(module)
        try:
            memo[module] = _all_bound(ast.parse(resolver.tree.read(s.path))) if s is not None else None
        except (SyntaxError, ValueError, RecursionError, MemoryError, KeyError, OSError):
            memo[module] = None
    return memo[module]


def _missing_module(resolver: Resolver, name: str) -> bool:
    """True when ``name`` is a module of the tree's package that the tree lacks (not one that only
    a folder the tree could not list, or a compiled module, may provide)."""
    tree = resolver.tree
    if name.split(".")[0] != tree.package or tree.has_module(name):
        return False
    rel = name.replace(".", "/")
    folders = resolver.__dict__.get("_tree_folders")
    if folders is None:
        folders = resolver.__dict__["_tree_folders"] = {
            p.rsplit("/", i)[0] for p in tree.files for i in range(1, p.count("/") + 1)}
    if rel in folders:
        return False  # a folder without __init__.py: a namespace package, which Python imports
    if tree.hidden_by(rel) is not None:
        return False
    compiled = getattr(tree.source, "compiled", {})
    return not any(p in compiled for p in (f"{rel}.py", f"{rel}/__init__.py"))


def _always_raises(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True when the function's first statement after the docstring and ``pass`` is a ``raise``."""
    for stmt in fn.body:
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        return isinstance(stmt, ast.Raise)
    return False


def _first_failure(resolver: Resolver, s, parsed: ast.Module, bound: set[str] | None) -> tuple[str, int, str] | None:
    raising: dict[str, int] = {}  # module-level functions defined so far whose call always raises
    for stmt in parsed.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _always_raises(stmt) and not stmt.decorator_list:
                raising[stmt.name] = stmt.lineno
            else:
                raising.pop(stmt.name, None)
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom, ast.ClassDef,
                             ast.Delete)):
            for n in ast.walk(stmt):  # a rebinding of the name: no longer the raising function
                if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    raising.pop(n.id, None)
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for a in stmt.names:
                    raising.pop((a.asname or a.name).split(".")[0], None)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name) \
                and stmt.value.func.id in raising and not isinstance(stmt.value.func.ctx, ast.Store):
            name = stmt.value.func.id
            return s.path, stmt.lineno, (f"`{ast.unparse(stmt)}` at {s.path}:{stmt.lineno} calls {name}() (defined at "
                                         f"{s.path}:{raising[name]}), which always raises, when the module is "
                                         "imported")
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if _missing_module(resolver, a.name):
                    return s.path, stmt.lineno, f"`import {a.name}` at {s.path}:{stmt.lineno} names a module the " \
                                                "tree does not have (ModuleNotFoundError when the module is imported)"
        elif isinstance(stmt, ast.ImportFrom):
            src = _absolute(s.module, s.is_package, stmt)
            if src is None or src.split(".")[0] != resolver.tree.package:
                continue
            text = ast.unparse(stmt)
            if _missing_module(resolver, src):
                return s.path, stmt.lineno, (f"`{text}` at {s.path}:{stmt.lineno} names a module the tree does not "
                                             "have (ModuleNotFoundError when the module is imported)")
            src_summary = resolver.tree.module(src)
            src_bound = _module_bound(resolver, src) if src_summary is not None and not src_summary.error else None
            for a in stmt.names:
                if a.name == "*" or src_bound is None or a.name in src_bound:
                    continue
                t = resolver.resolve_name(src, a.name)
                if isinstance(t, Unresolved) and t.reason == f"{a.name} is not bound in {src_summary.path}" \
                        and not resolver.tree.has_module(f"{src}.{a.name}"):
                    return s.path, stmt.lineno, (f"`{text}` at {s.path}:{stmt.lineno}: {src} does not bind "
                                                 f"{a.name} (ImportError when the module is imported)")
        elif isinstance(stmt, ast.Assert):
            test = stmt.test
            if isinstance(test, ast.Constant) and not test.value:
                return s.path, stmt.lineno, (f"`assert {ast.unparse(test)}` at {s.path}:{stmt.lineno} fails when the "
                                             "module is imported (AssertionError, unless Python runs with -O)")
        elif isinstance(stmt, ast.ClassDef) and bound is not None:
            hit = _class_name_error(stmt, bound)
            if hit is not None:
                line, name = hit
                return s.path, line, (f"the class statement of {stmt.name} loads {name} at {s.path}:{line}, a name "
                                      "bound nowhere in the module (NameError when the module is imported)")
    return None


def import_failures(resolver: Resolver, ref: ClassRef) -> list[tuple[str, int, str]]:
    """The modules the engine imports to load class ``ref`` whose import must raise: the modules
    of the classes on its MRO and the packages above them, as ``(path, line, why)`` (see
    :func:`module_import_failure`), each module once.

    Args:
        resolver: the tree's resolver.
        ref: the target class.
    """
    modules: list[str] = []
    for e in resolver.mro(ref).entries:
        if not isinstance(e, ClassRef):
            continue
        parts = e.module.split(".")
        for i in range(1, len(parts) + 1):
            m = ".".join(parts[:i])
            if m not in modules:
                modules.append(m)
    out = []
    for m in modules:
        if resolver.tree.has_module(m):
            hit = module_import_failure(resolver, m)
            if hit is not None:
                out.append(hit)
    return out

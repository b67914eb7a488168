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
- a number divided by the literal ``0`` as a statement's value (``ZeroDivisionError``);
- an assignment or expression statement that loads a name bound nowhere in the module nor
  among the builtins (``NameError``; not checked in a module that may bind any name, as for
  a class statement below);
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

from auditor.index.importsteps import bound_by_statement, class_name_error, may_bind, statement_name_error
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef, Unresolved

_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, KeyError, OSError)


def _parsed(resolver: Resolver, module: str) -> ast.Module | None:
    """The syntax tree of ``module`` of the tree, parsed again (only when a step needs more than
    its summary holds: a name that may be bound nowhere, a statement's text), or None when it
    cannot be read or parsed. The last one parsed is remembered."""
    last = resolver.__dict__.get("_import_parsed")
    if last is not None and last[0] == module:
        return last[1]
    s = resolver.tree.module(module)
    try:
        parsed = ast.parse(resolver.tree.read(s.path)) if s is not None else None
    except _PARSE_ERRORS:
        parsed = None
    resolver.__dict__["_import_parsed"] = (module, parsed)
    return parsed


def module_import_failure(resolver: Resolver, module: str) -> tuple[str, int, str] | None:
    """Why importing ``module`` of the tree must raise, as ``(path, line, why)``, or None when no
    statement that always runs is seen to raise (see the module docstring). It reads the steps
    the module's summary recorded (:attr:`auditor.index.facts.ModuleSummary.import_steps`);
    memoised per resolver.

    Args:
        resolver: the tree's resolver.
        module: a dotted module the tree has.
    """
    memo = resolver.__dict__.setdefault("_import_failures", {})
    if module in memo:
        return memo[module]
    memo[module] = None  # an import cycle reads as no failure
    s = resolver.tree.module(module)
    found = None
    if s is not None and not s.error and s.import_steps is not None:
        found = _first_failure(resolver, s)
    memo[module] = found
    return found


def _module_bound(resolver: Resolver, module: str) -> set[str] | None:
    """Every name module ``module`` may bind (see :func:`auditor.index.importsteps.may_bind`), or
    None when it may bind any name or cannot be parsed (memoised per resolver)."""
    memo = resolver.__dict__.setdefault("_module_bound", {})
    if module not in memo:
        parsed = _parsed(resolver, module)
        memo[module] = may_bind(parsed) if parsed is not None else None
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


def _declared_global(tree: ast.Module, name: str) -> bool:
    """True when some function or class of the module declares ``global name`` (a call of it may
    bind the name at any time)."""
    return any(isinstance(n, ast.Global) and name in n.names for n in ast.walk(tree))


def _statement_text(resolver: Resolver, module: str, index: int) -> str:
    """The text of top-level statement ``index`` of ``module`` as ``ast.unparse`` writes it."""
    parsed = _parsed(resolver, module)
    return ast.unparse(parsed.body[index]) if parsed is not None and index < len(parsed.body) else "?"


def _first_failure(resolver: Resolver, s) -> tuple[str, int, str] | None:
    """The first step of ``s.import_steps`` that must raise, as ``(path, line, why)``, or None."""
    package = resolver.tree.package
    for step in s.import_steps:
        kind, index, line = step[0], step[1], step[2]
        if kind == "call":
            text, name, defined = step[3], step[4], step[5]
            return s.path, line, (f"`{text}` at {s.path}:{line} calls {name}() (defined at {s.path}:{defined}), "
                                  "which always raises, when the module is imported")
        if kind == "zerodiv":
            return s.path, line, (f"`{step[3]}` at {s.path}:{line} divides by zero when the module is imported "
                                  "(ZeroDivisionError)")
        if kind == "name":
            bound = _module_bound(resolver, s.module)
            parsed = _parsed(resolver, s.module)
            if bound is None or parsed is None or index >= len(parsed.body):
                continue
            hit = statement_name_error(parsed.body[index], bound)
            if hit is not None:
                text = (_statement_text(resolver, s.module, index).splitlines() or ["?"])[0][:80]
                return s.path, hit[0], (f"`{text}` at {s.path}:{hit[0]} "
                                        f"loads {hit[1]}, a name bound nowhere in the module (NameError when the "
                                        "module is imported)")
            continue
        if kind == "early":
            parsed = _parsed(resolver, s.module)
            if parsed is None or _module_bound(resolver, s.module) is None or _declared_global(parsed, step[3]):
                continue  # a star import, globals(), or a function that may bind it when called
            text = (_statement_text(resolver, s.module, index).splitlines() or ["?"])[0][:80]
            first = next((st.lineno for st in parsed.body[index + 1:] if step[3] in bound_by_statement(st)), "?")
            return s.path, line, (f"`{text}` at {s.path}:{line} loads {step[3]}, which the module binds only "
                                  f"later (line {first}): NameError when the module is imported")
        if kind == "assert":
            return s.path, line, (f"`assert {step[3]}` at {s.path}:{line} fails when the module is imported "
                                  "(AssertionError, unless Python runs with -O)")
        if kind == "import":
            for name in step[3]:
                if _missing_module(resolver, name):
                    return s.path, line, f"`import {name}` at {s.path}:{line} names a module the " \
                                         "tree does not have (ModuleNotFoundError when the module is imported)"
        elif kind == "from":
            src, names = step[3], step[4]
            if src is None or src.split(".")[0] != package:
                continue
            if _missing_module(resolver, src):
                return s.path, line, (f"`{_statement_text(resolver, s.module, index)}` at {s.path}:{line} names a "
                                      "module the tree does not have (ModuleNotFoundError when the module is "
                                      "imported)")
            src_summary = resolver.tree.module(src)
            if src_summary is None or src_summary.error:
                continue
            for name in names:
                if name == "*":
                    continue
                t = resolver.resolve_name(src, name)
                if not (isinstance(t, Unresolved) and t.reason == f"{name} is not bound in {src_summary.path}"
                        and not resolver.tree.has_module(f"{src}.{name}")):
                    continue
                src_bound = _module_bound(resolver, src)
                if src_bound is None or name in src_bound:
                    continue
                return s.path, line, (f"`{_statement_text(resolver, s.module, index)}` at {s.path}:{line}: {src} "
                                      f"does not bind {name} (ImportError when the module is imported)")
        elif kind == "class":
            bound = _module_bound(resolver, s.module)
            parsed = _parsed(resolver, s.module)
            if bound is None or parsed is None or index >= len(parsed.body) \
                    or not isinstance(parsed.body[index], ast.ClassDef):
                continue
            stmt = parsed.body[index]
            hit = class_name_error(stmt, bound)
            if hit is not None:
                hline, name = hit
                return s.path, hline, (f"the class statement of {stmt.name} loads {name} at {s.path}:{hline}, a "
                                       "name bound nowhere in the module (NameError when the module is imported)")
    return None


def import_failures(resolver: Resolver, ref: ClassRef) -> list[tuple[str, int, str]]:
    """The modules the engine imports to load class ``ref`` whose import must raise: the modules
    of the classes on its MRO and the packages above them, as ``(path, line, why)`` (see
    :func:`module_import_failure`), each module once; when none must, the first in-tree module
    they import from unconditionally whose own import must raise (one level: its imports are
    not followed further), reported at the importing statement.

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
    tree = resolver.tree
    modules = [m for m in modules if tree.has_module(m)]
    # the modules, then the in-tree modules they import from, summarised together ahead
    tree.summarize_ahead(p for p in map(tree.path_of, modules) if p)
    sources = set()
    for m in modules:
        s = tree.module(m)
        for step in (s.import_steps or ()) if s is not None else ():
            if step[0] == "from" and step[3]:
                sources.add(step[3])
    tree.summarize_ahead(p for p in map(tree.path_of, sources) if p)
    out = []
    for m in modules:
        if resolver.tree.has_module(m):
            hit = module_import_failure(resolver, m)
            if hit is not None:
                out.append(hit)
    if out:
        return out
    # the in-tree modules those import from, unconditionally (``from .utils import x`` in the
    # model module): importing one that must fail fails the model module's import too
    for m in modules:
        s = tree.module(m)
        for step in (s.import_steps or ()) if s is not None else ():
            src = step[3] if step[0] == "from" else None
            if not src or src in modules or not tree.has_module(src):
                continue
            hit = module_import_failure(resolver, src)
            if hit is not None:
                path, line, why = hit
                out.append((s.path, step[2], f"`from {src} import ...` at {s.path}:{step[2]} imports {src}, whose "
                                             f"import fails: {why}"))
                return out
    return out

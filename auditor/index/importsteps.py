"""The statements of a module that may make its import raise, recorded once when it is summarised.

:mod:`auditor.index.imports` says why importing a module of the tree must fail. What it reads of a
module does not depend on the rest of the tree except for the modules and names it imports, so it
is recorded here, from the syntax tree :func:`auditor.index.summary.summarize` already parsed, as a
short list of *steps* in statement order (:func:`import_steps`); the tree-dependent part of the
check (is the imported module in the tree, does it bind the name) runs later over those steps,
without parsing the module again.

A step is a tuple whose first item is its kind and whose next two are the index of the top-level
statement in the module body and its line:

- ``("import", index, line, [dotted, ...])``: ``import a.b, c``;
- ``("from", index, line, source or None, [name, ...])``: ``from .x import a, b`` (``source``: the
  absolute module, None when the relative import leaves the top package);
- ``("assert", index, line, test text)``: ``assert`` of a constant false value, which always
  raises (unless Python runs with ``-O``): the last step recorded;
- ``("call", index, line, statement text, name, definition line)``: a call (the statement, or a
  value, argument or operand it always evaluates) of a function defined above whose first statement is a ``raise``: the last step recorded;
- ``("zerodiv", index, line, text)``: a statement whose value is a number divided by the literal
  ``0`` (``1 / 0``), which always raises ZeroDivisionError: the last step recorded;
- ``("name", index, line)``: an assignment or expression statement, or the header of a compound
  one (an ``if`` test, a ``for`` iterable, a decorator or default), that loads a name the module's
  top-level statements do not bind, nor the builtins (whether it is bound anywhere is decided when
  the step is checked, as for a class);
- ``("early", index, line, name)``: an assignment or expression statement, or the header of a
  compound one, that loads a name the module's top-level statements bind only after it (NameError,
  unless something else binds the name first: whether anything may is decided when the step is
  checked);
- ``("class", index, line)``: a class statement that loads, at definition time, a name that
  neither the module's top-level statements nor the class body's own statements bind, nor the
  builtins: whether that name is bound anywhere in the module (:func:`may_bind`) is decided when
  the step is checked.

Only top-level statements that always run are recorded (not those under ``if`` or ``try``).
"""

from __future__ import annotations

import ast
import builtins

from auditor.index.syntax import walk

#: Names every module and class body can load without binding them.
BUILTIN_NAMES = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__spec__", "__package__",
                                            "__loader__", "__builtins__", "__path__", "__annotations__",
                                            "__dict__", "__module__", "__qualname__", "__cached__"}
_SKIP = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.FunctionDef,
         ast.AsyncFunctionDef, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)


def absolute_source(module: str, is_package: bool, node: ast.ImportFrom) -> str | None:
    """The absolute module of ``from ... import`` in ``module`` (``is_package``: the module is a
    package's ``__init__``), or None when a relative import leaves the top package."""
    if not node.level:
        return node.module
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    if node.level - 1 > len(base) - 1:
        return None
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def bound_by(node: ast.AST) -> set[str]:
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


def may_bind(tree: ast.Module) -> set[str] | None:
    """Every name the module may bind anywhere (an over-approximation: any scope, any branch), or
    None when it may bind names it does not spell (a star import, a module ``__getattr__``, a call
    of ``globals``, ``vars``, ``exec`` or ``eval``).

    Args:
        tree: the module's syntax tree, as parsed (before dead code is pruned).
    """
    names: set[str] = set()
    for node in walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars",
                                                                                               "exec", "eval"):
            return None
        names |= bound_by(node)
    if "__getattr__" in names:
        return None
    return names


def loads(node: ast.AST):
    """The ``ast.Name`` nodes ``node`` loads when it is evaluated (not inside functions, lambdas
    or comprehensions, which run later or in a scope of their own), depth first."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            yield n
            continue
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, _SKIP):
                todo.append(child)


def class_definition_exprs(cls: ast.ClassDef) -> list[ast.AST]:
    """The parts of a class statement evaluated when it runs: decorators, bases, keywords, its
    methods' decorators and defaults, and the values of its body's assignments and expressions
    (nested classes are left to the caller)."""
    exprs: list[ast.AST] = [*cls.decorator_list, *cls.bases, *cls.keywords]
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            exprs += [*stmt.decorator_list, *stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d)]
        elif isinstance(stmt, ast.AnnAssign):  # annotations may be strings or postponed
            if stmt.value is not None:
                exprs.append(stmt.value)
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)):
            exprs.append(stmt)  # a statement that may not run (under if, try, a loop) is not checked
    return exprs


def class_name_error(cls: ast.ClassDef, bound: set[str]) -> tuple[int, str] | None:
    """``(line, name)`` of the first name a class statement loads at definition time that is
    bound nowhere (``bound``: every name the module may bind, :func:`may_bind`; the class body's
    own bindings, in any of its scopes, also count), else None."""
    local: set[str] = set()
    for stmt in cls.body:
        for n in walk(stmt):
            local |= bound_by(n)
    for stmt in cls.body:
        if isinstance(stmt, ast.ClassDef):
            inner = class_name_error(stmt, bound | local)
            if inner is not None:
                return inner
    for e in class_definition_exprs(cls):
        for n in loads(e):
            if n.id not in bound and n.id not in local and n.id not in BUILTIN_NAMES:
                return n.lineno, n.id
    return None


def _shallow_bound(body: list[ast.stmt]) -> set[str]:
    """The names the statements of one block bind in its own scope, through its nested blocks
    (``if``, ``for``, ``with``, ``try``, ``while``) but not its functions or classes: a subset of
    what :func:`may_bind` and :func:`class_name_error` count as bound."""
    out: set[str] = set()
    todo = list(body)
    while todo:
        st = todo.pop()
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            out |= bound_by(st)
            continue
        targets: list[ast.AST] = []
        if isinstance(st, ast.Assign):
            targets = list(st.targets)
        elif isinstance(st, (ast.AnnAssign, ast.AugAssign)):
            targets = [st.target]
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            targets = [st.target]
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in st.items if i.optional_vars is not None]
        for t in targets:
            for n in walk(t):
                if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):  # not X of ``X.a = v``
                    out.add(n.id)
        if isinstance(st, _BLOCKS):
            todo += getattr(st, "body", []) + getattr(st, "orelse", []) + getattr(st, "finalbody", [])
            for h in getattr(st, "handlers", []):
                if h.name:
                    out.add(h.name)
                todo += h.body
    return out


def bound_by_statement(stmt: ast.stmt) -> set[str]:
    """The names one top-level statement binds in the module's scope (through its nested blocks,
    not its functions or classes; see :func:`_shallow_bound`)."""
    return _shallow_bound([stmt])


def _class_may_fail(cls: ast.ClassDef, shallow: set[str]) -> bool:
    """True when the class statement loads a name that ``shallow`` (the module's top-level
    bindings), its own body's statements and the builtins all leave unbound: only then can
    :func:`class_name_error` find a name error in it."""
    local = _shallow_bound(cls.body)
    seen = shallow | local
    for stmt in cls.body:
        if isinstance(stmt, ast.ClassDef) and _class_may_fail(stmt, seen):
            return True
    for e in class_definition_exprs(cls):
        for n in loads(e):
            if n.id not in seen and n.id not in BUILTIN_NAMES:
                return True
    return False


def _always_raises(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True when the function's first statement after the docstring and ``pass`` is a ``raise``."""
    for stmt in fn.body:
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        return isinstance(stmt, ast.Raise)
    return False


def import_steps(tree: ast.Module, module: str, is_package: bool) -> list[tuple]:
    """The steps of the module's import that may raise (see the module docstring), in order.

    Args:
        tree: the module's syntax tree as parsed (before dead code is pruned).
        module: its dotted name; is_package: it is a package's ``__init__``.

    Returns:
        The steps; an ``assert`` or ``call`` step, which always raises, is the last one.
    """
    steps: list[tuple] = []
    shallow: set[str] | None = None
    before: set[str] | None = None  # the names the top-level statements so far bind (once needed)
    raising: dict[str, int] = {}  # module-level functions defined so far whose call always raises
    for i, stmt in enumerate(tree.body):
        if before is not None:
            before |= _shallow_bound([tree.body[i - 1]])
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if stmt.decorator_list or stmt.args.defaults or any(stmt.args.kw_defaults):
                if shallow is None:
                    shallow = _shallow_bound(tree.body)
                if any(n.id not in shallow and n.id not in BUILTIN_NAMES for n in _statement_loads(stmt)):
                    steps.append(("name", i, stmt.lineno))  # a decorator or default bound nowhere
            if _always_raises(stmt) and not stmt.decorator_list:
                raising[stmt.name] = stmt.lineno
            else:
                raising.pop(stmt.name, None)
            continue
        if raising and isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom,
                                         ast.ClassDef, ast.Delete)):
            for n in walk(stmt):  # a rebinding of the name: no longer the raising function
                if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    raising.pop(n.id, None)
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for a in stmt.names:
                    raising.pop((a.asname or a.name).split(".")[0], None)
        call = _raising_call(stmt, raising) if raising else None
        if call is not None:
            steps.append(("call", i, stmt.lineno, ast.unparse(stmt), call, raising[call]))
            return steps
        if isinstance(stmt, ast.Import):
            steps.append(("import", i, stmt.lineno, [a.name for a in stmt.names]))
        elif isinstance(stmt, ast.ImportFrom):
            source = absolute_source(module, is_package, stmt)
            steps.append(("from", i, stmt.lineno, source, [a.name for a in stmt.names]))
        elif isinstance(stmt, ast.Assert):
            test = stmt.test
            if isinstance(test, ast.Constant) and not test.value:
                steps.append(("assert", i, stmt.lineno, ast.unparse(test)))
                return steps
        elif isinstance(stmt, ast.ClassDef):
            if shallow is None:
                shallow = _shallow_bound(tree.body)
            if _class_may_fail(stmt, shallow):
                steps.append(("class", i, stmt.lineno))
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.If, ast.While, ast.For,
                               ast.AsyncFor, ast.With, ast.AsyncWith)):
            zero = _divides_by_zero(stmt)
            if zero is not None:
                steps.append(("zerodiv", i, stmt.lineno, zero))
                return steps
            if shallow is None:
                shallow = _shallow_bound(tree.body)
            loaded = _statement_loads(stmt)
            if any(n.id not in shallow and n.id not in BUILTIN_NAMES for n in loaded):
                steps.append(("name", i, stmt.lineno))
            if before is None:
                before = _shallow_bound(tree.body[:i])
            early = next((n for n in loaded if n.id in shallow and n.id not in before), None)
            if early is not None:
                steps.append(("early", i, early.lineno, early.id))
    return steps


def _raising_call(stmt: ast.stmt, raising: dict[str, int]) -> str | None:
    """The name of a function of ``raising`` that the simple statement always calls (its value, an
    argument or operand of it: :func:`_always_evaluated`), else None."""
    if not isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)) or stmt.value is None:
        return None
    for n in _always_evaluated(stmt.value):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in raising:
            return n.func.id
    return None


def _evaluated_loads(node: ast.AST) -> list[ast.Name]:
    """The ``ast.Name`` nodes loaded among what evaluating ``node`` always evaluates
    (:func:`_always_evaluated`)."""
    return [n for n in _always_evaluated(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _statement_loads(stmt: ast.stmt) -> list[ast.Name]:
    """The names a top-level statement always loads when it runs: of a simple statement its value
    and the objects its targets write through (``X`` of ``X.a = v``; an annotation is left out, it
    may be postponed); of a compound one its header (the test of ``if``/``while``, the iterable
    of ``for``, the context managers of ``with``, a function's decorators and defaults), whose
    body may not run. Operands that may be skipped (past the first of ``and``/``or``, the
    branches of a conditional expression) are left out."""
    if isinstance(stmt, ast.AnnAssign):
        return _evaluated_loads(stmt.value) + _evaluated_loads(stmt.target) if stmt.value is not None else []
    if isinstance(stmt, (ast.If, ast.While)):
        return _evaluated_loads(stmt.test)
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return _evaluated_loads(stmt.iter)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [n for item in stmt.items for n in _evaluated_loads(item.context_expr)]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = stmt.args
        return [n for e in [*stmt.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d)]
                for n in _evaluated_loads(e)]
    return _evaluated_loads(stmt)


def statement_name_error(stmt: ast.stmt, bound: set[str]) -> tuple[int, str] | None:
    """``(line, name)`` of the first name a simple top-level statement loads that is bound nowhere
    in the module (``bound``: :func:`may_bind`) nor among the builtins, else None."""
    for n in _statement_loads(stmt):
        if n.id not in bound and n.id not in BUILTIN_NAMES:
            return n.lineno, n.id
    return None


def _number(node: ast.AST) -> float | None:
    """The value of a number written as a literal (``3``, ``-0``, ``+1.5``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _always_evaluated(node: ast.AST):
    """The sub-expressions of ``node`` that evaluating it always evaluates, outermost first: not
    inside a function or lambda, nor of a comprehension more than its first iterable, nor past the first operand of ``and``/``or`` or
    the test of a conditional expression."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, ast.BoolOp):
            todo.append(n.values[0])
        elif isinstance(n, ast.IfExp):
            todo.append(n.test)
        elif isinstance(n, _COMPREHENSIONS):
            todo.append(n.generators[0].iter)  # the rest runs in the comprehension's own scope
        elif not isinstance(n, _SKIP):
            todo.extend(ast.iter_child_nodes(n))


def _divides_by_zero(stmt: ast.stmt) -> str | None:
    """The text of ``a / 0`` (``//``, ``%``; ``a`` and ``0`` numbers written as literals) when the
    statement always evaluates it (its value, an argument, an operand: see
    :func:`_always_evaluated`), which then raises ZeroDivisionError; else None."""
    value = getattr(stmt, "value", None)  # of ``x /= 0`` the right-hand side: no literal left operand
    if value is None:
        return None
    for n in _always_evaluated(value):
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv, ast.Mod)) \
                and _number(n.left) is not None and _number(n.right) == 0:
            return ast.unparse(n)
    return None

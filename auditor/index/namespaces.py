"""The summary pass's reading of bindings and changes made behind the index's back.

:class:`NamespacesMixin`, a part of :class:`auditor.index.summary._Summarizer`: names bound through
``global``, ``globals()``/``vars()``, ``sys.modules`` or a walrus (``_dynamic``), writes to the
module's or a class body's namespace in any scope, and text run as code (``exec``/``eval``, ``runpy``,
``types.FunctionType``) (``_namespaces``, ``_runs_code``), with the dotted names a module's own
bindings spell (``_canon``).
"""

from __future__ import annotations

import ast

from auditor.index.facts import RUNS_CODE, ClassFact
from auditor.index.syntax import COMPOUND, construct_text, dict_owner, dotted, node_text, walk


#: the calls that run text as code (``types.FunctionType(code, globals)`` makes a function of a
#: code object: calling it runs that code)
_RUNS_TEXT = frozenset({"exec", "eval", "builtins.exec", "builtins.eval", "types.FunctionType",
                        "types.LambdaType", "runpy.run_path", "runpy.run_module"})
#: the calls that make a caller of a method named by a string (``operator.methodcaller("__delattr__",
#: "m")(Cls)`` deletes a member): one whose name is a dunder or not a constant is taken as code run
_CALLS_BY_NAME = frozenset({"operator.methodcaller"})
#: the calls of :data:`_RUNS_TEXT` and :data:`_CALLS_BY_NAME` whose string argument is no code
#: (a path, a module or a method name)
_RUNS_NO_TEXT = frozenset({"runpy.run_path", "runpy.run_module"}) | _CALLS_BY_NAME
#: the calls that give back a module's object by its name (``__import__(__name__, fromlist=...)``,
#: ``importlib.import_module(__name__)``, ``sys.modules.get(__name__)``)
_MODULE_BY_NAME = frozenset({"sys.modules.get", "importlib.import_module", "__import__", "builtins.__import__",
                             "importlib.__import__"})
#: dictionary methods that change the dictionary they are called on
_DICT_CHANGES = frozenset({"update", "setdefault", "pop", "clear", "__setitem__", "__delitem__", "popitem"})


def _ran_text(call: ast.Call) -> str | None:
    """The source text an ``exec``/``eval`` call runs when it is a constant (or the constant
    compiled by ``compile(text, ...)``), else None."""
    arg = call.args[0] if call.args else None
    if isinstance(arg, ast.Call) and dotted(arg.func) in ("compile", "builtins.compile") and arg.args:
        arg = arg.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _names_in(tree: ast.AST) -> set[str]:
    """Every name a piece of code mentions or binds: names, ``global`` names, what its imports
    bind, the functions and classes it defines; ``"*"`` when it star-imports."""
    out: set[str] = set()
    for n in walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update("*" if a.name == "*" else a.asname or a.name.split(".")[0] for a in n.names)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
    return out


class NamespacesMixin:
    """The namespace pass of the summariser (a mixin of :class:`auditor.index.summary._Summarizer`,
    whose state it reads and writes: ``s`` the summary being built, ``_mark``, ``_seen``,
    ``_handled``, ``_class_nodes``, ``_self_names``, ``_self_dicts`` and the byte-test flags)."""

    def _dynamic(self, tree: ast.Module) -> None:
        """Bindings made behind the index's back, anywhere in the module: ``global X`` in a
        function, writes through ``globals()``/``vars()``, ``setattr`` on ``sys.modules[...]``, and
        walrus assignments in module-level expressions."""
        def is_globals(n: ast.AST) -> bool:
            # ``vars()``/``locals()`` are the module's namespace only at module level, a class body's
            # or a function's elsewhere: :meth:`_namespaces` tells them apart
            return isinstance(n, ast.Call) and not n.args and dotted(n.func) == "globals" \
                and id(n) not in self._handled

        if self.globals_stmt:  # statements only: ``global`` is one, and expressions are most of the nodes
            stack = list(tree.body)
            while stack:
                st = stack.pop()
                if isinstance(st, ast.Global):
                    for n in st.names:
                        self._mark(n, f"`global {n}` in a function (line {st.lineno})", st.lineno, False)
                elif isinstance(st, COMPOUND):
                    for fld in ("body", "orelse", "finalbody"):
                        stack.extend(getattr(st, fld, None) or ())
                    for h in getattr(st, "handlers", ()) or ():
                        stack.extend(h.body)
                    for c in getattr(st, "cases", ()) or ():
                        stack.extend(c.body)
        for node in walk(tree) if self.dynamic else ():
            if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load) and is_globals(node.value):
                key = node.slice
                name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
                self._mark(name, f"a write through {dotted(node.value.func)}() (line {node.lineno})", node.lineno,
                           False)
            elif isinstance(node, ast.Attribute) and is_globals(node.value) and node.attr in (
                    "update", "setdefault", "__setitem__", "pop", "popitem", "clear", "__delitem__"):
                self._mark("*", f"a write through {dotted(node.value.func)}() (line {node.lineno})", node.lineno,
                           False)
            elif isinstance(node, ast.Call) and dotted(node.func) in ("setattr", "delattr") and node.args \
                    and "sys.modules" in node_text(node.args[0]):
                key = node.args[1] if len(node.args) > 1 else None
                name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
                self._mark(name, f"{dotted(node.func)}() on the module object (line {node.lineno})", node.lineno, False)
        # walrus at module scope (not in functions, lambdas or class bodies)
        stack = [st for st in tree.body if id(st) not in self._handled] if self.walrus else []
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name) and id(node) not in self._handled:
                self._mark(node.target.id, f"a walrus assignment (line {node.lineno})", node.lineno)
            stack.extend(ast.iter_child_nodes(node))

    def _canon(self, node: ast.AST) -> str | None:
        """The dotted name ``node`` spells, its first part followed through this module's
        bindings (``from importlib import import_module as im`` → ``importlib.import_module``,
        ``_mods = sys.modules`` → ``sys.modules``, ``import types as t`` → ``types``; a few steps at
        most); None when ``node`` is no dotted name."""
        d = dotted(node)
        for _ in range(4):
            if d is None:
                return None
            first, dot, rest = d.partition(".")
            b = self.s.bindings.get(first)
            if b is None:
                return d
            if b.kind == "import":
                head = f"{b.target[0]}.{b.target[1]}" if b.target[0] else b.target[1]
            elif b.kind == "module":
                head = b.target
            elif b.kind == "alias" and b.target.split(".")[0] != first:
                head = b.target
            else:
                return d
            if head == first:
                return d
            d = head + dot + rest
        return d

    def _runs_text_call(self, call: ast.Call) -> bool:
        """``call`` runs text or a code object as code: ``exec``/``eval`` (under any name this
        module binds them to, or handed to the call as an argument), ``getattr(builtins,
        "exec")(...)`` and ``vars(builtins)["exec"](...)`` (or a key computed at run time on
        builtins), ``types.FunctionType(code, ...)``."""
        fn = call.func
        if self._canon(fn) in _RUNS_TEXT:
            return True
        # ``functools.partial(exec, text)()``, ``map(eval, texts)``: exec or eval handed on
        if any(self._canon(a) in _RUNS_TEXT for a in call.args + [k.value for k in call.keywords]):
            return True
        if isinstance(fn, ast.Subscript):
            # ``vars(builtins)["exec"](...)``, ``builtins.__dict__[k](...)``, ``__builtins__["eval"](...)``
            owner = dict_owner(fn.value)
            space = self._canon(owner) if owner is not None else self._canon(fn.value)
            if space in ("builtins", "__builtins__"):
                key = fn.slice
                return not isinstance(key, ast.Constant) or key.value in ("exec", "eval")
        if isinstance(fn, ast.Call) and dotted(fn.func) == "getattr" and len(fn.args) >= 2:
            obj, key = fn.args[0], fn.args[1]
            if isinstance(key, ast.Constant):
                return key.value in ("exec", "eval")
            return self._canon(obj) in ("builtins", "__builtins__")
        if isinstance(fn, ast.Attribute) and fn.attr in ("exec", "eval") and isinstance(fn.value, ast.Call) \
                and self._canon(fn.value.func) in _MODULE_BY_NAME:
            # ``importlib.import_module("built" + "ins").exec(...)``: a module found by its name
            arg = fn.value.args[0] if fn.value.args else None
            return not (isinstance(arg, ast.Constant) and arg.value not in ("builtins", "__builtins__"))
        if self._canon(fn) in _CALLS_BY_NAME:
            arg = call.args[0] if call.args else None
            return not (isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("__"))
        return False

    def _namespace_of(self, node: ast.AST, scope: str) -> str | None:
        """What ``node`` denotes when it is a namespace: ``"module"`` for this module's object
        (``sys.modules[__name__]``, ``sys.modules["<this module>"]``), ``"module-dict"`` for its
        dictionary (``globals()``, ``vars()``/``locals()`` at module level, ``vars(M)``,
        ``M.__dict__`` of the module object), ``"class-dict"`` for the namespace of the class body
        being run (``locals()``/``vars()`` in a class body, ``scope == "class"``); else None."""
        if isinstance(node, ast.Name):
            # a module-level name bound to this module (``_me = sys.modules[__name__]``, ``from .
            # import llama as _me`` in llama.py)
            b = self.s.bindings.get(node.id)
            if b is not None and (b.kind == "module" and b.target == self.s.module or b.kind == "import"
                                  and ".".join(b.target) == self.s.module or node.id in self._self_names):
                return "module"
            if node.id in self._self_dicts:
                return "module-dict"  # ``_d = sys.modules[__name__].__dict__``
            return None
        if isinstance(node, ast.Subscript) and self._canon(node.value) == "sys.modules":
            key = node.slice
            if isinstance(key, ast.Name) and key.id == "__name__" or (
                    isinstance(key, ast.Constant) and key.value == self.s.module):
                return "module"
            return None
        if isinstance(node, ast.Call) and self._canon(node.func) in _MODULE_BY_NAME and node.args:
            # ``sys.modules.get(__name__)``, ``importlib.import_module(__name__)``,
            # ``__import__(__name__, fromlist=[...])`` (without ``fromlist`` the top package: taken
            # as the module too, which can only make a verdict ``unknown``)
            key = node.args[0]
            if isinstance(key, ast.Name) and key.id == "__name__" or (
                    isinstance(key, ast.Constant) and key.value == self.s.module):
                return "module"
            return None
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            fn = dotted(node.func)
            if fn == "globals" or fn in ("locals", "vars") and scope == "module":
                return "module-dict"
            if fn in ("locals", "vars") and scope == "class":
                return "class-dict"
            return None
        owner = dict_owner(node)
        if owner is not None and self._namespace_of(owner, scope) == "module":
            return "module-dict"
        return None

    def _namespaces(self, tree: ast.Module) -> None:
        """Changes the index cannot follow to a namespace, in every scope of the module: writes
        to this module's names through its module object or its dictionary
        (``sys.modules[__name__].X = v``, ``sys.modules[__name__].__dict__["X"] = v``,
        ``vars(sys.modules[__name__]).pop("X")``, ``locals()["X"] = v`` at module level), writes
        to a class body's namespace (``locals()``/``vars()`` there), ``self.__class__ = C`` in a
        method, and text run as code (``exec``/``eval``, of a constant or not). A module name so
        changed goes to :attr:`ModuleSummary.unfollowable` (ordered when the change runs with the
        module's import), a class member to the class's ``unfollowable``; text run as code also
        makes every class of this module, and (as :data:`RUNS_CODE`) every object it reaches,
        changed in a way not followed."""
        def key_of(node: ast.AST | None) -> str:
            return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "*"

        # ``exec``/``eval`` and the module-level names bound to them (``_run = exec``, ``from
        # builtins import exec as _run``)
        stack: list[tuple[ast.AST, str, ClassFact | None, str | None, str | None]] = \
            [(st, "module", None, None, None) for st in tree.body]
        while stack:
            node, scope, cf, me, label = stack.pop()
            line = getattr(node, "lineno", 0)
            ordered = scope == "module"
            if isinstance(node, ast.ClassDef):
                inner_cf = self._class_nodes.get(id(node))
                qual = f"{label}.{node.name}" if label else node.name
                for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                    stack.append((d, scope, cf, me, label))
                stack.extend((st, "class", inner_cf, None, qual) for st in node.body)
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                params = node.args.posonlyargs + node.args.args
                first = params[0].arg if params and scope == "class" else None
                sub = f"{label}.{node.name}" if label and not isinstance(node, ast.Lambda) else \
                    (label or getattr(node, "name", "<lambda>"))
                body = node.body if isinstance(node.body, list) else [node.body]
                stack.extend((st, "function", cf if scope == "class" else None, first, sub) for st in body)
                continue
            if isinstance(node, ast.Call) and self._runs_text_call(node):
                self._runs_code(node, scope, cf, label, construct_text(node), line)
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                if node.attr == "__class__" and me is not None and isinstance(node.value, ast.Name) \
                        and node.value.id == me and cf is not None:
                    cf.unfollowable.append(("*", f"{construct_text(node)} = ... (the instance's class replaced in a "
                                            "method)", line))
                elif self._namespace_of(node.value, scope) == "module":
                    self._seen.add(id(node))
                    self._mark(node.attr, f"`{construct_text(node)}` (line {line}), a write through the module object",
                               line, ordered)
            elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
                kind = self._namespace_of(node.value, scope)
                if kind == "module-dict" and id(node.value) not in self._handled:
                    self._seen.add(id(node))
                    self._mark(key_of(node.slice), f"`{construct_text(node)}` (line {line}), a write through the "
                               "module's namespace", line, ordered)
                elif kind == "class-dict" and cf is not None:
                    cf.unfollowable.append((key_of(node.slice), f"{construct_text(node)} = ... (a write through the "
                                            "class body's namespace)", line))
            elif isinstance(node, ast.Call) and dotted(node.func) in ("setattr", "delattr", "builtins.setattr",
                                                                      "builtins.delattr") and node.args \
                    and self._namespace_of(node.args[0], scope) == "module":
                self._seen.add(id(node))
                self._mark(key_of(node.args[1] if len(node.args) > 1 else None),
                           f"`{construct_text(node)}` (line {line}), a write through the module object", line, ordered)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _DICT_CHANGES:
                kind = self._namespace_of(node.func.value, scope)
                key = key_of(node.args[0]) if node.args and node.func.attr not in ("update", "clear") else "*"
                if kind == "module-dict":
                    self._seen.add(id(node))
                    self._mark(key, f"`{construct_text(node)}` (line {line}), a write through the module's namespace",
                               line, ordered)
                elif kind == "class-dict" and cf is not None:
                    cf.unfollowable.append((key, f"{construct_text(node)} (a write through the class body's namespace)",
                                            line))
            stack.extend((c, scope, cf, me, label) for c in ast.iter_child_nodes(node))

    def _runs_code(self, call: ast.Call, scope: str, cf: ClassFact | None, label: str | None, construct: str,
                   line: int) -> None:
        """Record what ``exec``/``eval`` of ``call`` (in ``scope``, class ``cf``, scope label
        ``label``) may change: the names its text mentions (every name when it is not a constant
        or does not parse), the members of every class of this module and of the objects it
        reaches (:data:`RUNS_CODE`). ``call`` may also be a ``runpy`` call or a method caller:
        what they run is not in their text."""
        text = _ran_text(call) if isinstance(call, ast.Call) and self._canon(call.func) not in _RUNS_NO_TEXT else None
        names: set[str] = {"*"}
        if text is not None:
            try:
                names = _names_in(ast.parse(text))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                names = {"*"}
        what = f"`{construct}` (line {line}), which runs text as code"
        self._seen.add(id(call))
        for n in sorted(names):
            self._mark(n, what, line, scope == "module")
        if cf is not None:
            cf.unfollowable.append(("*", f"{construct} (text run as code)", line))
        for c in self.s.classes.values():
            if c is not cf and ("*" in names or c.name in names):
                c.unfollowable.append(("*", f"{construct} (text run as code)", line))
        # what it may change elsewhere: any object the module reaches (text not known), else each
        # object the text names
        for head in ([RUNS_CODE] if "*" in names else sorted(names)):
            if scope == "function" and label is not None:
                self.s.deferred_changes.append((head, "*", construct, line, label))
            else:
                self.s.foreign_changes.append((head, "*", construct, line))

"""Member changes made inside scopes: functions, methods, class bodies, and reflective writes.

:class:`ScopesMixin`, a part of :class:`auditor.index.summary._Summarizer`: the changes a function's
body makes to names it does not own (``_deferred``, ``_changes_in``), those of class bodies, methods
and nested functions (``_scopes``), ``setattr``/``delattr``/``__dict__`` however reached
(``_reflective``), and what a method writes on its instance (``_instance_writes``).
"""

from __future__ import annotations

import ast
import re

from auditor.index.facts import INSTANCE_MEMBERS, ITEMS_OF, Binding, ClassFact
from auditor.index.methods import attr_names
from auditor.index.syntax import (
    container_change,
    dict_owner,
    dotted,
    head_of,
    iter_stmts,
    node_text,
    resolve_relative,
    short_text,
    walk,
)

_DOTTED_TEXT = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _defaults(args: ast.arguments) -> dict[str, ast.expr]:
    """The parameters of a signature whose default reads a name (``c=LlamaForCausalLM``), with
    that default (a constant default holds no class)."""
    pos = args.posonlyargs + args.args
    pairs = list(zip(pos[len(pos) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.arg: d for a, d in pairs if any(isinstance(n, ast.Name) for n in ast.walk(d))}


def _stored_attributes(target: ast.AST) -> list[ast.Attribute]:
    """The attributes an assignment, ``for`` or ``with ... as`` target writes (``C.m`` in ``a, C.m``,
    ``*C.m``, ``[C.m]``): every ``Attribute`` in store context inside it."""
    return [n for n in ast.walk(target) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)]


def _root_name(node: ast.AST) -> str | None:
    """The name an attribute chain starts from (``self`` of ``self.__class__.forward``), or None."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


_OWN = frozenset({"self", "cls"})


class _Locals:
    """The names local to a function scope, worked out on first use (most heads are ``self``):
    its ``params``, what its statements (``stmts``) assign, loop over or bind with ``with ...
    as`` (less its ``global`` names), and ``self``/``cls``; ``outer``: the names of the
    enclosing function scopes."""

    __slots__ = ("stmts", "params", "outer", "_names")

    def __init__(self, stmts: list[ast.stmt], params: set[str], outer=frozenset()):
        self.stmts, self.params, self.outer, self._names = stmts, params, outer, None

    def __contains__(self, name: str) -> bool:
        if self._names is None:
            local = set(self.params)
            glob: set[str] = set()
            for st in self.stmts:
                if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
                    for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                        if isinstance(t, ast.Name):
                            local.add(t.id)
                        else:
                            local.update(n.id for n in walk(t) if isinstance(n, ast.Name)
                                         and isinstance(n.ctx, ast.Store))
                elif isinstance(st, (ast.With, ast.AsyncWith)):
                    local.update(n.id for i in st.items if i.optional_vars is not None
                                 for n in walk(i.optional_vars) if isinstance(n, ast.Name))
                elif isinstance(st, ast.Global):
                    glob.update(st.names)
            self._names = (local - glob) | _OWN
        return name in self._names or name in self.outer


class ScopesMixin:
    """The scope pass of the summariser (a mixin of :class:`auditor.index.summary._Summarizer`,
    whose state it reads and writes: ``s`` the summary being built, ``_seen``, ``_class_nodes``,
    ``_class_for``, and the flags ``reflective`` and ``walrus``)."""

    def _deferred(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str]) -> None:
        """Record the member changes ``fn``'s body makes to names it does not own
        (:attr:`ModuleSummary.deferred_changes`)."""
        stmts = list(iter_stmts(fn.body))
        self._changes_in(stmts, _Locals(stmts, params), fn.name, _defaults(fn.args))

    def _changes_in(self, stmts: list[ast.stmt], local, label: str, defaults: dict | None = None) -> None:
        """Record the member changes the statements ``stmts`` of one scope (a function, a method,
        a class body: ``label``; every statement, as :func:`iter_stmts` gives them) make to
        names that are not ``local`` to it (a set, or :class:`_Locals`), and its changing calls
        on containers (:attr:`ModuleSummary.container_changes`)."""
        iters = {st.target.id: st.iter for st in stmts if isinstance(st, (ast.For, ast.AsyncFor))
                 and isinstance(st.target, ast.Name)}

        def record(head_node: ast.AST, member: str, st: ast.stmt) -> None:
            root = _root_name(head_node)
            if root is not None and root in iters and root not in _OWN:
                # ``for c in (A, B): del c.m``: a change to each class the iterable names (or to
                # the iterable, computed)
                it = iters[root]
                rest = head_of(head_node)[len(root):]
                elts = it.elts if isinstance(it, (ast.Tuple, ast.List, ast.Set)) else []
                heads = [dotted(e) for e in elts]
                if not heads or None in heads:
                    heads = [ITEMS_OF + node_text(it)[:100]]
                for h in heads:
                    self.s.deferred_changes.append((h + rest, member, node_text(st)[:100], st.lineno, label))
                return
            if root is not None and defaults and root in defaults and root not in _OWN:
                # ``def g(c=LlamaForCausalLM): c.forward = f``: a call without that argument
                # changes what the default holds
                rest = head_of(head_node)[len(root):]
                self.s.deferred_changes.append((ITEMS_OF + node_text(defaults[root])[:100] + rest, member,
                                                node_text(st)[:100], st.lineno, label))
                return
            if root is not None and (root in _OWN or root in local) \
                    and not (isinstance(head_node, ast.Attribute) and head_node.attr == "__class__"):
                return  # ``self.x = v``, a parameter's or a local's attribute: not a class of the tree
            head = head_of(head_node)
            self.s.deferred_changes.append((head, member, node_text(st)[:100], st.lineno, label))

        for st in stmts:
            if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = st.targets if isinstance(st, (ast.Assign, ast.Delete)) else [st.target]
                # an attribute inside an unpacking target (``a, C.forward = g()``, ``*_, C.m = v``)
                targets = [n for t in targets for n in ([t] if isinstance(t, ast.Attribute) else _stored_attributes(t))]
                for t in targets:
                    if isinstance(t, ast.Attribute):
                        self._seen.add(id(t))
                        if t.attr == "__code__" and isinstance(t.value, ast.Attribute) and not (
                                t.value.attr == "forward" and (_root_name(t.value) in _OWN
                                                               or _root_name(t.value) in local)):
                            # ``C.m.__code__ = ...``: C.m replaced. A method's write to the code of its
                            # own class's forward (``self.__class__.forward.__code__ = compiled``), or a
                            # function's to a parameter's (``model.__class__.forward.__code__ = ...``),
                            # swaps in that forward compiled or back (vLLM's torch.compile wrapper,
                            # vllm/compilation/wrapper.py): left as before, like any write through them
                            record(t.value.value, t.value.attr, st)
                        else:
                            record(t.value, t.attr, st)
            elif isinstance(st, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                # ``for C.forward in fs:``, ``with cm as C.forward:``: a member written by the loop
                # or the context manager, with a value the index does not follow
                outs = [st.target] if isinstance(st, (ast.For, ast.AsyncFor)) else \
                    [i.optional_vars for i in st.items if i.optional_vars is not None]
                for t in (a for o in outs for a in _stored_attributes(o)):
                    self._seen.add(id(t))
                    record(t.value, t.attr, st)
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) \
                    and dotted(st.value.func) in ("setattr", "delattr") and st.value.args \
                    and dotted(st.value.args[0]) is not None:
                self._seen.add(id(st.value))
                key = st.value.args[1] if len(st.value.args) > 1 else None
                member = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
                record(st.value.args[0], member, st)
            if isinstance(st, (ast.Expr, ast.Assign, ast.AugAssign, ast.Delete)):
                cc = container_change(st)
                if cc is not None:
                    first = cc[0].split(".")[0]
                    if first not in _OWN and first not in local:
                        self.s.container_changes.append((*cc, node_text(st)[:100], st.lineno, label))

    def _scopes(self, tree: ast.Module) -> None:
        """Member changes made where the module-level pass and :meth:`_deferred` do not look:
        class bodies (they run with the class statement), methods of classes (static and class
        methods too, at any depth), functions nested in functions; and, when the source is
        :attr:`reflective`, every ``setattr``/``delattr`` however it is reached (an alias of it,
        ``type.__setattr__(C, ...)``, ``C.__setattr__``, a comprehension, a lambda, an expression,
        a head computed by ``getattr(M, name)``), writes through ``M.__dict__`` or ``vars(M)``, and
        attributes assigned on a computed object (``getattr(M, name).forward = f``). Each goes to
        :attr:`ModuleSummary.deferred_changes` under its scope's label, or, at module level, to
        :attr:`ModuleSummary.foreign_changes` (a class of this module: its ``unfollowable``)."""
        def scope_imports(body: list[ast.stmt], label: str) -> None:
            got: dict[str, Binding] = {}
            for node in iter_stmts(body):
                if isinstance(node, ast.ImportFrom):
                    mod = resolve_relative(self.s.module, self.s.is_package, node.level, node.module)
                    for alias in node.names:
                        if alias.name != "*":
                            got[alias.asname or alias.name] = Binding("import", (mod, alias.name), node.lineno)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        name = alias.asname or alias.name.split(".")[0]
                        got[name] = Binding("module", alias.asname and alias.name or name, node.lineno)
            if got:
                self.s.scope_bindings[label] = got

        def visit_fn(fn, label: str, outer, own: bool) -> None:
            args = fn.args
            params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            stmts = list(iter_stmts(fn.body))
            local = _Locals(stmts, params, outer)
            if own:
                if any(isinstance(st, (ast.Import, ast.ImportFrom)) for st in stmts):
                    scope_imports(fn.body, label)
                self._changes_in(stmts, local, label, _defaults(args))
            if self.reflective:
                self._reflective(fn.body, local, label)
            inner(stmts, label, local)

        def visit_class(node: ast.ClassDef, qual: str, outer) -> None:
            label = f"<class {qual}>"
            stmts = list(iter_stmts(node.body))
            self._changes_in(stmts, outer, label)
            if self.reflective:
                self._reflective(node.body, outer, label)
            cf = self._class_nodes.get(id(node))
            for st in stmts:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if cf is not None:
                        self._instance_writes(st, cf)
                    visit_fn(st, f"{qual}.{st.name}", outer, True)
                elif isinstance(st, ast.ClassDef) and st is not node:
                    visit_class(st, f"{qual}.{st.name}", outer)

        def inner(stmts: list[ast.stmt], label: str, local) -> None:
            for st in stmts:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit_fn(st, f"{label}.<locals>.{st.name}", local, True)
                elif isinstance(st, ast.ClassDef):
                    visit_class(st, f"{label}.<locals>.{st.name}", local)

        if self.reflective:
            self._reflective(tree.body, set(), None)
        for st in iter_stmts(tree.body):
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit_fn(st, st.name, set(), False)  # its own statements: :meth:`_deferred`
            elif isinstance(st, ast.ClassDef):
                visit_class(st, st.name, set())

    def _instance_writes(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, cf: ClassFact) -> None:
        """Record in ``cf.instance_writes`` what method ``fn`` writes on its instance (its first
        parameter) or on an object reached from it, for the members of :data:`INSTANCE_MEMBERS`,
        following the local names bound once to the instance or to a dotted path from it
        (``s = self``, ``m = self.model``, ``m = getattr(self, "model")``, ``s, m = self,
        self.model``, ``(m := self.model)``); a name bound otherwise to a value that reads the
        instance (``m = self.parts[0]``, ``m = self if x else y``) reaches an object the index does
        not follow: its writes are recorded under the path ``?``. The functions nested in the
        method are read with it (their closures see its instance); nested classes are not."""
        params = fn.args.posonlyargs + fn.args.args
        if not params or any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list):
            return
        me = params[0].arg
        stmts: list[ast.stmt] = []
        todo = [fn.body]
        while todo:
            for st in iter_stmts(todo.pop()):
                stmts.append(st)
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    todo.append(st.body)
        # the writes of a member the index records (most methods have none: nothing more is read)
        writes: list[tuple[ast.AST, str, str, int, ast.AST | None]] = []
        for st in stmts:
            if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
                targets = st.targets if isinstance(st, (ast.Assign, ast.Delete)) else [st.target]
                hits = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
                        if isinstance(e, ast.Attribute) and e.attr in INSTANCE_MEMBERS]
                if not hits:
                    continue
                if isinstance(st, ast.Delete):
                    value = "del"
                elif st.value is None:
                    continue
                elif isinstance(st.value, (ast.Tuple, ast.List, ast.Dict, ast.Set)) and not getattr(
                        st.value, "elts", getattr(st.value, "keys", None)):
                    value = node_text(st.value)  # an empty literal: ``()``, ``[]``, ``{}``
                else:
                    value = short_text(st.value)
                writes += [(e.value, e.attr, value, st.lineno, getattr(st, "value", None)) for e in hits]
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and st.value.args \
                    and dotted(st.value.func) in ("setattr", "delattr", "object.__setattr__", "object.__delattr__"):
                call = st.value
                key = call.args[1] if len(call.args) > 1 else None
                value = "del" if "del" in dotted(call.func) else short_text(call.args[2]) if len(call.args) > 2 else "?"
                for member in attr_names(fn, key) if key is not None else ["*"]:
                    if member in INSTANCE_MEMBERS or member == "*":
                        writes.append((call.args[0], member, value, st.lineno,
                                       call.args[2] if len(call.args) > 2 else None))
        if not writes:
            return
        bound: dict[str, list[ast.expr | None]] = {}

        def bind(t: ast.AST, v: ast.expr | None) -> None:
            if isinstance(t, (ast.Tuple, ast.List)) and isinstance(v, (ast.Tuple, ast.List)) \
                    and len(t.elts) == len(v.elts) and not any(isinstance(e, ast.Starred) for e in t.elts + v.elts):
                for te, ve in zip(t.elts, v.elts):
                    bind(te, ve)
            elif isinstance(t, ast.Name):
                bound.setdefault(t.id, []).append(v)
            else:
                for n in walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        bound.setdefault(n.id, []).append(v if v is None else ast.Tuple(elts=[v]))

        for st in stmts:
            if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                    bind(t, st.value if isinstance(st, ast.Assign) else ast.Tuple(elts=[st.value])
                         if st.value is not None else None)
            elif isinstance(st, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                tgts = [(st.target, st.iter)] if isinstance(st, (ast.For, ast.AsyncFor)) else \
                    [(i.optional_vars, i.context_expr) for i in st.items if i.optional_vars is not None]
                for t, v in tgts:
                    bind(t, ast.Tuple(elts=[v]))  # an item of it: not the value itself
        if self.walrus:  # the source holds ``:=``
            for n in walk(fn):
                if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                    bind(n.target, n.value)
        aliases: dict[str, str | None] = {}

        def alias(name: str) -> str | None:
            if name not in aliases:
                values = bound.get(name, ())
                v = values[0] if len(values) == 1 else None
                d = head_of(v) if v is not None else None
                aliases[name] = None
                if d is not None and _DOTTED_TEXT.fullmatch(d) and (d == me or d.startswith(me + ".")):
                    aliases[name] = "self" + d[len(me):]
                elif any(x is not None and any(isinstance(n, ast.Name) and n.id == me for n in walk(x))
                         for x in values):
                    aliases[name] = "self.?"  # an object reached from the instance, not followed
            return aliases[name]

        def path_of(node: ast.AST) -> str | None:
            d = dotted(node)
            if d is None:
                return None
            first, dot, rest = d.partition(".")
            if first == me:
                if me in bound:
                    return None
                base = "self"
            else:
                base = alias(first)
                if base is None:
                    return None
            full = base + dot + rest
            return full[5:] if full.startswith("self.") else ""

        given = {a.arg for a in fn.args.posonlyargs[1:] + fn.args.args[1:] + fn.args.kwonlyargs}
        given |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
        given -= set(bound)
        for head, member, value, line, node in writes:
            p = path_of(head)
            if p is None:
                continue
            reads = node is not None and any(isinstance(n, ast.Name) and n.id in given for n in walk(node))
            cf.instance_writes.append((f"{p}.{member}" if p else member, value, fn.name, line, reads))

    def _reflective(self, body: list[ast.stmt], local: set[str], label: str | None) -> None:
        """The reflective member changes of one scope's statements (see :meth:`_scopes`), not
        entering the functions and classes defined there (lambdas are entered: their body is
        an expression of this scope)."""
        setters = {"setattr", "delattr", "builtins.setattr", "builtins.delattr"}
        setters |= {n for n, b in self.s.bindings.items()
                    if (b.kind == "alias" and b.target in setters)
                    or (b.kind == "import" and b.target[0] == "builtins" and b.target[1] in ("setattr", "delattr"))}

        def key_of(node: ast.AST | None) -> str:
            return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "*"

        def record(head: str, member: str, node: ast.AST) -> None:
            line = getattr(node, "lineno", 0)
            construct = node_text(node)[:100]
            if head.split(".")[0] in local and "(" not in head and "[" not in head:
                return
            if label is not None:
                self.s.deferred_changes.append((head, member, construct, line, label))
                return
            cf = self._class_for(head) if "." not in head and head.isidentifier() else None
            if cf is not None:
                cf.unfollowable.append((member, construct, line))
            else:
                self.s.foreign_changes.append((head, member, construct, line))

        stack: list[tuple[ast.AST, ast.AST | None]] = [(st, None) for st in body]
        while stack:
            node, parent = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if id(node) in self._seen:
                pass
            elif isinstance(node, ast.Call):
                f = node.func
                fd = dotted(f)
                if fd in setters and node.args:
                    record(head_of(node.args[0]), key_of(node.args[1] if len(node.args) > 1 else None), node)
                elif isinstance(f, ast.Attribute) and f.attr in ("__setattr__", "__delattr__"):
                    if dotted(f.value) in ("object", "type", "builtins.object", "builtins.type") and node.args:
                        record(head_of(node.args[0]), key_of(node.args[1] if len(node.args) > 1 else None), node)
                    elif not (isinstance(f.value, ast.Call) and dotted(f.value.func) == "super"):
                        record(head_of(f.value), key_of(node.args[0] if node.args else None), node)
                elif isinstance(f, ast.Attribute) and f.attr in ("update", "setdefault", "pop", "clear", "__setitem__",
                                                                 "__delitem__", "popitem"):
                    obj = dict_owner(f.value)
                    if obj is not None:
                        record(head_of(obj), "*", node)
                    elif dotted(f.value) == "sys.modules" and f.attr not in ("pop", "popitem", "clear"):
                        key = node.args[0] if node.args and f.attr != "update" else None
                        record("sys.modules", key_of(key), node)
            elif isinstance(node, ast.Name) and node.id in setters and isinstance(node.ctx, ast.Load) \
                    and not (isinstance(parent, ast.Call) and parent.func is node):
                # setattr handed on (``map(setattr, ...)``, ``partial(setattr, C)``): what it sets is not known
                record(head_of(parent) if isinstance(parent, ast.Call) else node.id, "*", parent or node)
            elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
                obj = dict_owner(node.value)
                if obj is not None:
                    record(head_of(obj), key_of(node.slice), node)
                elif dotted(node.value) == "sys.modules":  # a module replaced under its name
                    record("sys.modules", key_of(node.slice), node)
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) and dotted(node.value) is None:
                record(head_of(node.value), node.attr, node)  # ``getattr(M, name).forward = f``
            for child in ast.iter_child_nodes(node):
                stack.append((child, node))

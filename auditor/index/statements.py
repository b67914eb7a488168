"""The module-level statement walk of the summary pass: bindings, functions and classes.

:class:`StatementsMixin`, a part of :class:`auditor.index.summary._Summarizer`: each module-level
statement in order, binding names (:class:`~auditor.index.facts.Binding`, with the ``if`` tests
around them, guarded, under ``TYPE_CHECKING``, in a loop), summarising module-level functions
(:class:`~auditor.index.facts.FunctionFact`) and class statements
(:class:`~auditor.index.facts.ClassFact`, their bodies member by member).
"""

from __future__ import annotations

import ast

from auditor.index.facts import AttrFact, Binding, ClassFact, FunctionFact, MethodFact
from auditor.index.methods import (
    attr_fact,
    class_scope_binds,
    method_fact,
    new_returns_other,
    self_rebound_line,
    subclass_hook_changes,
)
from auditor.index.returns import returns_fact
from auditor.index.syntax import (
    container_change,
    dotted,
    head_of,
    is_empty_class_body,
    is_type_checking,
    iter_stmts,
    node_text,
    resolve_relative,
    short_text,
    walk,
)


class StatementsMixin:
    """The statement walk of the summariser (a mixin of :class:`auditor.index.summary._Summarizer`,
    whose state it reads and writes: ``s`` the summary being built, ``conds``, ``in_handler``,
    ``loop_end``, ``loop_iters``, ``_all``, ``_tc_all``, ``_class_nodes``, ``_fn_nodes``, and the
    other parts' ``_mark``, ``_set_member``, ``_remove_member``, ``_mutation_call``,
    ``_namespace_of``, ``_deferred``)."""

    def _assign_name(self, name: str, value: ast.expr, line: int, guarded: bool, type_checking: bool) -> None:
        s = self.s
        kind = self._namespace_of(value, "module")
        if kind == "module":
            self._self_names.add(name)
        elif kind == "module-dict" and not isinstance(value, ast.Call):
            self._self_dicts.add(name)
        d = dotted(value)
        if d is not None:
            b = Binding("alias", d, line, guarded)
        elif isinstance(value, ast.Call) and dotted(value.func):
            b = Binding(
                "factory",
                (dotted(value.func), [dotted(a) or node_text(a) for a in value.args]),
                line,
                guarded,
            )
        else:
            b = Binding("other", short_text(value), line, guarded)
            self._hold(name, value)
        self._bind(name, b, type_checking)
        if name == "__all__":
            try:
                s.dunder_all = list(ast.literal_eval(value))
            except Exception:
                s.all_changes.append((f"__all__ = {short_text(value)}", line))
        if isinstance(value, ast.Dict) and name.startswith("_") and "MODULE" in name.upper():
            try:
                lm = ast.literal_eval(value)
                if isinstance(lm, dict) and all(isinstance(v, str) for v in lm.values()):
                    s.lazy_map.update(lm)
            except Exception:
                pass

    def _unpack(self, target: ast.expr, value: ast.expr, line: int, guarded: bool, type_checking: bool) -> None:
        """Bind an assignment target: a name, or a tuple/list unpacked from a literal of the same
        shape (followed item by item); any other unpacking is recorded as not followed."""
        if isinstance(target, ast.Attribute) and target.attr == "__code__" and isinstance(target.value, ast.Attribute) \
                and dotted(target.value.value) is not None:
            # ``C.m.__code__ = g.__code__``: the body of method ``m`` replaced, a change of ``C.m``
            self._seen.add(id(target))
            self._seen.add(id(target.value))
            self._set_member(dotted(target.value.value), target.value.attr, value,
                             f"{node_text(target)} = {short_text(value)}", line)
            return
        if isinstance(target, ast.Name):
            self._assign_name(target.id, value, line, guarded, type_checking)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = getattr(value, "elts", None)
            if isinstance(value, (ast.Tuple, ast.List)) and len(elts) == len(target.elts) and not any(
                    isinstance(e, ast.Starred) for e in elts + target.elts):
                for t, v in zip(target.elts, elts):
                    self._unpack(t, v, line, guarded, type_checking)
                return
            for n in walk(target):
                if isinstance(n, ast.Name):
                    self._mark(n.id, f"tuple unpacking (line {line})", line)
            self._unfollowed_members(target, f"{node_text(target)[:60]} = {short_text(value)}", line)
        elif isinstance(target, ast.Attribute) and self._namespace_of(target.value, "module") == "module":
            pass  # ``sys.modules[__name__].X = v``: the namespace walk marks X (:meth:`_namespaces`)
        elif isinstance(target, ast.Attribute) and dotted(target.value) is None:
            self._seen.add(id(target))  # ``getattr(M, name).forward = f``: an object computed at run time
            self.s.foreign_changes.append((head_of(target.value), target.attr,
                                           f"{node_text(target)} = {short_text(value)}", line))
        elif isinstance(target, ast.Attribute) and dotted(target.value) is not None:
            self._seen.add(id(target))
            self._set_member(dotted(target.value), target.attr, value,
                             f"{node_text(target)} = {short_text(value)}", line)
        elif isinstance(target, ast.Subscript) and dotted(target.value) == "sys.modules" \
                and isinstance(target.slice, ast.Name) and target.slice.id == "__name__" and isinstance(value, ast.Call):
            self.s.lazy_self = True
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Call) \
                and dotted(target.value.func) in ("globals", "vars") and not target.value.args:
            key = target.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self._handled.add(id(target.value))
                self._assign_name(key.value, value, line, guarded, type_checking)

    def _unfollowed_members(self, target: ast.AST, construct: str, line: int) -> None:
        """The members an unpacking, ``for`` or ``with ... as`` target writes (``a, C.m = g()``,
        ``for C.m in fs``), recorded as changes whose value the index does not follow."""
        for n in walk(target):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and id(n) not in self._seen:
                self._seen.add(id(n))
                d = dotted(n.value)
                if d is not None:
                    self._set_member(d, n.attr, None, construct, line)
                else:
                    self.s.foreign_changes.append((head_of(n.value), n.attr, construct, line))

    def _hold(self, name: str, value: ast.AST | None) -> None:
        """Record that module-level ``name`` holds what ``value`` computes, when it reads names
        (:attr:`ModuleSummary.holders`)."""
        if value is None:
            return
        read = sorted({n.id for n in walk(value) if isinstance(n, ast.Name)})
        if read:
            self.s.holders[name] = read

    def _bind_names_of(self, target: ast.AST, construct: str, line: int, value: ast.AST | None = None) -> None:
        for n in walk(target):
            if isinstance(n, ast.Name):
                self._mark(n.id, construct, line)
                self._hold(n.id, value)
            elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                self._mark(n.name, construct, line)
                self._hold(n.name, value)
            elif isinstance(n, ast.MatchMapping) and n.rest:
                self._mark(n.rest, construct, line)

    def _loop_body(self, stmt: ast.stmt, bodies: list[list[ast.stmt]], type_checking: bool) -> None:
        was = self.loop_end
        self.loop_end = getattr(stmt, "end_lineno", None) or stmt.lineno
        try:
            for body in bodies:
                self._stmts(body, True, type_checking)
        finally:
            self.loop_end = was

    def _bind(self, name: str, b: Binding, type_checking: bool) -> None:
        if self.loop_end is not None:
            self._mark(name, f"a binding inside a loop or match (line {b.line})", self.loop_end)
        b.conds = self.conds
        if not self.in_handler:
            (self._tc_all if type_checking else self._all).setdefault(name, []).append(b)
        if type_checking:
            self.s.tc_bindings.setdefault(name, b)
            if name not in self.s.bindings:
                self.s.type_checking_names.add(name)
            return
        prev = self.s.bindings.get(name)
        if prev is not None and b.guarded and prev.guarded:
            # ``try: import A as X / except: import B as X``: keep the first, remember the other
            self.s.alt_bindings.setdefault(name, []).append(b)
            return
        if prev is not None:
            self.s.earlier.setdefault(name, []).append(prev)  # a class body may have seen it
        self.s.bindings[name] = b
        self.s.type_checking_names.discard(name)

    def _stmts(self, body: list[ast.stmt], guarded: bool, type_checking: bool) -> None:
        for stmt in body:
            self._stmt(stmt, guarded, type_checking)

    def _stmt(self, stmt: ast.stmt, guarded: bool, type_checking: bool) -> None:
        s = self.s
        if isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.Delete)):
            cc = container_change(stmt)
            if cc is not None and cc[0].split(".")[0] not in ("self", "cls"):
                s.container_changes.append((*cc, node_text(stmt)[:100], stmt.lineno, None))
            if cc is not None and cc[0] == "__all__" or isinstance(stmt, ast.AugAssign) and isinstance(
                    stmt.target, ast.Name) and stmt.target.id == "__all__":
                s.all_changes.append((node_text(stmt)[:100], stmt.lineno))
        if isinstance(stmt, ast.ClassDef):
            cf = self._class(stmt, stmt.name, guarded, type_checking)
            self._bind(stmt.name, Binding("class", cf.qualname, stmt.lineno, guarded), type_checking)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._function(stmt)
            self._bind(stmt.name, Binding("function", stmt.name, stmt.lineno, guarded), type_checking)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self._bind(alias.asname, Binding("module", alias.name, stmt.lineno, guarded), type_checking)
                else:
                    top = alias.name.split(".")[0]
                    self._bind(top, Binding("module", top, stmt.lineno, guarded), type_checking)
        elif isinstance(stmt, ast.ImportFrom):
            mod = resolve_relative(s.module, s.is_package, stmt.level, stmt.module)
            for alias in stmt.names:
                if alias.name == "*":
                    s.stars.append((mod, stmt.lineno))
                    continue
                self._bind(
                    alias.asname or alias.name,
                    Binding("import", (mod, alias.name), stmt.lineno, guarded),
                    type_checking,
                )
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            if value is None:
                return
            for t in targets:
                self._unpack(t, value, stmt.lineno, guarded, type_checking)
        elif isinstance(stmt, ast.Delete):
            targets = list(stmt.targets)
            while any(isinstance(t, (ast.Tuple, ast.List)) for t in targets):  # ``del (a, b)``, ``del [a]``
                targets = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
            for t in targets:
                if isinstance(t, ast.Name):
                    self._bind(t.id, Binding("deleted", f"del {t.id}", stmt.lineno, guarded), type_checking)
                elif isinstance(t, ast.Attribute) and dotted(t.value) is not None:
                    self._seen.add(id(t))
                    self._remove_member(dotted(t.value), t.attr, f"del {node_text(t)}", stmt.lineno)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self._mutation_call(stmt.value, stmt.lineno)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.NamedExpr) \
                and isinstance(stmt.value.target, ast.Name):
            self._handled.add(id(stmt.value))
            self._assign_name(stmt.value.target.id, stmt.value.value, stmt.lineno, guarded, type_checking)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            end = getattr(stmt, "end_lineno", None) or stmt.lineno
            self._bind_names_of(stmt.target, f"a for loop target (line {stmt.lineno})", end)
            self._unfollowed_members(stmt.target, f"a for loop target {node_text(stmt.target)[:60]}", stmt.lineno)
            was = dict(self.loop_iters)
            if isinstance(stmt.target, ast.Name):
                self.loop_iters[stmt.target.id] = stmt.iter
            try:
                self._loop_body(stmt, [stmt.body, stmt.orelse], type_checking)
            finally:
                self.loop_iters = was
        elif isinstance(stmt, ast.While):
            self._loop_body(stmt, [stmt.body, stmt.orelse], type_checking)
        elif type(stmt).__name__ == "Match":
            end = getattr(stmt, "end_lineno", None) or stmt.lineno
            for case in stmt.cases:
                self._bind_names_of(case.pattern, f"a match capture pattern (line {case.pattern.lineno})", end,
                                    stmt.subject)
            self._loop_body(stmt, [c.body for c in stmt.cases], type_checking)
        elif isinstance(stmt, ast.If):
            if is_type_checking(stmt.test):
                self._stmts(stmt.body, guarded, True)
                self._stmts(stmt.orelse, guarded, type_checking)
            elif isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not) and is_type_checking(
                stmt.test.operand
            ):
                self._stmts(stmt.body, guarded, type_checking)
                self._stmts(stmt.orelse, guarded, True)
            else:
                outer = self.conds
                test = node_text(stmt.test)
                self.conds = outer + ((test, True),)
                self._stmts(stmt.body, True, type_checking)
                self.conds = outer + ((test, False),)
                self._stmts(stmt.orelse, True, type_checking)
                self.conds = outer
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self._stmts(stmt.body, True, type_checking)
            was, self.in_handler = self.in_handler, True
            for h in stmt.handlers:
                if h.name:  # ``except E as N`` binds N, and unbinds it when the handler ends
                    self._bind_names_of(ast.Name(id=h.name, ctx=ast.Store(), lineno=h.lineno),
                                        f"an except ... as {h.name} (line {h.lineno}), which unbinds it after",
                                        getattr(h, "end_lineno", None) or h.lineno)
                self._stmts(h.body, True, type_checking)
            self.in_handler = was
            self._stmts(stmt.orelse, True, type_checking)
            self._stmts(stmt.finalbody, guarded, type_checking)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    self._bind_names_of(item.optional_vars, f"a with ... as target (line {stmt.lineno})", stmt.lineno,
                                        item.context_expr)
                    self._unfollowed_members(item.optional_vars, f"a with ... as target {node_text(item.optional_vars)[:60]}",
                                             stmt.lineno)
            self._stmts(stmt.body, guarded, type_checking)

    def _function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        ff = FunctionFact(name=fn.name, line=fn.lineno, params=params)
        ff.gives = returns_fact(fn)
        local_classes: dict[str, str] = {}
        # statements are enough (imports, classes, returns) unless this module rewrites bases
        nodes = walk(fn) if self.track_bases else iter_stmts(fn.body)
        for node in nodes:
            if self.track_bases:
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    ff.calls.append(node.func.id)
                elif (
                    isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Attribute) and t.attr == "__bases__" for t in node.targets)
                    and isinstance(node.value, ast.BinOp)
                    and isinstance(node.value.right, ast.Tuple)
                ):
                    # ``cls.__bases__ = cls.__bases__ + (Wrapper,)``
                    ff.appends_bases += [d for d in map(dotted, node.value.right.elts) if d]
            if isinstance(node, ast.ImportFrom):
                mod = resolve_relative(self.s.module, self.s.is_package, node.level, node.module)
                for alias in node.names:
                    if alias.name != "*":
                        ff.local_bindings[alias.asname or alias.name] = Binding(
                            "import", (mod, alias.name), node.lineno
                        )
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    ff.local_bindings[name] = Binding("module", alias.asname and alias.name or name, node.lineno)
            if isinstance(node, ast.ClassDef) and node is not fn:
                qn = f"{fn.name}.<locals>.{node.name}"
                if qn not in self.s.classes:
                    cf = self._class(node, qn, True, False)
                    cf.factory = (fn.name, params)
                local_classes[node.name] = qn
        for st in iter_stmts(fn.body):
            if isinstance(st, ast.Return):
                ff.returns.append(short_text(st.value) if st.value is not None else "None")
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                ff.inner_returns[st.name] = [short_text(r.value) if r.value is not None else "None"
                                             for r in iter_stmts(st.body) if isinstance(r, ast.Return)]
        for stmt in fn.body:
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                if isinstance(stmt.value, ast.Name) and stmt.value.id in local_classes:
                    ff.returns_local_class = local_classes[stmt.value.id]
                elif isinstance(stmt.value, ast.Call):
                    ff.returns_call.append(node_text(stmt.value.func))
        self.s.functions[fn.name] = ff
        self._fn_nodes[fn.name] = fn
        self._deferred(fn, set(params))

    def _class(self, node: ast.ClassDef, qualname: str, guarded: bool, type_checking: bool) -> ClassFact:
        methods: dict[str, MethodFact] = {}
        attrs: dict[str, AttrFact] = {}
        removed: dict[str, tuple[str, int]] = {}
        shadowed: list[tuple[str, str, int]] = []
        self._class_body(node.body, methods, attrs, qualname, guarded, type_checking, removed, shadowed)
        cf = ClassFact(
            name=node.name,
            qualname=qualname,
            line=node.lineno,
            bases=[node_text(b) for b in node.bases],
            keywords={k.arg or "**": node_text(k.value) for k in node.keywords},
            decorators=[short_text(d) for d in node.decorator_list],
            decorator_calls=[(len(d.args), [k.arg or "**" for k in d.keywords]) if isinstance(d, ast.Call) else None
                             for d in node.decorator_list],
            methods=methods,
            attrs=attrs,
            empty=is_empty_class_body(node.body),
            guarded=guarded,
            type_checking=type_checking,
            removed=removed,
            unfollowable=shadowed,
        )
        self._class_nodes[id(node)] = cf
        for st in node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == "__new__":
                other = new_returns_other(st)
                if other is not None:
                    # it may give back an instance of another class than the one the engine built
                    cf.unfollowable.append(("*", f"{node.name}.__new__ returning {other}", st.lineno))
        for st in iter_stmts(node.body):
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == "__init_subclass__":
                for member, text, line in subclass_hook_changes(st):
                    cf.subclass_changes.append((member, f"{text} in {node.name}.__init_subclass__ (it runs for "
                                                        "every subclass)", line))
        old = self.s.classes.get(qualname)
        if old is not None:
            # a second definition: keep the first under ``Name@line`` for the code that saw it
            key = f"{qualname}@{old.line}"
            self.s.classes[key] = old
            for b in [self.s.bindings.get(node.name)] + self.s.earlier.get(node.name, []):
                if b is not None and b.kind == "class" and b.target == qualname and b.line == old.line:
                    b.target = key
        self.s.classes[qualname] = cf
        return cf

    def _class_body(self, body, methods, attrs, qualname, guarded, type_checking, removed=None,
                    shadowed=None) -> None:
        removed = {} if removed is None else removed
        shadowed = [] if shadowed is None else shadowed
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[stmt.name] = method_fact(stmt)
                attrs.pop(stmt.name, None)
                removed.pop(stmt.name, None)
                line = self_rebound_line(stmt) if self.self_rebound else None
                if line is not None:  # writes through the rebound name reach another object
                    shadowed.append(("*", f"the instance parameter rebound in {stmt.name} (line {line}): the "
                                     "writes through it are not followed", line))
            elif isinstance(stmt, ast.Delete):
                todo = list(stmt.targets)
                while todo:
                    t = todo.pop(0)
                    if isinstance(t, (ast.Tuple, ast.List)):  # ``del (a, b)``, ``del [a]``
                        todo[:0] = t.elts
                    elif isinstance(t, ast.Name):
                        methods.pop(t.id, None)
                        attrs.pop(t.id, None)
                        removed[t.id] = (f"del {t.id}", stmt.lineno)
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    for n in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", [])):
                        if isinstance(n, ast.Name):
                            if n.id in methods and not isinstance(stmt.value, (ast.Constant, ast.Name)):
                                # a method replaced by a value built at run time (``m =
                                # property(lambda self: None)``): what the member is is not known
                                shadowed.append((n.id, f"{n.id} = {node_text(stmt.value)[:60]}", stmt.lineno))
                            attrs[n.id] = attr_fact(n.id, stmt.lineno, stmt.value)
                            methods.pop(n.id, None)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.value is None:
                    if stmt.target.id not in attrs:
                        attrs[stmt.target.id] = AttrFact(stmt.target.id, stmt.lineno, False)
                else:
                    attrs[stmt.target.id] = attr_fact(stmt.target.id, stmt.lineno, stmt.value)
                    methods.pop(stmt.target.id, None)
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt, f"{qualname}.{stmt.name}", guarded, type_checking)
                attrs[stmt.name] = AttrFact(stmt.name, stmt.lineno, True, f"<class {stmt.name}>")
                if methods.pop(stmt.name, None) is not None:  # a nested class of a method's name replaces it
                    shadowed.append((stmt.name, f"{stmt.name} rebound by the class statement at line {stmt.lineno}",
                                     stmt.lineno))
            elif isinstance(stmt, ast.If):
                # conditional members: both branches may bind; keep what either binds
                self._class_body(stmt.body, methods, attrs, qualname, guarded, type_checking, removed, shadowed)
                self._class_body(stmt.orelse, methods, attrs, qualname, guarded, type_checking, removed, shadowed)
            else:
                # any other statement that binds a name of the class body (a ``for`` or ``with``
                # target, an import, ``except ... as`` (which unbinds it after), a ``match``
                # capture, a walrus, ``+=``): a member it rebinds is not followed
                for name in sorted(class_scope_binds(stmt)):
                    if name in methods or (name in attrs and not isinstance(stmt, ast.AugAssign)):
                        shadowed.append((name, f"{name} rebound by the statement at line {stmt.lineno} "
                                         f"(`{node_text(stmt).splitlines()[0][:60]}`)", stmt.lineno))

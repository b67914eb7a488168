"""Static evaluation of a small, pure subset of Python over sets of possible values.

Some gates are decided by a few lines of straight-line code in the scanned tree: a chain of
``if hf_config.model_type == "...": hf_config.model_type = "..."`` branches, an f-string that
rewrites an architecture name, a guard whose condition is derived from a run option. This module
*interprets* such code without importing or executing it: every value is a set of possible
constants (:data:`TOP` when nothing is known), conditions that cannot be decided run both branches
and join their effects, and only a closed list of pure operations on constants (comparisons,
arithmetic, string and tuple methods such as ``str.startswith``) is ever applied. Calls to
anything else give :data:`TOP`. Nothing in the scanned code can cause anything to run.

The engine-neutral machinery lives here; the layers above say what the names mean through
:class:`Inputs` (the value of ``hf_config.model_type`` for one target, ``hasattr`` on a checkpoint
config) and through a call hook (``hf_config.update({...})``).

The value sets and pure operations are in :mod:`auditor.index.values`, the expressions in
:mod:`auditor.index.expressions`; the statements are interpreted here.

Names and attribute chains are keyed by their *canonical path*: ``hf_config.text_config`` after
``hf_config = hf_config.text_config`` makes ``hf_config.model_type`` mean
``hf_config.text_config.model_type`` (the object roots are the names :class:`Inputs` declares).
"""

from __future__ import annotations

import ast
from typing import Callable

from auditor.index.expressions import MAX_DEPTH, ExpressionsMixin
from auditor.index.values import (
    BINARY_OPS,
    TOP,
    FrozenDict,
    Inputs,
    Outcome,
    State,
    Value,
    join,
    lift,
    not_evaluated,
    truth,
)

#: Statements interpreted in one evaluation at most (a bound on work for hostile input).
MAX_STEPS = 20000


class _Stop(Exception):
    pass


# -- the evaluator -----------------------------------------------------------------------------


class Evaluator(ExpressionsMixin):
    """Interprets statements and expressions (see the module docstring).

    Args:
        inputs: the meaning of the names before the code runs.
        call_hook: ``hook(evaluator, call node, state)`` → a value, or ``NotImplemented`` to let the
            evaluator handle the call; used for calls with effects (``hf_config.update(...)``).
    """

    def __init__(self, inputs: Inputs, call_hook: Callable | None = None):
        self.inputs = inputs
        self.call_hook = call_hook
        self.steps = 0
        self.depth = 0

    # paths ------------------------------------------------------------------------------------

    def path(self, node: ast.AST, st: State) -> str | None:
        """The canonical path of a name or attribute chain (``hf_config.model_type``), or None
        when ``node`` is not one, or passes through an object whose identity is unknown."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = node.id
        if root in st.alias:
            base = st.alias[root]
            if base is None:
                return None
        else:
            base = root
        return ".".join([base, *reversed(parts)])

    def is_object(self, path: str | None) -> bool:
        """True when ``path`` lies under an object root (:attr:`Inputs.roots`)."""
        return path is not None and path.split(".")[0] in self.inputs.roots

    def read(self, path: str, st: State) -> Value:
        """The value at a canonical path: what the code assigned, else the input's."""
        if path in st.env:
            return st.env[path]
        return self.inputs.value(path)

    def has(self, path: str, st: State) -> bool | None:
        if path in st.env:
            return True
        return self.inputs.has(path)

    def write(self, path: str, value: Value, st: State) -> None:
        """Assign ``value`` at ``path``; paths under it are forgotten (TOP)."""
        prefix = path + "."
        for k in [k for k in st.env if k.startswith(prefix)]:
            st.env[k] = TOP
        st.env[path] = value

    def object_path(self, node: ast.AST, st: State) -> tuple[bool, str | None]:
        """``(is an object expression, its canonical path or None when ambiguous)`` for the
        right-hand side of an assignment: a chain under an object root, ``getattr(obj, "name",
        default)``, ``copy.deepcopy(obj)``, ``obj.get_text_config()``."""
        if isinstance(node, ast.Call):
            fn = node.func
            fname = fn.id if isinstance(fn, ast.Name) else (fn.attr if isinstance(fn, ast.Attribute) else None)
            if fname in ("deepcopy", "copy") and len(node.args) == 1:
                return self.object_path(node.args[0], st)
            if fname == "getattr" and len(node.args) in (2, 3) and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str):
                ok, base = self.object_path(node.args[0], st)
                if not ok:
                    return False, None
                if base is None:
                    return True, None
                full = f"{base}.{node.args[1].value}"
                if len(node.args) == 2:
                    return True, full
                has = self.has(full, st)
                if has is True:
                    return True, full
                okd, dflt = self.object_path(node.args[2], st)
                if has is False and okd:
                    return True, dflt
                return True, None
            if isinstance(fn, ast.Attribute) and fn.attr in ("get_text_config",) and not node.args:
                ok, base = self.object_path(fn.value, st)
                if ok and base is not None:
                    return True, f"{base}.text_config" if self.has(f"{base}.text_config", st) else base
                return ok, None
            return False, None
        p = self.path(node, st)
        if p is not None and self.is_object(p):
            return True, p
        if isinstance(node, (ast.Name, ast.Attribute)):
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in st.alias and st.alias[root.id] is None:
                return True, None
        return False, None

    # statements -------------------------------------------------------------------------------

    def run(self, body: list[ast.stmt], st: State) -> list[Outcome] | None:
        """Interpret ``body`` from state ``st``: every way it can end (see :class:`Outcome`).
        A branch that cannot be decided runs both ways; the paths that go on are joined. None
        when the code is too long or too deeply nested to interpret (:data:`MAX_STEPS`,
        :data:`MAX_DEPTH`)."""
        outcomes: list[Outcome] = []
        try:
            live = self._block(body, st, outcomes)
        except (_Stop, RecursionError):
            return None
        if live is not None:
            outcomes.append(Outcome("end", live))
        return outcomes

    def _block(self, body: list[ast.stmt], st: State | None, outcomes: list[Outcome]) -> State | None:
        if self.depth >= MAX_DEPTH:
            raise _Stop()
        self.depth += 1
        try:
            for stmt in body:
                if st is None:
                    return None
                self.steps += 1
                if self.steps > MAX_STEPS:
                    raise _Stop()
                st = self._stmt(stmt, st, outcomes)
            return st
        finally:
            self.depth -= 1

    def _join_states(self, a: State | None, b: State | None) -> State | None:
        if a is None:
            return b
        if b is None:
            return a
        out = State(undecided=list(dict.fromkeys(a.undecided + b.undecided)))
        for k in set(a.env) | set(b.env):
            va = a.env[k] if k in a.env else self._fallback(k)
            vb = b.env[k] if k in b.env else self._fallback(k)
            out.env[k] = join(va, vb)
        for k in set(a.alias) | set(b.alias):
            out.alias[k] = a.alias.get(k) if a.alias.get(k) == b.alias.get(k) else None
        return out

    def _fallback(self, path: str) -> Value:
        return self.inputs.value(path)

    def _stmt(self, s: ast.stmt, st: State, outcomes: list[Outcome]) -> State | None:
        if isinstance(s, ast.If):
            t = truth(self.eval(s.test, st))
            if t is True:
                return self._block(s.body, st, outcomes)
            if t is False:
                return self._block(s.orelse, st, outcomes)
            st.undecided.append(s.lineno)
            a = self._block(s.body, st.copy(), outcomes)
            b = self._block(s.orelse, st.copy(), outcomes)
            return self._join_states(a, b)
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            if s.value is None:
                return st
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                self._assign(t, s.value, st)
            return st
        if isinstance(s, ast.AugAssign):
            p = self.path(s.target, st)
            fn = BINARY_OPS.get(type(s.op))
            if p is not None:
                self.write(p, lift(fn, self.read(p, st), self.eval(s.value, st)) if fn else TOP, st)
            return st
        if isinstance(s, ast.Expr):
            self.eval(s.value, st)
            return st
        if isinstance(s, ast.Return):
            ok, p = self.object_path(s.value, st) if s.value is not None else (False, None)
            val = TOP if (s.value is None or ok) else self.eval(s.value, st)
            outcomes.append(Outcome("return", st, s.lineno, p if ok else None, val))
            return None
        if isinstance(s, ast.Raise):
            outcomes.append(Outcome("raise", st, s.lineno))
            return None
        if isinstance(s, ast.Assert):
            t = truth(self.eval(s.test, st))
            if t is False:
                outcomes.append(Outcome("raise", st, s.lineno))
                return None
            return st
        if isinstance(s, ast.With):
            return self._block(s.body, st, outcomes)
        if isinstance(s, ast.Try):
            after = self._block(s.body, st, outcomes)
            if after is not None and s.orelse:
                after = self._block(s.orelse, after, outcomes)
            if after is not None and s.finalbody:
                after = self._block(s.finalbody, after, outcomes)
            return after
        if isinstance(s, (ast.For, ast.While)):
            # zero or one pass: whatever the body may assign is joined with the state before
            before = st.copy()
            st.undecided.append(s.lineno)
            if isinstance(s, ast.For) and isinstance(s.target, ast.Name):
                self.write(s.target.id, TOP, st)
            body_end = self._block(s.body, st, [])
            return self._join_states(before, body_end)
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                name = (a.asname or a.name).split(".")[0]
                if name != "*":
                    self.write(name, TOP, st)
            return st
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.write(s.name, TOP, st)
            return st
        return st  # pass, global, del, …: no effect on what is tracked

    def _assign(self, target: ast.AST, value: ast.AST, st: State) -> None:
        if isinstance(target, ast.Name):
            ok, p = self.object_path(value, st)
            if ok:
                st.alias[target.id] = p
                for k in [k for k in st.env if k == target.id or k.startswith(target.id + ".")]:
                    del st.env[k]
                return
            st.alias.pop(target.id, None)
            self.write(target.id, self.eval(value, st), st)
            return
        if isinstance(target, ast.Attribute):
            p = self.path(target, st)
            v = self.eval(value, st)
            if p is not None:
                self.write(p, v, st)
            else:
                self._forget_under(target, st)
            return
        if isinstance(target, ast.Subscript):
            p = self.path(target.value, st)
            if p is None:
                return
            base = self.read(p, st)
            key = self.eval(target.slice, st)
            v = self.eval(value, st)
            self.write(p, lift(lambda b, k, x: b.set(k, x) if isinstance(b, FrozenDict) else not_evaluated(), base, key, v), st)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            v = self.eval(value, st)
            for i, e in enumerate(target.elts):
                if isinstance(e, ast.Starred):
                    self._assign_value(e.value, TOP, st)
                    continue
                self._assign_value(e, lift(lambda t, i=i: t[i] if isinstance(t, tuple) and len(t) == len(target.elts)
                                            else not_evaluated(), v), st)

    def _assign_value(self, target: ast.AST, v: Value, st: State) -> None:
        p = self.path(target, st)
        if p is not None:
            if isinstance(target, ast.Name):
                st.alias.pop(target.id, None)
            self.write(p, v, st)

    def _forget_under(self, target: ast.Attribute, st: State) -> None:
        """An assignment through an object of unknown identity: every object path with the
        assigned attribute becomes unknown."""
        for k in list(st.env):
            if k.endswith("." + target.attr):
                st.env[k] = TOP
        st.env[f"?.{target.attr}"] = TOP

    # entry point ------------------------------------------------------------------------------

    def run_function(self, fn: ast.FunctionDef, st: State | None = None) -> list[Outcome] | None:
        """Interpret the body of ``fn`` (its parameters are :attr:`Inputs.roots` or unknown);
        None when it is too long or too deeply nested to interpret (see :meth:`run`)."""
        return self.run(fn.body, st or State())

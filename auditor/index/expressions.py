"""The expressions of the static evaluator: :class:`ExpressionsMixin`, the part of
:class:`auditor.index.evaluate.Evaluator` that gives the possible values of an expression
(constants, names and attribute chains, containers, f-strings, comparisons, ``and``/``or``,
arithmetic, subscripts, comprehensions, and calls of a closed list of pure builtins and methods).
"""

from __future__ import annotations

import ast
import itertools

from auditor.index.values import (
    BINARY_OPS,
    COMPARE_OPS,
    MAX_VALUES,
    PURE_METHODS,
    TOP,
    UNKNOWN_ITEM,
    FrozenDict,
    State,
    Value,
    is_safe,
    join,
    lift,
    not_evaluated,
    one,
    truth,
)


#: Deepest nesting of expressions and blocks interpreted; deeper code evaluates to :data:`TOP`
#: (statements: the run stops), so that hostile nesting never exhausts the stack.
MAX_DEPTH = 100


class ExpressionsMixin:
    """Expression evaluation (a mixin of :class:`auditor.index.evaluate.Evaluator`, whose
    ``call_hook``, ``depth``, ``path``, ``read``, ``has``, ``write`` and ``object_path`` it uses)."""

    def eval(self, node: ast.AST, st: State) -> Value:
        """The possible values of expression ``node`` in state ``st`` (walrus targets are bound).
        Never raises: what cannot be evaluated (unknown names and calls, nesting deeper than
        :data:`MAX_DEPTH`, results too large) is :data:`TOP`."""
        m = getattr(self, f"_e_{type(node).__name__}", None)
        if m is None or self.depth >= MAX_DEPTH:
            return TOP
        self.depth += 1
        try:
            return m(node, st)
        except RecursionError:
            return TOP
        finally:
            self.depth -= 1

    def _e_Constant(self, n: ast.Constant, st: State) -> Value:
        return one(n.value) if is_safe(n.value) else TOP

    def _e_Name(self, n: ast.Name, st: State) -> Value:
        p = self.path(n, st)
        return TOP if p is None else self.read(p, st)

    def _e_Attribute(self, n: ast.Attribute, st: State) -> Value:
        p = self.path(n, st)
        if p is not None:
            return self.read(p, st)
        return TOP

    def _e_Tuple(self, n, st: State) -> Value:
        if any(isinstance(e, ast.Starred) for e in n.elts):
            return self._starred(n.elts, st)
        return lift(lambda *xs: tuple(xs), *[self.eval(e, st) for e in n.elts]) if n.elts else one(())

    _e_List = _e_Tuple

    def _starred(self, elts, st: State) -> Value:
        parts = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.eval(e.value, st)
                parts.append(lift(lambda x: tuple(x) if isinstance(x, (tuple, str, frozenset)) else not_evaluated(), v))
            else:
                parts.append(lift(lambda x: (x,), self.eval(e, st)))
        return lift(lambda *xs: tuple(itertools.chain(*xs)), *parts)

    def _e_Set(self, n: ast.Set, st: State) -> Value:
        return lift(lambda *xs: frozenset(xs), *[self.eval(e, st) for e in n.elts])

    def _e_Dict(self, n: ast.Dict, st: State) -> Value:
        if any(k is None for k in n.keys):
            return TOP
        ks = [self.eval(k, st) for k in n.keys]
        vs = [self.eval(v, st) for v in n.values]
        vs = [one(UNKNOWN_ITEM) if v is TOP else v for v in vs]
        return lift(lambda *xs: FrozenDict(tuple(zip(xs[: len(ks)], xs[len(ks):]))), *ks, *vs)

    def _e_JoinedStr(self, n: ast.JoinedStr, st: State) -> Value:
        parts = []
        for v in n.values:
            if isinstance(v, ast.Constant):
                parts.append(one(str(v.value)))
            elif isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None:
                parts.append(lift(lambda x: x if isinstance(x, str) else (str(x) if isinstance(x, int) else not_evaluated()),
                                   self.eval(v.value, st)))
            else:
                return TOP
        return lift(lambda *xs: "".join(xs), *parts) if parts else one("")

    def _e_Compare(self, n: ast.Compare, st: State) -> Value:
        left = self.eval(n.left, st)
        result: Value = one(True)
        for op, comp in zip(n.ops, n.comparators):
            right = self.eval(comp, st)
            fn = COMPARE_OPS.get(type(op))
            if fn is None:
                return TOP
            step = lift(lambda a, b: bool(fn(a, b)), left, right)
            result = lift(lambda a, b: a and b, result, step)
            left = right
        return result

    def _e_BoolOp(self, n: ast.BoolOp, st: State) -> Value:
        is_and = isinstance(n.op, ast.And)
        acc: set = set()
        pending = True  # some path still evaluates the next operand
        for i, e in enumerate(n.values):
            v = self.eval(e, st)
            last = i == len(n.values) - 1
            if v is TOP:
                if last:
                    return TOP
                v = frozenset((True, False)) if self._boolish(e) else TOP
                if v is TOP:
                    return TOP
            cont = set()
            for x in v:
                try:
                    t = bool(x)
                except Exception:
                    return TOP
                if last or (t if not is_and else not t):
                    acc.add(x)  # short-circuits here (or is the last operand)
                else:
                    cont.add(x)
            if not cont:
                pending = False
                break
        del pending
        return frozenset(acc) if len(acc) <= MAX_VALUES else TOP

    @staticmethod
    def _boolish(e: ast.AST) -> bool:
        """True when an expression can only be a bool (a comparison, ``not``, ``hasattr``,
        ``isinstance``), so an unknown value is {True, False}."""
        if isinstance(e, ast.Compare) or (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not)):
            return True
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("hasattr", "isinstance", "callable"):
            return True
        if isinstance(e, ast.BoolOp):
            return all(ExpressionsMixin._boolish(x) for x in e.values)
        return False

    def _e_UnaryOp(self, n: ast.UnaryOp, st: State) -> Value:
        v = self.eval(n.operand, st)
        if isinstance(n.op, ast.Not):
            if v is TOP:
                return frozenset((True, False))
            return lift(lambda x: not x, v)
        if isinstance(n.op, ast.USub):
            return lift(lambda x: -x if isinstance(x, (int, float)) and not isinstance(x, bool) else not_evaluated(), v)
        return TOP

    def _e_BinOp(self, n: ast.BinOp, st: State) -> Value:
        fn = BINARY_OPS.get(type(n.op))
        if fn is None:
            return TOP
        return lift(fn, self.eval(n.left, st), self.eval(n.right, st))

    def _e_IfExp(self, n: ast.IfExp, st: State) -> Value:
        t = truth(self.eval(n.test, st))
        if t is True:
            return self.eval(n.body, st)
        if t is False:
            return self.eval(n.orelse, st)
        return join(self.eval(n.body, st), self.eval(n.orelse, st))

    def _e_NamedExpr(self, n: ast.NamedExpr, st: State) -> Value:
        v = self.eval(n.value, st)
        if isinstance(n.target, ast.Name):
            st.alias.pop(n.target.id, None)
            self.write(n.target.id, v, st)
        return v

    def _e_Subscript(self, n: ast.Subscript, st: State) -> Value:
        base = self.eval(n.value, st)
        if isinstance(n.slice, ast.Slice):
            lo = self.eval(n.slice.lower, st) if n.slice.lower else one(None)
            hi = self.eval(n.slice.upper, st) if n.slice.upper else one(None)
            return lift(lambda b, a, c: b[a:c] if isinstance(b, (tuple, str)) else not_evaluated(), base, lo, hi)
        idx = self.eval(n.slice, st)

        def sub(b, i):
            if isinstance(b, FrozenDict):
                if not b.has(i):
                    raise KeyError(i)
                return b.get(i)
            if isinstance(b, (tuple, str)) and isinstance(i, int) and not isinstance(i, bool):
                return b[i]
            return not_evaluated()
        return lift(sub, base, idx)

    def _comprehension(self, n, st: State, make) -> Value:
        if len(n.generators) != 1:
            return TOP
        g = n.generators[0]
        if g.is_async or not isinstance(g.target, ast.Name):
            return TOP
        it = self.eval(g.iter, st)
        if it is TOP or len(it) != 1:
            return TOP
        seq = next(iter(it))
        if isinstance(seq, FrozenDict):
            seq = seq.keys()
        if not isinstance(seq, (tuple, frozenset, str)) or len(seq) > 256:
            return TOP
        results: list[Value] = []
        inner = st.copy()
        for x in seq:
            self.write(g.target.id, one(x), inner)
            inner.alias.pop(g.target.id, None)
            keep = True
            for cond in g.ifs:
                t = truth(self.eval(cond, inner))
                if t is None:
                    return TOP
                keep = keep and t
            if keep:
                results.append(self.eval(n.elt, inner))
        return lift(make, *results) if results else one(make())

    def _e_ListComp(self, n, st: State) -> Value:
        return self._comprehension(n, st, lambda *xs: tuple(xs))

    _e_GeneratorExp = _e_ListComp

    def _e_SetComp(self, n, st: State) -> Value:
        return self._comprehension(n, st, lambda *xs: frozenset(xs))

    def _e_Call(self, n: ast.Call, st: State) -> Value:
        if self.call_hook is not None:
            r = self.call_hook(self, n, st)
            if r is not NotImplemented:
                return r
        fn = n.func
        if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords):
            return TOP
        if isinstance(fn, ast.Name):
            name = fn.id
            if name in ("getattr", "hasattr") and len(n.args) in (2, 3) and isinstance(n.args[1], ast.Constant) \
                    and isinstance(n.args[1].value, str):
                ok, base = self.object_path(n.args[0], st)
                if not ok or base is None:
                    return frozenset((True, False)) if name == "hasattr" else TOP
                full = f"{base}.{n.args[1].value}"
                has = self.has(full, st)
                if name == "hasattr":
                    return TOP if has is None else one(has)
                if len(n.args) == 2 or has is True:
                    return self.read(full, st)
                dflt = self.eval(n.args[2], st)
                if has is False:
                    return dflt
                return join(self.read(full, st), dflt)
            if name == "get_args" and len(n.args) == 1:
                return self.eval(n.args[0], st)
            args = [self.eval(a, st) for a in n.args]
            if n.keywords:
                return TOP
            pure = {"len": len, "str": lambda x: x if isinstance(x, str) else not_evaluated(), "bool": bool,
                    "tuple": lambda x=(): tuple(x) if isinstance(x, (tuple, frozenset, str)) else not_evaluated(),
                    "list": lambda x=(): tuple(x) if isinstance(x, (tuple, frozenset, str)) else not_evaluated(),
                    "set": lambda x=(): frozenset(x) if isinstance(x, (tuple, frozenset, str)) else not_evaluated(),
                    "frozenset": lambda x=(): frozenset(x) if isinstance(x, (tuple, frozenset, str)) else not_evaluated(),
                    "int": lambda x: int(x) if isinstance(x, (int, bool)) else not_evaluated(),
                    "any": lambda x: any(x) if isinstance(x, (tuple, frozenset)) else not_evaluated(),
                    "all": lambda x: all(x) if isinstance(x, (tuple, frozenset)) else not_evaluated()}
            if name in pure and not (name in st.env or name in st.alias):
                return lift(pure[name], *args)
            return TOP
        if isinstance(fn, ast.Attribute):
            recv = self.eval(fn.value, st)
            if recv is TOP or n.keywords:
                return TOP
            args = [self.eval(a, st) for a in n.args]

            def call(r, *xs):
                allowed = PURE_METHODS.get(type(r), set())
                if fn.attr not in allowed:
                    return not_evaluated()
                out = getattr(r, fn.attr)(*xs)
                if isinstance(out, list):
                    out = tuple(out)
                elif isinstance(out, set):
                    out = frozenset(out)
                return out
            return lift(call, recv, *args)
        return TOP

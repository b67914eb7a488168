"""What SGLang's EAGLE workers call on the target model, read statically.

Besides the EAGLE-3 setter the model runner calls, the speculative workers that serve EAGLE,
EAGLE-3 and NEXTN/MTP call methods on the *target* model when the drafter starts: 0.5.10.post1
``sglang/srt/speculative/eagle_worker.py`` (``__init__``) runs
``embed, head = self.target_worker.model_runner.model.get_embed_and_head()`` unconditionally
(also ``eagle_worker_v2.py``, ``multi_layer_eagle_worker*.py``); 0.5.23
``speculative/eagle_worker_v2.py`` hands ``target_runner.model`` to
``pp_draft_embedding.resolve_draft_embed_and_head``, which calls ``target_model.get_embed_and_head()``
(its ``except AttributeError`` re-raises unless a pipeline stage lacks the embedding). A target
without such a method crashes at drafter start-up.

:data:`WORKERS_EXTRACTOR` reads, in the summary pass, each function of the speculative package:
the method calls made on the target model (an attribute chain ``<...>.target_worker.model_runner
.model``, or a local name bound to it or to the target worker's ``model_runner``), the calls that
hand the target model (or a parameter) to another function, whether each is guarded (under
``hasattr``/``isinstance`` on that object, or in a ``try`` whose handler swallows the error), and
the worker factory: the branches under ``if <algorithm>.is_eagle()`` that import and return a
worker class, or a registry call that names the EAGLE algorithm and a function building the
worker (0.5.4–0.5.7 ``speculative/spec_info.py``). :func:`worker_members` follows the factory's worker classes (and their bases in the
package) and the hand-overs (at most four calls deep) to the members the target must have, each
with its call site.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from auditor.index.summary import Extractor
from auditor.index.targets import ClassRef, FunctionRef

#: The package of SGLang's speculative workers.
SPECULATIVE_DIR = "sglang/srt/speculative/"

#: Attribute names (and parameter names) that hold the target worker in the workers.
_WORKER_ATTRS = ("target_worker", "_target_worker")

#: Exceptions whose handler, when it never raises, makes a call in its ``try`` body optional.
_SWALLOWED = {"AttributeError", "Exception", "BaseException", "NotImplementedError"}

#: How many functions deep a hand-over of the target model is followed.
MAX_DEPTH = 4

TARGET = "target"


# ----------------------------------------------------------------------------- extractor

def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


class _Function:
    """The analysis of one function body (see :func:`extract_workers`)."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool):
        args = fn.args
        self.params = [a.arg for a in args.posonlyargs + args.args]
        self.kwonly = [a.arg for a in args.kwonlyargs]
        self.subjects: dict[str, str] = {}   # local name -> "target" or "@param"
        self.runners: set[str] = set()       # local names bound to the target worker's model_runner
        self.workers: set[str] = set()       # local names bound to the target worker
        for i, p in enumerate(self.params + self.kwonly):
            if in_class and i == 0 and p in ("self", "cls"):
                continue
            if p in _WORKER_ATTRS:
                self.workers.add(p)
            else:
                self.subjects[p] = f"@{p}"
        self.calls: list[list] = []
        self.passes: list[list] = []
        self.imports: dict[str, list] = {}
        self.line = fn.lineno
        self._body(fn.body, frozenset())

    # -- what an expression denotes
    def _worker(self, e: ast.AST) -> bool:
        return (isinstance(e, ast.Attribute) and e.attr in _WORKER_ATTRS) or (
            isinstance(e, ast.Name) and e.id in self.workers)

    def _runner(self, e: ast.AST) -> bool:
        return (isinstance(e, ast.Attribute) and e.attr == "model_runner" and self._worker(e.value)) or (
            isinstance(e, ast.Name) and e.id in self.runners)

    def subject(self, e: ast.AST) -> str | None:
        """``"target"`` for the target model, ``"@p"`` for parameter ``p`` (or a local bound to
        either), else None."""
        if isinstance(e, ast.Attribute) and e.attr == "model" and self._runner(e.value):
            return TARGET
        if isinstance(e, ast.Name):
            return self.subjects.get(e.id)
        return None

    # -- guards
    def _test_guards(self, test: ast.AST) -> tuple[frozenset, frozenset]:
        """``(guards when true, guards when false)`` of an ``if`` test: ``(subject, member)``
        for ``hasattr(x, "member")``, ``(subject, "*")`` for ``isinstance(x, ...)``."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            t, f = self._test_guards(test.operand)
            return f, t
        found = set()
        values = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        for v in values:
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and len(v.args) == 2:
                s = self.subject(v.args[0])
                if s is None:
                    continue
                if v.func.id == "hasattr" and isinstance(v.args[1], ast.Constant) and isinstance(v.args[1].value, str):
                    found.add((s, v.args[1].value))
                elif v.func.id == "isinstance":
                    found.add((s, "*"))
        return frozenset(found), frozenset()

    @staticmethod
    def _guarded(guards: frozenset, subject: str, member: str | None) -> bool:
        return (subject, "*") in guards or (member is not None and (subject, member) in guards) or ("*", "*") in guards

    # -- statements
    def _body(self, stmts: list[ast.stmt], guards: frozenset) -> None:
        for st in stmts:
            if isinstance(st, ast.If):
                when_true, when_false = self._test_guards(st.test)
                self._expr(st.test, guards)
                self._body(st.body, guards | when_true)
                self._body(st.orelse, guards | when_false)
                # ``if not hasattr(x, "m"): return`` guards the rest of the block
                if when_false and st.body and isinstance(st.body[-1], (ast.Return, ast.Continue, ast.Break)):
                    guards = guards | when_false
                continue
            if isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
                swallowed = any(self._swallows(h) for h in st.handlers)
                self._body(st.body, guards | ({("*", "*")} if swallowed else set()))
                # handlers are the error path: what they call is not what start-up requires
                self._body(st.orelse, guards)
                self._body(st.finalbody, guards)
                continue
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # nested definitions run (if ever) on their own terms
            if isinstance(st, ast.ImportFrom) and st.module and st.level == 0:
                for a in st.names:
                    self.imports[a.asname or a.name] = [st.module, a.name]
                continue
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
                self._expr(st.value, guards)
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    name = targets[0].id
                    s = self.subject(st.value)
                    self.subjects.pop(name, None)
                    self.runners.discard(name)
                    self.workers.discard(name)
                    if s is not None:
                        self.subjects[name] = s
                    elif self._runner(st.value):
                        self.runners.add(name)
                    elif self._worker(st.value):
                        self.workers.add(name)
                continue
            for fld in ("body", "orelse", "finalbody"):
                sub = getattr(st, fld, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    self._body(sub, guards)
            for fld in ("test", "iter", "value", "exc", "items", "targets", "target", "msg"):
                sub = getattr(st, fld, None)
                for node in (sub if isinstance(sub, list) else [sub]):
                    if isinstance(node, ast.withitem):
                        self._expr(node.context_expr, guards)
                    elif isinstance(node, ast.AST):
                        self._expr(node, guards)

    @staticmethod
    def _swallows(h: ast.ExceptHandler) -> bool:
        names = set()
        for n in ([h.type] if h.type is not None else []):
            for e in (n.elts if isinstance(n, ast.Tuple) else [n]):
                d = _dotted(e)
                if d:
                    names.add(d.rsplit(".", 1)[-1])
        caught = h.type is None or bool(names & _SWALLOWED)
        return caught and not any(isinstance(n, ast.Raise) for b in h.body for n in ast.walk(b))

    # -- expressions
    def _expr(self, e: ast.AST, guards: frozenset) -> None:
        if isinstance(e, ast.BoolOp) and isinstance(e.op, ast.And):
            g = guards
            for v in e.values:
                self._expr(v, g)
                g = g | self._test_guards(v)[0]
            return
        if isinstance(e, ast.IfExp):
            t, f = self._test_guards(e.test)
            self._expr(e.test, guards)
            self._expr(e.body, guards | t)
            self._expr(e.orelse, guards | f)
            return
        if isinstance(e, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for child in ast.iter_child_nodes(e):
                self._expr(child, guards)
            return
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Attribute):
                s = self.subject(f.value)
                if s is not None and not self._guarded(guards, s, f.attr):
                    self.calls.append([s, f.attr, e.lineno])
            callee = _dotted(f)
            if callee is not None:
                for i, a in enumerate(e.args):
                    s = self.subject(a)
                    if s is not None and not self._guarded(guards, s, None):
                        self.passes.append([s, callee, i, e.lineno])
                for k in e.keywords:
                    s = self.subject(k.value) if k.arg else None
                    if s is not None and not self._guarded(guards, s, None):
                        self.passes.append([s, callee, k.arg, e.lineno])
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.AST) and not isinstance(child, (ast.expr_context, ast.operator)):
                self._expr(child, guards)

    def as_dict(self) -> dict:
        return {"line": self.line, "params": self.params, "kwonly": self.kwonly, "calls": self.calls,
                "passes": self.passes, "imports": self.imports}


def _factories(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[dict]:
    """The branches of ``fn`` under a test that calls ``<x>.is_eagle()``: each ``{"line",
    "classes": [[module, name, level]]}`` — the names the branch imports (``from m import C``) and
    returns."""
    out = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.If):
            continue
        if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "is_eagle"
                   for n in ast.walk(node.test)):
            continue
        classes = _made_classes(node.body)
        if classes:
            out.append({"line": node.lineno, "classes": classes})
    return out


def _made_classes(body: list[ast.stmt]) -> list[list]:
    """``[module, name, level]`` of each name that ``body`` imports (``from m import C``) and
    returns, as the class itself or built (``return C`` or ``return C(**kwargs)``)."""
    imported: dict[str, list] = {}
    returned: list[str] = []
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, ast.ImportFrom):
                for a in n.names:
                    imported[a.asname or a.name] = [n.module or "", a.name, n.level]
            elif isinstance(n, ast.Return) and n.value is not None:
                v = n.value.func if isinstance(n.value, ast.Call) else n.value
                if isinstance(v, ast.Name):
                    returned.append(v.id)
    return [imported[r] for r in dict.fromkeys(returned) if r in imported]


#: The algorithm names whose worker serves EAGLE-3 (and EAGLE, NEXTN) targets.
_EAGLE_NAMES = frozenset({"EAGLE", "EAGLE3"})


def _registrations(tree: ast.Module) -> list[dict]:
    """Module-level calls that register a worker for an EAGLE algorithm: a call with the string
    ``"EAGLE"`` (or ``"EAGLE3"``) among its arguments and a name among the others (0.5.5.post2
    ``sglang/srt/speculative/spec_info.py``: ``register_speculative_algorithm("EAGLE", ...,
    worker_cls=_create_eagle_worker)``); each ``{"line", "names"}``."""
    out = []
    for st in tree.body:
        value = st.value if isinstance(st, (ast.Expr, ast.Assign)) else None
        if not isinstance(value, ast.Call):
            continue
        args = list(value.args) + [k.value for k in value.keywords]
        if not any(isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.upper() in _EAGLE_NAMES
                   for a in args):
            continue
        names = [a.id for a in args if isinstance(a, ast.Name)]
        if names:
            out.append({"line": value.lineno, "names": names})
    return out


def extract_workers(tree: ast.Module) -> dict | None:
    """``{"functions": {qualname: {"line", "params", "kwonly", "calls", "passes", "imports"}},
    "factories": [...]}`` of a speculative module: ``calls`` are ``[subject, member, line]`` (a
    method called on the target model, subject ``"target"``, or on parameter ``p``, subject
    ``"@p"``, unguarded), ``passes`` ``[subject, callee text, argument index or keyword, line]``
    (the target model or a parameter handed to another function), ``imports`` the function's own
    ``from m import n``; ``factories`` see :func:`_factories`; ``registered`` see
    :func:`_registrations`; ``makers`` the module-level functions that import and build a class
    (see :func:`_made_classes`). Functions with neither calls nor
    hand-overs are left out; None when nothing is found."""
    functions: dict[str, dict] = {}
    factories: list[dict] = []
    makers: dict[str, list] = {}   # module-level function -> the worker classes it builds

    def visit(body: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for st in body:
            if isinstance(st, ast.ClassDef):
                visit(st.body, f"{prefix}{st.name}.", True)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                f = _Function(st, in_class)
                if f.calls or f.passes:
                    functions[f"{prefix}{st.name}"] = f.as_dict()
                factories.extend(_factories(st))
                if not prefix and _made_classes(st.body):
                    makers[st.name] = _made_classes(st.body)
            elif isinstance(st, (ast.If, ast.Try)):
                visit(st.body, prefix, in_class)
                visit(getattr(st, "orelse", []), prefix, in_class)

    visit(tree.body, "", False)
    registered = _registrations(tree)
    if not functions and not factories and not registered:
        return None
    return {"functions": functions, "factories": factories, "registered": registered, "makers": makers}


#: The target-model calls of SGLang's speculative package (see :func:`extract_workers`).
WORKERS_EXTRACTOR = Extractor("sglang-spec-workers", extract_workers, prefixes=(SPECULATIVE_DIR,))


# ----------------------------------------------------------------------------- tree facts

@dataclass
class MemberCall:
    """One call of a method on the target model: the member ``name``, where (``path``,
    ``line``), and ``via``: the hand-overs that lead there from a worker (``path:line``, worker
    side first; empty when the worker calls it itself)."""

    name: str
    path: str
    line: int
    via: list[str] = field(default_factory=list)

    def site(self) -> str:
        """``path:line`` of the call, with the worker's hand-over when there is one."""
        here = f"{self.path}:{self.line}"
        return f"{here} (reached from {self.via[0]})" if self.via else here


@dataclass
class WorkerMembers:
    """The members SGLang's EAGLE workers call on the target model.

    ``calls``: member name → its call sites (in path order). ``workers``: the worker classes the
    factory returns for EAGLE (dotted), ``factory``: where (``path:line`` of each branch).
    ``why_none``: why no member is required (no factory branch found, or no call), for reports.
    """

    calls: dict[str, list[MemberCall]] = field(default_factory=dict)
    workers: list[str] = field(default_factory=list)
    factory: list[str] = field(default_factory=list)
    why_none: str = ""

    def names(self) -> list[str]:
        """The member names, in the order first called."""
        return list(self.calls)


def _abs_module(module: str, is_package: bool, target: str, level: int) -> str:
    if level == 0:
        return target
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, target] if target else base)


def worker_members(facts, extractor: Extractor = WORKERS_EXTRACTOR) -> WorkerMembers:
    """The members the tree's EAGLE workers call on the target model (see the module docstring),
    over ``facts`` (the SGLang :class:`auditor.engines.sglang.facts.TreeFacts`)."""
    r = facts.resolver
    tree = facts.tree
    out = WorkerMembers()
    records: dict[str, dict] = {}       # module -> extractor facts
    summaries: dict[str, object] = {}
    for p in facts.candidate_paths(extractor):
        s = tree.summary(p)
        x = s.extras.get(extractor.name)
        if x:
            records[s.module] = x
            summaries[s.module] = s
    workers: list[ClassRef] = []
    for mod in sorted(records):
        s = summaries[mod]
        for fac in records[mod].get("factories", []):
            out.factory.append(f"{s.path}:{fac['line']}")
            for target, name, level in fac["classes"]:
                t = r.resolve_name(_abs_module(mod, s.is_package, target, level), name)
                if isinstance(t, ClassRef) and t not in workers:
                    workers.append(t)
        # a registry: ``register_speculative_algorithm("EAGLE", worker_cls=_create_eagle_worker)``
        for reg in records[mod].get("registered", []):
            out.factory.append(f"{s.path}:{reg['line']}")
            for name in reg["names"]:
                made = records[mod].get("makers", {}).get(name)
                refs = [r.resolve_name(_abs_module(mod, s.is_package, t, lv), n) for t, n, lv in made] if made \
                    else [r.resolve_name(mod, name)]
                for t in refs:
                    if isinstance(t, ClassRef) and t not in workers:
                        workers.append(t)
    if not workers:
        out.why_none = ("no worker factory (a branch under `if <algorithm>.is_eagle()`, or a registration of "
                        "the EAGLE algorithm) that imports and returns a worker class was found in "
                        f"{SPECULATIVE_DIR}")
        return out
    out.workers = [w.dotted for w in workers]
    modules: list[str] = []
    for w in workers:
        for e in r.mro(w).entries:
            if isinstance(e, ClassRef) and e.module in records and e.module not in modules:
                modules.append(e.module)
    seen: set[tuple] = set()

    def add(name: str, path: str, line: int, via: list[str]) -> None:
        sites = out.calls.setdefault(name, [])
        if not any(c.path == path and c.line == line and c.via[:1] == via[:1] for c in sites):
            sites.append(MemberCall(name, path, line, list(via)))

    def follow(mod: str, qualname: str, subject: str, via: list[str], depth: int) -> None:
        key = (mod, qualname, subject, via[0] if via else None)
        if key in seen or depth > MAX_DEPTH:
            return
        seen.add(key)
        rec = records.get(mod, {}).get("functions", {}).get(qualname)
        if rec is None:
            return
        path = summaries[mod].path
        for s, name, line in rec["calls"]:
            if s == subject:
                add(name, path, line, via)
        for s, callee, arg, line in rec["passes"]:
            if s != subject:
                continue
            hop = _callee(mod, qualname, rec, callee)
            if hop is None:
                continue
            cmod, cqual = hop
            crec = records.get(cmod, {}).get("functions", {}).get(cqual)
            if crec is None:
                continue
            params = crec["params"]
            shift = 1 if callee.startswith("self.") else 0
            if isinstance(arg, int):
                i = arg + shift
                pname = params[i] if i < len(params) else None
            else:
                pname = arg if arg in params or arg in crec["kwonly"] else None
            if pname is not None:
                follow(cmod, cqual, f"@{pname}", via + [f"{path}:{line}"], depth + 1)

    def _callee(mod: str, qualname: str, rec: dict, callee: str) -> tuple[str, str] | None:
        if callee.startswith("self.") and callee.count(".") == 1 and "." in qualname:
            return mod, f"{qualname.rsplit('.', 1)[0]}.{callee[5:]}"
        if "." in callee:
            return None
        local = rec["imports"].get(callee)
        t = r.resolve_name(local[0], local[1]) if local else r.resolve_name(mod, callee)
        if isinstance(t, FunctionRef):
            return t.module, t.name
        return None

    for mod in modules:
        for qualname in records[mod].get("functions", {}):
            follow(mod, qualname, TARGET, [], 0)
    for sites in out.calls.values():
        sites.sort(key=lambda c: (c.via[0] if c.via else f"{c.path}:{c.line}", c.path, c.line))
    if not out.calls:
        out.why_none = (f"the EAGLE workers ({', '.join(w.name for w in workers)}) call no method on the target "
                        "model outside hasattr/isinstance guards")
    return out

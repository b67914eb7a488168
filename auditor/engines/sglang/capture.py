"""The summary-pass extractor of SGLang's EAGLE-3 capture facts (:data:`CAPTURE_EXTRACTOR`).

For each class of ``sglang/srt/models/`` (:func:`extract_capture`): its setter (what it writes on
``self``, where it delegates, under which guard, whether it only raises), what its ``__init__``
imports, and each ``forward``'s layer loops (whether a test on the capture list appends or hands
over the aux-states list, and whether ``forward`` returns it). :mod:`auditor.engines.sglang.facts`
reads them per target.
"""

from __future__ import annotations

import ast

from auditor.index.summary import Extractor


def _self_path(node: ast.AST) -> str | None:
    """``self.a.b`` → ``"a.b"``, ``self`` → ``""``, subscripts dropped (``self.layers[i]`` →
    ``"layers[]"``); None for anything not rooted at ``self``."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            parts.append("[]")
            node = node.value
        else:
            break
    if isinstance(node, ast.Name) and node.id == "self":
        out = ""
        for p in reversed(parts):
            out = out + p if p == "[]" else (f"{out}.{p}" if out else p)
        return out
    return None


def _hasattr_target(test: ast.AST) -> list[tuple[str, bool]]:
    """``(self path, negated)`` of each ``hasattr(self.X, "set_...")`` in an ``if`` test."""
    out = []
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr" \
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and node.args[1].value.startswith("set_"):
            p = _self_path(node.args[0])
            if p is not None:
                out.append((p, False))
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) or (
        isinstance(test, ast.BoolOp) and any(isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)
                                             for v in test.values))
    return [(p, negated) for p, _ in out]


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(st, ast.Raise) for st in body)


def _writes_capture(body: list[ast.stmt], path: str) -> bool:
    """True when ``body`` assigns a capture attribute on ``self.<path>``
    (``self.model.layers_to_capture = ...``)."""
    for st in body:
        for node in ast.walk(st):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and "capture" in node.attr \
                    and _self_path(node.value) == path:
                return True
    return False


def _setter_fact(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict:
    """What a ``set_eagle3_layers_to_capture`` body does: ``writes`` (``[self path, attribute,
    line]`` of each assignment or ``setattr`` whose attribute mentions ``capture``),
    ``delegates`` (``[self path, line, guard]`` of each ``self.X.set_...(...)`` call; guard
    ``"silent"`` when the call sits under ``if hasattr(self.X, ...)`` with no ``else`` that
    raises or writes the capture list, ``"checked"`` when that ``else`` raises or an earlier
    ``if not hasattr(self.X, ...): raise`` guards it, ``"fallback"`` when that ``else`` writes
    the capture list on ``self.X`` itself),
    ``raises_only`` (the body only raises), and ``line``."""
    writes: list[list] = []
    delegates: list[list] = []
    checked: set[str] = set()

    def visit(stmts: list[ast.stmt], guards: tuple[tuple[str, bool], ...]) -> None:
        for st in stmts:
            if isinstance(st, ast.If):
                tests = _hasattr_target(st.test)
                if tests and _raises(st.body) and all(neg for _, neg in tests):
                    checked.update(p for p, _ in tests)  # if not hasattr(self.X, ...): raise
                # the else branch: raising makes the delegation "checked"; writing the capture
                # list on the same model itself makes it a "fallback" (nothing is skipped)
                positive = tuple((p, "checked" if _raises(st.orelse) else
                                  "fallback" if _writes_capture(st.orelse, p) else "silent")
                                 for p, neg in tests if not neg)
                visit(st.body, guards + positive)
                visit(st.orelse, guards)
                continue
            for fld in ("body", "orelse", "finalbody"):
                sub = getattr(st, fld, None)
                if sub and not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(sub, guards)
            if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                for t in targets:
                    for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                        if isinstance(e, ast.Attribute) and "capture" in e.attr:
                            p = _self_path(e.value)
                            if p is not None:
                                writes.append([p, e.attr, st.lineno])
            for node in ast.walk(st) if isinstance(st, (ast.Expr, ast.Assign, ast.Return)) else ():
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                if isinstance(f, ast.Name) and f.id == "setattr" and len(node.args) >= 2 \
                        and isinstance(node.args[1], ast.Constant) and "capture" in str(node.args[1].value):
                    p = _self_path(node.args[0])
                    if p is not None:
                        writes.append([p, str(node.args[1].value), node.lineno])
                elif isinstance(f, ast.Attribute) and f.attr.startswith("set_eagle3"):
                    p = _self_path(f.value)
                    if p:
                        guard = None
                        for gp, kind in guards:
                            if gp == p:
                                guard = kind
                        if guard is None and p in checked:
                            guard = "checked"
                        delegates.append([p, node.lineno, guard, f.attr])

    visit(fn.body, ())
    body = [st for st in fn.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    return {"line": fn.lineno, "writes": writes, "delegates": delegates,
            "raises_only": bool(body) and all(isinstance(st, ast.Raise) for st in body)}


def _names(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
    return out


def _is_capture_test(test: ast.AST) -> bool:
    """A test on the capture list (``i in self.layers_to_capture``) or on a per-layer capture
    mark (``getattr(layer, "_is_layer_to_capture", False)``)."""
    return any("to_capture" in n for n in _names(test))


def _aux_name(names: set[str]) -> bool:
    return any("aux" in n for n in names)


def _forward_fact(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict:
    """A ``forward``'s layer loops and return: ``loops`` (``{"line", "captures", "capture_line",
    "mentions", "tests"}``: the loop iterates the layers; ``captures`` when a test on the capture list
    appends to a list or hands the aux-states list (a name with ``aux``) to a call;
    ``mentions`` when the loop mentions the capture list at all; ``tests`` the capture names its
    tests read: ``layers_to_capture``, or a per-layer mark such as ``_is_layer_to_capture``), ``super_forward`` (it calls
    ``super().forward(...)``), ``returns_aux`` (a ``return``
    of a tuple whose later item is, or is computed from, a name with ``aux``), ``line``."""
    # local functions that feed the aux list (a ``capture_output`` closure handed to the layer)
    aux_funcs = {n.name for n in ast.walk(fn) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n is not fn and _aux_name(_names(n))}
    loops = []
    for node in ast.walk(fn):
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            continue
        it_names = _names(node.iter)
        body_names = set().union(*(_names(b) for b in node.body)) if node.body else set()
        if not (any("layer" in n for n in it_names) or "layers" in body_names):
            continue
        captures, line, mentions, tests = False, None, False, set()
        for sub in ast.walk(node):
            if isinstance(sub, (ast.If, ast.IfExp)) and _is_capture_test(sub.test):
                mentions = True
                tests.update(n for n in _names(sub.test) if "to_capture" in n)
                then = sub.body if isinstance(sub, ast.If) else [sub.body]
                hit = False
                for b in then:
                    for n in ast.walk(b):
                        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append":
                            hit = True
                        elif isinstance(n, ast.Name) and ("aux" in n.id or n.id in aux_funcs):
                            hit = True
                if hit:
                    captures, line = True, line or sub.lineno
        loops.append({"line": node.lineno, "captures": captures, "capture_line": line, "mentions": mentions,
                      "tests": sorted(tests)})
    returns_aux = False
    for node in ast.walk(fn):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        # ``return hidden_states, aux_hidden_states`` (or ``aux_hidden_states.finalize()``), also as
        # a branch of ``(hidden_states, aux) if aux else hidden_states``
        values = [node.value]
        while values:
            v = values.pop()
            if isinstance(v, ast.IfExp):
                values += [v.body, v.orelse]
            elif isinstance(v, ast.Tuple) and len(v.elts) >= 2 and any(
                    isinstance(n, ast.Name) and "aux" in n.id for e in v.elts[1:] for n in ast.walk(e)):
                returns_aux = True
    super_forward = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "forward"
                        and isinstance(n.func.value, ast.Call) and isinstance(n.func.value.func, ast.Name)
                        and n.func.value.func.id == "super" for n in ast.walk(fn))
    return {"line": fn.lineno, "loops": loops, "returns_aux": returns_aux, "super_forward": super_forward}


def extract_capture(tree: ast.Module) -> dict | None:
    """Per class qualname (``Outer.Inner`` for nested classes): ``{"setter": ...}`` for a class
    defining ``set_eagle3_layers_to_capture`` (see :func:`_setter_fact`) and ``{"forward": ...}``
    for one whose ``forward`` loops over its layers (see :func:`_forward_fact`); None when the
    module has neither."""
    out: dict[str, dict] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for st in body:
            if isinstance(st, ast.ClassDef):
                qn = f"{prefix}{st.name}"
                facts: dict = {}
                for m in st.body:
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        if m.name.startswith("set_eagle3") or (m.name.startswith("set_") and "capture" in m.name):
                            # every method's capture setter (``set_dflash_layers_to_capture`` too):
                            # what each one writes tells which method the forward's capture serves
                            facts.setdefault("setters", {})[m.name] = _setter_fact(m)
                        elif m.name == "forward":
                            facts["forward"] = _forward_fact(m)
                        elif m.name == "__init__":
                            local = {}
                            for n in ast.walk(m):
                                if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                                    for a in n.names:
                                        local[a.asname or a.name] = [n.module, a.name]
                            if local:
                                facts["init_imports"] = local
                if facts:
                    out[qn] = facts
                visit(st.body, f"{qn}.")
            elif isinstance(st, (ast.If, ast.Try)):
                visit(st.body, prefix)
                visit(getattr(st, "orelse", []), prefix)

    visit(tree.body, "")
    return out or None


#: The capture facts of SGLang model classes (see :func:`extract_capture`).
CAPTURE_EXTRACTOR = Extractor("sglang-capture", extract_capture, prefixes=("sglang/srt/models/",))

"""Facts of the ``parallel-drafting-mm`` gate, found by what the code does.

The speculative proposer (``vllm/v1/spec_decode/eagle.py``, ``llm_base_proposer.py`` from 0.20)
has a method that raises when the target takes multimodal inputs
(``_raise_if_multimodal``: ``if self.supports_mm_inputs: raise NotImplementedError(...)``), and
calls it from ``__init__`` under a condition derived from the run's options
(``if self.needs_extra_input_slots:``, itself computed from ``parallel_drafting`` and
``num_speculative_tokens``). Later releases turned the guard into a warning (no ``raise``: no
fact). The condition is decided per run by :func:`guard_fires`, which interprets the caller's
statements before the call with :mod:`auditor.index.evaluate`.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.evaluate import Evaluator
from auditor.index.summary import Extractor
from auditor.index.syntax import walk_statements
from auditor.index.values import TOP, Inputs, State, one, truth


@cacheable
@dataclass
class MMGuardFact:
    """A call of a multimodal guard: the ``guard`` method (``_raise_if_multimodal``) and its
    ``guard_line``, the error ``message``; the ``caller`` method and its ``caller_line``, and the
    ``line`` of the ``if`` (a statement of the caller's body) under which it calls the guard."""

    guard: str
    guard_line: int
    message: str
    caller: str
    caller_line: int
    line: int


def _mentions_mm(test: ast.AST) -> bool:
    for n in ast.walk(test):
        name = n.attr if isinstance(n, ast.Attribute) else (n.id if isinstance(n, ast.Name) else "")
        low = name.lower()
        if "multimodal" in low or "mm" in low.split("_"):
            return True
    return False


def _raises_for_mm(fn: ast.FunctionDef) -> tuple[int, str] | None:
    for n in ast.walk(fn):
        if isinstance(n, ast.If) and _mentions_mm(n.test):
            for s in n.body:
                if isinstance(s, ast.Raise):
                    exc = s.exc
                    msg = ""
                    if isinstance(exc, ast.Call) and exc.args:
                        msg = "".join(v.value for v in ast.walk(exc.args[0])
                                      if isinstance(v, ast.Constant) and isinstance(v.value, str))[:200]
                    return n.lineno, msg
    return None


def extract_mm_guards(tree: ast.Module) -> list[MMGuardFact]:
    """Every call ``self.<guard>()`` under a top-level ``if`` of a method, where ``<guard>`` is a
    method of the same class that raises for multimodal inputs."""
    out = []
    for cls in [n for n in walk_statements(tree) if isinstance(n, ast.ClassDef)]:
        methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        guards = {name: hit for name, f in methods.items() if (hit := _raises_for_mm(f)) is not None}
        if not guards:
            continue
        for caller in methods.values():
            for stmt in caller.body:
                if not isinstance(stmt, ast.If):
                    continue
                for n in ast.walk(stmt):
                    if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in guards
                            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"):
                        line, msg = guards[n.func.attr]
                        out.append(MMGuardFact(n.func.attr, line, msg, caller.name, caller.lineno, stmt.lineno))
    return out


#: Runs on the proposer modules that mention parallel drafting.
EXTRACTOR = Extractor("mm-guard", extract_mm_guards, prefixes=("vllm/v1/spec_decode/",),
                      needles=(b"parallel_drafting", b"raise"))


class _Run(Inputs):
    """The run's options as the proposer reads them: ``*.parallel_drafting``,
    ``*.num_speculative_tokens`` (unknown when not given) and ``*.method``."""

    roots = ("self", "vllm_config", "speculative_config")

    def __init__(self, parallel_drafting: bool, k: int | None, method: str):
        self.pd, self.k, self.method = parallel_drafting, k, method

    def value(self, path: str):
        last = path.rsplit(".", 1)[-1]
        if "." in path and last == "parallel_drafting":
            return one(self.pd)
        if "." in path and last == "num_speculative_tokens":
            return one(self.k) if self.k is not None else TOP
        if "." in path and last == "method":
            return one(self.method)
        return TOP


def guard_fires(ctx, path: str, fact: MMGuardFact, parallel_drafting: bool, k: int | None,
                method: str) -> bool | None:
    """Whether the proposer calls the guard for this run: True, False, or None when its condition
    cannot be decided (it depends on something the run options do not give)."""
    fn = ctx.function_node(path, fact.caller, fact.caller_line)
    if fn is None:
        return None
    inputs = _Run(parallel_drafting, k, method)
    inputs.roots = ("self", *[a.arg for a in fn.args.args + fn.args.kwonlyargs])
    ev = Evaluator(inputs)
    st = State()
    before = []
    target = None
    for s in fn.body:
        if s.lineno == fact.line and isinstance(s, ast.If):
            target = s
            break
        before.append(s)
    if target is None:
        return None
    ends = ev.run(before, st)
    if ends is None:
        return None
    live = [o for o in ends if o.kind == "end"]
    if len(live) != 1:
        return None
    return truth(ev.eval(target.test, live[0].state))

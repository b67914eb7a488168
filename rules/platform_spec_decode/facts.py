"""Facts of the ``platform-spec-decode`` gate, found by structure.

- A platform module (``vllm/platforms/<platform>.py``) names its worker class as a string:
  ``parallel_config.worker_cls = "vllm.v1.worker.cpu_worker.CPUWorker"`` (:data:`WORKER_EXTRACTOR`).
- A worker class builds its model runner: ``self.model_runner = CPUModelRunner(...)``; a runner's
  ``__init__`` may refuse any speculative config: a top-level ``assert <x>.speculative_config is
  None`` or ``if <x>.speculative_config [is not None]: raise`` (:data:`RUNNER_EXTRACTOR`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import walk


def extract_worker_cls(tree: ast.Module) -> list[tuple[str, int]]:
    """The dotted class names assigned to ``*.worker_cls`` (with their lines)."""
    out = []
    for n in walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            if any(isinstance(t, ast.Attribute) and t.attr == "worker_cls" for t in n.targets) and "." in n.value.value:
                out.append((n.value.value, n.lineno))
    return out


@cacheable
@dataclass
class WorkerFacts:
    """One module of ``vllm/v1/worker/``: ``runners``: worker class → the names of the classes it
    assigns to ``self.model_runner``; ``refusals``: runner class → ``(line, message)`` of its
    ``__init__``'s refusal of a speculative config."""

    runners: dict[str, list[str]] = field(default_factory=dict)
    refusals: dict[str, tuple[int, str]] = field(default_factory=dict)


def _mentions_spec_config(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "speculative_config" for n in walk(node))


def _is_none_test(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
            and isinstance(test.left, ast.Attribute) and test.left.attr == "speculative_config")


def _refusal(init: ast.FunctionDef) -> tuple[int, str] | None:
    for s in init.body:
        if isinstance(s, ast.Assert) and _is_none_test(s.test):
            msg = s.msg.value if isinstance(s.msg, ast.Constant) and isinstance(s.msg.value, str) else ""
            return s.lineno, msg[:200]
        if isinstance(s, ast.If) and _mentions_spec_config(s.test) and not s.orelse:
            t = s.test
            refuses_when_set = (isinstance(t, ast.Attribute) and t.attr == "speculative_config") or (
                isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.IsNot)
                and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None
                and isinstance(t.left, ast.Attribute) and t.left.attr == "speculative_config")
            r = next((b for b in s.body if isinstance(b, ast.Raise)), None)
            if refuses_when_set and r is not None:
                exc = r.exc
                msg = ""
                if isinstance(exc, ast.Call) and exc.args and isinstance(exc.args[0], ast.Constant):
                    msg = str(exc.args[0].value)[:200]
                return r.lineno, msg
    return None


def extract_worker_facts(tree: ast.Module) -> list[WorkerFacts]:
    """The worker → model runner constructions and the runners' refusals of one module (one
    :class:`WorkerFacts`, or none)."""
    facts = WorkerFacts()
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in walk(fn):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
                value = getattr(n, "value", None)
                if (any(isinstance(t, ast.Attribute) and t.attr == "model_runner" for t in targets)
                        and isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute))):
                    name = value.func.id if isinstance(value.func, ast.Name) else ast.unparse(value.func)
                    facts.runners.setdefault(cls.name, []).append(name)
            if fn.name == "__init__":
                hit = _refusal(fn)
                if hit is not None:
                    facts.refusals[cls.name] = hit
    return [facts] if (facts.runners or facts.refusals) else []


def _worker_or_runner(source: bytes) -> bool:
    """A module that builds a model runner or reads the speculative config."""
    return b"model_runner" in source or b"speculative_config" in source


#: The platform modules' worker classes.
WORKER_EXTRACTOR = Extractor("platform-worker", extract_worker_cls, prefixes=("vllm/platforms/",),
                             needles=(b"worker_cls",))
#: The workers' model runners and the runners' refusals of speculative decoding.
RUNNER_EXTRACTOR = Extractor("worker-runner", extract_worker_facts, prefixes=("vllm/v1/worker/",),
                             prefilter=_worker_or_runner)

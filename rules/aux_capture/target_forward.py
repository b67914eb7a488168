"""The ``aux-capture`` gate's view of the target's own ``forward``: the engine calls the target,
whose ``forward`` calls the holder's and must hand on what it returns, ``(hidden_states,
aux_hidden_states)`` once aux states are captured (vLLM's ``LlamaForCausalLM.forward`` returns
``self.model(...)`` as it is). A ``forward`` that indexes that result (``out[0]``,
``self.model(...)[0]``) or unpacks it (``hidden_states, _ = self.model(...)``) without returning
every part may drop the aux states: what reaches the runner is not followed. A type test alone
drops nothing (0.33.0's ``MiniCPMForCausalLM.forward`` tests ``isinstance(model_output, tuple)``,
unpacks it and returns both parts).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import walk


@cacheable
@dataclass
class ForwardDropFact:
    """A class's ``forward`` that takes apart what a ``self.<head>...(...)`` call returns:
    ``qualname`` of the class, ``line`` of the ``def``, the attribute ``head`` called through,
    the ``construct`` (source text, shortened) and the line it is ``at``."""

    qualname: str
    line: int
    head: str
    construct: str
    at: int


def _self_call_head(node: ast.AST) -> str | None:
    """``h`` for a call ``self.h(...)`` or ``self.h.x...(...)``, else None."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    while isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute):
        f = f.value
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        return f.attr
    return None


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 80 else text[:77] + "..."


def _drops(fn: ast.FunctionDef) -> tuple[str, str, int] | None:
    """``(head, construct, line)`` of the first place ``fn`` takes a holder call's result apart."""
    results: dict[str, str] = {}
    returned: list[ast.AST] = []
    nodes = list(walk(fn))
    for n in nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            head = _self_call_head(n.value)
            if head:
                results[n.targets[0].id] = head
        elif isinstance(n, ast.Return) and n.value is not None:
            returned.append(n.value)
    for n in nodes:
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
            head = _self_call_head(n.value)
            if head is None and isinstance(n.value, ast.Name):
                head = results.get(n.value.id)
            if head:
                return head, _short(n), n.lineno
        elif isinstance(n, ast.Assign) and isinstance(n.targets[0], (ast.Tuple, ast.List)):
            head = _self_call_head(n.value)
            if head is None and isinstance(n.value, ast.Name):
                head = results.get(n.value.id)
            if head:
                names = {e.id for e in n.targets[0].elts if isinstance(e, ast.Name)}
                if not any(isinstance(r, ast.Tuple) and names <= {e.id for e in r.elts if isinstance(e, ast.Name)}
                           for r in returned):
                    return head, _short(n), n.lineno
    return None


def extract_forward_drops(tree: ast.Module) -> list[ForwardDropFact]:
    """Every class ``forward`` of a module (classes nested in classes too) that takes apart what
    a ``self.<head>...(...)`` call returns (see :class:`ForwardDropFact`)."""
    out = []
    todo = [(c, c.name) for c in tree.body if isinstance(c, ast.ClassDef)]
    while todo:
        cls, qual = todo.pop()
        for st in cls.body:
            if isinstance(st, ast.ClassDef):
                todo.append((st, f"{qual}.{st.name}"))
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == "forward":
                hit = _drops(st)
                if hit:
                    out.append(ForwardDropFact(qual, st.lineno, *hit))
    return sorted(out, key=lambda f: f.line)


#: Runs on the model files.
EXTRACTOR = Extractor("forward-drops", extract_forward_drops,
                      prefixes=("vllm/model_executor/models/", "vllm/models/"), needles=(b"def forward",))


def target_drops(ctx, target_ref, holder_via: str) -> tuple[str, str, int] | None:
    """Whether the target's ``forward`` (the first on its MRO) takes apart what the holder's
    call returns.

    Args:
        ctx: the audit context.
        target_ref: the target class.
        holder_via: how the holder was found (``self.model = LlamaModel(...)``, or a wrapper's
            language model), to tell the holder's attribute from others (``self.lm_head``).

    Returns:
        ``(message, path, line)`` naming the construct, or None.
    """
    r = ctx.resolver
    hit = r.lookup(target_ref, "forward")
    if hit is None:
        return None
    owner = hit[0]
    m = r.tree.module(owner.module)
    if m is None:
        return None
    m_head = re.match(r"self\.(\w+)", holder_via)
    heads = {m_head.group(1)} if m_head else {"model", "language_model"}
    path = m.path
    for f in ctx.facts.found_in(EXTRACTOR, path):
        if f.qualname == owner.qualname and f.head in heads:
            return (f"{owner.name}.forward ({path}:{f.line}) takes apart what self.{f.head} returns (`{f.construct}` "
                    f"at line {f.at}): the aux hidden states the holder returns with hidden_states may not reach "
                    "the runner, which static analysis does not follow", path, f.line)
    return None

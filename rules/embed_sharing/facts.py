"""Facts of the ``embed-sharing`` gate, found by what the proposer's code does.

vLLM's EAGLE/MTP proposer (``vllm/v1/spec_decode/eagle.py``; ``llm_base_proposer.py`` from 0.20),
``_maybe_share_embeddings(target_language_model)``, with one pipeline stage::

    inner_model = getattr(target_language_model, "model", None)
    if inner_model is None:
        raise AttributeError("Target model does not have 'model' attribute")
    if hasattr(inner_model, "embed_tokens"): ...
    elif hasattr(inner_model, "embedding"): ...
    else:
        raise AttributeError(...)

:func:`extract_attr_chains` reads that shape from any function: a ``getattr(P, "A", None)`` whose
``None`` raises, then an ``if hasattr(V, "X") / elif hasattr(V, "Y") / else: raise`` chain on the
result, giving the chain of attribute steps ``[["model"], ["embed_tokens", "embedding"]]`` that
the parameter ``P`` must satisfy, and whether the code runs only with one pipeline stage (an
enclosing ``if`` that tests ``world_size``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from auditor.cache import cacheable
from auditor.index.summary import Extractor


@cacheable
@dataclass
class AttrChainFact:
    """A function that raises unless its parameter ``param`` has a chain of attributes.

    ``function``/``line``: the function and its ``def`` line; ``steps``: one list of alternative
    attribute names per step (``[["model"], ["embed_tokens", "embedding"]]``); ``raise_lines``:
    the line of each step's ``raise``; ``messages``: each raise's message; ``single_stage``: the
    checks run only with one pipeline stage (``if get_pp_group().world_size == 1:``)."""

    function: str
    line: int
    param: str
    steps: list[list[str]] = field(default_factory=list)
    raise_lines: list[int] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    single_stage: bool = False


def _message(node: ast.Raise) -> str:
    exc = node.exc
    if isinstance(exc, ast.Call) and exc.args:
        return "".join(v.value for v in ast.walk(exc.args[0]) if isinstance(v, ast.Constant)
                       and isinstance(v.value, str))[:200]
    return ""


def _getattr_none(value: ast.AST) -> tuple[str, str] | None:
    """``getattr(P, "A", None)`` -> (P, A)."""
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr"
            and len(value.args) == 3 and isinstance(value.args[0], ast.Name)
            and isinstance(value.args[1], ast.Constant) and isinstance(value.args[1].value, str)
            and isinstance(value.args[2], ast.Constant) and value.args[2].value is None):
        return value.args[0].id, value.args[1].value
    return None


def _raises(body: list[ast.stmt]) -> ast.Raise | None:
    return next((s for s in body if isinstance(s, ast.Raise)), None)


def _hasattr_chain(node: ast.If, var: str) -> tuple[list[str], ast.Raise] | None:
    """``if hasattr(var, "X"): ... elif hasattr(var, "Y"): ... else: raise`` -> ([X, Y], raise)."""
    names = []
    cur: ast.stmt = node
    while isinstance(cur, ast.If):
        t = cur.test
        if not (isinstance(t, ast.Call) and isinstance(t.func, ast.Name) and t.func.id == "hasattr"
                and len(t.args) == 2 and isinstance(t.args[0], ast.Name) and t.args[0].id == var
                and isinstance(t.args[1], ast.Constant) and isinstance(t.args[1].value, str)):
            return None
        names.append(t.args[1].value)
        if len(cur.orelse) == 1 and isinstance(cur.orelse[0], ast.If):
            cur = cur.orelse[0]
            continue
        r = _raises(cur.orelse)
        return (names, r) if r is not None and names else None
    return None


def _tests_world_size(test: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "world_size" for n in ast.walk(test))


def _scan_body(body: list[ast.stmt], fact: AttrChainFact, params: set[str], single: bool) -> None:
    """Find the getattr/raise and hasattr/raise steps in one statement list (and nested ``if``
    bodies that test the pipeline world size)."""
    current: str | None = None  # the variable holding the last step's attribute
    for i, s in enumerate(body):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            hit = _getattr_none(s.value)
            if hit and (hit[0] in params or hit[0] == current):
                nxt = body[i + 1] if i + 1 < len(body) else None
                if (isinstance(nxt, ast.If) and isinstance(nxt.test, ast.Compare) and isinstance(nxt.test.left, ast.Name)
                        and nxt.test.left.id == s.targets[0].id and isinstance(nxt.test.ops[0], ast.Is)
                        and (r := _raises(nxt.body)) is not None):
                    if not fact.steps:
                        fact.param = hit[0]
                    fact.steps.append([hit[1]])
                    fact.raise_lines.append(r.lineno)
                    fact.messages.append(_message(r))
                    fact.single_stage = fact.single_stage or single
                    current = s.targets[0].id
            continue
        if isinstance(s, ast.If):
            if current is not None:
                chain = _hasattr_chain(s, current)
                if chain is not None:
                    fact.steps.append(chain[0])
                    fact.raise_lines.append(chain[1].lineno)
                    fact.messages.append(_message(chain[1]))
                    current = None
                    continue
            if not fact.steps and _tests_world_size(s.test):
                _scan_body(s.body, fact, params, True)


def extract_attr_chains(tree: ast.Module) -> list[AttrChainFact]:
    """Every function that raises unless a parameter has a chain of attributes (see the module
    docstring); only chains of at least two steps, the second a set of alternatives."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs} - {"self"}
        fact = AttrChainFact(fn.name, fn.lineno, "")
        _scan_body(fn.body, fact, params, False)
        if len(fact.steps) >= 2:
            out.append(fact)
    return out


#: Runs on the speculative-decoding proposer modules that raise AttributeError.
EXTRACTOR = Extractor("attr-chain", extract_attr_chains, prefixes=("vllm/v1/spec_decode/",),
                      needles=(b"getattr(", b"hasattr(", b"AttributeError"))

"""Facts of the ``pp-aux-transport`` gate: the check that an inner model carries EAGLE-3 aux hidden
states across pipeline stages, found by what it does.

From the release that introduced the transport (``EagleModelMixin.pack_local_aux_hidden_states``
/ ``collect_remote_aux_hidden_states`` in ``vllm/model_executor/models/interfaces.py``), the
runner refuses EAGLE-3 under pipeline parallelism unless the inner model declares it:
``if not getattr(inner, "supports_aux_hidden_states_over_pp", False): raise ...``
(``verify_supports_aux_hidden_states_over_pp`` in
``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``, 0.33.0). Before that release no such
check (and no transport) exists: every stage but the last drops what it captured.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import ParentMap

#: The class attribute an inner model sets to declare the transport.
FLAG = "supports_aux_hidden_states_over_pp"


@cacheable
@dataclass
class TransportCheckFact:
    """The refusal of a model without the transport: ``line`` of the ``if``, ``function``, and
    the start of the error ``message``."""

    line: int
    function: str
    message: str


def _text(node: ast.AST) -> str:
    """The text of a string or f-string literal (``{...}`` for each replacement field)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{...}" for v in node.values)
    return ""


def _reads_flag(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" and len(n.args) >= 2
                and isinstance(n.args[1], ast.Constant) and n.args[1].value == FLAG):
            return True
        if isinstance(n, ast.Attribute) and n.attr == FLAG:
            return True
    return False


def extract_transport_check(tree: ast.Module) -> list[TransportCheckFact]:
    """Every ``if not <inner model's FLAG>: raise`` of a module."""
    out = []
    pm: ParentMap | None = None
    for n in ast.walk(tree):
        if not (isinstance(n, ast.If) and isinstance(n.test, ast.UnaryOp) and isinstance(n.test.op, ast.Not)
                and _reads_flag(n.test)):
            continue
        raises = [s for s in n.body if isinstance(s, ast.Raise)]
        if not raises:
            continue
        exc = raises[0].exc
        msg = _text(exc.args[0])[:200] if isinstance(exc, ast.Call) and exc.args else ""
        pm = pm or ParentMap(tree)
        fn = pm.enclosing_function(n)
        out.append(TransportCheckFact(n.lineno, getattr(fn, "name", "<module>"), msg))
    return out


#: Runs on the v1 engine's modules that name the flag.
EXTRACTOR = Extractor("pp-aux-transport", extract_transport_check, prefixes=("vllm/v1/",),
                      needles=(FLAG.encode(),))


def transport_check(ctx) -> tuple[str, TransportCheckFact] | None:
    """``(path, fact)`` of the tree's transport check, or None (the tree has no transport)."""
    found = ctx.facts.found(EXTRACTOR)
    return found[0] if found else None

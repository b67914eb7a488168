"""The ``interface`` gate's checker function: what the runner's ``supports_eagle3(model)`` does as
Python would run it, read from the tree's ``vllm/model_executor/models/interfaces.py``.

- The name's last binding wins: a ``def`` rebound later by a lambda (``supports_eagle3 = lambda m:
  False``), by an import alias (``from x import other as supports_eagle3``) or by another value is
  what the runner imports.
- ``isinstance(model, SupportsEagle3)`` raises ``TypeError`` ("Instance and class checks can only
  be used with @runtime_checkable protocols") when the protocol class derives from
  ``typing.Protocol`` but lacks ``@runtime_checkable``, whether or not the model inherits it.
"""

from __future__ import annotations

import ast

from auditor.index.targets import ClassRef, External, FunctionRef

#: The decorators that make a protocol runtime-checkable (``typing``'s and its backport's).
RUNTIME_CHECKABLE = frozenset({"typing.runtime_checkable", "typing_extensions.runtime_checkable"})

#: Constants a refusing checker returns.
_FALSE = ("False", "None", "0")


def checker_name(protocol: str) -> str:
    """The checker function of a protocol: ``SupportsEagle3`` → ``supports_eagle3``."""
    return "supports_" + protocol.removeprefix("Supports").lower()


def _lambda_at(ctx, path: str, line: int) -> ast.Lambda | None:
    """The lambda bound by the module-level assignment at ``path:line``, or None (parsed from the
    module's text: only a tree whose checker is not a ``def`` gets here)."""
    try:
        tree = ast.parse(ctx.resolver.tree.read(path))
    except (SyntaxError, ValueError, OSError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno == line and isinstance(node.value, ast.Lambda):
            return node.value
    return None


def _rebound(ctx, fname: str, method: str, m, target) -> tuple[str, str, str, int] | None:
    """The verdict on a checker name the interfaces module binds to something else than a
    function of the tree: ``("error" | "unknown", message, path, line)``."""
    b = m.bindings.get(fname)
    line = b.line if b is not None else None
    where = f"{m.path}:{line}" if line else m.path
    if b is not None and b.kind == "other" and b.target == "<Lambda>":
        lam = _lambda_at(ctx, m.path, b.line)
        if lam is not None and isinstance(lam.body, ast.Constant) and repr(lam.body.value) in _FALSE:
            return ("error", f"{fname} is rebound at {where} to a lambda that returns {lam.body.value!r} (the last "
                    f"binding wins): the runner refuses every {method} target", m.path, line)
        return ("unknown", f"{fname} is rebound at {where} to a lambda (the last binding wins): what it answers for "
                "a target static analysis does not follow", m.path, line)
    if isinstance(target, External):
        return ("unknown", f"{fname} is bound at {where} to {target.name}, from outside the tree (the last binding "
                "wins): what it answers static analysis cannot read", m.path, line)
    what = f"the class {target.name}" if isinstance(target, ClassRef) else getattr(target, "reason", "a value")
    return ("unknown", f"{fname} as the runner imports it from {m.path} is not a function static analysis can "
            f"follow ({what}){f', bound at {where}' if line else ''}", m.path, line)


def _not_runtime_checkable(ctx, f: FunctionRef, ff, proto, method: str) -> tuple[str, str, str, int] | None:
    """The verdict when the checker ``f`` tests ``isinstance(x, <protocol>)`` and the protocol
    class, a ``typing.Protocol``, is not ``@runtime_checkable``: the check raises ``TypeError``."""
    if proto is None or ff.gives is None or not ctx.facts.is_typing_protocol(proto.ref):
        return None
    r = ctx.resolver
    tests = [ret for ret in ff.gives.returns if ret[0] == "call" and ret[1] == "isinstance" and len(ret[2]) == 2]
    if not any(r.resolve_name(f.module, ret[2][1]) == proto.ref for ret in tests):
        return None
    c = r.cls(proto.ref)
    if c is None:
        return None
    decos = [(t, r.resolve_dotted(proto.ref.module, t.removesuffix("(...)"))) for t in c.decorators]
    if any(isinstance(x, External) and x.name in RUNTIME_CHECKABLE for _, x in decos):
        return None
    if decos:
        shown = ", ".join(f"@{t}" for t, _ in decos)
        return ("unknown", f"{proto.ref.name} ({proto.path}:{proto.line}) is a typing Protocol decorated with {shown}, "
                "not with typing's @runtime_checkable: static analysis cannot tell whether the runner's isinstance "
                "check runs or raises TypeError", proto.path, proto.line)
    fm = r.tree.module(f.module)
    return ("error", f"{proto.ref.name} ({proto.path}:{proto.line}) is a typing Protocol without @runtime_checkable: "
            f"{f.name}() ({fm.path}:{ff.line}) calls isinstance on it, which raises TypeError for every {method} "
            "target", proto.path, proto.line)


def checker_verdict(ctx, method: str, protocol: str | None, proto) -> tuple[str, str, str, int | None] | None:
    """What the tree's checker function of the method's protocol does to every target.

    Args:
        ctx: the audit context.
        method: the speculative method (``eagle3``).
        protocol: the protocol's name (``SupportsEagle3``), None when the method has none.
        proto: the tree's :class:`auditor.engines.vllm.facts.Protocol`, or None.

    Returns:
        ``(severity "error" | "unknown", message, path, line)``: every path through the checker
        returns a false constant, the checker is rebound to a refusing lambda, or its
        ``isinstance`` check raises (error); it is rebound to something static analysis cannot
        follow (unknown). None when the checker may accept a target, or there is none.
    """
    if protocol is None or not ctx.resolver.tree.has_module(ctx.facts.interfaces_module):
        return None
    fname = checker_name(protocol)
    r = ctx.resolver
    f = r.resolve_name(ctx.facts.interfaces_module, fname)
    if not isinstance(f, FunctionRef):
        m = r.tree.module(ctx.facts.interfaces_module)
        if m is None or (fname not in m.bindings and fname not in m.cond_bindings):
            return None  # no checker (vLLM <= 0.10.0 calls the methods by duck typing)
        return _rebound(ctx, fname, method, m, f)
    fm = r.tree.module(f.module)
    ff = fm.functions.get(f.name) if fm else None
    if ff is None:
        return None
    if ff.returns and all(x in _FALSE for x in ff.returns):
        return ("error", f"{fname}() ({fm.path}:{ff.line}) always returns {ff.returns[0]}: the runner refuses every "
                f"{method} target", fm.path, ff.line)
    return _not_runtime_checkable(ctx, f, ff, proto, method)

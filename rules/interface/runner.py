"""Whether the runner's call to the target's ``set_aux_hidden_state_layers`` can run: the
``interface`` gate's view of the engine side.

vLLM's GPU model runner (``vllm/v1/worker/gpu_model_runner.py``: ``load_model`` up to 0.17,
``_setup_eagle3_aux_hidden_state_outputs`` later; Model Runner V2's
``v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``) hands the aux layers to the target under a
flag, ``if self.use_aux_hidden_state_outputs:`` (or ``if not ...: return`` before the call). When
the call never runs, the target never captures anything, however well it implements the
protocol. Read per call site, from the syntax tree of the module that makes it:

- a ``return`` or ``raise`` that always runs before the call (in its block or an enclosing one,
  within the same function) makes it dead;
- a flag the call needs true (``self.X`` tested by an ``if`` around it, or by ``if not self.X:
  return`` before it) that the runner's class always leaves false: set to a false constant, with
  no later write, at the top level of ``__init__`` (when no other method writes it) or of the
  calling method before the call, makes it dead; a false constant written in another method is
  not followed (``unknown``).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.providers import FactProvider
from auditor.index.summary import Extractor
from auditor.index.syntax import walk

#: The target's method the runner calls.
SETTER = "set_aux_hidden_state_layers"

#: The runtime modules that may call it.
RUNTIME_PREFIXES = ("vllm/v1/", "vllm/worker/", "vllm/spec_decode/")

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


@cacheable
@dataclass
class SetterCallFact:
    """One call ``x.set_aux_hidden_state_layers(...)`` in a runtime module: its ``line``, the
    ``function`` that makes it and that function's ``owner`` class ('' at module level);
    ``blocked`` True when it can never run, else whether it runs is not decided (``why``, the
    construct and its ``line_of``, is empty when nothing keeps it from running)."""

    line: int
    function: str
    owner: str = ""
    blocked: bool = False
    why: str = ""
    line_of: int | None = None


def _falsy(node: ast.AST | None) -> bool:
    """True for ``False``, ``None``, ``0``, ``""`` and empty literals."""
    if isinstance(node, ast.Constant):
        return not node.value
    return isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and not getattr(node, "elts", getattr(
        node, "keys", None))


def _self_attr(node: ast.AST) -> str | None:
    """``X`` for ``self.X``, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _truthy_flags(test: ast.AST) -> set[str]:
    """The ``self.X`` that must be true for ``test`` to be true (``self.X``, ``self.X and ...``)."""
    if _self_attr(test):
        return {_self_attr(test)}
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return set().union(*(_truthy_flags(v) for v in test.values))
    return set()


def _falsy_flags(test: ast.AST) -> set[str]:
    """The ``self.X`` whose falseness makes ``test`` true (``not self.X``, ``not self.X or ...``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _truthy_flags(test.operand)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return set().union(*(_falsy_flags(v) for v in test.values))
    return set()


def _ends(body: list[ast.stmt]) -> bool:
    """True when the block always leaves by a ``return`` or ``raise`` at its top level."""
    return any(isinstance(s, (ast.Return, ast.Raise)) for s in body)


def _path(fn: ast.AST, call: ast.AST, parent: dict) -> list[tuple[list[ast.stmt], ast.stmt, ast.AST, str]]:
    """From the call up to ``fn``: each ``(block, statement of the block on the way, the
    statement's owner node, the owner's field)``, innermost first."""
    out = []
    node = call
    while node is not fn and node in parent:
        up = parent[node]
        if isinstance(node, ast.stmt):
            for fname, value in ast.iter_fields(up):
                if isinstance(value, list) and node in value:
                    out.append((value, node, up, fname))
                    break
        if isinstance(up, _FUNCS + (ast.Lambda, ast.ClassDef)) and up is not fn:
            return []  # a nested function or class: its own flow, not followed
        node = up
    return out


def _writes(cls: ast.ClassDef, flag: str) -> list[tuple[str, int, bool, bool]]:
    """``(method, line, value is a false constant, at the method's top level)`` of every
    ``self.<flag> = v`` in the class's methods."""
    out = []
    for m in cls.body:
        if not isinstance(m, _FUNCS):
            continue
        top = {id(s) for s in m.body}
        for n in walk(m):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                n, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if _self_attr(t) == flag:
                    val = n.value if not isinstance(n, ast.AugAssign) else None
                    out.append((m.name, n.lineno, val is not None and _falsy(val), id(n) in top))
    return out


def _flag_dead(flag: str, fn: ast.AST, cls: ast.ClassDef | None, call_top: ast.stmt) -> tuple[bool, str, int] | None:
    """Whether the runner's class leaves ``flag`` false where the call in ``fn`` tests it
    (``call_top``: the statement of ``fn``'s body that holds the call)."""
    if cls is None:
        return None
    writes = _writes(cls, flag)
    mine = sorted(w for w in writes if w[0] == fn.name and w[1] < call_top.lineno)
    if mine:
        name, line, falsy, top = mine[-1]
        if falsy and top:
            return True, f"{fn.name} sets self.{flag} to a false constant before it tests it", line
        return None  # set in the method itself before the test: the method decides
    init = sorted(w for w in writes if w[0] == "__init__")
    others = [w for w in writes if w[0] not in ("__init__", fn.name)]
    if fn.name != "__init__" and init and init[-1][2] and init[-1][3] and not any(not w[2] for w in others):
        return True, f"__init__ leaves self.{flag} a false constant and no method sets it otherwise", init[-1][1]
    for name, line, falsy, _ in sorted(others, key=lambda w: w[1]):
        if falsy:
            return False, (f"{name} sets self.{flag} to a false constant; whether that runs before {fn.name} "
                           "tests it static analysis does not follow"), line
    return None


def _verdict(fn: ast.AST, call: ast.Call, parent: dict) -> tuple[bool, str, int] | None:
    """``(blocked, why, line)`` for one call, or None when nothing keeps it from running."""
    path = _path(fn, call, parent)
    if not path:
        return None
    flags: set[str] = set()
    for block, stmt, owner, field_name in path:
        for s in block[:block.index(stmt)]:
            if isinstance(s, (ast.Return, ast.Raise)):
                kind = "return" if isinstance(s, ast.Return) else "raise"
                return True, f"the `{kind}` at line {s.lineno} always runs before it", s.lineno
            if isinstance(s, ast.If) and _ends(s.body) and not s.orelse:
                flags |= _falsy_flags(s.test)  # if not self.X: return
        if isinstance(owner, (ast.If, ast.While)) and field_name == "body":
            flags |= _truthy_flags(owner.test)
    cls = parent.get(fn)
    top = path[-1][1]
    for flag in sorted(flags):
        hit = _flag_dead(flag, fn, cls if isinstance(cls, ast.ClassDef) else None, top)
        if hit is not None:
            return hit[0], f"it runs only when self.{flag} is true, and {hit[1]}", hit[2]
    return None


def extract_setter_calls(tree: ast.Module) -> list[SetterCallFact]:
    """Every call of ``set_aux_hidden_state_layers`` in a function of a module, with what keeps
    it from running (see :class:`SetterCallFact`)."""
    parent: dict = {}
    calls = []
    for p in walk(tree):
        for c in ast.iter_child_nodes(p):
            parent[c] = p
        if isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) and p.func.attr == SETTER:
            calls.append(p)
    out = []
    for call in calls:
        fn = parent.get(call)
        while fn is not None and not isinstance(fn, _FUNCS):
            fn = parent.get(fn)
        if fn is None:
            continue
        owner = parent.get(fn)
        v = _verdict(fn, call, parent)
        out.append(SetterCallFact(call.lineno, fn.name, owner.name if isinstance(owner, ast.ClassDef) else "",
                                  *((v[0], v[1], v[2]) if v else (False, "", None))))
    out.sort(key=lambda f: f.line)
    return out


#: Runs on the runtime modules that name the setter.
EXTRACTOR = Extractor("aux-setter-calls", extract_setter_calls, prefixes=RUNTIME_PREFIXES, needles=(SETTER.encode(),))


_CALL_TEXT = re.compile(rb"\.\s*set_aux_hidden_state_layers\s*\(")


def _text_calls(source: bytes) -> list[int]:
    """The lines of the calls ``.set_aux_hidden_state_layers(`` in a module's code, strings and
    comments left out (a regular expression first; the tokenizer only when it matched)."""
    if not _CALL_TEXT.search(source):
        return []
    out = []
    try:
        toks = [t for t in tokenize.tokenize(io.BytesIO(source).readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        return []
    for i, t in enumerate(toks[1:-1], 1):
        if t.type == tokenize.NAME and t.string == SETTER and toks[i - 1].string == "." \
                and toks[i + 1].string == "(":
            out.append(t.start[0])
    return out


class SetterCalls(FactProvider):
    """Every call of the target's ``set_aux_hidden_state_layers`` in the runtime modules, as
    ``[(path, SetterCallFact)]`` (key None): the live calls :data:`EXTRACTOR` found, and the calls
    written in a module's code that the summary pass dropped as never running (after a ``return``
    or ``raise`` that always runs, under ``if False:``), which are ``blocked``."""

    @classmethod
    def compute(cls, ctx, key=None):
        live = ctx.facts.found(EXTRACTOR)
        out = list(live)
        tree = ctx.resolver.tree
        for p in tree.candidates(EXTRACTOR):
            seen = {f.line for q, f in live if q == p}
            try:
                source = tree.read(p)
            except (KeyError, OSError):
                continue
            pruned = [line for line in _text_calls(source) if line not in seen]
            if not pruned:
                continue
            try:  # read again, unpruned, for what stops each call (only a tree with a dead call gets here)
                whole = {f.line: f for f in extract_setter_calls(ast.parse(source))}
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                whole = {}
            for line in pruned:
                f = whole.get(line)
                if f is None or not f.blocked:
                    f = SetterCallFact(line, f.function if f else "?", f.owner if f else "", True,
                                       "the code before it never lets it run (a test that is always false)", line)
                out.append((p, f))
        return sorted(out, key=lambda pf: (pf[0], pf[1].line))


def setter_never_runs(ctx) -> tuple[bool, str, str, int] | None:
    """Whether the runner ever hands the aux layers to the target (:class:`SetterCalls`).

    Returns:
        ``(blocked, message, path, line)``: blocked when every call site of the tree's runtime
        modules is dead; not decided when one is dead or undecided while another may run (which
        runner the engine picks depends on the release and the options) or when one is undecided.
        None when some call may run and none is in doubt, or the tree has none (vLLM ≤ 0.10.0's
        layout is read by the duck-typing members instead).
    """
    calls = ctx.get(SetterCalls)
    stopped = [(p, f) for p, f in calls if f.why]
    if not stopped:
        return None
    p, f = stopped[0]
    where = "" if f.function == "?" else f" in {f.owner}.{f.function}" if f.owner else f" in {f.function}"
    msg = (f"the runner's call to the target's {SETTER}{where} ({p}:{f.line}) never runs: {f.why} ({p}:"
           f"{f.line_of}), so the target captures no aux hidden states")
    if all(x.blocked for _, x in calls):
        return True, msg, p, f.line_of
    if f.blocked:
        msg += "; another call site may run, depending on which runner the engine picks"
    else:
        msg = (f"the runner's call to the target's {SETTER}{where} ({p}:{f.line}) may never run: {f.why} "
               f"({p}:{f.line_of})")
    return False, msg, p, f.line_of

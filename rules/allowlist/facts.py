"""Facts of the ``allowlist`` gate: the EAGLE-3 target model_type allowlist, found by what it does.

A condition that tests the speculative method against ``"eagle3"`` together with a membership
test on a ``model_type`` and raises (``vllm/config.py`` in 0.10.0, ``vllm/config/speculative.py``
from 0.11.0, under the names ``eagle3_target_supported`` and later ``aux_hidden_states_supported``).
The extractor runs in the index pass (:class:`auditor.index.summary.Extractor`) on the modules
whose bytes hold the trigger words.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from auditor.cache import cacheable
from auditor.index.summary import Extractor
from auditor.index.syntax import ParentMap, char_position
from rules.allowlist.evaluate import Evaluator
from rules.allowlist.names import Scope, Undecided, Unfollowed, bindings
from rules.allowlist.refusal import in_replaced_function, method_refusals, shadowed_functions


@cacheable
@dataclass
class AllowlistFact:
    """The EAGLE-3 target model_type allowlist as one tree has it.

    ``line``: the ``if`` that raises; ``list_name``/``list_line``: the list variable and the line
    of its assignment (None for an inline test such as ``"llama" not in ...model_type``);
    ``entries``: the allowed strings; ``methods``: the speculative methods the test applies to;
    ``substring``: True for vLLM's ``any(s in model_type ...)`` / ``"x" in model_type`` semantics,
    False for ``model_type in LIST`` (exact); ``subject``: the source text of the model_type
    expression (``self.target_model_config.hf_text_config.model_type``); ``function``: the
    enclosing function.

    Where a fix edits, found here once (the codemod maps these places to its own syntax tree and
    never looks for the allowlist itself): ``kind`` is ``named`` (a list variable), ``literal``
    (an inline list), ``inline`` (``"llama" not in X.model_type``) or ``unknown``; ``literal_at``
    is the ``(line, column)`` of the list literal (None when the list is not a literal);
    ``test_at`` that of the inline membership test; ``negated``: the inline test is ``not in``.
    Columns count characters, as libcst's positions do.
    """

    line: int
    list_name: str | None
    list_line: int | None
    entries: list[str]
    methods: list[str]
    substring: bool
    subject: str
    function: str
    kind: str = "unknown"
    literal_at: tuple[int, int] | None = None
    test_at: tuple[int, int] | None = None
    negated: bool = False
    #: changes made to the list between its assignment and the test that the index cannot
    #: follow, as ``construct (line N)`` (the changes it can follow are applied to ``entries``)
    unfollowable: list[str] | None = None
    #: for a ``refuses-all`` test spelled otherwise than ``method == "eagle3"`` (``startswith``,
    #: an ``assert``): its source text
    construct: str | None = None


# -- helpers ---------------------------------------------------------------------------------


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _has_model_type(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "model_type" for n in ast.walk(node))


def _eagle3_method_test(test: ast.AST) -> list[str] | None:
    """If ``test`` contains ``X.method == "eagle3"`` or ``X.method in (..."eagle3"...)``, return
    the method names it admits, else None."""
    for n in ast.walk(test):
        if not isinstance(n, ast.Compare) or len(n.ops) != 1:
            continue
        left = n.left
        comp = n.comparators[0]
        if not (isinstance(left, ast.Attribute) and left.attr == "method"):
            continue
        if isinstance(n.ops[0], ast.Eq) and isinstance(comp, ast.Constant) and comp.value == "eagle3":
            return ["eagle3"]
        if isinstance(n.ops[0], ast.In) and isinstance(comp, (ast.Tuple, ast.List, ast.Set)):
            vals = [e.value for e in comp.elts if isinstance(e, ast.Constant)]
            if "eagle3" in vals:
                return [v for v in vals if isinstance(v, str)]
    return None


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Raise) for s in body for n in ast.walk(s))


def _apply_changes(fn: ast.AST, name: str, start: int, end: int, entries: list[str]) -> tuple[list[str], list[str]]:
    """Apply to ``entries`` the in-place changes of list ``name`` that ``fn`` makes between lines
    ``start`` and ``end`` (``.remove``, ``.append``, ``.extend``, ``.insert``, ``.pop``, ``.clear``,
    ``del L[i]``, ``L[i] = v``, ``L += [...]``), in line order, as Python runs them.

    Returns:
        ``(entries after the changes, the changes that cannot be evaluated)``.
    """
    out = list(entries)
    bad: list[str] = []
    changes = []
    for n in ast.walk(fn):
        line = getattr(n, "lineno", 0)
        if not start < line < end:
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.value.id == name and n.func.attr in ("remove", "append", "extend", "insert", "pop", "clear"):
            changes.append((line, n.col_offset, n))
        elif isinstance(n, (ast.Delete, ast.Assign, ast.AugAssign)):
            targets = n.targets if isinstance(n, (ast.Delete, ast.Assign)) else [n.target]
            if any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
                   for t in targets) or (isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
                                         and n.target.id == name):
                changes.append((line, n.col_offset, n))
    for line, _, n in sorted(changes, key=lambda c: (c[0], c[1])):
        try:
            if isinstance(n, ast.Call):
                args = [ast.literal_eval(a) for a in n.args]
                getattr(out, n.func.attr)(*args)
            elif isinstance(n, ast.Delete):
                for t in n.targets:
                    del out[ast.literal_eval(t.slice) if not isinstance(t.slice, ast.Slice) else
                            slice(*(ast.literal_eval(x) if x is not None else None
                                    for x in (t.slice.lower, t.slice.upper, t.slice.step)))]
            elif isinstance(n, ast.Assign):
                for t in n.targets:
                    out[ast.literal_eval(t.slice)] = ast.literal_eval(n.value)
            elif isinstance(n.op, ast.Add):
                out += list(ast.literal_eval(n.value))
            else:
                raise ValueError
        except Exception:
            bad.append(f"{ast.unparse(n)[:60]} (line {line})")
    return [str(e) for e in out], bad


def _named_entries(tree: ast.Module, fn: ast.AST | None, test: ast.If, name: str) -> tuple[list[str], list[str] | None]:
    """The strings of the allowlist ``name`` read by ``test`` when it is not a list literal of the
    function (a module constant, a name bound to another name, an import), followed the way
    Python binds it (:class:`rules.allowlist.names.Scope`); when it cannot be (an import, a star
    import, a call), no entries and the construct not followed, as ``construct (line N)``."""
    scope = Scope(tree, bindings(tree), fn)
    try:
        val = Evaluator("eagle3", scope, test).name(ast.Name(id=name, ctx=ast.Load()))
    except Unfollowed as e:
        return [], [e.what]
    except Undecided:
        return [], [f"`{name}` (line {test.lineno}), a value not bound in this module"]
    if isinstance(val, (tuple, frozenset, dict)) and all(isinstance(v, str) for v in val):
        return sorted(val) if isinstance(val, frozenset) else list(val), None
    return [], [f"`{name}` (line {test.lineno}), not a collection of strings"]


def _refuses_method(node: ast.If) -> list[str] | None:
    """``if <X>.method == "eagle3": raise ...`` with nothing else in the test: the method is
    refused for every target. Returns the methods refused, else None."""
    methods = _eagle3_method_test(node.test)
    if methods is None or not isinstance(node.test, ast.Compare):
        return None
    if any(isinstance(s, ast.Raise) for s in node.body) and not _has_model_type(node.test):
        return methods
    return None


def _construct(node: ast.stmt) -> str:
    """The source text a finding shows for a refusing statement: ``if <test>: raise``, the
    ``assert``, the ``raise`` of a ``case``, the assignment of the method."""
    if isinstance(node, ast.If):
        return f"if {ast.unparse(node.test)[:70]}: raise"
    return ast.unparse(node).splitlines()[0][:80]


def extract_allowlist(tree: ast.Module, source: str | None = None) -> list[AllowlistFact]:
    """Find every EAGLE-3 model_type allowlist test in a module (see :class:`AllowlistFact`);
    ``source`` (the module's text) makes the recorded columns exact for non-ASCII lines."""
    lines = source.splitlines() if source is not None else None
    out: list[AllowlistFact] = []
    pm = ParentMap(tree)
    shadowed = shadowed_functions(tree)

    for r in method_refusals(tree, pm):
        construct = None
        if r.kind != "refuses-all" or not (isinstance(r.node, ast.If) and _refuses_method(r.node)):
            # spelled otherwise than ``method == "eagle3"``: shown in the finding
            construct = _construct(r.node)
        out.append(AllowlistFact(line=r.node.lineno, list_name=None, list_line=None, entries=[], methods=r.methods,
                                 substring=False, subject="", function=getattr(r.function, "name", "<module>"),
                                 kind=r.kind, construct=construct, unfollowable=[r.what] if r.what else None))

    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        methods = _eagle3_method_test(node.test)
        if methods is None or not _has_model_type(node.test) or not _raises(node.body) \
                or in_replaced_function(node, shadowed, pm):
            continue
        fn = pm.enclosing_function(node)
        list_name = None
        entries: list[str] = []
        substring = True
        subject = ""
        kind = "unknown"
        literal_at = test_at = None
        negated = False
        for n in ast.walk(node.test):
            # any(s in <subject> for s in LIST)
            if isinstance(n, ast.GeneratorExp) and n.generators:
                gen = n.generators[0]
                elt = n.elt
                if (
                    isinstance(elt, ast.Compare)
                    and isinstance(elt.ops[0], ast.In)
                    and _has_model_type(elt.comparators[0])
                ):
                    subject = ast.unparse(elt.comparators[0])
                    substring = True
                    if isinstance(gen.iter, ast.Name):
                        list_name, kind = gen.iter.id, "named"
                    elif isinstance(gen.iter, (ast.List, ast.Tuple, ast.Set)):
                        entries = [e.value for e in gen.iter.elts if isinstance(e, ast.Constant)]
                        kind, literal_at = "literal", char_position(gen.iter, lines)
                    break
            if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], (ast.In, ast.NotIn)):
                left, comp = n.left, n.comparators[0]
                if isinstance(left, ast.Constant) and isinstance(left.value, str) and _has_model_type(comp):
                    # "llama" not in X.model_type
                    entries = [left.value]
                    subject = ast.unparse(comp)
                    substring = True
                    kind, test_at, negated = "inline", char_position(n, lines), isinstance(n.ops[0], ast.NotIn)
                    break
                if _has_model_type(left) and isinstance(comp, ast.Name):
                    list_name, subject, substring, kind = comp.id, ast.unparse(left), False, "named"
                    break
                if _has_model_type(left) and isinstance(comp, (ast.List, ast.Tuple, ast.Set)):
                    entries = [e.value for e in comp.elts if isinstance(e, ast.Constant)]
                    subject, substring = ast.unparse(left), False
                    kind, literal_at = "literal", char_position(comp, lines)
                    break
        list_line = None
        literal = False
        if list_name and fn is not None:
            for a in ast.walk(fn):
                if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.lineno < node.lineno:
                    targets = a.targets if isinstance(a, ast.Assign) else [a.target]
                    if any(isinstance(t, ast.Name) and t.id == list_name for t in targets) and a.value is not None:
                        try:
                            val = ast.literal_eval(a.value)
                            entries = [str(v) for v in val]
                            literal = True
                        except Exception:
                            entries, literal = _strings(a.value), False
                        list_line = a.lineno
                        if isinstance(a.value, (ast.List, ast.Tuple, ast.Set)):
                            literal_at = char_position(a.value, lines)
        unfollowable = None
        if list_name and fn is not None and list_line is not None and literal:
            entries, bad = _apply_changes(fn, list_name, list_line, node.lineno, entries)
            unfollowable = bad or None
        elif list_name:  # not a list literal of the function: the name followed as Python binds it
            entries, unfollowable = _named_entries(tree, fn, node, list_name)
        out.append(
            AllowlistFact(
                line=node.lineno,
                list_name=list_name,
                list_line=list_line,
                entries=entries,
                methods=methods,
                substring=substring,
                subject=subject,
                function=getattr(fn, "name", "<module>"),
                kind=kind,
                literal_at=literal_at,
                test_at=test_at,
                negated=negated,
                unfollowable=unfollowable,
            )
        )
    return out


_ALLOWLIST_NEAR = re.compile(rb"eagle3[\s\S]{0,800}?model_type|model_type[\s\S]{0,800}?eagle3")
#: the speculative method read (``self.method``, ``getattr(self, "method")``, ``vars(self)["method"]``)
_METHOD_READ = re.compile(rb"""\.method\b|["']method["']""")


def may_hold_allowlist(source: bytes) -> bool:
    """Cheap pre-filter: ``"eagle3"`` and ``model_type`` within a few lines of each other (the
    allowlist), or the method read anywhere in a module that mentions an eagle word (the
    extractor's needle): a test that may refuse eagle3 outright, however far from its words
    (a module constant, a local alias, a helper's parameter), in a module with no allowlist."""
    return _ALLOWLIST_NEAR.search(source) is not None or (b"eagle" in source and _METHOD_READ.search(source) is not None)


#: The allowlist extractor, run on ``vllm/config*`` modules that mention an eagle method.
EXTRACTOR = Extractor("allowlist", prefixes=("vllm/config",), needles=(b"eagle",),
                      run=extract_allowlist, prefilter=may_hold_allowlist)


def allowlist_for(ctx, method: str) -> "tuple[str, AllowlistFact] | None":
    """The allowlist that applies to a speculative ``method`` in the tree of ``ctx`` (a
    :class:`rules.base.Context`), as ``(path, fact)``; None when the tree has none (vLLM ≥ 0.22)."""
    hits = [(path, f) for path, f in ctx.facts.found(EXTRACTOR) if method in f.methods]
    for kind in _FIRST:
        for path, f in hits:
            if f.kind == kind:
                return path, f
    return hits[0] if hits else None


#: Which facts decide first: a new value of the method (the tests after it read another one), then
#: a test that refuses the method for every model, then one that may and is not followed.
_FIRST = ("rewrites-method", "refuses-all", "unfollowed")

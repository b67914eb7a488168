"""What every codemod shares: the base class, the refusal, and libcst helpers.

Each codemod is a :class:`libcst.codemod.VisitorBasedCodemodCommand` with a ``DESCRIPTION``
and keyword parameters that say *what* to change (a class name, model_types, an attribute),
never *where* by line: the transformer finds its target by structure, the way the rule does.
Every codemod is idempotent (running it on its own output changes nothing) and leaves the
formatting and comments of the code it does not touch as they were (libcst round-trips them).

A codemod that finds the tree in a shape it cannot rewrite safely raises :class:`NotAutoFixable`
with the reason and what a human should add instead; it never writes a guess.

The layout of the sequences a codemod grows (wrapping one item per line past
:data:`rules.cst_layout.LINE_LENGTH`) is in :mod:`rules.cst_layout`.

The codemods live with their gates (``rules/<gate>/codemod.py``); ``rules.registry`` maps the
stable codemod names (recorded in ``--out`` codemod files) to the classes and runs them.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand

from rules.cst_layout import explode, indent_ws, insert_items, is_exploded, too_long


class NotAutoFixable(Exception):
    """The codemod cannot make the change safely. ``reason``: why; ``hint``: what to add by hand."""

    def __init__(self, reason: str, hint: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


@dataclass(frozen=True)
class CodemodExample:
    """A codemod example that runs as a test (fixit's ``expected_replacement``): ``params``,
    the module ``before``, and the module ``after`` the codemod must produce (``after`` is also
    a fixed point: the codemod is idempotent)."""

    params: dict
    before: str
    after: str
    note: str = ""


class EagleCodemod(VisitorBasedCodemodCommand):
    """Base class of the gate codemods: ``NAME`` (stable id), ``GATE`` (the rule's gate id),
    ``DESCRIPTION``; ``changes`` collects one sentence per edit made (empty: nothing to do)."""

    NAME: ClassVar[str] = ""
    GATE: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""
    EXAMPLES: ClassVar[list[CodemodExample]] = []

    def __init__(self, context: CodemodContext, **params: Any) -> None:
        super().__init__(context)
        self.params = params
        self.changes: list[str] = []

    @classmethod
    def merge_params(cls, params: dict, other: dict) -> None:
        """Fold ``other`` (the parameters of a second invocation at the same place: same file and
        class) into ``params``, in place, when two targets need the same edit (default: the
        first invocation's parameters stand).

        Args:
            params: the parameters of the invocation planned first (updated).
            other: those of the invocation planned after it.
        """

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """Run the codemod. The gate codemods use no metadata, so the module is transformed
        directly (libcst's default wraps it in a MetadataWrapper, which deep-copies it)."""
        return self.transform_module_impl(tree)


# -- helpers shared by the codemods ----------------------------------------------------------


#: Kinds of node :func:`nodes_at` indexes, by the name the index's facts use for them.
_KINDS = {"literal": (cst.List, cst.Tuple, cst.Set), "comparison": (cst.Comparison,), "for": (cst.For,),
          "if": (cst.If,), "assign": (cst.Assign,), "line": (cst.SimpleStatementLine,)}


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node below it, depth first (pre-order)."""
    yield node
    for c in node.children:
        yield from walk(c)


def names_used(node: cst.CSTNode) -> set[str]:
    """Every ``Name`` under ``node`` (attribute names included: ``a.b`` gives ``{"a", "b"}``)."""
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def nodes_at(module: cst.Module) -> dict[tuple[tuple[int, int], str], cst.CSTNode]:
    """The nodes of ``module`` by ``((line, column), kind)``: where the index (``ast``) recorded a
    construct, the codemod finds the same construct in its libcst tree — the pattern itself is
    detected once, by the index's extractor. Lines are 1-based, columns count characters; the
    nodes are ``module``'s own (no copy), so they can be replaced with :func:`replace`.

    Computed with :func:`module_code` in one pass over the module (memoised per module object)."""
    return _positions(module)[1]


def module_code(module: cst.Module) -> str:
    """``module.code``, generated in the same pass as :func:`nodes_at` (memoised per module
    object: libcst trees are immutable, so a module object's code never changes)."""
    return _positions(module)[0]


#: The last modules :func:`_positions` saw, by ``id``: ``(module, code, nodes)`` (the module is
#: kept so that its ``id`` is not reused while the entry lives).
_POSITIONS: dict[int, tuple[cst.Module, str, dict]] = {}
_POSITIONS_KEPT = 4


def _positions(module: cst.Module) -> tuple[str, dict[tuple[tuple[int, int], str], cst.CSTNode]]:
    """``(code, nodes_at)`` of ``module`` from one run of libcst's ``PositionProvider`` codegen
    (its tokens are the module's code, as ``Module.code`` joins them), with a faster update of
    the position for a token without a line break (the same arithmetic as libcst's)."""
    hit = _POSITIONS.get(id(module))
    if hit is not None and hit[0] is module:
        return hit[1], hit[2]
    from libcst.metadata import PositionProvider
    from libcst.metadata.position_provider import PositionProvidingCodegenState

    class _State(PositionProvidingCodegenState):
        def _update_position(self, value: str) -> None:
            if "\n" in value or "\r" in value:
                super()._update_position(value)
            else:
                self.column += len(value)

    provider = PositionProvider()
    state = _State(default_indent=module.default_indent, default_newline=module.default_newline, provider=provider)
    module._codegen(state)
    code = "".join(state.tokens)
    out: dict[tuple[tuple[int, int], str], cst.CSTNode] = {}
    kinds = tuple(_KINDS.items())
    for node, pos in provider._computed.items():
        for kind, types in kinds:
            if isinstance(node, types):
                out.setdefault(((pos.start.line, pos.start.column), kind), node)
    while len(_POSITIONS) >= _POSITIONS_KEPT:
        _POSITIONS.pop(next(iter(_POSITIONS)))
    _POSITIONS[id(module)] = (module, code, out)
    return code, out


def dotted_name(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def string_node(value: str, like: cst.SimpleString | None = None) -> cst.SimpleString:
    """A string literal node whose value is exactly ``value`` (quotes, backslashes and control
    characters escaped as ``repr`` does), quoted the way ``like`` is (double quotes by default)
    when ``value`` allows it. Raises TypeError for a value that is not a str."""
    if not isinstance(value, str):
        raise TypeError(f"not a string: {value!r}")
    q = '"'
    if like is not None and like.value[:1] in ("'", '"') and like.value[:3] not in ('"""', "'''"):
        q = like.value[0]
    literal = repr(value)
    if literal[0] != q and "'" not in value and '"' not in value:
        literal = q + literal[1:-1] + q  # the same escapes are valid under either quote
    node = cst.SimpleString(literal)
    assert node.evaluated_value == value
    return node


def identifier(value: object, what: str) -> str:
    """``value`` when it is a Python identifier (or a dotted chain of them), the only kind of
    name a codemod writes into code; else :class:`NotAutoFixable` naming ``what``."""
    if isinstance(value, str) and value and all(
            p.isidentifier() and not keyword.iskeyword(p) for p in value.split(".")):
        return value
    raise NotAutoFixable(f"{what} {value!r} is not a Python identifier; a codemod writes only identifiers into code")


def module_binds(module: cst.Module, name: str) -> bool:
    """True when ``name`` is bound at the top level of ``module`` by an import or a definition
    (not under ``if TYPE_CHECKING:``)."""
    for stmt in module.body:
        if isinstance(stmt, (cst.ClassDef, cst.FunctionDef)) and stmt.name.value == name:
            return True
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, (cst.ImportFrom, cst.Import)) and not isinstance(s.names, cst.ImportStar):
                    for alias in s.names:
                        if isinstance(s, cst.ImportFrom):
                            bound = alias.evaluated_alias or alias.evaluated_name
                        else:
                            bound = alias.evaluated_alias or alias.evaluated_name.split(".")[0]
                        if bound == name:
                            return True
    return False


def _absolute(module_name: str, is_package: bool, s: cst.ImportFrom) -> str:
    from auditor.index.syntax import resolve_relative

    mod = dotted_name(s.module) if s.module is not None else None
    return resolve_relative(module_name, is_package, len(s.relative), mod)


def ensure_import(module: cst.Module, from_module: str, name: str, this_module: str, is_package: bool = False) -> tuple[cst.Module, bool]:
    """Make ``name`` importable in ``module`` from ``from_module`` (absolute dotted).

    Adds ``name`` to an existing top-level ``from <from_module> import ...`` (relative or
    absolute; in sorted position when the names are sorted; the import is wrapped one name per
    line when it would get too long), else adds a new ``from <from_module> import <name>`` after
    the last top-level import. Returns ``(module, changed)``; nothing changes when ``name`` is
    already bound at the top level.
    """
    if module_binds(module, name):
        return module, False
    body = list(module.body)
    for i, stmt in enumerate(body):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        s = stmt.body[0]
        if not isinstance(s, cst.ImportFrom) or isinstance(s.names, cst.ImportStar):
            continue
        if _absolute(this_module, is_package, s) != from_module:
            continue
        names = list(s.names)
        texts = [a.evaluated_name for a in names]
        index = None
        if texts == sorted(texts):
            index = next((k for k, t in enumerate(texts) if t > name), None)
        opening = s.lpar.whitespace_after if s.lpar else None
        closing = s.rpar.whitespace_before if s.rpar else None
        new_names, closing = insert_items(names, [cst.ImportAlias(name=cst.Name(name))], index, opening, closing)
        new_s = s.with_changes(names=new_names)
        if s.rpar is not None:
            new_s = new_s.with_changes(rpar=s.rpar.with_changes(whitespace_before=closing))
        if not is_exploded(new_names) and too_long(module, stmt.with_changes(body=[new_s])):
            exploded, o, c = explode(new_names)
            new_s = new_s.with_changes(
                names=exploded, lpar=cst.LeftParen(whitespace_after=o), rpar=cst.RightParen(whitespace_before=c)
            )
        body[i] = stmt.with_changes(body=[new_s])
        return module.with_changes(body=body), True
    # a new import statement after the last top-level import
    last = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            last = i
    new_stmt = cst.parse_statement(f"from {from_module} import {name}\n")
    if last < 0:
        # after a module docstring, if any
        last = 0 if body and _is_docstring(body[0]) else -1
    body.insert(last + 1, new_stmt)
    return module.with_changes(body=body), True


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def base_names(cls: cst.ClassDef) -> list[str]:
    """The dotted texts of a class's positional bases (``nn.Module``, ``SupportsPP``)."""
    out = []
    for a in cls.bases:
        d = dotted_name(a.value)
        if d is not None:
            out.append(d)
    return out


def has_base(cls: cst.ClassDef, name: str) -> bool:
    return any(b == name or b.endswith("." + name) for b in base_names(cls))


def add_base(module: cst.Module, cls: cst.ClassDef, name: str, depth: int = 0) -> cst.ClassDef:
    """``cls`` with ``name`` appended to its bases (after the existing ones, so that the MRO keeps
    its order), in the class statement's layout; the header is wrapped one base per line when
    the new base would make its line too long."""
    bases = list(cls.bases)
    opening = cls.lpar.whitespace_after if isinstance(cls.lpar, cst.LeftParen) else None
    closing = cls.rpar.whitespace_before if isinstance(cls.rpar, cst.RightParen) else None
    new_arg = cst.Arg(value=cst.Name(name))
    # keyword arguments (metaclass=...) stay after the positional bases
    keywords = list(cls.keywords)
    if keywords:
        new_bases, _ = insert_items(bases + keywords, [new_arg], len(bases), opening, closing)
        new_bases_pos = new_bases[: len(bases) + 1]
        new_keywords = new_bases[len(bases) + 1:]
        out = cls.with_changes(bases=new_bases_pos, keywords=new_keywords)
    else:
        new_bases, closing = insert_items(bases, [new_arg], None, opening, closing)
        out = cls.with_changes(bases=new_bases)
        if isinstance(cls.rpar, cst.RightParen):
            out = out.with_changes(rpar=cls.rpar.with_changes(whitespace_before=closing))
    if not bases and not keywords:
        out = out.with_changes(lpar=cst.LeftParen(), rpar=cst.RightParen())
    header = out.with_changes(body=cst.SimpleStatementSuite(body=[cst.Pass()]), decorators=[], leading_lines=[])
    every = list(out.bases) + list(out.keywords)
    if not is_exploded(every) and too_long(module, header, depth):
        nb = len(out.bases)
        # ruff's layouts, in order: the bases on one indented line, else one per line
        hug = [it.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for it in every]
        hug[-1] = hug[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        o = indent_ws(module.default_indent)
        c = indent_ws("")
        hugged = out.with_changes(bases=hug[:nb], keywords=hug[nb:], lpar=cst.LeftParen(whitespace_after=o),
                                  rpar=cst.RightParen(whitespace_before=c))
        if not too_long(module, hugged.with_changes(body=header.body, decorators=[], leading_lines=[]), depth):
            return hugged
        items, o, c = explode(every, module.default_indent)
        out = out.with_changes(
            bases=items[:nb], keywords=items[nb:],
            lpar=cst.LeftParen(whitespace_after=o), rpar=cst.RightParen(whitespace_before=c),
        )
    return out


def parse_member(source: str, module: cst.Module) -> cst.BaseStatement:
    """Parse a method (or class attribute) written with 4-space indentation into a statement
    that uses ``module``'s indentation, preceded by one blank line."""
    indent = module.default_indent
    if indent != "    ":
        source = "\n".join(
            (indent * ((len(line) - len(line.lstrip(" "))) // 4) + line.lstrip(" ")) if line.strip() else line
            for line in source.splitlines()
        ) + "\n"
    stmt = cst.parse_statement(source, config=module.config_for_parsing)
    return stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)])


def _block(node: cst.CSTNode) -> list[cst.BaseStatement]:
    body = getattr(node, "body", None)
    if isinstance(node, cst.Module):
        return list(node.body)
    if isinstance(body, cst.IndentedBlock):
        return list(body.body)
    return []


def find_class(module: cst.Module, qualname: str) -> tuple[cst.ClassDef | None, int]:
    """The *last* definition of the class ``qualname`` (``Outer.Inner`` for nested classes; the
    binding that wins at run time) among module-level statements, ``if``/``try`` blocks
    included, and its nesting depth. Classes built inside functions are out of scope."""
    parts = qualname.split(".")
    found: cst.ClassDef | None = None

    def scan(stmts, depth_parts, depth):
        nonlocal found
        for st in stmts:
            if isinstance(st, cst.ClassDef):
                if st.name.value == parts[len(depth_parts)]:
                    if len(depth_parts) + 1 == len(parts):
                        found = st
                        found_depth[0] = depth
                    else:
                        scan(_block(st), depth_parts + [st.name.value], depth + 1)
            elif isinstance(st, (cst.If, cst.Try)) and not depth_parts:
                for c in st.children:
                    if isinstance(c, cst.IndentedBlock):
                        scan(list(c.body), depth_parts, depth)
                    elif isinstance(c, (cst.Else, cst.ExceptHandler, cst.Finally, cst.If)):
                        scan(_block(c) if not isinstance(c, cst.If) else [c], depth_parts, depth)

    found_depth = [0]
    scan(list(module.body), [], 0)
    return found, found_depth[0]


def functions_named(module: cst.Module, name: str) -> list[list[cst.CSTNode]]:
    """Every module-level function or method of a module-level class called ``name``, each as
    its container chain ``[function]`` or ``[class, function]``."""
    out = []
    for st in module.body:
        if isinstance(st, cst.FunctionDef) and st.name.value == name:
            out.append([st])
        elif isinstance(st, cst.ClassDef):
            for m in _block(st):
                if isinstance(m, cst.FunctionDef) and m.name.value == name:
                    out.append([st, m])
    return out


def replace_within(module: cst.Module, chain: list[cst.CSTNode], old: cst.CSTNode, new: Any) -> cst.Module:
    """Replace ``old`` inside ``chain[-1]`` (a statement reached from the module through the
    containers in ``chain``, each a direct child statement of the previous), rebuilding only
    that path."""
    if not chain:
        return replace(module, old, new)
    node = replace(chain[-1], old, new)
    parents = [module] + list(chain[:-1])
    for parent, child in zip(reversed(parents), reversed(chain)):
        node = replace(parent, child, node)
    return node


class _Ancestors(cst.CSTVisitor):
    """Finds the chain of nodes from the root down to one node (by identity), stopping early."""

    def __init__(self, target: cst.CSTNode):
        self.target = target
        self.stack: list[cst.CSTNode] = []
        self.found: list[cst.CSTNode] | None = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is not None:
            return False
        if node is self.target:
            self.found = list(self.stack)
            return False
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self.stack and self.stack[-1] is original_node:
            self.stack.pop()


class ReplaceNode(cst.CSTTransformer):
    """Replace one node (found by identity) with another node, a removal, or a sequence,
    descending only through its ancestors."""

    def __init__(self, old: cst.CSTNode, new: Any, ancestors: list[cst.CSTNode] | None = None):
        self.old = old
        self.new = new
        self.path = {id(n) for n in ancestors} if ancestors is not None else None

    def on_visit(self, node) -> bool:
        return self.path is None or id(node) in self.path

    def on_leave(self, original_node, updated_node):
        if original_node is self.old:
            return self.new
        return updated_node


def replace(root: cst.CSTNode, old: cst.CSTNode, new: Any) -> Any:
    """``root`` with the node ``old`` (by identity) replaced by ``new``. A direct child
    statement of a module is swapped in place; otherwise only ``old``'s ancestors are rebuilt."""
    if isinstance(root, cst.Module) and not isinstance(new, cst.FlattenSentinel):
        for i, st in enumerate(root.body):
            if st is old:
                body = list(root.body)
                body[i] = new
                return root.with_changes(body=body)
    if isinstance(root, cst.ClassDef) and isinstance(root.body, cst.IndentedBlock) and not isinstance(
        new, cst.FlattenSentinel
    ):
        for i, st in enumerate(root.body.body):
            if st is old:
                body = list(root.body.body)
                body[i] = new
                return root.with_changes(body=root.body.with_changes(body=body))
    finder = _Ancestors(old)
    root.visit(finder)
    if finder.found is None:
        return root
    return root.visit(ReplaceNode(old, new, finder.found))


def class_methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    """Methods defined directly in a class body (the later definition wins)."""
    out: dict[str, cst.FunctionDef] = {}
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else []
    for s in body:
        if isinstance(s, cst.FunctionDef):
            out[s.name.value] = s
    return out


def append_to_class(cls: cst.ClassDef, stmts: list[cst.BaseStatement]) -> cst.ClassDef:
    """``cls`` with ``stmts`` appended at the end of its body (an empty body loses its ``pass``)."""
    body = cls.body
    if not isinstance(body, cst.IndentedBlock):
        body = cst.IndentedBlock(body=[])
        stmts = [stmts[0].with_changes(leading_lines=[])] + list(stmts[1:]) if stmts else stmts
        return cls.with_changes(body=body.with_changes(body=stmts))
    old = list(body.body)
    kept = [s for s in old if not _is_placeholder(s)]
    if len(kept) != len(old) and not kept:
        stmts = [stmts[0].with_changes(leading_lines=[])] + list(stmts[1:])
    return cls.with_changes(body=body.with_changes(body=kept + list(stmts)))


def _is_placeholder(stmt: cst.CSTNode) -> bool:
    """``pass`` or ``...`` as a whole statement."""
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(x, cst.Pass) or (isinstance(x, cst.Expr) and isinstance(x.value, cst.Ellipsis)) for x in stmt.body
    )

"""Codemod for EA304 ``image-token``: give a multimodal target its own branch in the EAGLE
proposer, reading the image token id attribute its HF config class really defines."""

from __future__ import annotations

from textwrap import dedent
from typing import Iterator

import libcst as cst

from rules.cst import (
    LINE_LENGTH,
    CodemodExample,
    EagleCodemod,
    NotAutoFixable,
    dotted_name,
    functions_named,
    identifier,
    replace_within,
    string_node,
)


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for c in node.children:
        yield from walk(c)


def _arch_names(test: cst.BaseExpression) -> list[str] | None:
    """Architectures a branch test names: ``X == "A"``, ``X in ["A", "B"]`` (or ``or`` of those)."""
    if isinstance(test, cst.BooleanOperation):
        left, right = _arch_names(test.left), _arch_names(test.right)
        return (left or []) + (right or []) or None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        c = test.comparisons[0]
        if isinstance(c.operator, cst.Equal) and isinstance(c.comparator, cst.SimpleString):
            return [c.comparator.evaluated_value]
        if isinstance(c.operator, cst.In) and isinstance(c.comparator, (cst.List, cst.Tuple, cst.Set)):
            return [e.value.evaluated_value for e in c.comparator.elements if isinstance(e.value, cst.SimpleString)]
    return None


def _name_expr(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """The expression a branch test compares with architecture names
    (``self.get_model_name(target_model)``)."""
    if isinstance(test, cst.BooleanOperation):
        return _name_expr(test.left) or _name_expr(test.right)
    if isinstance(test, cst.Comparison):
        return test.left
    return None


def _assigns_image_token(stmt: cst.CSTNode) -> cst.Assign | None:
    for n in walk(stmt):
        if isinstance(n, cst.Assign) and any(
            isinstance(t.target, cst.Attribute) and t.target.attr.value == "image_token_index" for t in n.targets
        ):
            return n
    return None


class _Finder(cst.CSTVisitor):
    """The ``if supports_multimodal(<target>):`` blocks that set ``image_token_index``, with
    their block depth and the target variable."""

    def __init__(self, function: str | None):
        self.function = function
        self.fn_stack: list[str] = []
        self.depth = 0
        self.found: list[tuple[cst.If, int, str, list]] = []
        self.has_get_model_name = False
        self.chain: list[cst.CSTNode] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node.name.value == "get_model_name":
            self.has_get_model_name = True
        self.fn_stack.append(node.name.value)
        return True

    def leave_FunctionDef(self, original_node) -> None:
        self.fn_stack.pop()

    def visit_IndentedBlock(self, node) -> bool:
        self.depth += 1
        return True

    def leave_IndentedBlock(self, original_node) -> None:
        self.depth -= 1

    def visit_If(self, node: cst.If) -> None:
        if self.function and (not self.fn_stack or self.fn_stack[-1] != self.function):
            return
        call = next(
            (n for n in walk(node.test)
             if isinstance(n, cst.Call) and (dotted_name(n.func) or "").endswith("supports_multimodal")),
            None,
        )
        if call is None or _assigns_image_token(node.body) is None:
            return
        target = dotted_name(call.args[0].value) if call.args else None
        depth = self.depth + (len(self.chain) - 1 if self.chain else 0)
        self.found.append((node, depth, target or "target_model", list(self.chain)))


class ImageTokenCodemod(EagleCodemod):
    """Add a per-architecture branch to the EAGLE proposer's image-token handling.

    Parameters: ``class_name`` (the target's class name, as the proposer compares it),
    ``attribute`` (the attribute of the target's config that holds the image token id, as its
    HF config class defines it, e.g. ``media_placeholder_token_id``), ``function`` (optional:
    the proposer method, ``load_model``).

    Inserts ``elif <name expr> == "<class_name>": <dest> = <target>.config.<attribute>`` before
    the fallback ``else`` (``<name expr>`` and ``<dest>`` are copied from the tree's own
    branches), or, where the proposer has no per-architecture chain yet (vLLM ≤ 0.11), wraps the
    single assignment in such a test. Idempotent: a chain that already names the class is left
    alone.
    """

    NAME = "image-token"
    GATE = "image-token"
    DESCRIPTION = (
        "Add a branch for the architecture to the EAGLE proposer that reads the image token id "
        "attribute the target's HF config class really defines."
    )
    EXAMPLES = [
        CodemodExample(
            {'class_name': 'KimiK25ForConditionalGeneration', 'attribute': 'media_placeholder_token_id', 'function': 'load_model'},
            before=dedent('''\
                class EagleProposer:
                    def load_model(self, target_model):
                        if supports_multimodal(target_model):
                            if self.get_model_name(target_model) == "Qwen2_5_VLForConditionalGeneration":
                                self.model.config.image_token_index = target_model.config.image_token_id
                            else:
                                self.model.config.image_token_index = target_model.config.image_token_index
            '''),
            after=dedent('''\
                class EagleProposer:
                    def load_model(self, target_model):
                        if supports_multimodal(target_model):
                            if self.get_model_name(target_model) == "Qwen2_5_VLForConditionalGeneration":
                                self.model.config.image_token_index = target_model.config.image_token_id
                            elif self.get_model_name(target_model) == "KimiK25ForConditionalGeneration":
                                self.model.config.image_token_index = (
                                    target_model.config.media_placeholder_token_id
                                )
                            else:
                                self.model.config.image_token_index = target_model.config.image_token_index
            '''),
            note='a branch before the fallback reads the attribute the config class defines',
        ),
    ]

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        cls_name = identifier(self.params["class_name"], "the class name")
        attribute = identifier(self.params["attribute"], "the config attribute")
        function = self.params.get("function")
        finder = _Finder(function)
        finder.has_get_model_name = bool(functions_named(tree, "get_model_name"))
        chains = functions_named(tree, function) if function else []
        for chain in chains:
            finder.chain = chain
            chain[-1].visit(finder)
        if not chains:
            tree.visit(finder)
        if not finder.found:
            raise NotAutoFixable(
                "no 'if supports_multimodal(...)' block setting image_token_index found in this module",
                f"make the EAGLE proposer read config.{attribute} for {cls_name}",
            )
        mm_if, depth, target_var, self._chain = finder.found[0]
        body = list(mm_if.body.body)
        chain = next((s for s in body if isinstance(s, cst.If) and _arch_names(s.test)), None)
        if chain is None:
            return self._wrap_flat(tree, mm_if, depth, target_var, finder.has_get_model_name, cls_name, attribute)
        names: list[str] = []
        cur: cst.If = chain
        while True:
            names += _arch_names(cur.test) or []
            if isinstance(cur.orelse, cst.If) and _arch_names(cur.orelse.test):
                cur = cur.orelse
            else:
                break
        if cls_name in names:
            return tree
        name_expr = next(
            (tree.code_for_node(_name_expr(b.test)) for b in _chain(chain) if _name_expr(b.test) is not None), None
        )
        fallback = cur.orelse if isinstance(cur.orelse, cst.Else) else None
        template = _assigns_image_token(fallback.body) if fallback else _assigns_image_token(chain.body)
        if name_expr is None or template is None:
            raise NotAutoFixable("the proposer's image-token branches have a shape the codemod does not know")
        new_branch = self._branch(tree, name_expr, template, cls_name, attribute, depth + 1, fallback)
        tree = replace_within(tree, self._chain, cur, cur.with_changes(orelse=new_branch))
        self.changes.append(
            f"added a proposer branch for {cls_name} reading {_config_prefix(tree, template)}.{attribute}"
        )
        return tree

    def _branch(self, tree, name_expr, template: cst.Assign, cls_name, attribute, depth, orelse) -> cst.If:
        dest = tree.code_for_node(template.targets[0].target)
        value = f"{_config_prefix(tree, template)}.{attribute}"
        pad = len(tree.default_indent) * depth
        head = f'if {name_expr} == "":\n'  # the class name goes in as a literal node, below
        one = f"{tree.default_indent}{dest} = {value}\n"
        if pad + len(tree.default_indent) + len(one.strip()) > LINE_LENGTH:
            ind = tree.default_indent
            one = f"{ind}{dest} = (\n{ind}{ind}{value}\n{ind})\n"
        node = cst.parse_statement(head + one, config=tree.config_for_parsing)
        test = node.test.with_changes(comparisons=[node.test.comparisons[0].with_changes(
            comparator=string_node(cls_name))])
        return node.with_changes(test=test, orelse=orelse)

    def _wrap_flat(self, tree, mm_if: cst.If, depth, target_var, has_get_model_name, cls_name, attribute):
        line = next(
            (s for s in mm_if.body.body if isinstance(s, cst.SimpleStatementLine) and _assigns_image_token(s)), None
        )
        if line is None:
            raise NotAutoFixable("the proposer sets image_token_index in a shape the codemod does not know")
        template = _assigns_image_token(line)
        name_expr = f"self.get_model_name({target_var})" if has_get_model_name else f"{target_var}.__class__.__name__"
        # idempotence: a test naming the class directly above the assignment
        branch = self._branch(tree, name_expr, template, cls_name, attribute, depth + 1,
                              cst.Else(body=cst.IndentedBlock(body=[line.with_changes(leading_lines=[])])))
        branch = branch.with_changes(leading_lines=line.leading_lines)
        self.changes.append(
            f"wrapped the proposer's image_token_index assignment in a branch for {cls_name} reading "
            f"{_config_prefix(tree, template)}.{attribute}"
        )
        return replace_within(tree, self._chain, line, branch)


def _chain(first: cst.If) -> Iterator[cst.If]:
    cur = first
    while isinstance(cur, cst.If):
        yield cur
        cur = cur.orelse if isinstance(cur.orelse, cst.If) else None


def _config_prefix(tree: cst.Module, assign: cst.Assign) -> str:
    """``target_model.config`` from a branch value such as ``target_model.config.image_token_index``
    or ``target_model.config.vision_config.image_token_id``."""
    d = dotted_name(assign.value)
    if d is None:
        raise NotAutoFixable(f"the proposer reads the image token from {tree.code_for_node(assign.value)!r}")
    parts = d.split(".")
    if "config" in parts:
        return ".".join(parts[: parts.index("config") + 1])
    return ".".join(parts[:-1])

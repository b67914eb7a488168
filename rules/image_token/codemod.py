"""Codemod for EA304 ``image-token``: give a multimodal target its own branch in the EAGLE
proposer, reading the image token id attribute its HF config class really defines."""

from __future__ import annotations

import ast
from textwrap import dedent
from typing import Iterator

import libcst as cst

from rules.cst import (
    CodemodExample,
    EagleCodemod,
    NotAutoFixable,
    dotted_name,
    functions_named,
    identifier,
    module_code,
    nodes_at,
    replace,
    string_node,
)
from rules.cst_layout import LINE_LENGTH
from rules.image_token.facts import extract_image_token


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for c in node.children:
        yield from walk(c)


def _name_expr(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """The expression a branch test compares with architecture names
    (``self.get_model_name(target_model)``)."""
    if isinstance(test, cst.BooleanOperation):
        return _name_expr(test.left) or _name_expr(test.right)
    if isinstance(test, cst.Comparison):
        return test.left
    return None


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
        # the proposer's branches are found once, by the index's extractor; here only mapped
        facts = [f for f in extract_image_token(ast.parse(module_code(tree)), module_code(tree))
                 if not function or f.function == function]
        at = nodes_at(tree)
        fact = facts[0] if facts else None
        mm_if = at.get((fact.at, "if")) if fact is not None else None
        if fact is None or mm_if is None:
            raise NotAutoFixable(
                "no 'if supports_multimodal(...)' block setting image_token_index found in this module",
                f"make the EAGLE proposer read config.{attribute} for {cls_name}",
            )
        depth = fact.at[1] // max(1, len(tree.default_indent))
        has_get_model_name = bool(functions_named(tree, "get_model_name"))
        if not fact.branch_at:
            return self._wrap_flat(tree, fact, at, depth, has_get_model_name, cls_name, attribute)
        if cls_name in [a for b in fact.branches for a in b.architectures]:
            return tree
        chain = [at.get((p, "if")) for p in fact.branch_at]
        cur = chain[-1]
        name_expr = next((tree.code_for_node(_name_expr(b.test)) for b in chain
                          if b is not None and _name_expr(b.test) is not None), None)
        fallback = cur.orelse if cur is not None and isinstance(cur.orelse, cst.Else) else None
        templates = [at.get((b.assign_at, "assign")) for b in fact.branches if b.assign_at]
        template = (templates[-1] if fallback else templates[0]) if templates else None
        if cur is None or name_expr is None or template is None:
            raise NotAutoFixable("the proposer's image-token branches have a shape the codemod does not know")
        new_branch = self._branch(tree, name_expr, template, cls_name, attribute, depth + 1, fallback)
        tree = replace(tree, cur, cur.with_changes(orelse=new_branch))
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

    def _wrap_flat(self, tree, fact, at, depth, has_get_model_name, cls_name, attribute):
        assign_at = fact.branches[0].assign_at if fact.branches else None
        line = at.get((assign_at, "line")) if assign_at else None
        template = at.get((assign_at, "assign")) if assign_at else None
        if line is None or template is None:
            raise NotAutoFixable("the proposer sets image_token_index in a shape the codemod does not know")
        target_var = fact.target_var
        name_expr = f"self.get_model_name({target_var})" if has_get_model_name else f"{target_var}.__class__.__name__"
        branch = self._branch(tree, name_expr, template, cls_name, attribute, depth + 1,
                              cst.Else(body=cst.IndentedBlock(body=[line.with_changes(leading_lines=[])])))
        branch = branch.with_changes(leading_lines=line.leading_lines)
        self.changes.append(
            f"wrapped the proposer's image_token_index assignment in a branch for {cls_name} reading "
            f"{_config_prefix(tree, template)}.{attribute}"
        )
        return replace(tree, line, branch)


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

"""Codemod for EA301 ``allowlist``: admit the target's text model_type(s) on vLLM's EAGLE-3
model_type allowlist, in whatever form the tree has it."""

from __future__ import annotations

import ast
from textwrap import dedent

import libcst as cst

from rules.allowlist.facts import AllowlistFact, extract_allowlist
from rules.cst import (
    CodemodExample,
    EagleCodemod,
    NotAutoFixable,
    module_code,
    nodes_at,
    replace,
    string_node,
)
from rules.cst_layout import insert_items


class AllowlistCodemod(EagleCodemod):
    """Admit model_types on the EAGLE-3 target allowlist.

    Parameters: ``model_types`` (the text model_types to admit), ``method`` (``eagle3``: the
    test must apply to it), ``function`` (optional: the validation function that holds the test).
    Finds the test by what it does (a condition on the method and a membership test on
    ``model_type`` that raises), then appends to the list literal it reads (a named list or an
    inline literal), or rewrites an inline single-name test (``"llama" not in X.model_type``)
    into a list test with the same substring semantics. Idempotent: a model_type already
    admitted (substring or exact, as the test matches) is not added again.
    """

    NAME = "allowlist"
    GATE = "allowlist"
    DESCRIPTION = "Add the target's text model_type(s) to vLLM's EAGLE-3 model_type allowlist."
    EXAMPLES = [
        CodemodExample(
            {'model_types': ['kimi_k2'], 'method': 'eagle3'},
            before=dedent('''\
                def _verify_args(self):
                    supported = ["llama", "qwen"]  # keep this comment
                    if self.method == "eagle3" and not any(s in self.target_model_config.hf_text_config.model_type for s in supported):
                        raise ValueError("Eagle3 is only supported for some models")
            '''),
            after=dedent('''\
                def _verify_args(self):
                    supported = ["llama", "qwen", "kimi_k2"]  # keep this comment
                    if self.method == "eagle3" and not any(s in self.target_model_config.hf_text_config.model_type for s in supported):
                        raise ValueError("Eagle3 is only supported for some models")
            '''),
            note='a named list gets the model_type; its comment stays',
        ),
        CodemodExample(
            {'model_types': ['kimi_k2'], 'method': 'eagle3'},
            before=dedent('''\
                def _verify_args(self):
                    if self.method == "eagle3" and "llama" not in self.target_model_config.hf_text_config.model_type:
                        raise ValueError("Eagle3 is only supported for Llama models.")
            '''),
            after=dedent('''\
                def _verify_args(self):
                    if self.method == "eagle3" and not any(supported in self.target_model_config.hf_text_config.model_type for supported in ["llama", "kimi_k2"]):
                        raise ValueError("Eagle3 is only supported for Llama models.")
            '''),
            note="0.10.0's inline single-name test becomes a list test with the same substring semantics",
        ),
        CodemodExample(
            {'model_types': ['toy", __import__("os").system("id"), "toy'], 'method': 'eagle3'},
            before=dedent('''\
                def _verify_args(self):
                    supported = ["llama"]
                    if self.method == "eagle3" and not any(s in self.target_model_config.hf_text_config.model_type for s in supported):
                        raise ValueError("no")
            '''),
            after=dedent('''\
                def _verify_args(self):
                    supported = ["llama", 'toy", __import__("os").system("id"), "toy']
                    if self.method == "eagle3" and not any(s in self.target_model_config.hf_text_config.model_type for s in supported):
                        raise ValueError("no")
            '''),
            note='a value with quotes is written as one inert string literal, never as code',
        ),
    ]

    @classmethod
    def merge_params(cls, params: dict, other: dict) -> None:
        """Two targets at the same allowlist: every model_type of both, in order."""
        mts = params["model_types"]
        for mt in other["model_types"]:
            if mt not in mts:
                mts.append(mt)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        model_types: list[str] = list(dict.fromkeys(self.params["model_types"]))
        method = self.params.get("method", "eagle3")
        function = self.params.get("function")
        # the allowlist is found once, by the index's extractor; here only its places are mapped
        facts = [f for f in extract_allowlist(ast.parse(module_code(tree)), module_code(tree))
                 if method in f.methods and (not function or f.function == function)]
        if not facts:
            raise NotAutoFixable(
                f"no {method} model_type allowlist test found in this module",
                f"admit {model_types} where the speculative config validates {method} targets",
            )
        for fact in facts:
            tree = self._fix(tree, fact, model_types)
        return tree

    def _fix(self, tree: cst.Module, fact: AllowlistFact, model_types: list[str]) -> cst.Module:
        at = nodes_at(tree)
        literal = at.get((fact.literal_at, "literal")) if fact.literal_at else None
        test = at.get((fact.test_at, "comparison")) if fact.test_at else None
        if fact.kind == "unknown" or (fact.kind != "inline" and literal is None) or (fact.kind == "inline" and test is None):
            what = f"the list {fact.list_name}" if fact.list_name else "the allowlist test"
            raise NotAutoFixable(
                f"{what} is not a list literal the codemod can extend",
                f"add {model_types} to the EAGLE-3 allowlist",
            )
        entries = list(fact.entries)

        def admitted(mt: str) -> bool:
            return any(e in mt for e in entries) if fact.substring else mt in entries

        missing = [mt for mt in model_types if not admitted(mt)]
        if not missing:
            return tree
        if fact.kind == "inline":
            old = test
            subject = tree.code_for_node(old.comparisons[0].comparator)
            like = old.left if isinstance(old.left, cst.SimpleString) else None
            call = cst.parse_expression(f"any(supported in {subject} for supported in [])")
            items = [string_node(v, like) for v in entries + missing]  # literal nodes, never text
            elements = [cst.Element(v, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                        for v in items[:-1]] + [cst.Element(items[-1])]
            gen = call.args[0].value
            gen = gen.with_changes(for_in=gen.for_in.with_changes(iter=gen.for_in.iter.with_changes(elements=elements)))
            new = call.with_changes(args=[call.args[0].with_changes(value=gen)])
            if fact.negated:
                new = cst.UnaryOperation(operator=cst.Not(), expression=new)
            new = new.with_changes(lpar=old.lpar, rpar=old.rpar)
            self.changes.append(
                f"rewrote the inline allowlist test {tree.code_for_node(old)!r} into a list test admitting {missing}"
            )
            return replace(tree, old, new)
        lit = literal
        like = next((e.value for e in lit.elements if isinstance(e.value, cst.SimpleString)), None)
        new_elems = [cst.Element(value=string_node(mt, like)) for mt in missing]
        if isinstance(lit, cst.Tuple):
            opening = lit.lpar[0].whitespace_after if lit.lpar else None
            closing = lit.rpar[0].whitespace_before if lit.rpar else None
        else:
            opening = lit.lbracket.whitespace_after if hasattr(lit, "lbracket") else lit.lbrace.whitespace_after
            closing = lit.rbracket.whitespace_before if hasattr(lit, "rbracket") else lit.rbrace.whitespace_before
        elems, closing = insert_items(list(lit.elements), new_elems, None, opening, closing)
        if isinstance(lit, cst.Tuple) and len(elems) == 1:
            elems[0] = elems[0].with_changes(comma=cst.Comma())
        new_lit = lit.with_changes(elements=elems)
        if isinstance(lit, cst.Tuple) and lit.rpar:
            new_lit = new_lit.with_changes(rpar=[lit.rpar[0].with_changes(whitespace_before=closing)] + list(lit.rpar[1:]))
        elif isinstance(lit, cst.List):
            new_lit = new_lit.with_changes(rbracket=lit.rbracket.with_changes(whitespace_before=closing))
        elif isinstance(lit, cst.Set):
            new_lit = new_lit.with_changes(rbrace=lit.rbrace.with_changes(whitespace_before=closing))
        where = f"the list {fact.list_name}" if fact.list_name else "the inline allowlist literal"
        self.changes.append(f"added {missing} to {where}")
        return replace(tree, lit, new_lit)

"""Codemod for EA301 ``allowlist``: admit the target's text model_type(s) on vLLM's EAGLE-3
model_type allowlist, in whatever form the tree has it."""

from __future__ import annotations

from textwrap import dedent
from typing import Iterator

import libcst as cst

from rules.cst import (
    CodemodExample,
    EagleCodemod,
    NotAutoFixable,
    functions_named,
    insert_items,
    replace_within,
    string_node,
)


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node below it, in source order."""
    yield node
    for c in node.children:
        yield from walk(c)


def _str(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.SimpleString):
        v = node.evaluated_value
        return v if isinstance(v, str) else None
    return None


def _mentions_model_type(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Attribute) and n.attr.value == "model_type" for n in walk(node))


def _method_values(test: cst.CSTNode) -> list[str] | None:
    """The methods a test admits through ``X.method == "eagle3"`` / ``X.method in (...)``."""
    for n in walk(test):
        if not isinstance(n, cst.Comparison) or len(n.comparisons) != 1:
            continue
        if not (isinstance(n.left, cst.Attribute) and n.left.attr.value == "method"):
            continue
        cmp = n.comparisons[0]
        if isinstance(cmp.operator, cst.Equal) and _str(cmp.comparator) is not None:
            return [_str(cmp.comparator)]
        if isinstance(cmp.operator, cst.In) and isinstance(cmp.comparator, (cst.Tuple, cst.List, cst.Set)):
            return [v for v in (_str(e.value) for e in cmp.comparator.elements) if v is not None]
    return None


def _raises(body: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Raise) for n in walk(body))


class _Gate:
    """One allowlist test: ``kind`` is ``named`` (a list variable, ``assign`` its literal),
    ``literal`` (an inline list), or ``inline`` (``"llama" not in X.model_type``)."""

    def __init__(self, kind: str, substring: bool, literal=None, comparison=None, subject=None, negated=False, name=None):
        self.kind = kind
        self.substring = substring
        self.literal = literal
        self.comparison = comparison
        self.subject = subject
        self.negated = negated
        self.name = name
        self.chain: list[cst.CSTNode] = []


def _classify(test: cst.BaseExpression, assigns: dict[str, cst.CSTNode]) -> _Gate | None:
    for n in walk(test):
        # any(s in <subject> for s in LIST)
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "any" and n.args:
            gen = n.args[0].value
            if isinstance(gen, cst.GeneratorExp) and isinstance(gen.elt, cst.Comparison):
                elt = gen.elt
                if (
                    len(elt.comparisons) == 1
                    and isinstance(elt.comparisons[0].operator, cst.In)
                    and _mentions_model_type(elt.comparisons[0].comparator)
                ):
                    it = gen.for_in.iter
                    if isinstance(it, cst.Name):
                        return _Gate("named", True, literal=assigns.get(it.value), name=it.value)
                    if isinstance(it, (cst.List, cst.Tuple, cst.Set)):
                        return _Gate("literal", True, literal=it)
                    return None
        if isinstance(n, cst.Comparison) and len(n.comparisons) == 1:
            op = n.comparisons[0].operator
            comp = n.comparisons[0].comparator
            if not isinstance(op, (cst.In, cst.NotIn)):
                continue
            if _str(n.left) is not None and _mentions_model_type(comp):
                return _Gate("inline", True, comparison=n, subject=comp, negated=isinstance(op, cst.NotIn),
                             literal=[_str(n.left)])
            if _mentions_model_type(n.left) and isinstance(comp, cst.Name):
                return _Gate("named", False, literal=assigns.get(comp.value), name=comp.value)
            if _mentions_model_type(n.left) and isinstance(comp, (cst.List, cst.Tuple, cst.Set)):
                return _Gate("literal", False, literal=comp)
    return None


class _Finder(cst.CSTVisitor):
    """Collects the allowlist tests for ``method`` (in ``function`` when given), with the list
    assignments seen before each test in its function."""

    def __init__(self, method: str, function: str | None):
        self.method = method
        self.function = function
        self.fn_stack: list[str] = []
        self.assigns: list[dict[str, cst.CSTNode]] = []
        self.gates: list[_Gate] = []
        self.chain: list[cst.CSTNode] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.fn_stack.append(node.name.value)
        self.assigns.append({})
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.fn_stack.pop()
        self.assigns.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.assigns and isinstance(node.value, (cst.List, cst.Tuple, cst.Set)):
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.assigns[-1][t.target.value] = node.value

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.assigns and isinstance(node.target, cst.Name) and isinstance(node.value, (cst.List, cst.Tuple, cst.Set)):
            self.assigns[-1][node.target.value] = node.value

    def visit_If(self, node: cst.If) -> None:
        if self.function and (not self.fn_stack or self.fn_stack[-1] != self.function):
            return
        methods = _method_values(node.test)
        if not methods or self.method not in methods:
            return
        if not _mentions_model_type(node.test) or not _raises(node.body):
            return
        gate = _classify(node.test, self.assigns[-1] if self.assigns else {})
        if gate is None:
            gate = _Gate("unknown", True)
        gate.chain = list(self.chain)
        self.gates.append(gate)


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

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        model_types: list[str] = list(dict.fromkeys(self.params["model_types"]))
        method = self.params.get("method", "eagle3")
        function = self.params.get("function")
        finder = _Finder(method, function)
        chains = functions_named(tree, function) if function else []
        for chain in chains:
            finder.chain = chain
            chain[-1].visit(finder)
        if not chains:
            finder.chain = []
            tree.visit(finder)
        if not finder.gates:
            raise NotAutoFixable(
                f"no {method} model_type allowlist test found in this module",
                f"admit {model_types} where the speculative config validates {method} targets",
            )
        for gate in finder.gates:
            tree = self._fix(tree, gate, model_types)
        return tree

    def _fix(self, tree: cst.Module, gate: _Gate, model_types: list[str]) -> cst.Module:
        if gate.kind == "unknown" or (gate.kind == "named" and gate.literal is None):
            what = f"the list {gate.name}" if gate.name else "the allowlist test"
            raise NotAutoFixable(
                f"{what} is not a list literal the codemod can extend",
                f"add {model_types} to the EAGLE-3 allowlist",
            )
        if gate.kind == "inline":
            entries = list(gate.literal)
        else:
            entries = [v for v in (_str(e.value) for e in gate.literal.elements) if v is not None]

        def admitted(mt: str) -> bool:
            return any(e in mt for e in entries) if gate.substring else mt in entries

        missing = [mt for mt in model_types if not admitted(mt)]
        if not missing:
            return tree
        if gate.kind == "inline":
            subject = tree.code_for_node(gate.subject)
            old = gate.comparison
            like = old.left if isinstance(old.left, cst.SimpleString) else None
            call = cst.parse_expression(f"any(supported in {subject} for supported in [])")
            items = [string_node(v, like) for v in entries + missing]  # literal nodes, never text
            elements = [cst.Element(v, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                        for v in items[:-1]] + [cst.Element(items[-1])]
            gen = call.args[0].value
            gen = gen.with_changes(for_in=gen.for_in.with_changes(iter=gen.for_in.iter.with_changes(elements=elements)))
            new = call.with_changes(args=[call.args[0].with_changes(value=gen)])
            if gate.negated:
                new = cst.UnaryOperation(operator=cst.Not(), expression=new)
            new = new.with_changes(lpar=old.lpar, rpar=old.rpar)
            self.changes.append(
                f"rewrote the inline allowlist test {tree.code_for_node(old)!r} into a list test admitting {missing}"
            )
            return replace_within(tree, gate.chain, old, new)
        lit = gate.literal
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
        where = f"the list {gate.name}" if gate.name else "the inline allowlist literal"
        self.changes.append(f"added {missing} to {where}")
        return replace_within(tree, gate.chain, lit, new_lit)

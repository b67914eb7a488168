"""Every codemod's EXAMPLES (before → after, fixit's expected_replacement) run through libcst's
CodemodTest, and after is a fixed point (idempotence). Plus what a codemod never writes."""

from __future__ import annotations

import ast

import pytest
from libcst.codemod import CodemodTest

from rules.cst import NotAutoFixable, identifier, string_node
from rules.registry import codemod_classes, run_codemod

EXAMPLES = [(name, i, ex) for name, cls in codemod_classes().items() for i, ex in enumerate(cls.EXAMPLES)]


def test_every_codemod_has_examples():
    assert {name for name, _, _ in EXAMPLES} == set(codemod_classes())


@pytest.mark.parametrize("name,i,ex", EXAMPLES, ids=[f"{n}-{i}" for n, i, _ in EXAMPLES])
def test_codemod_example(name, i, ex):
    case = CodemodTest()
    case.TRANSFORM = codemod_classes()[name]
    case.assertCodemod(ex.before, ex.after, **ex.params)
    assert run_codemod(name, ex.after, ex.params) == (ex.after, [])  # idempotent
    compile(ex.after, f"{name}.py", "exec")  # compiled, never executed


@pytest.mark.parametrize("value", ['a"b', "a'b", "x\\y", "new\nline", "\x1b[2J", 'toy", __import__("os").system("id"), "toy'])
def test_string_nodes_hold_exactly_the_value(value):
    node = string_node(value)
    assert ast.literal_eval(node.value) == value


def test_hostile_model_type_is_one_inert_literal():
    ex = codemod_classes()["allowlist"].EXAMPLES[2]
    (assign,) = [n for n in ast.walk(ast.parse(ex.after)) if isinstance(n, ast.Assign)]
    assert ast.literal_eval(assign.value) == ["llama", ex.params["model_types"][0]]
    assert not any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "__import__" for n in ast.walk(ast.parse(ex.after)))


@pytest.mark.parametrize("bad", ["a.b c", "x; import os", "1abc", "class", "", None, "a..b"])
def test_only_identifiers_are_written_as_names(bad):
    with pytest.raises(NotAutoFixable):
        identifier(bad, "the config attribute")
    ex = codemod_classes()["image-token"].EXAMPLES[0]
    with pytest.raises(NotAutoFixable):
        run_codemod("image-token", ex.before, dict(ex.params, attribute=bad))

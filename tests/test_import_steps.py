"""The import steps a summary records (auditor/index/importsteps.py) against the checks they stand for.

The summary records a class statement as a step only when a cheap test (the module's top-level
bindings, the class body's own statements, the builtins) leaves one of the names it loads
unbound; the full check (:func:`class_name_error` over every name the module may bind) runs only
on those. So the cheap test must never miss a class the full check refuses: checked here on every
class statement of the synthetic engine trees and on constructed ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from auditor.index.importsteps import class_name_error, import_steps, may_bind
from auditor.index.summary import summarize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

CONSTRUCTED = [
    # (source, the class statement the full check refuses: True/False)
    ("class A(Base):\n    pass\n", True),
    ("from m import Base\nclass A(Base):\n    pass\n", False),
    ("class A:\n    x = helper()\n", True),
    ("def helper():\n    pass\nclass A:\n    x = helper()\n", False),
    ("class A:\n    def f(self):\n        global late\n        late = 1\n    y = late\n", False),  # bound somewhere
    ("class A:\n    class B(Missing):\n        pass\n", True),
    ("if flag:\n    Base = object\nclass A(Base):\n    pass\n", False),  # bound on one branch: counted
    ("try:\n    from m import Base\nexcept ImportError:\n    Base = object\nclass A(Base):\n    pass\n", False),
    ("for Base in (object,):\n    pass\nclass A(Base):\n    pass\n", False),
    ("class A:\n    @decorate\n    def f(self):\n        pass\n", True),
    ("class A:\n    def f(self, x=DEFAULT):\n        pass\n", True),
    ("class A:\n    n: int = size\n", True),
    ("class A:\n    n: Annotated\n", False),  # annotations are not evaluated here
    ("class A:\n    v = [i for i in items]\n", False),  # a comprehension is a scope of its own: not read
    ("class A:\n    v = helper(1) + other\n", True),
    ("with ctx() as Base:\n    pass\nclass A(Base):\n    pass\n", False),
]


def _classes(tree: ast.Module):
    return [(i, st) for i, st in enumerate(tree.body) if isinstance(st, ast.ClassDef)]


def _check(source: str) -> tuple[list[int], list[int]]:
    """(indexes of the class statements the full check refuses, indexes recorded as steps)."""
    tree = ast.parse(source)
    bound = may_bind(tree)
    refused = [i for i, st in _classes(tree) if bound is not None and class_name_error(st, bound) is not None]
    recorded = [step[1] for step in import_steps(tree, "pkg.mod", False) if step[0] == "class"]
    return refused, recorded


@pytest.mark.parametrize(("source", "refused"), CONSTRUCTED)
def test_constructed_class_steps(source, refused):
    got_refused, recorded = _check(source)
    assert bool(got_refused) is refused
    assert set(got_refused) <= set(recorded)


def test_no_refused_class_escapes_the_cheap_test_in_the_synthetic_trees():
    files = sorted(FIXTURES.rglob("*.py"))
    assert len(files) > 50
    classes = 0
    for f in files:
        try:
            tree = ast.parse(f.read_bytes())
        except SyntaxError:
            continue
        classes += len(_classes(tree))
        refused, recorded = _check(f.read_text())
        assert set(refused) <= set(recorded), f
    assert classes > 40


def test_steps_stop_at_the_first_statement_that_always_raises():
    src = ("import pkg.a\n"
           "def _refuse():\n    raise RuntimeError('no')\n"
           "from .b import c\n"
           "_refuse()\n"
           "import pkg.never\n")
    steps = import_steps(ast.parse(src), "pkg.mod", False)
    assert [s[0] for s in steps] == ["import", "from", "call"]
    assert steps[1][3] == "pkg.b" and steps[1][4] == ["c"]
    assert steps[2][3:] == ("_refuse()", "_refuse", 2)
    # rebinding the name first: no longer the raising function
    steps = import_steps(ast.parse(src.replace("_refuse()\n", "_refuse = print\n_refuse()\n")), "pkg.mod", False)
    assert [s[0] for s in steps] == ["import", "from", "import"]


def test_summary_records_steps_only_for_what_this_interpreter_parses():
    s = summarize(b"import pkg.a\nassert False, 'never'\nimport pkg.b\n", "pkg/mod.py")
    assert s.import_steps == [("import", 0, 1, ["pkg.a"]), ("assert", 1, 2, "False")]
    assert summarize(b"def f(:\n", "pkg/bad.py").import_steps is None


def test_no_refused_class_escapes_the_cheap_test_in_a_real_release():
    from tests.real import release_auditor

    tree = release_auditor("0.16.0").tree
    paths = sorted(p for p in tree.files if p.startswith("vllm/model_executor/models/"))
    assert len(paths) > 200
    classes = 0
    for p in paths:
        text = tree.read(p)
        classes += len(_classes(ast.parse(text)))
        refused, recorded = _check(text.decode())
        assert set(refused) <= set(recorded), p
    assert classes > 1000

"""The typed fact providers (auditor/index/providers.py): memoised by type and key, declared
dependencies enforced, outside-tree reads recorded per run by the framework; and every fact a
scan reads goes through them (no string-keyed cache is left in the code)."""

from __future__ import annotations

import pathlib
import re

import pytest

from auditor.index.providers import FactProvider, FactStore, UndeclaredFact

REPO = pathlib.Path(__file__).resolve().parents[1]


class _Ctx:
    def __init__(self):
        self.store = FactStore()
        self.calls: list[tuple[str, object]] = []

    def get(self, provider, key=None):
        return self.store.get(self, provider, key)


class Outside(FactProvider):
    OUTSIDE_TREE = True

    @classmethod
    def compute(cls, ctx, key=None):
        ctx.calls.append(("outside", key))
        return None if key == "absent" else f"outside:{key}"


class Square(FactProvider):
    @classmethod
    def compute(cls, ctx, key):
        ctx.calls.append(("square", key))
        return key * key


class UsesOutside(FactProvider):
    DEPENDS_ON = (Outside,)

    @classmethod
    def compute(cls, ctx, key):
        return (ctx.get(Outside, key), ctx.get(Outside, "absent"))


class Undeclared(FactProvider):
    @classmethod
    def compute(cls, ctx, key):
        return ctx.get(Square, 3)


def test_a_fact_is_computed_once_per_type_and_key():
    ctx = _Ctx()
    assert [ctx.get(Square, 2), ctx.get(Square, 2), ctx.get(Square, 3)] == [4, 4, 9]
    assert ctx.calls == [("square", 2), ("square", 3)]


def test_a_provider_asking_for_an_undeclared_fact_is_refused():
    ctx = _Ctx()
    with pytest.raises(UndeclaredFact, match="Undeclared asks for Square"):
        ctx.get(Undeclared, None)
    with ctx.store.consumer(type("SomeRule", (), {}), (Square,)):
        assert ctx.get(Square, 4) == 16
        with pytest.raises(UndeclaredFact, match="SomeRule asks for Outside"):
            ctx.get(Outside, "x")
    with ctx.store.consumer(type("Undeclaring", (), {}), None):  # a rule that declares nothing: not checked
        assert ctx.get(Outside, "y") == "outside:y"


def test_outside_reads_are_recorded_by_the_framework_through_memoised_facts():
    ctx = _Ctx()
    assert ctx.get(Square, 5) == 25
    assert ctx.store.outside_reads() == set()
    assert ctx.get(UsesOutside, "k") == ("outside:k", None)
    assert ctx.store.outside_reads() == {Outside}
    ctx.store.begin_run()
    assert ctx.store.outside_reads() == set()
    ctx.get(UsesOutside, "k")  # memoised: not recomputed, but its outside read is recorded again
    assert ctx.store.outside_reads() == {Outside}
    assert ctx.calls.count(("outside", "k")) == 1
    ctx.store.begin_run()
    ctx.get(Outside, "absent")  # a value that carries nothing from outside is no read
    assert ctx.store.outside_reads() == set()


def test_no_string_keyed_cache_is_left():
    hits = []
    for p in list((REPO / "auditor").rglob("*.py")) + list((REPO / "rules").rglob("*.py")):
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"ctx\.cache\b|\bcache\[\s*[\"'(]", line):
                hits.append(f"{p.relative_to(REPO)}:{i}: {line.strip()}")
    assert hits == []


def test_the_rules_declared_facts_are_the_ones_a_scan_asks_for(tmp_path):
    """A scan of the synthetic tree runs every rule under its declaration: a rule that declares
    FACTS and asks for another provider would be an internal error (EA000) on some target."""
    from conftest import make_tree, open_auditor

    from auditor.model.findings import INTERNAL_RULE

    a = open_auditor(make_tree(tmp_path))
    from auditor.model.results import TargetSpec

    report = a.scan([TargetSpec(x, None, None, None) for x in a.registry.architectures()],
                    methods=("eagle3", "eagle", "mtp"))
    assert [f.message for r in report.results for f in r.findings if f.rule == INTERNAL_RULE] == []
    declared = [r for r in a.rules.values() if r.FACTS is not None]
    assert len(declared) >= 8

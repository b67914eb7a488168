"""Two invocations of one codemod at one place fold into one: the architectures of both, and the
parameters as the codemod's own ``merge_params`` says (rules/cst.py and each codemod), never by
a branch per codemod in the planner."""

from __future__ import annotations

from rules.planning import Invocation, Planner
from rules.registry import codemod_class


class _Ctx:
    resolver = type("R", (), {"tree": type("T", (), {"source": None})()})()
    registry = None
    facts = None


def _planner() -> Planner:
    return Planner(_Ctx(), "eagle3", {}, None, codemod_class)


def test_allowlist_invocations_merge_their_model_types():
    p = _planner()
    p.add(Invocation("allowlist", "allowlist", "vllm/a.py", {"model_types": ["kimi_k2"]}, ["A"]))
    p.add(Invocation("allowlist", "allowlist", "vllm/a.py", {"model_types": ["deepseek_v3", "kimi_k2"]}, ["B"]))
    (inv,) = p.invocations.values()
    assert inv.params["model_types"] == ["kimi_k2", "deepseek_v3"] and inv.architectures == ["A", "B"]


def test_interface_invocations_merge_their_members_once():
    p = _planner()
    p.add(Invocation("interface", "interface", "vllm/m.py", {"class": "C", "members": [{"name": "x"}]}, ["A"]))
    p.add(Invocation("interface", "interface", "vllm/m.py",
                     {"class": "C", "members": [{"name": "x"}, {"name": "y"}]}, ["B"]))
    (inv,) = p.invocations.values()
    assert [m["name"] for m in inv.params["members"]] == ["x", "y"]


def test_sglang_interface_invocations_merge_the_setter_and_the_getters():
    p = _planner()
    p.add(Invocation("sglang-interface", "interface", "sglang/m.py", {"class": "C", "kind": "direct"}, ["A"]))
    p.add(Invocation("sglang-interface", "interface", "sglang/m.py",
                     {"class": "C", "getters": [{"name": "get_embed_and_head"}]}, ["A"]))
    (inv,) = p.invocations.values()
    assert inv.params == {"class": "C", "kind": "direct", "getters": [{"name": "get_embed_and_head"}]}
    assert inv.architectures == ["A"]


def test_a_codemod_without_merge_params_keeps_the_first_invocation():
    p = _planner()
    p.add(Invocation("aux-capture", "aux-capture", "vllm/m.py", {"class": "M", "start": "a"}, ["A"]))
    p.add(Invocation("aux-capture", "aux-capture", "vllm/m.py", {"class": "M", "start": "b"}, ["B"]))
    (inv,) = p.invocations.values()
    assert inv.params == {"class": "M", "start": "a"} and inv.architectures == ["A", "B"]

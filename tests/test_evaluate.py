"""The static evaluator (``auditor/index/evaluate.py``): sets of possible values, undecided
branches joined, Python's own semantics for the pure operations it applies, and nothing ever run
or allowed to grow without bound."""

from __future__ import annotations

import ast
import textwrap

from auditor.index.evaluate import Evaluator
from auditor.index.values import TOP, FrozenDict, Inputs, State, one, truth


class Config(Inputs):
    roots = ("cfg",)

    def __init__(self, **values):
        self.values = values

    def value(self, path):
        if path in self.values:
            return one(self.values[path])
        return super().value(path)

    def has(self, path):
        return True if path in self.values else None


def run(src: str, **values):
    fn = ast.parse(textwrap.dedent(src)).body[0]
    ev = Evaluator(Config(**values))
    return ev, ev.run_function(fn)


def value(src: str, **values):
    return Evaluator(Config(**values)).eval(ast.parse(src, mode="eval").body, State())


def test_branches_on_known_values_and_pythons_own_semantics():
    src = """
    def f(cfg):
        if cfg.model_type in ("pangu_ultra_moe"):  # a string, not a tuple: a substring test
            cfg.model_type = "pangu_mtp"
        if (arch := cfg.architectures[0]) in ("A", "B"):
            cfg.update({"architectures": [{"A": "AMTP", "B": "BMTP"}[arch]]})
        return cfg
    """
    ev, (out,) = run(src, **{"cfg.model_type": "ultra", "cfg.architectures": ("B",)})
    assert out.kind == "return" and out.returned == "cfg"
    assert ev.read("cfg.model_type", out.state) == one("pangu_mtp")  # "ultra" in "pangu_ultra_moe"
    assert out.state.undecided == []


def test_an_undecided_branch_runs_both_ways_and_joins():
    src = """
    def f(cfg):
        if cfg.model_type == "x" and hasattr(cfg, "n") and cfg.n > 0:
            cfg.model_type = "x_mtp"
        return cfg
    """
    ev, (out,) = run(src, **{"cfg.model_type": "x"})
    assert ev.read("cfg.model_type", out.state) == frozenset({"x", "x_mtp"})
    assert out.state.undecided == [3]
    ev, (out,) = run(src, **{"cfg.model_type": "y"})  # short-circuits: decided
    assert ev.read("cfg.model_type", out.state) == one("y")


def test_paths_follow_object_aliases_and_raises_are_outcomes():
    src = """
    def f(cfg):
        cfg = getattr(cfg, "text_config", cfg)
        cfg.model_type = "t_mtp"
        if cfg.model_type == "t_mtp":
            raise ValueError("no")
        return cfg
    """
    ev, outs = run(src, **{"cfg.text_config": FrozenDict()})
    assert [o.kind for o in outs] == ["raise"]
    assert outs[0].state.env["cfg.text_config.model_type"] == one("t_mtp")


def test_f_strings_and_the_pure_string_methods():
    assert value('f"Eagle{a}" if not a.startswith("Eagle") else a', **{"a": "LlamaForCausalLM"}) == \
        one("EagleLlamaForCausalLM")
    assert value('[x.upper() for x in ("a", "b")]') == one(("A", "B"))
    assert truth(value('{"A", "B"}.intersection(("B", "C"))')) is True


def test_nothing_unknown_is_called_and_nothing_grows_without_bound():
    assert value('__import__("os").system("id")') is TOP
    assert value('open("/etc/passwd").read()') is TOP
    assert value('"x".format(1)') is TOP  # str.format is not on the list of pure methods
    assert value('"".__class__') is TOP
    assert value('"a" * 1000000000') is TOP
    assert value("(1,) * 10 ** 9") is TOP
    nested = "-" * 400 + "1"
    assert value(nested) is TOP  # deeper than MAX_DEPTH
    # 95 nested blocks (Python's parser accepts at most 100) around an expression 20 deep
    body = ("def f(cfg):\n" + "".join("    " * (i + 1) + "if cfg.x:\n" for i in range(95))
            + "    " * 96 + "cfg.y = " + "-" * 20 + "1\n    return cfg\n")
    ev, outs = run(body)
    assert outs is None or all(o.kind == "return" for o in outs)  # an answer or none, never a crash
    loop = "def f(cfg):\n" + "    cfg.a = 1\n" * 25000
    assert run(loop)[1] is None  # too long

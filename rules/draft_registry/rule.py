"""EA311 ``draft-registry``: the drafter checkpoint's architecture, as the release rewrites it
for the method, is not registered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.drafts import declared_drafter
from rules.draft_registry.facts import (
    EXTRACTOR,
    apply_rewrite,
    eagle_architectures,
    rewrite_for,
)

_EAGLE_CONFIG = '''"""EAGLE drafter config (synthetic)."""


class EAGLEConfig:
    def __init__(self, model=None, method="eagle", **kwargs):
        self.model = model
        if method == "eagle":
            kwargs["architectures"] = [
                f"Eagle{arch}" if not arch.startswith("Eagle") else arch
                for arch in self.model.architectures
            ]
        elif method == "eagle3":
            kwargs["architectures"] = [
                arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"
                for arch in self.model.architectures
            ]
        else:
            raise ValueError(f"Invalid method {method}")
'''

_TREE = {"vllm/transformers_utils/configs/eagle.py": _EAGLE_CONFIG}

#: The synthetic ``EAGLEConfig`` of the examples (other drafter-side gates' examples use it too).
EXAMPLE_EAGLE_CONFIG = _EAGLE_CONFIG


def _drafter(*archs: str) -> RunOptions:
    return RunOptions(draft_config={"architectures": list(archs), "model_type": "llama"},
                      draft_config_path="drafter/config.json")


@cacheable
@dataclass
class DraftRegistryData:
    """EA311 details: the drafter config's ``declared`` architectures, ``rewritten`` as the tree
    rewrites them for the method, and the ``registered_for`` other methods that do register."""

    declared: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    registered_for: dict = field(default_factory=dict)
    unanalysed: str | None = None


class DraftRegistryRule(Rule):
    """The drafter checkpoint's architecture after the tree's EAGLE rewrite.

    What it does: with ``--draft-config``, finds the rewrite ``EAGLEConfig`` applies per method to
    the drafter config's ``architectures`` (an f-string comprehension under ``if method == ...``),
    evaluates it statically for each declared architecture, and requires one result to be in the
    model registry (vLLM resolves the first registered one).
    """

    CODE = "EA311"
    GATE = "draft-registry"
    NAME = "drafter-architecture-not-registered"
    SUMMARY = "the drafter checkpoint's architecture, rewritten for the method, is not registered"
    WHY = (
        "For eagle and eagle3, vLLM wraps the drafter checkpoint's config in EAGLEConfig, which renames "
        "its architectures (X -> EagleX for eagle, X -> Eagle3X for eagle3, unless already prefixed or "
        "suffixed), and then looks the new name up in the model registry: a drafter trained on "
        "Qwen3ForCausalLM works as eagle3 (Eagle3Qwen3ForCausalLM is registered) but not as eagle "
        "(EagleQwen3ForCausalLM is not), and the server fails when it builds the draft."
    )
    HOW_TO_FIX = (
        "Serve the drafter with the method it was trained for (the finding names the methods whose "
        "rewrite is registered), or use a release that registers the rewritten architecture. Not "
        "fixable by a local patch: the missing name is a drafter model implementation."
    )
    FIX_AVAILABLE = False
    METHODS = ("eagle", "eagle3")
    REQUIRES = "--draft-config with the drafter checkpoint's config"
    CHECKED_WITH = "your drafter (--draft-config)"
    DATA = DraftRegistryData
    VALID = [
        Example(_TREE, "LlamaForCausalLM", method="eagle3", options=_drafter("LlamaForCausalLM"),
                note="LlamaForCausalLM -> Eagle3LlamaForCausalLM, registered"),
        Example(_TREE, "LlamaForCausalLM", method="eagle3", options=_drafter("Eagle3LlamaForCausalLM"),
                note="already prefixed: kept"),
    ]
    INVALID = [
        Example(_TREE, "LlamaForCausalLM", method="eagle", options=_drafter("LlamaForCausalLM"),
                expect_severity=Severity.ERROR, note="LlamaForCausalLM -> EagleLlamaForCausalLM, not registered"),
        Example(_TREE, "LlamaForCausalLM", method="eagle3", options=_drafter(),
                expect_severity=Severity.UNKNOWN, note="the drafter config declares no architectures"),
    ]

    def applies(self, target: AuditTarget) -> bool:
        return target.method in self.METHODS and target.options.draft_config is not None

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        cfg, where, declared = declared_drafter(target)
        found = eagle_architectures(ctx, target.method, cfg)
        if found is None:
            broken = ctx.facts.unanalysed(EXTRACTOR)
            if broken:
                yield self.finding(Severity.UNKNOWN, f"{broken[0][0]} may hold the EAGLE architecture rewrite but is "
                                   f"missing from the analysis ({broken[0][1]})", broken[0][0], None,
                                   unanalysed=broken[0][0])
            else:
                yield self.finding(Severity.UNKNOWN, f"the tree has no EAGLE architecture rewrite for method "
                                   f"{target.method} (EAGLEConfig in transformers_utils/configs): cannot name the "
                                   f"drafter {where} builds", None, None, declared=declared)
            return
        path, line, rewritten = found
        if not declared:
            yield self.finding(Severity.UNKNOWN, f"the drafter config {where} declares no architectures: the draft "
                               "cannot be named", path, line)
            return
        if rewritten is None:
            yield self.finding(Severity.UNKNOWN, f"cannot evaluate the tree's {target.method} rewrite of {declared}",
                               path, line, declared=declared)
            return
        if any(a in ctx.registry.entries for a in rewritten):
            return
        others = {}
        for m in self.METHODS:
            if m == target.method:
                continue
            alt = rewrite_for(ctx, m)
            if alt is None:
                continue
            names = [apply_rewrite(alt[1], a) for a in declared]
            ok = [n for n in names if n and n in ctx.registry.entries]
            if ok:
                others[m] = ok[0]
        hint = "".join(f"; {n} is registered, for {m}" for m, n in others.items())
        yield self.finding(
            Severity.ERROR,
            f"the drafter config {where} declares {', '.join(declared)}, which this release rewrites for "
            f"{target.method} into {', '.join(rewritten)}: not in the model registry{hint}",
            path, line, declared=declared, rewritten=rewritten, registered_for=others)

"""EA406 ``draft-registry`` on SGLang trees: the drafter checkpoint's architecture is not registered.

SGLang builds the draft model from ``--speculative-draft-model-path`` with a model config of its
own (``is_draft_model=True``), whose ``_config_draft_model`` may rewrite ``architectures[0]``
(0.5.11 ``sglang/srt/configs/model_config.py``: ``DeepseekV3ForCausalLM`` →
``DeepseekV3ForCausalLMNextN``; read by the tree facts' ``draft_mappings()``); the result must be
a class some model module lists in its ``EntryClass``, or the model registry raises
(``sglang/srt/models/registry.py``, ``_raise_for_unsupported``: "Model architectures [...] are not
supported"). EAGLE drafters ship their own architecture name (``LlamaForCausalLMEagle3``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.drafts import declared_drafter

_TOY = '''
import torch.nn as nn


class ToyForCausalLM(nn.Module):
    pass


EntryClass = ToyForCausalLM
'''
_TOY_EAGLE3 = '''
import torch.nn as nn


class ToyForCausalLMEagle3(nn.Module):
    pass


EntryClass = [ToyForCausalLMEagle3]
'''
_REGISTRY = '''
class _ModelRegistry:
    def _raise_for_unsupported(self, architectures):
        raise ValueError(f"Model architectures {architectures} are not supported for now.")
'''


def _drafter(*archs: str) -> RunOptions:
    return RunOptions(draft_config={"architectures": list(archs)}, draft_config_path="drafter/config.json")


def _tree(with_eagle3: bool) -> dict[str, str]:
    files = {"sglang/srt/models/toy.py": _TOY, "sglang/srt/models/registry.py": _REGISTRY}
    if with_eagle3:
        files["sglang/srt/models/toy_eagle3.py"] = _TOY_EAGLE3
    return files


def refusal_line(ctx: Context) -> tuple[str | None, int | None]:
    """``(path, line)`` of the model registry's refusal of an unknown architecture: the first
    ``raise`` of a function of ``sglang/srt/models/registry.py`` whose message says "not
    supported" (the SGLang registry's ``path``, which is that module's path when the tree has it);
    ``(path or None, None)`` when there is none."""
    path = ctx.registry.path
    if not path or not path.endswith(".py"):  # no registry module: the registry names the models folder
        return None, None
    try:
        mod = ast.parse(ctx.resolver.tree.read(path), filename=path)
    except (KeyError, OSError, SyntaxError, ValueError, RecursionError):
        return path, None
    for node in ast.walk(mod):
        if isinstance(node, ast.Raise) and node.exc is not None:
            text = " ".join(c.value for c in ast.walk(node.exc) if isinstance(c, ast.Constant) and isinstance(c.value, str))
            if "not supported" in text:
                return path, node.lineno
    return path, None


@cacheable
@dataclass
class SGLangDraftRegistryData:
    """EA406 details: the drafter config's ``declared`` architectures and the ``rewritten`` one
    SGLang looks up (its draft-architecture rewrite applied)."""

    declared: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)


class SGLangDraftRegistryRule(Rule):
    """The drafter checkpoint's architecture, as SGLang's draft model config names it.

    What it does: with ``--draft-config``, takes the drafter config's ``architectures[0]``, applies
    the tree's draft-architecture rewrite (the ``is_draft_model`` branches of the model config), and
    requires the result to be registered (a model module's ``EntryClass``).
    """

    CODE = "EA406"
    #: reads the registry and the tree facts' draft mappings only
    FACTS = ()
    GATE = "draft-registry"
    NAME = "sglang-drafter-architecture-not-registered"
    SUMMARY = "the drafter checkpoint's architecture is not registered (SGLang)"
    WHY = (
        "SGLang loads --speculative-draft-model-path with its own model config and resolves its "
        "architectures[0] (after the draft rewrite of NextN targets) in the model registry: a drafter "
        "whose architecture no model module lists in EntryClass fails at start-up with 'Model "
        "architectures [...] are not supported'."
    )
    HOW_TO_FIX = (
        "Use a drafter whose config names an architecture the release registers (EAGLE-3 drafters: "
        "LlamaForCausalLMEagle3), or a release that registers it. Not fixable by a local patch: the "
        "missing name is a drafter model implementation."
    )
    FIX_AVAILABLE = False
    METHODS = ("eagle", "eagle3", "mtp")
    ENGINES = ("sglang",)
    REQUIRES = "--draft-config with the drafter checkpoint's config"
    CHECKED_WITH = "your drafter (--draft-config)"
    DATA = SGLangDraftRegistryData
    VALID = [Example(_tree(True), "ToyForCausalLM", options=_drafter("ToyForCausalLMEagle3"),
                     note="the drafter's architecture is registered")]
    INVALID = [
        Example(_tree(False), "ToyForCausalLM", options=_drafter("ToyForCausalLMEagle3"),
                expect_severity=Severity.ERROR, note="no EntryClass lists the drafter's architecture"),
        Example(_tree(True), "ToyForCausalLM", options=_drafter(), expect_severity=Severity.UNKNOWN,
                note="the drafter config declares no architectures"),
    ]

    def applies(self, target: AuditTarget) -> bool:
        return target.method in self.METHODS and target.options.draft_config is not None

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        cfg, where, declared = declared_drafter(target)
        path, line = refusal_line(ctx)
        if not declared:
            yield self.finding(Severity.UNKNOWN, f"the drafter config {where} declares no architectures: the draft "
                               "cannot be named", path, line)
            return
        first = declared[0]
        m = ctx.facts.draft_mappings().get(first)
        rewritten = list(m.drafts) if m is not None else [first]
        if any(a in ctx.registry.entries for a in rewritten):
            return
        how = (f"which {m.path}:{m.line} rewrites for the draft into {' or '.join(rewritten)}" if m is not None
               else "kept as the draft's architecture")
        yield self.finding(
            Severity.ERROR,
            f"the drafter config {where} declares {first} ({how}): no model module registers it (EntryClass), "
            "and SGLang's model registry refuses it at start-up",
            path, line, declared=declared, rewritten=rewritten)

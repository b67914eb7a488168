"""EA405 ``mtp-draft`` on SGLang trees: with ``--speculative-algorithm NEXTN``, the tree's
draft-architecture rewrite has no branch for the target, or the draft architecture it names is not
registered (no model module's ``EntryClass`` lists it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.model.findings import Finding, Severity
from rules.base import AuditTarget, Context, Example, Rule

_CONFIG = '''
class ModelConfig:
    def _config_draft_model(self):
        if self.is_draft_model and self.hf_config.architectures[0] in ["ToyForCausalLM"]:
            self.hf_config.architectures[0] = "ToyForCausalLMNextN"
'''
_NEXTN = '''
import torch.nn as nn


class ToyForCausalLMNextN(nn.Module):
    pass


EntryClass = ToyForCausalLMNextN
'''
_TOY = '''
import torch.nn as nn


class ToyForCausalLM(nn.Module):
    pass


EntryClass = ToyForCausalLM
'''


@cacheable
@dataclass
class DraftData:
    """EA405 details: the draft architectures the rewrite names (``drafts``; empty when no branch
    names the target)."""

    drafts: list[str] = field(default_factory=list)


class SGLangMTPDraftRule(Rule):
    """The NextN/MTP draft architecture of a target, as the SGLang tree rewrites it."""

    CODE = "EA405"
    GATE = "mtp-draft"
    NAME = "nextn-draft-not-registered"
    SUMMARY = "no registered NextN/MTP draft architecture for the target (SGLang)"
    WHY = (
        "SGLang builds the NEXTN draft from the target's own checkpoint and rewrites its "
        "architecture (ModelConfig._config_draft_model: DeepseekV3ForCausalLM -> "
        "DeepseekV3ForCausalLMNextN). A target no branch names keeps its own architecture, so the "
        "whole target model is loaded as the draft; a rewrite to an architecture no EntryClass "
        "registers fails at start-up."
    )
    HOW_TO_FIX = ("Add a branch for the target to the draft rewrite, naming a NextN/MTP model class that a "
                  "model module lists in its EntryClass. No codemod.")
    FIX_AVAILABLE = False
    METHODS = ("mtp",)
    ENGINES = ("sglang",)
    DATA = DraftData
    VALID = [Example({"sglang/srt/configs/model_config.py": _CONFIG, "sglang/srt/models/toy.py": _TOY,
                      "sglang/srt/models/toy_nextn.py": _NEXTN}, "ToyForCausalLM", method="mtp")]
    INVALID = [Example({"sglang/srt/configs/model_config.py": _CONFIG, "sglang/srt/models/toy.py": _TOY},
                       "ToyForCausalLM", method="mtp", expect_severity=Severity.ERROR,
                       note="the rewrite names an architecture no EntryClass registers")]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        if target.facts.ref is None:
            return
        mappings = ctx.facts.draft_mappings()
        loc = ctx.resolver.location(target.facts.code_holder or target.facts.ref) or (None, None)
        if not mappings:
            yield self.finding(Severity.UNKNOWN, "this tree has no draft-architecture rewrite (an assignment to "
                               "hf_config.architectures[0] under a test on it, in sglang/srt/configs/): cannot tell "
                               "which NextN/MTP draft SGLang builds", loc[0], loc[1])
            return
        m = mappings.get(target.architecture)
        if m is None:
            where = sorted({v.path for v in mappings.values()})
            yield self.finding(Severity.ERROR, f"the draft-architecture rewrite ({', '.join(where)}) has no branch for "
                               f"{target.architecture}: NEXTN would load the target's own architecture as the draft",
                               loc[0], loc[1], drafts=[])
            return
        registered = [d for d in m.drafts if d in ctx.registry.entries]
        if not registered:
            yield self.finding(Severity.ERROR, f"{m.path}:{m.line} rewrites {target.architecture} into "
                               f"{' or '.join(m.drafts)}, which no model module registers (EntryClass)",
                               m.path, m.line, drafts=list(m.drafts))

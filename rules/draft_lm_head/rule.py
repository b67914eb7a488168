"""EA317 ``draft-lm-head``: the drafter builds no LM head of its own, and the proposer reads it
when the drafter's checkpoint ships one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from auditor.cache import cacheable
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.draft_lm_head.facts import (
    CLASS_EXTRACTOR,
    FLAG_EXTRACTOR,
    METHODS_EXTRACTOR,
    SHARE_EXTRACTOR,
    InitFact,
)
from rules.draft_registry.rule import EXAMPLE_EAGLE_CONFIG
from rules.mtp_draft.facts import MtpDraftOf

_DRAFTER = '''
import torch.nn as nn

from vllm.model_executor.models.llama import LlamaForCausalLM
from vllm.model_executor.models.toy_utils import mark_eagle_weight


class EagleToyForCausalLM(LlamaForCausalLM):
    def __init__(self, *, vllm_config=None, prefix=""):
        nn.Module.__init__(self)
        self.model = nn.Linear(4, 4)
{head}
    def load_weights(self, weights):
        for name, _ in weights:
            mark_eagle_weight(self, name)
        return AutoWeightsLoader(self, skip_prefixes=["lm_head."]).load_weights(weights)
'''

_UTILS = '''
def mark_eagle_weight(model, name):
    if "lm_head" in name:
        model.has_own_lm_head = True
'''
_HEAD = "        self.lm_head = nn.Linear(4, 4)\n"

_PROPOSER = '''
import torch


class EagleProposer:
    def load_model(self, target_model):
        share_lm_head = False
        if hasattr(self.model, "has_own_lm_head"):
            if not self.model.has_own_lm_head:
                share_lm_head = True
            elif torch.equal(target_model.lm_head.weight, self.model.lm_head.weight):
                share_lm_head = True
        else:
            share_lm_head = True
        if share_lm_head and hasattr(target_model, "lm_head"):
            if hasattr(self.model, "lm_head"):
                del self.model.lm_head
            self.model.lm_head = target_model.lm_head
'''

def _tree(head: bool) -> dict[str, str]:
    return {"vllm/transformers_utils/configs/eagle.py": EXAMPLE_EAGLE_CONFIG,
            "vllm/model_executor/models/toy_eagle.py": _DRAFTER.replace("{head}", _HEAD if head else ""),
            "vllm/model_executor/models/toy_utils.py": _UTILS, "vllm/v1/spec_decode/eagle.py": _PROPOSER}


_ROW = [("EagleToyForCausalLM", "toy_eagle", "EagleToyForCausalLM", "_SPECULATIVE_DECODING_MODELS")]
_DRAFT = RunOptions(draft_config={"architectures": ["ToyForCausalLM"], "model_type": "llama"},
                    draft_config_path="drafter/config.json")


@cacheable
@dataclass
class DraftLmHeadData:
    """EA317 details: the ``draft`` class, the class whose ``__init__`` ends the chain without an
    LM head (``stops_at``, and how: ``via``), whether its ``load_weights`` ``skips`` ``lm_head.``
    weights, and the proposer's ``read`` of the draft's head (``path:line``)."""

    draft: str | None = None
    stops_at: str | None = None
    via: str | None = None
    skips: bool = False
    read: str | None = None


def builds_lm_head(ctx: Context, ref: ClassRef) -> tuple[bool | None, str, str, bool]:
    """Whether constructing ``ref`` assigns ``self.lm_head``, following its ``__init__`` and the
    parents' it runs along the C3 MRO: ``(True | False | None, last class, how the chain ended,
    skips lm_head weights)``; None when a class on the way cannot be read."""
    r = ctx.resolver
    entries = list(r.mro(ref).entries)
    i = 0
    skips = False
    while i < len(entries):
        c = entries[i]
        if not isinstance(c, ClassRef):
            return False, str(getattr(c, "dotted", c)), (f"its __init__ chain reaches {getattr(c, 'dotted', c)} "
                                                         "(outside the tree) and assigns no lm_head"), skips
        path = r.tree.path_of(c.module)
        facts: list[InitFact] = [f for f in (r.tree.summary(path).extras.get(CLASS_EXTRACTOR.name, ()) or ())
                                 if f.cls == c.name and f.has_init] if path else []
        hit = r.lookup(c, "__init__")
        if not facts:
            if hit is not None and hit[0] == c:
                return None, c.name, "its __init__ cannot be read", skips
            i += 1
            continue
        f = facts[-1]
        skips = skips or f.skips_lm_head
        if f.lm_head:
            return True, c.name, "assigns self.lm_head", skips
        if f.parent is None:
            return False, c.name, f"{c.name}.__init__ runs no parent __init__ and assigns no lm_head", skips
        if f.parent == "super":
            i += 1
            continue
        t = r.resolve_dotted(c.module, f.parent)
        if isinstance(t, ClassRef) and t in entries[i + 1:]:
            i = entries.index(t)
            continue
        return False, c.name, (f"{c.name}.__init__ runs {f.parent}.__init__ (not its base's, which would build "
                               "the head) and assigns no lm_head"), skips
    return False, ref.name, "no __init__ on its MRO assigns lm_head", skips


class DraftLmHeadRule(Rule):
    """A drafter without an LM head of its own, and a proposer that may read it.

    What it does: names the draft the run builds (the EAGLE rewrite of ``--draft-config``, or the
    MTP draft), follows its construction (``__init__`` and the parents' ``__init__`` it runs) for
    an assignment of ``self.lm_head``, and, when there is none, finds the proposer's sharing of
    the target's LM head that reads the draft's own ``self.model.lm_head`` when the draft declares
    one was trained (``has_own_lm_head``: a literal ``True`` on its MRO, or set by a function its
    ``load_weights`` calls when a weight is named ``lm_head``; drafters without the attribute are
    MTP drafts, whose head the proposer always shares). A warning: it bites only when the flag is
    on (for most drafters, when the checkpoint ships ``lm_head`` weights).
    """

    CODE = "EA317"
    #: the draft a run builds (rules/drafts.py) reads the MTP rewrite's interpretation
    FACTS = (MtpDraftOf,)
    GATE = "draft-lm-head"
    NAME = "draft-lm-head-missing"
    SUMMARY = "the drafter builds no LM head, and the proposer reads it when the checkpoint ships one"
    WHY = (
        "vLLM 0.11.2's EagleLlama4ForCausalLM runs nn.Module.__init__ instead of Llama4ForCausalLM's, so it "
        "never builds an lm_head, and its load_weights skips lm_head weights. The proposer shares the target's "
        "head only while the drafter's has_own_lm_head is False; process_eagle_weight sets it True as soon as "
        "the checkpoint has an lm_head weight, and the proposer then compares self.model.lm_head.weight, which "
        "does not exist (AttributeError at start-up)."
    )
    HOW_TO_FIX = (
        "Serve a drafter checkpoint without lm_head weights (the target's head is then shared), or use a "
        "release whose drafter builds its own lm_head."
    )
    FIX_AVAILABLE = False
    BLOCKING = False
    METHODS = ("eagle", "eagle3", "mtp")
    CHECKED_WITH = "your drafter (--draft-config)"
    DATA = DraftLmHeadData
    VALID = [Example(_tree(head=True), "LlamaForCausalLM", method="eagle", rows=_ROW, options=_DRAFT,
                     note="the drafter builds its own lm_head")]
    INVALID = [Example(_tree(head=False), "LlamaForCausalLM", method="eagle", rows=_ROW, options=_DRAFT,
                       expect_severity=Severity.WARNING,
                       note="nn.Module.__init__ instead of the base's: no lm_head, and the proposer reads it")]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        from rules.drafts import resolved_draft

        draft = resolved_draft(self, ctx, target)
        if draft is None:
            return
        built, last, how, skips = builds_lm_head(ctx, draft.ref)
        if built is not False:
            return
        flag = own_head_flag(ctx, draft.ref)
        if flag is None:
            return  # the flag stays False (or there is none): the proposer shares the target's head
        reads = [(p, s) for p, s in ctx.facts.found(SHARE_EXTRACTOR) if s.read_line is not None]
        if not reads:
            return
        path, s = reads[0]
        others = sorted({f"{m.split('.')[0]} ({p})" for p, ms in ctx.facts.found(METHODS_EXTRACTOR) for m in [ms]
                         if m.endswith(f".{s.method}") and m.split(".")[0] != s.cls})
        unless = ((f" (unless this draft's proposer is {others[0]}, which overrides {s.method})" if len(others) == 1
                   else f" (unless this draft's proposer is one of {', '.join(others)}, which override {s.method})")
                  if others else "")
        yield self.finding(
            Severity.WARNING,
            f"{draft.architecture} ({draft.ref.dotted}) builds no lm_head: {how}"
            + ("; its load_weights skips lm_head weights" if skips else "")
            + f". Its has_own_lm_head is {flag}, and then {s.cls}.{s.method} reads self.model.lm_head at "
            f"{path}:{s.read_line} instead of sharing the target's: AttributeError{unless}"
            + (". Serve a drafter checkpoint without lm_head weights" if flag.startswith("set ") else ""),
            path, s.read_line, draft=draft.ref.dotted, stops_at=last, via=how, skips=skips,
            read=f"{path}:{s.read_line}")


def own_head_flag(ctx: Context, ref: ClassRef) -> str | None:
    """How a drafter's ``has_own_lm_head`` becomes True, in words, or None when it never does: a
    class of its MRO sets it to the literal ``True``, or its ``load_weights`` calls a function that
    sets it (``process_eagle_weight``, when the checkpoint ships an ``lm_head`` weight). A drafter
    without the attribute is an MTP draft, whose head the proposer always shares."""
    r = ctx.resolver
    hit = r.lookup(ref, "has_own_lm_head")
    if hit is None:
        return None
    if getattr(hit[1], "literal", None) is True:
        return f"True ({hit[0].name} sets it)"
    setters = {name for _, name in ctx.facts.found(FLAG_EXTRACTOR)}
    for e in r.mro(ref).entries:
        if not isinstance(e, ClassRef):
            continue
        path = r.tree.path_of(e.module)
        for f in (r.tree.summary(path).extras.get(CLASS_EXTRACTOR.name, ()) or ()) if path else ():
            if f.cls == e.name and f.weight_calls:
                hits = sorted(setters & set(f.weight_calls))
                if hits:
                    return (f"set when the drafter checkpoint ships an lm_head weight ({e.name}.load_weights "
                            f"calls {hits[0]})")
                break
        else:
            continue
        break
    return None

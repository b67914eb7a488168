"""EA316 ``draft-embed-width``: the proposer keeps a drafter's own embedding when its width differs
from the target's, but the drafter projects a target-width embedding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from auditor.cache import cacheable
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.common.examples import EXAMPLE_SPEC
from rules.draft_embed_width.facts import DRAFT_EXTRACTOR, SHARER_EXTRACTOR, DraftWidthFact
from rules.drafts import resolved_draft
from rules.mtp_draft.facts import MtpDraftOf

_DRAFT = '''
import torch
import torch.nn as nn


class ToyMTPPredictor(nn.Module):
    def __init__(self, *, vllm_config=None, prefix=""):
        super().__init__()
        config = vllm_config.speculative_config.draft_model_config.hf_config
        self.hidden_size = config.hidden_size
        self.backbone_hidden_size = getattr(config, "backbone_hidden_size", self.hidden_size)
        self.embed_tokens = nn.Embedding(config.vocab_size, self.hidden_size)
        self.pre_projection = nn.Linear(2 * self.backbone_hidden_size, self.hidden_size)

    def forward(self, input_ids, positions, hidden_states):
        combined = torch.cat([self.embed_tokens(input_ids), hidden_states], dim=-1)
        return self.pre_projection(combined)


class ToyMTP(nn.Module):
    def __init__(self, *, vllm_config=None, prefix=""):
        super().__init__()
        self.model = ToyMTPPredictor(vllm_config=vllm_config, prefix=prefix)
'''

_PROPOSER = '''
import torch


class SpecDecodeBaseProposer:
    def _maybe_share_embeddings(self, target_language_model):
        target_embed_tokens = target_language_model.model.embed_tokens
        share_embeddings = True
        if {eagle_test}:
            draft_embed = self.model.model.embed_tokens
            target_dim = target_embed_tokens.weight.shape[-1]
            draft_dim = draft_embed.weight.shape[-1]
            if target_dim != draft_dim:
                share_embeddings = False
        if share_embeddings:
            self.model.model.embed_tokens = target_embed_tokens
'''


def _tree(eagle_only: bool) -> dict[str, str]:
    test = 'share_embeddings and hasattr(self.model, "has_own_embed_tokens")' if eagle_only else "share_embeddings"
    return {"vllm/config/speculative.py": EXAMPLE_SPEC, "vllm/model_executor/models/toy_mtp.py": _DRAFT,
            "vllm/v1/spec_decode/base_proposer.py": _PROPOSER.replace("{eagle_test}", test)}


_ROW = [("ToyMTPModel", "toy_mtp", "ToyMTP", "_SPECULATIVE_DECODING_MODELS")]


def _drafter(hidden: int, backbone: int) -> RunOptions:
    return RunOptions(method="mtp", draft_config={"architectures": ["ToyAssistantForCausalLM"],
                                                  "model_type": "toy_assistant", "backbone_hidden_size": backbone,
                                                  "text_config": {"hidden_size": hidden}},
                      draft_config_path="assistant/config.json")


@cacheable
@dataclass
class DraftEmbedWidthData:
    """EA316 details: the ``draft`` class that projects the target's embedding, its own
    ``embed_width`` and the ``projection_width`` it expects, the proposer's ``guard``
    (``path:line``), and the widths of ``--draft-config`` when it gives them (``widths``)."""

    draft: str | None = None
    embed_width: str | None = None
    projection_width: str | None = None
    guard: str | None = None
    widths: dict | None = None


def _config_value(cfg: dict | None, expr: str | None):
    """The value of ``self.<name>``'s last attribute in the drafter config (its top level, else its
    ``text_config``), or None."""
    if not cfg or not expr:
        return None
    name = expr.rsplit(".", 1)[-1]
    for level in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}):
        v = level.get(name)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def relying_class(ctx: Context, ref: ClassRef) -> tuple[ClassRef, DraftWidthFact, str] | None:
    """The class of a draft (``ref``, its MRO, or the inner model its ``self.model`` is built from)
    that projects a target-width embedding: ``(class, fact, path)``, or None."""
    r = ctx.resolver
    seen = set()
    todo = [e for e in r.mro(ref).entries if isinstance(e, ClassRef)]
    while todo:
        c = todo.pop(0)
        if c in seen:
            continue
        seen.add(c)
        path = r.tree.path_of(c.module)
        if path is None:
            continue
        for f in r.tree.summary(path).extras.get(DRAFT_EXTRACTOR.name, ()) or ():
            if f.cls != c.name:
                continue
            if f.projection_width:
                return c, f, path
            if f.inner:
                inner = r.resolve_name(c.module, f.inner)
                if isinstance(inner, ClassRef):
                    todo.append(inner)
    return None


class DraftEmbedWidthRule(Rule):
    """A drafter that projects the target's embedding, and a proposer that may keep the drafter's own.

    What it does: names the draft the run builds (the MTP rewrite of the target's or the drafter
    checkpoint's config, or the EAGLE rewrite of ``--draft-config``), finds in it (or in the inner
    model its ``self.model`` is built from) an own ``embed_tokens`` of width ``W_e`` beside an input
    projection of ``2 * W_b`` over ``cat([embeddings, hidden_states])`` with ``W_b`` another width,
    and the proposer's sharing of the target's embedding that keeps the draft's own when the two
    widths differ, where that guard applies to this draft (everywhere, or only to drafts with
    ``has_own_embed_tokens`` on their MRO). A warning: it bites only when the widths differ, which
    ``--draft-config`` can tell.
    """

    CODE = "EA316"
    #: the draft a run builds (rules/drafts.py) reads the MTP rewrite's interpretation
    FACTS = (MtpDraftOf,)
    GATE = "draft-embed-width"
    NAME = "draft-embedding-width-guard"
    SUMMARY = "the proposer keeps the drafter's own narrower embedding, but the drafter projects the target's"
    WHY = (
        "An MTP drafter such as Gemma 4's assistant (vLLM 0.25.1 gemma4_mtp.py) builds a placeholder "
        "embedding at its own hidden size and projects cat(embedding, target hidden states) with an input "
        "width of 2 * backbone_hidden_size: it needs the proposer to replace its embedding by the target's. "
        "The proposer's _maybe_share_embeddings of that release keeps the draft's own embedding whenever the "
        "two widths differ, for MTP drafts too, so the projection gets hidden_size + backbone_hidden_size "
        "columns and the first draft step fails with a shape error (Gemma 4 MoE)."
    )
    HOW_TO_FIX = (
        "Use a release whose proposer applies the width check to EAGLE drafts only, or whose proposer for "
        "this draft shares the target's embedding unconditionally (vLLM 0.27: Gemma4Proposer)."
    )
    FIX_AVAILABLE = False
    BLOCKING = False
    METHODS = ("eagle", "eagle3", "mtp")
    CHECKED_WITH = "your drafter (--draft-config)"
    DATA = DraftEmbedWidthData
    VALID = [
        Example(_tree(eagle_only=True), "LlamaForCausalLM", method="mtp", rows=_ROW, options=_drafter(256, 1536),
                note="the width guard runs for EAGLE drafts only"),
        Example(_tree(eagle_only=False), "LlamaForCausalLM", method="mtp", rows=_ROW, options=_drafter(512, 512),
                note="your drafter's widths are equal: the guard never fires"),
    ]
    INVALID = [
        Example(_tree(eagle_only=False), "LlamaForCausalLM", method="mtp", rows=_ROW, options=_drafter(256, 1536),
                expect_severity=Severity.WARNING, note="the guard runs for MTP drafts and the widths differ"),
    ]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        draft = resolved_draft(self, ctx, target)
        if draft is None:
            return
        found = relying_class(ctx, draft.ref)
        if found is None:
            return
        cls, fact, dpath = found
        eagle_draft = ctx.resolver.lookup(draft.ref, "has_own_embed_tokens") is not None
        guards = [(p, s) for p, s in ctx.facts.found(SHARER_EXTRACTOR)
                  if s.guard_line is not None and (eagle_draft or not s.eagle_only)]
        if not guards:
            return
        path, g = guards[0]
        cfg = target.options.draft_config
        ew, pw = _config_value(cfg, fact.embed_width), _config_value(cfg, fact.projection_width)
        if ew is not None and pw is not None and ew == pw:
            return
        overrides = sorted({f"{s.cls} ({p})" for p, s in ctx.facts.found(SHARER_EXTRACTOR)
                            if s.method == g.method and s.cls != g.cls and s.guard_line is None})
        widths = ({fact.embed_width.rsplit('.', 1)[-1]: ew, fact.projection_width.rsplit('.', 1)[-1]: pw}
                  if ew is not None and pw is not None else None)
        said = (f"; your drafter's {', '.join(f'{k} {v}' for k, v in widths.items())} differ" if widths
                else "; whether they differ is in the drafter's config (--draft-config)")
        unless = (f" (unless the proposer of this draft is {', '.join(overrides)}, which shares without the check)"
                  if overrides else "")
        yield self.finding(
            Severity.WARNING,
            f"{draft.architecture} ({cls.name}, {dpath}) builds its own embedding at {fact.embed_width} but its "
            f"{fact.projection} takes 2 * {fact.projection_width} over cat(embedding, hidden states) at line "
            f"{fact.concat_line}: it needs the target's embedding; {g.cls}.{g.method} ({path}:{g.guard_line}) keeps "
            f"the draft's own when the widths differ{said}, and the projection then gets the wrong width{unless}",
            path, g.guard_line, draft=cls.dotted, embed_width=fact.embed_width,
            projection_width=fact.projection_width, guard=f"{path}:{g.guard_line}", widths=widths)

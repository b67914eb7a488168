"""EA304 ``image-token``: the EAGLE proposer cannot find the image token id of a multimodal target."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.engines.modelfiles import config_attributes, is_multimodal
from auditor.hf.configs import TransformersFacts
from auditor.index.targets import ClassRef, Unresolved
from auditor.model.findings import Finding, Severity
from rules.base import AuditTarget, Context, Example, Rule
from rules.image_token.facts import EXTRACTOR, image_token_chains
from rules.image_token.transformers_needed import (
    NewestTransformersFacts,
    chosen_by_requirement,
    imported_transformers_package,
    transformers_with,
)


def token_candidates(attrs) -> list[str]:
    """Attribute names that look like a media/image token id (``media_placeholder_token_id``)."""
    return sorted(a for a in attrs if "token" in a and (a.endswith("_id") or a.endswith("_index")) and
                  any(k in a for k in ("image", "media", "img", "placeholder", "vision")))


@cacheable
@dataclass
class ImageTokenData:
    """EA304 details: the ``attribute`` the proposer reads, the ``config_class`` of the target,
    the ``candidates`` (image/media token attributes it does define), or the module
    ``unanalysed`` that may hold the proposer's branches."""

    attribute: str | None = None
    candidates: list[str] = field(default_factory=list)
    config_class: str | None = None
    unanalysed: str | None = None


class ImageTokenRule(Rule):
    """A multimodal target's image token id, as the EAGLE proposer reads it.

    What it does: for a target whose MRO sets ``supports_multimodal = True``, finds the
    proposer's chain of per-architecture branches (they compare the model's class name); if no
    branch names the target's class, the fallback reads ``target_model.config.image_token_index``,
    so the HF config class registered for the target's model_type must provide that attribute.
    """

    CODE = "EA304"
    FACTS = (TransformersFacts, NewestTransformersFacts)
    GATE = "image-token"
    NAME = "image-token-id-unreadable"
    SUMMARY = ("a multimodal target named in no proposer branch whose HF config class lacks "
               "`image_token_index`")
    WHY = (
        "When the target supports multimodal inputs, EagleProposer.load_model copies an image "
        "token id into the drafter's config: a branch per architecture, else "
        "target_model.config.image_token_index. A config class without that attribute makes the "
        "proposer raise AttributeError after the weights are loaded (Kimi-K2.5 calls it "
        "media_placeholder_token_id)."
    )
    HOW_TO_FIX = (
        "Add a branch for the architecture that reads the attribute its HF config class really "
        "defines; the codemod does it when exactly one candidate attribute exists."
    )
    FIX_AVAILABLE = True
    DATA = ImageTokenData
    METHODS = ("eagle3", "eagle")
    VALID = [Example({}, "LlamaForCausalLM", note="not multimodal")]
    INVALID = [Example({}, "ToyVLForConditionalGeneration", expect_severity=Severity.ERROR,
                       note="config class has media_placeholder_token_id, the fallback reads image_token_index")]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        ref = target.facts.ref
        if ref is None or not is_multimodal(ctx.resolver, ref):
            return
        chains = image_token_chains(ctx)
        if not chains:
            for path, why in ctx.facts.unanalysed(EXTRACTOR):
                yield self.finding(Severity.UNKNOWN, f"{ref.name} is multimodal, and {path}, which may hold the "
                                   "proposer's image-token branches, is missing from the analysis: it "
                                   + (why if why.startswith("cannot be read") else f"does not parse ({why})"),
                                   path, None, unanalysed=path)
            return
        path, chain = chains[0]
        for br in chain.branches:
            if br.architectures and ref.name in br.architectures:
                return
        fallback = next((b for b in chain.branches if not b.architectures), None)
        if fallback is None:
            return
        attr_path = fallback.attr_path.split(".")
        needed = attr_path[-1]
        if target.hf_config is not None:
            node = target.hf_config
            for part in attr_path[1:]:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                return
            cands = token_candidates(k for k in target.hf_config if isinstance(k, str))
            yield self.finding(
                Severity.ERROR,
                f"{ref.name} is multimodal and named in no branch of {chain.function}(); the fallback "
                f"reads {fallback.attr_path}, which the checkpoint config lacks (candidates: {cands})",
                path, fallback.line, attribute=needed, candidates=cands,
            )
            return
        mt = target.model_type
        cfg = ctx.registry.config_class(mt) if mt else None
        if isinstance(cfg, Unresolved):
            yield self.finding(
                Severity.UNKNOWN,
                f"{ref.name} is multimodal and named in no proposer branch; the fallback reads "
                f"{fallback.attr_path} from the HF config class of model_type {mt!r}, but {cfg.reason}: "
                "pass --hf-config with the checkpoint's config.json",
                path, fallback.line,
            )
            return
        resolver = ctx.resolver
        where = None
        needed_by = None
        if not isinstance(cfg, ClassRef) and mt:
            tf = ctx.get(TransformersFacts).configs
            cfg = tf.config_class(mt) if tf is not None else None
            if cfg is None and tf is not None and chosen_by_requirement(tf):
                pkg = imported_transformers_package(ctx.resolver, ref)
                if pkg is not None:
                    other, how = transformers_with(pkg[0], mt, tf, ctx.get(NewestTransformersFacts))
                    needed_by = (f"{pkg[2]} from transformers.models.{pkg[0]}, which transformers {tf.version or '?'} "
                                 f"lacks: the target runs only with a release that has it")
                    if other is not None:
                        tf, cfg = other, other.config_class(mt)
            if cfg is not None:
                resolver = tf.resolver
                where = f"transformers at {tf.parent}" + (f"; {needed_by}, the newest" if needed_by else "")
        if not isinstance(cfg, ClassRef):
            what = f"model_type {mt!r} ({target.model_type_source})" if mt else "an unknown model_type"
            at_hand = ctx.get(TransformersFacts)
            tf = at_hand.configs
            tf_note = (f"no transformers source is at hand ({at_hand.note or 'none installed'}; "
                       "pass --transformers PATH|VERSION)" if tf is None
                       else f"transformers {tf.version or ''} ({tf.parent}) does not register it")
            yield self.finding(
                Severity.UNKNOWN,
                f"{ref.name} is multimodal and named in no proposer branch; the fallback reads "
                f"{fallback.attr_path}, but the config class for {what} is not in vLLM's tree and "
                f"{tf_note}: pass --hf-config with the checkpoint's config.json",
                path, fallback.line,
            )
            return
        attrs = config_attributes(resolver, cfg)
        if len(attr_path) == 2 and needed in attrs:
            return
        cands = token_candidates(attrs)
        cloc = resolver.location(cfg)
        if where:
            cloc = (f"{cloc[0] if cloc else '?'} in {where}", 0)
        yield self.finding(
            Severity.ERROR,
            f"{ref.name} is multimodal and named in no branch of {chain.function}(); the fallback reads "
            f"{fallback.attr_path}, which {cfg.name} ({cloc[0] if cloc else '?'}) does not define"
            + (f" (it has {', '.join(cands)})" if cands else ""),
            path, fallback.line, attribute=needed, candidates=cands, config_class=cfg.dotted,
        )

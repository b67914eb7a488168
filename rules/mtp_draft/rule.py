"""EA308 ``mtp-draft``: for ``--method mtp``, the target's HF config is not rewritten into a
registered MTP draft architecture (or the method string is one the release does not accept)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.model.findings import Finding, Severity
from auditor.model.options import METHODS, RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.common.examples import EXAMPLE_DRAFT, EXAMPLE_SPEC
from rules.mtp_draft.facts import (
    EXTRACTOR,
    METHODS_EXTRACTOR,
    DraftModelHook,
    MtpDraftOf,
    draft_of,
    drafter_checkpoint,
    mtp_methods,
    rewrite_applies_to_draft_model,
)

#: The synthetic tree of the examples: the speculative config and a registered draft.
_TREE = {"vllm/config/speculative.py": EXAMPLE_SPEC, "vllm/model_executor/models/toy_mtp.py": EXAMPLE_DRAFT}
_DRAFT_ROW = [("ToyMTPModel", "toy_mtp", "ToyMTP", "_SPECULATIVE_DECODING_MODELS")]
_ASSISTANT = RunOptions(draft_config={"architectures": ["ToyAssistantForCausalLM"], "model_type": "toy_assistant"},
                        draft_config_path="assistant/config.json")


@cacheable
@dataclass
class MtpDraftData:
    """EA308 details: the requested ``method`` and the MTP method strings the tree ``accepted``;
    the ``draft_architecture`` and ``draft_model_type`` the rewrite yields; the ``candidates`` when
    it depends on checkpoint fields; the rewrite ``function``; a module ``unanalysed``."""

    method: str | None = None
    accepted: list[str] = field(default_factory=list)
    draft_architecture: str | None = None
    draft_model_type: str | None = None
    candidates: list[str] = field(default_factory=list)
    function: str | None = None
    unanalysed: str | None = None


def _where_methods(ctx: Context) -> tuple[str | None, int | None]:
    found = mtp_methods(ctx)
    if found is None:
        return None, None
    path, f = found
    return path, f.list_line or f.line


def _spec_module(ctx: Context) -> str | None:
    for mod in ("vllm.config.speculative", "vllm.config"):
        p = ctx.resolver.tree.path_of(mod)
        if p:
            return p
    return None


class MtpDraftRule(Rule):
    """The MTP draft architecture, as the tree's speculative config derives it.

    What it does: finds the function of the speculative config that rewrites a target's HF config
    for MTP (a chain of branches on ``hf_config.model_type`` / ``hf_config.architectures[0]``
    assigning ``model_type`` and calling ``hf_config.update({"architectures": [...]})``;
    ``SpeculativeConfig.hf_config_override``), and interprets it statically for the target's
    model_type and architecture (conditions on checkpoint fields are decided from ``--hf-config``
    when given). The draft architecture must be registered, and the draft model_type must be one
    of the tree's MTP model_types (the list vLLM maps older method strings with; otherwise vLLM
    raises "Unsupported speculative method"). An older method string (``deepseek_mtp``) must be on
    that list too. With ``--draft-config`` (an MTP drafter shipped as a checkpoint of its own, as
    Gemma 4's ``gemma4_assistant`` from vLLM 0.21) the rewrite is interpreted for *that*
    checkpoint's model_type and architectures, as vLLM does where it builds the draft's model
    config from the speculative ``model`` with ``hf_overrides=<the rewrite>``
    (``config/speculative.py``); a tree without that call is ``unknown``.
    """

    CODE = "EA308"
    FACTS = (MtpDraftOf, DraftModelHook)
    GATE = "mtp-draft"
    NAME = "no-mtp-draft"
    SUMMARY = "the target's HF config is not rewritten into a registered MTP draft"
    WHY = (
        "With --speculative-config method=mtp, vLLM builds the draft from the target's own "
        "checkpoint: SpeculativeConfig.hf_config_override rewrites the HF config's model_type and "
        "architectures (DeepseekV3 -> deepseek_mtp / DeepSeekMTPModel). A target that no branch "
        "rewrites keeps its own model_type, which is not an MTP model_type, and the speculative "
        "config raises 'Unsupported speculative method'; a draft architecture missing from the "
        "model registry fails when the draft is built. Older method strings (deepseek_mtp, "
        "qwen3_next_mtp) are accepted only while the release lists them."
    )
    HOW_TO_FIX = (
        "Use a release whose hf_config_override has a branch for the target's model_type and "
        "registers its MTP draft (eagle-audit matrix --method mtp finds the first one), or use "
        "EAGLE-3 with a trained drafter. Not fixable by a local patch: the draft is a model "
        "implementation (layers, weight loading) that the tree does not have."
    )
    FIX_AVAILABLE = False
    METHODS = ("mtp",)
    DATA = MtpDraftData
    VALID = [
        Example(_TREE, "ToyV3ForCausalLM", method="mtp", rows=_DRAFT_ROW,
                note="toy_v3 -> toy_mtp -> ToyMTPModel, registered"),
        Example(_TREE, "ToyV3ForCausalLM", method="mtp", rows=_DRAFT_ROW,
                options=RunOptions(method="toy_mtp"), note="an older method string the tree maps to mtp"),
        Example(_TREE, "LlamaForCausalLM", method="mtp", rows=_DRAFT_ROW, options=_ASSISTANT,
                note="a drafter checkpoint of its own (--draft-config): toy_assistant -> ToyMTPModel"),
    ]
    INVALID = [
        Example(_TREE, "LlamaForCausalLM", method="mtp", rows=_DRAFT_ROW, expect_severity=Severity.ERROR,
                note="no branch rewrites model_type llama"),
        Example(_TREE, "ToyV3ForCausalLM", method="mtp", expect_severity=Severity.ERROR,
                note="the draft architecture ToyMTPModel is not registered"),
        Example(_TREE, "ToyV2ForCausalLM", method="mtp", expect_severity=Severity.ERROR,
                rows=_DRAFT_ROW + [("ToyV2MTPModel", "toy_mtp", "ToyMTP", "_SPECULATIVE_DECODING_MODELS")],
                note="the draft model_type toy_v2_mtp is not one of the tree's MTP model_types"),
        Example(_TREE, "ToyV3ForCausalLM", method="mtp", rows=_DRAFT_ROW, options=RunOptions(method="qwen9_mtp"),
                expect_severity=Severity.ERROR, note="a method string the release does not accept"),
        Example(_TREE, "ToyV3ForCausalLM", method="mtp", rows=_DRAFT_ROW, expect_severity=Severity.ERROR,
                options=RunOptions(draft_config={"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
                                   draft_config_path="drafter/config.json"),
                note="the drafter checkpoint is judged, not the target: no branch rewrites llama"),
    ]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        requested = target.options.method
        methods = mtp_methods(ctx)
        if requested not in METHODS:
            if methods is None:
                path = _spec_module(ctx)
                yield self.finding(Severity.ERROR, f"this release lists no MTP method strings: method {requested!r} "
                                   "is refused (use --method mtp)", path, 1 if path else None, method=requested)
                return
            mpath, mf = methods
            if requested not in mf.names:
                yield self.finding(
                    Severity.ERROR,
                    f"method {requested!r} is not one of this release's MTP method strings "
                    f"{mf.list_name or 'list'} {mf.names}: SpeculativeConfig refuses it (use --method mtp)",
                    mpath, mf.list_line or mf.line, method=requested, accepted=mf.names)
                return
        drafter = drafter_checkpoint(target)
        if drafter is not None and drafter[0] is None:
            yield self.finding(Severity.UNKNOWN, drafter[4], _spec_module(ctx), None)
            return
        if drafter is None and target.model_type is None:
            path = _spec_module(ctx)
            yield self.finding(Severity.UNKNOWN, "the target's model_type is unknown: pass --model-type or --hf-config",
                               path, None)
            return
        if drafter is not None:
            arch, model_type, text_model_type, hf_config, source = drafter
        else:
            arch, model_type, text_model_type, hf_config, source = (
                target.architecture, target.model_type, target.text_model_type, target.hf_config,
                target.model_type_source)
        found = draft_of(ctx, arch, model_type, text_model_type, hf_config)
        if found is None:
            broken = ctx.facts.unanalysed(EXTRACTOR) + ctx.facts.unanalysed(METHODS_EXTRACTOR)
            for path, why in broken:
                yield self.finding(Severity.UNKNOWN, f"{path} may hold the MTP config rewrite but is missing from the "
                                   f"analysis: {why}", path, None, unanalysed=path)
            if broken:
                return
            path, line = _where_methods(ctx)
            path = path or _spec_module(ctx)
            yield self.finding(Severity.ERROR, "this release's speculative config has no MTP rewrite of the target's "
                               "HF config (no function assigns an MTP model_type and architectures): method mtp is "
                               "not supported", path, line or (1 if path else None))
            return
        path, fact, d = found
        fname = f"{fact.owner + '.' if fact.owner else ''}{fact.function}"
        also = (f"hf_config.model_type, which {fname} tests, not the text model_type {text_model_type!r}; "
                if drafter is None and text_model_type and text_model_type != model_type else "")
        src = f"model_type {model_type!r} ({also}{source})"
        if drafter is not None:
            applied = rewrite_applies_to_draft_model(ctx, path, fact.function)
            if applied is None:
                yield self.finding(Severity.UNKNOWN, f"the drafter checkpoint {target.options.draft_config_path} is "
                                   f"given, but no call in {path} builds the draft's model config from it with "
                                   f"hf_overrides={fname}: cannot tell whether the release rewrites it", path, fact.line,
                                   function=fname)
                return
        if d.unknown:
            yield self.finding(Severity.UNKNOWN, f"cannot interpret {fname}: {d.unknown}", path, fact.line)
            return
        if not d.architectures and not d.unchanged and d.raises:
            yield self.finding(Severity.ERROR, f"{fname} raises for {src} (line {d.raises[0]})", path, d.raises[0],
                               function=fname)
            return
        if d.unchanged:
            mts = [m for m in d.model_types if m != model_type]
            also = (f" (it rewrites the model_type to {mts[0]!r} but keeps the architecture)" if mts else "")
            yield self.finding(
                Severity.ERROR,
                f"no branch of {fname} yields an MTP draft architecture for {src} and architecture "
                f"{arch}{also}: vLLM has no MTP draft for this {'drafter checkpoint' if drafter else 'target'}"
                + ("" if drafter or rewrite_applies_to_draft_model(ctx, path, fact.function) is None else
                   " (a drafter shipped as a checkpoint of its own is judged instead: pass --draft-config)"), path, fact.line,
                function=fname)
            return
        if not d.architecture_known or len(d.architectures) != 1 or (methods and not d.model_type_known):
            lines = ", ".join(str(x) for x in d.undecided[:6]) or "?"
            options = f" (one of {', '.join(d.architectures)})" if len(d.architectures) > 1 else ""
            yield self.finding(
                Severity.UNKNOWN,
                f"the MTP draft of {src} depends on checkpoint fields the tool was not given{options}: "
                f"{fname} tests them at {'line' if len(d.undecided[:6]) == 1 else 'lines'} {lines}; pass --hf-config with the checkpoint's config.json",
                path, d.undecided[0] if d.undecided else fact.line, candidates=d.architectures)
            return
        arch = d.architectures[0]
        if arch not in ctx.registry.entries:
            yield self.finding(
                Severity.ERROR,
                f"{fname} rewrites {src} into draft architecture {arch}, which is not in the model registry "
                f"({ctx.registry.path})", path, fact.line, draft_architecture=arch)
            return
        if methods is not None:
            mpath, mf = methods
            bad = [m for m in d.model_types if m not in mf.names]
            if bad and len(bad) == len(d.model_types):
                yield self.finding(
                    Severity.ERROR,
                    f"{fname} rewrites {src} into draft model_type {bad[0]!r} ({arch}), which is not one of the "
                    f"MTP model_types {mf.list_name or ''} {mf.names}: vLLM raises 'Unsupported speculative "
                    "method'", mpath, mf.list_line or mf.line, draft_architecture=arch, draft_model_type=bad[0])
                return

"""The registry: one table that maps every stable code to its rule, fix planner, codemod and
fact extractors (ruff's ``codes.rs``). Adding a gate is one folder ``rules/<gate>/`` and one
line in :data:`TABLE`.

Codemods are named as ``"module:Class"`` and imported on first use, so that a scan never loads
libcst.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from auditor.index.summary import Extractor
from rules import (
    allowlist,
    aux_capture,
    aux_layers,
    draft_embed_width,
    draft_lm_head,
    draft_pp,
    draft_registry,
    embed_sharing,
    image_token,
    interface,
    mtp_draft,
    parallel_drafting_mm,
    planning,
    platform_block_size,
    platform_spec_decode,
    pp_aux_transport,
    resolve,
)
from rules.allowlist import facts as allowlist_facts
from rules.allowlist import planner as allowlist_planner
from rules.aux_capture import planner as aux_capture_planner
from rules.aux_capture import planner_sglang as aux_capture_planner_sglang
from rules.aux_capture import sglang as aux_capture_sglang
from rules.aux_capture import target_forward as aux_capture_forward
from rules.common import layer_ids as aux_layers_facts
from rules.base import Rule
from rules.draft_embed_width import facts as draft_embed_width_facts
from rules.draft_lm_head import facts as draft_lm_head_facts
from rules.draft_pp import facts as draft_pp_facts
from rules.draft_registry import facts as draft_registry_facts
from rules.embed_sharing import facts as embed_sharing_facts
from rules.embed_sharing import planner as embed_sharing_planner
from rules.image_token import facts as image_token_facts
from rules.image_token import planner as image_token_planner
from rules.interface import planner as interface_planner
from rules.interface import planner_sglang as interface_planner_sglang
from rules.interface import runner as interface_runner
from rules.interface import sglang as interface_sglang
from rules.mtp_draft import facts as mtp_draft_facts
from rules.nextn_draft import SGLangMTPDraftRule
from rules.parallel_drafting_mm import facts as parallel_drafting_mm_facts
from rules.platform_block_size import facts as platform_block_size_facts
from rules.platform_spec_decode import facts as platform_spec_decode_facts
from rules.pp_aux_transport import facts as pp_aux_transport_facts
from rules.pp_aux_transport import planner as pp_aux_transport_planner


@dataclass(frozen=True)
class Entry:
    """One row of the table: the ``rule`` class (its ``CODE`` and ``GATE``), the gate's fix
    ``planner`` (``plan(planner, result, finding)``, None when no fix exists), its ``codemod``
    (``"module:Class"``, imported on first use), the ``extractors`` the index pass must run
    for it, and the codemod's stable ``name`` (default: the gate id; another engine's codemod for
    the same gate has its own, ``sglang-interface``)."""

    rule: type[Rule]
    planner: Callable | None = None
    codemod: str | None = None
    extractors: tuple[Extractor, ...] = ()
    name: str | None = None

    @property
    def codemod_name(self) -> str:
        """The codemod's stable name (recorded in codemods files and invocations)."""
        return self.name or self.rule.GATE


#: Every rule, in report order.
TABLE: tuple[Entry, ...] = (
    Entry(allowlist.AllowlistRule, allowlist_planner.plan, "rules.allowlist.codemod:AllowlistCodemod",
          (allowlist_facts.EXTRACTOR,)),
    Entry(interface.InterfaceRule, interface_planner.plan, "rules.interface.codemod:InterfaceCodemod",
          (interface_runner.EXTRACTOR,)),
    Entry(aux_capture.AuxCaptureRule, aux_capture_planner.plan, "rules.aux_capture.codemod:AuxCaptureCodemod",
          (aux_capture_forward.EXTRACTOR,)),
    Entry(image_token.ImageTokenRule, image_token_planner.plan, "rules.image_token.codemod:ImageTokenCodemod",
          (image_token_facts.EXTRACTOR,)),
    Entry(interface.StubMemberRule),
    Entry(interface.StaleMemberRule),
    Entry(aux_capture.PPRelativeIndexRule),
    Entry(mtp_draft.MtpDraftRule, None, None, (mtp_draft_facts.EXTRACTOR, mtp_draft_facts.METHODS_EXTRACTOR)),
    Entry(draft_pp.DraftPPRule, None, None, (draft_pp_facts.PARALLEL_EXTRACTOR, draft_pp_facts.REFUSAL_EXTRACTOR)),
    Entry(pp_aux_transport.PPAuxTransportRule, pp_aux_transport_planner.plan,
          "rules.pp_aux_transport.codemod:PPAuxTransportCodemod", (pp_aux_transport_facts.EXTRACTOR,)),
    Entry(draft_registry.DraftRegistryRule, None, None, (draft_registry_facts.EXTRACTOR,)),
    Entry(aux_layers.AuxLayersRule, None, None, (aux_layers_facts.EXTRACTOR,)),
    Entry(parallel_drafting_mm.ParallelDraftingMMRule, None, None, (parallel_drafting_mm_facts.EXTRACTOR,)),
    Entry(embed_sharing.EmbedSharingRule, embed_sharing_planner.plan, "rules.embed_sharing.codemod:EmbedAliasCodemod",
          (embed_sharing_facts.EXTRACTOR,)),
    Entry(platform_spec_decode.PlatformSpecDecodeRule, None, None,
          (platform_spec_decode_facts.WORKER_EXTRACTOR, platform_spec_decode_facts.RUNNER_EXTRACTOR)),
    Entry(draft_embed_width.DraftEmbedWidthRule, None, None,
          (draft_embed_width_facts.DRAFT_EXTRACTOR, draft_embed_width_facts.SHARER_EXTRACTOR)),
    Entry(draft_lm_head.DraftLmHeadRule, None, None,
          (draft_lm_head_facts.CLASS_EXTRACTOR, draft_lm_head_facts.SHARE_EXTRACTOR,
           draft_lm_head_facts.FLAG_EXTRACTOR, draft_lm_head_facts.METHODS_EXTRACTOR)),
    Entry(platform_block_size.PlatformBlockSizeRule, None, None,
          (platform_block_size_facts.PLATFORM_EXTRACTOR, platform_block_size_facts.BACKEND_EXTRACTOR,
           platform_block_size_facts.SELECT_EXTRACTOR, platform_block_size_facts.MLA_TYPES_EXTRACTOR,
           platform_block_size_facts.PLATFORM_CLASSES_EXTRACTOR)),
    # SGLang (rules whose ENGINES name sglang): the same gate ids, SGLang's mechanism
    Entry(interface_sglang.SGLangInterfaceRule, interface_planner_sglang.plan,
          "rules.interface.codemod_sglang:SGLangInterfaceCodemod", name=interface_planner_sglang.CODEMOD),
    Entry(aux_capture_sglang.SGLangAuxCaptureRule, aux_capture_planner_sglang.plan,
          "rules.aux_capture.codemod_sglang:SGLangAuxCaptureCodemod", name=aux_capture_planner_sglang.CODEMOD),
    Entry(aux_capture_sglang.SilentDelegationRule),
    Entry(SGLangMTPDraftRule),
    Entry(draft_registry.SGLangDraftRegistryRule),
    # every engine: what static analysis cannot follow (run last; alone when the class does not resolve)
    Entry(resolve.ResolveRule),
)

#: Code → rule class, in report order.
RULES: dict[str, type[Rule]] = {e.rule.CODE: e.rule for e in TABLE}

for _rule in RULES.values():  # the hand-fix hint the planner gives for a gate without a codemod
    planning.HOW_TO_FIX.setdefault(_rule.GATE, _rule.HOW_TO_FIX)

#: Gate ids that block a vLLM target, in report order (another engine's: :func:`blocking_gates`).
BLOCKING_GATES = list(dict.fromkeys(r.GATE for r in RULES.values() if r.BLOCKING and r.judges("vllm")))


def blocking_gates(engine: str) -> list[str]:
    """Gate ids that block a target of ``engine``, each once, in report order."""
    return list(dict.fromkeys(r.GATE for r in RULES.values() if r.BLOCKING and r.judges(engine)))

#: Codemod name (the gate id; another engine's: its own name) → ``"module:Class"``.
CODEMODS: dict[str, str] = {e.codemod_name: e.codemod for e in TABLE if e.codemod is not None}

#: Every extractor the rules need in the summary pass.
EXTRACTORS: tuple[Extractor, ...] = tuple(x for e in TABLE for x in e.extractors)


def extractors_for(engine: str) -> tuple[Extractor, ...]:
    """The extractors of the rules that judge trees of ``engine`` (the modules a full scan of
    such a tree reads for the rules' facts)."""
    return tuple(x for e in TABLE if e.rule.judges(engine) for x in e.extractors)


def rule_by_gate(gate: str, engine: str = "vllm") -> type[Rule]:
    """The rule class for a gate id on trees of ``engine`` (vLLM by default). Raises KeyError
    for an unknown gate."""
    for r in RULES.values():
        if r.GATE == gate and r.judges(engine):
            return r
    raise KeyError(gate)


def rules_for(engine: str) -> dict[str, type[Rule]]:
    """Code → rule class of the rules that judge trees of ``engine``, in report order."""
    return {c: r for c, r in RULES.items() if r.judges(engine)}


def planners_for(engine: str) -> dict[str, Callable]:
    """Gate id → fix planner of the rules that judge trees of ``engine``."""
    return {e.rule.GATE: e.planner for e in TABLE if e.planner is not None and e.rule.judges(engine)}


def codemod_for(gate: str, engine: str = "vllm") -> str | None:
    """The name of the codemod that fixes ``gate`` on trees of ``engine`` (None when none does)."""
    for e in TABLE:
        if e.rule.GATE == gate and e.codemod is not None and e.rule.judges(engine):
            return e.codemod_name
    return None


#: Gate id → fix planner, for vLLM trees (:func:`planners_for` gives another engine's).
PLANNERS: dict[str, Callable] = planners_for("vllm")


def codemod_class(name: str):
    """The codemod class registered as ``name`` (a :class:`rules.cst.EagleCodemod` subclass).
    Raises KeyError for an unknown name."""
    mod, cls = CODEMODS[name].split(":")
    return getattr(importlib.import_module(mod), cls)


def codemod_classes() -> dict:
    """Every codemod class by its stable name, in gate order."""
    return {n: codemod_class(n) for n in CODEMODS}


def apply_codemod(name: str, module, params: dict, filename: str | None = None):
    """Apply codemod ``name`` with ``params`` to a parsed ``libcst.Module``.

    Returns:
        ``(new module, changes)``; ``changes`` is empty (and the module unchanged) when the
        module already had the change.
    Raises:
        rules.cst.NotAutoFixable: the codemod cannot make the change (the reason says why).
        KeyError: unknown codemod name.
    """
    from libcst.codemod import CodemodContext

    cmd = codemod_class(name)(CodemodContext(filename=filename), **params)
    new = cmd.transform_module(module)
    if not cmd.changes:
        return module, []
    return new, cmd.changes


def run_codemod(name: str, code: str, params: dict, filename: str | None = None) -> tuple[str, list[str]]:
    """Apply codemod ``name`` with ``params`` to the module source ``code``: ``(new code, changes)``.

    Raises:
        NotAutoFixable, KeyError: see :func:`apply_codemod`.
        libcst.ParserSyntaxError: ``code`` does not parse.
    """
    import libcst as cst

    new, changes = apply_codemod(name, cst.parse_module(code), params, filename)
    return (new.code if changes else code), changes


def select_rules(name: str) -> list[type[Rule]]:
    """The rules ``name`` selects (``eagle-audit rules NAME``): the rule of a code (``EA302``, in
    any case), or every rule of a gate id (``interface``: its vLLM and its SGLang rule), in
    report order.

    Raises:
        AuditError: ``name`` is neither a code nor a gate id (one line, with close matches).
    """
    import difflib

    from auditor.model.errors import AuditError

    wanted = name.strip()
    if wanted.upper() in RULES:
        return [RULES[wanted.upper()]]
    by_gate = [r for r in RULES.values() if r.GATE == wanted.lower()]
    if by_gate:
        return by_gate
    known = list(RULES) + list(dict.fromkeys(r.GATE for r in RULES.values()))
    close = difflib.get_close_matches(wanted.upper() if wanted[:2].lower() == "ea" else wanted.lower(),
                                      known, n=4, cutoff=0.6)
    hint = f"; did you mean: {', '.join(close)}?" if close else "; eagle-audit rules lists them"
    raise AuditError(f"unknown rule {wanted!r}: neither a rule code (EA302) nor a gate id (interface){hint}")

"""The draft model a run builds for a target, shared by the drafter-side gates.

- ``--method mtp``: the draft architecture the tree's speculative config rewrites the target's HF
  config into, or the drafter checkpoint's with ``--draft-config`` (``rules/mtp_draft/facts.py``);
- ``--method eagle``/``eagle3`` with ``--draft-config``: the drafter checkpoint's architecture
  after the tree's own EAGLE rewrite (``rules/draft_registry/facts.py``).

:func:`draft_model` answers "which class will vLLM build as the draft?", or says why it cannot.
"""

from __future__ import annotations

from dataclasses import dataclass

from auditor.index.targets import ClassRef
from rules.base import AuditTarget, Context, Rule


@dataclass
class DraftModel:
    """The draft of one run: its ``architecture`` (a registry row) and resolved class (``ref``,
    None when the row does not resolve), how the tool knows it (``via``), and the file and line
    that decide it. ``unknown``: why the draft cannot be named (the other fields are then None)."""

    architecture: str | None
    ref: ClassRef | None = None
    via: str = ""
    path: str | None = None
    line: int | None = None
    unknown: str | None = None


def draft_model(ctx: Context, target: AuditTarget) -> DraftModel | None:
    """The draft vLLM builds for ``target`` under its run options; None when the run names no
    draft the tool can know of (EAGLE without ``--draft-config``).

    The answer is a registered architecture only: an unregistered one is the ``mtp-draft`` or
    ``draft-registry`` gate's finding, and comes back here as ``unknown``."""
    if target.method == "mtp":
        from rules.mtp_draft.facts import draft_of, drafter_checkpoint

        drafter = drafter_checkpoint(target)  # an MTP drafter with a checkpoint of its own is what is rewritten
        if drafter is not None and drafter[0] is None:
            return DraftModel(None, unknown=drafter[4])
        arch, mt, tmt, hf = (drafter[:4] if drafter is not None else
                             (target.architecture, target.model_type, target.text_model_type, target.hf_config))
        found = draft_of(ctx, arch, mt, tmt, hf)
        if found is None:
            return DraftModel(None, unknown="the tree has no MTP config rewrite")
        path, fact, d = found
        if d.unknown or not d.architecture_known or len(d.architectures) != 1 or d.unchanged:
            return DraftModel(None, path=path, line=fact.line,
                              unknown=d.unknown or "the MTP draft architecture is not known (see mtp-draft)")
        arch = d.architectures[0]
        via = f"{fact.owner + '.' if fact.owner else ''}{fact.function} rewrites model_type {mt!r}"
        return _registered(ctx, arch, via, path, fact.line)
    if target.method in ("eagle", "eagle3") and target.options.draft_config is not None:
        from rules.draft_registry.facts import eagle_architectures

        found = eagle_architectures(ctx, target.method, target.options.draft_config)
        if found is None or found[2] is None:
            return DraftModel(None, unknown="the tree's EAGLE architecture rewrite is not known (see draft-registry)")
        path, line, archs = found
        if not archs:
            return DraftModel(None, path=path, line=line, unknown="the drafter config declares no architectures")
        return _registered(ctx, archs[0], f"EAGLE rewrite of the drafter config's {archs[0]!r}", path, line)
    return None


def resolved_draft(rule: Rule, ctx: Context, target: AuditTarget) -> DraftModel | None:
    """The draft ``target``'s run builds (:func:`draft_model`), its class resolved, for a rule that
    reads the drafter's own code. None when the target does not resolve, or when the draft is not known:
    then ``rule.not_evaluated`` says why (no ``--draft-config``, or the draft's ``unknown``)."""
    if target.facts.ref is None:
        return None
    draft = draft_model(ctx, target)
    if draft is None or draft.ref is None:
        rule.not_evaluated = ("needs --draft-config with the drafter checkpoint's config" if draft is None
                              else f"the draft is not known: {draft.unknown}")
        return None
    return draft


def _registered(ctx: Context, arch: str, via: str, path: str, line: int) -> DraftModel:
    if arch not in ctx.registry.entries:
        return DraftModel(None, path=path, line=line, unknown=f"{arch} is not in the model registry")
    t = ctx.registry.class_ref(arch)
    if not isinstance(t, ClassRef):
        return DraftModel(arch, None, via, path, line, unknown=f"the class of {arch} does not resolve")
    return DraftModel(arch, t, via, path, line)


def declared_drafter(target: AuditTarget) -> tuple[dict, str, list[str]]:
    """The drafter config of a run (``--draft-config``): ``(config, where it came from for
    messages, the architectures it declares)``; ``({}, "--draft-config", [])`` without one."""
    cfg = target.options.draft_config or {}
    where = target.options.draft_config_path or "--draft-config"
    return cfg, where, [a for a in cfg.get("architectures") or [] if isinstance(a, str)]

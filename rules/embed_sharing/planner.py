"""Fix planner of the ``embed-sharing`` gate: name the modules the target already holds the way the
proposer reads them (``.model``, then ``.embed_tokens``), following the path the model's own
embedding method takes (GPT-2: ``embed_input_ids`` → ``self.transformer.embed_input_ids`` →
``self.wte``)."""

from __future__ import annotations

from auditor.engines.modelfiles import is_multimodal, target_facts
from auditor.index.targets import ClassRef
from auditor.model.findings import Finding
from auditor.model.results import TargetResult
from rules.embed_sharing.rule import EmbedSharingData, attr_class, defined_name, embedding_path
from rules.planning import Invocation, Planner, code_holder, module_params

_HINT = ("give the target a .model that is its inner model, and the inner model an .embed_tokens that is "
         "its token embedding (read-only properties returning the modules it already holds)")


def _alias(p: Planner, arch: str, f: Finding, on: ClassRef, alias: str, target: list[str]) -> bool:
    """Plan ``@property alias`` → ``self.<target>`` on the code holder of ``on``; False when it cannot."""
    holder = code_holder(p, on)
    loc = p.r.location(holder)
    if loc is None:
        p.no(arch, f, f"{holder.name} is not defined in the tree")
        return False
    params = {"class": holder.qualname, "alias": alias, "target": ".".join(target)}
    params.update(module_params(holder, loc[0]))
    p.add(Invocation("embed-sharing", "embed-sharing", loc[0], params, [arch]))
    return True


def plan(p: Planner, result: TargetResult, f: Finding) -> None:
    """Plan the properties the proposer's chain lacks (``.model`` on the target, then
    ``.embed_tokens`` on its inner model), or record why not (a multimodal wrapper, an embedding
    path the model's methods do not show plainly)."""
    arch = result.architecture
    facts = target_facts(p.r, p.registry, arch)
    d: EmbedSharingData = f.data or EmbedSharingData()
    ref = facts.ref
    if ref is None:
        p.no(arch, f, f"cannot resolve the class of {arch}")
        return
    if is_multimodal(p.r, ref) or (d.language_model and d.language_model != ref.name):
        p.no(arch, f, f"{arch} is multimodal: the proposer reads its language model's classes, which this codemod "
                      "does not patch yet", "expose .model and .model.embed_tokens on the language model's classes")
        return
    path, why = embedding_path(p.ctx, ref)
    if path is None or len(path) < 2:
        p.no(arch, f, f"the path from {ref.name} to its token embedding is not plain ({why or 'one step'}), "
                      "so the codemod will not guess which module to expose", _HINT)
        return
    steps = [["model"], ["embed_tokens", "embedding"]]
    # step 1: .model on the target (what the proposer takes as the inner model)
    have, _ = defined_name(p.ctx, ref, steps[0])
    if have is None:
        if not _alias(p, arch, f, ref, "model", [path[0]]):
            return
    elif path[0] != "model":
        p.no(arch, f, f"{ref.name} has its own .model, but embeds tokens through .{path[0]}: the codemod will not "
                      "redirect .model", _HINT)
        return
    inner = attr_class(p.ctx, ref, path[0])
    if inner is None:
        p.no(arch, f, f"the class of {ref.name}.{path[0]} is not known statically", _HINT)
        return
    # step 2: .embed_tokens or .embedding on the inner model
    if defined_name(p.ctx, inner, steps[1])[0] is None:
        _alias(p, arch, f, inner, "embed_tokens", path[1:])

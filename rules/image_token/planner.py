"""Fix planner of the ``image-token`` gate: a proposer branch reading the attribute the target's HF
config class really defines."""

from __future__ import annotations

from auditor.engines.modelfiles import target_facts
from auditor.model.findings import Finding
from auditor.model.results import TargetResult
from rules.image_token.facts import image_token_chains
from rules.image_token.rule import ImageTokenData
from rules.planning import Invocation, Planner


def plan(p: Planner, result: TargetResult, f: Finding) -> None:
    arch = result.architecture
    chains = image_token_chains(p.ctx)
    facts = target_facts(p.r, p.registry, arch)
    d = f.data or ImageTokenData()
    cands = list(d.candidates)
    cfg = (d.config_class or "the target's HF config class").rsplit(".", 1)[-1]
    needed = d.attribute or "image_token_index"
    if not chains or facts.ref is None:
        p.no(arch, f, "the proposer's image-token handling was not found")
        return
    if "image_token_id" in cands:
        attr = "image_token_id"
    elif len(cands) == 1:
        attr = cands[0]
    else:
        what = (f"{cfg} defines several candidate attributes ({', '.join(cands)}), and the tool will not guess "
                "which one holds the image token id") if cands else (
                f"{cfg} defines no image/media token id attribute, and the tool will not guess one")
        p.no(arch, f, what,
                 f"add {needed} to {cfg} (or pass --hf-config with the checkpoint's config.json), or add a "
                 f"branch for {facts.ref.name} to the proposer reading the attribute that holds the image "
                 "token id")
        return
    path, chain = chains[0]
    p.add(Invocation("image-token", "image-token", path,
                         {"class_name": facts.ref.name, "attribute": attr, "function": chain.function}, [arch]))

"""SGLang's NextN/MTP draft mapping, read statically.

With ``--speculative-algorithm NEXTN`` (run by the EAGLE worker) the draft model is built from the
target's own checkpoint, and the model config rewrites the architecture when it is the draft's:
0.5.10.post1 and 0.5.23 ``sglang/srt/configs/model_config.py`` (``ModelConfig._config_draft_model``)
hold a chain of ``if is_draft_model and self.hf_config.architectures[0] in [...]`` (or ``== "..."``)
branches that assign ``self.hf_config.architectures[0] = "DeepseekV3ForCausalLMNextN"``. A target
that no branch names keeps its own architecture as the draft's (the whole target model, not a
NextN module). :data:`DRAFT_MAP_EXTRACTOR` finds those branches by what they do: an assignment of a
string literal to ``<x>.architectures[0]`` under an ``if`` that compares ``<x>.architectures[0]``
with literals.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from auditor.index.summary import Extractor

CONFIGS_DIR = "sglang/srt/configs/"


def _arch0(node: ast.AST) -> bool:
    """``<anything>.architectures[0]``."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "architectures" and isinstance(node.slice, ast.Constant)
            and node.slice.value == 0)


def _tested_names(test: ast.AST) -> list[str]:
    """The literal architectures an ``if`` test compares ``architectures[0]`` with (``==`` or
    ``in [...]``), in order."""
    out: list[str] = []
    for n in ast.walk(test):
        if isinstance(n, ast.Compare) and _arch0(n.left) and len(n.ops) == 1:
            right = n.comparators[0]
            if isinstance(n.ops[0], ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
                out.append(right.value)
            elif isinstance(n.ops[0], ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
                out += [e.value for e in right.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return out


def extract_draft_map(tree: ast.Module) -> list[dict] | None:
    """Every branch that rewrites ``architectures[0]`` for a draft: ``{"targets": [...],
    "drafts": [...], "line": N}`` (``line``: the ``if``), in source order; None when the module has
    none."""
    found: list[dict] = []

    def visit(stmts: list[ast.stmt], targets: list[str] | None, line: int | None) -> None:
        for st in stmts:
            if isinstance(st, ast.If):
                names = _tested_names(st.test)
                if names:
                    branch = {"targets": names, "drafts": [], "line": st.lineno}
                    found.append(branch)
                    collect(st.body, branch)
                    visit(st.orelse, targets, line)
                    continue
                visit(st.body, targets, line)
                visit(st.orelse, targets, line)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(st.body, None, None)
            else:
                for fld in ("body", "orelse", "finalbody"):
                    sub = getattr(st, fld, None)
                    if sub:
                        visit(sub, targets, line)

    def collect(stmts: list[ast.stmt], branch: dict) -> None:
        for st in stmts:
            for n in ast.walk(st):
                if isinstance(n, ast.Assign) and any(_arch0(t) for t in n.targets) \
                        and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str) \
                        and n.value.value not in branch["drafts"]:
                    branch["drafts"].append(n.value.value)

    visit(tree.body, None, None)
    found = [b for b in found if b["drafts"]]
    return found or None


#: Finds the draft-architecture rewrite branches in SGLang's config modules.
DRAFT_MAP_EXTRACTOR = Extractor("sglang-draft-map", extract_draft_map, prefixes=(CONFIGS_DIR,),
                                needles=(b"architectures[0]",))


@dataclass
class DraftMapping:
    """The draft architectures the tree's rewrite gives a target (``drafts``, in source order),
    where (``path``, ``line`` of the branch)."""

    target: str
    drafts: list[str]
    path: str
    line: int


def draft_mappings(facts, extractor: Extractor = DRAFT_MAP_EXTRACTOR) -> dict[str, DraftMapping]:
    """Target architecture → its :class:`DraftMapping`, from every config module of the tree
    (``facts``: the SGLang :class:`auditor.engines.sglang.facts.TreeFacts`); the first branch that
    names a target wins (the chain tests ``architectures[0]`` after each rewrite, so a later
    branch never sees a rewritten name's original)."""
    out: dict[str, DraftMapping] = {}
    tree = facts.tree
    for p in facts.candidate_paths(extractor):
        s = tree.summary(p)
        for b in s.extras.get(extractor.name, []) or []:
            for t in b["targets"]:
                out.setdefault(t, DraftMapping(t, list(b["drafts"]), p, b["line"]))
    return out

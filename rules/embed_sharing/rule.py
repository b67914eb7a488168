"""EA314 ``embed-sharing``: the proposer cannot find the target's embedding to share."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.engines.base import init_assign
from auditor.engines.modelfiles import (
    LANGUAGE_MODEL_ATTRS,
    HolderFacts,
    class_keyword,
    find_holder,
    is_multimodal,
)
from auditor.index.facts import MethodFact
from auditor.index.providers import ModuleAst
from auditor.hf.configs import TransformersFacts
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef, External
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions
from rules.base import AuditTarget, Context, Example, Rule
from rules.embed_sharing.facts import EXTRACTOR

_PROPOSER = '''"""A speculative proposer (synthetic)."""


class SpecDecodeBaseProposer:
    def load_model(self, target_model):
        self._maybe_share_embeddings(target_model)

    def _maybe_share_embeddings(self, target_language_model):
        if get_pp_group().world_size == 1:
            inner_model = getattr(target_language_model, "model", None)
            if inner_model is None:
                raise AttributeError("Target model does not have 'model' attribute")
            if hasattr(inner_model, "embed_tokens"):
                target_embed_tokens = inner_model.embed_tokens
            elif hasattr(inner_model, "embedding"):
                target_embed_tokens = inner_model.embedding
            else:
                raise AttributeError("Target model does not have 'embed_tokens' or 'embedding' attribute")
            self.embed = target_embed_tokens
'''

_GPT = '''"""A GPT-2-shaped model (synthetic): the inner model is self.transformer."""
import torch.nn as nn


class ToyGPTModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(10, 4)

    def embed_input_ids(self, input_ids):
        return self.wte(input_ids)


class ToyGPTForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = ToyGPTModel(config)

    def embed_input_ids(self, input_ids):
        return self.transformer.embed_input_ids(input_ids)
'''

_OPT = '''"""An OPT-shaped model (synthetic): the embedding is one level further down."""
import torch.nn as nn


class ToyOPTDecoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(10, 4)

    def embed_input_ids(self, input_ids):
        return self.embed_tokens(input_ids)


class ToyOPTModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.decoder = ToyOPTDecoder(config)

    def embed_input_ids(self, input_ids):
        return self.decoder.embed_input_ids(input_ids)


class ToyOPTForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = ToyOPTModel(config)

    def embed_input_ids(self, input_ids):
        return self.model.embed_input_ids(input_ids)
'''

_GPT_NAMED = _GPT.replace('''        self.wte = nn.Embedding(10, 4)
''', '''        self.wte = nn.Embedding(10, 4)

    @property
    def embed_tokens(self):
        return self.wte
''').replace('''        self.transformer = ToyGPTModel(config)
''', '''        self.transformer = ToyGPTModel(config)

    @property
    def model(self):
        """The inner model."""
        return self.transformer
''')

_PROPOSER_PATH = "vllm/v1/spec_decode/eagle.py"


def _tree(model_file: str | None = None, name: str = "toygpt") -> dict[str, str]:
    files = {_PROPOSER_PATH: _PROPOSER}
    if model_file:
        files[f"vllm/model_executor/models/{name}.py"] = model_file
    return files


@cacheable
@dataclass
class EmbedSharingData:
    """EA314 details: the ``language_model`` class the proposer reads, the attribute ``missing``
    (the alternatives of the step that fails), the ``chain`` walked before it, and the proposer
    ``function`` that raises."""

    language_model: str | None = None
    missing: list[str] = field(default_factory=list)
    chain: list[str] = field(default_factory=list)
    function: str | None = None


def defined_name(ctx: Context, ref: ClassRef, names: list[str], resolver: Resolver | None = None
                 ) -> tuple[str | None, bool]:
    """``(name, complete)``: the first of ``names`` that ``ref``'s MRO defines (an ``__init__``
    assignment ``self.<name> = ...``, a class attribute or a method/property), or None; ``complete``
    is False when part of the MRO could not be resolved (then a miss decides nothing).
    ``resolver``: the tree ``ref`` is in (default: the scanned tree's; transformers' for a model
    that ``AutoModel.from_config`` builds)."""
    resolver = resolver or ctx.resolver
    mro = resolver.mro(ref)
    for entry in mro.entries:
        if not isinstance(entry, ClassRef):
            continue
        c = resolver.cls(entry)
        if c is None:
            continue
        init = c.methods.get("__init__")
        for name in names:
            if (init and name in init.self_assigns) or name in c.attrs or name in c.methods:
                return name, True
    complete = mro.error is None and not mro.unresolved
    return None, complete


def _property_path(ctx: Context, ref: ClassRef, attr: str) -> list[str] | None:
    """``["transformer"]`` when ``attr`` is a ``@property`` on ``ref``'s MRO whose body is one
    ``return self.transformer`` (a second name for a module the class holds, as the embed-sharing
    codemod writes it); None otherwise."""
    hit = ctx.resolver.lookup(ref, attr)
    if hit is None or not isinstance(hit[1], MethodFact) or "property" not in hit[1].decorators:
        return None
    loc = ctx.resolver.location(hit[0])
    node = ctx.function_node(loc[0], attr, hit[1].line) if loc is not None else None
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] if node else []
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    return _self_chain(body[0].value)


def attr_class(ctx: Context, ref: ClassRef, attr: str, depth: int = 0) -> ClassRef | None:
    """The class ``self.<attr>`` is built from in ``ref``'s ``__init__`` (a direct constructor
    call, or what :func:`find_holder` follows for the inner model), through a property that
    returns ``self.<path>`` (:func:`_property_path`), or None."""
    found = init_assign(ctx.resolver, ref, (attr,))
    if found is None and depth < 4:
        path = _property_path(ctx, ref, attr)
        cur: ClassRef | None = ref if path else None
        for part in path or []:
            cur = attr_class(ctx, cur, part, depth + 1) if cur is not None else None
        return cur
    if found is None or found[2] is None:
        return None
    owner, _, (callee, _kwargs, _line), _ = found
    if not callee.startswith("self."):
        t = ctx.resolver.resolve_dotted(owner.module, callee)
        return t if isinstance(t, ClassRef) else None
    h = find_holder(ctx.resolver, ctx.registry, ref)
    if h.ref is not None and h.via.startswith(f"self.{attr} = {callee}(") and " → " not in h.via:
        return h.ref
    return None


#: The model methods that embed token ids (``VllmModel.embed_input_ids`` in
#: ``vllm/model_executor/models/interfaces_base.py``; ``get_input_embeddings`` before it was renamed).
EMBED_METHODS = ("embed_input_ids", "get_input_embeddings")


def _self_chain(node: ast.AST) -> list[str] | None:
    """``["a", "b"]`` for the expression ``self.a.b``; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "self" and parts:
        return parts[::-1]
    return None


def embedding_path(ctx: Context, ref: ClassRef, depth: int = 0) -> tuple[list[str] | None, str]:
    """The attribute path from an instance of ``ref`` to its token embedding module, as the class's
    own embedding method reaches it: ``(["transformer", "wte"], "")`` for GPT-2, or ``(None, why)``.

    The method (one of :data:`EMBED_METHODS`, looked up on the MRO) must be a single
    ``return self.<path>(input_ids)`` (the module) or ``return self.<attr>.<embed method>(...)``
    (a delegation, followed into the class ``self.<attr>`` is built from, at most 4 deep)."""
    if depth > 4:
        return None, "the embedding methods delegate too deep"
    for name in EMBED_METHODS:
        hit = ctx.resolver.lookup(ref, name)
        if hit is None or not isinstance(hit[1], MethodFact):
            continue
        owner, mf = hit
        loc = ctx.resolver.location(owner)
        node = ctx.function_node(loc[0], name, mf.line) if loc is not None else None
        if node is None:
            return None, f"{owner.name}.{name} could not be read"
        returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
        if len(returns) != 1 or not isinstance(returns[0].value, ast.Call):
            return None, f"{owner.name}.{name} is not a single `return self.<module>(input_ids)`"
        chain = _self_chain(returns[0].value.func)
        if chain is None:
            return None, f"{owner.name}.{name} does not return a call on self"
        if chain[-1] in EMBED_METHODS:
            if len(chain) != 2:
                return None, f"{owner.name}.{name} delegates through {'.'.join(chain[:-1])}"
            inner = attr_class(ctx, ref, chain[0])
            if inner is None:
                return None, f"the class of {ref.name}.{chain[0]} is not known statically"
            rest, why = embedding_path(ctx, inner, depth + 1)
            return ([chain[0], *rest] if rest is not None else None), why
        built = defined_name(ctx, ref, [chain[0]])[0]
        if built is None:
            return None, f"{ref.name} does not define .{chain[0]}, which {owner.name}.{name} calls"
        return chain, ""
    return None, f"{ref.name} has no {' or '.join(EMBED_METHODS)} method to follow"


def _language_model(ctx: Context, ref: ClassRef) -> ClassRef | None:
    """The class a wrapper builds its language model from (``get_language_model()``'s object):
    ``self.language_model = X(...)``, or a factory handed the class
    (``initialize_model(..., model_class=Llama4ForCausalLM)``)."""
    found = init_assign(ctx.resolver, ref, LANGUAGE_MODEL_ATTRS)
    if found is None or found[2] is None:
        return None
    owner, _, (callee, kwargs, _line), _ = found
    if not callee.startswith("self."):
        t = ctx.resolver.resolve_dotted(owner.module, callee)
        if isinstance(t, ClassRef):
            return t
    hit = class_keyword(ctx.resolver, owner.module, kwargs)
    return hit[1] if hit is not None else None


class EmbedSharingRule(Rule):
    """The proposer's sharing of the target's embedding with the drafter.

    What it does: finds, in the tree's proposer, the function that raises unless the target
    language model has a chain of attributes (:mod:`rules.embed_sharing.facts`: ``.model``, then
    ``.embed_tokens`` or ``.embedding``), takes the class the proposer hands it (the wrapper's
    language model for a multimodal target), and looks each step up: an ``__init__`` assignment,
    a class attribute or a method on the MRO, then the class the attribute is built from.
    """

    CODE = "EA314"
    FACTS = (HolderFacts, ModuleAst, TransformersFacts)
    GATE = "embed-sharing"
    NAME = "target-embedding-not-found"
    SUMMARY = ("the proposer cannot find the target's embedding to share with the drafter (`.model` then "
               "`.embed_tokens` or `.embedding`)")
    WHY = (
        "When the drafter loads (load_model), vLLM's EAGLE/MTP proposer shares the target's input embedding "
        "with it (_maybe_share_embeddings, vllm/v1/spec_decode/eagle.py, llm_base_proposer.py from 0.20). With "
        "one pipeline stage it reads target_language_model.model and then its .embed_tokens or .embedding, and "
        "raises AttributeError when either is missing, whatever the drafter checkpoint holds. GPT-2, Falcon and "
        "BLOOM keep their inner model at .transformer; OPT keeps its embedding at .model.decoder.embed_tokens."
    )
    HOW_TO_FIX = (
        "Expose the inner model as .model and its token embedding as .embed_tokens on the target's classes: "
        "read-only properties that return the modules the classes already hold (self.transformer, self.wte), "
        "found by following the model's own embed_input_ids. The codemod writes them for a text model whose "
        "embedding path is plain; a multimodal wrapper's language model is patched by hand."
    )
    FIX_AVAILABLE = True
    METHODS = ("eagle", "eagle3", "mtp")
    DATA = EmbedSharingData
    VALID = [
        Example(_tree(), "LlamaForCausalLM", note="the Llama layout: .model.embed_tokens"),
        Example(_tree(_GPT), "ToyGPTForCausalLM", options=RunOptions(pipeline_parallel_size=2),
                rows=[("ToyGPTForCausalLM", "toygpt", "ToyGPTForCausalLM", "_TEXT_GENERATION_MODELS")],
                note="two pipeline stages: the proposer loads the drafter's own embedding"),
        Example(_tree(_GPT_NAMED), "ToyGPTForCausalLM",
                rows=[("ToyGPTForCausalLM", "toygpt", "ToyGPTForCausalLM", "_TEXT_GENERATION_MODELS")],
                note="the modules named as the proposer reads them: properties that return them (the codemod's shape)"),
    ]
    INVALID = [
        Example(_tree(_GPT), "ToyGPTForCausalLM", expect_severity=Severity.ERROR,
                rows=[("ToyGPTForCausalLM", "toygpt", "ToyGPTForCausalLM", "_TEXT_GENERATION_MODELS")],
                note="the inner model is .transformer: no .model"),
        Example(_tree(_OPT, "toyopt"), "ToyOPTForCausalLM", expect_severity=Severity.ERROR,
                rows=[("ToyOPTForCausalLM", "toyopt", "ToyOPTForCausalLM", "_TEXT_GENERATION_MODELS")],
                note=".model has no embedding of its own (it is .model.decoder.embed_tokens)"),
    ]

    def applies(self, target: AuditTarget) -> bool:
        return target.method in self.METHODS and target.facts.ref is not None

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        chains = ctx.facts.found(EXTRACTOR)
        for path, fact in chains:
            if fact.single_stage and target.options.pipeline_parallel_size > 1:
                continue
            yield from self._check_chain(ctx, target, path, fact)
            return

    def _built_outside(self, ctx: Context, target: AuditTarget, lm: ClassRef, cur: ClassRef, walked: list[str],
                       fact, path: str, i: int) -> Iterator[Finding]:
        """The step ``walked[-1]`` of the chain is a module built outside the tree. vLLM's
        Transformers backend builds it with ``AutoModel.from_config`` (``self.model``, in
        ``vllm/model_executor/models/transformers/base.py``): then the class transformers maps the
        target's model_type to decides the next step (GPT-BigCode's ``GPTBigCodeModel`` holds
        ``.wte``, no ``.embed_tokens``). Anything else, or no transformers at hand: unknown."""
        hit = walked[-1]
        names = fact.steps[i + 1]
        shown = " or ".join(f".{n}" for n in names)
        on = ".".join([lm.name] + walked)
        where = f"{path}:{fact.raise_lines[i + 1]}"
        built = init_assign(ctx.resolver, cur, (hit,))
        how = f"self.{hit} = {built[3][:80]}" if built is not None and built[3] else f".{hit}"
        hf, why = self._transformers_model(ctx, target, built, cur)
        if hf is not None and i + 2 == len(fact.steps):
            cls, tres = hf
            found, complete = defined_name(ctx, cls, names, resolver=tres)
            if found is not None:
                return
            if complete:
                loc = tres.location(cls)
                msg = f": {fact.messages[i + 1]!r}" if fact.messages[i + 1] else ""
                yield self.finding(Severity.ERROR, f"{on} is built by transformers ({how}) as {cls.name} "
                                   f"({loc[0]}:{loc[1]}, for model_type {target.model_type!r}), which has no {shown}: "
                                   f"the proposer's {fact.function} ({where}) raises AttributeError{msg} when the "
                                   "drafter loads", path, fact.raise_lines[i + 1], fix=False,
                                   language_model=lm.name, missing=names, chain=walked, function=fact.function)
                return
            why = f"{cls.name}'s MRO is not fully resolved in transformers"
        yield self.finding(Severity.UNKNOWN, f"{on} is built outside the tree ({how}): whether it has {shown}, as "
                           f"the proposer's {fact.function} ({where}) needs, depends on that code ({why}); pass "
                           "--hf-config with the checkpoint's config.json (its model_type names the class) or "
                           "--transformers, or run eagle-audit verify", path, fact.raise_lines[i + 1],
                           language_model=lm.name, missing=names, chain=walked, function=fact.function)

    @staticmethod
    def _transformers_model(ctx: Context, target: AuditTarget, built, cur: ClassRef) -> tuple[tuple | None, str]:
        """``((class, transformers' resolver), "")`` when ``built`` (an :func:`init_assign` answer
        on ``cur``) is ``AutoModel.from_config(...)``, directly or through a method of ``cur``'s
        MRO whose one ``return`` is that call (vLLM 0.33.0's ``self.model = self._create_model()``),
        and the transformers at hand maps the target's model_type to a base model class; else
        ``(None, why not)``."""
        if built is None or built[2] is None:
            return None, "no constructor call the tool can follow"
        owner, _, (callee, _kwargs, _line), _ = built
        module = owner.module
        if callee.startswith("self.") and callee.count(".") == 1:
            hit = ctx.resolver.lookup(cur, callee[5:])
            loc = ctx.resolver.location(hit[0]) if hit is not None and isinstance(hit[1], MethodFact) else None
            node = ctx.function_node(loc[0], callee[5:], hit[1].line) if loc is not None else None
            returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)] if node is not None else []
            if len(returns) != 1 or not isinstance(returns[0].value, ast.Call):
                return None, f"{callee} is not a method with one `return <call>` the tool can follow"
            inner = returns[0].value.func
            callee = ast.unparse(inner) if isinstance(inner, (ast.Name, ast.Attribute)) else "?"
            module = hit[0].module
        t = ctx.resolver.resolve_dotted(module, callee)
        if not (isinstance(t, External) and t.name.startswith("transformers.")
                and t.name.rsplit(".", 2)[-2:] in (["AutoModel", "from_config"],)):
            return None, f"{callee} is not transformers' AutoModel.from_config"
        at = ctx.get(TransformersFacts)
        if at.configs is None:
            return None, f"no transformers source at hand{' (' + at.note + ')' if at.note else ''}"
        cls = at.configs.base_model_class(target.model_type) if target.model_type else None
        if cls is None:
            return None, (f"transformers {at.configs.version or ''} maps no base model class to model_type "
                          f"{target.model_type!r} ({target.model_type_source})")
        return (cls, at.configs.resolver), ""

    def _check_chain(self, ctx: Context, target: AuditTarget, path: str, fact) -> Iterator[Finding]:
        ref = target.facts.ref
        if is_multimodal(ctx.resolver, ref):
            h = ctx.get(HolderFacts, ref)[0]  # the holder as aux-capture follows it
            lm = h.language_ref or _language_model(ctx, ref)
            if lm is None:
                yield self.finding(Severity.UNKNOWN, f"{target.architecture} is multimodal: the proposer shares the "
                                   f"embedding of its language model, which the tool cannot resolve "
                                   f"({h.unknown or h.via}); pass --hf-config with the checkpoint's config.json, or "
                                   "run eagle-audit verify", path, fact.raise_lines[0], function=fact.function)
                return
        else:
            lm = ref
        cur: ClassRef | None = lm
        walked: list[str] = []
        for i, names in enumerate(fact.steps):
            assert cur is not None
            hit, complete = defined_name(ctx, cur, names)
            where = f"{path}:{fact.raise_lines[i]}"
            if hit is None:
                shown = " or ".join(f".{n}" for n in names)
                on = ".".join([lm.name] + walked)
                if not complete:
                    yield self.finding(Severity.UNKNOWN, f"the proposer's {fact.function} ({where}) needs {on}{shown}; "
                                       f"{cur.name}'s MRO is not fully resolved (pass --hf-config, or run eagle-audit verify)", path, fact.raise_lines[i],
                                       language_model=lm.name, missing=names, chain=walked, function=fact.function)
                    return
                stage = " with one pipeline stage" if fact.single_stage else ""
                msg = f": {fact.messages[i]!r}" if fact.messages[i] else ""
                yield self.finding(Severity.ERROR, f"{on} has no {shown}: the proposer's {fact.function} ({where}) "
                                   f"raises AttributeError{msg} when the drafter loads{stage}",
                                   path, fact.raise_lines[i], fix=lm == ref and embedding_path(ctx, ref)[0] is not None,  # what the codemod patches
                                   language_model=lm.name, missing=names, chain=walked, function=fact.function)
                return
            walked.append(hit)
            if i + 1 < len(fact.steps):
                nxt = attr_class(ctx, cur, hit)
                if nxt is None:
                    yield from self._built_outside(ctx, target, lm, cur, walked, fact, path, i)
                    return
                cur = nxt

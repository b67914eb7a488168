"""Codemod for EA314 ``embed-sharing``: give a class the attribute name the speculative proposer
reads (``.model``, ``.embed_tokens``) as a read-only property that returns the module the class
already holds under another name (GPT-2's ``self.transformer``, ``self.wte``)."""

from __future__ import annotations

from textwrap import dedent

import libcst as cst

from rules.cst import (
    CodemodExample,
    EagleCodemod,
    NotAutoFixable,
    append_to_class,
    class_methods,
    find_class,
    identifier,
    parse_member,
    replace,
)

#: The property, as written into the class body. ``{alias}``: the name the proposer reads;
#: ``{target}``: the dotted attribute path from ``self`` to the module it must return.
TEMPLATE = (
    "@property\n"
    "def {alias}(self):\n"
    '    """{what}, under the name the speculative proposer reads (``.{alias}``)."""\n'
    "    return self.{target}\n"
)

_WHAT = {"model": "The inner model", "embed_tokens": "The token embedding", "embedding": "The token embedding"}


def _assigns_self(cls: cst.ClassDef, name: str) -> bool:
    """True when the class body binds ``name`` (a class attribute) or a method assigns ``self.<name>``."""
    for stmt in cls.body.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                targets = [t.target for t in s.targets] if isinstance(s, cst.Assign) else (
                    [s.target] if isinstance(s, cst.AnnAssign) else [])
                if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                    return True
    found = False

    class _V(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            nonlocal found
            t = node.target
            if (isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"
                    and t.attr.value == name):
                found = True

    cls.body.visit(_V())
    return found


class EmbedAliasCodemod(EagleCodemod):
    """Add ``@property <alias>`` returning ``self.<target>`` to one class.

    Parameters: ``class`` (qualname of the class in this module: the nearest non-empty class of
    the MRO), ``alias`` (``model``, ``embed_tokens`` or ``embedding``: what the proposer's
    ``_maybe_share_embeddings`` reads), ``target`` (the dotted attribute path, each part an
    identifier, of the module the class holds: ``transformer``, ``wte``, ``decoder.embed_tokens``),
    ``module`` / ``is_package`` (unused here; kept for every codemod's shape).
    Idempotent: a class that already defines ``alias`` is left as it is. Raises
    :class:`~rules.cst.NotAutoFixable` when the class is missing or assigns ``self.<alias>``
    itself (a property would break that assignment).
    """

    NAME = "embed-sharing"
    GATE = "embed-sharing"
    DESCRIPTION = (
        "Expose the inner model as .model and its token embedding as .embed_tokens (read-only properties "
        "that return the modules the classes already hold), so the proposer can share the embedding."
    )
    EXAMPLES = [
        CodemodExample(
            {"class": "ToyGPTForCausalLM", "alias": "model", "target": "transformer"},
            before=dedent('''\
                class ToyGPTForCausalLM(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.transformer = ToyGPTModel(config)
            '''),
            after=dedent('''\
                class ToyGPTForCausalLM(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.transformer = ToyGPTModel(config)

                    @property
                    def model(self):
                        """The inner model, under the name the speculative proposer reads (``.model``)."""
                        return self.transformer
            '''),
            note="the inner model keeps its name; .model is a second name for the same module",
        ),
        CodemodExample(
            {"class": "ToyOPTModel", "alias": "embed_tokens", "target": "decoder.embed_tokens"},
            before=dedent('''\
                class ToyOPTModel(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.decoder = ToyOPTDecoder(config)
            '''),
            after=dedent('''\
                class ToyOPTModel(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.decoder = ToyOPTDecoder(config)

                    @property
                    def embed_tokens(self):
                        """The token embedding, under the name the speculative proposer reads (``.embed_tokens``)."""
                        return self.decoder.embed_tokens
            '''),
            note="an embedding one level down is reached through the path the model's own embed method uses",
        ),
    ]

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        qualname = identifier(self.params["class"], "the class")
        alias = self.params["alias"]
        if alias not in _WHAT:
            raise NotAutoFixable(f"alias {alias!r} is not one the proposer reads", "")
        target = str(self.params["target"])
        for part in target.split("."):
            identifier(part, "the attribute path")
        cls, _depth = find_class(tree, qualname)
        if cls is None:
            raise NotAutoFixable(f"class {qualname} not found in this module", f"add .{alias} to {qualname}")
        if alias in class_methods(cls):
            return tree
        if _assigns_self(cls, alias):
            raise NotAutoFixable(f"{qualname} binds {alias} itself, so a property of that name would break it",
                                 f"make {qualname}.{alias} the module the proposer expects")
        member = parse_member(TEMPLATE.format(alias=alias, target=target, what=_WHAT[alias]), tree)
        tree = replace(tree, cls, append_to_class(cls, [member]))
        self.changes.append(f"added the property {qualname}.{alias} returning self.{target}")
        return tree

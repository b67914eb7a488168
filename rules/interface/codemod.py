"""Codemod for EA302 ``interface``: make a class satisfy the tree's ``SupportsEagle3`` protocol
(declare it as a base, import it, and write the members that the tree's protocol leaves as stubs)."""

from __future__ import annotations

from textwrap import dedent

import libcst as cst

from rules.cst import (
    CodemodExample,
    EagleCodemod,
    NotAutoFixable,
    add_base,
    append_to_class,
    class_methods,
    ensure_import,
    find_class,
    has_base,
    identifier,
    parse_member,
    replace,
)

#: Member templates by kind. ``{name}``: the member name as the tree's protocol spells it;
#: ``{attr}``: the attribute holding the inner model (``model``) or, for a multimodal wrapper,
#: the language model (``language_model``); ``{layers}``: the inner model's attribute that holds
#: its decoder layers (``layers``; GPT-2's ``h``).
TEMPLATES = {
    # the inner model's forward reads self.aux_hidden_state_layers
    "set-inner": (
        "def {name}(self, layers: tuple[int, ...]) -> None:\n"
        "    self.{attr}.aux_hidden_state_layers = layers\n"
    ),
    # the layer-default getter: (2, n // 2, n - 3), as vLLM's Llama and the 0.18 protocol default
    "get-default": (
        "def {name}(self) -> tuple[int, ...]:\n"
        "    num_layers = len(self.{attr}.{layers})\n"
        "    return (2, num_layers // 2, num_layers - 3)\n"
    ),
    # multimodal wrappers delegate to their language model
    "delegate-set": (
        "def {name}(self, layers: tuple[int, ...]) -> None:\n"
        "    self.{attr}.{name}(layers)\n"
    ),
    "delegate-get": (
        "def {name}(self) -> tuple[int, ...]:\n"
        "    return self.{attr}.{name}()\n"
    ),
}


def member_source(kind: str, name: str, attr: str, layers: str = "layers") -> str:
    """The source of one member (4-space indentation, no class indentation)."""
    return TEMPLATES[kind].format(name=name, attr=attr, layers=layers)


class InterfaceCodemod(EagleCodemod):
    """Declare the speculative-decoding protocol on the class that holds the code.

    Parameters: ``class`` (qualname of the class in this module: the nearest non-empty class of
    the target's MRO, never an empty subclass), ``protocol`` (``SupportsEagle3``; None where the
    tree has no protocol and the runner calls the methods by duck typing), ``protocol_module``
    (where the protocol is defined), ``module`` / ``is_package`` (this file's dotted module, to
    match relative imports), ``members``: ``[{"name", "kind", "attr"}]`` with kind one of
    ``set-inner``, ``get-default``, ``delegate-set``, ``delegate-get`` (see :data:`TEMPLATES`)
    and optional ``layers`` (the inner model's layer list attribute, default ``layers``).
    Idempotent: a base already declared or a member already defined in the class body is left
    as it is.
    """

    NAME = "interface"
    GATE = "interface"
    DESCRIPTION = (
        "Add the SupportsEagle3 protocol to the bases of the class that holds the code, with its "
        "import and the members the tree's protocol requires."
    )
    EXAMPLES = [
        CodemodExample(
            {'class': 'V2', 'protocol': 'SupportsEagle3', 'protocol_module': 'vllm.model_executor.models.interfaces', 'module': 'vllm.model_executor.models.toy', 'members': [{'name': 'set_aux_hidden_state_layers', 'kind': 'set-inner', 'attr': 'model'}, {'name': 'get_eagle3_aux_hidden_state_layers', 'kind': 'get-default', 'attr': 'model'}]},
            before=dedent('''\
                from .interfaces import SupportsPP


                class V2(nn.Module, SupportsPP):
                    def __init__(self):
                        self.model = M()  # inner


                class V3(V2):
                    pass
            '''),
            after=dedent('''\
                from .interfaces import SupportsEagle3, SupportsPP


                class V2(nn.Module, SupportsPP, SupportsEagle3):
                    def __init__(self):
                        self.model = M()  # inner

                    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
                        self.model.aux_hidden_state_layers = layers

                    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
                        num_layers = len(self.model.layers)
                        return (2, num_layers // 2, num_layers - 3)


                class V3(V2):
                    pass
            '''),
            note='the protocol and its members go on the class that holds the code; the empty subclass is untouched',
        ),
    ]

    @classmethod
    def merge_params(cls, params: dict, other: dict) -> None:
        """Two targets with the same code holder: the members either lacks, each once."""
        names = {m["name"] for m in params["members"]}
        params["members"] += [m for m in other["members"] if m["name"] not in names]

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        qualname = identifier(self.params["class"], "the class")
        protocol = self.params.get("protocol")
        if protocol is not None:
            identifier(protocol, "the protocol")
            identifier(self.params["protocol_module"], "the protocol's module")
        members = self.params.get("members") or []
        for m in members:
            for k in ("name", "attr", "layers"):
                if k in m:
                    identifier(m[k], f"the member's {k}")
        cls, depth = find_class(tree, qualname)
        if cls is None:
            raise NotAutoFixable(f"class {qualname} not found in this module",
                                 f"declare {protocol or 'the EAGLE-3 methods'} on {qualname}")
        new_cls = cls
        if protocol and not has_base(cls, protocol):
            new_cls = add_base(tree, new_cls, protocol, depth)
            self.changes.append(f"added {protocol} to the bases of {qualname}")
        existing = class_methods(cls)
        added = []
        stmts = []
        for m in members:
            if m["name"] in existing:
                continue
            stmts.append(parse_member(member_source(m["kind"], m["name"], m["attr"], m.get("layers", "layers")), tree))
            added.append(m["name"])
        if stmts:
            new_cls = append_to_class(new_cls, stmts)
            self.changes.append(f"implemented {', '.join(added)} on {qualname}")
        if new_cls is cls:
            return tree
        tree = replace(tree, cls, new_cls)
        if protocol and self.changes and self.changes[0].startswith(f"added {protocol}"):
            tree, imported = ensure_import(
                tree, self.params["protocol_module"], protocol, self.params.get("module", ""),
                bool(self.params.get("is_package", False)),
            )
            if imported:
                self.changes.append(f"imported {protocol} from {self.params['protocol_module']}")
        return tree

"""Codemod for EA403 ``aux-capture`` on SGLang trees: the inner model's ``forward`` collects the
hidden state entering each layer listed in ``self.layers_to_capture`` and returns
``(hidden_states, aux_hidden_states)`` when it captured any, as the tree's capable models do."""

from __future__ import annotations

import ast
from textwrap import dedent

import libcst as cst

from auditor.engines.catalog import engine_for
from rules.aux_capture.codemod import AuxCaptureCodemod, fresh_name, path_to
from rules.aux_capture.stream import layer_call_names
from rules.cst import CodemodExample, NotAutoFixable, identifier, names_used, nodes_at

#: SGLang's vocabulary (the class of its tree facts: the capture attribute, the capture extractor),
#: through the catalog: a rule names no engine package
_SGLANG = engine_for("sglang").make_facts
CAPTURE_ATTR = _SGLANG.capture_attr


class _Rewrite(cst.CSTTransformer):
    """Replaces statements (by identity): the layer loops, the top statement that gets the list
    initialised before it, and the final returns."""

    def __init__(self, swap: dict[int, list], before: tuple[int, cst.BaseStatement] | None):
        self.swap = swap
        self.before = before

    def on_leave(self, original_node, updated_node):
        if id(original_node) in self.swap:
            return cst.FlattenSentinel(self.swap[id(original_node)])
        if self.before is not None and id(original_node) == self.before[0]:
            init = self.before[1].with_changes(leading_lines=updated_node.leading_lines)
            return cst.FlattenSentinel([init, updated_node.with_changes(leading_lines=[])])
        return updated_node


class SGLangAuxCaptureCodemod(AuxCaptureCodemod):
    """Capture auxiliary hidden states in an SGLang inner model's ``forward``.

    Parameters: ``class`` (qualname of the class that defines the inner model's ``forward``),
    ``capture_attr`` (the attribute the setters fill, ``layers_to_capture``), ``module`` /
    ``is_package`` (this file's dotted module).

    Every loop over the decoder layers in ``forward`` (as the SGLang index finds them: a branch
    per platform gives two) gets the absolute layer index (``range(start, end)`` as it is,
    ``enumerate(...)`` otherwise, started at the slice's start) and, first in its body,
    ``if i in self.layers_to_capture: aux_hidden_states.append(...)`` with the state entering the
    layer (``hidden_states + residual``, guarded for a ``None`` residual, or ``hidden_states`` where
    the layer returns the full state); ``aux_hidden_states = []`` goes before the statement holding
    the first loop, ``self.layers_to_capture = []`` into ``__init__``, and each final ``return X``
    after the loops becomes ``return X, aux_hidden_states`` when something was captured (returns
    of ``PPProxyTensors`` on non-last pipeline ranks are left alone). Refuses loops of another
    shape, forwards where some loops capture and others do not, and layer loops the state
    variable of which cannot be told. Idempotent.
    """

    NAME = "sglang-aux-capture"
    GATE = "aux-capture"
    DESCRIPTION = ("Make the SGLang inner model's forward append the hidden state entering each layer in "
                   "layers_to_capture and return (hidden_states, aux_hidden_states), as the tree's donor models do.")
    LAYERS_ATTR = CAPTURE_ATTR
    LAYERS_INIT = " = []"
    EXAMPLES = [
        CodemodExample(
            {"class": "ToyTextModel", "capture_attr": "layers_to_capture"},
            before=dedent('''\
                class ToyTextModel(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.layers = make_layers(config.num_hidden_layers, ToyLayer)
                        self.norm = RMSNorm(config.hidden_size)

                    def forward(self, input_ids, positions, forward_batch, input_embeds=None):
                        hidden_states = self.embed_tokens(input_ids)
                        if _is_cpu:
                            for layer in self.layers:
                                layer_outputs = layer(positions=positions, hidden_states=hidden_states)
                                hidden_states = layer_outputs[0]
                        else:
                            for layer in self.layers:
                                layer_outputs = layer(positions=positions, hidden_states=hidden_states)
                                hidden_states = layer_outputs[0]

                        hidden_states = self.norm(hidden_states)

                        return hidden_states
            '''),
            after=dedent('''\
                class ToyTextModel(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.layers = make_layers(config.num_hidden_layers, ToyLayer)
                        self.layers_to_capture = []
                        self.norm = RMSNorm(config.hidden_size)

                    def forward(self, input_ids, positions, forward_batch, input_embeds=None):
                        hidden_states = self.embed_tokens(input_ids)
                        aux_hidden_states = []
                        if _is_cpu:
                            for idx, layer in enumerate(self.layers):
                                if idx in self.layers_to_capture:
                                    aux_hidden_states.append(hidden_states)
                                layer_outputs = layer(positions=positions, hidden_states=hidden_states)
                                hidden_states = layer_outputs[0]
                        else:
                            for idx, layer in enumerate(self.layers):
                                if idx in self.layers_to_capture:
                                    aux_hidden_states.append(hidden_states)
                                layer_outputs = layer(positions=positions, hidden_states=hidden_states)
                                hidden_states = layer_outputs[0]

                        hidden_states = self.norm(hidden_states)

                        if len(aux_hidden_states) > 0:
                            return hidden_states, aux_hidden_states
                        return hidden_states
            '''),
            note="two layer loops (one per platform branch), layers that return the full state",
        ),
        CodemodExample(
            {"class": "ToyModel", "capture_attr": "layers_to_capture"},
            before=dedent('''\
                class ToyModel(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.layers, self.start_layer, self.end_layer = make_layers(config.num_hidden_layers)

                    def forward(self, input_ids, positions, forward_batch, pp_proxy_tensors=None):
                        hidden_states, residual = self.embed_tokens(input_ids), None
                        for i in range(self.start_layer, self.end_layer):
                            layer = self.layers[i]
                            hidden_states, residual = layer(positions, hidden_states, forward_batch, residual)
                        if not self.pp_group.is_last_rank:
                            return PPProxyTensors({"hidden_states": hidden_states, "residual": residual})
                        hidden_states, _ = self.norm(hidden_states, residual)
                        return hidden_states
            '''),
            after=dedent('''\
                class ToyModel(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.layers, self.start_layer, self.end_layer = make_layers(config.num_hidden_layers)
                        self.layers_to_capture = []

                    def forward(self, input_ids, positions, forward_batch, pp_proxy_tensors=None):
                        hidden_states, residual = self.embed_tokens(input_ids), None
                        aux_hidden_states = []
                        for i in range(self.start_layer, self.end_layer):
                            if i in self.layers_to_capture:
                                aux_hidden_states.append(
                                    hidden_states if residual is None else hidden_states + residual
                                )
                            layer = self.layers[i]
                            hidden_states, residual = layer(positions, hidden_states, forward_batch, residual)
                        if not self.pp_group.is_last_rank:
                            return PPProxyTensors({"hidden_states": hidden_states, "residual": residual})
                        hidden_states, _ = self.norm(hidden_states, residual)
                        if len(aux_hidden_states) > 0:
                            return hidden_states, aux_hidden_states
                        return hidden_states
            '''),
            note="a range loop keeps its absolute index; the pipeline proxy return is left alone",
        ),
    ]

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.LAYERS_ATTR = identifier(self.params.get("capture_attr", CAPTURE_ATTR), "the capture attribute")
        self.params = {**self.params, "mode": "list"}
        return super().transform_module_impl(tree)

    def _state_names(self, loop: cst.For) -> tuple[str, str | None] | None:
        """As the vLLM loops (``hidden_states, residual = layer(...)`` at the top of the loop
        body), else the first assignment in the loop body (under ``with`` or ``if`` too) whose
        targets are names, one with ``hidden``: ``hidden_states, residual = layer(...)`` inside a
        ``with`` block, or ``hidden_states = layer_outputs[0]`` (a layer that returns the full
        state: no residual)."""
        got = layer_call_names(loop)
        if got is not None or not isinstance(loop.body, cst.IndentedBlock):
            return got
        found: list[tuple[str, str | None]] = []

        class V(cst.CSTVisitor):
            def visit_FunctionDef(self, node) -> bool:
                return False

            def visit_Assign(self, node: cst.Assign) -> None:
                if found or len(node.targets) != 1:
                    return
                t = node.targets[0].target
                elts = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
                if not all(isinstance(e, cst.Name) for e in elts):
                    return
                names = [e.value for e in elts]
                hidden = next((n for n in names if "hidden" in n), None)
                if hidden is not None:
                    found.append((hidden, next((n for n in names if "residual" in n), None)))

        class Args(cst.CSTVisitor):
            def __init__(self):
                self.names: set[str] = set()

            def visit_Arg(self, node: cst.Arg) -> None:
                if isinstance(node.value, cst.Name):
                    self.names.add(node.value.value)

        loop.body.visit(V())
        passed = Args()
        loop.body.visit(passed)
        # the state must be what the loop hands to the layer, not a temporary of the body
        return found[0] if found and found[0][0] in passed.names else None

    def _rewrite_forward(self, tree, qualname, fwd: cst.FunctionDef, fn_depth: int, mode: str) -> cst.FunctionDef:
        if not isinstance(fwd.body, cst.IndentedBlock):
            raise NotAutoFixable(f"{qualname}.forward has no block body")
        facts = ((_SGLANG.extract_capture(ast.parse(tree.code)) or {}).get(qualname) or {}).get("forward")
        hint = f"append the state entering each layer in {self.LAYERS_ATTR} and return it with the hidden states"
        if not facts or not facts["loops"]:
            raise NotAutoFixable(f"{qualname}.forward has no loop over its decoder layers", hint)
        at = nodes_at(tree)
        located = []
        for lp in sorted(facts["loops"], key=lambda x: x["line"]):
            nodes = [n for (pos, kind), n in at.items() if kind == "for" and pos[0] == lp["line"]]
            loc = path_to(list(fwd.body.body), nodes[0]) if len(nodes) == 1 else None
            if loc is None:
                raise NotAutoFixable(f"{qualname}.forward: the layer loop at line {lp['line']} is not a plain "
                                     "statement of forward", hint)
            located.append((lp, loc))
        loops = {id(loc.node) for _, loc in located}
        located = [(lp, loc) for lp, loc in located
                   if not any(id(stmts[i]) in loops for stmts, i in loc.path[:-1])]  # outermost layer loops
        caps = [lp["captures"] for lp, _ in located]
        if all(caps):
            if facts["returns_aux"]:
                return fwd
            raise NotAutoFixable(f"{qualname}.forward captures aux hidden states but never returns them", hint)
        if any(caps):
            raise NotAutoFixable(f"{qualname}.forward: some of its layer loops capture aux hidden states and "
                                 "others do not", hint)
        if any(lp["mentions"] for lp, _ in located):
            raise NotAutoFixable(f"{qualname}.forward tests {self.LAYERS_ATTR} without capturing", hint)
        used = names_used(fwd)
        aux = fresh_name("aux_hidden_states", used)
        swap: dict[int, list] = {}
        before = len(self.changes)
        for _, loc in located:
            _, new_loop = self._capture_loop(tree, qualname, loc.node, aux, used, fn_depth + loc.depth - 1, "list")
            swap[id(loc.node)] = [new_loop.with_changes(leading_lines=loc.node.leading_lines)]
        # each loop says what it captures; a forward with several layer loops (one per branch:
        # 0.5.10.post1's Gemma3TextModel) says it once, with how many loops it holds for
        said = self.changes[before:]
        self.changes[before:] = [s if said.count(s) == 1 else f"{s} (in each of its {said.count(s)} layer loops)"
                                 for s in dict.fromkeys(said)]
        init = cst.parse_statement(f"{aux} = []\n", config=tree.config_for_parsing)
        first = located[0][1]
        top = first.path[0][0][first.path[0][1]]
        returns = self._returns(tree, qualname, located[-1][1], aux)
        for k, v in returns.items():
            swap[id(k)] = v
        if top is first.node:
            swap[id(top)] = [init.with_changes(leading_lines=top.leading_lines)] + [
                swap[id(top)][0].with_changes(leading_lines=[])]
            before = None
        else:
            before = (id(top), init)
        out = fwd.visit(_Rewrite(swap, before))
        if returns:
            self.changes.append(f"{qualname}.forward returns (hidden_states, {aux}) when layers were captured")
        return out

"""Codemod for EA310 ``pp-aux-transport``: carry a holder model's EAGLE-3 aux hidden states across
pipeline stages, the way the tree's own holders that declare the transport do it (0.33.0
``LlamaModel``): inherit ``EagleModelMixin`` (which implements the transport), declare
``supports_aux_hidden_states_over_pp = True``, and in ``forward`` collect the states of earlier
stages, pack this stage's into the ``IntermediateTensors`` sent on, and prepend the earlier ones
on the last stage; the layer index becomes absolute (``enumerate(..., start=self.start_layer)``).
A setter that assigns ``self.<inner>.aux_hidden_state_layers`` directly goes through the mixin's
``_set_aux_hidden_state_layers`` instead (it caches the stage layout the transport needs).

Anything in another shape is refused with :class:`~rules.cst.NotAutoFixable`.
"""

from __future__ import annotations

from textwrap import dedent

import libcst as cst

from rules.cst import (
    CodemodExample,
    EagleCodemod,
    NotAutoFixable,
    add_base,
    class_methods,
    dotted_name,
    ensure_import,
    find_class,
    has_base,
    identifier,
    names_used,
    replace,
)
from rules.cst_layout import explode, insert_items, is_exploded, too_long

FLAG = "supports_aux_hidden_states_over_pp"
REMOTE = "remote_aux"


def _stmt(source: str, module: cst.Module) -> cst.BaseStatement:
    return cst.parse_statement(source, config=module.config_for_parsing)


def _calls_method(node: cst.CSTNode, name: str) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if isinstance(n.func, cst.Attribute) and n.func.attr.value == name:
                found.append(n)

    node.visit(V())
    return bool(found)


class PPAuxTransportCodemod(EagleCodemod):
    """Give a holder model the aux-state transport (``part="holder"``), or route a target's setter
    through the mixin (``part="setter"``).

    Params (holder): ``class`` (qualname of the holder), ``module``, ``is_package``,
    ``mixin_module`` (where ``EagleModelMixin`` is defined), ``aux`` (the forward's aux list
    variable). Params (setter): ``class`` (the class whose ``set_aux_hidden_state_layers``
    assigns the inner model's layers directly).
    """

    NAME = "pp-aux-transport"
    GATE = "pp-aux-transport"
    DESCRIPTION = "Carry EAGLE-3 aux hidden states across pipeline stages (EagleModelMixin's transport)."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        qual = self.params["class"]
        cls, depth = find_class(tree, qual)
        if cls is None:
            raise NotAutoFixable(f"class {qual} not found in the module")
        if self.params.get("part", "holder") == "setter":
            return self._setter(tree, cls)
        return self._holder(tree, cls, depth)

    # -- the setter ------------------------------------------------------------------------------

    def _setter(self, tree: cst.Module, cls: cst.ClassDef) -> cst.Module:
        m = class_methods(cls).get("set_aux_hidden_state_layers")
        if m is None:
            raise NotAutoFixable(f"{cls.name.value} does not define set_aux_hidden_state_layers")
        if _calls_method(m, "_set_aux_hidden_state_layers"):
            return tree
        body = [s for s in m.body.body if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                                              and isinstance(s.body[0], cst.Expr)
                                              and isinstance(s.body[0].value, (cst.SimpleString,
                                                                               cst.ConcatenatedString)))]
        params = [p.name.value for p in m.params.params]
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(params) != 2:
            raise NotAutoFixable(f"{cls.name.value}.set_aux_hidden_state_layers is not a single assignment",
                                 "call self.<inner model>._set_aux_hidden_state_layers(layers) from it")
        stmt = body[0]
        assign = stmt.body[0] if len(stmt.body) == 1 else None
        target = assign.targets[0].target if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
        text = dotted_name(target) if target is not None else None
        if not (text and text.startswith("self.") and text.endswith(".aux_hidden_state_layers")
                and isinstance(assign.value, cst.Name) and assign.value.value == params[1]):
            raise NotAutoFixable(f"{cls.name.value}.set_aux_hidden_state_layers does not assign "
                                 "self.<inner>.aux_hidden_state_layers = layers",
                                 "call self.<inner model>._set_aux_hidden_state_layers(layers) from it")
        inner = text[: -len(".aux_hidden_state_layers")]
        new = stmt.with_changes(body=[cst.Expr(cst.parse_expression(
            f"{inner}._set_aux_hidden_state_layers({params[1]})"))])
        self.changes.append(f"{cls.name.value}.set_aux_hidden_state_layers goes through "
                            f"{inner.split('.', 1)[1]}._set_aux_hidden_state_layers (caches the pipeline layout)")
        return replace(tree, cls, replace(cls, stmt, new))

    # -- the holder ------------------------------------------------------------------------------

    def _holder(self, tree: cst.Module, cls: cst.ClassDef, depth: int) -> cst.Module:
        self.depth = depth
        aux = identifier(self.params.get("aux"), "the aux list variable")
        fwd = class_methods(cls).get("forward")
        if fwd is None or not isinstance(fwd.body, cst.IndentedBlock):
            raise NotAutoFixable(f"{cls.name.value} does not define forward",
                                 "write the transport in the class that defines forward")
        if "intermediate_tensors" not in [p.name.value for p in (*fwd.params.params, *fwd.params.kwonly_params)]:
            raise NotAutoFixable(f"{cls.name.value}.forward takes no intermediate_tensors",
                                 "the holder must accept IntermediateTensors from the previous stage")
        new_fwd = self._forward(tree, fwd, aux, cls.name.value)
        new_cls = replace(cls, fwd, new_fwd) if new_fwd is not fwd else cls
        new_cls = self._declare(tree, new_cls)
        if not has_base(new_cls, "EagleModelMixin"):
            new_cls = add_base(tree, new_cls, "EagleModelMixin", depth)
            self.changes.append(f"{cls.name.value} inherits EagleModelMixin (the transport)")
            tree = replace(tree, cls, new_cls)
            tree, _ = ensure_import(tree, self.params["mixin_module"], "EagleModelMixin", self.params["module"],
                                    self.params.get("is_package", False))
            return tree
        return replace(tree, cls, new_cls) if new_cls is not cls else tree

    def _declare(self, tree: cst.Module, cls: cst.ClassDef) -> cst.ClassDef:
        body = list(cls.body.body)
        for s in body:
            if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Assign):
                a = s.body[0]
                if any(isinstance(t.target, cst.Name) and t.target.value == FLAG for t in a.targets):
                    if isinstance(a.value, cst.Name) and a.value.value == "True":
                        return cls
                    raise NotAutoFixable(f"{cls.name.value} sets {FLAG} to something else than True (opts out)",
                                         "the opt-out is deliberate: check with the model's authors")
        at = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)) else 0
        line = _stmt(f"{FLAG} = True\n", tree)
        if at < len(body) and isinstance(body[at], (cst.FunctionDef, cst.ClassDef)) and not body[at].leading_lines:
            body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body.insert(at, line)
        self.changes.append(f"{cls.name.value} declares {FLAG} = True")
        return cls.with_changes(body=cls.body.with_changes(body=body))

    def _forward(self, tree: cst.Module, fwd: cst.FunctionDef, aux: str, cname: str) -> cst.FunctionDef:
        before = len(self.changes)
        stmts = list(fwd.body.body)
        loop_i = next((i for i, s in enumerate(stmts) if isinstance(s, cst.For) and "layers" in names_used(s.iter)), None)
        if loop_i is None:
            raise NotAutoFixable(f"{cname}.forward has no top-level loop over its layers")
        loop = stmts[loop_i]
        if aux not in names_used(loop.body) and not _calls_method(loop, "_maybe_add_hidden_state"):
            raise NotAutoFixable(f"{cname}.forward's layer loop does not capture {aux}", "fix aux-capture first")
        # 1. an absolute layer index
        it = loop.iter
        if isinstance(it, cst.Call) and dotted_name(it.func) == "enumerate":
            if len(it.args) == 1 and it.args[0].keyword is None:
                inner = it.args[0].value
                sliced = (isinstance(inner, cst.Call) and (dotted_name(inner.func) or "").endswith("islice")) or \
                    isinstance(inner, cst.Subscript)
                if not sliced:
                    raise NotAutoFixable(f"{cname}.forward's layer loop does not slice the stage's layers")
                start = cst.Arg(cst.parse_expression("self.start_layer"), keyword=cst.Name("start"),
                                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
                args, _ = insert_items(it.args, [start])
                new_it = it.with_changes(args=args)
                if too_long(tree, loop.with_changes(iter=new_it, body=cst.SimpleStatementSuite([cst.Pass()])),
                            self.depth + 2):
                    items, o, c = explode(args, tree.default_indent)
                    new_it = it.with_changes(args=items, whitespace_before_args=o)
                    new_it = new_it.with_changes(args=[*items[:-1], items[-1].with_changes(
                        comma=cst.Comma(whitespace_after=c))])
                loop = loop.with_changes(iter=new_it)
                stmts[loop_i] = loop
                self.changes.append(f"{cname}.forward keys aux states on absolute layer numbers (start=self.start_layer)")
        elif not (isinstance(it, cst.Call) and dotted_name(it.func) == "range"):
            raise NotAutoFixable(f"{cname}.forward's layer loop has no layer index")
        # 2. collect the earlier stages' states
        if not any(_calls_method(s, "collect_remote_aux_hidden_states") for s in stmts):
            stmts.insert(loop_i, _stmt(f"{REMOTE} = self.collect_remote_aux_hidden_states(intermediate_tensors)\n",
                                       tree))
            loop_i += 1
            self.changes.append(f"{cname}.forward collects the aux states of earlier pipeline stages")
        # 3. pack this stage's into what goes to the next stage
        packed = any(_calls_method(s, "pack_local_aux_hidden_states") for s in stmts[loop_i + 1:])
        if not packed:
            idx, ret_if, ret, call, d = self._intermediate_return(stmts, loop_i, cname)
            element = cst.StarredDictElement(cst.parse_expression(f"self.pack_local_aux_hidden_states({aux})"))
            lbrace, rbrace = d.lbrace.whitespace_after, d.rbrace.whitespace_before
            elements, rbrace = insert_items(d.elements, [element], None, lbrace, rbrace)
            new_d = d.with_changes(elements=elements, rbrace=d.rbrace.with_changes(whitespace_before=rbrace))
            line = next(x for x in ret_if.body.body if isinstance(x, cst.SimpleStatementLine) and x.body[0] is ret)
            if not is_exploded(elements) and too_long(tree, replace(line, d, new_d), self.depth + 3):
                # one element per line, at the dict's own indentation (+1 level when the dict opens
                # its own line inside the call's parentheses)
                unit = tree.default_indent
                nested = isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace)
                items, o, c = explode(elements, unit * (2 if nested else 1))
                if nested:
                    c = cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                                                    last_line=cst.SimpleWhitespace(unit))
                new_d = d.with_changes(elements=items, lbrace=d.lbrace.with_changes(whitespace_after=o),
                                       rbrace=d.rbrace.with_changes(whitespace_before=c))
            stmts[idx] = replace(ret_if, d, new_d)
            self.changes.append(f"{cname}.forward sends this stage's aux states on in the IntermediateTensors")
        # 4. the last stage prepends the earlier stages' states
        joined = any(isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Assign)
                     and REMOTE in names_used(s.body[0].value) for s in stmts)
        if not joined:
            ret_i = next((i for i, s in enumerate(stmts) if i > loop_i and self._returns_aux(s, aux)), None)
            if ret_i is None:
                raise NotAutoFixable(f"{cname}.forward never returns {aux}", "fix aux-capture first")
            stmts.insert(ret_i, _stmt(f"{aux} = {REMOTE} + {aux}\n", tree))
            self.changes.append(f"{cname}.forward returns the earlier stages' aux states before its own")
        if len(self.changes) == before:
            return fwd
        return fwd.with_changes(body=fwd.body.with_changes(body=stmts))

    @staticmethod
    def _returns_aux(stmt: cst.CSTNode, aux: str) -> bool:
        found = []

        class V(cst.CSTVisitor):
            def visit_Return(self, n: cst.Return) -> None:
                if isinstance(n.value, cst.Tuple) and any(isinstance(e.value, cst.Name) and e.value.value == aux
                                                         for e in n.value.elements):
                    found.append(n)

        stmt.visit(V())
        return bool(found)

    @staticmethod
    def _intermediate_return(stmts, loop_i: int, cname: str):
        """The ``if not <last rank>: return IntermediateTensors({...})`` after the loop: ``(index,
        if statement, return, call, dict literal)``."""
        for i, s in enumerate(stmts):
            if i <= loop_i or not isinstance(s, cst.If) or "is_last_rank" not in names_used(s.test):
                continue
            body = s.body.body if isinstance(s.body, cst.IndentedBlock) else []
            for line in body:
                if not (isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Return)):
                    continue
                ret = line.body[0]
                call = ret.value
                if (isinstance(call, cst.Call) and (dotted_name(call.func) or "").endswith("IntermediateTensors")
                        and call.args and isinstance(call.args[0].value, cst.Dict)):
                    return i, s, ret, call, call.args[0].value
        raise NotAutoFixable(f"{cname}.forward has no `if not ...is_last_rank: return IntermediateTensors({{...}})`",
                             "send the stage's aux states on with pack_local_aux_hidden_states by hand")

    EXAMPLES = [
        CodemodExample(
            params={"part": "holder", "class": "DeepModel", "module": "vllm.model_executor.models.deep",
                    "is_package": False, "mixin_module": "vllm.model_executor.models.interfaces",
                    "aux": "aux_hidden_states"},
            before=dedent('''\
                from itertools import islice

                import torch.nn as nn
                from vllm.distributed import get_pp_group
                from vllm.sequence import IntermediateTensors


                class DeepModel(nn.Module):
                    def forward(self, input_ids, positions, intermediate_tensors):
                        if get_pp_group().is_first_rank:
                            hidden_states, residual = self.embed(input_ids), None
                        else:
                            hidden_states = intermediate_tensors["hidden_states"]
                            residual = intermediate_tensors["residual"]
                        aux_hidden_states = []
                        for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer)):
                            if idx in self.aux_hidden_state_layers:
                                aux_hidden_states.append(hidden_states + residual)
                            hidden_states, residual = layer(positions, hidden_states, residual)
                        if not get_pp_group().is_last_rank:
                            return IntermediateTensors({"hidden_states": hidden_states, "residual": residual})
                        hidden_states, _ = self.norm(hidden_states, residual)
                        if len(aux_hidden_states) > 0:
                            return hidden_states, aux_hidden_states
                        return hidden_states
                '''),
            after=dedent('''\
                from itertools import islice

                import torch.nn as nn
                from vllm.distributed import get_pp_group
                from vllm.sequence import IntermediateTensors
                from vllm.model_executor.models.interfaces import EagleModelMixin


                class DeepModel(nn.Module, EagleModelMixin):
                    supports_aux_hidden_states_over_pp = True

                    def forward(self, input_ids, positions, intermediate_tensors):
                        if get_pp_group().is_first_rank:
                            hidden_states, residual = self.embed(input_ids), None
                        else:
                            hidden_states = intermediate_tensors["hidden_states"]
                            residual = intermediate_tensors["residual"]
                        aux_hidden_states = []
                        remote_aux = self.collect_remote_aux_hidden_states(intermediate_tensors)
                        for idx, layer in enumerate(
                            islice(self.layers, self.start_layer, self.end_layer),
                            start=self.start_layer,
                        ):
                            if idx in self.aux_hidden_state_layers:
                                aux_hidden_states.append(hidden_states + residual)
                            hidden_states, residual = layer(positions, hidden_states, residual)
                        if not get_pp_group().is_last_rank:
                            return IntermediateTensors({
                                "hidden_states": hidden_states,
                                "residual": residual,
                                **self.pack_local_aux_hidden_states(aux_hidden_states),
                            })
                        hidden_states, _ = self.norm(hidden_states, residual)
                        aux_hidden_states = remote_aux + aux_hidden_states
                        if len(aux_hidden_states) > 0:
                            return hidden_states, aux_hidden_states
                        return hidden_states
                '''),
            note="a holder modelled on 0.33.0's DeepseekV2Model",
        ),
        CodemodExample(
            params={"part": "setter", "class": "DeepForCausalLM", "module": "vllm.model_executor.models.deep",
                    "is_package": False},
            before=dedent('''\
                class DeepForCausalLM:
                    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
                        self.model.aux_hidden_state_layers = layers
                '''),
            after=dedent('''\
                class DeepForCausalLM:
                    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
                        self.model._set_aux_hidden_state_layers(layers)
                '''),
            note="the setter goes through the mixin, which caches the stage layout",
        ),
    ]

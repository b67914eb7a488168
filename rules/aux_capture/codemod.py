"""Codemod for EA303 ``aux-capture``: make the holder model's ``forward`` capture the auxiliary
hidden states EAGLE-3 feeds to the drafter, and return them."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from textwrap import dedent
from typing import Iterator

import libcst as cst

from auditor.index.summary import summarize
from rules.aux_capture.stream import layer_call_names, rebinding_layer_classes, whole_stream_layer
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
    module_code,
    names_used,
    nodes_at,
    replace,
    walk,
)
from rules.cst_layout import LINE_LENGTH


def _sub_blocks(stmt: cst.CSTNode) -> Iterator[cst.IndentedBlock]:
    """The indented blocks directly owned by a compound statement (elif/else/except/finally
    and match cases included)."""
    for c in stmt.children:
        if isinstance(c, cst.IndentedBlock):
            yield c
        elif isinstance(c, (cst.Else, cst.If, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)):
            yield from _sub_blocks(c)


@dataclass
class Located:
    """A statement with the chain of blocks leading to it: ``path`` is ``[(statements, index)]``
    from the function body down to the statement's own block; ``depth`` counts the blocks."""

    node: cst.CSTNode
    path: list[tuple[list[cst.BaseStatement], int]] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return len(self.path)


def path_to(body: list[cst.BaseStatement], target: cst.CSTNode, path=None) -> Located | None:
    """Where ``target`` (a statement of the function body, by identity) stands: the chain of
    blocks leading to it."""
    path = path or []
    for i, st in enumerate(body):
        here = path + [(body, i)]
        if st is target:
            return Located(st, here)
        if isinstance(st, (cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine)):
            continue
        for blk in _sub_blocks(st):
            got = path_to(list(blk.body), target, here)
            if got is not None:
                return got
    return None


def _layer_loop(tree: cst.Module, qualname: str, fwd: cst.FunctionDef):
    """The first loop over the decoder layers in ``qualname.forward`` as the index finds it
    (:class:`auditor.index.facts.LoopFact`), with the libcst ``For`` at its place: the loop
    and its capture are detected once, by the index."""
    summary = summarize(module_code(tree).encode("utf-8"), "vllm/_codemod_.py")
    cls = summary.classes.get(qualname)
    mf = cls.methods.get("forward") if cls is not None else None
    if mf is None or not mf.loops:
        return None, None
    lf = min(mf.loops, key=lambda x: x.line)
    fors = [n for (pos, kind), n in nodes_at(tree).items() if kind == "for" and pos[0] == lf.line]
    return lf, (fors[0] if fors else None)


def _return_lines(stmts: list[cst.BaseStatement]) -> Iterator[cst.SimpleStatementLine]:
    """``return X`` lines in ``stmts`` and the blocks below them (not nested functions)."""
    for st in stmts:
        if isinstance(st, cst.SimpleStatementLine):
            if len(st.body) == 1 and isinstance(st.body[0], cst.Return):
                yield st
        elif not isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            for blk in _sub_blocks(st):
                yield from _return_lines(list(blk.body))


def _is_intermediate(ret: cst.Return) -> bool:
    v = ret.value
    # vLLM's IntermediateTensors, SGLang's PPProxyTensors: what a non-last pipeline rank returns
    return isinstance(v, cst.Call) and (dotted_name(v.func) or "").endswith(("IntermediateTensors", "PPProxyTensors"))


def _compact(module: cst.Module, node: cst.CSTNode) -> str:
    """One-line source text of an expression (layout and comments inside it dropped)."""
    text = module.code_for_node(node)
    if "\n" not in text:
        return text
    return ast.unparse(ast.parse(text.strip(), mode="eval"))


def _pick(module: cst.Module, candidates: list[str], depth: int) -> cst.BaseStatement:
    """Parse the first candidate layout whose lines fit :data:`LINE_LENGTH` at ``depth``."""
    pad = len(module.default_indent) * depth
    stmt = None
    for text in candidates:
        if module.default_indent != "    ":
            text = "\n".join(
                module.default_indent * ((len(ln) - len(ln.lstrip(" "))) // 4) + ln.lstrip(" ") for ln in text.splitlines()
            ) + "\n"
        stmt = cst.parse_statement(text, config=module.config_for_parsing)
        if all(pad + len(ln) <= LINE_LENGTH for ln in module.code_for_node(stmt).splitlines()):
            return stmt
    return stmt


def fresh_name(name: str, used: set[str]) -> str:
    if name not in used:
        return name
    i = 2
    while f"{name}_{i}" in used:
        i += 1
    return f"{name}_{i}"


class _Rewriter(cst.CSTTransformer):
    """Replaces the loop and the final return lines of one function (by identity)."""

    def __init__(self, loop: cst.For, new_loop: list[cst.BaseStatement], returns: dict):
        self.loop = loop
        self.new_loop = new_loop
        self.returns = returns

    def leave_For(self, original_node, updated_node):
        if original_node is self.loop:
            return cst.FlattenSentinel(self.new_loop)
        return updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if original_node in self.returns:
            return cst.FlattenSentinel(self.returns[original_node])
        return updated_node


class AuxCaptureCodemod(EagleCodemod):
    """Capture auxiliary hidden states in the holder model's ``forward``.

    Parameters: ``class`` (qualname of the class that defines the holder's ``forward``),
    ``mode`` (``list``: append to a local list, as vLLM ≤ 0.17 models do; ``mixin``: call
    ``EagleModelMixin._maybe_add_hidden_state`` and inherit the mixin, where the tree's protocol
    defaults require it), ``mixin_module`` (where ``EagleModelMixin`` is defined), ``module`` /
    ``is_package`` (this file's dotted module).

    The layer loop gets an absolute layer index (``enumerate(islice(self.layers, start, end),
    start=start)``, or ``start + i`` when the loop already enumerates from 0 and uses its index),
    the state entering each requested layer (``hidden_states + residual``, or ``hidden_states``
    where the loop has no residual or it is still None) is appended, the attribute
    ``aux_hidden_state_layers`` is initialised in ``__init__`` (list mode), and each final
    ``return X`` after the loop becomes ``return X, aux_hidden_states`` when something was
    captured. Returns of ``IntermediateTensors`` (non-last pipeline ranks) are left untouched.
    Idempotent: a loop that already captures and a forward that already returns the aux states
    are left as they are.
    """

    NAME = "aux-capture"
    GATE = "aux-capture"
    #: The attribute of the holder that lists the layers to capture, and its initial value.
    LAYERS_ATTR = "aux_hidden_state_layers"
    LAYERS_INIT = ": tuple[int, ...] = ()"
    DESCRIPTION = (
        "Rewrite the holder model's forward layer loop to capture hidden states entering the "
        "layers in aux_hidden_state_layers (absolute indices) and return them."
    )
    EXAMPLES = [
        CodemodExample(
            {'class': 'M', 'mode': 'list'},
            before=dedent('''\
                class M(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.start_layer, self.end_layer, self.layers = make_layers(4)

                    def forward(self, x):
                        hidden_states, residual = x, None
                        for layer in islice(self.layers, self.start_layer, self.end_layer):
                            hidden_states, residual = layer(hidden_states, residual)
                        return self.norm(hidden_states)
            '''),
            after=dedent('''\
                class M(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.start_layer, self.end_layer, self.layers = make_layers(4)
                        self.aux_hidden_state_layers: tuple[int, ...] = ()

                    def forward(self, x):
                        hidden_states, residual = x, None
                        aux_hidden_states = []
                        for idx, layer in enumerate(
                            islice(self.layers, self.start_layer, self.end_layer),
                            start=self.start_layer,
                        ):
                            if idx in self.aux_hidden_state_layers:
                                aux_hidden_states.append(
                                    hidden_states if residual is None else hidden_states + residual
                                )
                            hidden_states, residual = layer(hidden_states, residual)
                        if len(aux_hidden_states) > 0:
                            return self.norm(hidden_states), aux_hidden_states
                        return self.norm(hidden_states)
            '''),
            note='an islice loop without index gets the absolute index, the capture and the aux return',
        ),
        CodemodExample(
            {'class': 'M', 'mode': 'list'},
            before=dedent('''\
                class M(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.start_layer, self.end_layer, self.layers = make_layers(4)

                    def forward(self, x):
                        hidden_states = x
                        for layer in islice(self.layers, self.start_layer, self.end_layer):
                            hidden_states, residual = layer(positions, hidden_states)
                        return self.norm(hidden_states)
            '''),
            after=dedent('''\
                class M(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.start_layer, self.end_layer, self.layers = make_layers(4)
                        self.aux_hidden_state_layers: tuple[int, ...] = ()

                    def forward(self, x):
                        hidden_states = x
                        aux_hidden_states = []
                        for idx, layer in enumerate(
                            islice(self.layers, self.start_layer, self.end_layer),
                            start=self.start_layer,
                        ):
                            if idx in self.aux_hidden_state_layers:
                                aux_hidden_states.append(hidden_states)
                            hidden_states, residual = layer(positions, hidden_states)
                        if len(aux_hidden_states) > 0:
                            return self.norm(hidden_states), aux_hidden_states
                        return self.norm(hidden_states)
            '''),
            note='a layer that returns a residual it never takes back (StableLM): the entering state is '
                 'hidden_states alone',
        ),
        CodemodExample(
            {'class': 'M', 'mode': 'list'},
            before=dedent('''\
                class Layer(nn.Module):
                    def forward(self, positions, hidden_states, residual):
                        residual = hidden_states
                        hidden_states = residual + self.mlp(self.norm(hidden_states))
                        return hidden_states, residual


                class M(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.start_layer, self.end_layer, self.layers = make_layers(4, lambda p: Layer(p))

                    def forward(self, x):
                        hidden_states, residual = x, None
                        for layer in islice(self.layers, self.start_layer, self.end_layer):
                            hidden_states, residual = layer(positions, hidden_states, residual)
                        return self.norm(hidden_states)
            '''),
            after=dedent('''\
                class Layer(nn.Module):
                    def forward(self, positions, hidden_states, residual):
                        residual = hidden_states
                        hidden_states = residual + self.mlp(self.norm(hidden_states))
                        return hidden_states, residual


                class M(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.start_layer, self.end_layer, self.layers = make_layers(4, lambda p: Layer(p))
                        self.aux_hidden_state_layers: tuple[int, ...] = ()

                    def forward(self, x):
                        hidden_states, residual = x, None
                        aux_hidden_states = []
                        for idx, layer in enumerate(
                            islice(self.layers, self.start_layer, self.end_layer),
                            start=self.start_layer,
                        ):
                            if idx in self.aux_hidden_state_layers:
                                aux_hidden_states.append(hidden_states)
                            hidden_states, residual = layer(positions, hidden_states, residual)
                        if len(aux_hidden_states) > 0:
                            return self.norm(hidden_states), aux_hidden_states
                        return self.norm(hidden_states)
            '''),
            note='layers that take the residual back but start by rebinding it (Cohere, EXAONE 4) hand on '
                 'the whole state: the entering state is hidden_states alone',
        ),
    ]

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        qualname = identifier(self.params["class"], "the class")
        mode = self.params.get("mode", "list")
        if mode == "mixin":
            identifier(self.params["mixin_module"], "the mixin's module")
        cls, depth = find_class(tree, qualname)
        if cls is None:
            raise NotAutoFixable(f"class {qualname} not found in this module")
        fwd = class_methods(cls).get("forward")
        if fwd is None:
            raise NotAutoFixable(f"{qualname} defines no forward in this module")
        new_fwd = self._rewrite_forward(tree, qualname, fwd, depth + 2, mode)
        new_cls = cls
        if new_fwd is not fwd:
            new_cls = replace(new_cls, fwd, new_fwd)
        if mode == "list":
            new_cls = self._init_attr(tree, new_cls, qualname)
        elif not has_base(cls, "EagleModelMixin"):
            new_cls = add_base(tree, new_cls, "EagleModelMixin", depth)
            self.changes.append(f"made {qualname} inherit EagleModelMixin")
        if new_cls is cls:
            return tree
        tree = replace(tree, cls, new_cls)
        if mode == "mixin":
            tree, imported = ensure_import(tree, self.params["mixin_module"], "EagleModelMixin",
                                           self.params.get("module", ""), bool(self.params.get("is_package")))
            if imported:
                self.changes.append(f"imported EagleModelMixin from {self.params['mixin_module']}")
        return tree

    # -- forward ---------------------------------------------------------------------------
    def _rewrite_forward(self, tree, qualname, fwd: cst.FunctionDef, fn_depth: int, mode: str) -> cst.FunctionDef:
        if not isinstance(fwd.body, cst.IndentedBlock):
            raise NotAutoFixable(f"{qualname}.forward has no block body")
        lf, loop_node = _layer_loop(tree, qualname, fwd)
        located = path_to(list(fwd.body.body), loop_node) if loop_node is not None else None
        if located is None:
            raise NotAutoFixable(
                f"{qualname}.forward has no loop over its decoder layers",
                "capture hidden_states + residual for the layers in aux_hidden_state_layers",
            )
        loop: cst.For = located.node
        used = names_used(fwd)
        existing = lf.capture_list if lf.captures else None
        aux = existing if existing and existing != "?" else fresh_name("aux_hidden_states", used)
        new_stmts: list[cst.BaseStatement] = [loop]
        if existing is None:
            new_stmts = self._capture_loop(tree, qualname, loop, aux, used, fn_depth + located.depth - 1, mode)
        returns = self._returns(tree, qualname, located, "?" if existing == "?" else aux)
        if returns and existing == "?":
            raise NotAutoFixable(
                f"{qualname}.forward captures aux states in a form the codemod cannot read back",
                "return the captured states alongside the hidden states",
            )
        if existing is not None and not returns:
            return fwd
        if existing is not None:
            new_stmts = [loop]
        rewritten = fwd.visit(_Rewriter(loop, new_stmts, returns))
        if returns:
            self.changes.append(f"{qualname}.forward returns (hidden_states, {aux}) when layers were captured")
        return rewritten

    def _capture_loop(self, tree, qualname, loop: cst.For, aux: str, used: set[str], depth: int, mode: str):
        names = self._state_names(loop)
        if names is None:
            raise NotAutoFixable(
                f"{qualname}.forward: cannot tell which variables carry the hidden state in the layer loop",
                f"append the state entering each layer in {self.LAYERS_ATTR}",
            )
        hidden, residual = names
        holder, _ = find_class(tree, qualname)
        whole = whole_stream_layer(tree, holder, loop, residual) if residual and holder is not None else None
        if whole is not None:
            # the layers hand on the whole state: adding their leftover residual would feed the
            # drafter a state no layer sees
            residual = None
            self.changes.append(f"{whole}.forward starts by rebinding the residual it is handed: the state "
                                f"entering each layer is {hidden} alone")
        elif residual and (doubt := rebinding_layer_classes(tree)):
            # a layer of this module hands on the whole state, and the holder's layers are not
            # certainly of another class (HyperCLOVAX: built from an __init__ parameter whose default
            # is that class): either capture may be the wrong one (the engine measured
            # hidden_states + residual there as a wrong capture)
            raise NotAutoFixable(
                f"{qualname}.forward: {doubt[0]}.forward starts by rebinding the residual it is handed, but the "
                f"layers {qualname} builds are not certainly of that class: the state entering a layer may be "
                f"{hidden} alone or {hidden} + {residual}",
                f"capture the state entering each layer in {self.LAYERS_ATTR} by hand ({hidden} alone for layers "
                "that rebind the residual)",
            )
        it = loop.iter
        target = loop.target
        idx_expr: str
        header: list[str] | None = None
        if isinstance(target, cst.Name) and isinstance(it, cst.Call) and dotted_name(it.func) == "range":
            idx_expr = target.value  # range(start_layer, end_layer): already absolute
        elif isinstance(target, cst.Name):
            start = self._slice_start(tree, qualname, it)
            idx = fresh_name("idx", used)
            idx_expr = idx
            inner = _compact(tree, it)
            head = f"for {idx}, {target.value} in enumerate("
            if start is None:
                header = [f"{head}{inner}):", f"{head}\n    {inner}\n):"]
            else:
                header = [
                    f"{head}{inner}, start={start}):",
                    f"{head}\n    {inner}, start={start}\n):",
                    f"{head}\n    {inner},\n    start={start},\n):",
                ]
        elif (
            isinstance(target, cst.Tuple) and len(target.elements) == 2
            and isinstance(target.elements[0].value, cst.Name)
            and isinstance(it, cst.Call) and dotted_name(it.func) == "enumerate" and it.args
        ):
            idx = target.elements[0].value.value
            given = [a for a in it.args[1:]] + [a for a in it.args if a.keyword and a.keyword.value == "start"]
            if given:
                idx_expr = idx  # enumerate(..., start=...): absolute
            else:
                start = self._slice_start(tree, qualname, it.args[0].value)
                if start is None:
                    idx_expr = idx
                elif idx in names_used(loop.body):
                    idx_expr = f"{start} + {idx}"  # the body uses the relative index: keep it
                else:
                    idx_expr = idx
                    inner = _compact(tree, it.args[0].value)
                    head = f"for {tree.code_for_node(target)} in enumerate("
                    header = [
                        f"{head}{inner}, start={start}):",
                        f"{head}\n    {inner}, start={start}\n):",
                        f"{head}\n    {inner},\n    start={start},\n):",
                    ]
        else:
            raise NotAutoFixable(
                f"{qualname}.forward: the layer loop's shape ({tree.code_for_node(target)} in "
                f"{_compact(tree, it)}) is not one the codemod can index",
                "track the absolute layer index (start_layer + i) and capture the states entering the requested layers",
            )
        if mode == "mixin":
            res = residual or "None"
            capture = [
                f"self._maybe_add_hidden_state({aux}, {idx_expr}, {hidden}, {res})\n",
                f"self._maybe_add_hidden_state(\n    {aux}, {idx_expr}, {hidden}, {res}\n)\n",
            ]
        else:
            value = f"{hidden} if {residual} is None else {hidden} + {residual}" if residual else hidden
            cond = f"if {idx_expr} in self.{self.LAYERS_ATTR}:\n"
            capture = [cond + f"    {aux}.append({value})\n", cond + f"    {aux}.append(\n        {value}\n    )\n"]
        cap_stmt = _pick(tree, capture, depth + 1)
        body = loop.body
        new_body = body.with_changes(body=[cap_stmt] + list(body.body))
        if header is not None:
            parsed = _pick(tree, [h + "\n    pass\n" for h in header], depth)
            new_loop = parsed.with_changes(body=new_body, orelse=loop.orelse, leading_lines=[])
        else:
            new_loop = loop.with_changes(body=new_body, leading_lines=[])
        init = cst.parse_statement(f"{aux} = []\n", config=tree.config_for_parsing).with_changes(
            leading_lines=loop.leading_lines
        )
        self.changes.append(
            f"{qualname}.forward captures {hidden}{' + ' + residual if residual else ''} entering the layers in "
            f"{self.LAYERS_ATTR}, keyed on the absolute layer index {idx_expr}"
        )
        return [init, new_loop]

    def _state_names(self, loop: cst.For) -> tuple[str, str | None] | None:
        """``(hidden states name, residual name or None)`` of the layer loop (see
        :func:`layer_call_names`)."""
        return layer_call_names(loop)

    def _slice_start(self, tree, qualname, it: cst.BaseExpression) -> str | None:
        """Start of the layer slice the loop iterates (``islice(self.layers, A, B)``,
        ``self.layers[A:B]``): its text, or None when the loop starts at layer 0."""
        if isinstance(it, cst.Call) and (dotted_name(it.func) or "").endswith("islice"):
            args = [a for a in it.args if a.keyword is None]
            if len(args) == 2:
                return None
            if len(args) == 3:
                return _compact(tree, args[1].value)
            raise NotAutoFixable(f"{qualname}.forward: the layer loop uses islice with a step")
        if isinstance(it, cst.Subscript) and len(it.slice) == 1 and isinstance(it.slice[0].slice, cst.Slice):
            sl = it.slice[0].slice
            if sl.step is not None:
                raise NotAutoFixable(f"{qualname}.forward: the layer loop slices with a step")
            return _compact(tree, sl.lower) if sl.lower is not None else None
        if isinstance(it, (cst.Attribute, cst.Name)):
            return None
        raise NotAutoFixable(
            f"{qualname}.forward: cannot tell where the layer loop starts ({_compact(tree, it)})",
            "track the absolute layer index (start_layer + i) and capture the states entering the requested layers",
        )

    def _returns(self, tree, qualname, located: Located, aux: str) -> dict:
        """The final ``return X`` lines after the loop, mapped to their replacement (empty when
        the forward already returns the aux states)."""
        fwd_returns_aux = False
        out: dict = {}
        for level in range(len(located.path) - 1, -1, -1):
            stmts, i = located.path[level]
            after = list(_return_lines(stmts[i + 1:]))
            finals = [r for r in after if not _is_intermediate(r.body[0]) and r.body[0].value is not None]
            for r in finals:
                v = r.body[0].value
                if isinstance(v, cst.Tuple):
                    if any(isinstance(e.value, cst.Name) and (e.value.value == aux or (aux == "?" and "aux" in e.value.value))
                           for e in v.elements[1:]):
                        fwd_returns_aux = True
                        continue
                    raise NotAutoFixable(
                        f"{qualname}.forward returns a tuple ({tree.code_for_node(v)}) after the layer loop",
                        f"return the captured {aux} alongside the hidden states",
                    )
                out[r] = None
            if finals:
                break
        if fwd_returns_aux:
            return {}
        if not out:
            raise NotAutoFixable(
                f"{qualname}.forward has no final return after its layer loop",
                f"return (hidden_states, {aux}) when {aux} is not empty",
            )
        for r in list(out):
            v = tree.code_for_node(r.body[0].value)
            if_stmt = cst.parse_statement(
                f"if len({aux}) > 0:\n    return {v}, {aux}\n", config=tree.config_for_parsing
            ).with_changes(leading_lines=r.leading_lines)
            out[r] = [if_stmt, r.with_changes(leading_lines=[])]
        return out

    # -- __init__ ----------------------------------------------------------------------------
    def _init_attr(self, tree, cls: cst.ClassDef, qualname: str) -> cst.ClassDef:
        """``self.aux_hidden_state_layers: tuple[int, ...] = ()`` in ``__init__`` (after the
        statement that builds ``self.layers``), or a class attribute when the class has no
        ``__init__``; nothing when the attribute is already set."""
        for n in walk(cls):
            if isinstance(n, (cst.Assign, cst.AnnAssign)):
                targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
                for t in targets:
                    for x in walk(t):
                        if isinstance(x, cst.Attribute) and x.attr.value == self.LAYERS_ATTR:
                            return cls
                        if isinstance(x, cst.Name) and x.value == self.LAYERS_ATTR and t is x:
                            return cls
        init = class_methods(cls).get("__init__")
        if init is None or not isinstance(init.body, cst.IndentedBlock):
            attr = cst.parse_statement(f"{self.LAYERS_ATTR}{self.LAYERS_INIT}\n", config=tree.config_for_parsing)
            body = list(cls.body.body)
            at = 1 if body and _docstring(body[0]) else 0
            body.insert(at, attr)
            self.changes.append(f"{qualname} declares {self.LAYERS_ATTR}{self.LAYERS_INIT}")
            return cls.with_changes(body=cls.body.with_changes(body=body))
        stmt = cst.parse_statement(f"self.{self.LAYERS_ATTR}{self.LAYERS_INIT}\n", config=tree.config_for_parsing)
        body = list(init.body.body)
        at = len(body)
        for i, st in enumerate(body):
            if isinstance(st, cst.SimpleStatementLine) and any(
                isinstance(s, (cst.Assign, cst.AnnAssign)) and any(
                    isinstance(x, cst.Attribute) and x.attr.value == "layers" and dotted_name(x) == "self.layers"
                    for x in walk(s.targets[0].target if isinstance(s, cst.Assign) else s.target)
                )
                for s in st.body
            ):
                at = i + 1
                break
        body.insert(at, stmt)
        new_init = init.with_changes(body=init.body.with_changes(body=body))
        self.changes.append(f"{qualname}.__init__ initialises self.{self.LAYERS_ATTR}{self.LAYERS_INIT}")
        return replace(cls, init, new_init)


def _docstring(stmt) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )

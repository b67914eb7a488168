"""Codemod for EA402 ``interface`` on SGLang trees: give a class the EAGLE-3 setter the runner
calls, in the shape of the tree's own donor model (:mod:`auditor.engines.sglang.donor`).

A class that holds the inner model itself (``self.model = XModel(...)``) gets the setter that
fills ``self.model.layers_to_capture``, the capture flag (``False``) in ``__init__``, and a
``forward`` that unpacks ``(hidden_states, aux_hidden_states)`` when the flag is set and hands
them to the logits processor as the donor does. A multimodal wrapper gets a setter that delegates
to its language model (whose own class is patched the same way)."""

from __future__ import annotations

from textwrap import dedent

import libcst as cst

from rules.cst import (
    CodemodExample,
    EagleCodemod,
    NotAutoFixable,
    append_to_class,
    class_methods,
    dotted_name,
    find_class,
    identifier,
    names_used,
    parse_member,
    replace,
)
from rules.cst_layout import explode, insert_items, is_exploded, too_long

#: Operators a default layer choice may apply to the layer count (see
#: :class:`auditor.engines.sglang.donor.SetterShape`).
OPS = ("//", "-", "+")

#: How a setter may tell the last pipeline rank (the only texts a ``guard`` parameter may hold).
GUARDS = ("self.pp_group", "get_pp_group()")


def _term(op: object, k: object) -> str:
    if type(k) is not int or not -64 <= k <= 64:
        raise NotAutoFixable(f"the layer number {k!r} is not a small integer")
    if op == "const":
        return str(k)
    if op not in OPS:
        raise NotAutoFixable(f"the operator {op!r} is not one a default layer choice uses")
    if op == "+" and k == 0:
        return "num_layers"
    return f"num_layers {op} {k}"


def setter_source(params: dict) -> str:
    """The setter's source (4-space indentation, no class indentation) for ``params`` (see
    :class:`SGLangInterfaceCodemod`); every name is checked to be an identifier and every number
    an integer, so nothing else can reach the code."""
    name = identifier(params["setter"], "the setter")
    attr = identifier(params["attr"], "the inner model attribute")
    if params["kind"] == "delegate":
        return f"def {name}(self, layer_ids=None):\n    self.{attr}.{name}(layer_ids)\n"
    if params["kind"] != "direct":
        raise NotAutoFixable(f"unknown setter kind {params['kind']!r}")
    s = params["shape"]
    flag = identifier(s["flag"], "the capture flag")
    capture = identifier(s["capture_attr"], "the capture attribute")
    terms = [_term(op, k) for op, k in s["default"]]
    if not terms:
        raise NotAutoFixable("the donor's default layer choice is empty")
    offset = s["offset"]
    if type(offset) is not int or not -64 <= offset <= 64:
        raise NotAutoFixable(f"the layer offset {offset!r} is not a small integer")
    lines = [f"def {name}(self, layer_ids=None):\n"]
    guard = params.get("guard")
    if guard:
        if guard not in GUARDS:
            raise NotAutoFixable(f"unknown pipeline guard {guard!r}")
        lines += [f"    if not {guard}.is_last_rank:\n", "        return\n", "\n"]
    lines += [f"    self.{flag} = True\n", "    if layer_ids is None:\n"]
    if any("num_layers" in t for t in terms):
        path = identifier(".".join(s["num_layers"]), "the layer count")
        lines.append(f"        num_layers = self.{path}\n")
    lines.append(f"        self.{attr}.{capture} = [{', '.join(terms)}]\n")
    lines.append("    else:\n")
    given = "list(layer_ids)" if offset == 0 else (
        f"[val + {offset} for val in layer_ids]" if offset > 0 else f"[val - {-offset} for val in layer_ids]")
    lines.append(f"        self.{attr}.{capture} = {given}\n")
    return "".join(lines)


def _name(value: object, what: str) -> str:
    """One identifier (no dots)."""
    out = identifier(value, what)
    if "." in out:
        raise NotAutoFixable(f"{what} {value!r} is not a single Python identifier")
    return out


def getter_source(g: dict) -> tuple[str, str]:
    """``(name, source)`` of a getter the EAGLE workers call (4-space indentation): ``kind``
    ``return`` returns the ``self.`` ``paths`` (a tuple, or one path when ``single``), ``delegate``
    returns ``self.<attr>.<name>()``. Every name is checked to be an identifier."""
    if not isinstance(g, dict):
        raise NotAutoFixable("a getter that is not described by a mapping")
    name = _name(g.get("name"), "the getter")
    if g.get("kind") == "delegate":
        attr = _name(g.get("attr"), "the language model attribute")
        return name, f"def {name}(self):\n    return self.{attr}.{name}()\n"
    if g.get("kind") != "return":
        raise NotAutoFixable(f"unknown getter kind {g.get('kind')!r}")
    paths = g.get("paths")
    if not isinstance(paths, list) or not 1 <= len(paths) <= 8:
        raise NotAutoFixable("the getter's returned attributes are not a short list")
    texts = []
    for path in paths:
        if not isinstance(path, list) or not 1 <= len(path) <= 6:
            raise NotAutoFixable("a returned attribute path that is not a short list of names")
        texts.append("self." + ".".join(_name(a, "a returned attribute") for a in path))
    single = g.get("single") is True
    if single and len(texts) != 1:
        raise NotAutoFixable("a single returned value with several paths")
    return name, f"def {name}(self):\n    return {', '.join(texts)}\n"


def _assigns_self(node: cst.CSTNode, attr: str) -> bool:
    """True when ``node`` holds an assignment to ``self.<attr>`` (or a class-level ``<attr>``)."""
    found = False

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            nonlocal found
            for t in n.targets:
                d = dotted_name(t.target)
                if d in (f"self.{attr}", attr):
                    found = True

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            nonlocal found
            if dotted_name(n.target) in (f"self.{attr}", attr):
                found = True

    node.visit(V())
    return found


def _fresh(name: str, used: set[str]) -> str:
    i, out = 2, name
    while out in used:
        out, i = f"{name}_{i}", i + 1
    return out


class _Calls(cst.CSTVisitor):
    """The calls of ``self.<name>(...)`` in a function (not in nested functions or classes), each
    with the number of blocks it is nested in (the function body counts one)."""

    def __init__(self, name: str):
        self.name = name
        self.calls: list[tuple[cst.Call, int]] = []
        self.depth = 0
        self.blocks = 0

    def visit_FunctionDef(self, node) -> bool:
        self.depth += 1
        return self.depth == 1

    def leave_FunctionDef(self, node) -> None:
        self.depth -= 1

    def visit_ClassDef(self, node) -> bool:
        return False

    def visit_IndentedBlock(self, node) -> None:
        self.blocks += 1

    def leave_IndentedBlock(self, node) -> None:
        self.blocks -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if dotted_name(node.func) == f"self.{self.name}":
            self.calls.append((node, self.blocks))


def _with_arg(module: cst.Module, call: cst.Call, arg: cst.Arg, index: int, depth: int) -> cst.Call:
    """``call`` with ``arg`` inserted at ``index``, in the call's layout (one argument per line when
    it is laid out so, or when the new line would be too long)."""
    args = list(call.args)
    closing = args[-1].whitespace_after_arg if args else None
    if args:
        args[-1] = args[-1].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
    new_args, _ = insert_items(args, [arg], index if index < len(args) else None, call.whitespace_before_args, None)
    if closing is not None:
        new_args[-1] = new_args[-1].with_changes(whitespace_after_arg=closing)
    out = call.with_changes(args=new_args)
    if not is_exploded(new_args) and too_long(module, out, depth):
        items, o, c = explode([a.with_changes(whitespace_after_arg=cst.SimpleWhitespace("")) for a in new_args],
                              module.default_indent)
        items[-1] = items[-1].with_changes(whitespace_after_arg=c)
        out = call.with_changes(args=items, whitespace_before_args=o)
    return out


class SGLangInterfaceCodemod(EagleCodemod):
    """Add the EAGLE-3 setter to an SGLang model class, modelled on the tree's donor model.

    Parameters: ``class`` (qualname of the class in this module), ``setter`` (the name the runner
    calls), ``kind`` (``direct``: the class holds the inner model in ``self.<attr>``;
    ``delegate``: it calls ``self.<attr>.<setter>(layer_ids)``), ``attr``, and for ``direct``:
    ``shape`` (the donor's :class:`~auditor.engines.sglang.donor.SetterShape` as a dict),
    ``wrapper`` (its :class:`~auditor.engines.sglang.donor.WrapperShape`), ``guard`` (how to return
    early off the last pipeline rank where the donor does: one of :data:`GUARDS`, or None), ``donor`` (the donor's
    class name, for the report). ``module`` / ``is_package`` name this file. ``kind`` None: no
    setter (it is there already, or the method is ``mtp``). ``getters``: the methods the EAGLE
    workers call on the target, each ``{"name", "kind": "return", "paths", "single", "donor"}``
    (``return self.model.embed_tokens.weight, self.lm_head.weight``, the donor's attributes) or
    ``{"name", "kind": "delegate", "attr"}`` (``return self.language_model.<name>()``); see
    :func:`getter_source`.

    ``direct`` also initialises the capture flag to ``False`` at the end of ``__init__`` and makes
    ``forward`` unpack ``hidden_states, aux_hidden_states = hidden_states`` under
    ``if self.<flag>:`` right after the statement that runs the inner model (called, or handed to a
    helper such as ``general_mm_embed_routine(language_model=self.model)``), then hand
    ``aux_hidden_states`` to each ``self.<logits processor>(...)`` call that takes the hidden
    states, at the donor's position. It refuses (:class:`NotAutoFixable`) a ``forward`` where that
    statement is not one plain assignment at the top of the body, or where no such call exists.
    Idempotent: an existing setter, getter, flag or unpack is left as it is.
    """

    NAME = "sglang-interface"
    GATE = "interface"
    DESCRIPTION = ("Add set_eagle3_layers_to_capture (SGLang) to the class that holds the code, with the capture "
                   "flag and the forward that hands the aux hidden states to the logits processor, as the tree's "
                   "donor model does, and the getters the EAGLE workers call (get_embed_and_head); multimodal "
                   "wrappers delegate to their language model.")
    _SHAPE = {"flag": "capture_aux_hidden_states", "capture_attr": "layers_to_capture",
              "num_layers": ["config", "num_hidden_layers"], "default": [["const", 2], ["//", 2], ["-", 3]],
              "offset": 1, "guard": True}
    _WRAPPER = {"call": "logits_processor", "position": 4, "keyword": None}
    EXAMPLES = [
        CodemodExample(
            {"class": "ToyForCausalLM", "setter": "set_eagle3_layers_to_capture", "kind": "direct", "attr": "model",
             "shape": _SHAPE, "wrapper": _WRAPPER, "guard": None, "donor": "LlamaForCausalLM"},
            before=dedent('''\
                class ToyForCausalLM(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.config = config
                        self.model = ToyModel(config)
                        self.logits_processor = LogitsProcessor(config)

                    def forward(self, input_ids, positions, forward_batch):
                        hidden_states = self.model(input_ids, positions, forward_batch)
                        return self.logits_processor(
                            input_ids, hidden_states, self.model.embed_tokens, forward_batch
                        )
            '''),
            after=dedent('''\
                class ToyForCausalLM(nn.Module):
                    def __init__(self, config):
                        super().__init__()
                        self.config = config
                        self.model = ToyModel(config)
                        self.logits_processor = LogitsProcessor(config)
                        self.capture_aux_hidden_states = False

                    def forward(self, input_ids, positions, forward_batch):
                        hidden_states = self.model(input_ids, positions, forward_batch)
                        aux_hidden_states = None
                        if self.capture_aux_hidden_states:
                            hidden_states, aux_hidden_states = hidden_states
                        return self.logits_processor(
                            input_ids,
                            hidden_states,
                            self.model.embed_tokens,
                            forward_batch,
                            aux_hidden_states,
                        )

                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        self.capture_aux_hidden_states = True
                        if layer_ids is None:
                            num_layers = self.config.num_hidden_layers
                            self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
                        else:
                            self.model.layers_to_capture = [val + 1 for val in layer_ids]
            '''),
            note="a wrapper that holds its inner model: setter, flag and the aux states to the logits processor",
        ),
        CodemodExample(
            {"class": "ToyPPForCausalLM", "setter": "set_eagle3_layers_to_capture", "kind": "direct", "attr": "model",
             "shape": _SHAPE, "wrapper": _WRAPPER, "guard": "self.pp_group", "donor": "LlamaForCausalLM"},
            before=dedent('''\
                class ToyPPForCausalLM(nn.Module):
                    def __init__(self, config):
                        self.pp_group = get_pp_group()
                        self.model = ToyModel(config)
                        self.capture_aux_hidden_states = False

                    def forward(self, input_ids, positions, forward_batch, get_embedding=False):
                        hidden_states = general_mm_embed_routine(
                            input_ids=input_ids, language_model=self.model, positions=positions
                        )
                        aux_hidden_states = None
                        if self.capture_aux_hidden_states:
                            hidden_states, aux_hidden_states = hidden_states
                        if get_embedding:
                            return self.pooler(hidden_states, forward_batch)
                        return self.logits_processor(
                            input_ids, hidden_states, self.lm_head, forward_batch, aux_hidden_states
                        )
            '''),
            after=dedent('''\
                class ToyPPForCausalLM(nn.Module):
                    def __init__(self, config):
                        self.pp_group = get_pp_group()
                        self.model = ToyModel(config)
                        self.capture_aux_hidden_states = False

                    def forward(self, input_ids, positions, forward_batch, get_embedding=False):
                        hidden_states = general_mm_embed_routine(
                            input_ids=input_ids, language_model=self.model, positions=positions
                        )
                        aux_hidden_states = None
                        if self.capture_aux_hidden_states:
                            hidden_states, aux_hidden_states = hidden_states
                        if get_embedding:
                            return self.pooler(hidden_states, forward_batch)
                        return self.logits_processor(
                            input_ids, hidden_states, self.lm_head, forward_batch, aux_hidden_states
                        )

                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        if not self.pp_group.is_last_rank:
                            return

                        self.capture_aux_hidden_states = True
                        if layer_ids is None:
                            num_layers = self.config.num_hidden_layers
                            self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
                        else:
                            self.model.layers_to_capture = [val + 1 for val in layer_ids]
            '''),
            note="flag and forward already there: only the setter, with the pipeline guard",
        ),
        CodemodExample(
            {"class": "ToyVLForConditionalGeneration", "setter": "set_eagle3_layers_to_capture", "kind": "delegate",
             "attr": "language_model"},
            before=dedent('''\
                class ToyVLForConditionalGeneration(nn.Module):
                    def __init__(self, config):
                        self.language_model = ToyForCausalLM(config.text_config)
            '''),
            after=dedent('''\
                class ToyVLForConditionalGeneration(nn.Module):
                    def __init__(self, config):
                        self.language_model = ToyForCausalLM(config.text_config)

                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        self.language_model.set_eagle3_layers_to_capture(layer_ids)
            '''),
            note="a multimodal wrapper delegates to its language model",
        ),
        CodemodExample(
            {"class": "ToyForCausalLM", "kind": None,
             "getters": [{"name": "get_embed_and_head", "kind": "return", "single": False,
                          "paths": [["model", "embed_tokens", "weight"], ["lm_head", "weight"]],
                          "donor": "LlamaForCausalLM"}]},
            before=dedent('''\
                class ToyForCausalLM(nn.Module):
                    def __init__(self, config):
                        self.model = ToyModel(config)
                        self.lm_head = ParallelLMHead(config.vocab_size, config.hidden_size)
            '''),
            after=dedent('''\
                class ToyForCausalLM(nn.Module):
                    def __init__(self, config):
                        self.model = ToyModel(config)
                        self.lm_head = ParallelLMHead(config.vocab_size, config.hidden_size)

                    def get_embed_and_head(self):
                        return self.model.embed_tokens.weight, self.lm_head.weight
            '''),
            note="the getter the EAGLE worker calls, returning what the donor returns",
        ),
        CodemodExample(
            {"class": "ToyVLForConditionalGeneration", "setter": "set_eagle3_layers_to_capture", "kind": "delegate",
             "attr": "language_model",
             "getters": [{"name": "get_embed_and_head", "kind": "delegate", "attr": "language_model"}]},
            before=dedent('''\
                class ToyVLForConditionalGeneration(nn.Module):
                    def __init__(self, config):
                        self.language_model = ToyForCausalLM(config.text_config)
            '''),
            after=dedent('''\
                class ToyVLForConditionalGeneration(nn.Module):
                    def __init__(self, config):
                        self.language_model = ToyForCausalLM(config.text_config)

                    def set_eagle3_layers_to_capture(self, layer_ids=None):
                        self.language_model.set_eagle3_layers_to_capture(layer_ids)

                    def get_embed_and_head(self):
                        return self.language_model.get_embed_and_head()
            '''),
            note="a multimodal wrapper delegates the setter and the getter to its language model",
        ),
    ]

    @classmethod
    def merge_params(cls, params: dict, other: dict) -> None:
        """The setter of one plan and the getters of another, on the same class: the getters of
        both (each once), and the parameters the first lacks."""
        for k, v in other.items():
            if k == "getters":
                names = {g["name"] for g in params.get("getters", [])}
                params.setdefault("getters", []).extend(g for g in v if g["name"] not in names)
            else:
                params.setdefault(k, v)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        p = self.params
        qualname = identifier(p["class"], "the class")
        has_setter = p.get("kind") is not None
        getters = p.get("getters") or []
        if not isinstance(getters, list) or len(getters) > 8:
            raise NotAutoFixable("the getters are not a short list")
        sources = [getter_source(g) for g in getters]  # validates every name first
        if has_setter:
            setter = identifier(p["setter"], "the setter")
            source = setter_source(p)  # validates every name and number first
        elif not sources:
            raise NotAutoFixable("nothing to add: neither a setter nor a getter")
        cls, depth = find_class(tree, qualname)
        if cls is None:
            what = setter if has_setter else sources[0][0]
            raise NotAutoFixable(f"class {qualname} not found in this module", f"define {what} on {qualname}")
        new_cls = cls
        if has_setter:
            donor = p.get("donor")
            as_in = f" (as in {identifier(donor, 'the donor')})" if donor else ""
            if p["kind"] == "direct":
                flag = identifier(p["shape"]["flag"], "the capture flag")
                new_cls = self._flag_init(tree, new_cls, qualname, flag)
                new_cls = self._forward(tree, new_cls, qualname, flag, depth)
            if setter not in class_methods(cls):
                new_cls = append_to_class(new_cls, [parse_member(source, tree)])
                what = (f"delegates {setter} to self.{p['attr']}" if p["kind"] == "delegate"
                        else f"implemented {setter}: fills self.{p['attr']}.{p['shape']['capture_attr']}{as_in}")
                self.changes.append(f"{qualname} {what}")
        for g, (name, src) in zip(getters, sources):
            if name in class_methods(new_cls):
                continue
            new_cls = append_to_class(new_cls, [parse_member(src, tree)])
            if g["kind"] == "delegate":
                self.changes.append(f"{qualname} delegates {name} to self.{g['attr']}")
            else:
                donor = g.get("donor")
                as_in = f" (as in {identifier(donor, 'the donor')})" if donor else ""
                self.changes.append(f"{qualname} implemented {name}: returns "
                                    f"{', '.join('self.' + '.'.join(x) for x in g['paths'])}{as_in}")
        if new_cls is cls:
            return tree
        return replace(tree, cls, new_cls)

    def _flag_init(self, tree: cst.Module, cls: cst.ClassDef, qualname: str, flag: str) -> cst.ClassDef:
        """``self.<flag> = False`` at the end of ``__init__`` (a class attribute when the class has
        no ``__init__``); nothing when the class already assigns it."""
        if _assigns_self(cls, flag):
            return cls
        init = class_methods(cls).get("__init__")
        if init is None or not isinstance(init.body, cst.IndentedBlock):
            stmt = cst.parse_statement(f"{flag} = False\n", config=tree.config_for_parsing)
            body = list(cls.body.body) if isinstance(cls.body, cst.IndentedBlock) else []
            at = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
                else 0
            body.insert(at, stmt)
            self.changes.append(f"{qualname} declares {flag} = False")
            return cls.with_changes(body=cls.body.with_changes(body=body))
        stmt = cst.parse_statement(f"self.{flag} = False\n", config=tree.config_for_parsing)
        new_init = init.with_changes(body=init.body.with_changes(body=list(init.body.body) + [stmt]))
        self.changes.append(f"{qualname}.__init__ initialises self.{flag} = False")
        return replace(cls, init, new_init)

    def _forward(self, tree: cst.Module, cls: cst.ClassDef, qualname: str, flag: str, depth: int) -> cst.ClassDef:
        """``forward`` unpacks the aux states under ``if self.<flag>:`` and hands them on (see the
        class docstring); unchanged when it already tests the flag."""
        p = self.params
        attr = identifier(p["attr"], "the inner model attribute")
        w = p["wrapper"]
        call = identifier(w["call"], "the logits processor")
        fwd = class_methods(cls).get("forward")
        if fwd is None or not isinstance(fwd.body, cst.IndentedBlock):
            raise NotAutoFixable(f"{qualname} defines no forward in this module",
                                 f"unpack (hidden_states, aux_hidden_states) when self.{flag} and pass them on")
        for n in _If.find(fwd):
            if dotted_name(n.test) == f"self.{flag}":
                return cls  # already unpacks
        inner = f"self.{attr}"
        body = list(fwd.body.body)
        hits = []
        for i, st in enumerate(body):
            if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)):
                continue
            a = st.body[0]
            if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name) or not isinstance(a.value, cst.Call):
                continue
            c = a.value
            if dotted_name(c.func) == inner or any(dotted_name(x.value) == inner for x in c.args):
                hits.append((i, a.targets[0].target.value))
        if len(hits) != 1:
            raise NotAutoFixable(
                f"{qualname}.forward: {'no' if not hits else 'more than one'} plain assignment at the top of its body "
                f"runs {inner}, so where the aux hidden states arrive is not clear",
                f"unpack (hidden_states, aux_hidden_states) when self.{flag} and pass them to self.{call}")
        at, hidden = hits[0]
        aux = _fresh("aux_hidden_states", names_used(fwd))
        # hand aux to each self.<call>(...) that takes the hidden states
        calls = _Calls(call)
        fwd.visit(calls)
        new_calls: dict[cst.Call, cst.Call] = {}
        for c, blocks in calls.calls:
            level = depth + 1 + blocks  # the indentation level of the statement holding the call
            if not any(isinstance(x.value, cst.Name) and x.value.value == hidden for x in c.args):
                continue
            if any(x.star for x in c.args):
                raise NotAutoFixable(f"{qualname}.forward calls self.{call} with *args or **kwargs")
            positional = [x for x in c.args if x.keyword is None]
            if w.get("keyword"):
                kw = identifier(w["keyword"], "the aux keyword")
                if any(x.keyword is not None and x.keyword.value == kw for x in c.args):
                    continue
                arg = cst.Arg(value=cst.Name(aux), keyword=cst.Name(kw),
                              equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                    whitespace_after=cst.SimpleWhitespace("")))
                new_calls[c] = _with_arg(tree, c, arg, len(c.args), level)
                continue
            pos = w.get("position")
            if type(pos) is not int or len(positional) != pos:
                raise NotAutoFixable(
                    f"{qualname}.forward calls self.{call} with {len(positional)} positional arguments; the donor "
                    f"passes the aux hidden states as argument {pos + 1 if type(pos) is int else '?'}",
                    f"pass the aux hidden states to self.{call} by hand")
            new_calls[c] = _with_arg(tree, c, cst.Arg(value=cst.Name(aux)), len(positional), level)
        if not new_calls:
            raise NotAutoFixable(f"{qualname}.forward never hands {hidden} to self.{call}(...)",
                                 "pass the aux hidden states to the logits processor by hand")
        new_fwd = fwd.visit(_Swap(new_calls))
        unpack = [
            cst.parse_statement(f"{aux} = None\n", config=tree.config_for_parsing),
            cst.parse_statement(f"if self.{flag}:\n    {hidden}, {aux} = {hidden}\n", config=tree.config_for_parsing),
        ]
        if tree.default_indent != "    ":
            unpack[1] = cst.parse_statement(f"if self.{flag}:\n{tree.default_indent}{hidden}, {aux} = {hidden}\n",
                                            config=tree.config_for_parsing)
        nbody = list(new_fwd.body.body)
        nbody[at + 1:at + 1] = unpack
        new_fwd = new_fwd.with_changes(body=new_fwd.body.with_changes(body=nbody))
        self.changes.append(f"{qualname}.forward unpacks ({hidden}, {aux}) when self.{flag} and hands {aux} to "
                            f"self.{call}")
        return replace(cls, fwd, new_fwd)


class _If(cst.CSTVisitor):
    def __init__(self):
        self.found: list[cst.If] = []

    def visit_If(self, node: cst.If) -> None:
        self.found.append(node)

    @classmethod
    def find(cls, node: cst.CSTNode) -> list[cst.If]:
        v = cls()
        node.visit(v)
        return v.found


class _Swap(cst.CSTTransformer):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def leave_Call(self, original_node, updated_node):
        return self.mapping.get(original_node, updated_node)

"""Facts of the ``mtp-draft`` gate: how the tree turns a target's HF config into its MTP draft.

Two constructs of vLLM's speculative config (``vllm/config/speculative.py`` from 0.11), found by
what they do, never by name:

- the **rewrite**: a function of one config parameter that assigns ``<cfg>.model_type = "..."``
  and calls ``<cfg>.update({..., "architectures": [...]})`` under a chain of ``if
  <cfg>.model_type == "..."`` / ``in (...)`` / ``<cfg>.architectures[0] == "..."`` branches
  (``SpeculativeConfig.hf_config_override``). Its source is kept (:class:`MtpRewriteFact`) and
  interpreted per target by :func:`draft_of` with :mod:`auditor.index.evaluate`;
- the **method aliases**: ``if self.method in get_args(MTPModelTypes) [and ...]: self.method =
  "mtp"`` (``MTP_MODEL_TYPES``, a tuple, in 0.11.0): the older method strings the tree maps to
  ``mtp``, which are also the draft model_types it accepts as MTP (:class:`MtpMethodsFact`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from auditor.cache import cacheable
from auditor.index.evaluate import Evaluator
from auditor.index.providers import FactProvider, ModuleAst
from auditor.index.summary import Extractor
from auditor.index.syntax import dotted, walk, walk_statements
from auditor.index.values import (
    TOP,
    UNKNOWN_ITEM,
    FrozenDict,
    Inputs,
    State,
    from_json,
    join,
    one,
    values,
)

# -- the rewrite -------------------------------------------------------------------------------


@cacheable
@dataclass
class MtpRewriteFact:
    """The function that rewrites a target's HF config into its MTP draft's.

    ``function``: its name (``hf_config_override``), ``owner``: the enclosing class (or None);
    ``param``: the config parameter (``hf_config``); ``line``/``end_line``: where it is (the
    function is re-read from the file and interpreted per target, see :meth:`rules.base.Context.function_node`);
    ``branches``: the number of ``model_type`` assignments it makes; ``defaults``: parameter →
    whether it defaults to None.
    """

    function: str
    owner: str | None
    param: str
    line: int
    end_line: int
    branches: int
    defaults: dict[str, bool] = field(default_factory=dict)


def _updates_architectures(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
            and node.args):
        return False
    arg = node.args[0]
    return isinstance(arg, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "architectures" for k in arg.keys)


def extract_rewrite(tree: ast.Module) -> list[MtpRewriteFact]:
    """Every function of a module that rewrites a config parameter's ``model_type`` and
    ``architectures`` under branches (see the module docstring)."""
    out = []
    owners: dict[int, str] = {}
    for node in walk(tree):
        if isinstance(node, ast.ClassDef):
            for b in node.body:
                owners[id(b)] = node.name
    for fn in walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        roots: dict[str, int] = {}
        updates = 0
        for n in walk(fn):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if (isinstance(t, ast.Attribute) and t.attr == "model_type" and isinstance(t.value, ast.Name)
                            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)):
                        roots[t.value.id] = roots.get(t.value.id, 0) + 1
            elif _updates_architectures(n):
                updates += 1
        param = next((p for p in params if p in roots), None)
        if param is None or updates == 0:
            continue
        defaults: dict[str, bool] = {}
        pos = fn.args.posonlyargs + fn.args.args
        for a, d in zip(pos[len(pos) - len(fn.args.defaults):], fn.args.defaults):
            defaults[a.arg] = isinstance(d, ast.Constant) and d.value is None
        for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
            defaults[a.arg] = d is not None and isinstance(d, ast.Constant) and d.value is None
        out.append(MtpRewriteFact(fn.name, owners.get(id(fn)), param, fn.lineno, fn.end_lineno or fn.lineno,
                                  roots[param], defaults))
    return out


#: The rewrite extractor: ``vllm/config*`` modules that assign a ``model_type`` and update
#: ``architectures``.
EXTRACTOR = Extractor("mtp-rewrite", extract_rewrite, prefixes=("vllm/config",), needles=(b"model_type", b"architectures",
                                                                                       b".update("))


# -- the method aliases ------------------------------------------------------------------------


@cacheable
@dataclass
class MtpMethodsFact:
    """The MTP method strings of the tree: ``names`` (``deepseek_mtp``, …, ``mtp``) of the list
    the ``if`` at ``line`` tests ``self.method`` against before assigning ``"mtp"``; ``list_name``
    and ``list_line``: the module-level name and line of that list (None when inline)."""

    line: int
    names: list[str]
    list_name: str | None
    list_line: int | None


def _literal_strings(node: ast.AST, module_names: dict[str, ast.AST], depth: int = 0) -> list[str] | None:
    """Strings of ``Literal["a", "b", Other]`` / ``("a", "b")`` / ``["a"]``, resolving names bound
    at module level to such values (nested Literal aliases included)."""
    if depth > 4:
        return None
    if isinstance(node, ast.Name) and node.id in module_names:
        return _literal_strings(module_names[node.id], module_names, depth + 1)
    if isinstance(node, ast.Subscript) and (dotted(node.value) or "").split(".")[-1] == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        elts = node.elts
    else:
        return None
    out: list[str] = []
    for e in elts:
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            out.append(e.value)
        else:
            inner = _literal_strings(e, module_names, depth + 1)
            if inner is None:
                return None
            out += inner
    return out


def extract_methods(tree: ast.Module) -> list[MtpMethodsFact]:
    """Find ``if X.method in <list> ...: X.method = "mtp"`` (see the module docstring)."""
    module_names: dict[str, ast.AST] = {}
    lines: dict[str, int] = {}
    for s in tree.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            module_names[s.targets[0].id] = s.value
            lines[s.targets[0].id] = s.lineno
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
            module_names[s.target.id] = s.value
            lines[s.target.id] = s.lineno
    out = []
    for node in walk(tree):
        if not isinstance(node, ast.If):
            continue
        sets_mtp = any(isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and s.value.value == "mtp"
                       and any(isinstance(t, ast.Attribute) and t.attr == "method" for t in s.targets)
                       for s in node.body)
        if not sets_mtp:
            continue
        tests = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
        for t in tests:
            if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.In)
                    and isinstance(t.left, ast.Attribute) and t.left.attr == "method"):
                continue
            comp = t.comparators[0]
            if isinstance(comp, ast.Call) and (dotted(comp.func) or "").split(".")[-1] == "get_args" and comp.args:
                comp = comp.args[0]
            names = _literal_strings(comp, module_names)
            if not names:
                continue
            list_name = comp.id if isinstance(comp, ast.Name) else None
            out.append(MtpMethodsFact(node.lineno, names, list_name, lines.get(list_name) if list_name else None))
    return out


#: The method-alias extractor: ``vllm/config*`` modules that assign ``"mtp"`` to a method.
METHODS_EXTRACTOR = Extractor("mtp-methods", extract_methods, prefixes=("vllm/config",),
                              needles=(b'"mtp"', b".method"))


# -- accessors ---------------------------------------------------------------------------------


def mtp_methods(ctx) -> tuple[str, MtpMethodsFact] | None:
    """``(path, fact)`` of the tree's MTP method strings, or None when it has none."""
    found = ctx.facts.found(METHODS_EXTRACTOR)
    return found[0] if found else None


def rewrite(ctx) -> tuple[str, MtpRewriteFact] | None:
    """``(path, fact)`` of the tree's MTP config rewrite (the one with the most branches), or None."""
    found = ctx.facts.found(EXTRACTOR)
    if not found:
        return None
    return max(found, key=lambda pf: pf[1].branches)


@dataclass
class DraftOf:
    """What the tree's rewrite makes of one target's HF config.

    ``architectures``: the possible draft architectures (first of each possible list), empty when
    unknown; ``model_types``: the possible draft model_types; ``unchanged``: no branch yields a draft
    architecture (the architectures stay the target's, whatever happened to the model_type: the
    "draft" would be the target model itself); ``raises``: lines of ``raise`` statements every
    path reaches (the rewrite refuses the target); ``undecided``: lines of branch conditions the
    tool could not decide (they depend on checkpoint fields not given); ``unknown``: why the
    rewrite could not be interpreted at all (None when it was).
    """

    architectures: list[str] = field(default_factory=list)
    model_types: list[str] = field(default_factory=list)
    unchanged: bool = False
    raises: list[int] = field(default_factory=list)
    undecided: list[int] = field(default_factory=list)
    unknown: str | None = None
    architecture_known: bool = True
    model_type_known: bool = True


class _TargetConfig(Inputs):
    """The target's HF config as the rewrite sees it: ``model_type`` and ``architectures`` (from
    the checkpoint config when given, else the target's), ``text_config.model_type``, and any
    other field of the checkpoint config."""

    def __init__(self, fact: MtpRewriteFact, arch: str, model_type: str | None, text_model_type: str | None,
                 hf_config: dict | None):
        self.param = fact.param
        self.roots = (fact.param,)
        self.defaults = fact.defaults
        self.arch = arch
        self.model_type = model_type
        self.text_model_type = text_model_type
        self.hf = hf_config

    def _json(self, path: str):
        if self.hf is None:
            return False, None
        cur = self.hf
        for part in path.split(".")[1:]:
            if not isinstance(cur, dict) or part not in cur:
                return True, None
            cur = cur[part]
        return True, cur

    def value(self, path: str):
        p = self.param
        if path == f"{p}.model_type":
            return one(self.model_type) if self.model_type else TOP
        if path == f"{p}.architectures":
            archs = (self.hf or {}).get("architectures") if isinstance((self.hf or {}).get("architectures"), list) else None
            return one(tuple(archs) if archs else (self.arch,))
        if path == f"{p}.text_config.model_type" and self.text_model_type:
            return one(self.text_model_type)
        if path.count(".") == 0 and path in self.defaults:
            return one(None) if self.defaults[path] else TOP
        known, v = self._json(path)
        if known and v is not None:
            return one(from_json(v))
        return super().value(path)

    def has(self, path: str):
        p = self.param
        if path in (f"{p}.model_type", f"{p}.architectures"):
            return True
        if path == f"{p}.text_config":
            if self.hf is not None:
                return isinstance(self.hf.get("text_config"), dict)
            if self.text_model_type and self.model_type:
                return self.text_model_type != self.model_type
            return None
        known, v = self._json(path)
        if known:
            return v is not None
        return None


def _update_hook(ev: Evaluator, node: ast.Call, st: State):
    """``cfg.update({...})`` on a config object: sets the given fields."""
    fn = node.func
    if not (isinstance(fn, ast.Attribute) and fn.attr == "update" and len(node.args) == 1 and not node.keywords):
        return NotImplemented
    ok, base = ev.object_path(fn.value, st)
    if not ok:
        return NotImplemented
    v = ev.eval(node.args[0], st)
    if base is None:
        return one(None)
    if v is TOP:
        for k in list(st.env):
            if k.startswith(base + "."):
                st.env[k] = TOP
        for field_ in ("architectures", "model_type"):
            st.env[f"{base}.{field_}"] = TOP
        return one(None)
    dicts = [d for d in v if isinstance(d, FrozenDict)]
    keys = {k for d in dicts for k in d.keys() if isinstance(k, str)}
    for k in keys:
        path = f"{base}.{k}"
        acc = None
        first = True
        for d in dicts:
            item = d.get(k)
            cur = (TOP if item is UNKNOWN_ITEM else one(item)) if d.has(k) else ev.read(path, st)
            acc = cur if first else join(acc, cur)
            first = False
        ev.write(path, acc, st)
    return one(None)


def draft_of(ctx, arch: str, model_type: str | None, text_model_type: str | None,
             hf_config: dict | None = None) -> tuple[str, MtpRewriteFact, DraftOf] | None:
    """Interpret the tree's MTP rewrite for one target (cached per tree and input).

    Args:
        ctx: the rule context of the tree.
        arch: the target's architecture; model_type/text_model_type: its HF config's.
        hf_config: the checkpoint's config.json, when given (its fields decide branches that
            test them, such as ``hasattr(hf_config, "num_nextn_predict_layers")``).
    Returns:
        ``(path, rewrite fact, DraftOf)``, or None when the tree has no rewrite.
    """
    if rewrite(ctx) is None:
        return None
    return ctx.get(MtpDraftOf, (arch, model_type, text_model_type, _Config(hf_config)))


class _Config:
    """A checkpoint config.json as a key: equal and hashed by its JSON text."""

    def __init__(self, value: dict | None):
        import json

        self.value = value
        self.text = json.dumps(value, sort_keys=True, default=str) if value is not None else None

    def __eq__(self, other) -> bool:
        return isinstance(other, _Config) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


class MtpDraftOf(FactProvider):
    """``(path, rewrite fact, DraftOf)``: the tree's MTP rewrite (``vllm/config/speculative.py``)
    interpreted for one target; the key is ``(architecture, model_type, text model_type,
    checkpoint config)``. Only asked for when the tree has a rewrite (:func:`draft_of`)."""

    DEPENDS_ON = (ModuleAst,)

    @classmethod
    def compute(cls, ctx, key) -> tuple[str, MtpRewriteFact, DraftOf]:
        arch, model_type, text_model_type, cfg = key
        return _interpret(ctx, arch, model_type, text_model_type, cfg.value)


def _interpret(ctx, arch: str, model_type: str | None, text_model_type: str | None,
               hf_config: dict | None) -> tuple[str, MtpRewriteFact, DraftOf]:
    path, fact = rewrite(ctx)
    fn = ctx.function_node(path, fact.function, fact.line)
    out = DraftOf()
    if fn is None:
        out.unknown = f"{fact.function} could not be re-read"
    else:
        inputs = _TargetConfig(fact, arch, model_type, text_model_type, hf_config)
        ev = Evaluator(inputs, _update_hook)
        initial_arch = inputs.value(f"{fact.param}.architectures")
        outcomes = ev.run_function(fn)
        if outcomes is None:
            out.unknown = f"{fact.function} is too long to interpret"
        else:
            ends = [o for o in outcomes if o.kind in ("return", "end")]
            out.raises = sorted({o.line for o in outcomes if o.kind == "raise" and o.line})
            archs: set[str] = set()
            mts: set[str] = set()
            changed = False
            for o in ends:
                base = o.returned if o.kind == "return" else fact.param
                if base is None:
                    out.architecture_known = out.model_type_known = False
                    continue
                a = ev.read(f"{base}.architectures", o.state)
                m = ev.read(f"{base}.model_type", o.state)
                if a is TOP:
                    out.architecture_known = False
                else:
                    for lst in values(a):
                        if isinstance(lst, tuple) and lst and isinstance(lst[0], str):
                            archs.add(lst[0])
                        else:
                            out.architecture_known = False
                    if a != initial_arch:
                        changed = True
                if m is TOP:
                    out.model_type_known = False
                else:
                    mts |= {x for x in values(m) if isinstance(x, str)}
                out.undecided += [ln for ln in o.state.undecided if ln not in out.undecided]
            out.architectures = sorted(archs)
            out.model_types = sorted(mts)
            out.unchanged = bool(ends) and not changed and out.architecture_known
    return path, fact, out


def rewrite_applies_to_draft_model(ctx, path: str, function: str) -> int | None:
    """The line of the call in the module at ``path`` that builds the draft's model config from
    the speculative ``model`` (the drafter checkpoint, when one is given) with ``hf_overrides``
    reaching ``function``: the function itself (vLLM 0.21.0 ``config/speculative.py``:
    ``ModelConfig(model=self.model, ..., hf_overrides=SpeculativeConfig.hf_config_override)``) or
    a call of a function of the module that names it (0.25.1:
    ``draft_hf_overrides = SpeculativeConfig.compose_draft_hf_overrides(...)``, which returns or
    wraps it, then ``hf_overrides=draft_hf_overrides``; locals and calls followed three deep). The rewrite then judges the drafter checkpoint's own config. None
    when no such call exists or the module does not parse. Read with ``ast``, never imported
    (:class:`DraftModelHook`, computed once per module and function)."""
    return ctx.get(DraftModelHook, (path, function))


class DraftModelHook(FactProvider):
    """The line of the call that builds the draft's model config from the speculative ``model``
    with ``hf_overrides`` reaching a function (see :func:`rewrite_applies_to_draft_model`); the
    key is ``(module path, function name)``; None when there is none."""

    DEPENDS_ON = (ModuleAst,)

    @classmethod
    def compute(cls, ctx, key: tuple[str, str]) -> int | None:
        path, function = key
        tree = ctx.get(ModuleAst, path)
        if tree is None:
            return None
        return _draft_model_hook_line(tree, function)


def _draft_model_hook_line(tree: ast.Module, function: str) -> int | None:
    """The line of the first such call in the parsed module ``tree`` (None when there is none)."""
    defs = {n.name: n for n in walk_statements(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def named(e: ast.AST) -> str | None:
        return e.attr if isinstance(e, ast.Attribute) else e.id if isinstance(e, ast.Name) else None

    assigned: dict[str, list[ast.AST]] = {}
    for n in walk(tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(n.value)

    def reaches(e: ast.AST, depth: int) -> bool:
        if named(e) == function:
            return True
        if isinstance(e, ast.Name) and depth > 0:  # a local bound to it (0.25.1 draft_hf_overrides)
            return any(reaches(v, depth - 1) for v in assigned.get(e.id, ()))
        if isinstance(e, ast.Call) and depth > 0:
            fn = defs.get(named(e.func) or "")
            if fn is not None and fn.name != function:
                return any(reaches(n, depth - 1) for n in walk(fn) if isinstance(n, (ast.Name, ast.Attribute, ast.Call))
                           and n is not fn)
        return False

    for node in walk(tree):
        if not isinstance(node, ast.Call):
            continue
        kws = {k.arg: k.value for k in node.keywords if k.arg}
        hook = kws.get("hf_overrides")
        if hook is not None and "model" in kws and reaches(hook, 3):
            return node.lineno
    return None


def drafter_checkpoint(target) -> tuple | None:
    """For ``target`` (a :class:`rules.base.AuditTarget`) with ``--draft-config`` (an MTP
    drafter shipped as its own checkpoint, as Gemma 4's ``gemma4_assistant`` from vLLM 0.21): ``(architecture, model_type, text model_type, config,
    phrase)`` of that checkpoint, which is what the release's rewrite judges; ``(None, ..., why)``
    when the config names no architecture or model_type; None without ``--draft-config``."""
    dc = target.options.draft_config
    if dc is None:
        return None
    where = target.options.draft_config_path or "--draft-config"
    archs = [a for a in dc.get("architectures") or [] if isinstance(a, str)]
    mt = dc.get("model_type") if isinstance(dc.get("model_type"), str) else None
    if not archs or not mt:
        return (None, None, None, None, f"the drafter checkpoint {where} (--draft-config) declares no "
                f"{'architectures' if not archs else 'model_type'}: the MTP draft cannot be named")
    tc = dc.get("text_config")
    tmt = tc.get("model_type") if isinstance(tc, dict) and isinstance(tc.get("model_type"), str) else None
    return archs[0], mt, tmt or mt, dc, f"the drafter checkpoint {where}, --draft-config"

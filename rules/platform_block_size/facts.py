"""Facts of the ``platform-block-size`` gate, found by structure.

- A platform module (``vllm/platforms/<platform>.py``; vLLM 0.32.0's ``cpu.py``) may force the
  KV-cache block size of MLA models: ``cache_config.block_size = 16`` under an ``if`` whose test,
  through the method's own local names, reads ``use_mla``. The test is kept as a small expression
  tree (:func:`condition`) that the rule evaluates per target: ``use_mla``, the model_type
  compared with a string, and what it cannot know (a hardware query such as
  ``torch.cpu._is_amx_tile_supported()``, a user's option) (:data:`PLATFORM_EXTRACTOR`).
- The same module's ``get_attn_backend_cls`` returns the backend of a model without MLA (the
  drafter's): ``AttentionBackendEnum.CPU_ATTN.get_path()`` or a dotted string.
- ``vllm/v1/attention/``: the enum's members (``CPU_ATTN = "vllm....CPUAttentionBackend"``) and
  each backend class's ``get_supported_kernel_block_sizes`` (``[MultipleOf(32)]``, ``[16]``)
  (:data:`BACKEND_EXTRACTOR`).
- ``vllm/v1/worker/``: the function that picks one block size for all backends and raises when
  there is none (``select_common_block_size`` in ``utils.py``) (:data:`SELECT_EXTRACTOR`).
- The model_types that use MLA: the ``self.is_*`` that ``use_mla`` reads (``vllm/config/model.py``),
  and a function of that name testing ``<config>.model_type in (<strings>)`` (``is_deepseek_mla`` in
  ``vllm/transformers_utils/model_arch_config_convertor.py``) (:data:`MLA_TYPES_EXTRACTOR`).
- The platform classes ``vllm/platforms/__init__.py`` names (:data:`PLATFORM_CLASSES_EXTRACTOR`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from auditor.cache import cacheable
from auditor.index.importsteps import bound_by
from auditor.index.summary import Extractor

#: how deep a test is followed through local names
_DEPTH = 12


@cacheable
@dataclass
class ForcedBlockSize:
    """One forced block size: ``cls.method`` sets ``block_size = size`` at ``line`` when ``cond``
    holds (a list tree: ``["and", a, b]``, ``["or", a, b]``, ``["not", a]``, ``["mla"]``,
    ``["mt", "deepseek_v4"]`` (model_type equals), ``["true"]``, ``["false"]``,
    ``["unknown", text, line]``); ``others``: ``(line, text)`` of the module's other writes of a
    block size outside that ``if``/``elif`` chain (they may change it later)."""

    cls: str
    method: str
    line: int
    size: int
    cond: list
    others: list = field(default_factory=list)


@cacheable
@dataclass
class PlatformBlockFacts:
    """One platform module: ``forced``: its :class:`ForcedBlockSize` list; ``default_backend``:
    ``cls`` → ``(line, enum class name or "", member or dotted path)`` of the backend its
    ``get_attn_backend_cls`` returns last (a model without MLA)."""

    forced: list = field(default_factory=list)
    default_backend: dict = field(default_factory=dict)


def _is_attr(node: ast.AST, name: str) -> bool:
    """``x.name`` or ``getattr(x, "name", ...)``."""
    if isinstance(node, ast.Attribute):
        return node.attr == name
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == name)


def condition(e: ast.AST, env: dict[str, ast.AST], depth: int = 0) -> list:
    """The expression tree of test ``e`` (see :class:`ForcedBlockSize`), local names replaced by
    what ``env`` (name → the value last assigned before the test) binds them to."""
    if depth > _DEPTH:
        return ["unknown", "a test nested too deep", getattr(e, "lineno", 0)]
    if isinstance(e, ast.BoolOp):
        op = "and" if isinstance(e.op, ast.And) else "or"
        out = condition(e.values[0], env, depth + 1)
        for v in e.values[1:]:
            out = [op, out, condition(v, env, depth + 1)]
        return out
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return ["not", condition(e.operand, env, depth + 1)]
    if isinstance(e, ast.Constant) and isinstance(e.value, bool):
        return ["true"] if e.value else ["false"]
    if isinstance(e, ast.Name) and e.id in env:
        value = env[e.id]
        if isinstance(value, ast.stmt):  # bound last by a statement not followed (a block, +=, del, ...)
            return ["unknown", f"{e.id} (bound by {ast.unparse(value).splitlines()[0][:120]})", value.lineno]
        inner = {k: v for k, v in env.items() if k != e.id}  # a name bound from itself is not followed
        return condition(value, inner, depth + 1)
    if _is_attr(e, "use_mla"):
        return ["mla"]
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and _is_attr(e.left, "model_type"):
        c = e.comparators[0]
        if isinstance(c, ast.Constant) and isinstance(c.value, str) and isinstance(e.ops[0], (ast.Eq, ast.NotEq)):
            return ["mt", c.value] if isinstance(e.ops[0], ast.Eq) else ["not", ["mt", c.value]]
    if (isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], ast.IsNot)
            and isinstance(e.comparators[0], ast.Constant) and e.comparators[0].value is None
            and isinstance(e.left, (ast.Name, ast.Attribute)) and ast.unparse(e.left).endswith("model_config")):
        return ["true"]  # a serving run has a model config
    return ["unknown", ast.unparse(e)[:160], getattr(e, "lineno", 0)]


def _block_size_write(s: ast.stmt) -> int | None:
    """``<x>.block_size = <int>``: the int (None for anything else)."""
    if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Attribute)
            and s.targets[0].attr == "block_size" and isinstance(s.value, ast.Constant)
            and isinstance(s.value.value, int) and not isinstance(s.value.value, bool)):
        return s.value.value
    return None


def _writes(fn: ast.AST) -> list[tuple[int, str]]:
    return [(n.lineno, ast.unparse(n)[:160]) for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign))
            and any(isinstance(t, ast.Attribute) and t.attr == "block_size"
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]


def _chain_lines(top: ast.If) -> set[int]:
    """The lines of every statement in an ``if``/``elif``/``else`` chain."""
    return {n.lineno for n in ast.walk(top) if isinstance(n, ast.stmt)}


def _bound_names(node: ast.AST) -> set[str]:
    """The names a statement (or expression) binds or deletes in the function's own scope: what
    :func:`auditor.index.importsteps.bound_by` says of each of its nodes (targets of every kind,
    imports, ``global``, ``except``/``match`` names, nested ``def``/``class`` names); nested
    scopes and lambdas are not entered."""
    out: set[str] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        out |= bound_by(n)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(n))
    return out


def _later_writes(body: list[ast.stmt], i: int) -> list[tuple[int, str]]:
    """The block-size writes after ``body[i]`` in the same block (they may undo it)."""
    return [w for s in body[i + 1:] for w in _writes(s)]


#: the platform hook the engine calls with the config; a write elsewhere rests on a call
_HOOK = "check_and_update_config"


def _forced_in(cls: ast.ClassDef, fn: ast.FunctionDef, module_writes: list[tuple[int, str]]) -> list[ForcedBlockSize]:
    out: list[ForcedBlockSize] = []
    env: dict[str, ast.AST] = {}
    reach: list = ["true"]  # the method gets this far: no earlier return/raise was taken
    for s in fn.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            for name in _bound_names(s.value):  # a walrus in the value
                env[name] = s
            env[s.targets[0].id] = s.value
            continue
        if not isinstance(s, ast.If):
            for name in _bound_names(s):
                env[name] = s
            reach = _past(s, reach, env)
            continue
        # walk the if/elif chain: branch k holds when every earlier test failed and its own holds
        before: list = reach
        branch: ast.If | None = s
        while branch is not None:
            test = condition(branch.test, env)
            holds = ["and", before, test]
            if fn.name != _HOOK:
                holds = ["and", holds, ["unknown", f"a call of {cls.name}.{fn.name} (not {_HOOK})", fn.lineno]]
            for i, b in enumerate(branch.body):
                size = _block_size_write(b)
                if size is not None:
                    obj = _not_cache_config(b, env)
                    if obj is not None:
                        holds = ["and", holds, obj]
                    chain = _chain_lines(s)
                    others = [w for w in module_writes if w[0] not in chain] + _later_writes(branch.body, i)
                    out.append(ForcedBlockSize(cls.name, fn.name, b.lineno, size, holds, others))
            before = ["and", before, ["not", test]]
            nxt = branch.orelse
            branch = nxt[0] if len(nxt) == 1 and isinstance(nxt[0], ast.If) else None
        reach = _past(s, reach, env)
        for name in _bound_names(s):
            env[name] = s
    return out


def _exits(node: ast.AST) -> list[ast.stmt]:
    """The ``return``/``raise`` statements of the function ``node`` belongs to (nested scopes left out)."""
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Return, ast.Raise)):
            out.append(n)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)) or n is node:
            todo.extend(ast.iter_child_nodes(n))
    return out


def _past(s: ast.stmt, reach: list, env: dict[str, ast.AST]) -> list:
    """``reach`` after statement ``s``: ``if <test>: ...; return`` (no else) goes on when the test
    fails; any other return/raise in ``s`` leaves it undecided, named at its line."""
    exits = _exits(s)
    if not exits:
        return reach
    if isinstance(s, ast.If) and not s.orelse and isinstance(s.body[-1], (ast.Return, ast.Raise)) \
            and exits == [s.body[-1]]:
        return ["and", reach, ["not", condition(s.test, env)]]
    first = min(exits, key=lambda e: e.lineno)
    return ["and", reach, ["unknown", f"an earlier {ast.unparse(first).split(chr(10))[0][:80]} not taken", first.lineno]]


def _not_cache_config(write: ast.Assign, env: dict[str, ast.AST]) -> list | None:
    """None when the object of ``<x>.block_size = n`` is the config's cache config
    (``vllm_config.cache_config``, or a local bound to it); else an undecided atom naming it."""
    obj = write.targets[0].value
    seen = obj
    if isinstance(obj, ast.Name) and isinstance(env.get(obj.id), ast.expr):
        seen = env[obj.id]
    if isinstance(seen, ast.Attribute) and seen.attr == "cache_config":
        return None
    return ["unknown", f"{ast.unparse(obj)[:80]} (the object written, not read as the cache config)", write.lineno]


def _live_methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods the class body binds last: a ``def`` rebound later (another ``def``, an
    assignment) is dead."""
    last: dict[str, ast.stmt] = {}
    for s in cls.body:
        for name in _bound_names(s):
            last[name] = s
    return [s for s in last.values() if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _backend_of(fn: ast.FunctionDef) -> tuple[int, str, str] | None:
    """The last top-level ``return`` of ``get_attn_backend_cls``: ``Enum.MEMBER.get_path()`` →
    ``(line, "Enum", "MEMBER")``; a dotted string → ``(line, "", "the.dotted.Path")``."""
    ret = next((s for s in reversed(fn.body) if isinstance(s, ast.Return)), None)
    if ret is None or ret.value is None:
        return None
    v = ret.value
    if (isinstance(v, ast.Call) and not v.args and isinstance(v.func, ast.Attribute) and v.func.attr == "get_path"
            and isinstance(v.func.value, ast.Attribute) and isinstance(v.func.value.value, ast.Name)):
        return ret.lineno, v.func.value.value.id, v.func.value.attr
    if isinstance(v, ast.Constant) and isinstance(v.value, str) and "." in v.value:
        return ret.lineno, "", v.value
    return None


def extract_platform(tree: ast.Module) -> list[PlatformBlockFacts]:
    """The forced block sizes and the default attention backend of one platform module."""
    facts = PlatformBlockFacts()
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        methods = _live_methods(cls)
        writes = [w for f in methods for w in _writes(f)]
        for fn in methods:
            facts.forced += _forced_in(cls, fn, writes)
            if fn.name == "get_attn_backend_cls":
                b = _backend_of(fn)
                if b is not None:
                    facts.default_backend[cls.name] = list(b)
    return [facts] if (facts.forced or facts.default_backend) else []


@cacheable
@dataclass
class BackendFacts:
    """One module of ``vllm/v1/attention/``: ``members``: ``Enum.MEMBER`` → dotted class path;
    ``sizes``: backend class → ``(line, [["int", 16] | ["multiple", 32], ...])`` from its
    ``get_supported_kernel_block_sizes`` (a list literal it returns)."""

    members: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=dict)


def _sizes(fn: ast.FunctionDef) -> list | None:
    rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if len(rets) != 1 or not isinstance(rets[0].value, ast.List):
        return None
    out = []
    for e in rets[0].value.elts:
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
            out.append(["int", e.value])
        elif (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "MultipleOf" and len(e.args) == 1
              and isinstance(e.args[0], ast.Constant) and isinstance(e.args[0].value, int)):
            out.append(["multiple", e.args[0].value])
        else:
            return None
    return out


def extract_backends(tree: ast.Module) -> list[BackendFacts]:
    """The enum members naming backend classes, and the block sizes each backend class accepts."""
    facts = BackendFacts()
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for s in cls.body:  # the last binding of a name wins: one not followed drops what was read
            for name in _bound_names(s):
                facts.members.pop(f"{cls.name}.{name}", None)
                if name == "get_supported_kernel_block_sizes":
                    facts.sizes.pop(cls.name, None)
            if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                    and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
                    and s.value.value.startswith("vllm.")):
                facts.members[f"{cls.name}.{s.targets[0].id}"] = s.value.value
            if isinstance(s, ast.FunctionDef) and s.name == "get_supported_kernel_block_sizes":
                sizes = _sizes(s)
                if sizes is not None:
                    facts.sizes[cls.name] = [s.lineno, sizes]
    return [facts] if (facts.members or facts.sizes) else []


def extract_select(tree: ast.Module) -> list[list]:
    """``[function, line of its raise]`` for each top-level function that asks the backends for
    their block sizes and raises when none fits."""
    out = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        asks = any(isinstance(n, ast.Attribute) and n.attr == "get_supported_kernel_block_sizes" for n in ast.walk(fn))
        raises = [s for s in fn.body if isinstance(s, ast.Raise)]
        if asks and raises:
            out.append([fn.name, raises[-1].lineno])
    return out


def extract_mla_types(tree: ast.Module) -> list[list]:
    """The facts that decide which model_types use MLA, by structure:

    - ``["reads", "use_mla", [name, ...]]``: the ``self.<name>`` a ``use_mla`` function reads
      (vLLM: ``ModelConfig.use_mla`` returns ``self.is_deepseek_mla``, ``vllm/config/model.py``);
    - ``["list", function, line, [model_type, ...]]``: a function that tests
      ``<config>.model_type in (<strings>)`` (``is_deepseek_mla`` in
      ``vllm/transformers_utils/model_arch_config_convertor.py``). The rule takes a list only from
      a function whose name a ``use_mla`` reads."""
    out: list[list] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        if fn.name == "use_mla":
            names = sorted({n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute) and n.attr.startswith("is_")
                            and isinstance(n.value, ast.Name) and n.value.id == "self"})
            if names:
                out.append(["reads", fn.name, names])
            continue
        for n in ast.walk(fn):
            if (isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.In)
                    and _is_attr(n.left, "model_type") and isinstance(n.comparators[0], (ast.Tuple, ast.List, ast.Set))):
                types = [e.value for e in n.comparators[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if types and len(types) == len(n.comparators[0].elts):
                    out.append(["list", fn.name, n.lineno, types])
    return out


def extract_platform_classes(tree: ast.Module) -> list[str]:
    """The platform classes ``vllm/platforms/__init__.py`` names (``"vllm.platforms.cpu.CpuPlatform"``,
    returned by ``cpu_platform_plugin``)."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("vllm.platforms."):
            parts = n.value.split(".")
            if len(parts) == 4 and all(p.isidentifier() for p in parts):
                out.append(n.value)
    return out


#: Platform modules: forced block sizes and the default attention backend.
PLATFORM_EXTRACTOR = Extractor("platform-block-size", extract_platform, prefixes=("vllm/platforms/",),
                               needles=(b"block_size", b"use_mla"))


def _backend_module(source: bytes) -> bool:
    """A module that declares kernel block sizes or an enum (module-level: extractors go to
    worker processes by pickle, which a lambda does not survive)."""
    return b"get_supported_kernel_block_sizes" in source or b"Enum" in source


#: Attention backends: the enum's members and each backend's kernel block sizes.
BACKEND_EXTRACTOR = Extractor("attention-block-sizes", extract_backends, prefixes=("vllm/v1/attention/",),
                              prefilter=_backend_module)
#: The worker's choice of one block size for all backends, and its refusal.
SELECT_EXTRACTOR = Extractor("common-block-size", extract_select, prefixes=("vllm/v1/worker/",),
                             needles=(b"get_supported_kernel_block_sizes",))
#: The model_types that use MLA.
MLA_TYPES_EXTRACTOR = Extractor("mla-model-types", extract_mla_types,
                                prefixes=("vllm/transformers_utils/", "vllm/config/"), needles=(b"mla",))
#: The platform classes the platform package names.
PLATFORM_CLASSES_EXTRACTOR = Extractor("platform-classes", extract_platform_classes,
                                       suffixes=("vllm/platforms/__init__.py",), needles=(b"vllm.platforms.",))

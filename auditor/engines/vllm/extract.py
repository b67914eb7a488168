"""Content-gated extractors: facts that only a few vLLM modules hold.

Each extractor runs in the same pass as :func:`auditor.index.summary.summarize`, only on modules whose
bytes contain its trigger words, and stores a plain record in ``ModuleSummary.extras``. Every
extractor finds its target by what the code does, never by a variable name, a line or a version:

- ``allowlist``: a condition that tests the speculative method against ``"eagle3"`` together with
  a membership test on a ``model_type`` and raises (``vllm/config.py`` in 0.10.0,
  ``vllm/config/speculative.py`` from 0.11.0, under the names ``eagle3_target_supported`` and
  later ``aux_hidden_states_supported``).
- ``image_token``: the EAGLE proposer's per-architecture branches that copy an image token id
  into the drafter config (``vllm/v1/spec_decode/eagle.py``, ``llm_base_proposer.py`` from 0.20).
- ``tables``: module-level dict tables evaluated statically (the model registry
  ``vllm/model_executor/models/registry.py`` and the HF config registry
  ``vllm/transformers_utils/config.py``), including ``**spread`` and simple dict comprehensions.
- ``scan_eagle3_calls``: the ``get_eagle3_*`` methods that runtime code calls (used to tell a
  live protocol method from a stale one), by a text scan of the runtime modules.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from auditor.index.summary import ModuleSummary, dotted


@dataclass
class AllowlistFact:
    """The EAGLE-3 target model_type allowlist as one tree has it.

    ``line``: the ``if`` that raises; ``list_name``/``list_line``: the list variable and the line
    of its assignment (None for an inline test such as ``"llama" not in ...model_type``);
    ``entries``: the allowed strings; ``methods``: the speculative methods the test applies to;
    ``substring``: True for vLLM's ``any(s in model_type ...)`` / ``"x" in model_type`` semantics,
    False for ``model_type in LIST`` (exact); ``subject``: the source text of the model_type
    expression (``self.target_model_config.hf_text_config.model_type``); ``function``: the
    enclosing function.
    """

    line: int
    list_name: str | None
    list_line: int | None
    entries: list[str]
    methods: list[str]
    substring: bool
    subject: str
    function: str


@dataclass
class ImageTokenBranch:
    """One branch of the proposer's image-token chain: the architectures it names (empty for the
    fallback ``else``), the attribute path it reads from the target (``config.image_token_id``),
    and its line."""

    architectures: list[str]
    attr_path: str
    line: int


@dataclass
class ImageTokenFact:
    """The proposer's image-token handling: ``line`` of the ``supports_multimodal(...)`` test,
    ``branches`` in order (the fallback last, with no architectures), ``function``."""

    line: int
    function: str
    branches: list[ImageTokenBranch] = field(default_factory=list)


# -- helpers ---------------------------------------------------------------------------------


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _has_model_type(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "model_type" for n in ast.walk(node))


def _eagle3_method_test(test: ast.AST) -> list[str] | None:
    """If ``test`` contains ``X.method == "eagle3"`` or ``X.method in (..."eagle3"...)``, return
    the method names it admits, else None."""
    for n in ast.walk(test):
        if not isinstance(n, ast.Compare) or len(n.ops) != 1:
            continue
        left = n.left
        comp = n.comparators[0]
        if not (isinstance(left, ast.Attribute) and left.attr == "method"):
            continue
        if isinstance(n.ops[0], ast.Eq) and isinstance(comp, ast.Constant) and comp.value == "eagle3":
            return ["eagle3"]
        if isinstance(n.ops[0], ast.In) and isinstance(comp, (ast.Tuple, ast.List, ast.Set)):
            vals = [e.value for e in comp.elts if isinstance(e, ast.Constant)]
            if "eagle3" in vals:
                return [v for v in vals if isinstance(v, str)]
    return None


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Raise) for s in body for n in ast.walk(s))


class _ParentMap:
    def __init__(self, tree: ast.AST):
        self.parent: dict[ast.AST, ast.AST] = {}
        for p in ast.walk(tree):
            for c in ast.iter_child_nodes(p):
                self.parent[c] = p

    def enclosing_function(self, node: ast.AST) -> ast.AST | None:
        """The function definition that contains ``node``, or None at module level."""
        cur = self.parent.get(node)
        while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cur = self.parent.get(cur)
        return cur


def extract_allowlist(tree: ast.Module) -> list[AllowlistFact]:
    """Find every EAGLE-3 model_type allowlist test in a module (see :class:`AllowlistFact`)."""
    out: list[AllowlistFact] = []
    pm: _ParentMap | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        methods = _eagle3_method_test(node.test)
        if methods is None or not _has_model_type(node.test) or not _raises(node.body):
            continue
        pm = pm or _ParentMap(tree)
        fn = pm.enclosing_function(node)
        list_name = None
        entries: list[str] = []
        substring = True
        subject = ""
        for n in ast.walk(node.test):
            # any(s in <subject> for s in LIST)
            if isinstance(n, ast.GeneratorExp) and n.generators:
                gen = n.generators[0]
                elt = n.elt
                if (
                    isinstance(elt, ast.Compare)
                    and isinstance(elt.ops[0], ast.In)
                    and _has_model_type(elt.comparators[0])
                ):
                    subject = ast.unparse(elt.comparators[0])
                    substring = True
                    if isinstance(gen.iter, ast.Name):
                        list_name = gen.iter.id
                    elif isinstance(gen.iter, (ast.List, ast.Tuple)):
                        entries = [e.value for e in gen.iter.elts if isinstance(e, ast.Constant)]
                    break
            if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], (ast.In, ast.NotIn)):
                left, comp = n.left, n.comparators[0]
                if isinstance(left, ast.Constant) and isinstance(left.value, str) and _has_model_type(comp):
                    # "llama" not in X.model_type
                    entries = [left.value]
                    subject = ast.unparse(comp)
                    substring = True
                    break
                if _has_model_type(left) and isinstance(comp, ast.Name):
                    list_name, subject, substring = comp.id, ast.unparse(left), False
                    break
                if _has_model_type(left) and isinstance(comp, (ast.List, ast.Tuple, ast.Set)):
                    entries = [e.value for e in comp.elts if isinstance(e, ast.Constant)]
                    subject, substring = ast.unparse(left), False
                    break
        list_line = None
        if list_name and fn is not None:
            for a in ast.walk(fn):
                if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.lineno < node.lineno:
                    targets = a.targets if isinstance(a, ast.Assign) else [a.target]
                    if any(isinstance(t, ast.Name) and t.id == list_name for t in targets) and a.value is not None:
                        try:
                            val = ast.literal_eval(a.value)
                            entries = [str(v) for v in val]
                        except Exception:
                            entries = _strings(a.value)
                        list_line = a.lineno
        out.append(
            AllowlistFact(
                line=node.lineno,
                list_name=list_name,
                list_line=list_line,
                entries=entries,
                methods=methods,
                substring=substring,
                subject=subject,
                function=getattr(fn, "name", "<module>"),
            )
        )
    return out


def _arch_test(test: ast.AST) -> list[str] | None:
    """Architectures named by a branch test like ``self.get_model_name(m) in [..]`` / ``== ".."``."""
    if isinstance(test, ast.BoolOp):
        names: list[str] = []
        for v in test.values:
            r = _arch_test(v)
            if r:
                names += r
        return names or None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        comp = test.comparators[0]
        if isinstance(test.ops[0], ast.Eq) and isinstance(comp, ast.Constant) and isinstance(comp.value, str):
            return [comp.value]
        if isinstance(test.ops[0], ast.In) and isinstance(comp, (ast.List, ast.Tuple, ast.Set)):
            return [e.value for e in comp.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def _image_token_assign(body: list[ast.stmt]) -> tuple[str, int] | None:
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "image_token_index" for t in n.targets
            ):
                d = dotted(n.value) or ast.unparse(n.value)
                parts = d.split(".")
                # drop the target-model variable: target_model.config.x -> config.x
                path = ".".join(parts[1:]) if len(parts) > 1 else d
                return path, n.lineno
    return None


def extract_image_token(tree: ast.Module) -> list[ImageTokenFact]:
    """Find the proposer's image-token chains (see :class:`ImageTokenFact`)."""
    out: list[ImageTokenFact] = []
    pm: _ParentMap | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        if not any(
            isinstance(n, ast.Call) and (dotted(n.func) or "").endswith("supports_multimodal")
            for n in ast.walk(node.test)
        ):
            continue
        body_has = any(
            isinstance(n, ast.Attribute) and n.attr == "image_token_index"
            for s in node.body
            for n in ast.walk(s)
        )
        if not body_has:
            continue
        pm = pm or _ParentMap(tree)
        fn = pm.enclosing_function(node)
        fact = ImageTokenFact(line=node.lineno, function=getattr(fn, "name", "<module>"))
        # find the first if-chain in the body that assigns image_token_index
        chain = next((s for s in node.body if isinstance(s, ast.If) and _arch_test(s.test)), None)
        if chain is None:
            a = _image_token_assign(node.body)
            if a:
                fact.branches.append(ImageTokenBranch([], a[0], a[1]))
            out.append(fact)
            continue
        cur: ast.stmt | None = chain
        while isinstance(cur, ast.If):
            archs = _arch_test(cur.test) or []
            a = _image_token_assign(cur.body)
            if a:
                fact.branches.append(ImageTokenBranch(archs, a[0], a[1]))
            if len(cur.orelse) == 1 and isinstance(cur.orelse[0], ast.If) and _arch_test(cur.orelse[0].test):
                cur = cur.orelse[0]
            else:
                a = _image_token_assign(cur.orelse) if cur.orelse else None
                if a:
                    fact.branches.append(ImageTokenBranch([], a[0], a[1]))
                cur = None
        out.append(fact)
    return out


class _Unresolvable(Exception):
    pass


def _eval_table(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate a literal table expression: dict/list/tuple/str literals, names of tables already
    evaluated, ``{**a, **b}``, ``dict(k=v)``/``Cls(k=v)`` keyword calls, and dict comprehensions
    ``{k: (m, a) for k, (m, a) in T.items() if a == "X"}``. Names not in ``env`` evaluate to
    ``("name", id)`` markers. Raises _Unresolvable for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval_table(e, env) for e in node.elts)
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        return ("name", node.id)
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                spread = _eval_table(v, env)
                if not isinstance(spread, dict):
                    raise _Unresolvable
                out.update(spread)
            else:
                out[_eval_table(k, env)] = _eval_table(v, env)
        return out
    if isinstance(node, ast.Call) and not node.args:
        out = {}
        for kw in node.keywords:
            if kw.arg is None:
                spread = _eval_table(kw.value, env)
                if not isinstance(spread, dict):
                    raise _Unresolvable
                out.update(spread)
            else:
                out[kw.arg] = _eval_table(kw.value, env)
        return out
    if isinstance(node, ast.DictComp) and len(node.generators) == 1:
        gen = node.generators[0]
        it = gen.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items"):
            raise _Unresolvable
        src = _eval_table(it.func.value, env)
        if not isinstance(src, dict):
            raise _Unresolvable
        out = {}
        for k, v in src.items():
            local = dict(env)
            _bind_target(gen.target, (k, v), local)
            if all(_eval_cond(c, local) for c in gen.ifs):
                out[_eval_table(node.key, local)] = _eval_table(node.value, local)
        return out
    raise _Unresolvable


def _bind_target(target: ast.AST, value: Any, env: dict[str, Any]) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        if not isinstance(value, tuple) or len(value) != len(target.elts):
            raise _Unresolvable
        for t, v in zip(target.elts, value):
            _bind_target(t, v, env)
    else:
        raise _Unresolvable


def _eval_cond(node: ast.AST, env: dict[str, Any]) -> bool:
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a = _eval_table(node.left, env)
        b = _eval_table(node.comparators[0], env)
        op = node.ops[0]
        if isinstance(op, ast.Eq):
            return a == b
        if isinstance(op, ast.NotEq):
            return a != b
        if isinstance(op, ast.In):
            return a in b
        if isinstance(op, ast.NotIn):
            return a not in b
    if isinstance(node, ast.BoolOp):
        vals = [_eval_cond(v, env) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    raise _Unresolvable


def extract_tables(tree: ast.Module) -> dict[str, dict]:
    """Evaluate the module-level dict tables of a module, in order (later tables may spread
    earlier ones). Returns ``{name: {key: value}}``; tables that are not literal are skipped."""
    env: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            v = stmt.value
            if not isinstance(v, (ast.Dict, ast.DictComp, ast.Call)):
                continue
            if isinstance(v, ast.Call) and (v.args or not v.keywords):
                continue
            try:
                val = _eval_table(v, env)
            except (_Unresolvable, TypeError, ValueError):
                continue
            if isinstance(val, dict):
                env[targets[0].id] = val
                lines[targets[0].id] = stmt.lineno
    return {"tables": env, "lines": lines}


def _key_lines(tree: ast.Module, names: set[str]) -> dict[str, int]:
    """Line of each string key in the named module-level dict literals (registry rows)."""
    out: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if not any(isinstance(t, ast.Name) and t.id in names for t in targets):
                continue
            if isinstance(stmt.value, ast.Dict):
                for k in stmt.value.keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        out.setdefault(k.value, k.lineno)
            elif isinstance(stmt.value, ast.Call):
                for kw in stmt.value.keywords:
                    if kw.arg:
                        out.setdefault(kw.arg, kw.value.lineno)
    return out


_CALL = re.compile(rb"\.(get_eagle3\w*)\s*\(")
_PROBE = re.compile(rb"\b(?:hasattr|getattr)\s*\([^()]*?[\"'](get_eagle3\w*)[\"']")
_COMMENT = re.compile(rb"#[^\n]*")


def scan_eagle3_calls(source: bytes) -> set[str]:
    """Names of ``get_eagle3*`` methods that a module calls (``x.get_eagle3_...(``) or probes
    (``hasattr(x, "get_eagle3_...")``), by a text scan with comments removed. Runtime modules
    such as ``vllm/v1/worker/gpu_model_runner.py`` are large and need nothing else from their
    syntax tree, so they are not parsed; a definition (``def get_eagle3_...(``) is no call."""
    text = _COMMENT.sub(b"", source)
    names = {m.group(1) for m in _CALL.finditer(text)} | {m.group(1) for m in _PROBE.finditer(text)}
    return {n.decode() for n in names}


_ALLOWLIST_NEAR = re.compile(rb"eagle3[\s\S]{0,800}?model_type|model_type[\s\S]{0,800}?eagle3")


def may_hold_allowlist(source: bytes) -> bool:
    """Cheap pre-filter: ``"eagle3"`` and ``model_type`` within a few lines of each other."""
    return _ALLOWLIST_NEAR.search(source) is not None


def run_extractors(tree: ast.Module, source: bytes, summary: ModuleSummary) -> None:
    """Run every extractor whose trigger words occur in ``source``; store results in
    ``summary.extras`` (``allowlist``, ``image_token``, ``tables``, ``table_key_lines``)."""
    path = summary.path
    if path.startswith("vllm/config") and b"eagle3" in source and b"model_type" in source:
        found = extract_allowlist(tree)
        if found:
            summary.extras["allowlist"] = found
    if path.startswith("vllm/v1/spec_decode") and b"image_token_index" in source and b"supports_multimodal" in source:
        found_it = extract_image_token(tree)
        if found_it:
            summary.extras["image_token"] = found_it
    if path.endswith("model_executor/models/registry.py") or path.endswith("transformers_utils/config.py"):
        t = extract_tables(tree)
        summary.extras["tables"] = t["tables"]
        summary.extras["table_lines"] = t["lines"]
        summary.extras["table_key_lines"] = _key_lines(tree, set(t["tables"]))

"""``eagle-audit fix``: plan codemods from a scan, apply them in memory, validate, write.

The pipeline, all in memory until the very end:

1. **scan** the targets (:meth:`auditor.orchestration.scan.Auditor.audit`);
2. **plan**: map every blocking finding to a codemod invocation (``rules/codemods``) with the
   parameters the tree's own facts dictate (which class holds the code, which protocol members
   the tree requires, which attribute the HF config class defines), or to an
   :class:`Unfixable` with the reason and what a human must add;
3. **apply** the invocations to the affected files' text (never to disk);
4. **validate**: every changed file parses and compiles (``compile()`` on the text, never
   executed), and the patched tree — an :class:`OverlaySource` over the original — re-scanned in
   memory gives ``supported`` for every target. Steps 2–4 repeat (at most three rounds) when
   fixing one gate reveals the next (a protocol default that demands ``EagleModelMixin``);
5. **write**, only when validation passed: a unified diff (``a/`` ``b/`` paths relative to the
   folder that contains ``vllm/``, so ``patch -p1`` / ``git apply`` from that folder apply it),
   a re-runnable codemods file (JSON: the targets and the ordered invocations; replaying it
   re-plans from a scan of the other tree), or the tree itself (:func:`apply_to_folder`: every
   file replaced atomically, originals kept in a backup that :func:`revert_folder` restores).
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from auditor.engines.vllm.facts import (
    HOLDER_ATTRS,
    LANGUAGE_MODEL_ATTRS,
    _init_assign,
    find_holder,
    holder_forward,
    method_requires_mixin,
    target_facts,
)
from auditor.model.errors import AuditError
from auditor.model.findings import Finding, Severity, Verdict
from auditor.index.summary import MethodFact
from auditor.index.resolve import ClassRef
from auditor.orchestration.scan import Auditor
from auditor.model.results import TargetResult, TargetSpec
from auditor.source.sources import TreeSource
from auditor.index.tree import Tree

#: Format id of the codemods file written by ``fix --out``.
CODEMODS_FORMAT = "eagle-audit-codemods/1"

#: Folder (next to ``vllm/``) that holds the backups of ``fix --apply``.
BACKUP_DIR = ".eagle-audit-backup"

#: Protocol used by each speculative method's runtime check.
PROTOCOL_FOR_METHOD = {"eagle3": "SupportsEagle3", "eagle": "SupportsEagle"}

_MAX_ROUNDS = 3


class FixRefused(AuditError):
    """``--apply`` / ``--revert`` refused to write (nothing was written)."""


# -- overlay ---------------------------------------------------------------------------------


class OverlaySource(TreeSource):
    """A tree source that returns patched bytes for some paths and delegates every other read
    to ``base``. Used to re-scan a patched tree in memory (the :class:`~auditor.index.tree.Tree`
    caches summaries by content hash, so only the patched files are summarised again)."""

    def __init__(self, base: TreeSource, patched: dict[str, bytes]):
        super().__init__(f"{base.label} (patched in memory)")
        self.base = base
        self.patched = dict(patched)

    def files(self) -> list[str]:
        return sorted(set(self.base.files()) | set(self.patched))

    def _read(self, relpath: str) -> bytes:
        if relpath in self.patched:
            return self.patched[relpath]
        return self.base.read(relpath)

    def _exists(self, relpath: str) -> bool:
        return relpath in self.patched or self.base.exists(relpath)

    def _metadata_version(self) -> str | None:
        return self.base._metadata_version()

    def version(self) -> str | None:
        return self.base.version()

    def root(self):
        return None  # reads must go through _read, never to the base folder on disk


def overlay_auditor(base: Auditor, texts: dict[str, str]) -> Auditor:
    """An :class:`Auditor` over ``base``'s tree with ``texts`` (path → new source) laid over it.
    Summaries of unchanged files already built for ``base`` are reused."""
    src = OverlaySource(base.tree.source, {p: t.encode("utf-8") for p, t in texts.items()})
    tree = Tree(src, base.tree.cache)
    tree._files = set(base.tree.files) | set(texts)
    for p, s in base.tree.loaded().items():
        if p not in texts:
            tree._by_path[p] = s
    return Auditor(tree, platform=base.platform)


# -- plan ------------------------------------------------------------------------------------


@dataclass
class Invocation:
    """One codemod run: ``codemod`` name, the file ``path`` it edits, its ``params``, the gate
    it fixes, the architectures it serves, and (once applied) the ``changes`` it made."""

    codemod: str
    gate: str
    path: str
    params: dict
    architectures: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)

    def key(self) -> tuple:
        p = self.params
        return (self.codemod, self.path, p.get("class") or p.get("class_name") or p.get("function") or "")

    def merge(self, other: "Invocation") -> None:
        for a in other.architectures:
            if a not in self.architectures:
                self.architectures.append(a)
        if self.codemod == "allowlist":
            mts = self.params["model_types"]
            for mt in other.params["model_types"]:
                if mt not in mts:
                    mts.append(mt)
        if self.codemod == "interface":
            names = {m["name"] for m in self.params["members"]}
            self.params["members"] += [m for m in other.params["members"] if m["name"] not in names]

    def as_dict(self) -> dict:
        return {
            "codemod": self.codemod, "gate": self.gate, "path": self.path, "params": self.params,
            "architectures": self.architectures, "changes": self.changes,
        }


@dataclass
class Unfixable:
    """A gate the tool will not fix automatically: why, and what to add by hand."""

    architecture: str
    gate: str
    reason: str
    hint: str = ""
    path: str | None = None
    line: int | None = None

    def text(self) -> str:
        where = f" ({self.path}:{self.line})" if self.path and self.line else (f" ({self.path})" if self.path else "")
        hint = f" — to fix by hand: {self.hint}" if self.hint else ""
        return f"{self.architecture}: {self.gate}{where}: {self.reason}{hint}"


def _module_params(ref: ClassRef, path: str) -> dict:
    return {"module": ref.module, "is_package": path.endswith("/__init__.py")}


class Planner:
    """Maps findings to codemod invocations for one (possibly patched) tree."""

    def __init__(self, auditor: Auditor, method: str, only: set[str] | None = None):
        self.a = auditor
        self.r = auditor.resolver
        self.method = method
        self.only = only
        self.invocations: dict[tuple, Invocation] = {}
        self.unfixable: list[Unfixable] = []
        self.explicit_setter: set[str] = set()  # targets whose planned interface writes the setter

    def _add(self, inv: Invocation) -> None:
        if self.only is not None and inv.codemod not in self.only:
            self.unfixable.append(Unfixable(inv.architectures[0], inv.gate,
                                            f"the codemods file does not include the {inv.codemod} codemod"))
            return
        k = inv.key()
        if k in self.invocations:
            self.invocations[k].merge(inv)
        else:
            self.invocations[k] = inv

    def _no(self, arch: str, f: Finding, reason: str, hint: str = "") -> None:
        self.unfixable.append(Unfixable(arch, f.gate, reason, hint, f.path, f.line))

    def plan(self, result: TargetResult) -> None:
        arch = result.architecture
        for f in result.findings:
            if f.severity is Severity.UNKNOWN:
                self._no(arch, f, f"the verdict is unknown, so there is nothing safe to change: {f.message}")
                continue
            if f.severity is not Severity.ERROR:
                continue
            handler = getattr(self, "_" + f.gate.replace("-", "_"), None)
            if handler is None:
                self._no(arch, f, f"no codemod exists for gate {f.gate}: {f.message}")
                continue
            handler(result, f)

    # -- gates ----------------------------------------------------------------------------
    def _allowlist(self, result: TargetResult, f: Finding) -> None:
        found = self.a.facts.allowlist_for(self.method)
        mt = f.data.get("model_type") or result.text_model_type
        if found is None or not mt:
            self._no(result.architecture, f, "the allowlist or the target's text model_type is unknown",
                     "pass --model-type with the checkpoint's text model_type")
            return
        path, fact = found
        self._add(Invocation("allowlist", "allowlist", path,
                             {"model_types": [mt], "method": self.method, "function": fact.function},
                             [result.architecture]))

    def _interface(self, result: TargetResult, f: Finding) -> None:
        facts = target_facts(self.r, self.a.registry, result.architecture)
        if facts.ref is None:
            self._no(result.architecture, f, f"cannot resolve the class of {result.architecture}")
            return
        self._interface_on(facts.ref, result.architecture, f)

    def _code_holder(self, ref: ClassRef) -> ClassRef:
        """The nearest class of ``ref``'s MRO whose body is not empty (``ref`` itself if none)."""
        for e in self.r.mro(ref).entries:
            if isinstance(e, ClassRef):
                c = self.r.cls(e)
                if c is not None and not c.empty:
                    return e
        return ref

    def _assigned_class(self, ref: ClassRef, owner: ClassRef, callee: str) -> ClassRef | None:
        """The class built by ``self.<attr> = <callee>(...)`` in ``owner.__init__`` (a class,
        ``self.<class attribute>(...)`` or ``self.<factory method>(...)``, looked up on ``ref``)."""
        if callee.startswith("self."):
            name = callee[len("self."):]
            hit = self.r.lookup(ref, name) if "." not in name else None
            if hit is None:
                return None
            defined_in, fact = hit
            if isinstance(fact, MethodFact):
                text = fact.returns_call[0].removesuffix("(...)") if fact.returns_call else None
            else:
                text = fact.value
            t = self.r.resolve_dotted(defined_in.module, text) if text else None
        else:
            t = self.r.resolve_dotted(owner.module, callee)
        return t if isinstance(t, ClassRef) else None

    def _interface_on(self, ref: ClassRef, arch: str, f: Finding, depth: int = 0) -> bool:
        """Plan the protocol on the code holder of ``ref`` (the nearest non-empty class of its
        MRO). The members are written for this tree: none where the protocol's own defaults
        reach the inner model (``.model``, through the language model for wrappers), the layer
        methods on the inner model where the protocol has stubs, delegation for wrappers (whose
        inner class is planned too). Returns False when it cannot."""
        if depth > 3:
            self._no(arch, f, "wrappers nested too deep to plan")
            return False
        holder = self._code_holder(ref)
        loc = self.r.location(holder)
        if loc is None:
            self._no(arch, f, f"{holder.name} is not defined in the tree")
            return False
        pname = PROTOCOL_FOR_METHOD[self.method]
        proto = self.a.facts.protocol(pname)
        if proto is not None:
            methods = {n: mf for n, (_, mf) in proto.members.items() if isinstance(mf, MethodFact)}
            defaults = any(not mf.is_stub for mf in methods.values())
            needed = [n for n, mf in methods.items() if defaults or mf.is_stub]
        else:
            defaults = False
            needed = self.a.facts.duck_typed_eagle3_members() if self.method == "eagle3" else []
        needed = sorted(needed, key=lambda n: (n != "set_aux_hidden_state_layers", n))
        # how the holder reaches the inner model
        lm = _init_assign(self.r, holder, LANGUAGE_MODEL_ATTRS)
        h = find_holder(self.r, self.a.registry, ref)
        if lm is not None and lm[2] is not None and lm[2][0].endswith("init_vllm_registered_model"):
            attr, relation, inner = lm[1], "delegate", h.language_ref
            if inner is None and needed:
                self._no(arch, f, f"{holder.name} builds its language model from the checkpoint's config, so the "
                         f"class to delegate to is not known statically ({h.unknown or h.via})",
                         f"implement {', '.join(needed)} on {holder.name} and on its language model class")
                return False
            default_path = attr == "language_model" or self.r.lookup(holder, "get_language_model") is not None
        else:
            found = _init_assign(self.r, holder, HOLDER_ATTRS)
            if found is None or found[2] is None:
                if needed:
                    self._no(arch, f, f"no __init__ on {holder.name}'s MRO builds the inner model "
                             f"(self.{', self.'.join(HOLDER_ATTRS)}), so the layer methods have nothing to act on",
                             f"implement {', '.join(needed)} on {holder.name}")
                    return False
                attr, relation, inner, default_path = "model", "direct", None, False
            else:
                owner, attr, call, _ = found
                t = self._assigned_class(ref, owner, call[0])
                if h.ref is not None and t == h.ref:
                    relation, inner = "direct", None
                elif t is not None:
                    relation, inner = "delegate", t  # self.model = XForCausalLM(...): a nested wrapper
                else:
                    self._no(arch, f, f"the inner model of {holder.name} is not known statically "
                             f"({h.unknown or h.via})", f"implement {', '.join(needed)} on {holder.name}")
                    return False
                default_path = relation == "direct" and attr == "model"
        layers = "layers"
        if relation == "direct" and h.ref is not None:
            layers = self._layers_attr(h.ref)
            default_path = default_path and layers == "layers"  # the default getter reads .model.layers
        if defaults and relation == "delegate" and inner is not None and default_path:
            # the protocol default unwraps the language model, then needs its .model(.layers)
            iholder = self._code_holder(inner)
            ifound = _init_assign(self.r, iholder, HOLDER_ATTRS)
            ih = find_holder(self.r, self.a.registry, inner)
            default_path = (ifound is not None and ifound[1] == "model" and ih.ref is not None
                            and self._layers_attr(ih.ref) == "layers")
        members: list[dict] = []
        if not (defaults and default_path):
            for name in needed:
                hit = self.r.lookup(holder, name)
                if hit is not None and not (proto is not None and proto.is_protocol_class(hit[0])):
                    continue  # implemented on the holder's MRO already
                if name == "set_aux_hidden_state_layers":
                    kind = "set"
                elif name.startswith("get_eagle3"):
                    kind = "get"
                else:
                    self._no(arch, f, f"the tree's {pname} requires {name}, which the codemod has no template for",
                             f"implement {name} on {holder.name}")
                    return False
                if relation == "delegate":
                    kind = f"delegate-{kind}"
                else:
                    kind = "set-inner" if kind == "set" else "get-default"
                members.append({"name": name, "kind": kind, "attr": attr, "layers": layers})
                if kind in ("set", "set-inner", "delegate-set"):
                    self.explicit_setter.add(arch)
        if relation == "delegate" and inner is not None and (members or defaults):
            if any(self._lacks(inner, m, proto) for m in needed) or (
                    defaults and proto is not None and not self.r.is_subclass(inner, proto.ref)):
                if not self._interface_on(inner, inner.name, f, depth + 1):
                    return False
        add_base = proto is not None and not self.r.is_subclass(holder, proto.ref)
        if not add_base and not members:
            return True
        params = {
            "class": holder.qualname,
            "protocol": pname if add_base else None,
            "protocol_module": proto.ref.module if proto is not None else None,
            "members": members,
        }
        params.update(_module_params(holder, loc[0]))
        self._add(Invocation("interface", "interface", loc[0], params, [arch]))
        return True

    def _layers_attr(self, holder: ClassRef) -> str:
        """The attribute of the inner model that holds its decoder layers, as its forward loop
        iterates it (``self.layers``; GPT-2's ``self.h``)."""
        fwd = holder_forward(self.r, holder)
        if not fwd.loops or fwd.path is None:
            return "layers"
        line = fwd.loops[0].line
        try:
            mod = ast.parse(self.a.tree.source.read(fwd.path))
        except (SyntaxError, ValueError, KeyError):
            return "layers"
        for node in ast.walk(mod):
            if isinstance(node, ast.For) and node.lineno == line:
                for n in ast.walk(node.iter):
                    if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
                            and n.attr not in ("start_layer", "end_layer")):
                        return n.attr
        return "layers"

    def _lacks(self, ref: ClassRef, name: str, proto) -> bool:
        """True when ``name`` is missing on ``ref``'s MRO or only the protocol's stub."""
        hit = self.r.lookup(ref, name)
        if hit is None:
            return True
        return proto is not None and proto.is_protocol_class(hit[0]) and isinstance(hit[1], MethodFact) and hit[1].is_stub

    def _aux_capture(self, result: TargetResult, f: Finding) -> None:
        arch = result.architecture
        facts = target_facts(self.r, self.a.registry, arch)
        h = find_holder(self.r, self.a.registry, facts.ref)
        if h.ref is None:
            self._no(arch, f, f"the holder model is not known statically: {h.unknown}")
            return
        fwd = holder_forward(self.r, h.ref)
        if fwd.defined_in is None or fwd.path is None:
            self._no(arch, f, f"{h.ref.name} has no forward in the tree")
            return
        needs = f.data.get("needs_mixin") or self._needs_mixin(facts.ref)
        mode = "mixin" if needs and arch not in self.explicit_setter else "list"
        mixin = self.a.facts.eagle_model_mixin
        if mode == "mixin" and mixin is None:
            self._no(arch, f, "the tree's protocol needs EagleModelMixin, which the tree does not define")
            return
        params = {"class": fwd.defined_in.qualname, "mode": mode,
                  "mixin_module": mixin.module if mixin is not None else None}
        params.update(_module_params(fwd.defined_in, fwd.path))
        self._add(Invocation("aux-capture", "aux-capture", fwd.path, params, [arch]))

    def _needs_mixin(self, ref: ClassRef) -> bool:
        """True when the setter the target will run is a protocol default that asserts the inner
        model inherits EagleModelMixin (vLLM ≥ 0.18)."""
        proto = self.a.facts.protocol("SupportsEagle3")
        if proto is None or self.a.facts.eagle_model_mixin is None:
            return False
        entry = proto.members.get("set_aux_hidden_state_layers")
        if entry is None or not isinstance(entry[1], MethodFact) or not method_requires_mixin(entry[1]):
            return False
        hit = self.r.lookup(ref, "set_aux_hidden_state_layers")
        return hit is None or proto.is_protocol_class(hit[0])

    def _image_token(self, result: TargetResult, f: Finding) -> None:
        arch = result.architecture
        chains = self.a.facts.image_token
        facts = target_facts(self.r, self.a.registry, arch)
        cands = list(f.data.get("candidates") or [])
        cfg = f.data.get("config_class", "the target's HF config class").rsplit(".", 1)[-1]
        needed = f.data.get("attribute", "image_token_index")
        if not chains or facts.ref is None:
            self._no(arch, f, "the proposer's image-token handling was not found")
            return
        if "image_token_id" in cands:
            attr = "image_token_id"
        elif len(cands) == 1:
            attr = cands[0]
        else:
            what = (f"{cfg} defines several candidate attributes ({', '.join(cands)}), and the tool will not guess "
                    "which one holds the image token id") if cands else (
                    f"{cfg} defines no image/media token id attribute, and the tool will not guess one")
            self._no(arch, f, what,
                     f"add {needed} to {cfg} (or pass --hf-config with the checkpoint's config.json), or add a "
                     f"branch for {facts.ref.name} to the proposer reading the attribute that holds the image "
                     "token id")
            return
        path, chain = chains[0]
        self._add(Invocation("image-token", "image-token", path,
                             {"class_name": facts.ref.name, "attribute": attr, "function": chain.function}, [arch]))


# -- fix -------------------------------------------------------------------------------------


@dataclass
class FixResult:
    """The outcome of :func:`plan_fix`: the audits before and after, the invocations applied (in
    order), what could not be fixed, and the original and patched text of each changed file."""

    vllm_version: str | None
    source: str
    method: str
    specs: list[TargetSpec]
    before: list[TargetResult]
    after: list[TargetResult] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    unfixable: list[Unfixable] = field(default_factory=list)
    originals: dict[str, str] = field(default_factory=dict)
    patched: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def already_supported(self) -> bool:
        return all(r.verdict is Verdict.SUPPORTED for r in self.before)

    @property
    def ok(self) -> bool:
        """Validation passed: every target re-scans as supported and every file compiles."""
        if self.already_supported:
            return True
        return (
            not self.problems
            and bool(self.after)
            and all(r.verdict is Verdict.SUPPORTED for r in self.after)
        )

    @property
    def still_failing(self) -> dict[str, list[str]]:
        """Architecture → gates that still block after the patch."""
        return {r.architecture: r.blocking or [r.verdict.value] for r in self.after if r.verdict is not Verdict.SUPPORTED}

    def diff(self) -> str:
        """The unified diff of every changed file (empty when nothing changes)."""
        out: list[str] = []
        for p in sorted(self.patched):
            out += unified_diff(p, self.originals[p], self.patched[p])
        return "".join(out)

    def diffstat(self) -> str:
        adds = dels = 0
        for line in self.diff().splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                adds += 1
            elif line.startswith("-") and not line.startswith("---"):
                dels += 1
        n = len(self.patched)
        return f"{n} file{'s' if n != 1 else ''} changed, {adds} insertions(+), {dels} deletions(-)"

    def codemods_document(self) -> dict:
        """The re-runnable codemods file (see :func:`load_codemods`)."""
        from auditor import __version__

        return {
            "format": CODEMODS_FORMAT,
            "generated_by": f"eagle-audit {__version__}",
            "source": {"vllm_version": self.vllm_version, "label": self.source},
            "method": self.method,
            "targets": [
                {"architecture": s.architecture, "model_type": s.model_type, "text_model_type": s.text_model_type,
                 "model_type_source": s.source}
                for s in self.specs
            ],
            "invocations": [i.as_dict() for i in self.invocations],
            "replay": "eagle-audit fix --codemods FILE TREE re-scans TREE for these targets and re-plans these "
                      "codemods from its own facts (paths, classes and members are derived again).",
        }

    def report(self) -> str:
        """A plain-text account: verdicts before → after, each codemod's changes, what is not
        auto-fixable and why."""
        lines = [f"eagle-audit fix: {self.source} (vLLM {self.vllm_version or '?'}), method {self.method}"]
        after = {r.architecture: r for r in self.after}
        for r in self.before:
            b = r.verdict.value + (f" ({', '.join(r.blocking)})" if r.blocking else "")
            a = after.get(r.architecture)
            if self.already_supported or a is None:
                lines.append(f"  {r.architecture}: {b}")
            else:
                at = a.verdict.value + (f" ({', '.join(a.blocking)})" if a.blocking else "")
                lines.append(f"  {r.architecture}: {b} -> {at} after the patch")
        if self.invocations:
            lines.append("codemods:")
            for inv in self.invocations:
                for c in inv.changes:
                    lines.append(f"  [{inv.codemod}] {inv.path}: {c}")
        for p in self.problems:
            lines.append(f"validation: {p}")
        if self.ok and self.patched:
            lines.append("scope: the patch makes every gate eagle-audit checks pass (allowlist, interface, "
                         "aux-capture, image-token), as re-scanned; it has not been run on a GPU")
        if self.unfixable:
            lines.append("not auto-fixable:")
            seen = set()
            for u in self.unfixable:
                t = u.text()
                if t not in seen:
                    seen.add(t)
                    lines.append(f"  {t}")
        if self.after and not self.ok:
            for arch, gates in self.still_failing.items():
                lines.append(f"still failing after the codemods: {arch}: {', '.join(gates)}")
                for f in next(r for r in self.after if r.architecture == arch).findings:
                    if f.severity in (Severity.ERROR, Severity.UNKNOWN):
                        lines.append(f"  {f.gate} {f.where}: {f.message}")
        return "\n".join(lines)


def unified_diff(path: str, old: str, new: str) -> list[str]:
    """Unified diff lines of one file with ``a/`` ``b/`` prefixes, marking a missing final
    newline the way ``diff`` does (so ``patch`` and ``git apply`` accept it)."""
    out = []
    for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return out


def plan_fix(auditor: Auditor, specs: list[TargetSpec], method: str = "eagle3", only: set[str] | None = None) -> FixResult:
    """Scan, plan, apply in memory and validate (see the module docstring). Nothing is written.

    Args:
        auditor: the tree to fix.
        specs: the targets.
        method: ``eagle3`` or ``eagle``.
        only: restrict to these codemod names (a replayed codemods file).
    """
    import libcst as cst

    from rules.codemods import NotAutoFixable, apply_codemod

    t0 = time.perf_counter()
    before = [auditor.audit(s, method) for s in specs]
    res = FixResult(auditor.tree.version(), getattr(auditor.tree.source, "label", ""), method, specs, before)
    if res.already_supported:
        res.after = before
        res.seconds = time.perf_counter() - t0
        return res
    current = auditor
    results = before
    done: set[tuple] = set()
    modules: dict[str, cst.Module] = {}  # parsed once per file, codemods applied in order
    failures: list[Unfixable] = []  # codemods that refused, kept across rounds
    for _ in range(_MAX_ROUNDS):
        planner = Planner(current, method, only)
        for r in results:
            if r.verdict is not Verdict.SUPPORTED:
                planner.plan(r)
        res.unfixable = planner.unfixable
        touched: set[str] = set()
        for inv in planner.invocations.values():
            sig = (inv.key(), json.dumps(inv.params, sort_keys=True))
            if sig in done:
                continue
            done.add(sig)
            arch = inv.architectures[0]
            try:
                if inv.path not in modules:
                    text = auditor.tree.source.read(inv.path).decode("utf-8")
                    res.originals[inv.path] = text
                    modules[inv.path] = cst.parse_module(text)
                new, changes = apply_codemod(inv.codemod, modules[inv.path], inv.params, inv.path)
            except NotAutoFixable as exc:
                failures.append(Unfixable(arch, inv.gate, exc.reason, exc.hint, inv.path))
                continue
            except UnicodeDecodeError:
                failures.append(Unfixable(arch, inv.gate, "the file is not UTF-8", "", inv.path))
                continue
            except Exception as exc:  # parse errors and the like: report, never write
                failures.append(Unfixable(arch, inv.gate,
                                               f"the {inv.codemod} codemod failed: {type(exc).__name__}: {exc}",
                                               "", inv.path))
                continue
            if changes:
                inv.changes = changes
                modules[inv.path] = new
                res.invocations.append(inv)
                touched.add(inv.path)
        if not touched:
            break
        for p in touched:
            res.patched[p] = modules[p].code
        current = overlay_auditor(auditor, res.patched)
        results = [current.audit(s, method) for s in specs]
        if all(r.verdict is Verdict.SUPPORTED for r in results):
            res.unfixable = []
            break
    res.patched = {p: t for p, t in res.patched.items() if t != res.originals.get(p)}
    res.originals = {p: res.originals[p] for p in res.patched}
    for p, t in res.patched.items():
        try:
            compile(t, p, "exec", dont_inherit=True)
        except SyntaxError as exc:
            res.problems.append(f"{p} does not compile after the codemods: line {exc.lineno}: {exc.msg}")
    if res.patched:
        if current is auditor or set(current.tree.source.patched) != set(res.patched):
            current = overlay_auditor(auditor, res.patched)
            results = [current.audit(s, method) for s in specs]
        res.after = results
        for p in res.patched:
            if p in current.tree.parse_errors:
                res.problems.append(f"{p} does not parse after the codemods: {current.tree.parse_errors[p]}")
    else:
        res.after = before
    if res.ok:
        res.unfixable = []
    else:
        # explain every gate still failing: the codemods that refused, and what planning says now
        planner = Planner(current, method, only)
        for r in res.after:
            if r.verdict is not Verdict.SUPPORTED:
                planner.plan(r)
        res.unfixable = failures + [u for u in planner.unfixable if (u.architecture, u.gate) not in
                                    {(f.architecture, f.gate) for f in failures}]
    res.seconds = time.perf_counter() - t0
    return res


# -- codemods file ---------------------------------------------------------------------------


def load_codemods(path: Path) -> tuple[list[TargetSpec], str, set[str]]:
    """Read a codemods file written by ``fix --out``: ``(targets, method, codemod names)``.

    Raises:
        AuditError: unreadable file, not JSON, or not a codemods file.
    """
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise AuditError(f"--codemods: no such file: {path}") from None
    except (OSError, ValueError) as exc:
        raise AuditError(f"--codemods: cannot read {path} as JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != CODEMODS_FORMAT:
        raise AuditError(f"--codemods: {path} is not an eagle-audit codemods file (format {CODEMODS_FORMAT})")
    try:
        specs = [
            TargetSpec(t["architecture"], t.get("model_type"), t.get("text_model_type"),
                       t.get("model_type_source") or "codemods file")
            for t in doc["targets"]
        ]
        names = {i["codemod"] for i in doc["invocations"]}
        method = doc.get("method", "eagle3")
    except (KeyError, TypeError) as exc:
        raise AuditError(f"--codemods: {path} is malformed: missing {exc}") from None
    return specs, method, names


# -- writing ---------------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temporary file in the same folder and a rename,
    keeping the file's permission bits."""
    mode = target.stat().st_mode & 0o7777 if target.exists() else None
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".eagle-audit.tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_writable(root: Path, paths: list[str]) -> None:
    problems = []
    if not os.access(root, os.W_OK):
        problems.append(f"{root} (for the backup folder)")
    for p in paths:
        f = root / p
        if not os.access(f, os.W_OK) or not os.access(f.parent, os.W_OK):
            problems.append(str(f))
    if problems:
        raise FixRefused(f"the tree is not writable: {', '.join(problems[:5])}; nothing was written")


def apply_to_folder(root: Path, result: FixResult) -> Path:
    """Write the patched files into the folder tree ``root`` (the folder that contains ``vllm/``).

    Refuses (raises :class:`FixRefused`, nothing written) when a file or folder is not writable
    or a file changed since the diff was computed. Keeps the originals in
    ``root/.eagle-audit-backup/<n>/`` with a ``manifest.json``; every file is replaced
    atomically, and a failure midway restores the files already written.

    Returns:
        The backup folder.
    """
    root = Path(root)
    paths = sorted(result.patched)
    _check_writable(root, paths)
    originals = {p: result.originals[p].encode("utf-8") for p in paths}
    for p in paths:
        try:
            now = (root / p).read_bytes()
        except OSError as exc:
            raise FixRefused(f"cannot read {p}: {exc}; nothing was written") from None
        if _sha(now) != _sha(originals[p]):
            raise FixRefused(f"{p} changed since the diff was computed; nothing was written (run fix again)")
    base = root / BACKUP_DIR
    n = 1 + max((int(d.name) for d in base.iterdir() if d.name.isdigit()), default=0) if base.is_dir() else 1
    bdir = base / str(n)
    try:
        bdir.mkdir(parents=True)
        for p in paths:
            dest = bdir / "files" / p
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(originals[p])
        manifest = {
            "format": "eagle-audit-backup/1",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "method": result.method,
            "targets": [s.architecture for s in result.specs],
            "files": {
                p: {"original_sha256": _sha(originals[p]), "patched_sha256": _sha(result.patched[p].encode("utf-8"))}
                for p in paths
            },
            "invocations": [i.as_dict() for i in result.invocations],
        }
        _atomic_write(bdir / "manifest.json", json.dumps(manifest, indent=2).encode())
    except OSError as exc:
        raise FixRefused(f"cannot write the backup in {bdir}: {exc}; the tree was not changed") from None
    written: list[str] = []
    try:
        for p in paths:
            _atomic_write(root / p, result.patched[p].encode("utf-8"))
            written.append(p)
    except OSError as exc:
        for p in written:
            _atomic_write(root / p, originals[p])
        raise FixRefused(f"writing {root / p} failed ({exc}); the files already written were restored") from None
    return bdir


def revert_folder(root: Path) -> tuple[Path, list[str]]:
    """Undo the latest ``fix --apply`` on the folder tree ``root``: restore each file from the
    backup (atomically) and remove the backup.

    Refuses (raises :class:`FixRefused`, nothing written) when there is no backup, a file was
    changed after the apply, or the tree is not writable.

    Returns:
        ``(backup folder used, restored paths)``.
    """
    import shutil

    root = Path(root)
    base = root / BACKUP_DIR
    nums = sorted((int(d.name) for d in base.iterdir() if d.name.isdigit()), reverse=True) if base.is_dir() else []
    if not nums:
        raise FixRefused(f"no backup of a previous 'fix --apply' in {base}")
    bdir = base / str(nums[0])
    try:
        manifest = json.loads((bdir / "manifest.json").read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise FixRefused(f"the backup in {bdir} is unreadable ({exc}); nothing was restored") from None
    paths = sorted(files)
    _check_writable(root, paths)
    originals = {}
    for p in paths:
        data = (bdir / "files" / p).read_bytes()
        if _sha(data) != files[p]["original_sha256"]:
            raise FixRefused(f"the backup copy of {p} is corrupt; nothing was restored")
        originals[p] = data
        now = (root / p).read_bytes() if (root / p).exists() else b""
        if _sha(now) != files[p]["patched_sha256"] and _sha(now) != files[p]["original_sha256"]:
            raise FixRefused(f"{p} was changed after 'fix --apply'; nothing was restored "
                             f"(the original is kept in {bdir / 'files' / p})")
    for p in paths:
        _atomic_write(root / p, originals[p])
    shutil.rmtree(bdir)
    if base.is_dir() and not any(base.iterdir()):
        base.rmdir()
    return bdir, paths

"""vLLM's registries, read statically: model architectures, drafters, HF config classes.

- The model registry: the module-level tables of ``vllm/model_executor/models/registry.py``
  (``_TEXT_GENERATION_MODELS``, ``_MULTIMODAL_MODELS``, ``_SPECULATIVE_DECODING_MODELS`` … merged
  into ``_VLLM_MODELS``), each row ``"Architecture": ("module", "ClassName")``; several
  architectures may name one class (``DeepseekV32ForCausalLM`` → ``deepseek_v2.DeepseekV3ForCausalLM``).
- The HF config registry: ``_CONFIG_REGISTRY`` in ``vllm/transformers_utils/config.py``
  (model_type → config class, given as a class name in ``vllm.transformers_utils.configs`` or
  as an imported name).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from auditor.engines.vllm.runtime_registry import RUNTIME_REGISTRY_EXTRACTOR, runtime_registry_change
from auditor.index.resolve import Resolver
from auditor.index.summary import Extractor
from auditor.index.tables import extract_all_tables
from auditor.index.targets import ClassRef, Target, Unresolved
from auditor.model.errors import AuditError

REGISTRY_MODULE = "vllm.model_executor.models.registry"
#: What a module's text must hold to change the run-time registry: a changing call or an item
#: write on it (or on an attribute of it), or a rebinding of it under another name.
_MAY_CHANGE_REGISTRY = re.compile(rb"ModelRegistry\b(?:\.\w+)*[ \t]*(?:\.[ \t]*(?:register\w*|update|pop|setdefault|"
                                  rb"clear|popitem|__setitem__|__delitem__)[ \t]*\(|\[|[ \t]+as[ \t]|(?:\.\w+)+[ \t]*=(?!=))"
                                  rb"|=[ \t]*(?:[\w.]*\.)?ModelRegistry\b(?![\w.(])|(?:set|del)attr")

#: The run-time registry object ``registry.py`` builds from its tables (``ModelRegistry =
#: _ModelRegistry(...)``): what vLLM resolves architectures with.
RUNTIME_REGISTRY = "ModelRegistry"

#: Evaluates the module-level tables of the model registry and of the HF config registry.
TABLES_EXTRACTOR = Extractor("tables", extract_all_tables,
                             suffixes=("model_executor/models/registry.py", "transformers_utils/config.py"))
MODELS_PACKAGE = "vllm.model_executor.models"
CONFIG_REGISTRY_MODULE = "vllm.transformers_utils.config"
CONFIGS_PACKAGE = "vllm.transformers_utils.configs"
#: The HF config registry's name in :data:`CONFIG_REGISTRY_MODULE` (model_type → config class).
CONFIG_REGISTRY = "_CONFIG_REGISTRY"

#: Most rows the merged architecture table may have (vLLM 0.33.0 registers 470): a registry
#: beyond it is refused rather than audited row by row for minutes.
MAX_ROWS = 5000

#: Roles of registry rows: a target (it generates, a speculative method can serve it), a drafter
#: (the speculative-decoding table: EAGLE/EAGLE-3/DFlash heads, MTP modules) or a pooling model
#: (embedding, scoring, reward and classification tables: it never generates).
ROLES = ("target", "drafter", "pooling")

#: What the name of a registry table says about its rows (words of the table name → role), in
#: ``vllm/model_executor/models/registry.py`` from 0.10 on. A table matching none of these
#: (``_TRANSFORMERS_BACKEND_MODELS`` mixes generation, MTP and pooling classes) leaves the role
#: to the class itself (see :meth:`Registry.role`).
TABLE_ROLES = (
    (("SPECULATIVE",), "drafter"),
    (("EMBEDDING", "CROSS_ENCODER", "LATE_INTERACTION", "REWARD", "CLASSIFICATION", "POOLING", "SCORING"), "pooling"),
    (("TEXT_GENERATION", "MULTIMODAL", "TRANSFORMERS_SUPPORTED"), "target"),
)


def table_role(table: str) -> str | None:
    """The role a registry table's name gives its rows (``_SPECULATIVE_DECODING_MODELS`` →
    ``drafter``), or None when the name does not tell."""
    for words, role in TABLE_ROLES:
        if any(w in table for w in words):
            return role
    return None


@dataclass
class ArchEntry:
    """One registry row: ``architecture`` → ``module`` (short name under
    ``vllm.model_executor.models``) and ``class_name``; ``tables`` lists the registry tables that
    hold the row (``_MULTIMODAL_MODELS``, ``_SPECULATIVE_DECODING_MODELS`` …); ``line`` is the
    row's line in ``registry.py``."""

    architecture: str
    module: str
    class_name: str
    tables: list[str]
    line: int | None
    #: a change to the row after the table's literal that the index cannot follow (the row's
    #: class is then unknown), as ``construct at path:line``
    unfollowable: str | None = None
    #: why the row is not a ``(module, class)`` pair (its class is then unknown), in plain words
    malformed: str | None = None

    @property
    def dotted_module(self) -> str:
        # registry rows may name a fully qualified module (``vllm.models.deepseek_v4``)
        """The module of the row, absolute (``vllm.model_executor.models.X`` or a full ``vllm.`` path)."""
        if self.module.startswith("vllm."):
            return self.module
        return f"{MODELS_PACKAGE}.{self.module}"

    @property
    def is_drafter(self) -> bool:
        """True for rows of the speculative-decoding (drafter) table."""
        return any("SPECULATIVE" in t for t in self.tables)

    @property
    def table_role(self) -> str | None:
        """The role the row's tables give it: ``target`` when any table is a generation table,
        else ``drafter``, else ``pooling``; None when no table name tells."""
        roles = {table_role(t) for t in self.tables}
        for r in ("target", "drafter", "pooling"):
            if r in roles:
                return r
        return None


class Registry:
    """The model registry and HF config registry of one tree.

    Raises:
        AuditError: when the tree has no readable model registry (not a vLLM tree, or a layout
            this tool does not know).
    """

    def __init__(self, resolver: Resolver):
        self.resolver = resolver
        tree = resolver.tree
        m = tree.module(REGISTRY_MODULE)
        if m is None:
            want = REGISTRY_MODULE.replace(".", "/") + ".py"
            for where, why in sorted(tree.parse_errors.items()):  # a folder on its way that cannot be listed
                if where.endswith("/") and want.startswith(where):
                    raise AuditError(f"cannot read the model registry ({want}): {where} {why}")
            raise AuditError("no model registry (vllm/model_executor/models/registry.py) in this tree")
        if m.error:
            raise AuditError(f"the model registry cannot be read: {m.path}: {m.error}")
        self.path = m.path
        found = m.extras.get("tables", {})
        tables: dict[str, dict] = found.get("tables", {})
        key_lines: dict[str, int] = found.get("key_lines", {})
        built: dict[str, tuple] = found.get("built", {})
        merged_name = "_VLLM_MODELS" if "_VLLM_MODELS" in tables or "_VLLM_MODELS" in built else None
        if merged_name is None:
            # the biggest table of (module, class) rows is the merged one
            cands = [k for k, v in tables.items() if _is_arch_table(v)]
            if not cands:
                raise AuditError(f"no architecture table found in {m.path}")
            merged_name = max(cands, key=lambda k: len(tables[k]))
        # the merged table as the module ends up with it: built at run time, or rebound behind the
        # index's back (``global`` in a function, ``globals()``, a loop target, a star import)
        dynamic = None
        if merged_name in built:
            construct, line = built[merged_name]
            dynamic = f"`{construct}` at {m.path}:{line} (the table is built at run time)"
            rows: dict = {}
            for t, v in tables.items():
                if _is_arch_table(v):
                    for k, row in v.items():
                        rows.setdefault(k, row)
            if not rows:
                raise AuditError(f"the model registry {merged_name} is built at run time by {dynamic.split(' (')[0]}, "
                                 "which static analysis cannot follow, and no literal table names an architecture")
            tables = {**tables, merged_name: rows}
        marks = m.unfollowable.get(merged_name, []) + m.unfollowable.get("*", [])
        if dynamic is None and marks:
            construct, line, _ = marks[0]
            dynamic = f"{construct} at {m.path}:{line}"
        lit_line = found.get("lines", {}).get(merged_name, 0)
        for star, line in m.stars:
            if dynamic is None and line > lit_line and resolver.star_exports(star, merged_name):
                dynamic = f"`from {star} import *` at {m.path}:{line}"
        runtime = m.extras.get(RUNTIME_REGISTRY_EXTRACTOR.name)
        if dynamic is None:
            # vLLM resolves through the object built from the tables, not through the tables
            dynamic = runtime_registry_change(runtime, m.path, merged_name)
        if len(tables[merged_name]) > MAX_ROWS:
            raise AuditError(f"the model registry {m.path} has {len(tables[merged_name])} rows in {merged_name}, more "
                             f"than {MAX_ROWS} (a vLLM release registers under 1000): refusing to audit it")
        self.entries: dict[str, ArchEntry] = {}
        others = [t for t, v in tables.items() if t != merged_name and _is_arch_table(v)]  # once, not per row
        taint = found.get("unfollowable", {}).get(merged_name, [])
        malformed = []
        for arch, val in tables[merged_name].items():
            if not (isinstance(val, tuple) and len(val) == 2 and all(isinstance(x, str) for x in val)):
                if not isinstance(arch, str):
                    continue
                # a row that is not a (module, class) pair: kept, so that its target is named unknown
                line = key_lines.get(arch)
                where = f"{m.path}:{line}" if line else f"{m.path} ({merged_name})"
                plain = (f"the registry row {arch!r} at {where} is {val!r}, not a (module, class) pair: vLLM cannot "
                         "load a class from it")
                malformed.append(plain)
                strs = [x for x in val if isinstance(x, str)] if isinstance(val, tuple) else []
                self.entries[arch] = ArchEntry(arch, strs[0] if strs else "?", strs[1] if len(strs) > 1 else "?",
                                               [t for t in others if arch in tables[t]], line, malformed=plain)
                continue
            in_tables = [t for t in others if arch in tables[t]]
            self.entries[arch] = ArchEntry(arch, val[0], val[1], in_tables, key_lines.get(arch))
        if malformed and runtime is not None and runtime.get("unpacks") and dynamic is None:
            # ModelRegistry's comprehension unpacks every row in two: the import of registry.py fails
            dynamic = (f"`{runtime['construct']}` at {m.path}:{runtime['line']}, which unpacks every row into a "
                       f"(module, class) pair and so fails when vLLM imports it ({malformed[0]})")
        for key, construct, line in taint:
            for e in self.entries.values():
                if key is None or key == e.architecture:
                    e.unfollowable = e.unfollowable or f"`{construct}` at {m.path}:{line}"
        if dynamic is not None:
            for e in self.entries.values():
                e.unfollowable = e.unfollowable or dynamic
        for key, change in self._changed_elsewhere(m.path):
            for e in self.entries.values():
                if key is None or key == e.architecture:
                    e.unfollowable = e.unfollowable or change
        self._configs: dict[str, object] | None = None
        #: changes to the HF config registry the index cannot follow, as ``(model_type or None,
        #: "`construct` at path:line")`` (filled with :attr:`_configs`)
        self._config_changes: list[tuple[str | None, str]] = []

    def _changed_elsewhere(self, own: str) -> list[tuple[str | None, str]]:
        """Rows of the run-time registry (``ModelRegistry``, an instance built in
        ``registry.py``) changed by the modules of the tree (``registry.py`` itself included),
        at module level (when the module is imported) or in a function or method (when it is
        called): ``ModelRegistry.register_model("X", ...)``, ``ModelRegistry.models["X"] = ...``,
        an attribute of it replaced (``ModelRegistry.models = {}``, ``setattr(ModelRegistry,
        ...)``: any row); as ``(architecture or None for any row, "`construct` at path:line")``."""
        r = self.resolver
        cls = r.instance_of(REGISTRY_MODULE, RUNTIME_REGISTRY)
        if cls is None:
            return []
        out = []
        for p in r.mentioning(RUNTIME_REGISTRY):
            if not _MAY_CHANGE_REGISTRY.search(r.tree.read(p)):
                continue
            s = r.tree.summary(p)
            for head, _method, key, construct, line, fn in s.container_changes:
                if p == own and fn is None and head.split(".")[0] != RUNTIME_REGISTRY:
                    continue  # the module's own tables, evaluated as Python runs them
                owners = [head] + ([head.rsplit(".", 1)[0]] if "." in head else [])
                if any(r.instance_of(s.module, o, fn) == cls for o in owners):
                    when = f"in {fn}(), when it is called" if fn else f"when {s.module} is imported"
                    out.append((key, f"`{construct}` at {s.path}:{line} ({when})"))
            # an attribute of the registry object replaced (``ModelRegistry.models = {}``,
            # ``setattr(ModelRegistry, "models", ...)``): any row
            changes = [(h, m, c, ln, None) for h, m, c, ln in s.foreign_changes] + list(s.deferred_changes)
            for head, _member, construct, line, fn in changes:
                if r.instance_of(s.module, head, fn) == cls:
                    when = f"in {fn}(), when it is called" if fn else f"when {s.module} is imported"
                    out.append((None, f"`{construct}` at {s.path}:{line} ({when})"))
        return out

    def architectures(self) -> list[str]:
        """Every registered architecture name, sorted."""
        return sorted(self.entries)

    #: how messages name the engine whose registry this is
    display = "vLLM"

    def registered_in(self, arch: str) -> str:
        """Where a result note says ``arch`` is registered: the names of its tables
        (``_SPECULATIVE_DECODING_MODELS``). Raises KeyError for an unknown architecture."""
        return ", ".join(self.entries[arch].tables) or "a registry table that does not tell"

    def drafters(self) -> list[ArchEntry]:
        """Rows whose role is ``drafter`` (see :meth:`role`)."""
        return [e for e in self.entries.values() if self.role(e.architecture) == "drafter"]

    def role(self, arch: str) -> str:
        """The row's role: ``target``, ``drafter`` or ``pooling`` (:data:`ROLES`).

        From the tables that register the row (:attr:`ArchEntry.table_role`); for a row only in
        tables whose name does not tell (the Transformers backend table), from its class: a class
        whose MRO sets ``is_pooling_model = True`` (vLLM's ``VllmModelForPooling``) is pooling, a
        row named for multi-token prediction (``...ForMTP``) is a drafter, any other is a target.

        Raises:
            KeyError: ``arch`` is not in the registry.
        """
        cache = self.__dict__.setdefault("_roles", {})
        if arch in cache:
            return cache[arch]
        e = self.entries[arch]
        role = e.table_role
        if role is None:
            t = self.class_ref(arch)
            hit = self.resolver.lookup(t, "is_pooling_model") if isinstance(t, ClassRef) else None
            if hit is not None and getattr(hit[1], "literal", None) is True:
                role = "pooling"
            elif "MTP" in arch:
                role = "drafter"
            else:
                role = "target"
        cache[arch] = role
        return role

    def class_ref(self, arch: str) -> Target:
        """Resolve an architecture to its class (through the module's bindings)."""
        e = self.entries[arch]
        if e.malformed and not e.unfollowable:
            return Unresolved(f"{e.dotted_module}.{e.class_name}", e.malformed)
        if e.unfollowable:
            return Unresolved(f"{e.dotted_module}.{e.class_name}", f"the registry row of {arch} may be changed by "
                                                                   f"{e.unfollowable}, which static analysis cannot follow")
        if not self.resolver.tree.has_module(e.dotted_module):
            return Unresolved(f"{e.dotted_module}.{e.class_name}", f"module {e.module} is not in the tree")
        return self.resolver.resolve_name(e.dotted_module, e.class_name)

    # -- HF config registry ------------------------------------------------------------
    def _load_configs(self) -> dict[str, object]:
        if self._configs is not None:
            return self._configs
        self._configs = {}
        self._config_changes: list[tuple[str | None, str]] = []
        m = self.resolver.tree.module(CONFIG_REGISTRY_MODULE)
        if m is None or m.error:
            return self._configs
        found = m.extras.get("tables", {})
        tables = found.get("tables", {})
        name = CONFIG_REGISTRY
        if name not in tables and name not in found.get("built", {}):
            cands = [k for k in tables if "CONFIG" in k and "REGISTRY" in k]
            name = cands[0] if cands else name
        self._configs = dict(tables.get(name, {}))
        changes = self._config_changes
        # built at run time, changed where the index cannot follow it, rebound behind its back,
        # or changed by other modules of the tree (when they run, static analysis cannot tell)
        if name in found.get("built", {}):
            construct, line = found["built"][name]
            changes.append((None, f"`{construct}` at {m.path}:{line} (the table is built at run time)"))
        for key, construct, line in found.get("unfollowable", {}).get(name, []):
            changes.append((key, f"`{construct}` at {m.path}:{line}"))
        for construct, line, _ in m.unfollowable.get(name, []) + m.unfollowable.get("*", []):
            changes.append((None, f"{construct} at {m.path}:{line}"))
        lit_line = found.get("lines", {}).get(name, 0)
        for star, line in m.stars:
            if line > lit_line and self.resolver.star_exports(star, name):
                changes.append((None, f"`from {star} import *` at {m.path}:{line}"))
        changes += self._config_changed_elsewhere(m.path, name)
        return self._configs

    def _config_changed_elsewhere(self, own: str, name: str) -> list[tuple[str | None, str]]:
        """Rows of the HF config registry ``name`` changed by other modules of the tree, at
        module level or in a function or method (``_CONFIG_REGISTRY["x"] = ...``,
        ``.update(...)``, ``del``), through a name that resolves to it: as ``(model_type or None
        for any row, "`construct` at path:line (when)")``."""
        r = self.resolver
        out: list[tuple[str | None, str]] = []
        for p in r.mentioning(name):
            if p == own:
                continue
            s = r.tree.summary(p)
            for head, _method, key, construct, line, fn in s.container_changes:
                first = head.split(".")[0]
                b = s.bindings.get(first)
                if fn and fn in s.functions and first in s.functions[fn].local_bindings:
                    b = s.functions[fn].local_bindings[first]
                elif fn and first in s.scope_bindings.get(fn, {}):
                    b = s.scope_bindings[fn][first]
                if head.split(".")[-1] != name and not (b is not None and b.kind == "import" and b.target[1] == name):
                    continue
                when = f"in {fn}(), when it is called" if fn else f"when {s.module} is imported"
                out.append((key, f"`{construct}` at {s.path}:{line} ({when})"))
        return out

    def config_registry_change(self, model_type: str) -> str | None:
        """The change to vLLM's HF config registry that static analysis cannot follow and that
        may change the row of ``model_type`` (``"`construct` at path:line"``), or None: then
        :meth:`config_class` answers as the engine runs. From
        ``vllm/transformers_utils/config.py`` (a table built at run time, a change in a loop, a
        branch or a function, a later star import) and from every module that changes the table
        through its name."""
        self._load_configs()
        for key, change in self._config_changes:
            if key is None or key == model_type:
                return change
        return None

    def config_registry(self) -> dict[str, object]:
        """``_CONFIG_REGISTRY`` as read: model_type → a class name in
        ``vllm.transformers_utils.configs`` or ``("name", imported name)``."""
        return dict(self._load_configs())

    def config_model_types(self) -> list[str]:
        """model_types the tree registers its own HF config class for."""
        return sorted(self._load_configs())

    def config_class(self, model_type: str) -> Target | None:
        """The HF config class vLLM registers for ``model_type`` (None when vLLM registers none,
        i.e. the class comes from ``transformers``); :class:`Unresolved` when the row may be
        changed in a way static analysis cannot follow (:meth:`config_registry_change`)."""
        change = self.config_registry_change(model_type)
        if change is not None:
            return Unresolved(f"{CONFIG_REGISTRY}[{model_type!r}]", f"vLLM's {CONFIG_REGISTRY} may be changed by {change}, "
                                                                   "which static analysis cannot follow")
        val = self._load_configs().get(model_type)
        if val is None:
            return None
        r = self.resolver
        if isinstance(val, str):
            t = r.resolve_name(CONFIGS_PACKAGE, val)
            return t
        if isinstance(val, tuple) and val and val[0] == "name":
            return r.resolve_name(CONFIG_REGISTRY_MODULE, val[1])
        return Unresolved(str(val), "config registry value is not a class name")


def _is_arch_table(v: object) -> bool:
    if not isinstance(v, dict) or not v:
        return False
    sample = list(itertools.islice(v.values(), 5))
    return all(isinstance(x, tuple) and len(x) == 2 and all(isinstance(y, str) for y in x) for x in sample)

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
from dataclasses import dataclass

from auditor.index.resolve import ClassRef, Resolver, Target, Unresolved
from auditor.index.summary import Extractor
from auditor.index.tables import extract_all_tables
from auditor.model.errors import AuditError

REGISTRY_MODULE = "vllm.model_executor.models.registry"

#: Evaluates the module-level tables of the model registry and of the HF config registry.
TABLES_EXTRACTOR = Extractor("tables", extract_all_tables,
                             suffixes=("model_executor/models/registry.py", "transformers_utils/config.py"))
MODELS_PACKAGE = "vllm.model_executor.models"
CONFIG_REGISTRY_MODULE = "vllm.transformers_utils.config"
CONFIGS_PACKAGE = "vllm.transformers_utils.configs"

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
        merged_name = "_VLLM_MODELS" if "_VLLM_MODELS" in tables else None
        if merged_name is None:
            # the biggest table of (module, class) rows is the merged one
            cands = [k for k, v in tables.items() if _is_arch_table(v)]
            if not cands:
                raise AuditError(f"no architecture table found in {m.path}")
            merged_name = max(cands, key=lambda k: len(tables[k]))
        if len(tables[merged_name]) > MAX_ROWS:
            raise AuditError(f"the model registry {m.path} has {len(tables[merged_name])} rows in {merged_name}, more "
                             f"than {MAX_ROWS} (a vLLM release registers under 1000): refusing to audit it")
        self.entries: dict[str, ArchEntry] = {}
        others = [t for t, v in tables.items() if t != merged_name and _is_arch_table(v)]  # once, not per row
        taint = found.get("unfollowable", {}).get(merged_name, [])
        for arch, val in tables[merged_name].items():
            if not (isinstance(val, tuple) and len(val) == 2 and all(isinstance(x, str) for x in val)):
                continue
            in_tables = [t for t in others if arch in tables[t]]
            self.entries[arch] = ArchEntry(arch, val[0], val[1], in_tables, key_lines.get(arch))
        for key, construct, line in taint:
            for e in self.entries.values():
                if key is None or key == e.architecture:
                    e.unfollowable = e.unfollowable or f"`{construct}` at {m.path}:{line}"
        self._configs: dict[str, object] | None = None

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
        m = self.resolver.tree.module(CONFIG_REGISTRY_MODULE)
        if m is None or m.error:
            return self._configs
        table = m.extras.get("tables", {}).get("tables", {}).get("_CONFIG_REGISTRY")
        if table is None:
            cands = [v for k, v in m.extras.get("tables", {}).get("tables", {}).items() if "CONFIG" in k and "REGISTRY" in k]
            table = cands[0] if cands else {}
        self._configs = dict(table)
        return self._configs

    def config_registry(self) -> dict[str, object]:
        """``_CONFIG_REGISTRY`` as read: model_type → a class name in
        ``vllm.transformers_utils.configs`` or ``("name", imported name)``."""
        return dict(self._load_configs())

    def config_model_types(self) -> list[str]:
        """model_types the tree registers its own HF config class for."""
        return sorted(self._load_configs())

    def config_class(self, model_type: str) -> Target | None:
        """The HF config class vLLM registers for ``model_type`` (None when vLLM registers none,
        i.e. the class comes from ``transformers``)."""
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

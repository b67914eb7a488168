"""The rule protocol shared by every gate in ``rules/``.

A rule is one small class: its code, gate id, name (the problem, not the fix), the ``WHY`` and
``HOW_TO_FIX`` texts that document it, ``FIX_AVAILABLE``, the methods it applies to, and
``VALID``/``INVALID`` examples (small synthetic model files) that the test suite runs through the
real scanner. ``check`` is a pure generator of :class:`~auditor.model.findings.Finding`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Hashable, Iterator, TypeVar

from auditor.engines.base import TreeFactsBase
from auditor.index.providers import FactProvider, FactStore, ModuleAst
from auditor.index.resolve import Resolver
from auditor.model.findings import Finding, Severity
from auditor.model.options import RunOptions

P = TypeVar("P", bound=FactProvider)


@dataclass
class AuditTarget:
    """One target to audit: a registry ``architecture`` for one speculative ``method``.

    ``model_type``: the target's own model_type (``kimi_k25``); ``text_model_type``: the text
    config's model_type that vLLM's allowlist checks (``kimi_k2`` for Kimi-K2.5);
    ``model_type_source``: how the tool knows it (``--model-type``, ``--hf-config``,
    ``alias table``, the config class it was read from, ``guessed from the class name``);
    ``hf_config``: the checkpoint's parsed config.json when given; ``options``: the run
    (pipeline-parallel size, drafter config, …; ``options.method`` is the method as requested,
    ``method`` the one the tree runs, e.g. ``mtp`` for a requested ``deepseek_mtp``).
    """

    architecture: str
    method: str
    #: what the tree says of the architecture (``ref``, ``unresolved``, …: the engine's
    #: ``target_facts``)
    facts: Any
    model_type: str | None = None
    text_model_type: str | None = None
    model_type_source: str = "guessed from the class name"
    hf_config: dict | None = None
    options: RunOptions = field(default_factory=RunOptions)
    #: the holder model the engine names on the result line (dotted; EAGLE-3 only), set by the
    #: scan before the rules run
    holder: str | None = None


@dataclass
class Context:
    """What every rule may read: the tree's resolver, the engine's registry (``entries``,
    ``architectures()``, ``role(arch)``, ``class_ref(arch)``, …) and tree-wide facts (``facts``:
    the engine's :class:`auditor.engines.base.TreeFactsBase`), typed facts computed once per
    tree (:meth:`get`), the tree's ``engine`` name, and ``transformers_loader``: how the run
    chooses the transformers source its verdicts may read (``() -> (configs or None, note)``).
    """

    resolver: Resolver
    registry: Any
    facts: TreeFactsBase
    #: the engine of the tree (``vllm``, ``sglang``): only rules whose ``ENGINES`` name it run
    engine: str = "vllm"
    transformers_loader: Callable[[], tuple[Any, str]] | None = None
    store: FactStore = field(default_factory=FactStore)

    def get(self, provider: type[P], key: Hashable = None) -> Any:
        """The fact ``provider`` computes for ``key`` (``ctx.get(HolderFacts, ref)``), computed
        once per tree; see :class:`auditor.index.providers.FactStore`.

        Raises:
            auditor.index.providers.UndeclaredFact: the provider or rule being computed did not
                declare ``provider``.
        """
        return self.store.get(self, provider, key)

    def function_node(self, path: str, name: str, line: int):
        """The ``ast`` syntax tree of the function ``name`` defined at ``line`` of the module at
        ``path`` (:class:`ModuleAst`), for gates that interpret a few lines of code
        (:mod:`auditor.index.evaluate`). None when the module no longer parses or holds no such
        function."""
        import ast

        mod = self.store.get(self, ModuleAst, path)
        if mod is None:
            return None
        for node in ast.walk(mod):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name and node.lineno == line:
                return node
        return None


@dataclass
class Example:
    """A rule example: ``files`` (path → source) laid over the synthetic base tree in
    ``fixtures/minivllm``, the ``architecture`` to audit, and for INVALID examples the
    ``text_model_type`` used. ``expect_severity`` is what the rule must report (None: nothing).
    ``options``: the run the example assumes (pipeline-parallel size, drafter config, …; its
    ``method`` is ignored: ``method`` is the one audited); ``hf_config``: a checkpoint config.json;
    ``model_type``: the target's own model_type (default: derived from the architecture name);
    ``rows``: registry rows ``(architecture, module, class name, table)`` added to the tree;
    ``engine``: for a rule that judges several engines, the one whose synthetic base tree
    (``fixtures/minivllm``, ``fixtures/minisglang``) the example is laid over (None: the rule's
    only engine)."""

    files: dict[str, str]
    architecture: str
    text_model_type: str = "llama"
    method: str = "eagle3"
    expect_severity: Severity | None = None
    note: str = ""
    options: RunOptions = field(default_factory=RunOptions)
    hf_config: dict | None = None
    model_type: str | None = None
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    engine: str | None = None


class Rule:
    """Base class of the rules. Subclasses set the class attributes and implement ``check``."""

    CODE: ClassVar[str]
    GATE: ClassVar[str]
    NAME: ClassVar[str]
    SUMMARY: ClassVar[str]
    WHY: ClassVar[str]
    HOW_TO_FIX: ClassVar[str]
    FIX_AVAILABLE: ClassVar[bool] = False
    BLOCKING: ClassVar[bool] = True
    METHODS: ClassVar[tuple[str, ...]] = ("eagle3",)
    #: for a gate that only some runs reach: what the run needs for the gate to be evaluated
    #: (said when it is not: "needs --parallel-drafting")
    REQUIRES: ClassVar[str] = ""
    #: for such a gate: what a report names as not checked when the run does not reach it, and
    #: the option that would evaluate it ("your drafter (--draft-config)")
    CHECKED_WITH: ClassVar[str] = ""
    #: the engines whose trees the rule judges (a gate id names the same concept in each engine;
    #: an engine whose mechanism differs has its own rule class under the same gate id)
    ENGINES: ClassVar[tuple[str, ...]] = ("vllm",)
    #: The dataclass of this rule's machine-readable finding details (None: findings carry none).
    DATA: ClassVar[type | None] = None
    #: the fact providers :meth:`check` asks for (``ctx.get``); when set, any other is refused
    #: (None: not declared)
    FACTS: ClassVar[tuple[type[FactProvider], ...] | None] = None
    #: True for a rule the scan runs even when the target's class does not resolve (EA300); the
    #: other rules are then not evaluated
    UNRESOLVED: ClassVar[bool] = False
    VALID: ClassVar[list[Example]] = []
    INVALID: ClassVar[list[Example]] = []
    #: set by :meth:`check` when the gate depends on code outside the tree (yielding nothing): the
    #: reason, reported as "not evaluated" beside the verdict instead of a finding
    not_evaluated: str | None = None

    def applies(self, target: AuditTarget) -> bool:
        """True when the rule checks the target's speculative method."""
        return target.method in self.METHODS

    def skip_reason(self, target: AuditTarget) -> str:
        """Why the rule did not check ``target`` (when :meth:`applies` is False): the methods it
        applies to, or what the run lacks (:attr:`REQUIRES`)."""
        if target.method not in self.METHODS:
            return f"applies to {', '.join(self.METHODS)}, not {target.method}"
        if self.REQUIRES:
            return f"needs {self.REQUIRES}"
        return "does not apply to this run"

    @classmethod
    def judges(cls, engine: str) -> bool:
        """True when the rule applies to trees of ``engine``."""
        return engine in cls.ENGINES

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:  # pragma: no cover
        """Findings of this rule for one target (a generator; empty when the gate passes)."""
        raise NotImplementedError

    def finding(self, severity: Severity, message: str, path=None, line=None, fix=None, **data) -> Finding:
        """A finding of this rule (``fix`` defaults to ``FIX_AVAILABLE`` for errors); ``data``
        are the fields of the rule's :attr:`DATA` dataclass.

        Raises:
            TypeError: ``data`` given to a rule without ``DATA``, or fields ``DATA`` lacks.
        """
        if fix is None:
            fix = self.FIX_AVAILABLE and severity is Severity.ERROR
        if data and self.DATA is None:
            raise TypeError(f"{type(self).__name__} declares no DATA for {sorted(data)}")
        details = self.DATA(**data) if data else None
        return Finding(self.CODE, self.GATE, severity, message, path, line, fix, details)

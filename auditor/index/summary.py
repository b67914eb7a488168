"""Static index of one Python module of a vLLM tree: classes, members, imports, bindings.

The index is built with the standard library ``ast`` (see DESIGN.md for the
measurement behind that choice) and never imports or executes the scanned code. One call of
:func:`summarize` turns a module's source bytes into a :class:`~auditor.index.facts.ModuleSummary`,
a plain picklable record (the records live in :mod:`auditor.index.facts`) that later stages (name
resolution, MRO, rules) read instead of the syntax tree, so that summaries can be cached by file
content and computed in worker processes.

The summariser is made of parts by concern: module-level statements
(:mod:`auditor.index.statements`), member changes after a class (:mod:`auditor.index.changes`),
changes inside scopes (:mod:`auditor.index.scopes`), namespaces and code run as text
(:mod:`auditor.index.namespaces`); the byte tests that skip its walks are in
:mod:`auditor.index.prefilter`, dead-code pruning in :mod:`auditor.index.prune`.

Facts that only a few modules need (the EAGLE-3 allowlist, the proposer's image-token branches,
the registry tables) are extracted in the same pass by the :class:`Extractor` objects the layers above supply.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable

from auditor.index.changes import MemberChangesMixin
from auditor.index.facts import Binding, ClassFact, ModuleSummary
from auditor.index.importsteps import import_steps
from auditor.index.namespaces import NamespacesMixin
from auditor.index.newsyntax import left_out_statements, parse_newer_syntax
from auditor.index.prefilter import summarizer_flags
from auditor.index.prune import first_raise, prune_dead_code
from auditor.index.scopes import ScopesMixin
from auditor.index.statements import StatementsMixin
from auditor.index.syntax import module_name_for, short_text


@dataclass(frozen=True)
class Extractor:
    """A fact extractor that runs in the summary pass, only on the modules it is meant for.

    ``name``: the key of its facts in :attr:`ModuleSummary.extras`; ``prefixes``/``suffixes``:
    the module paths it applies to (POSIX, relative to the folder that holds the engine
    package; a path qualifies when it starts with a prefix or ends with a suffix); ``needles``:
    byte strings that must all occur in the source; ``prefilter``: an optional cheaper test of the
    bytes; ``run``: ``ast.Module -> facts`` (plain, cacheable data; an empty result is not stored).
    Extractors are supplied by the layers above (engines, rules); the index knows none by name.
    """

    name: str
    run: Callable[[ast.Module], Any]
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    needles: tuple[bytes, ...] = ()
    prefilter: Callable[[bytes], bool] | None = None

    def wants(self, path: str, source: bytes) -> bool:
        """True when the extractor applies to the module at ``path`` with bytes ``source``."""
        if not (path.startswith(self.prefixes) or path.endswith(self.suffixes)):
            return False
        if not all(n in source for n in self.needles):
            return False
        return self.prefilter is None or self.prefilter(source)


class _Summarizer(StatementsMixin, MemberChangesMixin, ScopesMixin, NamespacesMixin):
    """One module's summary pass: the state its parts share, and their order (:meth:`run`). The
    keyword flags switch the whole-module walks a module cannot need (see
    :func:`auditor.index.prefilter.summarizer_flags`)."""

    def __init__(self, module: str, path: str, is_package: bool, track_bases: bool = False, dynamic: bool = True,
                 walrus: bool = True, globals_stmt: bool = True, reflective: bool = True, namespace: bool = True,
                 self_rebound: bool = True):
        self.s = ModuleSummary(module=module, path=path, is_package=is_package)
        #: the source may rebind a method's ``self`` (:func:`auditor.index.prefilter.summarizer_flags`)
        self.self_rebound = self_rebound
        #: the source names ``setattr``/``delattr``/``__setattr__``/``__delattr__``/``__dict__``:
        #: look for them wherever they are, not only as statements (:meth:`_scopes`)
        self.reflective = reflective
        #: ``id()`` of the calls and attribute targets already recorded as member changes
        self._seen: set[int] = set()
        #: the source may bind names behind the index's back (``globals()``, ``vars()``,
        #: ``sys.modules``): walk the whole module for it (:meth:`_dynamic`)
        self.dynamic = dynamic
        #: the source holds ``:=``: look for walrus bindings at module scope
        self.walrus = walrus
        #: the source holds ``global``: look for ``global`` statements
        self.globals_stmt = globals_stmt
        #: the module assigns some ``__bases__``: record which functions append bases
        self.track_bases = track_bases
        #: the ``if`` tests around the statement being summarised (see :attr:`Binding.conds`)
        self.conds: tuple = ()
        self.in_handler = False
        #: the last line of the loop or ``match`` whose body is being summarised: a name bound
        #: there may be bound any number of times (or never), which the index does not follow
        self.loop_end: int | None = None
        #: module-level ``globals()[...] = v`` statements summarised as bindings
        self._handled: set[int] = set()
        self._all: dict[str, list[Binding]] = {}
        self._tc_all: dict[str, list[Binding]] = {}
        #: the source may write a namespace behind the index's back or run text as code (see
        #: :mod:`auditor.index.prefilter`): walk every scope for it (:meth:`_namespaces`)
        self.namespace = namespace
        #: the class statements summarised, by ``id()`` of their node
        self._class_nodes: dict[int, ClassFact] = {}
        #: the module-level function definitions, by name (the last one)
        self._fn_nodes: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        #: module-level names assigned this module's object (``_me = sys.modules[__name__]``)
        self._self_names: set[str] = set()
        #: module-level names assigned this module's dictionary (``_d = sys.modules[__name__].__dict__``)
        self._self_dicts: set[str] = set()
        #: module-level ``for`` targets whose body is being summarised, with their iterables
        self.loop_iters: dict[str, ast.expr] = {}

    # -- module level -----------------------------------------------------------------
    def run(self, tree: ast.Module) -> ModuleSummary:
        """Summarise a parsed module (its statements in order)."""
        self._stmts(tree.body, guarded=False, type_checking=False)
        raising = first_raise(tree.body)
        if raising is not None:
            self.s.raises_at = (raising.lineno, short_text(raising.exc) if raising.exc is not None else "raise")
        self._dynamic(tree)
        if self.namespace:
            self._namespaces(tree)
        self._scopes(tree)
        for src, dest in ((self._all, self.s.cond_bindings), (self._tc_all, self.s.tc_cond_bindings)):
            for name, bs in src.items():
                if any(b.conds for b in bs):
                    dest[name] = bs
        return self.s

    def _mark(self, name: str, construct: str, line: int, ordered: bool = True) -> None:
        """Record a binding of ``name`` (``"*"``: any name) the index cannot follow."""
        self.s.unfollowable.setdefault(name, []).append((construct, line, ordered))


def parse_error_line(exc: SyntaxError) -> str:
    """One-line description of a parse error: ``line N: message``."""
    return f"line {exc.lineno}: {exc.msg}"


#: The largest module the summary pass parses. ``ast.parse`` holds about 100 bytes of memory per
#: byte of a dense source (a 4 MB table of 100,000 rows: 450 MB); the largest module of a vLLM or
#: SGLang release is under 400 KB (vLLM 0.33.0's ``gpu_model_runner.py``: 319 KB).
MAX_PARSE_BYTES = 2 << 20


def _too_big(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to analyse (RecursionError); not analysed"
    return "too large to analyse (MemoryError); not analysed"


def summarize(source: bytes, path: str, extractors: tuple[Extractor, ...] = ()) -> ModuleSummary:
    """Build the :class:`ModuleSummary` of one module.

    Args:
        source: the module's bytes as stored in the tree (any encoding Python accepts).
        path: POSIX path relative to the folder that contains ``vllm/`` (``vllm/x/y.py``).
        extractors: the fact extractors to run on this module when they want it
            (their results go to ``extras`` under their names).

    Returns:
        The summary; a file that does not parse yields a summary with ``error`` set and no facts
        (the caller reports it and goes on). Never raises for bad source.
    """
    import gc

    module, is_package = module_name_for(path)
    # Syntax trees hold no reference cycles: the cyclic collector only slows their building.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        replaced: list[int] = []
        if len(source) > MAX_PARSE_BYTES:
            return ModuleSummary(module=module, path=path, is_package=is_package,
                                 error=(f"{len(source)} bytes, larger than the {MAX_PARSE_BYTES >> 20} MiB a module is "
                                        "parsed up to (a release's largest is under 400 KB); not analysed"))
        try:
            tree = ast.parse(source, filename=path)
        except (SyntaxError, ValueError) as exc:
            try:
                newer = parse_newer_syntax(source, path)
            except (RecursionError, MemoryError) as deep:
                return ModuleSummary(module=module, path=path, is_package=is_package, error=_too_big(deep))
            if newer is None:
                msg = parse_error_line(exc) if isinstance(exc, SyntaxError) else str(exc)
                return ModuleSummary(module=module, path=path, is_package=is_package, error=msg)
            tree, replaced = newer
        except (RecursionError, MemoryError) as exc:
            return ModuleSummary(module=module, path=path, is_package=is_package, error=_too_big(exc))
        try:  # the walks below recurse too: a tree that parsed may still be too deep for them
            steps = None if replaced else import_steps(tree, module, is_package)
            left_out = left_out_statements(tree, replaced) if replaced else []
            prune_dead_code(tree)
            summary = _Summarizer(module, path, is_package, **summarizer_flags(source)).run(tree)
            summary.import_steps = steps
            if replaced:
                # statements of a grammar newer than this interpreter's, left out of the index:
                # each may bind or change any name of its scope (``class X[T]: ...`` rebinds X,
                # ``type X = int``), which the index does not follow
                summary.extras["newer_syntax_lines"] = replaced
                for line, qualname, top in left_out:
                    construct = (f"a statement of a newer Python grammar than this interpreter's (line {line}), "
                                 "left out of the index")
                    cf = summary.classes.get(qualname) if qualname else None
                    if cf is not None:
                        cf.unfollowable.append(("*", construct, line))
                    else:
                        summary.unfollowable.setdefault("*", []).append((construct, line, top))
            for ex in extractors:
                if ex.wants(path, source):
                    found = ex.run(tree)
                    if found:
                        summary.extras[ex.name] = found
        except (RecursionError, MemoryError) as exc:
            return ModuleSummary(module=module, path=path, is_package=is_package, error=_too_big(exc))
        return summary
    finally:
        if was_enabled:
            gc.enable()

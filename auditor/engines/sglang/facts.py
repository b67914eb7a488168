"""Facts about an SGLang tree and its targets for EAGLE-3 (no verdicts here).

SGLang has no protocol class for EAGLE-3: the model runner calls the target's
``set_eagle3_layers_to_capture`` (0.5.10.post1 ``sglang/srt/model_executor/model_runner.py``
calls it directly; 0.5.23 ``model_executor/model_runner_components/attention_backend_setup.py``
first checks ``hasattr(model, "set_eagle3_layers_to_capture")`` and raises ``ValueError``). The
setter then stores the layer ids on the inner model (``self.model.layers_to_capture = [...]``, or
the inner model's own setter) and sets ``capture_aux_hidden_states``; the inner model's
``forward`` collects the hidden state entering each of those layers and returns
``(hidden_states, aux_hidden_states)``. Multimodal wrappers delegate the setter to
``self.language_model`` — sometimes behind ``if hasattr(self.language_model, ...)``, which does
nothing at all when the language model lacks it.

:data:`~auditor.engines.sglang.capture.CAPTURE_EXTRACTOR` reads, in the summary pass, each class's setter (what it writes, where
it delegates, under which guard) and each ``forward``'s layer loops (whether a test on the
capture list appends or hands over the aux-states list, and whether ``forward`` returns it).
:class:`TreeFacts` finds how the runner calls the setter; :func:`trace_capture` follows one
target's setter to the model that captures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from auditor.engines.base import TreeFactsBase, init_argument, init_assign
from auditor.engines.sglang.capture import CAPTURE_EXTRACTOR
from auditor.engines.sglang.workers import worker_members
from auditor.index.facts import MethodFact
from auditor.index.providers import FactProvider
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef, External, Unresolved

#: The setter SGLang's runner calls on the target for EAGLE-3, when the tree's runner does not
#: say otherwise (see :meth:`TreeFacts.runner_calls`).
SETTER = "set_eagle3_layers_to_capture"

#: The attribute the setters fill on the inner model and its ``forward`` tests.
CAPTURE_ATTR = "layers_to_capture"

#: Where the runner lives (modules outside the model files that call the setter).
RUNTIME_PREFIXES = ("sglang/srt/model_executor/", "sglang/srt/speculative/", "sglang/srt/managers/")

_SETTER_CALL = re.compile(rb"\.(set_eagle3\w*)\s*\(")
_HASATTR = re.compile(rb"hasattr\s*\(\s*([\w.]+)\s*,\s*[\"'](set_eagle3\w*)[\"']\s*\)")
_COMMENT = re.compile(rb"#[^\n]*")


# ----------------------------------------------------------------------------- tree facts

@dataclass
class RunnerCall:
    """Where the runner calls the target's EAGLE-3 setter: ``path``, ``line``, the method
    ``name``, and ``checked`` when the module tests ``hasattr(model, name)`` first."""

    path: str
    line: int
    name: str
    checked: bool


class TreeFacts(TreeFactsBase):
    """Tree-wide facts of an SGLang tree (see the module docstring); the engine-neutral part is
    :class:`auditor.engines.base.TreeFactsBase`.

    Args:
        resolver: the tree's resolver.
        registry: its :class:`auditor.engines.sglang.registry.Registry`.
    """

    # -- SGLang's vocabulary, read by the SGLang gates through their context (``ctx.facts``), so
    # that no rule names this package (import-linter's forbidden contract) --------------------

    #: the attribute the setter fills and the inner model's ``forward`` tests
    capture_attr = CAPTURE_ATTR
    # find_setter, forward_capture, class_facts, attr_class, extract_capture, capture_trace and the
    # donor analysis: on :class:`auditor.engines.sglang.vocabulary.SGLangFacts`, the subclass the
    # engine builds, which sits above this module and the donor analysis built on it

    def draft_mappings(self) -> dict:
        """Target architecture → its NEXTN/MTP draft mapping
        (:func:`auditor.engines.sglang.drafts.draft_mappings`)."""
        from auditor.engines.sglang.drafts import draft_mappings

        return draft_mappings(self)

    def __init__(self, resolver: Resolver, registry):
        super().__init__(resolver, registry)
        self._runner: list[RunnerCall] | None = None
        self._workers = None

    def runner_calls(self) -> list[RunnerCall]:
        """The runner's calls of a ``set_eagle3*`` method on the model, outside the model files
        (by a text scan of :data:`RUNTIME_PREFIXES` with comments removed), in path order."""
        if self._runner is None:
            calls = []
            for p in sorted(self.tree.files):
                if not p.startswith(RUNTIME_PREFIXES):
                    continue
                try:
                    data = self.tree.read(p)
                except (KeyError, OSError):
                    continue
                if b"set_eagle3" not in data:
                    continue
                text = _COMMENT.sub(b"", data)
                probed = {m.group(2).decode() for m in _HASATTR.finditer(text)}
                for m in _SETTER_CALL.finditer(text):
                    name = m.group(1).decode()
                    line = text.count(b"\n", 0, m.start()) + 1
                    calls.append(RunnerCall(p, line, name, name in probed))
            # the call the runner makes first in importance: after a hasattr check, else in a
            # model runner module, else the first found
            calls.sort(key=lambda c: (not c.checked, "model_runner" not in c.path))
            self._runner = calls
        return self._runner

    def worker_members(self):
        """The members SGLang's EAGLE workers call on the target model
        (:class:`auditor.engines.sglang.workers.WorkerMembers`, computed once)."""
        if self._workers is None:
            self._workers = worker_members(self)
        return self._workers

    def setter_name(self) -> str:
        """The setter the runner calls (the first name :meth:`runner_calls` finds; else
        :data:`SETTER`)."""
        calls = self.runner_calls()
        return calls[0].name if calls else SETTER


# ------------------------------------------------------------------------- one target

def class_facts(resolver: Resolver, ref: ClassRef) -> dict:
    """The capture facts :data:`CAPTURE_EXTRACTOR` recorded for a class (empty when none)."""
    m = resolver.tree.module(ref.module)
    if m is None:
        return {}
    return m.extras.get(CAPTURE_EXTRACTOR.name, {}).get(ref.qualname.split("@")[0], {})


def find_setter(resolver: Resolver, ref: ClassRef, name: str = SETTER):
    """The setter on ``ref``'s C3 MRO: ``(defining class, MethodFact, setter facts)`` or None
    (an attribute of that name that is not a method counts as None: SGLang calls it)."""
    hit = resolver.lookup(ref, name)
    if hit is None or not isinstance(hit[1], MethodFact):
        return None
    owner, mf = hit
    facts = class_facts(resolver, owner).get("setters", {}).get(name)
    return owner, mf, facts


def attr_class(resolver: Resolver, ref: ClassRef, attr: str):
    """The class ``self.<attr>`` holds on an instance of ``ref``: the first ``__init__`` on the
    MRO that assigns it (or a helper it calls), with a class called directly (``self.model =
    LlamaModel(...)``), a factory method or class attribute (``self.model_cls(...)``), or an
    ``__init__`` parameter whose value the subclass chain decides (:func:`init_argument`).

    Args:
        resolver: the tree's resolver.
        ref: the instantiated class.
        attr: the attribute.

    Returns:
        ``(ClassRef, path, line)``, or ``(None, path, reason)`` when it cannot be known.
    """
    found = init_assign(resolver, ref, (attr,))
    if found is not None:
        e, _, call, value = found
        loc = resolver.location(e)
        path = loc[0] if loc else None
        if call is None:
            return None, path, f"{e.name}.__init__ sets self.{attr} = {value[:60]}, not a constructor call"
        callee, _, line = call
        if callee.startswith("self."):
            # a factory method or a class attribute, looked up on ref's MRO (overrides count)
            name = callee[len("self."):]
            hit = resolver.lookup(ref, name) if "." not in name else None
            if hit is None:
                return None, path, f"self.{attr} = {callee}(...) cannot be resolved statically"
            owner, fact = hit
            if isinstance(fact, MethodFact):
                if not fact.returns_call:
                    return None, path, f"{owner.name}.{name}() does not return a constructor call"
                callee, e = fact.returns_call[0].removesuffix("(...)"), owner
            elif fact.value:
                callee, e = fact.value, owner
            else:
                return None, path, f"{owner.name}.{name} has no value"
        module = e.module
        init = resolver.cls(e).methods.get("__init__") if resolver.cls(e) is not None else None
        if "." not in callee and init is not None and any(n == callee for n, _ in init.params):
            # the class is an __init__ parameter (``language_model_cls=Qwen3LLMModel``), which a
            # subclass may override through super().__init__(...)
            arg = init_argument(resolver, ref, e, callee)
            if arg is None:
                return None, path, f"self.{attr} = {callee}(...): the value of {e.name}.__init__'s parameter " \
                                   f"{callee} cannot be known statically"
            callee, module = arg
        t = resolver.resolve_dotted(module, callee)
        local = class_facts(resolver, e).get("init_imports", {}).get(callee.split(".")[0])
        if not isinstance(t, ClassRef) and local and "." not in callee:
            t = resolver.resolve_name(local[0], local[1])  # imported inside __init__
        if isinstance(t, ClassRef):
            return t, path, line
        if isinstance(t, External):
            return None, path, f"self.{attr} is built by {t.name}, outside the tree"
        reason = t.reason if isinstance(t, Unresolved) else f"{callee} is not a class"
        return None, path, f"self.{attr} = {callee}(...): {reason}"
    return None, None, f"no __init__ on {ref.name}'s MRO assigns self.{attr}"


@dataclass
class CaptureStep:
    """One class the setter chain passes through: the class, how it was reached (``via``), the
    setter it runs (its owner and line) or None."""

    ref: ClassRef
    via: str
    setter_owner: ClassRef | None = None
    setter_line: int | None = None


@dataclass
class CaptureTrace:
    """Where a target's EAGLE-3 setter leads.

    ``steps``: the classes passed through (the target first). ``holder``: the model whose
    ``forward`` must capture (where the setter writes ``layers_to_capture``), with ``holder_via``.
    ``problems``: ``(kind, message, path, line)`` — kind ``"missing"`` (a delegate has no
    setter), ``"silent"`` (that delegate is behind ``if hasattr(...)``: nothing happens),
    ``"unknown"`` (a class cannot be known statically), ``"no-write"`` (the setter writes no
    capture list), ``"raises"`` (the setter only raises). ``language_arch``: the registered
    architecture of the language model delegated to, when it is one.
    """

    steps: list[CaptureStep] = field(default_factory=list)
    holder: ClassRef | None = None
    holder_via: str = ""
    problems: list[tuple[str, str, str | None, int | None]] = field(default_factory=list)
    language_arch: str | None = None
    #: the capture attributes the setter chain writes on the holder or its layers
    #: (``layers_to_capture``, ``capture_aux_hidden_states``, a per-layer ``_is_layer_to_capture``)
    holder_writes: set[str] = field(default_factory=set)


def trace_capture(resolver: Resolver, ref: ClassRef, name: str = SETTER, registry=None) -> CaptureTrace:
    """Follow the setter ``name`` of class ``ref`` (see :class:`CaptureTrace`): where it writes
    ``layers_to_capture`` (on itself, or on ``self.X``, whose class ``__init__`` builds), and
    where it delegates (``self.X.set_eagle3_layers_to_capture(...)``, recursively, at most four
    levels)."""
    trace = CaptureTrace()
    _trace(resolver, ref, name, trace, "the target", 0, registry)
    return trace


def _trace(resolver, ref, name, trace, via, depth, registry) -> None:
    if depth > 4:
        trace.problems.append(("unknown", "setter delegation nested too deep", None, None))
        return
    hit = find_setter(resolver, ref, name)
    step = CaptureStep(ref, via)
    trace.steps.append(step)
    if hit is None:
        return
    owner, mf, facts = hit
    loc = resolver.location(owner)
    path = loc[0] if loc else None
    step.setter_owner, step.setter_line = owner, mf.line
    if facts is None:
        trace.problems.append(("unknown", f"{owner.name}.{name} could not be read", path, mf.line))
        return
    if facts["raises_only"]:
        trace.problems.append(("raises", f"{owner.name}.{name} only raises", path, mf.line))
        return
    if trace.holder is not None and ref == trace.holder:
        # the holder's own setter, delegated to: what it writes is what its forward may test
        trace.holder_writes.update(a for _, a, _ in facts["writes"])
    for p, attr, line in facts["writes"]:
        if attr != CAPTURE_ATTR or trace.holder is not None:
            continue
        trace.holder_writes.update(a for q, a, _ in facts["writes"]
                                   if q == p or (q.startswith(p) and q[len(p):len(p) + 1] in (".", "[") if p else True))
        if p == "":
            trace.holder, trace.holder_via = ref, f"{owner.name}.{name} sets self.{CAPTURE_ATTR}"
        elif "." not in p and "[]" not in p:
            cls, cpath, cline = attr_class(resolver, ref, p)
            if cls is None:
                trace.problems.append(("unknown", f"{owner.name}.{name} writes self.{p}.{CAPTURE_ATTR}, and "
                                                  f"{cline}", path, line))
                return
            trace.holder = cls
            trace.holder_via = f"{owner.name}.{name} sets self.{p}.{CAPTURE_ATTR} (self.{p} = {cls.name}(...))"
        else:
            trace.problems.append(("unknown", f"{owner.name}.{name} writes self.{p}.{CAPTURE_ATTR}", path, line))
            return
    for p, line, guard, called in facts["delegates"]:
        if "." in p or "[]" in p:
            trace.problems.append(("unknown", f"{owner.name}.{name} delegates to self.{p}", path, line))
            continue
        cls, cpath, cline = attr_class(resolver, ref, p)
        if cls is None:
            trace.problems.append(("unknown", f"{owner.name}.{name} delegates to self.{p}, and {cline}", path, line))
            continue
        if registry is not None and trace.language_arch is None and cls.name in getattr(registry, "entries", {}):
            trace.language_arch = cls.name
        if find_setter(resolver, cls, called) is None:
            if guard == "fallback":
                continue  # the else branch writes the capture list itself (read above)
            where = f"self.{p} = {cls.name}(...)"
            if guard == "silent":
                trace.problems.append(("silent", f"{owner.name}.{name} calls self.{p}.{called} only if hasattr(...): "
                                                 f"{cls.name} ({where}) has no {called}, so the call is skipped and "
                                                 "nothing is captured", path, line))
            else:
                how = "raises" if guard == "checked" else "fails with AttributeError"
                trace.problems.append(("missing", f"{owner.name}.{name} delegates to self.{p}.{called}, which "
                                                  f"{cls.name} ({where}) lacks: the call {how}", path, line))
            trace.steps.append(CaptureStep(cls, f"self.{p}"))
            continue
        before = trace.holder
        _trace(resolver, cls, called, trace, f"self.{p} = {cls.name}(...)", depth + 1, registry)
        if before is None and trace.holder is not None:
            trace.holder_via = f"{owner.name}.{name} → self.{p}: {trace.holder_via}"
    if trace.holder is None and not trace.problems and depth == 0:
        trace.problems.append(("no-write", f"{owner.name}.{name} writes no {CAPTURE_ATTR} on any model and "
                                           "delegates to none", path, mf.line))


@dataclass
class ForwardCapture:
    """The capture in a holder's ``forward``: the class defining it, its location, the layer
    loops (as :mod:`auditor.engines.sglang.capture` records them), whether it returns the aux states, and whether the holder
    (or a class of its MRO) ever sets ``layers_to_capture``."""

    defined_in: ClassRef | None
    path: str | None
    line: int | None
    loops: list[dict]
    returns_aux: bool
    #: lines of the loops over the layers that the index found (whatever they capture)
    layer_loops: list[int] = field(default_factory=list)


def forward_capture(resolver: Resolver, holder: ClassRef) -> ForwardCapture:
    """The ``forward`` the holder runs (on its MRO) and its capture facts; a ``forward`` without
    a layer loop that calls ``super().forward(...)`` (``TeleFLMModel(LlamaModel)``) is followed to
    the next ``forward`` of the MRO."""
    entries = [e for e in resolver.mro(holder).entries if isinstance(e, ClassRef)]
    first = None
    for i, e in enumerate(entries):
        c = resolver.cls(e)
        mf = c.methods.get("forward") if c is not None else None
        if not isinstance(mf, MethodFact):
            continue
        loc = resolver.location(e)
        fw = class_facts(resolver, e).get("forward")
        loops = fw["loops"] if fw else []
        out = ForwardCapture(e, loc[0] if loc else None, mf.line, loops, bool(fw and fw["returns_aux"]),
                             layer_loops=[lp.line for lp in mf.loops])
        first = first or out
        if loops or mf.loops or not (fw and fw.get("super_forward")):
            return out
    return first or ForwardCapture(None, None, None, [], False)


class CaptureTraceFacts(FactProvider):
    """The :class:`CaptureTrace` of a target class (the key: its ``ClassRef``): where the tree's
    EAGLE-3 setter (``ctx.facts.setter_name()``) leads, read from
    ``sglang/srt/models/<module>.py`` (:func:`trace_capture`)."""

    @classmethod
    def compute(cls, ctx, key: ClassRef) -> CaptureTrace:
        return trace_capture(ctx.resolver, key, ctx.facts.setter_name(), ctx.registry)

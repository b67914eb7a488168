"""SGLang's tree facts with the whole vocabulary its gates read through ``ctx.facts``.

:class:`SGLangFacts` is the :class:`auditor.engines.sglang.facts.TreeFacts` the engine builds, with
the module functions of :mod:`auditor.engines.sglang.facts` and of the donor analysis
(:mod:`auditor.engines.sglang.donor`) as its static methods. It lives above both, so that the
donor analysis, which is built on the facts, is never imported by them (no import cycle).
"""

from __future__ import annotations

from auditor.engines.sglang import donor
from auditor.engines.sglang.capture import extract_capture
from auditor.engines.sglang.facts import (
    CaptureTraceFacts,
    TreeFacts,
    attr_class,
    class_facts,
    find_setter,
    forward_capture,
)


class SGLangFacts(TreeFacts):
    """The SGLang gates' ``ctx.facts`` (same arguments as
    :class:`auditor.engines.sglang.facts.TreeFacts`): ``ctx.facts.find_setter(...)``,
    ``ctx.facts.find_donor(...)`` and the provider of a target's capture trace
    (``ctx.get(ctx.facts.capture_trace, ref)``), so that no rule names this package."""

    find_setter = staticmethod(find_setter)
    forward_capture = staticmethod(forward_capture)
    class_facts = staticmethod(class_facts)
    attr_class = staticmethod(attr_class)
    extract_capture = staticmethod(extract_capture)
    capture_trace = CaptureTraceFacts
    #: :func:`auditor.engines.sglang.donor.find_donor`
    find_donor = staticmethod(donor.find_donor)
    #: :func:`auditor.engines.sglang.donor.find_getter_donor`
    find_getter_donor = staticmethod(donor.find_getter_donor)
    #: :func:`auditor.engines.sglang.donor.method_ast`
    method_ast = staticmethod(donor.method_ast)

"""When the ``transformers`` a verdict reads lacks the HF config class a model file imports.

A vLLM model file that imports its config class from ``transformers.models.<name>`` (0.19.0
``vllm/model_executor/models/gemma4_mm.py``: ``from transformers.models.gemma4 import
Gemma4Config``) cannot be imported, hence cannot serve, with a ``transformers`` that lacks that
package, whatever the tree's own requirement says (0.19.0 requires ``transformers<5``; Gemma 4
arrived in transformers 5). Whoever runs the target runs a ``transformers`` that has it, so the
``image-token`` gate reads the class from the newest release that does (the newest release on
pip's configured index, fetched and cached like the others, read in place, never imported).
Only when the transformers was picked from the tree's requirement: one you name, or the one
installed beside the tree, is what the verdict reads.

The newest release is a fact from outside the scanned tree (:class:`NewestTransformersFacts`,
``OUTSIDE_TREE``): a run whose verdict read it is recorded as having read transformers, like one
that read :class:`auditor.hf.configs.TransformersFacts`."""

from __future__ import annotations

import functools

from auditor.hf.modeltypes import config_class_of
from auditor.index.providers import FactProvider
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef, External


def imported_transformers_package(resolver: Resolver, ref: ClassRef) -> tuple[str, str, str] | None:
    """``(package, class name, how)`` when the config class of ``ref`` (found as
    :func:`auditor.hf.modeltypes.config_class_of` finds it: an ``__init__``
    annotation or the one config class its module imports) comes from
    ``transformers.models.<package>``; else None."""
    found = config_class_of(resolver, ref)
    if found is None or not isinstance(found[0], External):
        return None
    parts = found[0].name.split(".")
    if len(parts) >= 4 and parts[0] == "transformers" and parts[1] == "models":
        return parts[2], parts[-1], found[1]
    return None


def chosen_by_requirement(tf) -> bool:
    """True when ``tf`` (a :class:`auditor.hf.configs.TransformersConfigs`) is the one
    picked for a release archive from the tree's own requirement
    (:func:`auditor.hf.configs.transformers_for_tree`), not one you named
    (``--transformers``, ``EAGLE_AUDIT_TRANSFORMERS``) or one installed beside the tree: only then
    is another release read in its place."""
    return (getattr(tf, "how", "") or "").startswith("newest release satisfying the tree's requirement")


@functools.lru_cache(maxsize=4)
def newest_transformers() -> tuple[object | None, str]:
    """``(TransformersConfigs of the newest transformers release, phrase)``, or ``(None, why)``
    when it cannot be fetched (no index and no cached wheel). Fetched once per process."""
    from auditor.hf.configs import TransformersConfigs
    from auditor.model.errors import AuditError
    from auditor.source.fetch import fetch_newest_wheel
    from auditor.source.package import WheelPackageSource

    try:
        path, version = fetch_newest_wheel("transformers", "", progress=False)
    except (AuditError, OSError) as exc:
        return None, f"the newest transformers release could not be fetched: {exc}"
    how = f"the newest transformers release: transformers {version} ({path.name})"
    return TransformersConfigs(source=WheelPackageSource(path, "transformers"), version=version, how=how), how


class NewestTransformersFacts(FactProvider):
    """The newest transformers release (key None): ``(TransformersConfigs or None, phrase)`` as
    :func:`newest_transformers` gives it, asked for only when a verdict needs a class the chosen
    transformers lacks. Read from outside the scanned tree: a run whose facts used it (a release
    was fetched) is recorded as having read transformers."""

    OUTSIDE_TREE = True

    @classmethod
    def compute(cls, ctx, key=None) -> tuple[object | None, str]:
        return newest_transformers()

    @classmethod
    def used(cls, value: tuple[object | None, str]) -> bool:
        return value[0] is not None


def transformers_with(package: str, model_type: str, chosen, newest: tuple[object | None, str]
                      ) -> tuple[object | None, str]:
    """A transformers source that registers ``model_type`` and has ``transformers.models.<package>``,
    when ``chosen`` (the one the scan reads) does not: the ``newest`` release
    (:class:`NewestTransformersFacts`' value), if it does. Returns ``(TransformersConfigs or None,
    phrase)``."""
    tf, how = newest
    if tf is None:
        return None, how
    if chosen is not None and getattr(chosen, "version", None) == tf.version:
        return None, f"{how} does not register {model_type!r} either"
    if tf.config_class(model_type) is None:
        return None, f"{how} does not register {model_type!r} either"
    return tf, how

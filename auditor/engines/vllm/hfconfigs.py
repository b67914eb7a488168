"""HF config classes that live in ``transformers``, read statically like the vLLM tree.

Many multimodal targets use a config class from ``transformers`` rather than one of vLLM's
(``vllm/transformers_utils/configs``). To tell whether such a class provides an attribute (the
EAGLE proposer's fallback reads ``config.image_token_index``), this module locates the
``transformers`` installed in the current environment without importing it (or a folder given
with ``--transformers`` / ``EAGLE_AUDIT_TRANSFORMERS``), maps a model_type to its config class
through ``transformers/models/auto/configuration_auto.py`` (and ``auto_mappings.py`` in
transformers 5: ``CONFIG_MAPPING_NAMES``, ``SPECIAL_MODEL_TYPE_TO_MODULE_NAME``), and indexes the
class with the same machinery as vLLM's classes. Nothing from ``transformers`` is executed.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path

from auditor.index.resolve import ClassRef, Resolver
from auditor.index.tree import SummaryCache, Tree

AUTO_MODULES = ("transformers/models/auto/auto_mappings.py", "transformers/models/auto/configuration_auto.py")


class PackageFolderSource:
    """Read-only view of one installed package folder (``<site-packages>/transformers``):
    ``files()`` lists its ``.py`` paths relative to the folder that contains the package."""

    def __init__(self, parent: Path, package: str = "transformers"):
        self.parent = Path(parent)
        self.package = package
        self.label = str(self.parent / package)
        self._files: list[str] | None = None

    def files(self) -> list[str]:
        """Sorted ``.py`` paths of the package, relative to its parent folder."""
        if self._files is None:
            base = self.parent / self.package
            self._files = sorted(p.relative_to(self.parent).as_posix() for p in base.rglob("*.py"))
        return self._files

    def read(self, relpath: str) -> bytes:
        """The bytes of one file; raises KeyError when it cannot be read."""
        try:
            return (self.parent / relpath).read_bytes()
        except OSError:
            raise KeyError(relpath) from None

    def root(self) -> Path:
        """The folder that contains the package."""
        return self.parent

    def version(self) -> str | None:
        """Not read: always None."""
        return None


def locate_transformers(explicit: str | os.PathLike | None = None) -> Path | None:
    """The folder that contains the ``transformers`` package: ``explicit`` (the package folder
    or its parent), else ``EAGLE_AUDIT_TRANSFORMERS``, else the installed one (found with
    ``importlib.util.find_spec``, which does not execute the package). None when absent."""
    cand = explicit or os.environ.get("EAGLE_AUDIT_TRANSFORMERS")
    if cand:
        p = Path(cand)
        if (p / "transformers" / "__init__.py").is_file():
            return p
        if p.name == "transformers" and (p / "__init__.py").is_file():
            return p.parent
        return None
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent.parent


def _literal_pairs(node: ast.AST) -> dict[str, str] | None:
    """``{"a": "B"}``, ``dict(a="B")``, ``OrderedDict([("a", "B"), ...])`` → dict of strings."""
    if isinstance(node, ast.Call):
        if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            node = node.args[0]
        elif node.keywords:
            out = {}
            for kw in node.keywords:
                if kw.arg and isinstance(kw.value, ast.Constant):
                    out[kw.arg] = kw.value.value
            return out
    try:
        val = ast.literal_eval(node)
    except Exception:
        return None
    if isinstance(val, dict):
        return {str(k): str(v) for k, v in val.items()}
    if isinstance(val, (list, tuple)) and all(isinstance(x, tuple) and len(x) == 2 for x in val):
        return {str(k): str(v) for k, v in val}
    return None


class TransformersConfigs:
    """Config classes of one ``transformers`` source, by model_type.

    Args:
        parent: the folder that contains ``transformers/``.
    """

    def __init__(self, parent: Path):
        self.parent = parent
        self.tree = Tree(PackageFolderSource(parent), SummaryCache())
        self.resolver = Resolver(self.tree)
        self.names: dict[str, str] = {}
        self.special: dict[str, str] = {}
        for rel in AUTO_MODULES:
            try:
                src = self.tree.read(rel)
                body = ast.parse(src).body
            except (KeyError, SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for stmt in body:
                if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
                    continue
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id in ("CONFIG_MAPPING_NAMES", "SPECIAL_MODEL_TYPE_TO_MODULE_NAME"):
                        pairs = _literal_pairs(stmt.value)
                        if pairs:
                            (self.names if t.id == "CONFIG_MAPPING_NAMES" else self.special).update(pairs)

    def config_class(self, model_type: str) -> ClassRef | None:
        """The config class ``transformers`` registers for ``model_type``, or None."""
        cls_name = self.names.get(model_type)
        if not cls_name:
            return None
        mod = self.special.get(model_type, model_type.replace("-", "_"))
        module = f"transformers.models.{mod}.configuration_{mod}"
        t = self.resolver.resolve_name(module, cls_name)
        return t if isinstance(t, ClassRef) else None

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
from dataclasses import dataclass
from pathlib import Path

from auditor.index.providers import FactProvider
from auditor.index.resolve import Resolver
from auditor.index.targets import ClassRef
from auditor.index.tree import SummaryCache, Tree

AUTO_MODULES = ("transformers/models/auto/auto_mappings.py", "transformers/models/auto/configuration_auto.py",
                "transformers/models/auto/modeling_auto.py")


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
        """The bytes of one file (a regular file of at most 8 MiB); raises KeyError (an
        :class:`auditor.source.files.UnreadableFile`) when it cannot be read."""
        from auditor.source.files import read_regular_file

        # a FIFO, a device or an oversized file in a given transformers folder never blocks the tool
        try:
            return read_regular_file(self.parent / relpath, relpath)
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


def check_transformers_env() -> None:
    """Refuse an ``EAGLE_AUDIT_TRANSFORMERS`` that names no transformers folder, as a
    ``--transformers`` path without one is refused (it would otherwise be passed over silently).
    Nothing happens when the variable is unset or empty.

    Raises:
        AuditError: one line naming the variable and its value.
    """
    from auditor.model.errors import AuditError

    env = os.environ.get("EAGLE_AUDIT_TRANSFORMERS")
    if env and locate_transformers(env) is None:
        raise AuditError(f"EAGLE_AUDIT_TRANSFORMERS={env}: no transformers package there (give the folder that "
                         "holds transformers/, or the package folder itself; unset it to use the default)")


def open_transformers(explicit: str | os.PathLike) -> "TransformersConfigs | None":
    """The transformers source ``--transformers`` names when it is a path: a folder (the
    ``transformers`` package or the folder that contains it), a wheel or an sdist (read in
    place, like a release archive: :func:`auditor.source.opener.library_source`). None when
    ``explicit`` names no existing path (it is then a release version to fetch).

    Raises:
        AuditError: the path exists but holds no ``transformers`` package, or the archive is
            unreadable or refused (one line naming ``--transformers``).
    """
    from auditor.model.errors import AuditError
    from auditor.source.opener import library_source

    p = Path(explicit).expanduser()
    if not p.exists():
        return None
    if p.is_dir():
        folder = locate_transformers(str(p))
        if folder is None:
            raise AuditError(f"--transformers: no transformers package at {explicit}")
        return TransformersConfigs(folder, how=f"--transformers {explicit}")
    try:
        src = library_source(p, "transformers")
    except AuditError as exc:
        raise AuditError(f"--transformers: {exc}") from None
    version = src.version()
    return TransformersConfigs(source=src, version=version,
                               how=f"--transformers {explicit}: transformers {version or '(version unknown)'} ({p.name})")


def _folder_version(parent: Path | None) -> str | None:
    """The version of a ``transformers`` folder: its ``__version__`` literal, read statically."""
    if parent is None:
        return None
    try:
        tree = ast.parse((Path(parent) / "transformers" / "__init__.py").read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__" for t in stmt.targets):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return stmt.value.value
    return None


def transformers_for_tree(tree_source, explicit: str | None = None, *, progress: bool = False,
                          prefer_installed: bool = False) -> tuple["TransformersConfigs | None", str]:
    """The transformers source whose HF config classes a verdict on ``tree_source`` reads, and
    a phrase saying which one was used or why there is none.

    In order: ``explicit`` (``--transformers``: a folder, or a version that is fetched);
    ``EAGLE_AUDIT_TRANSFORMERS``; with ``prefer_installed`` (the tree is the installed vllm, or a
    folder), the transformers installed beside the tree (``site-packages/transformers`` next to
    ``site-packages/vllm``, whatever environment that is), else the one installed here; else the newest release that satisfies the tree's
    own transformers requirement (its ``Requires-Dist``), fetched through pip's configured index
    as a wheel (sha256-checked, cached, read in place: :func:`auditor.source.fetch.fetch_newest_wheel`).
    A verdict on an archive therefore never depends on what happens to be installed.
    """
    from auditor.model.errors import AuditError
    from auditor.source.fetch import fetch_newest_wheel
    from auditor.source.package import WheelPackageSource

    def fetched(spec: str, why: str):
        path, version = fetch_newest_wheel("transformers", spec, progress=progress)
        return TransformersConfigs(source=WheelPackageSource(path, "transformers", lazy=True), version=version,
                                   how=f"{why}: transformers {version} ({path.name})")

    if explicit:
        tf = open_transformers(explicit)
        if tf is not None:
            return tf, tf.how
        try:
            tf = fetched(f"=={explicit}", f"--transformers {explicit}")
        except AuditError as exc:
            raise AuditError(f"--transformers {explicit}: neither a transformers folder nor a release: {exc}") from None
        return tf, tf.how
    env = os.environ.get("EAGLE_AUDIT_TRANSFORMERS")
    if env:
        folder = locate_transformers(env)
        if folder is not None:
            tf = TransformersConfigs(folder, how=f"EAGLE_AUDIT_TRANSFORMERS={env}")
            return tf, tf.how
    if prefer_installed:
        root = tree_source.root() if hasattr(tree_source, "root") else None
        beside = locate_transformers(str(root)) if root is not None else None
        if beside is not None:  # site-packages/vllm: the transformers of that environment (--python, VIRTUAL_ENV)
            tf = TransformersConfigs(beside, how=f"installed beside the tree at {beside}")
            return tf, tf.how
        folder = locate_transformers(None)
        if folder is not None:
            tf = TransformersConfigs(folder, how=f"installed at {folder}")
            return tf, tf.how
    spec = tree_source.requirement("transformers") if hasattr(tree_source, "requirement") else None
    if spec is None:
        return None, "the tree states no transformers requirement and none is installed or given"
    try:
        tf = fetched(spec, f"newest release satisfying the tree's requirement transformers{spec}")
    except AuditError as exc:
        return None, f"transformers{spec} (the tree's requirement) could not be fetched: {exc}"
    return tf, tf.how


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
        parent: the folder that contains ``transformers/`` (or None with ``source``).
        source: a source that lists ``transformers/**/*.py`` (a wheel read in place,
            :class:`auditor.source.package.WheelPackageSource`) instead of a folder.
        version: the transformers version, when known.
        how: how this transformers was chosen (one phrase, for reports).
    """

    def __init__(self, parent: Path | None = None, *, source=None, version: str | None = None, how: str = ""):
        src = source if source is not None else PackageFolderSource(parent)
        #: where the classes are read from (a folder or an archive), for messages
        self.parent = parent if parent is not None else getattr(src, "label", "?")
        self.version = version or _folder_version(parent)
        self.how = how
        self.tree = Tree(src, SummaryCache())
        self.resolver = Resolver(self.tree)
        self._tables: tuple[dict, dict, dict, dict, dict] | None = None

    @property
    def names(self) -> dict[str, str]:
        """model_type → its config class name (``CONFIG_MAPPING_NAMES``)."""
        return self._load_tables()[0]

    @property
    def special(self) -> dict[str, str]:
        """model_type → its module name where it differs (``SPECIAL_MODEL_TYPE_TO_MODULE_NAME``)."""
        return self._load_tables()[1]

    @property
    def architectures(self) -> dict[str, list[str]]:
        """architecture → the model_types whose ``MODEL_*_MAPPING_NAMES`` rows name it (the
        tables read backwards; several model_types may share an architecture)."""
        return self._load_tables()[2]

    @property
    def causal_lm(self) -> dict[str, str]:
        """model_type → its causal-LM architecture (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``)."""
        return self._load_tables()[3]

    @property
    def base_models(self) -> dict[str, str]:
        """model_type → the base model class ``AutoModel.from_config`` builds (``MODEL_MAPPING_NAMES``)."""
        return self._load_tables()[4]

    def _load_tables(self) -> tuple[dict, dict, dict, dict, dict]:
        """Read the auto tables of ``transformers/models/auto`` on first use (a cached scan that
        only checks this source against the one it read never parses them)."""
        if self._tables is not None:
            return self._tables
        names: dict[str, str] = {}
        special: dict[str, str] = {}
        architectures: dict[str, list[str]] = {}
        causal_lm: dict[str, str] = {}
        base_models: dict[str, str] = {}
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
                            (names if t.id == "CONFIG_MAPPING_NAMES" else special).update(pairs)
                    elif isinstance(t, ast.Name) and t.id.startswith("MODEL_") and t.id.endswith("_MAPPING_NAMES"):
                        for mt, arch in (_literal_pairs(stmt.value) or {}).items():
                            if mt not in architectures.setdefault(arch, []):
                                architectures[arch].append(mt)
                            if t.id == "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES":
                                causal_lm.setdefault(mt, arch)
                            if t.id == "MODEL_MAPPING_NAMES":
                                base_models.setdefault(mt, arch)
        self._tables = (names, special, architectures, causal_lm, base_models)
        return self._tables

    def base_model_class(self, model_type: str) -> ClassRef | None:
        """The class ``AutoModel.from_config`` builds for a config of ``model_type`` (its
        ``MODEL_MAPPING_NAMES`` row in ``transformers/models/auto/modeling_auto.py``, defined in
        ``transformers/models/<name>/modeling_<name>.py``), or None."""
        cls_name = self.base_models.get(model_type)
        if not cls_name:
            return None
        mod = self.special.get(model_type, model_type.replace("-", "_"))
        t = self.resolver.resolve_name(f"transformers.models.{mod}.modeling_{mod}", cls_name)
        return t if isinstance(t, ClassRef) else None

    def config_class(self, model_type: str) -> ClassRef | None:
        """The config class ``transformers`` registers for ``model_type``, or None."""
        cls_name = self.names.get(model_type)
        if not cls_name:
            return None
        mod = self.special.get(model_type, model_type.replace("-", "_"))
        module = f"transformers.models.{mod}.configuration_{mod}"
        t = self.resolver.resolve_name(module, cls_name)
        return t if isinstance(t, ClassRef) else None


@dataclass
class TransformersAtHand:
    """The transformers source a tree's verdicts read: its ``configs`` (None when there is none)
    and a ``note`` saying which one was chosen, or why there is none."""

    configs: "TransformersConfigs | None"
    note: str = ""


class TransformersFacts(FactProvider):
    """The transformers source at hand for a tree (a :class:`TransformersAtHand`), chosen once,
    on first need: the context's ``transformers_loader`` (the auditor's choice, see
    :func:`transformers_for_tree`: a fetch happens only when a verdict needs a class from
    transformers), else the transformers installed here. Read from outside the scanned tree: a
    run whose facts used it is recorded as having read transformers."""

    OUTSIDE_TREE = True

    @classmethod
    def compute(cls, ctx, key=None) -> TransformersAtHand:
        loader = getattr(ctx, "transformers_loader", None)
        if loader is not None:
            tf, note = loader()
            return TransformersAtHand(tf, note)
        parent = locate_transformers(None)
        return TransformersAtHand(TransformersConfigs(parent) if parent else None, "")

    @classmethod
    def used(cls, value: TransformersAtHand) -> bool:
        return value.configs is not None


def same_transformers(state: dict, tf, how: str) -> bool:
    """True when the transformers source ``tf`` (a :class:`TransformersConfigs`, chosen as
    ``how`` says; None: none at hand) is the one ``state`` recorded
    (:meth:`auditor.orchestration.scan.Auditor.transformers_state`): the same choice and version,
    the same file list, and every file read then has the same sha256 now. When both are one
    fetched wheel, the wheel's verified sha256 (``state["archive"]``, :func:`wheel_digest`)
    answers without opening it."""
    if tf is None or how != state.get("how") or tf.version != state.get("version"):
        return False
    archive = wheel_digest(tf)
    if archive is not None and archive == state.get("archive"):
        return True  # the same verified wheel: the same files, the same bytes
    if tf.tree.files_digest() != state.get("files"):
        return False
    for rel, digest in state.get("reads", {}).items():
        try:
            tf.tree.read(rel)
        except (KeyError, OSError):
            return False
        if tf.tree.reads.get(rel) != digest:
            return False
    return True


def wheel_digest(tf) -> str | None:
    """The sha256 recorded for the wheel ``tf`` (a :class:`TransformersConfigs`) is read from,
    when it is a fetched wheel (:func:`auditor.source.fetch.fetch_newest_wheel` verified it and
    wrote its sidecar, in this run); else None."""
    from auditor.source.digests import recorded_sha256
    from auditor.source.package import WheelPackageSource

    src = getattr(getattr(tf, "tree", None), "source", None)
    if not isinstance(src, WheelPackageSource):
        return None
    return recorded_sha256(src.path)

"""``eagle-audit fix``: plan codemods from a scan, apply them in memory, validate, write.

The pipeline, all in memory until the very end:

1. **scan** the targets (:meth:`auditor.orchestration.scan.Auditor.audit`);
2. **plan**: map every blocking finding to a codemod invocation (``rules/<gate>/codemod.py``) with the
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
   re-plans from a scan of the other tree), or the tree itself
   (:func:`auditor.workspace.transaction.apply_to_folder`: every file replaced atomically,
   originals kept in a backup that :func:`~auditor.workspace.transaction.revert_folder` restores).

Everything here returns objects and writes nothing: the text of a :class:`FixResult` is
:mod:`auditor.render.fix`, the writes into a tree are :mod:`auditor.workspace`.
"""

from __future__ import annotations

import difflib
import enum
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from auditor.engines.catalog import engine_for
from auditor.model.errors import AuditError
from auditor.model.findings import INTERNAL_RULE, Verdict
from auditor.model.inputs import check_model_type
from auditor.model.options import RunOptions
from auditor.model.results import TargetResult, TargetSpec
from auditor.orchestration.scan import Auditor
from auditor.source.sources import TreeSource
from rules.planning import Invocation, Planner, Unfixable
from rules.registry import CODEMODS, codemod_class, planners_for

#: Format id of the codemods file written by ``fix --out``.
CODEMODS_FORMAT = "eagle-audit-codemods/1"

_MAX_ROUNDS = 3


# -- overlay ---------------------------------------------------------------------------------


class OverlaySource(TreeSource):
    """A tree source that returns patched bytes for some paths and delegates every other read
    to ``base``. Used to re-scan a patched tree in memory (the :class:`~auditor.index.tree.Tree`
    caches summaries by content hash, so only the patched files are summarised again)."""

    def __init__(self, base: TreeSource, patched: dict[str, bytes]):
        super().__init__(f"{base.label} (patched in memory)")
        self.base = base
        self.package = getattr(base, "package", "vllm")  # the engine package the base tree holds
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
        return None  # never asked: version() is the base tree's

    def _metadata_bytes(self) -> list[bytes]:
        return self.base._metadata_bytes()  # the base tree's requirements (transformers')

    def version(self) -> str | None:
        return self.base.version()

    def root(self):
        return None  # reads must go through _read, never to the base folder on disk


def overlay_auditor(base: Auditor, texts: dict[str, str]) -> Auditor:
    """An :class:`Auditor` over ``base``'s tree with ``texts`` (path → new source) laid over it.
    Summaries of unchanged files already built for ``base`` are reused."""
    src = OverlaySource(base.tree.source, {p: t.encode("utf-8") for p, t in texts.items()})
    patched = Auditor(base.tree.overlaid(src, texts), transformers=base.transformers_arg, platform=base.platform,
                      engine=base.engine)
    # the patched tree reads HF config classes from the transformers the scan chose (installed
    # beside the tree, the tree's requirement, --transformers), never from a choice of its own
    if "transformers_chosen" in base.shared:
        patched.shared["transformers_chosen"] = base.shared["transformers_chosen"]
    else:
        base_load = base.load_transformers

        def load():
            if "transformers_chosen" not in patched.shared:
                patched.shared["transformers_chosen"] = base_load()
            return patched.shared["transformers_chosen"]

        patched.ctx.transformers_loader = load
    return patched


# -- plan ------------------------------------------------------------------------------------


# -- fix -------------------------------------------------------------------------------------


class FixOutcome(enum.Enum):
    """How a fix ended, in the manner of LibCST's typed transform results: ``FIXED`` (its
    ``TransformSuccess``: the patch validates, it may be written), ``ALREADY_SUPPORTED``
    (``TransformSkip``: nothing to change), ``NOT_FIXED`` (some gate cannot be patched, or the
    patch did not validate: nothing may be written; :attr:`FixResult.unfixable` and
    :attr:`FixResult.problems` say why) and ``FAILED`` (``TransformFailure``: an audit failed
    inside the tool, a finding of :data:`auditor.model.findings.INTERNAL_RULE`). The command
    line decides what each prints and its exit code."""

    FIXED = "fixed"
    ALREADY_SUPPORTED = "already-supported"
    NOT_FIXED = "not-fixed"
    FAILED = "failed"


@dataclass
class FixResult:
    """The outcome of :func:`plan_fix`: the audits before and after, the invocations applied (in
    order), what could not be fixed, and the original and patched text of each changed file."""

    #: the tree's release, as it states it (the JSON's ``source.vllm_version``, whichever engine)
    release: str | None
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
    #: what the planned changes also do (a substring-matched allowlist admitting other model_types)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: the engine of the tree (``vllm``, ``sglang``)
    engine: str = "vllm"

    @property
    def already_supported(self) -> bool:
        """Every target was supported before any codemod (nothing to change)."""
        return all(r.verdict is Verdict.SUPPORTED for r in self.before)

    @property
    def failed_inside(self) -> list[TargetResult]:
        """The audits, before or after the patch, that failed inside the tool (a finding of
        :data:`~auditor.model.findings.INTERNAL_RULE`), in order."""
        return [r for r in self.before + self.after if any(f.rule == INTERNAL_RULE for f in r.findings)]

    @property
    def outcome(self) -> FixOutcome:
        """How the fix ended (see :class:`FixOutcome`): ``FAILED`` first, then
        ``ALREADY_SUPPORTED``, then ``FIXED`` when :attr:`ok`, else ``NOT_FIXED``."""
        if self.failed_inside:
            return FixOutcome.FAILED
        if self.already_supported:
            return FixOutcome.ALREADY_SUPPORTED
        return FixOutcome.FIXED if self.ok else FixOutcome.NOT_FIXED

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

    def original_line(self, path: str | None, line: int | None) -> int | None:
        """The line of the unpatched tree that ``line`` of the patched ``path`` stands for, so that
        a finding re-scanned after the codemods is cited where ``scan`` cites it (the line of the
        construct that fails, in the tree the user has). Lines of an unchanged file, or ``None``,
        are returned as they are; a line the codemods inserted maps to the original line it
        follows.

        Args:
            path: a file of the tree (relative, as findings name it).
            line: a 1-based line of that file after the patch.

        Returns:
            The 1-based line of the original file (None when ``line`` is None).
        """
        if not path or not line or path not in self.patched or path not in self.originals:
            return line
        import bisect

        cache = self.__dict__.setdefault("_line_maps", {})
        if path not in cache:
            old, new = self.originals[path].splitlines(), self.patched[path].splitlines()
            blocks = difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks()
            cache[path] = [(b.b, b.a, b.size) for b in blocks if b.size]
        spans = cache[path]
        i = bisect.bisect_right([b for b, _, _ in spans], line - 1) - 1
        if i < 0:
            return 1
        b, a, size = spans[i]
        return a + min(line - 1 - b, size - 1) + 1

    def diff(self) -> str:
        """The unified diff of every changed file (empty when nothing changes)."""
        out: list[str] = []
        for p in sorted(self.patched):
            out += unified_diff(p, self.originals[p], self.patched[p])
        return "".join(out)

    def scope(self) -> tuple[list[str], dict[str, str]]:
        """The blocking gates of the method (on the tree's engine) that the re-scan evaluated for
        every target, in report order, and those it did not evaluate for some target with the
        reason (a run option it needs, such as ``--draft-config``). Gates of other methods are
        in neither.

        Returns:
            ``(evaluated gate ids, {gate id: reason})``.
        """
        from rules.registry import rules_for

        results = self.after or self.before
        method = results[0].method if results else self.method
        rules = [r for r in rules_for(self.engine).values() if r.BLOCKING and method in r.METHODS]
        gates = list(dict.fromkeys(r.GATE for r in rules))  # a gate of another method is no part of the run
        skipped: dict[str, str] = {}
        for r in results:
            for g, why in r.not_evaluated.items():
                skipped.setdefault(g, why)
        return [g for g in gates if g not in skipped], {g: skipped[g] for g in gates if g in skipped}

    def journal(self) -> dict:
        """What the backup of ``fix --apply`` records of this fix (its ``manifest.json``, see
        :func:`auditor.workspace.transaction.apply_to_folder`).

        Returns:
            ``{"method": str, "targets": [architecture, ...], "invocations": [invocation dict, ...]}``.
        """
        return {"method": self.method, "targets": [s.architecture for s in self.specs],
                "invocations": [i.as_dict() for i in self.invocations]}

    def codemods_document(self) -> dict:
        """The re-runnable codemods file (see :func:`load_codemods`)."""
        from auditor import __version__

        inferred = {r.architecture: r for r in self.before}
        targets = []
        for s in self.specs:
            r = inferred.get(s.architecture)  # the model_types the scan used (given, or inferred from the tree)
            targets.append({
                "architecture": s.architecture,
                "model_type": r.model_type if r is not None else s.model_type,
                "text_model_type": r.text_model_type if r is not None else s.text_model_type,
                "model_type_source": (r.model_type_source if r is not None else s.source) or None,
            })
        name = engine_for(self.engine).display
        return {
            "format": CODEMODS_FORMAT,
            "generated_by": f"eagle-audit {__version__}",
            # the release, never a local path (the file is shared and replayed on other trees)
            "source": {"vllm_version": self.release, "engine": self.engine,
                       "label": f"{name} {self.release}" if self.release else f"a {name} tree of no stated "
                       "version"},
            "method": self.method,
            "run_options": (self.before[0].run_options.as_dict()
                            if self.before and self.before[0].run_options else None),
            "targets": targets,
            "invocations": [i.as_dict() for i in self.invocations],
            "replay": "eagle-audit fix --codemods FILE TREE re-scans TREE for these targets and re-plans these "
                      "codemods from its own facts (paths, classes and members are derived again).",
        }

def _safe_name(text: str, limit: int = 120, default: str = "fix") -> str:
    """A file name made of ``text`` (characters other than letters, digits, ``_.+-`` become ``_``;
    at most ``limit`` characters; never starting with a dot), else ``default`` when none is left."""
    import re

    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", text).lstrip(".")[:limit]
    return name or default


def out_name(codemods: Path | None, model: Sequence[str], engine: str, version: str | None, method: str) -> str:
    """The stem of the files ``fix --out-dir`` writes: the targets as named (or the replayed
    codemods file's own stem, without the release and method it was written for), the engine
    release and the method: ``kimi_k2.vllm-0.16.0.eagle3`` (the gate's next step names the same
    file)."""
    import re

    if codemods is not None:
        base = codemods.name.removesuffix(".json").removesuffix(".codemods")
        base = re.sub(r"\.(vllm|sglang)-.+\.(eagle3|eagle|mtp)$", "", base)
    else:
        base = "+".join(model)
    # each part bounded on its own, so that a long release label (read from the tree) can never cut
    # off the method: two methods never share a file
    return f"{_safe_name(base, 100)}.{_safe_name(engine, 16)}-{_safe_name(version or '', 60, 'unversioned')}." \
           f"{_safe_name(method, 16)}"


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


def plan_fix(auditor: Auditor, specs: list[TargetSpec], method: str = "eagle3", only: set[str] | None = None,
             options: RunOptions | None = None, hf_config: dict | None = None,
             progress: Callable[[str, int, int], None] | None = None) -> FixResult:
    """Scan, plan, apply in memory and validate (see the module docstring). Nothing is written.

    Args:
        auditor: the tree to fix.
        specs: the targets.
        method: ``eagle3``, ``eagle`` or ``mtp``.
        only: restrict to these codemod names (a replayed codemods file).
        options: the run to fix for (pipeline-parallel size, drafter config, …; default: a
            plain run); every audit, before and after the patch, assumes it.
        hf_config: the checkpoint's ``config.json`` (``--hf-config``), read by every audit as
            the scan reads it (None: the targets' configs are inferred).
        progress: called as each stage starts, ``progress(stage, done, total)``: ``scanning
            the targets``, ``planning and applying the codemods``, ``validating: re-scanning the
            patch in memory`` (again per round when a round's patch needs another), and
            ``done``.
    """
    import libcst as cst

    def stage(text: str, done: int) -> None:
        if progress:
            progress(text, done, 3)

    from rules.cst import NotAutoFixable
    from rules.registry import apply_codemod

    t0 = time.perf_counter()
    stage("scanning the targets", 0)
    before = [auditor.audit(s, method, hf_config, options) for s in specs]
    res = FixResult(auditor.tree.version(), getattr(auditor.tree.source, "label", ""), method, specs, before,
                    engine=auditor.engine.name)
    if res.already_supported:
        res.after = before
        res.seconds = time.perf_counter() - t0
        stage("done", 3)
        return res
    current = auditor
    results = before
    done: set[tuple] = set()
    modules: dict[str, cst.Module] = {}  # parsed once per file, codemods applied in order
    failures: list[Unfixable] = []  # codemods that refused, kept across rounds
    for round_ in range(_MAX_ROUNDS):
        stage("planning and applying the codemods" + (f" (round {round_ + 1})" if round_ else ""), 1)
        planner = Planner(current.ctx, method, planners_for(current.ctx.engine), only, codemod_class)
        for r in results:
            if r.verdict is not Verdict.SUPPORTED:
                planner.plan(r)
        res.unfixable = planner.unfixable
        res.notes += [n for n in planner.notes if n not in res.notes]
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
                failures.append(Unfixable(arch, inv.gate, exc.reason, exc.hint, inv.path, codemod=inv.codemod))
                continue
            except UnicodeDecodeError:
                failures.append(Unfixable(arch, inv.gate, "the file is not UTF-8", "", inv.path, codemod=inv.codemod))
                continue
            except Exception as exc:  # parse errors and the like: report, never write
                failures.append(Unfixable(arch, inv.gate,
                                               f"the {inv.codemod} codemod failed: {type(exc).__name__}: {exc}",
                                               "", inv.path, codemod=inv.codemod))
                continue
            if changes:
                inv.changes = changes
                modules[inv.path] = new
                res.invocations.append(inv)
                touched.add(inv.path)
        for p in sorted(touched):
            try:
                res.patched[p] = modules[p].code
            except RecursionError:  # libcst writes code back recursively: a 900-term sum is too deep
                touched.discard(p)
                for inv in [i for i in res.invocations if i.path == p]:
                    res.invocations.remove(inv)
                    failures.append(Unfixable(inv.architectures[0], inv.gate,
                                              f"{p} is nested too deeply for the {inv.codemod} codemod to write it "
                                              "back (RecursionError)", "", p, codemod=inv.codemod))
                res.patched.pop(p, None)
        if not touched:
            break
        stage(f"validating: re-scanning the patch in memory ({len(specs)} target{'s' if len(specs) != 1 else ''})", 2)
        current = overlay_auditor(auditor, res.patched)
        results = [current.audit(s, method, hf_config, options) for s in specs]
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
            results = [current.audit(s, method, hf_config, options) for s in specs]
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
        planner = Planner(current.ctx, method, planners_for(current.ctx.engine), only, codemod_class)
        for r in res.after:
            if r.verdict is not Verdict.SUPPORTED:
                planner.plan(r)
        res.unfixable = failures + [u for u in planner.unfixable if (u.architecture, u.gate) not in
                                    {(f.architecture, f.gate) for f in failures}]
        for u in res.unfixable:  # planned on the patched tree: cited at the lines scan cites
            u.line = res.original_line(u.path, u.line)
    res.seconds = time.perf_counter() - t0
    stage("done", 3)
    return res


# -- codemods file ---------------------------------------------------------------------------


def load_codemods(path: Path, label: str = "--codemods") -> tuple[list[TargetSpec], str, set[str]]:
    """Read a codemods file written by ``fix --out-dir``: ``(targets, method, codemod names)``.
    ``label`` names where the path came from in a message (the flag, or the settings file and
    key).

    The file is validated against ``auditor/model/schemas/codemods.json``; every model_type in
    it must be shaped like one, and every codemod must exist.

    Raises:
        AuditError: unreadable file, not JSON, not a codemods file, or a value that does not fit
            (one line naming the file and the field).
    """
    from auditor.model.inputs import check_json, read_json

    doc = read_json(Path(path), label)
    if not isinstance(doc, dict) or doc.get("format") != CODEMODS_FORMAT:
        raise AuditError(f"{label}: {path} is not an eagle-audit codemods file (format {CODEMODS_FORMAT})")
    check_json(doc, f"{label} {path}", "codemods")
    specs = [
        TargetSpec(t["architecture"], t.get("model_type"), t.get("text_model_type"),
                   t.get("model_type_source") or "codemods file")
        for t in doc["targets"]
    ]
    names = {i["codemod"] for i in doc["invocations"]}
    method = doc.get("method", "eagle3")
    for s in specs:
        for key, value in (("model_type", s.model_type), ("text_model_type", s.text_model_type)):
            if value is not None:
                check_model_type(value, f"{label} {path}: {key}")
    for name in sorted(names):
        if name not in CODEMODS:
            raise AuditError(f"{label} {path}: unknown codemod {name!r}")
    return specs, method, names

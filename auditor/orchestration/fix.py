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
   re-plans from a scan of the other tree), or the tree itself (:func:`apply_to_folder`: every
   file replaced atomically, originals kept in a backup that :func:`revert_folder` restores).
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import json
import os
import secrets
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from auditor.engines.catalog import engine_for
from auditor.model.errors import AuditError
from auditor.model.findings import Severity, Verdict
from auditor.model.inputs import check_model_type
from auditor.model.options import RunOptions
from auditor.model.results import TargetResult, TargetSpec
from auditor.model.wording import count, one_line, shell_quote
from auditor.orchestration.scan import Auditor
from auditor.source.sources import TreeSource
from rules.planning import Invocation, Planner, Unfixable
from rules.registry import CODEMODS, codemod_class, planners_for

#: Format id of the codemods file written by ``fix --out``.
CODEMODS_FORMAT = "eagle-audit-codemods/1"

#: Folder that holds the backups of ``fix --apply``: in the folder the user gave (inside
#: ``site-packages/vllm/`` for an installed vLLM, beside ``vllm/`` in a checkout; see :func:`backup_home`).
BACKUP_DIR = ".eagle-audit-backup"

_MAX_ROUNDS = 3


class FixRefused(AuditError):
    """``--apply`` / ``--revert`` refused to write (nothing was written)."""


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

    def version(self) -> str | None:
        return self.base.version()

    def root(self):
        return None  # reads must go through _read, never to the base folder on disk


def overlay_auditor(base: Auditor, texts: dict[str, str]) -> Auditor:
    """An :class:`Auditor` over ``base``'s tree with ``texts`` (path → new source) laid over it.
    Summaries of unchanged files already built for ``base`` are reused."""
    src = OverlaySource(base.tree.source, {p: t.encode("utf-8") for p, t in texts.items()})
    return Auditor(base.tree.overlaid(src, texts), platform=base.platform, engine=base.engine)


# -- plan ------------------------------------------------------------------------------------


# -- fix -------------------------------------------------------------------------------------


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
        return all(r.verdict is Verdict.SUPPORTED for r in self.before)

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

    def diffstat(self) -> str:
        adds = dels = 0
        for line in self.diff().splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                adds += 1
            elif line.startswith("-") and not line.startswith("---"):
                dels += 1
        return (f"{count(len(self.patched), 'file')} changed, {count(adds, 'insertion')}(+), "
                f"{count(dels, 'deletion')}(-)")

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

    def report(self) -> str:
        """A plain-text account: verdicts before → after, each codemod's changes, what is not
        auto-fixable and why, and what still fails (each reason said once: a gate explained as
        not auto-fixable is not explained again)."""
        name = engine_for(self.engine).display
        lines = [f"eagle-audit fix: {self.source} ({name} {self.release or '?'}), method {self.method}"]
        after = {r.architecture: r for r in self.after}
        for r in self.before:
            b = r.verdict.value + (f" ({', '.join(r.blocking)})" if r.blocking else "")
            a = after.get(r.architecture)
            if r.verdict is Verdict.SUPPORTED and (a is None or a.verdict is Verdict.SUPPORTED):
                lines.append(f"  {r.architecture}: already supported, nothing to patch")
            elif self.already_supported or a is None:
                lines.append(f"  {r.architecture}: {b}")
            elif not self.patched:  # no codemod changed a file: there is no "after the patch"
                lines.append(f"  {r.architecture}: {b}; no codemod applies, nothing was patched")
            elif a.verdict is r.verdict and a.blocking == r.blocking:
                lines.append(f"  {r.architecture}: {b}, unchanged by the patch")
            else:
                at = a.verdict.value + (f" ({', '.join(a.blocking)})" if a.blocking else "")
                lines.append(f"  {r.architecture}: {b} -> {at} after the patch")
        if self.invocations:
            lines.append("codemods:")
            for inv in self.invocations:
                for c in inv.changes:
                    lines.append(f"  [{inv.codemod}] {inv.path}: {c}")
        for n in self.notes:
            lines.append(f"warning: {n}")
        for p in self.problems:
            lines.append(f"validation: {p}")
        if self.ok and self.patched:
            evaluated, skipped = self.scope()
            lines.append(f"scope: the patch makes the gates evaluated for this run pass ({', '.join(evaluated)}), "
                         "as re-scanned; it has not been run on a GPU")
            if skipped:
                lines.append("not evaluated for this run (neither checked nor passed): "
                             + "; ".join(f"{g} ({why})" for g, why in skipped.items()))
        if self.unfixable:
            lines.append("not auto-fixable:")
            seen = set()
            for u in self.unfixable:
                t = u.text()
                if t not in seen:
                    seen.add(t)
                    lines.append(f"  {t}")
        if self.after and not self.ok:
            # each reason once: a gate "not auto-fixable" above already says why; unpatched, the
            # per-target line above already names the gates
            explained = {(u.architecture, u.gate) for u in self.unfixable}
            for arch, gates in self.still_failing.items():
                details = [f for f in next(r for r in self.after if r.architecture == arch).findings
                           if f.severity in (Severity.ERROR, Severity.UNKNOWN) and (arch, f.gate) not in explained]
                if not self.patched and not details:
                    continue
                what = "still failing after the codemods" if self.patched else "still failing (no codemod applies)"
                shown = [g + (" (not auto-fixable, above)" if (arch, g) in explained else "") for g in gates]
                lines.append(f"{what}: {arch}: {', '.join(shown)}")
                for f in details:
                    line = self.original_line(f.path, f.line)
                    where = f"{f.path}:{line}" if f.path and line else f.where
                    lines.append(f"  {f.gate} {where}: {f.message}")
        return "\n".join(one_line(x) for x in lines)  # a name from the tree never starts a line of its own


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


# -- writing ---------------------------------------------------------------------------------
#
# ``--apply`` and ``--revert`` write only inside the tree, never through a symbolic link: every
# folder on the way to a file is opened one component at a time with O_NOFOLLOW, and each file is
# written to a temporary file in its folder and renamed over the target through that folder's
# descriptor. A lock on the tree is held throughout; a file is replaced only if its content still
# has the hash it was planned from (checked right before the rename); the backup, with its
# manifest (the journal), is complete on disk before the first file is replaced.

#: Lock file (beside the backup, see :func:`backup_home`) held for the whole of an apply or a revert.
LOCK_FILE = ".eagle-audit.lock"

#: Seconds to wait for another apply or revert of the same tree before refusing.
LOCK_TIMEOUT = 10.0

#: Format id of a backup's ``manifest.json``.
BACKUP_FORMAT = "eagle-audit-backup/2"

_TMP_SUFFIX = ".eagle-audit.tmp"
_STAGING = ".incomplete-"
_MAX_FILE_BYTES = 64 << 20


class FileChanged(FixRefused):
    """A file no longer has the content the patch (or the revert) was planned from."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tree_parts(rel: object) -> list[str]:
    """The components of a tree path ``<engine package>/**/*.py`` (``vllm/``, ``sglang/``; as
    listed by a source or a manifest).

    Raises:
        FixRefused: anything else (absolute, ``..``, ``.``, empty components, backslashes, NUL).
    """
    from auditor.engines.catalog import ENGINES

    packages = tuple(f"{e.package}/" for e in ENGINES.values())
    ok = isinstance(rel, str) and "\\" not in rel and "\0" not in rel and rel.startswith(packages) \
        and rel.endswith(".py") and len(rel) <= 1024
    parts = rel.split("/") if ok else []
    if not ok or any(p in ("", ".", "..") for p in parts):
        shown = repr(rel)[:120]
        where = " or ".join(f"{p}**/*.py" for p in packages)
        raise FixRefused(f"{shown} is not a path inside the tree ({where}); nothing was written")
    return parts


@dataclass
class _FileState:
    """What is at a path now: a regular ``file`` or a ``symlink`` (with its ``link`` text),
    the bytes read (through the link for a symlink; None when it dangles) and the permission bits."""

    kind: str
    data: bytes | None
    mode: int
    link: str | None = None


class _Dir:
    """An open folder of the tree, reached from the root one component at a time without following
    symbolic links. Reads and writes go through its descriptor, so a folder swapped for a link
    midway can never redirect a write outside the tree."""

    _FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

    def __init__(self, fd: int, label: str):
        self.fd = fd
        self.label = label

    @classmethod
    def open_root(cls, root: Path) -> "_Dir":
        """The tree root itself (the folder that contains ``vllm/``)."""
        try:
            return cls(os.open(root, os.O_RDONLY | os.O_DIRECTORY), str(root))
        except OSError as exc:
            raise FixRefused(f"cannot open {root}: {exc.strerror or exc}; nothing was written") from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "_Dir":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def sub(self, name: str, create: bool = False, exclusive: bool = False) -> "_Dir":
        """The sub-folder ``name`` (created with umask permissions when ``create``).

        Raises:
            FixRefused: ``name`` is a symbolic link or not a folder (or ``exclusive`` and it exists).
        """
        label = f"{self.label}/{name}"
        try:
            if create:
                try:
                    os.mkdir(name, 0o777, dir_fd=self.fd)
                except FileExistsError:
                    if exclusive:
                        raise
            return _Dir(os.open(name, self._FLAGS, dir_fd=self.fd), label)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST):
                raise FixRefused(f"{label} is a symbolic link or not a folder; refusing to write through it") from None
            raise

    def walk_to(self, parts: list[str], create: bool = False) -> "_Dir":
        """The folder holding ``parts[-1]`` (each of ``parts[:-1]`` opened without following links)."""
        cur = _Dir(os.dup(self.fd), self.label)
        for name in parts[:-1]:
            try:
                nxt = cur.sub(name, create=create)
            finally:
                cur.close()
            cur = nxt
        return cur

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def read(self, name: str, follow: bool = False) -> bytes:
        """The bytes of the regular file ``name`` (a symlink is refused unless ``follow``).

        Raises:
            FixRefused: not a regular file, or larger than any source file.
            OSError: missing or unreadable.
        """
        flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
        try:
            fd = os.open(name, flags, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise FixRefused(f"{self.label}/{name} is a symbolic link; refusing to use it") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FixRefused(f"{self.label}/{name} is not a regular file; refusing to use it")
            if st.st_size > _MAX_FILE_BYTES:
                raise FixRefused(f"{self.label}/{name} is larger than {_MAX_FILE_BYTES >> 20} MiB; refusing to use it")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read(_MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)

    def state(self, name: str) -> _FileState | None:
        """What is at ``name`` now (None when nothing is).

        Raises:
            FixRefused: something other than a regular file or a symbolic link (a folder, a FIFO).
        """
        st = self.lstat(name)
        if st is None:
            return None
        if stat.S_ISLNK(st.st_mode):
            link = os.readlink(name, dir_fd=self.fd)
            try:
                data = self.read(name, follow=True)
                mode = stat.S_IMODE(os.stat(name, dir_fd=self.fd).st_mode)
            except (OSError, FixRefused):
                data, mode = None, 0o666 & ~_umask()
            return _FileState("symlink", data, mode, link)
        if not stat.S_ISREG(st.st_mode):
            raise FixRefused(f"{self.label}/{name} is not a regular file; refusing to write it")
        return _FileState("file", self.read(name), stat.S_IMODE(st.st_mode))

    def put(self, name: str, data: bytes | None = None, *, link: str | None = None, mode: int | None = None,
            expect: set[str] | None = None, shown: str | None = None) -> None:
        """Replace ``name`` atomically with ``data`` (or a symbolic link to ``link``).

        The new file is written next to it under a temporary name (permissions: ``mode``, else
        those the umask gives), then renamed over ``name``. With ``expect``, the current content
        must have one of those sha256 digests right before the rename, else nothing changes and
        :class:`FileChanged` names ``shown``. The temporary file never survives a failure.
        """
        tmp = f".{name}.{secrets.token_hex(6)}{_TMP_SUFFIX}"
        try:
            if link is not None:
                os.symlink(link, tmp, dir_fd=self.fd)
            else:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=self.fd)
                try:
                    if mode is not None:
                        os.fchmod(fd, mode)
                    with os.fdopen(fd, "wb", closefd=False) as fh:
                        fh.write(data or b"")
                        fh.flush()
                        os.fsync(fh.fileno())
                finally:
                    os.close(fd)
            if expect is not None:
                now = self.state(name)
                if now is None or now.data is None or _sha(now.data) not in expect:
                    who = shown or f"{self.label}/{name}"
                    raise FileChanged(who, f"{who} changed while eagle-audit was writing it")
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise

    def clean_temps(self, name: str) -> None:
        """Remove temporary files left beside ``name`` by an interrupted write."""
        for entry in os.listdir(self.fd):
            if entry.startswith(f".{name}.") and entry.endswith(_TMP_SUFFIX):
                try:
                    os.unlink(entry, dir_fd=self.fd)
                except OSError:
                    pass

    def sync(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError:
            pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def _tree_lock(root: Path):
    """Hold ``root/.eagle-audit.lock`` (an exclusive ``flock``, the lock ``filelock`` takes) for
    the block. A lock file this call created is removed at the end, while still held; one that was
    there before is left as it was. A waiter that wakes on a lock file removed meanwhile takes the
    lock again on the file now at the path, so two holders never hold different files.

    Raises:
        FixRefused: the lock path is not a regular file, or another apply/revert holds the lock
            for longer than :data:`LOCK_TIMEOUT` seconds.
    """
    import fcntl

    path = root / LOCK_FILE
    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise FixRefused(f"{path} is not a regular file (a symbolic link?); nothing was written")
        created = False
        try:
            if st is None:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
                    created = True
                except FileExistsError:
                    continue  # another one created it first: lock that one
            else:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue  # removed by its holder meanwhile
        except OSError as exc:
            raise FixRefused(f"cannot lock {path}: {exc.strerror or exc}; nothing was written") from None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise FixRefused(f"another 'eagle-audit fix' is writing {root} (its lock {path} is held); "
                                         "nothing was written") from None
                    time.sleep(0.05)
            try:
                now = os.lstat(path)
            except FileNotFoundError:
                now = None
            mine = os.fstat(fd)
            same = now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)  # the file was removed (and maybe made again) while waiting: lock what is there now
    try:
        yield
    finally:
        if created:
            try:
                os.unlink(path)
            except OSError:
                pass
        os.close(fd)


class _SignalsDeferred:
    """SIGINT and SIGTERM held back for the block (in the main thread, the only one Python runs
    signal handlers in): their handlers only record the signal, :attr:`pending` tells the block
    at the points where it can stop cleanly, and on exit the previous handlers come back and a
    recorded signal is delivered again, to them (Ctrl-C raises KeyboardInterrupt, a default
    SIGTERM ends the process, after the block has put everything back)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.previous: dict[int, object] = {}

    @property
    def pending(self) -> bool:
        """A signal arrived since the block began."""
        return bool(self.received)

    def _record(self, signum, frame) -> None:
        self.received.append(signum)

    def __enter__(self) -> "_SignalsDeferred":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is None:  # installed outside Python: could not be put back
                    continue
                self.previous[sig] = signal.signal(sig, self._record)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, old in self.previous.items():
            signal.signal(sig, old)
        if self.received:
            signal.raise_signal(self.received[0])


def _refuse_links(d: _Dir) -> None:
    """Refuse a backup folder that holds anything but folders and regular files (a symbolic link
    could point a restore, or the backup itself, outside the tree)."""
    for name in os.listdir(d.fd):
        st = d.lstat(name)
        where = f"{d.label}/{name}"
        if st is None:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise FixRefused(f"the backup holds a symbolic link ({where}); refusing to use it")
        if stat.S_ISDIR(st.st_mode):
            with d.sub(name) as sub:
                _refuse_links(sub)
        elif not stat.S_ISREG(st.st_mode):
            raise FixRefused(f"the backup holds something that is not a file ({where}); refusing to use it")


def _backup_base(top: _Dir, create: bool, tidy: bool = True) -> _Dir | None:
    """The backup folder ``.eagle-audit-backup`` (None when absent and not ``create``), checked:
    a real folder holding only folders and regular files. Leftovers of an apply interrupted
    before its backup was complete (``.incomplete-*``, never referenced by a journal) are removed."""
    import shutil

    st = top.lstat(BACKUP_DIR)
    if st is None and not create:
        return None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise FixRefused(f"{top.label}/{BACKUP_DIR} is a symbolic link or not a folder; refusing to use it")
    base = top.sub(BACKUP_DIR, create=True)
    try:
        _refuse_links(base)
        for name in os.listdir(base.fd) if tidy else ():
            if name.startswith(_STAGING):
                shutil.rmtree(name, dir_fd=base.fd)
    except BaseException:
        base.close()
        raise
    return base


def _check_writable(root: Path, paths: list[str], home: Path | None = None) -> None:
    problems = []
    home = home or root
    if not os.access(home, os.W_OK):
        problems.append(f"{home} (for the backup folder)")
    for p in paths:
        f = root / p
        if not os.access(f, os.W_OK) or not os.access(f.parent, os.W_OK):
            problems.append(str(f))
    if problems:
        raise FixRefused(f"the tree is not writable: {', '.join(problems[:5])}; nothing was written")


def _write_backup(base: _Dir, result: FixResult, states: dict[str, _FileState],
                  originals: dict[str, bytes], patched: dict[str, bytes]) -> str:
    """Write the backup (original bytes + manifest) in a staging folder, then rename it to the
    next number: a numbered backup is always complete. Returns its folder name."""
    n = 1 + max(_backup_numbers(base), default=0)
    staging = f"{_STAGING}{n}-{secrets.token_hex(4)}"
    try:
        _stage_backup(base, staging, result, states, originals, patched)
        os.rename(staging, str(n), src_dir_fd=base.fd, dst_dir_fd=base.fd)
    except BaseException:  # a full disk, an unreadable folder: no half-written backup stays behind
        import shutil

        shutil.rmtree(staging, dir_fd=base.fd, ignore_errors=True)
        raise
    base.sync()
    return str(n)


def _stage_backup(base: _Dir, staging: str, result: FixResult, states: dict[str, _FileState],
                  originals: dict[str, bytes], patched: dict[str, bytes]) -> None:
    """Write the originals and the manifest into the new folder ``staging`` of ``base``."""
    with base.sub(staging, create=True, exclusive=True) as sdir:
        with sdir.sub("files", create=True) as files:
            for p in sorted(originals):
                parts = p.split("/")
                with files.walk_to(parts, create=True) as d:
                    d.put(parts[-1], originals[p])
        entries = {}
        for p in sorted(originals):
            st = states[p]
            entries[p] = {"original_sha256": _sha(originals[p]), "patched_sha256": _sha(patched[p]),
                          "kind": st.kind, "mode": st.mode}
            if st.link is not None:
                entries[p]["link"] = st.link
        manifest = {
            "format": BACKUP_FORMAT,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "method": result.method,
            "targets": [s.architecture for s in result.specs],
            "files": entries,
            "invocations": [i.as_dict() for i in result.invocations],
        }
        sdir.put("manifest.json", json.dumps(manifest, indent=2).encode())
        sdir.sync()


def _backup_numbers(base: _Dir) -> list[int]:
    """The numbers of the backups in the open backup folder: names made of ASCII digits only (a
    folder named ``²`` or ``٣`` is no backup of this tool, and is left alone)."""
    return [int(d) for d in os.listdir(base.fd) if d.isascii() and d.isdigit()]


def _discard_backup(base: _Dir, name: str) -> None:
    """Remove the backup ``name``: renamed first to a staging name (one atomic step, so that an
    interruption never leaves a numbered backup without its manifest), then deleted; a leftover
    staging folder is removed by the next apply or revert."""
    import shutil

    gone = f"{_STAGING}{name}-{secrets.token_hex(4)}"
    os.rename(name, gone, src_dir_fd=base.fd, dst_dir_fd=base.fd)
    shutil.rmtree(gone, dir_fd=base.fd, ignore_errors=True)


def _restore(top: _Dir, p: str, st: _FileState, data: bytes, expect: set[str]) -> None:
    parts = p.split("/")
    with top.walk_to(parts) as d:
        if st.kind == "symlink" and st.link is not None:
            d.put(parts[-1], link=st.link, expect=expect, shown=p)
        else:
            d.put(parts[-1], data, mode=st.mode, expect=expect, shown=p)


def backup_home(root: Path, given: Path | None, package: str = "vllm") -> Path:
    """The folder that holds the backup (``.eagle-audit-backup/``) and the lock of ``fix
    --apply``: inside the tree the user gave. ``given`` is the folder as given (None: the
    installed package): the package folder itself (``site-packages/vllm``, or nothing given)
    keeps them inside it, never in ``site-packages/``; a folder that contains ``vllm/`` (a
    checkout) keeps them beside ``vllm/``, in that folder."""
    root = Path(root)
    if given is not None and Path(given).expanduser().resolve() == root.resolve():
        return root
    return root / package


def _home_parts(root: Path, home: Path | None) -> list[str]:
    """The components of ``home`` below ``root`` (``[]`` for ``root`` itself).

    Raises:
        FixRefused: ``home`` is not ``root`` or a folder in it.
    """
    if home is None:
        return []
    try:
        parts = list(Path(home).relative_to(Path(root)).parts)
    except ValueError:
        raise FixRefused(f"{home} is not inside {root}; nothing was written") from None
    if any(p in ("", ".", "..") for p in parts):
        raise FixRefused(f"{home} is not inside {root}; nothing was written")
    return parts


def _open_home(top: _Dir, parts: list[str]) -> _Dir:
    """The folder ``parts`` below the open root ``top`` (no symbolic link followed), or a copy
    of ``top`` itself."""
    return top.walk_to(parts + ["-"]) if parts else _Dir(os.dup(top.fd), top.label)


def check_apply_target(root: Path, home: Path | None = None) -> None:
    """Refuse, before any planning, a tree that :func:`apply_to_folder` would refuse anyway: a
    folder that is not writable, or a backup folder that is a symbolic link or holds one.

    Raises:
        FixRefused: with the reason (nothing is written).
    """
    root = Path(root)
    home = Path(home) if home is not None else root
    if not os.access(home, os.W_OK):
        raise FixRefused(f"the tree is not writable: {home} (for the backup folder); nothing was written")
    with _Dir.open_root(root) as top, _open_home(top, _home_parts(root, home)) as hdir:
        base = _backup_base(hdir, create=False, tidy=False)
        if base is not None:
            base.close()


def apply_to_folder(root: Path, result: FixResult, home: Path | None = None) -> Path:
    """Write the patched files into the folder tree ``root`` (the folder that contains ``vllm/``).

    ``home`` (default ``root``; see :func:`backup_home`) is the folder in the tree that holds the
    lock and the backup. Under a lock on the tree (``home/.eagle-audit.lock``, removed afterwards
    when this call created it): checks that every file still has the content the patch was planned
    from, writes the backup ``home/.eagle-audit-backup/<n>/`` (the originals and a
    ``manifest.json`` journal) completely, then replaces each file atomically, re-checking its hash
    right before the rename. A symbolic link being patched is replaced by a regular file
    (``--revert`` puts the link back; a link to a path outside the tree is refused, since no
    revert would plant it again). When a write fails or a file changes midway, the files already
    written are restored and the backup removed; if even that fails, the backup stays and
    ``--revert`` completes the job. SIGINT and SIGTERM are held back while the tree is written:
    one that arrives before the last file is replaced restores every file the same way, then
    takes effect.

    Args:
        root: the folder that contains the engine package.
        result: a validated :class:`FixResult` (its ``originals`` and ``patched`` texts).
        home: the folder for the lock and the backup (default ``root``).

    Raises:
        FixRefused: the tree or a file is not writable, a folder on a path (or the backup folder,
            or anything in it) is a symbolic link, a patched file is a link to outside the tree, a
            file changed since planning (named), another apply/revert holds the lock; a write
            failed (the message says what was restored).
        KeyboardInterrupt: Ctrl-C (or SIGTERM, as the command line turns it into one), re-raised
            after the same restoring.

    Returns:
        The backup folder.
    """
    root = Path(root)
    paths = sorted(result.patched)
    for p in paths:
        _tree_parts(p)
    home = Path(home) if home is not None else root
    parts_home = _home_parts(root, home)
    _check_writable(root, paths, home)
    originals = {p: result.originals[p].encode("utf-8") for p in paths}
    patched = {p: result.patched[p].encode("utf-8") for p in paths}
    with _SignalsDeferred() as signals, _tree_lock(home), _Dir.open_root(root) as top, \
            _open_home(top, parts_home) as hdir:
        states: dict[str, _FileState] = {}
        for p in paths:
            parts = p.split("/")
            with top.walk_to(parts) as d:
                try:
                    st = d.state(parts[-1])
                except OSError as exc:
                    raise FixRefused(f"cannot read {p}: {exc.strerror or exc}; nothing was written") from None
            if st is None or st.data is None or _sha(st.data) != _sha(originals[p]):
                raise FileChanged(p, f"{p} changed since the diff was computed; nothing was written (run fix again)")
            if st.kind == "symlink" and not _link_inside(root, p, st.link):
                raise FixRefused(f"{p} is a symbolic link to {st.link}, outside the tree: --revert could not put it "
                                 "back; nothing was written (patch the file it points to)")
            states[p] = st
        had_backups = hdir.lstat(BACKUP_DIR) is not None
        with _backup_base(hdir, create=True) as base:
            try:
                name = _write_backup(base, result, states, originals, patched)
            except OSError as exc:
                if not had_backups:
                    _remove_empty(hdir, BACKUP_DIR)
                raise FixRefused(f"cannot write the backup in {home / BACKUP_DIR}: {exc.strerror or exc}; the tree "
                                 "was not changed") from None
            bdir = home / BACKUP_DIR / name
            written: list[str] = []
            p = paths[0] if paths else ""
            try:
                for p in paths:
                    if signals.pending:
                        raise KeyboardInterrupt
                    parts = p.split("/")
                    with top.walk_to(parts) as d:
                        written.append(p)  # before the rename: restoring a file still original is a no-op
                        d.put(parts[-1], patched[p], mode=states[p].mode, expect={_sha(originals[p])}, shown=p)
                if signals.pending:
                    raise KeyboardInterrupt
            except BaseException as exc:
                _undo_apply(exc, p, top, hdir, base, name, bdir, home, states, originals, patched, written)
    return bdir


def _undo_apply(exc: BaseException, p: str, top: _Dir, hdir: _Dir, base: _Dir, name: str, bdir: Path, home: Path,
                states: dict[str, _FileState], originals: dict[str, bytes], patched: dict[str, bytes],
                written: list[str]) -> None:
    """Put back the files an apply had written (``written``, the last one perhaps never replaced)
    and remove its backup, then raise what stopped it (``exc``, while writing ``p``), saying what
    was restored."""
    problem = None
    restored = 0
    for i, w in reversed(list(enumerate(written))):
        parts = w.split("/")
        try:
            if i == len(written) - 1:  # the file in flight: replaced only if it now holds the patch
                with top.walk_to(parts) as d:
                    now = d.state(parts[-1])
                if now is None or now.kind != "file" or now.data is None or _sha(now.data) != _sha(patched[w]):
                    continue  # stopped before its rename (or refused by someone's edit): left as it is
            _restore(top, w, states[w], originals[w], {_sha(patched[w])})
            restored += 1
        except (OSError, FixRefused) as again:
            problem = f"{w}: {again}"
    if problem is None:
        try:
            _discard_backup(base, name)
        except OSError:
            pass
        _remove_empty(hdir, BACKUP_DIR)  # only when no other backup is in it
        after = (f"{count(restored, 'file')} already written {'was' if restored == 1 else 'were'} "
                 "restored; nothing was changed")
    else:
        after = (f"restoring the files already written failed ({problem}); the originals are in "
                 f"{bdir}: run eagle-audit fix --revert {shell_quote(home)}")
    if not isinstance(exc, Exception):
        raise exc
    if isinstance(exc, FileChanged):
        raise FileChanged(exc.path, f"{exc.path} changed while the patch was being written (your edit "
                          f"is kept); {after}") from None
    if isinstance(exc, FixRefused):
        raise FixRefused(f"{exc}; {after}") from None
    what = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    raise FixRefused(f"writing {p} failed ({what}); {after}") from None


def _remove_empty(d: _Dir, name: str) -> None:
    """Remove the folder ``name`` of ``d`` if it is empty."""
    try:
        os.rmdir(name, dir_fd=d.fd)
    except OSError:
        pass


def _link_inside(root: Path, p: str, link: str | None) -> bool:
    """Whether the symbolic link ``link``, placed at the tree path ``p``, points inside ``root``
    (resolved as the system would, through any link on the way)."""
    if not isinstance(link, str) or not link or "\0" in link:
        return False
    folder = os.path.join(os.fspath(root), *p.split("/")[:-1])
    target = os.path.realpath(os.path.join(folder, link))
    top = os.path.realpath(os.fspath(root))
    return target == top or target.startswith(top.rstrip(os.sep) + os.sep)


def revert_folder(root: Path, home: Path | None = None) -> tuple[Path, list[str]]:
    """Undo the latest ``fix --apply`` on the folder tree ``root`` (the backup and the lock in
    ``home``, default ``root``; a backup that an older eagle-audit kept in ``root`` is found
    too): restore each file from the
    backup (atomically; a file that was a symbolic link becomes that link again) and remove the
    backup. Works after an apply that was interrupted midway (files still original are left as
    they are), and after a revert that was.

    Every path of the manifest must be a ``vllm/**/*.py`` path reached inside the tree without
    following a symbolic link, and every link it restores must point inside the tree; the backup
    folder must be a real folder holding only folders and regular files (a sub-folder whose name
    is not a number is no backup, and is left alone); the manifest must match its schema and be
    at most :data:`auditor.model.inputs.MAX_JSON_BYTES`. SIGINT and SIGTERM are held back until
    every file is restored and the backup removed, then take effect. The lock file is removed
    afterwards when this call created it.

    Args:
        root: the folder that contains the engine package.
        home: the folder that holds the lock and the backup (default ``root``).

    Raises:
        FixRefused: no backup; a forged or damaged backup (symbolic links, a path outside the tree,
            a link to outside the tree, a corrupt copy, a manifest that does not match its schema
            or is too large); a file changed after the apply; the tree is not writable; another
            apply/revert holds the lock. Nothing is written in those cases.

    Returns:
        ``(backup folder used, restored paths)``.
    """
    from auditor.model.inputs import MAX_JSON_BYTES, check_json

    root = Path(root)
    home = Path(home) if home is not None else root
    parts_home = _home_parts(root, home)
    if parts_home and not os.path.lexists(home / BACKUP_DIR) and os.path.lexists(root / BACKUP_DIR):
        home, parts_home = root, []  # kept beside the package by an older eagle-audit
    with _SignalsDeferred(), _tree_lock(home), _Dir.open_root(root) as top, _open_home(top, parts_home) as hdir:
        base = _backup_base(hdir, create=False)
        if base is None:
            raise FixRefused(f"no backup of a previous 'fix --apply' in {home / BACKUP_DIR}")
        with base:
            nums = sorted(_backup_numbers(base), reverse=True)
            if not nums:
                if not os.listdir(base.fd):  # only the leftovers of an apply that died before its journal
                    os.rmdir(BACKUP_DIR, dir_fd=hdir.fd)
                raise FixRefused(f"no backup of a previous 'fix --apply' in {home / BACKUP_DIR}")
            name = str(nums[0])
            bdir = home / BACKUP_DIR / name
            with base.sub(name) as b:
                try:
                    st = b.lstat("manifest.json")
                    if st is not None and st.st_size > MAX_JSON_BYTES:
                        raise ValueError(f"manifest.json is larger than the {MAX_JSON_BYTES >> 20} MiB limit")
                    raw = b.read("manifest.json")
                    if len(raw) > MAX_JSON_BYTES:
                        raise ValueError(f"manifest.json is larger than the {MAX_JSON_BYTES >> 20} MiB limit")
                    manifest = check_json(json.loads(raw.decode("utf-8")), f"{bdir}/manifest.json",
                                          "backup-manifest")
                except (OSError, ValueError, RecursionError, AuditError) as exc:
                    if "integer string conversion" in str(exc):  # not Python's hint to call an API
                        exc = "manifest.json holds an integer of more digits than Python converts"
                    raise FixRefused(f"the backup in {bdir} is unreadable ({exc}); nothing was restored") from None
                files = manifest["files"]
                paths = sorted(files)
                for p in paths:
                    _tree_parts(p)
                _check_writable(root, paths, home)
                todo: list[tuple[str, _FileState, bytes, str]] = []
                with b.sub("files") as copies:
                    for p in paths:
                        info = files[p]
                        parts = p.split("/")
                        try:
                            with copies.walk_to(parts) as d:
                                data = d.read(parts[-1])
                        except OSError:
                            raise FixRefused(f"the backup copy of {p} is missing; nothing was restored") from None
                        if _sha(data) != info["original_sha256"]:
                            raise FixRefused(f"the backup copy of {p} is corrupt; nothing was restored")
                        kind = info.get("kind", "file")
                        if kind == "symlink" and "link" not in info:
                            raise FixRefused(f"the backup of {p} names no link target; nothing was restored")
                        if kind == "symlink" and not _link_inside(root, p, info["link"]):
                            raise FixRefused(f"the backup of {p} names a link to {info['link']!r}, outside the tree "
                                             "(a forged manifest?); nothing was restored")
                        # permission bits only: a forged manifest never sets set-user-ID, set-group-ID or sticky
                        mode = info.get("mode", 0o666 & ~_umask()) & 0o777
                        want = _FileState(kind, data, mode, info.get("link"))
                        with top.walk_to(parts) as d:
                            now = d.state(parts[-1])
                        if now is not None and now.kind == kind == "symlink" and now.link == want.link:
                            continue  # already the original link
                        if now is not None and now.kind == kind == "file" and now.data is not None \
                                and _sha(now.data) == info["original_sha256"]:
                            continue  # already the original (an apply interrupted before reaching it)
                        if now is None or now.kind != "file" or now.data is None \
                                or _sha(now.data) != info["patched_sha256"]:
                            raise FileChanged(p, f"{p} was changed after 'fix --apply'; nothing was restored "
                                              f"(the original is kept in {bdir / 'files' / p})")
                        todo.append((p, want, data, info["patched_sha256"]))
                for p, want, data, patched_sha in todo:
                    _restore(top, p, want, data, {patched_sha})
                for p in paths:
                    parts = p.split("/")
                    with top.walk_to(parts) as d:
                        d.clean_temps(parts[-1])
            _discard_backup(base, name)
            empty = not os.listdir(base.fd)
        if empty:
            try:
                os.rmdir(BACKUP_DIR, dir_fd=hdir.fd)
            except OSError:
                pass
    return bdir, paths

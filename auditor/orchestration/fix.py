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
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from auditor.model.errors import AuditError
from auditor.model.findings import Severity, Verdict
from auditor.model.results import TargetResult, TargetSpec
from auditor.orchestration.scan import Auditor
from auditor.source.sources import TreeSource
from rules.planning import Invocation, Planner, Unfixable
from rules.registry import PLANNERS

#: Format id of the codemods file written by ``fix --out``.
CODEMODS_FORMAT = "eagle-audit-codemods/1"

#: Folder (next to ``vllm/``) that holds the backups of ``fix --apply``.
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
    return Auditor(base.tree.overlaid(src, texts))


# -- plan ------------------------------------------------------------------------------------


# -- fix -------------------------------------------------------------------------------------


@dataclass
class FixResult:
    """The outcome of :func:`plan_fix`: the audits before and after, the invocations applied (in
    order), what could not be fixed, and the original and patched text of each changed file."""

    vllm_version: str | None
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
    seconds: float = 0.0

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
        n = len(self.patched)
        return f"{n} file{'s' if n != 1 else ''} changed, {adds} insertions(+), {dels} deletions(-)"

    def codemods_document(self) -> dict:
        """The re-runnable codemods file (see :func:`load_codemods`)."""
        from auditor import __version__

        return {
            "format": CODEMODS_FORMAT,
            "generated_by": f"eagle-audit {__version__}",
            "source": {"vllm_version": self.vllm_version, "label": self.source},
            "method": self.method,
            "targets": [
                {"architecture": s.architecture, "model_type": s.model_type, "text_model_type": s.text_model_type,
                 "model_type_source": s.source}
                for s in self.specs
            ],
            "invocations": [i.as_dict() for i in self.invocations],
            "replay": "eagle-audit fix --codemods FILE TREE re-scans TREE for these targets and re-plans these "
                      "codemods from its own facts (paths, classes and members are derived again).",
        }

    def report(self) -> str:
        """A plain-text account: verdicts before → after, each codemod's changes, what is not
        auto-fixable and why."""
        lines = [f"eagle-audit fix: {self.source} (vLLM {self.vllm_version or '?'}), method {self.method}"]
        after = {r.architecture: r for r in self.after}
        for r in self.before:
            b = r.verdict.value + (f" ({', '.join(r.blocking)})" if r.blocking else "")
            a = after.get(r.architecture)
            if self.already_supported or a is None:
                lines.append(f"  {r.architecture}: {b}")
            else:
                at = a.verdict.value + (f" ({', '.join(a.blocking)})" if a.blocking else "")
                lines.append(f"  {r.architecture}: {b} -> {at} after the patch")
        if self.invocations:
            lines.append("codemods:")
            for inv in self.invocations:
                for c in inv.changes:
                    lines.append(f"  [{inv.codemod}] {inv.path}: {c}")
        for p in self.problems:
            lines.append(f"validation: {p}")
        if self.ok and self.patched:
            lines.append("scope: the patch makes every gate eagle-audit checks pass (allowlist, interface, "
                         "aux-capture, image-token), as re-scanned; it has not been run on a GPU")
        if self.unfixable:
            lines.append("not auto-fixable:")
            seen = set()
            for u in self.unfixable:
                t = u.text()
                if t not in seen:
                    seen.add(t)
                    lines.append(f"  {t}")
        if self.after and not self.ok:
            for arch, gates in self.still_failing.items():
                lines.append(f"still failing after the codemods: {arch}: {', '.join(gates)}")
                for f in next(r for r in self.after if r.architecture == arch).findings:
                    if f.severity in (Severity.ERROR, Severity.UNKNOWN):
                        lines.append(f"  {f.gate} {f.where}: {f.message}")
        return "\n".join(lines)


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


def plan_fix(auditor: Auditor, specs: list[TargetSpec], method: str = "eagle3", only: set[str] | None = None) -> FixResult:
    """Scan, plan, apply in memory and validate (see the module docstring). Nothing is written.

    Args:
        auditor: the tree to fix.
        specs: the targets.
        method: ``eagle3`` or ``eagle``.
        only: restrict to these codemod names (a replayed codemods file).
    """
    import libcst as cst

    from rules.cst import NotAutoFixable
    from rules.registry import apply_codemod

    t0 = time.perf_counter()
    before = [auditor.audit(s, method) for s in specs]
    res = FixResult(auditor.tree.version(), getattr(auditor.tree.source, "label", ""), method, specs, before)
    if res.already_supported:
        res.after = before
        res.seconds = time.perf_counter() - t0
        return res
    current = auditor
    results = before
    done: set[tuple] = set()
    modules: dict[str, cst.Module] = {}  # parsed once per file, codemods applied in order
    failures: list[Unfixable] = []  # codemods that refused, kept across rounds
    for _ in range(_MAX_ROUNDS):
        planner = Planner(current.ctx, method, PLANNERS, only)
        for r in results:
            if r.verdict is not Verdict.SUPPORTED:
                planner.plan(r)
        res.unfixable = planner.unfixable
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
                failures.append(Unfixable(arch, inv.gate, exc.reason, exc.hint, inv.path))
                continue
            except UnicodeDecodeError:
                failures.append(Unfixable(arch, inv.gate, "the file is not UTF-8", "", inv.path))
                continue
            except Exception as exc:  # parse errors and the like: report, never write
                failures.append(Unfixable(arch, inv.gate,
                                               f"the {inv.codemod} codemod failed: {type(exc).__name__}: {exc}",
                                               "", inv.path))
                continue
            if changes:
                inv.changes = changes
                modules[inv.path] = new
                res.invocations.append(inv)
                touched.add(inv.path)
        if not touched:
            break
        for p in touched:
            res.patched[p] = modules[p].code
        current = overlay_auditor(auditor, res.patched)
        results = [current.audit(s, method) for s in specs]
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
            results = [current.audit(s, method) for s in specs]
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
        planner = Planner(current.ctx, method, PLANNERS, only)
        for r in res.after:
            if r.verdict is not Verdict.SUPPORTED:
                planner.plan(r)
        res.unfixable = failures + [u for u in planner.unfixable if (u.architecture, u.gate) not in
                                    {(f.architecture, f.gate) for f in failures}]
    res.seconds = time.perf_counter() - t0
    return res


# -- codemods file ---------------------------------------------------------------------------


def load_codemods(path: Path) -> tuple[list[TargetSpec], str, set[str]]:
    """Read a codemods file written by ``fix --out``: ``(targets, method, codemod names)``.

    Raises:
        AuditError: unreadable file, not JSON, or not a codemods file.
    """
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise AuditError(f"--codemods: no such file: {path}") from None
    except (OSError, ValueError) as exc:
        raise AuditError(f"--codemods: cannot read {path} as JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != CODEMODS_FORMAT:
        raise AuditError(f"--codemods: {path} is not an eagle-audit codemods file (format {CODEMODS_FORMAT})")
    try:
        specs = [
            TargetSpec(t["architecture"], t.get("model_type"), t.get("text_model_type"),
                       t.get("model_type_source") or "codemods file")
            for t in doc["targets"]
        ]
        names = {i["codemod"] for i in doc["invocations"]}
        method = doc.get("method", "eagle3")
    except (KeyError, TypeError) as exc:
        raise AuditError(f"--codemods: {path} is malformed: missing {exc}") from None
    return specs, method, names


# -- writing ---------------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temporary file in the same folder and a rename,
    keeping the file's permission bits."""
    mode = target.stat().st_mode & 0o7777 if target.exists() else None
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".eagle-audit.tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_writable(root: Path, paths: list[str]) -> None:
    problems = []
    if not os.access(root, os.W_OK):
        problems.append(f"{root} (for the backup folder)")
    for p in paths:
        f = root / p
        if not os.access(f, os.W_OK) or not os.access(f.parent, os.W_OK):
            problems.append(str(f))
    if problems:
        raise FixRefused(f"the tree is not writable: {', '.join(problems[:5])}; nothing was written")


def apply_to_folder(root: Path, result: FixResult) -> Path:
    """Write the patched files into the folder tree ``root`` (the folder that contains ``vllm/``).

    Refuses (raises :class:`FixRefused`, nothing written) when a file or folder is not writable
    or a file changed since the diff was computed. Keeps the originals in
    ``root/.eagle-audit-backup/<n>/`` with a ``manifest.json``; every file is replaced
    atomically, and a failure midway restores the files already written.

    Returns:
        The backup folder.
    """
    root = Path(root)
    paths = sorted(result.patched)
    _check_writable(root, paths)
    originals = {p: result.originals[p].encode("utf-8") for p in paths}
    for p in paths:
        try:
            now = (root / p).read_bytes()
        except OSError as exc:
            raise FixRefused(f"cannot read {p}: {exc}; nothing was written") from None
        if _sha(now) != _sha(originals[p]):
            raise FixRefused(f"{p} changed since the diff was computed; nothing was written (run fix again)")
    base = root / BACKUP_DIR
    n = 1 + max((int(d.name) for d in base.iterdir() if d.name.isdigit()), default=0) if base.is_dir() else 1
    bdir = base / str(n)
    try:
        bdir.mkdir(parents=True)
        for p in paths:
            dest = bdir / "files" / p
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(originals[p])
        manifest = {
            "format": "eagle-audit-backup/1",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "method": result.method,
            "targets": [s.architecture for s in result.specs],
            "files": {
                p: {"original_sha256": _sha(originals[p]), "patched_sha256": _sha(result.patched[p].encode("utf-8"))}
                for p in paths
            },
            "invocations": [i.as_dict() for i in result.invocations],
        }
        _atomic_write(bdir / "manifest.json", json.dumps(manifest, indent=2).encode())
    except OSError as exc:
        raise FixRefused(f"cannot write the backup in {bdir}: {exc}; the tree was not changed") from None
    written: list[str] = []
    try:
        for p in paths:
            _atomic_write(root / p, result.patched[p].encode("utf-8"))
            written.append(p)
    except OSError as exc:
        for p in written:
            _atomic_write(root / p, originals[p])
        raise FixRefused(f"writing {root / p} failed ({exc}); the files already written were restored") from None
    return bdir


def revert_folder(root: Path) -> tuple[Path, list[str]]:
    """Undo the latest ``fix --apply`` on the folder tree ``root``: restore each file from the
    backup (atomically) and remove the backup.

    Refuses (raises :class:`FixRefused`, nothing written) when there is no backup, a file was
    changed after the apply, or the tree is not writable.

    Returns:
        ``(backup folder used, restored paths)``.
    """
    import shutil

    root = Path(root)
    base = root / BACKUP_DIR
    nums = sorted((int(d.name) for d in base.iterdir() if d.name.isdigit()), reverse=True) if base.is_dir() else []
    if not nums:
        raise FixRefused(f"no backup of a previous 'fix --apply' in {base}")
    bdir = base / str(nums[0])
    try:
        manifest = json.loads((bdir / "manifest.json").read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise FixRefused(f"the backup in {bdir} is unreadable ({exc}); nothing was restored") from None
    paths = sorted(files)
    _check_writable(root, paths)
    originals = {}
    for p in paths:
        data = (bdir / "files" / p).read_bytes()
        if _sha(data) != files[p]["original_sha256"]:
            raise FixRefused(f"the backup copy of {p} is corrupt; nothing was restored")
        originals[p] = data
        now = (root / p).read_bytes() if (root / p).exists() else b""
        if _sha(now) != files[p]["patched_sha256"] and _sha(now) != files[p]["original_sha256"]:
            raise FixRefused(f"{p} was changed after 'fix --apply'; nothing was restored "
                             f"(the original is kept in {bdir / 'files' / p})")
    for p in paths:
        _atomic_write(root / p, originals[p])
    shutil.rmtree(bdir)
    if base.is_dir() and not any(base.iterdir()):
        base.rmdir()
    return bdir, paths

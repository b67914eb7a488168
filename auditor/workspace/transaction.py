"""The two transactions on a folder tree: :func:`apply_to_folder` (``fix --apply``) and
:func:`revert_folder` (``fix --revert``), and :func:`check_apply_target`, which refuses before
any planning a tree the apply would refuse.

``--apply`` and ``--revert`` write only inside the tree, never through a symbolic link: every
folder on the way to a file is opened one component at a time with O_NOFOLLOW, and each file is
written to a temporary file in its folder and renamed over the target through that folder's
descriptor (:class:`auditor.workspace.folder.Dir`). A lock on the tree is held throughout
(:mod:`auditor.workspace.lock`); a file is replaced only if its content still has the hash it was
planned from (checked right before the rename); the backup, with its manifest (the journal), is
complete on disk before the first file is replaced (:mod:`auditor.workspace.backup`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol

from auditor.model.errors import AuditError
from auditor.model.wording import count, shell_quote
from auditor.workspace.backup import (
    BACKUP_DIR, backup_base, backup_numbers, discard_backup, home_parts, open_home, write_backup
)
from auditor.workspace.folder import (
    Dir, FileChanged, FileState, FixRefused, current_umask, sha256_hex, tree_parts
)
from auditor.workspace.lock import SignalsDeferred, tree_lock


class Patch(Protocol):
    """What :func:`apply_to_folder` writes (:class:`auditor.orchestration.fix.FixResult` is one):
    the original and the patched text of each changed tree path, and :meth:`journal`, what the
    backup's manifest records of the change."""

    originals: dict[str, str]
    patched: dict[str, str]

    def journal(self) -> dict:
        """``{"method": str, "targets": [architecture, ...], "invocations": [invocation dict, ...]}``."""
        ...


def _check_writable(root: Path, paths: list[str], home: Path | None = None) -> None:
    """Refuse a tree where ``home`` (for the backup), a file of ``paths`` or its folder is not writable."""
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


def _restore(top: Dir, p: str, st: FileState, data: bytes, expect: set[str]) -> None:
    """Put the tree path ``p`` back as ``st`` says (a link again, or the file ``data`` with its
    mode), provided its content now has one of the digests ``expect``."""
    parts = p.split("/")
    with top.walk_to(parts) as d:
        if st.kind == "symlink" and st.link is not None:
            d.put(parts[-1], link=st.link, expect=expect, shown=p)
        else:
            d.put(parts[-1], data, mode=st.mode, expect=expect, shown=p)


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
    with Dir.open_root(root) as top, open_home(top, home_parts(root, home)) as hdir:
        base = backup_base(hdir, create=False, tidy=False)
        if base is not None:
            base.close()


def apply_to_folder(root: Path, result: Patch, home: Path | None = None) -> Path:
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
        result: a validated :class:`~auditor.orchestration.fix.FixResult` (a :class:`Patch`: its
            ``originals`` and ``patched`` texts, and the journal its backup records).
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
        tree_parts(p)
    home = Path(home) if home is not None else root
    parts_home = home_parts(root, home)
    _check_writable(root, paths, home)
    originals = {p: result.originals[p].encode("utf-8") for p in paths}
    patched = {p: result.patched[p].encode("utf-8") for p in paths}
    with SignalsDeferred() as signals, tree_lock(home), Dir.open_root(root) as top, \
            open_home(top, parts_home) as hdir:
        states: dict[str, FileState] = {}
        for p in paths:
            parts = p.split("/")
            with top.walk_to(parts) as d:
                try:
                    st = d.state(parts[-1])
                except OSError as exc:
                    raise FixRefused(f"cannot read {p}: {exc.strerror or exc}; nothing was written") from None
            if st is None or st.data is None or sha256_hex(st.data) != sha256_hex(originals[p]):
                raise FileChanged(p, f"{p} changed since the diff was computed; nothing was written (run fix again)")
            if st.kind == "symlink" and not _link_inside(root, p, st.link):
                raise FixRefused(f"{p} is a symbolic link to {st.link}, outside the tree: --revert could not put it "
                                 "back; nothing was written (patch the file it points to)")
            states[p] = st
        had_backups = hdir.lstat(BACKUP_DIR) is not None
        with backup_base(hdir, create=True) as base:
            try:
                name = write_backup(base, result.journal(), states, originals, patched)
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
                        d.put(parts[-1], patched[p], mode=states[p].mode, expect={sha256_hex(originals[p])}, shown=p)
                if signals.pending:
                    raise KeyboardInterrupt
            except BaseException as exc:
                _undo_apply(exc, p, top, hdir, base, name, bdir, home, states, originals, patched, written)
    return bdir


def _undo_apply(exc: BaseException, p: str, top: Dir, hdir: Dir, base: Dir, name: str, bdir: Path, home: Path,
                states: dict[str, FileState], originals: dict[str, bytes], patched: dict[str, bytes],
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
                if now is None or now.kind != "file" or now.data is None or sha256_hex(now.data) != sha256_hex(patched[w]):
                    continue  # stopped before its rename (or refused by someone's edit): left as it is
            _restore(top, w, states[w], originals[w], {sha256_hex(patched[w])})
            restored += 1
        except (OSError, FixRefused) as again:
            problem = f"{w}: {again}"
    if problem is None:
        try:
            discard_backup(base, name)
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


def _remove_empty(d: Dir, name: str) -> None:
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
    parts_home = home_parts(root, home)
    if parts_home and not os.path.lexists(home / BACKUP_DIR) and os.path.lexists(root / BACKUP_DIR):
        home, parts_home = root, []  # kept beside the package by an older eagle-audit
    with SignalsDeferred(), tree_lock(home), Dir.open_root(root) as top, open_home(top, parts_home) as hdir:
        base = backup_base(hdir, create=False)
        if base is None:
            raise FixRefused(f"no backup of a previous 'fix --apply' in {home / BACKUP_DIR}")
        with base:
            nums = sorted(backup_numbers(base), reverse=True)
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
                    tree_parts(p)
                _check_writable(root, paths, home)
                todo: list[tuple[str, FileState, bytes, str]] = []
                with b.sub("files") as copies:
                    for p in paths:
                        info = files[p]
                        parts = p.split("/")
                        try:
                            with copies.walk_to(parts) as d:
                                data = d.read(parts[-1])
                        except OSError:
                            raise FixRefused(f"the backup copy of {p} is missing; nothing was restored") from None
                        if sha256_hex(data) != info["original_sha256"]:
                            raise FixRefused(f"the backup copy of {p} is corrupt; nothing was restored")
                        kind = info.get("kind", "file")
                        if kind == "symlink" and "link" not in info:
                            raise FixRefused(f"the backup of {p} names no link target; nothing was restored")
                        if kind == "symlink" and not _link_inside(root, p, info["link"]):
                            raise FixRefused(f"the backup of {p} names a link to {info['link']!r}, outside the tree "
                                             "(a forged manifest?); nothing was restored")
                        # permission bits only: a forged manifest never sets set-user-ID, set-group-ID or sticky
                        mode = info.get("mode", 0o666 & ~current_umask()) & 0o777
                        want = FileState(kind, data, mode, info.get("link"))
                        with top.walk_to(parts) as d:
                            now = d.state(parts[-1])
                        if now is not None and now.kind == kind == "symlink" and now.link == want.link:
                            continue  # already the original link
                        if now is not None and now.kind == kind == "file" and now.data is not None \
                                and sha256_hex(now.data) == info["original_sha256"]:
                            continue  # already the original (an apply interrupted before reaching it)
                        if now is None or now.kind != "file" or now.data is None \
                                or sha256_hex(now.data) != info["patched_sha256"]:
                            raise FileChanged(p, f"{p} was changed after 'fix --apply'; nothing was restored "
                                              f"(the original is kept in {bdir / 'files' / p})")
                        todo.append((p, want, data, info["patched_sha256"]))
                for p, want, data, patched_sha in todo:
                    _restore(top, p, want, data, {patched_sha})
                for p in paths:
                    parts = p.split("/")
                    with top.walk_to(parts) as d:
                        d.clean_temps(parts[-1])
            discard_backup(base, name)
            empty = not os.listdir(base.fd)
        if empty:
            try:
                os.rmdir(BACKUP_DIR, dir_fd=hdir.fd)
            except OSError:
                pass
    return bdir, paths

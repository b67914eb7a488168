"""Fetch released vLLM (and SGLang) source archives from the package index pip uses.

The index is never hard-coded: it is whatever pip itself is configured to use (see
:func:`index_url`). For vLLM only the sdist ``vllm-X.tar.gz`` is fetched -- it holds the whole
Python source in 10-50 MB, while the wheels weigh 300-500 MB. For SGLang (``project="sglang"``)
the sdist is fetched when the index has one, else the wheel that installs on this platform's
Python (``py3-none-any``, or the matching ``cp311`` tag; read in place like an sdist). Archives are cached in
``platformdirs.user_cache_path("eagle-audit") / "archives"`` (the cache root can be
replaced with the ``EAGLE_AUDIT_CACHE_DIR`` environment variable), verified against the
sha256 the index publishes, and re-verified offline on later runs against a
``<file>.sha256`` sidecar written at download time.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import tempfile
import threading
import urllib.error

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from auditor.model.errors import SourceError
from auditor.source.digests import (
    allow_unverified, drop_cached, has_digest, is_file, private_folder, read_sidecar, sha256_file,
    unlink_quietly, write_sidecar
)
from auditor.source.listing import (
    DEFAULT_PROJECT, PROJECTS, WHEEL_FALLBACK, SdistFile, all_versions, cached_wheel, nearest_versions,
    project_files, release_wheels, sdist_files, wheel_files
)
from auditor.source.pipconfig import IndexClient, archive_cache_dir, index_url

_CHUNK = 1 << 20

#: Set by :func:`stop_downloads`: every download stops at its next chunk (its ``.part`` file is
#: deleted) and none starts until :func:`allow_downloads`.
_STOP = threading.Event()


def stop_downloads() -> None:
    """Make every download in progress, in any thread, stop at its next chunk with a
    :class:`~auditor.model.errors.SourceError` (its partial file deleted), and refuse new ones
    until :func:`allow_downloads`. Used when a run is interrupted (Ctrl-C during ``matrix``)."""
    _STOP.set()


def allow_downloads() -> None:
    """Let downloads run again after :func:`stop_downloads`."""
    _STOP.clear()


def _write(out, chunk: bytes, folder: pathlib.Path) -> None:
    """Write a chunk to the temp file, reporting disk errors as SourceError.

    Args:
        out: the open temp file.
        chunk: the bytes to append.
        folder: the cache folder (for the message).

    Raises:
        SourceError: when the disk write fails (full disk, permissions).
    """
    try:
        out.write(chunk)
    except OSError as exc:
        raise SourceError(f"cannot write to the cache folder {folder}: {exc}") from None


def _download(client: IndexClient, sdist: SdistFile, target: pathlib.Path, progress: bool) -> tuple[pathlib.Path, str]:
    """Stream an sdist into ``target`` via a temp file and an atomic rename.

    Args:
        client: the HTTP client.
        sdist: what to download.
        target: the final cache path.
        progress: draw a transient progress bar on stderr.

    Returns:
        ``(path, sha256)``: where the file is (``target``, or a private temporary folder when
        the cache folder cannot be written) and the digest of the downloaded bytes.

    Raises:
        SourceError: on network errors or when the published sha256 does not match.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".part", dir=target.parent
        )
    except OSError:  # a read-only cache folder: no caching, the download goes to a private folder
        target = private_folder() / target.name
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = pathlib.Path(tmp_name)
    digest = hashlib.sha256()
    bar = None
    stopped = SourceError(f"the download of {sdist.filename} was stopped")
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                if _STOP.is_set():
                    raise stopped
                with client.open(sdist.url) as response:
                    length = response.headers.get("Content-Length")
                    total = int(length) if length and length.isdigit() else sdist.size
                    if progress:
                        from auditor.source.progress import progress_bar

                        bar = progress_bar(f"downloading {sdist.filename}", total)
                        bar[0].start()
                    for chunk in iter(lambda: response.read(_CHUNK), b""):
                        if _STOP.is_set():
                            raise stopped
                        _write(out, chunk, target.parent)
                        digest.update(chunk)
                        if bar is not None:
                            bar[0].advance(bar[1], len(chunk))
            except urllib.error.HTTPError as exc:
                raise SourceError(
                    f"cannot reach the package index ({client.shown_index}): "
                    f"HTTP {exc.code} {exc.reason} for {sdist.filename}"
                ) from None
            except (OSError, ValueError) as exc:
                raise SourceError(
                    f"cannot reach the package index ({client.shown_index}): {exc}"
                ) from None
            finally:
                if bar is not None:
                    bar[0].stop()
        actual = digest.hexdigest()
        if sdist.sha256 and actual != sdist.sha256:
            raise SourceError(
                f"downloaded {sdist.filename} does not match the sha256 published by the "
                f"package index (expected {sdist.sha256}, got {actual}); it was deleted"
            )
        os.replace(tmp, target)
    except BaseException:
        unlink_quietly(tmp)
        raise
    return target, actual


def _check_version(version: str, project: str = DEFAULT_PROJECT) -> Version:
    """Parse a user-supplied version.

    Raises:
        SourceError: when it is not a valid PEP 440 version of at most 64 characters (the
            message shows at most 40 of them, escaped).
    """
    text = str(version).strip()
    shown = repr(text) if len(text) <= 40 else repr(text[:37] + "...")
    looks_like_a_path = "/" in text or text.endswith((".tar.gz", ".tgz", ".whl", ".zip"))
    problem = SourceError(f"{shown} is not a valid {PROJECTS.get(project, project)} version (expected e.g. "
                          f"{'0.5.10' if project == 'sglang' else '0.16.0'})"
                          + ("; a folder or an archive is given as PATH, without the option" if looks_like_a_path
                             else ""))
    if not text or len(text) > 64 or not re.fullmatch(r"[0-9A-Za-z.+!_-]+", text):
        raise problem
    try:
        return Version(text)
    except InvalidVersion:
        raise problem from None


def archive_cached(version: str, project: str = DEFAULT_PROJECT, cache_dir: pathlib.Path | None = None) -> bool:
    """Whether :func:`fetch_release` would answer ``version`` from the cache (an archive with
    its sha256 sidecar; for a project read as a wheel, a cached wheel for this Python), without
    reading any file's content: what ``matrix`` says before it starts. A version that is not
    shaped like one is not cached."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return False
    folder = pathlib.Path(cache_dir).expanduser() if cache_dir is not None else archive_cache_dir()
    wheels = project in WHEEL_FALLBACK
    try:  # by the version in each file's name: 0.16 names the release the index files as 0.16.0
        for path in folder.glob(f"{project}-*"):
            name = path.name[len(project) + 1:]
            if name.endswith(".tar.gz"):
                text, sdist = name[:-len(".tar.gz")], True
            elif wheels and name.endswith(".whl"):
                text, sdist = name.split("-", 1)[0], False
            else:
                continue
            try:
                same = Version(text) == wanted
            except InvalidVersion:
                continue
            if same and (is_file(path) or not sdist) and read_sidecar(path) is not None:
                return True
    except OSError:
        return False
    return False

def fetch_release(
    version: str,
    *,
    progress: bool = True,
    cache_dir: pathlib.Path | None = None,
    unverified: bool | None = None,
    project: str = DEFAULT_PROJECT,
) -> pathlib.Path:
    """Return the local path of the vLLM sdist ``vllm-<version>.tar.gz``, fetching it
    into the cache when needed.

    The package index is the one pip is configured to use -- ``PIP_INDEX_URL``, else
    ``index-url`` from pip's configuration files, else pip's built-in default (see
    :func:`index_url`); pip's ``cert`` (or ``PIP_CERT``), ``proxy`` and ``timeout``
    settings are honoured. The index is queried through its PEP 691 JSON simple API
    (``<index>/vllm/``), with a PEP 503 HTML fallback.

    A cached archive with a ``<file>.sha256`` sidecar is verified against that sidecar
    and returned without any network access. A cached archive without a sidecar is
    verified once against the sha256 the index publishes, and the sidecar is written. A
    download goes to a temp file in the cache folder, is checked against the published
    sha256 and is then atomically renamed into place.

    For ``project="sglang"`` the same holds for ``sglang-<version>.tar.gz``; when the index
    lists no sdist for the release, the wheel that installs on this interpreter and platform
    (see :func:`release_wheels`) is fetched instead, with the same sha256 checks and cache.

    Args:
        version: the vLLM release, e.g. ``"0.16.0"``.
        progress: draw a transient download progress bar on stderr.
        cache_dir: the folder holding cached archives; defaults to
            :func:`archive_cache_dir`. When it cannot be written, the archive is downloaded
            to a private temporary folder removed at exit (no caching).
        unverified: accept a release whose index entry publishes no sha256 (default:
            :func:`allow_unverified`). Such an archive gets no sidecar, so it is never
            trusted offline, and :func:`recorded_sha256` is None for it.
        project: the distribution, ``vllm`` (default) or ``sglang`` (:data:`PROJECTS`).

    Returns:
        The path of the verified ``vllm-<version>.tar.gz`` in the cache.

    Raises:
        SourceError: for an invalid version; a release that does not exist or has no
            sdist (the message lists the nearest releases that have one); an unreachable
            index ("cannot reach the package index (<url>): <reason>"); a sha256
            mismatch of a download (the file is deleted); an index entry without a sha256
            when unverified archives are not allowed.
    """
    if project not in PROJECTS:
        raise SourceError(f"unknown project {project!r} (one of {', '.join(PROJECTS)})")
    display = PROJECTS[project]
    wanted = _check_version(version, project)
    folder = pathlib.Path(cache_dir).expanduser() if cache_dir is not None else archive_cache_dir()
    guess = folder / f"{project}-{wanted}.tar.gz"
    recorded = read_sidecar(guess) if is_file(guess) else None
    if recorded is not None:
        if has_digest(guess, recorded):
            return guess
        drop_cached(guess)  # corrupted since it was verified: fetch it again
    if project in WHEEL_FALLBACK:
        cached = cached_wheel(folder, project, wanted)
        if cached is not None:
            return cached

    client = IndexClient(index_url())
    files, versions = project_files(client, project)
    sdists, known = sdist_files(files, project), all_versions(files, versions, project)
    matches = [s for s in sdists if s.version == wanted]
    if not matches and project in WHEEL_FALLBACK:
        matches = release_wheels(files, project, wanted)
    if not matches:
        available = sorted({s.version for s in sdists if not s.yanked})
        if project in WHEEL_FALLBACK:  # a release with only a wheel for this Python is audited too
            available = sorted(set(available) | {v for v in known if release_wheels(files, project, v)})
        nearest = ", ".join(str(v) for v in nearest_versions(wanted, available))
        if wanted in known and project in WHEEL_FALLBACK:
            problem = (
                f"{display} {version} has neither a source archive (sdist) nor a wheel for this "
                f"platform's Python on the package index ({client.shown_index})"
            )
        elif wanted in known:
            problem = (
                f"{display} {version} has no source archive (sdist) on the package index "
                f"({client.shown_index}), only wheels"
            )
        else:
            problem = f"{display} {version} is not on the package index ({client.shown_index})"
        if wanted in known and project not in WHEEL_FALLBACK:  # a wheel is read in place, given as a PATH
            problem += (f"; download its wheel (pip download {project}=={version} --no-deps --only-binary :all:) "
                        "and give the .whl file as the PATH, or pick another release")
        what = "an sdist or a wheel for this Python" if project in WHEEL_FALLBACK else "an sdist"
        hint = f"; nearest releases with {what}: {nearest}" if nearest else ""
        raise SourceError(problem + hint)
    sdist = next((s for s in matches if not s.yanked), matches[0])
    target = folder / sdist.filename
    if sdist.sha256 is None and not (allow_unverified() if unverified is None else unverified):
        raise SourceError(
            f"the package index ({client.shown_index}) publishes no sha256 for {sdist.filename}, so it "
            "cannot be verified; refused (eagle-audit --allow-unverified ... uses it anyway, marked unverified)"
        )

    if is_file(target):
        recorded = read_sidecar(target)
        actual = sha256_file(target)
        expected = recorded or sdist.sha256
        if expected is None:
            return target  # unverified, as allowed above: no sidecar, so never trusted offline
        if actual == expected:
            write_sidecar(target, actual)
            return target
        drop_cached(target)  # stale or corrupt cache entry: download afresh

    target, digest = _download(client, sdist, target, progress)
    if sdist.sha256 is not None:
        write_sidecar(target, digest)
    return target


# ------------------------------------------------------------- other projects' wheels


def _pure_wheels(files: list[dict], project: str) -> list[SdistFile]:
    """The pure-Python wheels (``<project>-X-py3-none-any.whl``) of an index page, by version."""
    found = [w for w, tags in wheel_files(files, project)
             if any(t.abi == "none" and t.platform == "any" and t.interpreter.startswith("py3") for t in tags)]
    found.sort(key=lambda f: f.version)
    return found


def fetch_newest_wheel(
    project: str,
    specifier: str,
    *,
    progress: bool = True,
    cache_dir: pathlib.Path | None = None,
) -> tuple[pathlib.Path, str]:
    """The newest release of ``project`` that satisfies ``specifier`` (a PEP 440 specifier set
    such as ``"<5,>=4.56.0"``; pre-releases only when it names one), as its pure-Python wheel
    fetched through pip's configured index like :func:`fetch_release`: sha256-checked against
    the index, cached in the archive cache with a ``.sha256`` sidecar, never executed.

    When the index cannot be reached, the newest matching wheel already in the cache (verified
    against its sidecar) is used instead.

    Returns:
        ``(path of the wheel, version)``.

    Raises:
        SourceError: a malformed specifier, no release of ``project`` satisfies it, or the
            index cannot be reached and no cached wheel matches.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        spec = SpecifierSet(specifier)
    except InvalidSpecifier:
        raise SourceError(f"{project} requirement {specifier!r} is not a version specifier") from None
    folder = pathlib.Path(cache_dir).expanduser() if cache_dir is not None else archive_cache_dir()
    try:
        client = IndexClient(index_url())
        files, _ = project_files(client, project)
    except SourceError as exc:
        cached = _cached_wheels(folder, project, spec)
        if cached:
            return cached[-1]
        raise exc
    wheels = [w for w in _pure_wheels(files, project) if not w.yanked and spec.contains(w.version)]
    if not wheels:
        raise SourceError(f"no {project} release on the package index ({client.shown_index}) satisfies "
                          f"{specifier} with a pure-Python wheel")
    wheel = wheels[-1]
    target = folder / wheel.filename
    if target.is_file():
        recorded = read_sidecar(target)
        expected = recorded or wheel.sha256
        if expected is None:
            write_sidecar(target, sha256_file(target))
            return target, str(wheel.version)
        if has_digest(target, expected):
            if recorded != expected:
                write_sidecar(target, expected)
            return target, str(wheel.version)
        drop_cached(target)
    digest = _download(client, wheel, target, progress)
    write_sidecar(target, digest)
    return target, str(wheel.version)


def check_wheel_release(project: str, version: str, *, cache_dir: pathlib.Path | None = None,
                        accepts: str | None = None) -> str | None:
    """Whether release ``version`` of ``project`` can be fetched as a pure-Python wheel, checked
    without downloading it: a verified wheel of it in the archive cache, else one read of the
    project's page on pip's configured index (the page :func:`fetch_newest_wheel` reads).

    Returns:
        None when the release is there (or when the index cannot be reached and nothing is
        cached: the fetch, if a verdict ever needs it, will say so); else a one-line reason
        naming the nearest releases the index has (with ``accepts``, a version specifier such as
        the tree's own requirement ``<5,>=4.56.0``: only releases it admits).

    Raises:
        SourceError: ``version`` is not a version.
    """
    try:
        wanted = Version(version)
    except InvalidVersion:
        raise SourceError(f"{version!r} is not a {project} release version") from None
    from packaging.specifiers import SpecifierSet

    folder = pathlib.Path(cache_dir).expanduser() if cache_dir is not None else archive_cache_dir()
    if _cached_wheels(folder, project, SpecifierSet(f"=={wanted}")):
        return None
    try:
        client = IndexClient(index_url())
        files, _ = project_files(client, project)
    except SourceError:
        return None
    have = sorted({w.version for w in _pure_wheels(files, project) if not w.yanked})
    if wanted in have:
        return None
    label = ""
    if accepts:
        from packaging.specifiers import InvalidSpecifier

        try:
            spec = SpecifierSet(accepts)
        except InvalidSpecifier:
            spec = None
        if spec is not None:
            have = [v for v in have if spec.contains(v, prereleases=True)]
            label = f" that the tree accepts ({project}{accepts})"
    near = ", ".join(str(v) for v in nearest_versions(wanted, have))
    return (f"{project} {version} is not on the package index ({client.shown_index}) as a pure-Python wheel"
            + (f"; nearest{label}: {near}" if near else (f"; none{label} is there" if label else "")))


def _cached_wheels(folder: pathlib.Path, project: str, spec) -> list[tuple[pathlib.Path, str]]:
    """Verified cached wheels of ``project`` that satisfy ``spec``, oldest first."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    out = []
    try:
        paths = list(folder.glob("*.whl"))
    except OSError:
        return []
    for path in paths:
        try:
            name, version, _, _ = parse_wheel_filename(path.name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        recorded = read_sidecar(path)
        if canonicalize_name(name) == canonicalize_name(project) and spec.contains(version) and recorded \
                and has_digest(path, recorded):
            out.append((version, path))
    return [(p, str(v)) for v, p in sorted(out)]

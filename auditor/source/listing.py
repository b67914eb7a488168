"""What the package index lists for a project: its simple page (PEP 691 JSON or PEP 503 HTML) read
into files, the release sdists and wheels among them, the releases nearest a version that is not
there, and :func:`list_releases` (an :class:`IndexListing`)."""

from __future__ import annotations

import bisect
import json
import pathlib
import re
import urllib.error
import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from auditor.model.errors import SourceError
from auditor.source.digests import has_digest, is_file, read_sidecar
from auditor.source.pipconfig import IndexClient, index_url

DEFAULT_PROJECT = "vllm"
#: The projects that can be fetched, and how messages name them.
PROJECTS = {"vllm": "vLLM", "sglang": "SGLang"}
#: The projects whose releases may be fetched as a wheel when the index has no sdist (an
#: SGLang wheel is ~40 MB; vLLM wheels are 300-500 MB and are never fetched).
WHEEL_FALLBACK = frozenset({"sglang"})
# The PEP 691 media types are "application/vnd.<index-api>.simple.v1+json|html"; the
# vendor token is assembled so that no index-related name appears literally in the code.
_VENDOR = "vnd." + "py" + "pi"
_JSON_ACCEPT = (
    f"application/{_VENDOR}.simple.v1+json, "
    f"application/{_VENDOR}.simple.v1+html;q=0.2, text/html;q=0.01"
)

_NEAREST = 5


# ---------------------------------------------------------------------- index pages


@dataclass(frozen=True)
class SdistFile:
    """One ``vllm-X.tar.gz`` file listed by the index.

    Attributes:
        filename: the file name, e.g. ``"vllm-0.16.0.tar.gz"``.
        version: the parsed release version.
        url: the absolute download URL.
        sha256: the published sha256 hex digest, or None when the index gives none.
        size: the published size in bytes, or None.
        yanked: whether the release file was yanked.
    """

    filename: str
    version: Version
    url: str
    sha256: str | None
    size: int | None
    yanked: bool


class _LinkParser(HTMLParser):
    """Collect ``<a href>`` links of a PEP 503 HTML simple page."""

    def __init__(self) -> None:
        """Start with no links."""
        super().__init__()
        self.links: list[dict[str, str | None]] = []
        self._current: dict[str, str | None] | None = None

    def handle_starttag(self, tag, attrs) -> None:
        """Start recording an anchor."""
        if tag == "a":
            self._current = dict(attrs)
            self._current["_text"] = ""

    def handle_data(self, data) -> None:
        """Accumulate the anchor text (the file name)."""
        if self._current is not None:
            self._current["_text"] = (self._current["_text"] or "") + data

    def handle_endtag(self, tag) -> None:
        """Finish the current anchor."""
        if tag == "a" and self._current is not None:
            self.links.append(self._current)
            self._current = None


def _files_from_html(text: str, base: str) -> list[dict]:
    """Turn a PEP 503 HTML page into PEP 691-style file dicts.

    Args:
        text: the HTML page.
        base: the page URL, to resolve relative links.

    Returns:
        A list of ``{"filename", "url", "hashes", "yanked"}`` dicts.
    """
    parser = _LinkParser()
    parser.feed(text)
    files = []
    for link in parser.links:
        href = link.get("href")
        if not href:
            continue
        url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
        hashes = {}
        if "=" in fragment:
            algo, _, digest = fragment.partition("=")
            hashes[algo] = digest
        filename = (link.get("_text") or "").strip() or urllib.parse.unquote(
            url.rsplit("/", 1)[-1]
        )
        files.append(
            {
                "filename": filename,
                "url": url,
                "hashes": hashes,
                "yanked": "data-yanked" in link,
            }
        )
    return files


def project_files(client: IndexClient, project: str = DEFAULT_PROJECT) -> tuple[list[dict], list[str]]:
    """Fetch the index's page for a project (vllm by default).

    Args:
        client: the HTTP client bound to the configured index.
        project: the project whose page to read.

    Returns:
        ``(files, versions)``: PEP 691 file dicts with absolute URLs, and the version
        strings the index lists (may be empty for HTML pages or old JSON pages).

    Raises:
        SourceError: when the index cannot be reached or answers with garbage.
    """
    page = f"{client.index}/{project}/"
    shown = client.shown_index
    try:
        with client.open(page, accept=_JSON_ACCEPT) as response:
            body = response.read()
            content_type = response.headers.get("Content-Type", "") or ""
            final_url = response.geturl() or page
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise SourceError(f"the package index ({shown}) does not list {project}") from None
        raise SourceError(
            f"cannot reach the package index ({shown}): HTTP {exc.code} {exc.reason}"
        ) from None
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot reach the package index ({shown}): {exc}") from None
    if "json" in content_type:
        try:
            data = json.loads(body)
            files = [dict(f) for f in data["files"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceError(
                f"the package index ({shown}) sent an unreadable page for {project}: {exc}"
            ) from None
        for entry in files:
            entry["url"] = urllib.parse.urljoin(final_url, str(entry.get("url", "")))
        versions = [str(v) for v in data.get("versions", [])]
        return files, versions
    return _files_from_html(body.decode("utf-8", errors="replace"), final_url), []


def sdist_files(files: list[dict], project: str = DEFAULT_PROJECT) -> list[SdistFile]:
    """Keep the ``<project>-X.tar.gz`` files of an index page.

    Args:
        files: PEP 691 file dicts.
        project: the distribution name (vllm by default).

    Returns:
        The sdists, sorted by version.
    """
    found: list[SdistFile] = []
    for entry in files:
        filename = str(entry.get("filename", ""))
        if not filename.endswith(".tar.gz") or "/" in filename or "\\" in filename:
            continue
        try:
            name, version = parse_sdist_filename(filename)
        except (InvalidSdistFilename, InvalidVersion):
            continue
        if canonicalize_name(name) != project:
            continue
        hashes = entry.get("hashes") or {}
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        size = entry.get("size")
        found.append(
            SdistFile(
                filename=filename,
                version=version,
                url=str(entry["url"]),
                sha256=str(sha).lower() if sha else None,
                size=int(size) if isinstance(size, int) else None,
                yanked=bool(entry.get("yanked")),
            )
        )
    found.sort(key=lambda f: f.version)
    return found


def all_versions(files: list[dict], versions: list[str], project: str = DEFAULT_PROJECT) -> set[Version]:
    """Collect every release version the index mentions (any file type).

    Args:
        files: PEP 691 file dicts.
        versions: the page's ``versions`` list (may be empty).

    Returns:
        The parsed versions.
    """
    result: set[Version] = set()
    for text in versions:
        try:
            result.add(Version(text))
        except InvalidVersion:
            pass
    for entry in files:
        match = re.match(rf"(?i){re.escape(project)}-([^-]+?)(?:\.tar\.gz|\.zip|-)", str(entry.get("filename")))
        if match:
            try:
                result.add(Version(match.group(1)))
            except InvalidVersion:
                pass
    return result


def nearest_versions(wanted: Version, available: list[Version], count: int = _NEAREST) -> list[Version]:
    """Pick the releases closest to ``wanted`` in version order (for "did you mean" hints).

    Args:
        wanted: the requested version.
        available: sorted, distinct candidate versions.
        count: how many to return.

    Returns:
        Up to ``count`` versions around ``wanted``, sorted ascending.
    """
    if not available:
        return []
    pos = bisect.bisect_left(available, wanted)
    lo, hi = pos - 1, pos
    picked: list[Version] = []
    while len(picked) < count and (lo >= 0 or hi < len(available)):
        # alternate, preferring the side whose neighbour shares more of the release tuple
        take_hi = hi < len(available) and (
            lo < 0 or _closeness(available[hi], wanted) >= _closeness(available[lo], wanted)
        )
        if take_hi:
            picked.append(available[hi])
            hi += 1
        else:
            picked.append(available[lo])
            lo -= 1
    return sorted(picked)


def _closeness(candidate: Version, wanted: Version) -> tuple[int, int]:
    """Score how close two versions are (longer shared release prefix is closer)."""
    shared = 0
    for a, b in zip(candidate.release, wanted.release):
        if a != b:
            break
        shared += 1
    index = shared if shared < min(len(candidate.release), len(wanted.release)) else -1
    gap = abs(candidate.release[index] - wanted.release[index]) if index >= 0 else 0
    return shared, -gap


def release_sdists(client: IndexClient, project: str = DEFAULT_PROJECT) -> tuple[list[SdistFile], set[Version]]:
    """Fetch and parse the index page for ``project`` (vllm by default).

    Returns:
        The sdists listed, and every version the index knows.

    Raises:
        SourceError: when the index cannot be reached.
    """
    files, versions = project_files(client, project)
    return sdist_files(files, project), all_versions(files, versions, project)


def wheel_files(files: list[dict], project: str):
    """``(wheel record, its tags)`` for every wheel of ``project`` an index page lists (PEP 691
    file dicts; names with a path separator or that do not parse are passed over)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    for entry in files:
        filename = str(entry.get("filename", ""))
        if not filename.endswith(".whl") or "/" in filename or "\\" in filename:
            continue
        try:
            name, version, _, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if canonicalize_name(name) != canonicalize_name(project):
            continue
        hashes = entry.get("hashes") or {}
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        size = entry.get("size")
        yield SdistFile(filename=filename, version=version, url=str(entry["url"]),
                        sha256=str(sha).lower() if sha else None,
                        size=int(size) if isinstance(size, int) else None,
                        yanked=bool(entry.get("yanked"))), tags


def release_wheels(files: list[dict], project: str, wanted: Version) -> list[SdistFile]:
    """The wheels of release ``wanted`` that install on this interpreter and platform, best
    first (in the order of :func:`packaging.tags.sys_tags`: a wheel for this exact CPython ABI
    and platform before ``py3-none-any``).

    Args:
        files: PEP 691 file dicts.
        project: the distribution name.
        wanted: the release.

    Returns:
        The compatible wheels (same record as an sdist), best first; empty when none fits.
    """
    from packaging.tags import sys_tags

    rank = {tag: i for i, tag in enumerate(sys_tags())}
    found: list[tuple[int, SdistFile]] = []
    for wheel, tags in wheel_files(files, project):
        if wheel.version != wanted:
            continue
        best = min((rank[t] for t in tags if t in rank), default=None)
        if best is not None:
            found.append((best, wheel))
    found.sort(key=lambda x: (x[1].yanked, x[0]))
    return [w for _, w in found]


def cached_wheel(folder: pathlib.Path, project: str, wanted: Version) -> pathlib.Path | None:
    """A wheel of release ``wanted`` already in the cache, verified against its sidecar and
    installable here (best first, as :func:`release_wheels` ranks them), or None."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    rank = {tag: i for i, tag in enumerate(sys_tags())}
    cands = []
    try:
        listing = sorted(folder.glob(f"{project}-*.whl"))
    except OSError:
        return None
    for path in listing:
        try:
            name, version, _, tags = parse_wheel_filename(path.name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        best = min((rank[t] for t in tags if t in rank), default=None)
        if canonicalize_name(name) == project and version == wanted and best is not None:
            cands.append((best, path))
    for _, path in sorted(cands):
        recorded = read_sidecar(path)
        if recorded is not None and is_file(path) and has_digest(path, recorded):
            return path
    return None


@dataclass(frozen=True)
class IndexListing:
    """What the package index lists for vllm, as version strings sorted by
    :class:`packaging.version.Version`.

    Attributes:
        sdists: the releases with a source archive that is not yanked.
        known: every release version the index mentions, whatever its files.
        yanked: the releases whose only source archives are yanked.
        sizes: ``(version, bytes)`` of the file :func:`fetch_release` would download for each
            release of ``sdists`` whose size the index publishes.
    """

    sdists: tuple[str, ...]
    known: tuple[str, ...]
    yanked: tuple[str, ...] = ()
    sizes: tuple[tuple[str, int], ...] = ()

    def size(self, version: str) -> int | None:
        """The published size in bytes of release ``version``'s archive, or None."""
        return dict(self.sizes).get(version)


def list_releases(project: str = DEFAULT_PROJECT) -> IndexListing:
    """Read the ``project`` page (vllm by default) of pip's index (the one :func:`index_url`
    resolves) once.

    Returns:
        The :class:`IndexListing`; for a project fetched as a wheel when it has no sdist
        (:data:`WHEEL_FALLBACK`), ``sdists`` also lists the releases with a wheel for this
        Python (the releases :func:`fetch_release` can read).

    Raises:
        SourceError: when the index cannot be reached or does not list the project.
    """
    client = IndexClient(index_url())
    files, versions = project_files(client, project)
    sdists, known = sdist_files(files, project), all_versions(files, versions, project)
    if project in WHEEL_FALLBACK:
        # releases without an sdist can still be read from the wheel for this Python
        have = {s.version for s in sdists}
        for v in sorted(known - have):
            sdists += release_wheels(files, project, v)[:1]
    ok = {s.version for s in sdists if not s.yanked}
    yanked = {s.version for s in sdists if s.yanked} - ok
    sizes: dict[str, int] = {}
    for s in sdists:  # the first file of a release that is not yanked: the one fetch_release takes
        if not s.yanked and s.size is not None:
            sizes.setdefault(str(s.version), s.size)
    return IndexListing(
        sdists=tuple(str(v) for v in sorted(ok)),
        known=tuple(str(v) for v in sorted(set(known) | ok | yanked)),
        yanked=tuple(str(v) for v in sorted(yanked)),
        sizes=tuple(sorted(sizes.items(), key=lambda kv: Version(kv[0]))),
    )


def list_sdist_versions() -> list[str]:
    """List the vLLM releases that publish a source archive on pip's index.

    Uses the index resolved by :func:`index_url`. Yanked files are left out.

    Returns:
        Version strings, sorted by :class:`packaging.version.Version`, without duplicates.

    Raises:
        SourceError: when the index cannot be reached or does not list vllm.
    """
    return list(list_releases().sdists)

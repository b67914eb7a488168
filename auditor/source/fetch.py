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

import base64
import bisect
import hashlib
import json
import os
import pathlib
import re
import ssl
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging.utils import (
    InvalidSdistFilename,
    canonicalize_name,
    parse_sdist_filename,
)
from packaging.version import InvalidVersion, Version

from auditor.model.errors import SourceError

__all__ = [
    "fetch_release",
    "list_releases",
    "list_sdist_versions",
    "nearest_versions",
    "recorded_sha256",
    "index_url",
    "archive_cache_dir",
    "IndexListing",
    "allow_unverified",
    "SdistFile",
    "fetch_newest_wheel",
]

#: Environment variable that lets an archive whose index entry has no sha256 be used (set by
#: ``eagle-audit --allow-unverified``; read here so that worker processes see it too).
ALLOW_UNVERIFIED_ENV = "EAGLE_AUDIT_ALLOW_UNVERIFIED"

#: Suffix added to the label of a source read from an archive that could not be verified.
UNVERIFIED = "unverified: the package index publishes no sha256 for it"

_PROJECT = "vllm"
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
_DEFAULT_TIMEOUT = 15.0
_NEAREST = 5


# ----------------------------------------------------------------- pip configuration


def _pip_config() -> dict[str, str]:
    """Load pip's merged configuration (files and ``PIP_*`` environment variables).

    Memoised in this process, and across processes by :func:`_pip_config_memo` (importing pip's
    configuration module costs more than a warm scan): a stored answer is used only while the
    environment pip reads and every configuration file pip would consult are as they were.

    Returns:
        pip's ``key -> value`` mapping (keys like ``global.index-url`` or
        ``:env:.index-url``); empty when pip's internals are unavailable or changed.
    """
    return dict(_pip_memo()[0])


#: This process's answers of :func:`_pip_config_memo`, by the environment they were read under.
_PIP_MEMO: dict[tuple, tuple[dict[str, str], str | None]] = {}


def _pip_env() -> tuple:
    """The environment variables pip's configuration depends on, sorted."""
    return tuple(sorted((k, v) for k, v in os.environ.items()
                        if k.startswith(("PIP_", "XDG_")) or k in _PIP_CONFIG_ENV))


def _pip_memo() -> tuple[dict[str, str], str | None]:
    """``(configuration, default index)`` under the current environment (see :func:`_pip_config`)."""
    env = _pip_env()
    if env not in _PIP_MEMO:
        _PIP_MEMO[env] = _pip_config_memo()
    return _PIP_MEMO[env]


#: Environment variables pip's configuration depends on besides ``PIP_*`` (where its files are).
_PIP_CONFIG_ENV = ("HOME", "USERPROFILE", "APPDATA", "PROGRAMDATA", "ALLUSERSPROFILE", "VIRTUAL_ENV")

#: A file changed less than this many seconds before it was looked at may change again within
#: the same timestamp tick unseen: a configuration read then is not stored.
_RACY_SECONDS = 2.0


def _stat_stamp(path: str) -> list[int] | None:
    """``[size, mtime_ns, ctime_ns, inode, device]`` of ``path`` (symbolic links followed), None
    when it does not exist or cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _pip_config_memo() -> tuple[dict[str, str], str | None]:
    """pip's configuration and its built-in default index, read with pip's own ``Configuration``
    on a miss and stored in the cache folder (with the ``results`` of :mod:`auditor.cache`) with the
    files pip said it consults.

    The entry's key covers every environment variable pip's configuration reads (``PIP_*``,
    ``XDG_*``, the home and profile folders), ``sys.prefix`` (the site file) and the files of pip
    itself (size, mtime, ctime, inode: another pip is another key). On a hit, every candidate
    file pip listed (present or not) must have the same ``size, mtime_ns, ctime_ns, inode,
    device`` as when it was read: a write to a file changes its ctime, which no program can set
    back, so an edited, replaced, created or removed configuration file is always a miss. A
    configuration read while one of its files had changed in the last two seconds is not stored
    (a change within the same timestamp tick would go unseen)."""
    import importlib.util
    import sys
    import time

    from auditor.cache import Store
    from auditor.cache import key as cache_key

    try:
        spec = importlib.util.find_spec("pip")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return {}, None
    pip_dir = list(spec.submodule_search_locations)[0]
    env = list(_pip_env())
    pip_files = [(f, _stat_stamp(os.path.join(pip_dir, f)))
                 for f in ("__init__.py", os.path.join("_internal", "configuration.py"))]
    store = Store("results")  # a small derived entry, pruned and cleared with the scan results
    k = cache_key("pip-config", env, sys.prefix, pip_dir, pip_files)
    entry = store.get(k, dict, lambda e: isinstance(e.get("files"), list) and isinstance(e.get("config"), dict))
    if entry is not None and all(isinstance(f, list) and len(f) == 2 and _stat_stamp(f[0]) == f[1]
                                 for f in entry["files"]):
        return dict(entry["config"]), entry.get("default_index")
    try:
        from pip._internal.configuration import Configuration

        config = Configuration(isolated=False)
        files = [f for _, paths in config.iter_config_files() for f in paths]
        stamps = [[f, _stat_stamp(f)] for f in files]
        config.load()
        out = {str(k): str(v) for k, v in config.items()}
    except Exception:  # pip internals are not a stable API
        return {}, None
    default = _pip_default_index_uncached()
    now = time.time_ns()
    if all(s is None or now - max(s[1], s[2]) > _RACY_SECONDS * 1e9 for _, s in stamps):
        store.put(k, {"files": stamps, "config": out, "default_index": default})
    return out, default


def _pip_default_index_uncached() -> str | None:
    """pip's built-in default index (``pip._internal.models.index.PyPI.simple_url``), or None."""
    try:
        from pip._internal.models.index import PyPI

        return str(PyPI.simple_url)
    except Exception:
        return None


def _pip_default_index() -> str | None:
    """pip's built-in default index, memoised with the configuration (see :func:`_pip_config`)."""
    return _pip_memo()[1] or _pip_default_index_uncached()


def _pip_setting(name: str, config: dict[str, str] | None = None) -> str | None:
    """Look a pip option up the way ``pip download`` would see it.

    Precedence: ``PIP_<NAME>`` environment variable, then the ``download``, ``install``
    and ``global`` sections of pip's configuration files.

    Args:
        name: the option name, e.g. ``"index-url"`` or ``"cert"``.
        config: pip's configuration as returned by :func:`_pip_config` (loaded if None).

    Returns:
        The configured value, or None.
    """
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env:
        return env.strip()
    if config is None:
        config = _pip_config()
    for section in (":env:", "download", "install", "global"):
        value = config.get(f"{section}.{name}")
        if value:
            return value.strip()
    return None


def index_url() -> str:
    """Return the package index URL pip is configured to use.

    Resolution order, mirroring pip:

    1. the ``PIP_INDEX_URL`` environment variable;
    2. ``index-url`` in pip's configuration files (``download``, ``install`` then
       ``global`` sections), read with ``pip._internal.configuration.Configuration``;
    3. pip's built-in default, ``pip._internal.models.index.PyPI.simple_url``.

    Returns:
        The index's simple-API base URL, without a trailing slash.

    Raises:
        SourceError: when no index is configured and pip's default cannot be read.
    """
    url = _pip_setting("index-url")
    if not url:
        url = _pip_default_index()
        if not url:
            raise SourceError("no package index configured: set PIP_INDEX_URL or pip's index-url")
    return url.split()[0].rstrip("/")


def _redact(url: str) -> str:
    """Hide the password of a URL's user-info for display.

    Args:
        url: any URL.

    Returns:
        The URL with ``user:password@`` shown as ``user:****@``.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}:****@{host}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _timeout(config: dict[str, str]) -> float:
    """Return pip's configured network timeout in seconds (default 15)."""
    for name in ("timeout", "default-timeout"):
        value = _pip_setting(name, config)
        if value:
            try:
                return float(value)
            except ValueError:
                pass
    return _DEFAULT_TIMEOUT


def archive_cache_dir() -> pathlib.Path:
    """Return the folder where release archives are cached.

    Returns:
        ``$EAGLE_AUDIT_CACHE_DIR/archives`` when that variable is set (it replaces the
        whole cache root), else ``platformdirs.user_cache_path("eagle-audit")/archives``.
    """
    override = os.environ.get("EAGLE_AUDIT_CACHE_DIR")
    if override:
        return pathlib.Path(override).expanduser() / "archives"
    import platformdirs

    return platformdirs.user_cache_path("eagle-audit") / "archives"


# ----------------------------------------------------------------------- HTTP client


class _Client:
    """A tiny urllib client honouring pip's index URL, ``cert``, ``proxy`` and timeout.

    Args:
        index: the index base URL (may carry ``user:password@`` credentials, which are
            sent as HTTP Basic auth to that host only).
    """

    def __init__(self, index: str) -> None:
        """Build the opener; see the class docstring."""
        config = _pip_config()
        self.index = index
        self.shown_index = _redact(index)
        self.timeout = _timeout(config)
        cafile = _pip_setting("cert", config)
        if cafile:
            try:
                context = ssl.create_default_context(cafile=cafile)
            except (OSError, ssl.SSLError) as exc:
                raise SourceError(f"cannot load pip's cert bundle {cafile}: {exc}") from None
        else:
            context = ssl.create_default_context()
            try:  # pip's own default CA bundle
                from pip._vendor import certifi

                context.load_verify_locations(cafile=certifi.where())
            except Exception:
                pass
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.HTTPSHandler(context=context)
        ]
        proxy = _pip_setting("proxy", config)
        if proxy:
            handlers.append(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
        self._opener = urllib.request.build_opener(*handlers)
        parts = urllib.parse.urlsplit(index)
        self._auth_host = parts.hostname
        self._auth: str | None = None
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._auth = f"Basic {token}"

    def open(self, url: str, accept: str | None = None):
        """Open a URL, adding Basic auth for the index host when configured.

        Args:
            url: the URL to GET (``http``, ``https`` or ``file``).
            accept: an optional ``Accept`` header.

        Returns:
            The urllib response object.

        Raises:
            SourceError: "cannot reach the package index" on network or HTTP errors.
        """
        parts = urllib.parse.urlsplit(url)
        headers = {"User-Agent": "eagle-audit"}
        if accept:
            headers["Accept"] = accept
        if parts.username is not None or parts.password is not None:
            netloc = parts.hostname or ""
            if parts.port:
                netloc = f"{netloc}:{parts.port}"
            url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
        if self._auth and parts.hostname == self._auth_host:
            headers["Authorization"] = self._auth
        if parts.scheme == "file":
            local = pathlib.Path(urllib.request.url2pathname(parts.path))
            if local.is_dir():
                url = (local / "index.html").as_uri()
        request = urllib.request.Request(url, headers=headers)
        try:
            return self._opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError:
            raise  # the caller reports HTTP statuses with more context
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise SourceError(
                f"cannot reach the package index ({self.shown_index}): {reason}"
            ) from None


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


def _project_files(client: _Client, project: str = _PROJECT) -> tuple[list[dict], list[str]]:
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


def _sdists(files: list[dict], project: str = _PROJECT) -> list[SdistFile]:
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


def _all_versions(files: list[dict], versions: list[str], project: str = _PROJECT) -> set[Version]:
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


def _release_sdists(client: _Client, project: str = _PROJECT) -> tuple[list[SdistFile], set[Version]]:
    """Fetch and parse the index page for ``project`` (vllm by default).

    Returns:
        The sdists listed, and every version the index knows.

    Raises:
        SourceError: when the index cannot be reached.
    """
    files, versions = _project_files(client, project)
    return _sdists(files, project), _all_versions(files, versions, project)


def _wheel_files(files: list[dict], project: str):
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


def _wheels(files: list[dict], project: str, wanted: Version) -> list[SdistFile]:
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
    for wheel, tags in _wheel_files(files, project):
        if wheel.version != wanted:
            continue
        best = min((rank[t] for t in tags if t in rank), default=None)
        if best is not None:
            found.append((best, wheel))
    found.sort(key=lambda x: (x[1].yanked, x[0]))
    return [w for _, w in found]


def _cached_wheel(folder: pathlib.Path, project: str, wanted: Version) -> pathlib.Path | None:
    """A wheel of release ``wanted`` already in the cache, verified against its sidecar and
    installable here (best first, as :func:`_wheels` ranks them), or None."""
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
        recorded = _read_sidecar(path)
        if recorded is not None and _is_file(path) and _has_digest(path, recorded):
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


def list_releases(project: str = _PROJECT) -> IndexListing:
    """Read the ``project`` page (vllm by default) of pip's index (the one :func:`index_url`
    resolves) once.

    Returns:
        The :class:`IndexListing`; for a project fetched as a wheel when it has no sdist
        (:data:`WHEEL_FALLBACK`), ``sdists`` also lists the releases with a wheel for this
        Python (the releases :func:`fetch_release` can read).

    Raises:
        SourceError: when the index cannot be reached or does not list the project.
    """
    client = _Client(index_url())
    files, versions = _project_files(client, project)
    sdists, known = _sdists(files, project), _all_versions(files, versions, project)
    if project in WHEEL_FALLBACK:
        # releases without an sdist can still be read from the wheel for this Python
        have = {s.version for s in sdists}
        for v in sorted(known - have):
            sdists += _wheels(files, project, v)[:1]
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


# ------------------------------------------------------------------------ downloads


def _sha256_file(path: pathlib.Path) -> str:
    """Return the sha256 hex digest of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _has_digest(path: pathlib.Path, expected: str) -> bool:
    """True when the file at ``path`` has sha256 ``expected`` (hex).

    The file is hashed, unless this cache folder already recorded (with the ``results`` of
    :mod:`auditor.cache`) that ``path`` had that digest when it had exactly its present
    ``size, mtime_ns, ctime_ns, inode, device``. That is safe for the archives of the private
    cache folder: any write to a file, or a file replaced by another, changes its ctime (and a
    replacement its inode), and no program can set a ctime back, so a file whose stamp is
    unchanged holds the bytes that were hashed. A stamp is recorded only when the file had not
    changed in the two seconds before it was hashed (a write within the same timestamp tick
    would go unseen), and only after the digest matched.
    """
    import time

    from auditor.cache import Store
    from auditor.cache import key as cache_key

    stamp = _stat_stamp(str(path))
    if stamp is None:
        return False
    store = Store("results")  # a small derived entry, pruned and cleared with the scan results
    k = cache_key("verified-digest", str(pathlib.Path(path).absolute()), expected)
    if store.get(k, list) == stamp:
        return True
    if _sha256_file(path) != expected:
        return False
    if time.time_ns() - max(stamp[1], stamp[2]) > _RACY_SECONDS * 1e9 and _stat_stamp(str(path)) == stamp:
        store.put(k, stamp)
    return True


def _sidecar(path: pathlib.Path) -> pathlib.Path:
    """Return the ``<file>.sha256`` sidecar path of a cached archive."""
    return path.with_name(path.name + ".sha256")


def recorded_sha256(archive: pathlib.Path) -> str | None:
    """The sha256 of a cached release archive as recorded when :func:`fetch_release` verified
    it (its ``<file>.sha256`` sidecar), read without hashing the archive again.

    Args:
        archive: a path :func:`fetch_release` returned (any path is accepted).

    Returns:
        The hex digest, or None when no valid digest is recorded (an archive that was not
        fetched, was fetched unverified, or a damaged sidecar).
    """
    return _read_sidecar(pathlib.Path(archive))


def _read_sidecar(path: pathlib.Path) -> str | None:
    """Read the digest recorded in a sidecar (``sha256sum`` format), or None."""
    try:
        text = _sidecar(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    token = text.split()[0].lower() if text else ""
    return token if re.fullmatch(r"[0-9a-f]{64}", token) else None


def allow_unverified() -> bool:
    """True when the user opted in to archives the index publishes no sha256 for
    (``--allow-unverified``, i.e. ``EAGLE_AUDIT_ALLOW_UNVERIFIED=1``)."""
    return os.environ.get(ALLOW_UNVERIFIED_ENV, "") not in ("", "0")


def _write_sidecar(path: pathlib.Path, digest: str) -> None:
    """Atomically write ``<digest>  <filename>`` next to ``path``; a cache folder that cannot be
    written only costs the offline re-check (nothing is raised, no temporary file is left)."""
    target = _sidecar(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(f"{digest}  {path.name}\n")
        os.replace(tmp, target)
    except OSError:
        _unlink(pathlib.Path(tmp))
    except BaseException:
        _unlink(pathlib.Path(tmp))
        raise


def _unlink(path: pathlib.Path) -> None:
    """Delete a file, ignoring its absence (and a cache folder that cannot be written)."""
    try:
        path.unlink()
    except OSError:
        pass


def _private_folder() -> pathlib.Path:
    """A temporary folder for this process (removed at exit): where a download goes when the
    cache folder cannot be written."""
    import atexit
    import shutil

    folder = pathlib.Path(tempfile.mkdtemp(prefix="eagle-audit-archive-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _drop_cached(path: pathlib.Path) -> None:
    """Delete a cached archive and its sidecar."""
    _unlink(path)
    _unlink(_sidecar(path))


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


def _download(client: _Client, sdist: SdistFile, target: pathlib.Path, progress: bool) -> tuple[pathlib.Path, str]:
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
        target = _private_folder() / target.name
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
        _unlink(tmp)
        raise
    return target, actual


def _check_version(version: str, project: str = _PROJECT) -> Version:
    """Parse a user-supplied version.

    Raises:
        SourceError: when it is not a valid PEP 440 version of at most 64 characters (the
            message shows at most 40 of them, escaped).
    """
    text = str(version).strip()
    shown = repr(text) if len(text) <= 40 else repr(text[:37] + "...")
    problem = SourceError(f"{shown} is not a valid {PROJECTS.get(project, project)} version (expected e.g. "
                          f"{'0.5.10' if project == 'sglang' else '0.16.0'})")
    if not text or len(text) > 64 or not re.fullmatch(r"[0-9A-Za-z.+!_-]+", text):
        raise problem
    try:
        return Version(text)
    except InvalidVersion:
        raise problem from None


def archive_cached(version: str, project: str = _PROJECT, cache_dir: pathlib.Path | None = None) -> bool:
    """Whether :func:`fetch_release` would answer ``version`` from the cache (an archive with
    its sha256 sidecar; for a project read as a wheel, a cached wheel for this Python), without
    reading any file's content: what ``matrix`` says before it starts. A version that is not
    shaped like one is not cached."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return False
    folder = pathlib.Path(cache_dir).expanduser() if cache_dir is not None else archive_cache_dir()
    guess = folder / f"{project}-{wanted}.tar.gz"
    if _is_file(guess) and _read_sidecar(guess) is not None:
        return True
    if project not in WHEEL_FALLBACK:
        return False
    try:
        return any(_read_sidecar(w) is not None for w in folder.glob(f"{project}-{wanted}-*.whl"))
    except OSError:
        return False


def fetch_release(
    version: str,
    *,
    progress: bool = True,
    cache_dir: pathlib.Path | None = None,
    unverified: bool | None = None,
    project: str = _PROJECT,
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
    (see :func:`_wheels`) is fetched instead, with the same sha256 checks and cache.

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
    recorded = _read_sidecar(guess) if _is_file(guess) else None
    if recorded is not None:
        if _has_digest(guess, recorded):
            return guess
        _drop_cached(guess)  # corrupted since it was verified: fetch it again
    if project in WHEEL_FALLBACK:
        cached = _cached_wheel(folder, project, wanted)
        if cached is not None:
            return cached

    client = _Client(index_url())
    files, versions = _project_files(client, project)
    sdists, known = _sdists(files, project), _all_versions(files, versions, project)
    matches = [s for s in sdists if s.version == wanted]
    if not matches and project in WHEEL_FALLBACK:
        matches = _wheels(files, project, wanted)
    if not matches:
        available = sorted({s.version for s in sdists if not s.yanked})
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
        hint = f"; nearest releases with an sdist: {nearest}" if nearest else ""
        raise SourceError(problem + hint)
    sdist = next((s for s in matches if not s.yanked), matches[0])
    target = folder / sdist.filename
    if sdist.sha256 is None and not (allow_unverified() if unverified is None else unverified):
        raise SourceError(
            f"the package index ({client.shown_index}) publishes no sha256 for {sdist.filename}, so it "
            "cannot be verified; refused (eagle-audit --allow-unverified ... uses it anyway, marked unverified)"
        )

    if _is_file(target):
        recorded = _read_sidecar(target)
        actual = _sha256_file(target)
        expected = recorded or sdist.sha256
        if expected is None:
            return target  # unverified, as allowed above: no sidecar, so never trusted offline
        if actual == expected:
            _write_sidecar(target, actual)
            return target
        _drop_cached(target)  # stale or corrupt cache entry: download afresh

    target, digest = _download(client, sdist, target, progress)
    if sdist.sha256 is not None:
        _write_sidecar(target, digest)
    return target


def _is_file(path: pathlib.Path) -> bool:
    """``path.is_file()``, False when the cache folder cannot even be looked into."""
    try:
        return path.is_file()
    except OSError:
        return False


# ------------------------------------------------------------- other projects' wheels


def _pure_wheels(files: list[dict], project: str) -> list[SdistFile]:
    """The pure-Python wheels (``<project>-X-py3-none-any.whl``) of an index page, by version."""
    found = [w for w, tags in _wheel_files(files, project)
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
        client = _Client(index_url())
        files, _ = _project_files(client, project)
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
        recorded = _read_sidecar(target)
        expected = recorded or wheel.sha256
        if expected is None:
            _write_sidecar(target, _sha256_file(target))
            return target, str(wheel.version)
        if _has_digest(target, expected):
            if recorded != expected:
                _write_sidecar(target, expected)
            return target, str(wheel.version)
        _drop_cached(target)
    digest = _download(client, wheel, target, progress)
    _write_sidecar(target, digest)
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
        client = _Client(index_url())
        files, _ = _project_files(client, project)
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
        recorded = _read_sidecar(path)
        if canonicalize_name(name) == canonicalize_name(project) and spec.contains(version) and recorded \
                and _has_digest(path, recorded):
            out.append((version, path))
    return [(p, str(v)) for v, p in sorted(out)]

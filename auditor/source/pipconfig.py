"""The package index pip is configured with, never hard-coded: pip's own configuration (files and
``PIP_*`` variables, memoised across processes), the index URL (:func:`index_url`), the cache
folder of the archives, and :class:`IndexClient`, a tiny urllib client honouring pip's index URL,
``cert``, ``proxy`` and timeout."""

from __future__ import annotations

import base64
import os
import pathlib
import ssl
import urllib.error
import urllib.parse
import urllib.request

from auditor.model.errors import SourceError
from auditor.source import digests

_DEFAULT_TIMEOUT = 15.0


def pip_config() -> dict[str, str]:
    """Load pip's merged configuration (files and ``PIP_*`` environment variables).

    Memoised in this process, and across processes by :func:`pip_config_memo` (importing pip's
    configuration module costs more than a warm scan): a stored answer is used only while the
    environment pip reads and every configuration file pip would consult are as they were.

    Returns:
        pip's ``key -> value`` mapping (keys like ``global.index-url`` or
        ``:env:.index-url``); empty when pip's internals are unavailable or changed.
    """
    return dict(_pip_memo()[0])


#: This process's answers of :func:`pip_config_memo`, by the environment they were read under.
_PIP_MEMO: dict[tuple, tuple[dict[str, str], str | None]] = {}


def _pip_env() -> tuple:
    """The environment variables pip's configuration depends on, sorted."""
    return tuple(sorted((k, v) for k, v in os.environ.items()
                        if k.startswith(("PIP_", "XDG_")) or k in _PIP_CONFIG_ENV))


def _pip_memo() -> tuple[dict[str, str], str | None]:
    """``(configuration, default index)`` under the current environment (see :func:`pip_config`)."""
    env = _pip_env()
    if env not in _PIP_MEMO:
        _PIP_MEMO[env] = pip_config_memo()
    return _PIP_MEMO[env]


#: Environment variables pip's configuration depends on besides ``PIP_*`` (where its files are).
_PIP_CONFIG_ENV = ("HOME", "USERPROFILE", "APPDATA", "PROGRAMDATA", "ALLUSERSPROFILE", "VIRTUAL_ENV")


def pip_config_memo() -> tuple[dict[str, str], str | None]:
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
    pip_files = [(f, digests.stat_stamp(os.path.join(pip_dir, f)))
                 for f in ("__init__.py", os.path.join("_internal", "configuration.py"))]
    store = Store("results")  # a small derived entry, pruned and cleared with the scan results
    k = cache_key("pip-config", env, sys.prefix, pip_dir, pip_files)
    entry = store.get(k, dict, lambda e: isinstance(e.get("files"), list) and isinstance(e.get("config"), dict))
    if entry is not None and all(isinstance(f, list) and len(f) == 2 and digests.stat_stamp(f[0]) == f[1]
                                 for f in entry["files"]):
        return dict(entry["config"]), entry.get("default_index")
    try:
        from pip._internal.configuration import Configuration

        config = Configuration(isolated=False)
        files = [f for _, paths in config.iter_config_files() for f in paths]
        stamps = [[f, digests.stat_stamp(f)] for f in files]
        config.load()
        out = {str(k): str(v) for k, v in config.items()}
    except Exception:  # pip internals are not a stable API
        return {}, None
    default = _pip_default_index_uncached()
    now = time.time_ns()
    if all(s is None or now - max(s[1], s[2]) > digests.RACY_SECONDS * 1e9 for _, s in stamps):
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
    """pip's built-in default index, memoised with the configuration (see :func:`pip_config`)."""
    return _pip_memo()[1] or _pip_default_index_uncached()


def pip_setting(name: str, config: dict[str, str] | None = None) -> str | None:
    """Look a pip option up the way ``pip download`` would see it.

    Precedence: ``PIP_<NAME>`` environment variable, then the ``download``, ``install``
    and ``global`` sections of pip's configuration files.

    Args:
        name: the option name, e.g. ``"index-url"`` or ``"cert"``.
        config: pip's configuration as returned by :func:`pip_config` (loaded if None).

    Returns:
        The configured value, or None.
    """
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env:
        return env.strip()
    if config is None:
        config = pip_config()
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
    url = pip_setting("index-url")
    if not url:
        url = _pip_default_index()
        if not url:
            raise SourceError("no package index configured: set PIP_INDEX_URL or pip's index-url")
    return url.split()[0].rstrip("/")


def redact(url: str) -> str:
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


def network_timeout(config: dict[str, str]) -> float:
    """Return pip's configured network timeout in seconds (default 15)."""
    for name in ("timeout", "default-timeout"):
        value = pip_setting(name, config)
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


class IndexClient:
    """A tiny urllib client honouring pip's index URL, ``cert``, ``proxy`` and timeout.

    Args:
        index: the index base URL (may carry ``user:password@`` credentials, which are
            sent as HTTP Basic auth to that host only).
    """

    def __init__(self, index: str) -> None:
        """Build the opener; see the class docstring."""
        config = pip_config()
        self.index = index
        self.shown_index = redact(index)
        self.timeout = network_timeout(config)
        cafile = pip_setting("cert", config)
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
        proxy = pip_setting("proxy", config)
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

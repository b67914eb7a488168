"""The one on-disk cache of eagle-audit, with one policy for everything it stores.

- **Where:** the user cache folder (``platformdirs.user_cache_path("eagle-audit")``, or
  ``$EAGLE_AUDIT_CACHE_DIR``), created with mode 0700; each kind of entry in a subfolder
  (``index`` module summaries, ``results`` whole scans, ``matrix`` release audits).
- **Keys** cover everything that can change a result: a digest of the tool's own code
  (:func:`code_digest`: every ``.py``/``.toml``/``.json`` file of the installed ``auditor`` and
  ``rules`` packages), the request, and the content of the files read (callers put their
  sha256 in the key, or check them on a hit).
- **Format:** data only. Entries are JSON written by :func:`encode`; :func:`decode` rebuilds
  only the dataclasses and enums registered with :func:`cacheable` (a closed list of this
  tool's own record types), so reading an entry can never run code. Anything that does not
  decode — a foreign, truncated or tampered file — is a miss.
- **Failures cost speed only:** a folder that cannot be created or written means no caching;
  writes are atomic (temporary file + rename) and leave no temporary file behind.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: Tag → class of every record type an entry may contain (see :func:`cacheable`).
_TYPES: dict[str, type] = {}


def cacheable(cls: type[T]) -> type[T]:
    """Class decorator: allow instances of a dataclass or enum ``cls`` in cache entries.
    Returns ``cls`` unchanged."""
    _TYPES[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


def cache_root() -> Path:
    """The cache folder (``$EAGLE_AUDIT_CACHE_DIR`` overrides the user cache folder). Not created."""
    env = os.environ.get("EAGLE_AUDIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return platformdirs.user_cache_path("eagle-audit")


def ensure_private_dir(path: Path) -> bool:
    """Create ``path`` and every missing parent with mode 0700. Returns False when it cannot be
    created or is not a writable folder (the caller then does without the cache)."""
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    try:
        for q in reversed(missing):
            q.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return False
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 (hex) of this tool's own code and data files: part of every cache key, so that
    editing a rule (or installing another version) never returns a result computed by other code."""
    import importlib.util

    h = hashlib.sha256()
    rules_spec = importlib.util.find_spec("rules")  # located, not imported (this layer is below it)
    bases = [Path(__file__).parent] + [Path(p) for p in (rules_spec.submodule_search_locations or [])]
    for base in bases:
        for p in sorted(base.rglob("*")):
            if p.suffix in (".py", ".toml", ".json") and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(base)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def key(*parts: Any) -> str:
    """A cache key (sha256 hex) over :func:`code_digest` and ``parts`` (JSON-able values)."""
    text = json.dumps([code_digest(), *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# -- codec -----------------------------------------------------------------------------------


class DecodeError(ValueError):
    """An entry that is not this tool's data (unknown tag, wrong shape)."""


#: Class → (tag, field names, their set) of a dataclass, None for another class (memoised: it is
#: looked up once per value encoded or decoded).
_SHAPES: dict[type, tuple[str, tuple[str, ...], frozenset[str]] | None] = {}


def _shape(t: type) -> tuple[str, tuple[str, ...], frozenset[str]] | None:
    try:
        return _SHAPES[t]
    except KeyError:
        pass
    shape = None
    if dataclasses.is_dataclass(t):
        names = tuple(f.name for f in dataclasses.fields(t))
        shape = (f"{t.__module__}.{t.__qualname__}", names, frozenset(names))
    _SHAPES[t] = shape
    return shape


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _enc_list(v: list) -> list:
    plain = _PLAIN
    return [x if type(x) in plain else _enc(x) for x in v]


def _enc(v: Any) -> Any:
    t = type(v)
    if t in _PLAIN:
        return v
    if t is list:
        return _enc_list(v)
    if t is dict:
        if all(type(k) is str and k[:1] != "@" for k in v):
            plain = _PLAIN
            return {k: x if type(x) in plain else _enc(x) for k, x in v.items()}
        return {"@d": [[_enc(k), _enc(x)] for k, x in v.items()]}
    if t is tuple:
        return {"@t": _enc_list(v)}
    if isinstance(v, enum.Enum):  # before str/int: str-valued enums are strings too
        return {"@e": f"{t.__module__}.{t.__qualname__}", "v": v.value}
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, dict):
        if all(type(k) is str and not k.startswith("@") for k in v):
            return {k: _enc(x) for k, x in v.items()}
        return {"@d": [[_enc(k), _enc(x)] for k, x in v.items()]}
    shape = _shape(t)
    if shape is not None and not isinstance(v, type):
        tag, names, _ = shape
        out = {"@": tag}
        plain = _PLAIN
        for name in names:
            x = getattr(v, name)
            out[name] = x if type(x) in plain else _enc(x)
        return out
    if isinstance(v, tuple):
        return {"@t": [_enc(x) for x in v]}
    if isinstance(v, frozenset):
        return {"@f": [_enc(x) for x in v]}
    if isinstance(v, set):
        return {"@s": [_enc(x) for x in v]}
    raise TypeError(f"not cacheable: {type(v).__name__}")


def _key_of(k: Any) -> Any:
    return tuple(k) if isinstance(k, list) else k


def _hook(d: dict) -> Any:
    if not d or not next(iter(d)).startswith("@"):
        return d
    if "@" in d:
        cls = _TYPES.get(d.pop("@"))
        shape = _shape(cls) if cls is not None else None
        if shape is None:
            raise DecodeError("unknown record type")
        obj = cls.__new__(cls)
        if d.keys() != shape[2]:
            raise DecodeError(f"fields of {cls.__name__} differ")
        for k, v in d.items():
            object.__setattr__(obj, k, v)
        return obj
    if "@t" in d:
        return tuple(d["@t"])
    if "@d" in d:
        return {_key_of(k): v for k, v in d["@d"]}
    if "@s" in d:
        return set(d["@s"])
    if "@f" in d:
        return frozenset(d["@f"])
    if "@e" in d:
        cls = _TYPES.get(d["@e"])
        if cls is None or not issubclass(cls, enum.Enum):
            raise DecodeError("unknown enum")
        return cls(d["v"])
    raise DecodeError("unknown tag")


def encode(obj: Any) -> bytes:
    """``obj`` (JSON values, tuples, sets, and :func:`cacheable` dataclasses and enums) as
    UTF-8 JSON bytes. Raises TypeError for anything else."""
    return json.dumps(_enc(obj), separators=(",", ":")).encode()


def decode(data: bytes) -> Any:
    """The object :func:`encode` wrote. Raises :class:`DecodeError` (or ValueError) for data
    that is not a well-formed entry of registered types; nothing in the data can run."""
    try:
        return json.loads(data, object_hook=_hook)
    except (KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise DecodeError(str(exc)) from None


# -- store -----------------------------------------------------------------------------------


class Store:
    """One kind of cache entry (``index``, ``results``, ``matrix``) under :func:`cache_root`.

    Args:
        kind: the subfolder name.
        enabled: False turns every get into a miss and every put into a no-op.
        root: the cache root (default :func:`cache_root`).
    """

    def __init__(self, kind: str, enabled: bool = True, root: Path | None = None):
        self.enabled = enabled
        self.folder = (root or cache_root()) / kind

    def path(self, k: str) -> Path:
        """Where the entry of key ``k`` lives."""
        return self.folder / k[:2] / f"{k}.json"

    def get(self, k: str, want: type | tuple[type, ...] | None = None, check: Callable[[Any], bool] | None = None) -> Any:
        """The entry of key ``k``, or None: absent, disabled, undecodable, not an instance of
        ``want``, or refused by ``check``."""
        if not self.enabled:
            return None
        try:
            with open(self.path(k), "rb") as fh:
                obj = decode(fh.read())
        except (OSError, ValueError):
            return None
        if want is not None and not isinstance(obj, want):
            return None
        if check is not None and not check(obj):
            return None
        return obj

    def put(self, k: str, obj: Any) -> None:
        """Store ``obj`` under ``k`` atomically. Never raises for cache trouble (unwritable
        folder, full disk, an object that is not cacheable): the entry is then simply absent."""
        if not self.enabled:
            return
        try:
            data = encode(obj)
        except (TypeError, ValueError, RecursionError):
            return
        target = self.path(k)
        if not ensure_private_dir(target.parent):
            return
        try:
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except OSError:
            Path(tmp).unlink(missing_ok=True)

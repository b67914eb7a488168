"""Validation of values that come from the user or from files the user hands in.

Every value that may end up written into a patched vLLM file, a file name or a terminal goes
through one of these checks at the input boundary (command-line flags, ``--hf-config``,
``--codemods`` files, ``[tool.eagle-audit]``), so that nothing downstream has to trust it.
"""

from __future__ import annotations

import re
import sys

from auditor.model.errors import AuditError

#: What a Hugging Face ``model_type`` looks like: a short identifier-like token
#: (``llama``, ``qwen3_vl_moe``, ``gpt_oss``, ``hunyuan_v1_dense``, ``xlm-roberta``). Upper case
#: is admitted for old remote-code configs (``RefinedWeb``). No quotes, spaces, brackets or
#: control characters, so a model_type can never change the meaning of the code it is written into.
MODEL_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def is_model_type(value: object) -> bool:
    """True when ``value`` is a string shaped like a model_type (see :data:`MODEL_TYPE_RE`)."""
    return isinstance(value, str) and MODEL_TYPE_RE.fullmatch(value) is not None


def check_model_type(value: object, label: str) -> str:
    """Return ``value`` when it is a valid model_type.

    Args:
        value: the candidate (from a flag, a JSON or TOML file).
        label: where it came from, for the message (``--model-type``, ``--codemods FILE``).

    Returns:
        ``value`` unchanged.

    Raises:
        AuditError: one line naming ``label`` and showing (a shortened, escaped form of) the value.
    """
    if is_model_type(value):
        return value  # type: ignore[return-value]
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise AuditError(f"{label}: {shown} is not a model_type (expected 1-64 letters, digits, '_', '.' or '-', "
                     "starting with a letter or digit, e.g. qwen3_moe)")


# -- JSON documents ----------------------------------------------------------------------------

#: Largest JSON input read (a checkpoint config.json is a few kB; a codemods file or a backup
#: manifest a few tens of kB).
MAX_JSON_BYTES = 4 << 20

#: Deepest nesting of arrays and objects accepted in a JSON input (real documents nest 3–5 deep).
MAX_JSON_DEPTH = 32


def json_depth(doc: object) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``[]`` is 1), computed without
    recursion so that a pathological document cannot exhaust the stack."""
    deepest = 0
    stack: list[tuple[object, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            depth += 1
            # only the containers inside are pushed: a list of a million numbers costs no memory
            stack.extend((v, depth) for v in (value.values() if isinstance(value, dict) else value)
                         if isinstance(v, (dict, list)))
        deepest = max(deepest, depth)
    return deepest


def checkpoint_config(path, label: str):
    """The ``config.json`` a checkpoint flag names: ``path`` itself, or the ``config.json``
    inside ``path`` when it is a folder (a checkpoint folder).

    Args:
        path: a file or a checkpoint folder (``str`` or ``Path``; ``~`` is expanded).
        label: the flag, for the message (``--hf-config``).

    Returns:
        The ``Path`` of the file to read (not yet read: :func:`read_json` checks it).

    Raises:
        AuditError: ``path`` is a folder without a ``config.json`` (one line).
    """
    from pathlib import Path

    p = Path(path).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise AuditError(f"{label}: {path} is a folder without a config.json")
        return p / "config.json"
    return p



def read_input_bytes(path, label: str, limit: int, what: str) -> bytes:
    """The bytes of one input file the user hands in (a JSON document, a settings file).

    The file is opened non-blocking and checked with ``fstat`` before any read: a FIFO, a device
    (a link to ``/dev/zero``) or a folder is refused unread, and so is a file larger than ``limit``.

    Args:
        path: the file (``str`` or ``Path``).
        label: where it came from, for messages (``--hf-config``).
        limit: the largest size read, in bytes.
        what: what the file is, for the size message (``"a JSON input"``).

    Returns:
        The file's bytes.

    Raises:
        AuditError: one line naming ``label`` and ``path``: missing, not a regular file, too
            large, or unreadable (permissions, a loop of symbolic links, a NUL in the path).
    """
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise AuditError(f"{label}: no such file: {path}") from None
    except OSError as exc:
        raise AuditError(f"{label}: cannot read {path}: {exc.strerror or exc}") from None
    except ValueError:  # a NUL in the path
        raise AuditError(f"{label}: {str(path)!r} is not a path (it holds a NUL character)") from None
    size_error = AuditError(f"{label}: {path} is larger than the {limit >> 20} MiB limit for {what}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AuditError(f"{label}: {path} is not a regular file")
        if st.st_size > limit:
            raise size_error
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise AuditError(f"{label}: cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise size_error
    return data


def read_json(path, label: str, schema: str | None = None) -> object:
    """Read, parse and validate one JSON input.

    The file must be a regular file (a FIFO or a device is refused, never opened for a blocking
    read) of at most :data:`MAX_JSON_BYTES`; the document may nest at most
    :data:`MAX_JSON_DEPTH` deep, and must match the shipped schema ``schema``
    (``auditor/model/schemas/<schema>.json``) when given.

    Args:
        path: the file.
        label: where it came from, for messages (``--hf-config``).
        schema: a schema name, or None to skip schema validation.

    Returns:
        The parsed document.

    Raises:
        AuditError: one line naming ``label`` and ``path``: missing, not a regular file, too
            large, not UTF-8 JSON, too deep, or not matching the schema (with the JSON path of
            the first offending value).
    """
    import json

    data = read_input_bytes(path, label, MAX_JSON_BYTES, "a JSON input")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        if "integer string conversion" in str(exc):  # Python's own message names an API to call
            raise AuditError(f"{label}: {path} holds an integer of more than {sys.get_int_max_str_digits()} "
                             "digits, which no config value needs") from None
        raise AuditError(f"{label}: cannot read {path} as JSON: {exc}") from None
    except RecursionError:
        raise AuditError(f"{label}: {path} nests deeper than {MAX_JSON_DEPTH} levels") from None
    return check_json(doc, f"{label} {path}", schema)


def check_json(doc: object, label: str, schema: str | None = None) -> object:
    """Check the depth of an already parsed JSON document and validate it against ``schema``.

    Returns:
        ``doc`` unchanged.

    Raises:
        AuditError: one line naming ``label``: too deep, or the first schema violation.
    """
    if json_depth(doc) > MAX_JSON_DEPTH:
        raise AuditError(f"{label}: nests deeper than {MAX_JSON_DEPTH} levels")
    if schema is None:
        return doc
    import jsonschema

    loaded = load_schema(schema)
    too_long = _first_too_long(loaded, doc, ())
    if too_long is not None:  # before the validator, which would check each of a million items first
        where, message = too_long
        raise AuditError(f"{label}: {where or 'the document'}: {message}")
    validator = jsonschema.Draft202012Validator(loaded)
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path) or "the document"
        message = f"{error.instance!r} has the wrong form" if error.validator == "pattern" else error.message
        if len(message) > 160:
            message = message[:157] + "..."
        raise AuditError(f"{label}: {where.lstrip('.')}: {message}")
    return doc


def _first_too_long(schema: object, doc: object, path: tuple) -> tuple[str, str] | None:
    """``(JSON path, message)`` of the first array (or string) of ``doc`` longer than the
    ``maxItems`` (``maxLength``) its place in ``schema`` allows, following ``properties`` and
    ``items``; None when none is. Costs one look at each length, so an oversized array is refused
    before any of its items is validated."""
    if not isinstance(schema, dict):
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    if isinstance(doc, list):
        mx = schema.get("maxItems")
        if isinstance(mx, int) and len(doc) > mx:
            return where, f"{len(doc)} items, more than the {mx} allowed"
        items = schema.get("items")
        if isinstance(items, dict) and any(k in items for k in ("properties", "items", "maxItems", "maxLength")):
            for i, item in enumerate(doc):
                hit = _first_too_long(items, item, path + (i,))
                if hit is not None:
                    return hit
    elif isinstance(doc, dict):
        props = schema.get("properties")
        for key, sub in (props.items() if isinstance(props, dict) else ()):
            if key in doc:
                hit = _first_too_long(sub, doc[key], path + (key,))
                if hit is not None:
                    return hit
    elif isinstance(doc, str):
        mx = schema.get("maxLength")
        if isinstance(mx, int) and len(doc) > mx:
            return where, f"a string of {len(doc)} characters, longer than the {mx} allowed"
    return None


def load_schema(name: str) -> dict:
    """The JSON schema ``auditor/model/schemas/<name>.json`` shipped with the package."""
    import json
    from importlib import resources

    return json.loads(resources.files("auditor.model").joinpath("schemas", f"{name}.json").read_text())

"""The JSON Schemas of eagle-audit's JSON outputs, and the README section generated from them.

Every ``--format json`` document (``scan``, ``explain``, ``gate``, ``matrix``, ``compare``,
``rules``, ``verify``) has a schema shipped in the package, in
``auditor/model/schemas/outputs/<command>.json`` (JSON Schema 2020-12); the definitions they
share (a finding, a scan's target result, the run options) live in ``common.json`` beside them.
The tests validate real outputs against them, and :func:`schema_markdown` writes the README's
description of the JSON from them (a test keeps the two equal).
"""

from __future__ import annotations

import functools
import json
from importlib import resources

#: The commands that write JSON, each with the schema of its document.
OUTPUTS = ("scan", "explain", "gate", "matrix", "compare", "rules", "verify")


def _read(name: str) -> dict:
    return json.loads(resources.files("auditor.model").joinpath("schemas", "outputs", f"{name}.json").read_text())


def output_schema(name: str) -> dict:
    """The shipped schema of ``name``'s JSON output (one of :data:`OUTPUTS`, or ``common``)."""
    return _read(name)


@functools.cache
def _registry():
    from referencing import Registry, Resource

    return Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc)) for doc in (_read(n) for n in (*OUTPUTS, "common")))


def output_errors(name: str, document: object) -> list[str]:
    """Every way ``document`` (parsed JSON) departs from the schema of ``name``'s output.

    Returns:
        One line per violation (``path: message``); empty when the document is valid.
    """
    import jsonschema

    validator = jsonschema.Draft202012Validator(_read(name), registry=_registry())
    return [f"{'/'.join(map(str, e.absolute_path)) or '(document)'}: {e.message}"
            for e in validator.iter_errors(document)]


def _resolve(node: dict, common: dict) -> dict:
    """``node`` with a ``$ref`` into the schemas followed (its own description kept)."""
    while "$ref" in node:
        target = common["$defs"][node["$ref"].rsplit("/", 1)[1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    if "anyOf" in node:  # ``X or null``
        kinds = [_resolve(n, common) for n in node["anyOf"] if n.get("type") != "null"]
        if len(kinds) == 1:
            return {**kinds[0], "description": node.get("description", kinds[0].get("description", "")),
                    "nullable": True}
    return node


def _type_text(node: dict) -> str:
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    kinds = node.get("type", "any")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    if node.get("nullable"):
        kinds.append("null")
    return " \\| ".join(kinds)


def _fields(node: dict, common: dict, prefix: str, out: list[str]) -> None:
    node = _resolve(node, common)
    for key, sub in node.get("properties", {}).items():
        sub = _resolve(sub, common)
        path = f"{prefix}{key}"
        optional = "" if key in node.get("required", ()) else " (optional)"
        out.append(f"| `{path}` | {_type_text(sub)} | {sub.get('description', '')}{optional} |")
        if sub.get("type") == "object" and "properties" in sub:
            _fields(sub, common, f"{path}.", out)
        items = sub.get("items")
        if isinstance(items, dict):
            items = _resolve(items, common)
            if "properties" in items:
                _fields(items, common, f"{path}[].", out)


def schema_markdown() -> str:
    """The README's description of the JSON outputs, generated from the shipped schemas: a
    table of every field of ``scan --format json`` (path, type or values, what it means), then
    the top-level keys of every other command's document, each with the schema's file."""
    common = _read("common")
    out = ["`scan --format json` (schema `auditor/model/schemas/outputs/scan.json`; `--platform all` writes",
           "`{platform: \"all\", reports: {platform: scan}, differences}` instead):", "",
           "| field | type | what |", "|---|---|---|"]
    _fields(common["$defs"]["scan_report"], common, "", out)
    for name in OUTPUTS[1:]:
        doc = _read(name)
        top = _resolve(doc, common)
        if "oneOf" in doc:
            top = _resolve(doc["$defs"]["explained"], common) if name == "explain" else top
        if top.get("type") == "array":
            top = _resolve(top["items"], common)
        keys = ", ".join(f"`{k}`" for k in top.get("properties", {}))
        out += ["", f"`{name} --format json` ({doc['title'].split(' (', 1)[-1].rstrip(')') + '; ' if '(' in doc['title'] else ''}"
                f"schema `auditor/model/schemas/outputs/{name}.json`): {keys}."]
    return "\n".join(out) + "\n"

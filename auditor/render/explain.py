"""Rendering of ``explain`` (:func:`auditor.orchestration.explain.explain`) as a rich tree. Every
string of the explanation is cleaned (:func:`auditor.render.text.clean`) and markup-escaped first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.render.text import clean_all

if TYPE_CHECKING:  # rich is imported by the functions that print, so that JSON never loads it
    from rich.console import Console


def _escape_all(value):
    """A copy of a JSON-like value with every string markup-escaped (for rich)."""
    from rich.markup import escape

    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {k: _escape_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_all(v) for v in value]
    return value


def explain_tree(info: dict, console: Console) -> None:
    """Print an explanation (see :func:`auditor.orchestration.explain.explain`) as a rich tree,
    each label wrapped at the console's width (a long name folds; nothing is cut). Every string
    of ``info`` is cleaned and markup-escaped first."""
    from rich.text import Text
    from rich.tree import Tree as RichTree

    info = _escape_all(clean_all(info))
    head = f"[bold]{info['architecture']}[/bold] → {info['class']}  [cyan]{info['path']}:{info['line']}[/cyan]"
    if info.get("empty_subclass"):
        head += "  [yellow](empty subclass)[/yellow]"
    root = RichTree(head)
    mro = root.add("MRO")
    for e in info["mro_detail"]:
        label = e["name"]
        tags = []
        if e.get("path"):
            label += f"  [cyan]{e['path']}:{e['line']}[/cyan]"
        else:
            tags.append("external")
        if e.get("empty"):
            tags.append("empty")
        if e.get("protocol"):
            tags.append("protocol")
        if tags:
            label += "  [dim](" + ", ".join(tags) + ")[/dim]"
        mro.add(label)
    for err in info.get("mro_problems", []):
        root.add(f"[red]{err}[/red]")
    for pname, members in info.get("protocols", {}).items():
        node = root.add(f"{pname} members")
        for m, src in members.items():
            node.add(f"{m}: " + (f"[green]{src}[/green]" if src else "[red]missing[/red]"))
    h = info.get("holder")
    if h:
        node = root.add(f"holder model: {h.get('class') or '[yellow]unknown[/yellow]'}")
        node.add(f"found via {h['via']}")
        if h.get("unknown"):
            node.add(f"[yellow]{h['unknown']}[/yellow]")
        if h.get("forward"):
            fw = h["forward"]
            fnode = node.add(f"forward: {fw['defined_in']}  [cyan]{fw['path']}:{fw['line']}[/cyan]")
            for lp in fw["loops"]:
                if lp["index_var"] is None:
                    idx = "no layer index"
                else:
                    start = f", start={lp['enumerate_start']}" if lp.get("enumerate_start") else ""
                    idx = f"layer index {lp['index_var']!r} from {lp['index_kind']}{start}"
                fnode.add(f"layer loop at line {lp['line']}: {idx}; captures aux hidden states: "
                          f"{_yes_no(lp['captures'])}")
            fnode.add(f"returns aux hidden states: {_yes_no(fw['returns_aux'])}")
    if info.get("language_model"):
        root.add(f"language model architecture: {info['language_model']}")
    if info.get("engine") == "sglang" and info.get("resolved"):
        _explain_sglang(info, root)
    if info.get("branches"):
        node = root.add(f"import-time branches followed (platform {info.get('platform')})")
        for b in info["branches"]:
            where = f"  [cyan]{b['path']}:{b['line']}[/cyan]" if b.get("line") else ""
            node.add(Text.from_markup(f"{b['name']} in {b['module']}: {b['branch']}{where}"))  # escaped above
    console.print(root, soft_wrap=False)  # wrapped at the console's width (piped: COLUMNS), never cropped


def _yes_no(value) -> str:
    """A yes/no fact of an explanation in words: ``yes``, ``no``, or ``unknown`` for None."""
    return "unknown" if value is None else ("yes" if value else "no")


def _explain_sglang(info: dict, root) -> None:
    """The SGLang parts of an explanation: the runner's call, the setter, its trace, the forward
    (``info`` is already cleaned and markup-escaped by :func:`explain_tree`)."""
    reg = info["registered_in"]
    root.add(f"registered by EntryClass  [cyan]{reg['path']}:{reg['line']}[/cyan]")
    for c in info.get("runner", [])[:1]:
        root.add(f"runner calls model.{c['name']}(...)  [cyan]{c['path']}:{c['line']}[/cyan]"
                 + ("  (after hasattr)" if c["checks_hasattr"] else ""))
    st = info.get("setter")
    if st:
        root.add(f"setter: [green]{st['defined_in']}.{st['name']}[/green]  [cyan]{st['path']}:{st['line']}[/cyan]")
    else:
        root.add("setter: [red]missing[/red]")
    cap = info["capture"]
    node = root.add(f"capturing model: {cap.get('holder') or '[yellow]unknown[/yellow]'}")
    if cap.get("via"):
        node.add(f"found via {cap['via']}")
    for p in cap.get("problems", []):
        node.add(f"[red]{p['message']}[/red]")
    fw = cap.get("forward")
    if fw:
        fnode = node.add(f"forward: {fw['defined_in']}  [cyan]{fw['path']}:{fw['line']}[/cyan]")
        for lp in fw["loops"]:
            fnode.add(f"layer loop at line {lp['line']}: captures aux hidden states: {_yes_no(lp['captures'])}")
        fnode.add(f"returns aux hidden states: {_yes_no(fw['returns_aux'])}")

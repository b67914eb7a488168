"""``matrix`` and ``compare`` as one self-contained HTML page (``--format html``). No analysis here.

The page is a release × target grid: one row per release (``matrix``) or engine release
(``compare``), one column per target, each cell coloured by its verdict — supported, blocked
with a patch (``eagle-audit fix`` can patch every blocking gate), blocked without one, unknown
(absent and skipped releases in grey) — and listing its gates with ``file:line``; under the grid,
the first release that works for each target. A ``file:line`` never breaks (a long path wraps
only after a ``/`` of its folders). Each gate's message folds under "why" (a
``<details>`` element: no script). The page loads nothing: the CSS is inline, it has
no script, and its Content-Security-Policy forbids every other resource. Every string from the
tree (names, paths, messages) is cleaned of control characters and HTML-escaped.
"""

from __future__ import annotations

import html

from auditor.render.text import clean

#: Cell classes, their legend text and colours (background, border).
KINDS = {
    "supported": ("supported", "#d9f2dd", "#2e7d32"),
    "blocked-patch": ("blocked, a patch exists (eagle-audit fix)", "#ffe7c2", "#e08600"),
    "blocked-no-patch": ("blocked, no local patch", "#f8d0d0", "#c62828"),
    "unknown": ("unknown (the tool cannot decide)", "#fff6b3", "#a08a00"),
    "absent": ("not in the release's registry, or the release was not read", "#eeeeee", "#9e9e9e"),
}

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
p.run { color: #555; margin: 0 0 1em; }
table.grid { border-collapse: separate; border-spacing: 4px; }
table.grid th { text-align: left; vertical-align: bottom; padding: 4px 6px; font-weight: 600; }
table.grid th.release { white-space: nowrap; vertical-align: top; }
details { margin: .1em 0 0; } summary { cursor: pointer; color: #555; font-size: .9em; }
td.cell { vertical-align: top; padding: 6px 8px; border: 2px solid; border-radius: 4px; min-width: 14em; max-width: 30em; }
td.cell .verdict { font-weight: 700; }
td.cell .first { display: inline-block; margin-left: .4em; padding: 0 .4em; border-radius: 3px; background: #2e7d32; color: #fff; font-size: .85em; }
td.cell ul { margin: .3em 0 0; padding-left: 1.1em; }
td.cell li { margin: .15em 0; overflow-wrap: anywhere; }
td.cell .where { font-family: ui-monospace, monospace; font-size: .9em; color: #333; overflow-wrap: normal; word-break: normal; }
td.cell .loc { white-space: nowrap; }
td.cell .reason { color: #444; font-size: .9em; overflow-wrap: anywhere; }
tr.first-works td { border: 0; padding: 6px 8px; font-weight: 600; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .5em 1.2em; }
ul.legend li span { display: inline-block; width: 1em; height: 1em; border: 2px solid; vertical-align: middle; margin-right: .3em; }
""" + "".join(f"td.{k}, .legend .{k} {{ background: {bg}; border-color: {fg}; }}\n" for k, (_, bg, fg) in KINDS.items())


def _e(text: object) -> str:
    """Tree text for HTML: control characters shown as escapes, then every markup character escaped."""
    return html.escape(clean(text), quote=True)


def cell_kind(verdict: str, fix_available: bool) -> str:
    """The class (and colour) of a cell: one of :data:`KINDS`."""
    if verdict == "blocked":
        return "blocked-patch" if fix_available else "blocked-no-patch"
    return verdict if verdict in ("supported", "unknown") else "absent"


def _where(path: str, line) -> str:
    """A gate's location as HTML: the folders of ``path``, each followed by a break opportunity
    (``<wbr>``: a long path wraps after a ``/``), then ``file:line`` in a ``span.loc`` that never
    breaks (``white-space: nowrap``), all in a ``span.where``."""
    head, sep, name = path.rpartition("/")
    loc = f"{name}:{line}" if line else name
    folders = "".join(f"{_e(part)}/<wbr>" for part in head.split("/")) if sep else ""
    return f'<span class="where">{folders}<span class="loc">{_e(loc)}</span></span>'


def _gates(gates: list[dict]) -> str:
    items = []
    for g in gates:
        fix = " (fix available)" if g.get("fix_available") and g.get("severity") == "error" else ""
        items.append(f'<li class="gate {_e(g["severity"])}" data-gate="{_e(g["gate"])}"><code>{_e(g["gate"])}</code> '
                     f'{_e(g["rule"])} {_e(g["severity"])}{fix}'
                     + (f" {_where(g['path'], g.get('line'))}" if g.get("path") else "")
                     + f'<details><summary>why</summary><div class="reason">{_e(g["message"])}</div></details></li>')
    return f"<ul>{''.join(items)}</ul>" if items else ""


def _cell(release: str, target: str, verdict: str, fix_available: bool, gates: list[dict], reason: str = "",
          first: bool = False) -> str:
    kind = cell_kind(verdict, fix_available)
    label = KINDS[kind][0] if kind.startswith("blocked") else verdict
    return (f'<td class="cell {kind}" data-release="{_e(release)}" data-target="{_e(target)}" '
            f'data-verdict="{_e(verdict)}" data-kind="{kind}"><span class="verdict">{_e(label)}</span>'
            + ('<span class="first">first that works</span>' if first else "")
            + (f'<div class="reason">{_e(reason)}</div>' if reason and not gates else "")
            + _gates(gates) + "</td>")


def _page(title: str, run: str, head: list[str], rows: list[str], footer: str, notes: list[str]) -> str:
    legend = "".join(f'<li><span class="{k}"></span>{html.escape(text)}</li>' for k, (text, _, _) in KINDS.items())
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
            f"<title>{title}</title>\n<style>{_CSS}</style></head>\n<body>\n<h1>{title}</h1>\n"
            + (f'<p class="run">{run}</p>\n' if run else "")
            + f'<ul class="legend">{legend}</ul>\n'
            + '<table class="grid">\n<thead><tr>' + "".join(head) + "</tr></thead>\n<tbody>\n"
            + "\n".join(rows) + "\n</tbody>\n<tfoot>" + footer + "</tfoot>\n</table>\n"
            + "".join(f"<p>{n}</p>\n" for n in notes) + "</body></html>\n")


def matrix_html(report) -> str:
    """A matrix report (:class:`auditor.orchestration.matrix.MatrixReport`) as a self-contained
    HTML page: one row per release, one column per architecture, each cell coloured by its
    verdict and listing its gates with ``file:line``; the last row names the first release
    listed that works (supports the target natively) for each architecture."""
    engine = {"vllm": "vLLM", "sglang": "SGLang"}.get(getattr(report, "engine", "vllm"), "vLLM")
    archs = report.architectures
    title = _e(f"eagle-audit matrix: {', '.join(report.model)} ({report.method}), {engine} {report.versions}")
    run = _e(report.run_options.describe()) if getattr(report, "run_options", None) else ""
    by = {(r.release, r.architecture): r for r in report.rows}
    head = [f"<th>{engine}</th>"] + [f'<th class="target">{_e(a)}</th>' for a in archs]
    rows = []
    for v in report.releases:
        cells = []
        for a in archs:
            r = by.get((v, a))
            if r is None:
                cells.append(_cell(v, a, "absent", False, [], "not audited"))
                continue
            cells.append(_cell(v, a, r.verdict.value, r.fix_available, r.gates, r.reason, r.first_native))
        rows.append(f'<tr><th class="release" scope="row">{_e(v)}</th>{"".join(cells)}</tr>')
    first = report.first_supported
    footer = ('<tr class="first-works"><th>first release that works</th>'
              + "".join(f'<td data-target="{_e(a)}">{_e(first.get(a) or "none of those listed")}</td>' for a in archs)
              + "</tr>")
    notes = []
    if len(archs) > 1:
        notes.append(_e(f"first release that works for every target: {report.first_all_supported or 'none of those listed'}"))
    for v, e in sorted(report.errors.items()):
        notes.append(_e(f"{v} could not be read: {e}"))
    return _page(title, run, head, rows, footer, notes)


def compare_html(report) -> str:
    """A comparison (:class:`auditor.orchestration.compare.CompareReport`) as a self-contained
    HTML page: one row per engine release, one column per target, cells as in
    :func:`matrix_html`; the last row names the releases that work for each target."""
    archs = [r.architecture for r in report.rows]
    methods = ", ".join(dict.fromkeys(r.method for r in report.rows))
    title = _e(f"eagle-audit compare: {', '.join(s.name for s in report.sides)} ({methods})")
    head = ["<th>engine</th>"] + [f'<th class="target">{_e(a)}</th>' for a in archs]
    rows = []
    for i, side in enumerate(report.sides):
        cells = []
        for r in report.rows:
            c = r.cells[i]
            reason = "not in the engine's registry" if c.verdict == "absent" else "; ".join(c.reasons)
            cells.append(_cell(side.name, r.architecture, c.verdict, c.fix_available, c.gates, reason))
        rows.append(f'<tr><th class="release" scope="row">{_e(side.name)}<div class="reason">{_e(side.source)}</div></th>'
                    + "".join(cells) + "</tr>")
    footer = ('<tr class="first-works"><th>releases that work</th>'
              + "".join(f'<td data-target="{_e(r.architecture)}">'
                        + _e(", ".join(s.name for s, c in zip(report.sides, r.cells) if c.verdict == "supported") or "none")
                        + "</td>" for r in report.rows) + "</tr>")
    ok = [s.name for s, good in zip(report.sides, report.supports_all) if good]
    notes = [_e(f"supports every target: {', '.join(ok)}" if ok else "no engine supports every target")]
    for name, per in report.unresolved.items():
        notes += [_e(f"{name} in {engine}: {msg}") for engine, msg in per.items()]
    return _page(title, "", head, rows, footer, notes)

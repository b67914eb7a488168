"""``matrix`` and ``compare`` as a self-contained HTML page (issue 21), checked in a real browser:
headless Chromium renders each page, ``--dump-dom`` gives the DOM it built (the cells, their
verdict colour class, their gates with ``file:line``, the first release that works) and
``--screenshot`` the picture, whose pixels must show each verdict's colour. Chromium is part of
the test setup (``.ci/run`` installs it): without it these tests fail, they never skip."""

from __future__ import annotations

import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

from auditor.model.outcomes import ReleaseVerdict
from auditor.render.html import KINDS, compare_html, matrix_html
from real import REPO


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is not installed: .ci/run installs it (apt-get install -y chromium)"
    return exe


def _browser(page: Path, *mode: str, size: str = "1400,1000") -> subprocess.CompletedProcess:
    """Run headless Chromium on ``page`` in a session of its own (a signal Chromium sends its
    process group never reaches the test run), with a throw-away profile; whatever of that
    session is left when it returns is killed."""
    import signal

    with tempfile.TemporaryDirectory() as profile:
        args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                f"--window-size={size}", *mode, page.as_uri()]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        return subprocess.CompletedProcess(args, proc.returncode, out, err)


def dump_dom(page: Path) -> str:
    """The DOM Chromium built from ``page``, serialised."""
    p = _browser(page, "--dump-dom")
    assert p.returncode == 0 and "<html" in p.stdout, p.stderr[-2000:]
    return p.stdout


def screenshot(page: Path, out: Path, size: str = "1400,1000") -> list[tuple[int, int, int]]:
    """Render ``page`` to the PNG ``out`` and return its pixels (RGB)."""
    p = _browser(page, f"--screenshot={out}", size=size)
    assert p.returncode == 0 and out.is_file(), p.stderr[-2000:]
    return _png_pixels(out.read_bytes())


def _png_pixels(data: bytes) -> list[tuple[int, int, int]]:
    """The RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if colour == 2 else 4
    raw, stride, out, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a, b, c = (line[i - bpp] if i >= bpp else 0), prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += [tuple(line[x * bpp:x * bpp + 3]) for x in range(width)]
        prev = line
    return out


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


class _Cells(html.parser.HTMLParser):
    """The grid's cells from a DOM: ``(release, target) → {kind, verdict, text, gates}``, and the
    texts of the ``first release that works`` row by target."""

    def __init__(self):
        super().__init__()
        self.cells, self.first, self.tags = {}, {}, []
        self._cell = self._first = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "td" and "cell" in a.get("class", ""):
            self._cell = self.cells.setdefault((a["data-release"], a["data-target"]), {
                "kind": a["data-kind"], "verdict": a["data-verdict"], "class": a["class"], "text": "", "gates": []})
        elif tag == "td" and "data-target" in a:
            self._first = a["data-target"]
            self.first[self._first] = ""
        elif tag == "li" and self._cell is not None and "data-gate" in a:
            self._cell["gates"].append(a["data-gate"])

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = self._first = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data
        elif self._first is not None:
            self.first[self._first] += data


def cells(dom: str) -> _Cells:
    parser = _Cells()
    parser.feed(dom)
    return parser


def _run(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's code, from any folder
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], capture_output=True, text=True,
                          timeout=900, cwd=cwd, env=env)


def _assert_self_contained(page: str) -> None:
    low = page.lower()
    assert "<script" not in low and "<link" not in low and "src=" not in low and "href=" not in low
    assert "url(" not in low and "@import" not in low and "http://" not in low and "https://" not in low
    assert "default-src 'none'" in page  # and the browser may load nothing else


def test_the_matrix_page_of_real_releases_shows_each_cell_its_gates_and_the_first_that_works(tmp_path):
    p = _run("matrix", "-m", "kimi_k2", "--versions", "0.16.0,0.18.0", "--no-config", "--no-progress", "-j", "1",
             "-o", "matrix.html", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    page = tmp_path / "matrix.html"
    _assert_self_contained(page.read_text())
    grid = cells(dump_dom(page))
    archs = ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration")
    assert set(grid.cells) == {(v, a) for v in ("0.16.0", "0.18.0") for a in archs}
    for a in archs:
        old, new = grid.cells[("0.16.0", a)], grid.cells[("0.18.0", a)]
        assert old["kind"] == "blocked-patch" and old["verdict"] == "blocked"
        assert old["gates"][:3] == ["allowlist", "interface", "aux-capture"]
        assert "vllm/config/speculative.py:689" in old["text"] and "blocked, a patch exists" in old["text"]
        assert new["kind"] == "supported" and "first that works" in new["text"]
        assert grid.first[a].strip() == "0.18.0"
    assert "image-token" in grid.cells[("0.16.0", "KimiK25ForConditionalGeneration")]["gates"]
    assert "vllm/model_executor/models/deepseek_v2.py:1118" in grid.cells[("0.16.0", archs[0])]["text"]
    pixels = set(screenshot(page, tmp_path / "matrix.png"))
    for kind in ("supported", "blocked-patch"):
        assert _rgb(KINDS[kind][1]) in pixels, kind  # the cell's colour is on the screen
    assert _rgb(KINDS["blocked-no-patch"][1]) in pixels  # (its legend swatch)


def test_the_matrix_of_pipeline_parallel_tells_blocked_without_a_patch(tmp_path):
    p = _run("matrix", "-m", "kimi_k2", "--versions", "0.18.0", "-pp", "2", "--no-config", "--no-progress", "-j", "1",
             "-f", "html", "-o", "pp.html", cwd=tmp_path)
    assert p.returncode == 1, p.stderr  # written; no release listed supports the targets
    grid = cells(dump_dom(tmp_path / "pp.html"))
    cell = grid.cells[("0.18.0", "DeepseekV3ForCausalLM")]
    assert cell["kind"] == "blocked-no-patch" and "pp-aux-transport" in cell["gates"], cell
    assert grid.first["DeepseekV3ForCausalLM"].strip() == "none of those listed"


def test_the_compare_page_of_real_releases(tmp_path):
    p = _run("compare", "-m", "kimi_k2", "--vllm-version", "0.16.0", "--sglang-version", "0.5.10.post1",
             "--no-config", "-o", "compare.html", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    page = tmp_path / "compare.html"
    _assert_self_contained(page.read_text())
    grid = cells(dump_dom(page))
    vllm = grid.cells[("vLLM 0.16.0", "DeepseekV3ForCausalLM")]
    assert vllm["kind"] == "blocked-patch" and "vllm/config/speculative.py:689" in vllm["text"]
    sides = {release for release, _ in grid.cells}
    assert sides == {"vLLM 0.16.0", "SGLang 0.5.10.post1"}
    screenshot(page, tmp_path / "compare.png")


def _hostile_matrix():
    from auditor.orchestration.matrix import MatrixReport, MatrixRow

    evil = '<img src=x onerror="alert(1)">Evil\x1b[2J</td><script>alert(2)</script>'
    gate = lambda g, sev, fix: {"gate": g, "rule": "EA301", "severity": sev, "message": evil, "path": "vllm/<b>x</b>.py",
                                "line": 7, "fix_available": fix}
    archs = ["A", evil]
    rows = [MatrixRow("0.1.0", "A", "eagle3", ReleaseVerdict.BLOCKED, ["allowlist"], fix_available=True,
                      gates=[gate("allowlist", "error", True)]),
            MatrixRow("0.1.0", evil, "eagle3", ReleaseVerdict.BLOCKED, ["allowlist"], gates=[gate("allowlist", "error", False)]),
            MatrixRow("0.2.0", "A", "eagle3", ReleaseVerdict.UNKNOWN, reason=evil, gates=[gate("image-token", "unknown", False)]),
            MatrixRow("0.2.0", evil, "eagle3", ReleaseVerdict.SUPPORTED, first_native=True),
            MatrixRow("0.3.0", "A", "eagle3", ReleaseVerdict.SKIPPED, reason="no source archive"),
            MatrixRow("0.3.0", evil, "eagle3", ReleaseVerdict.ABSENT, reason="not in the model registry")]
    return MatrixReport([evil], "0.1.0..0.3.0", "eagle3", archs, rows), evil


def test_every_verdict_has_its_colour_and_nothing_from_the_tree_becomes_markup(tmp_path):
    report, evil = _hostile_matrix()
    text = matrix_html(report)
    _assert_self_contained(text.replace("src=x", ""))  # the only src= is the escaped text
    assert "<img" not in text and "<script" not in text and "\x1b" not in text
    page = tmp_path / "hostile.html"
    page.write_text(text)
    dom = dump_dom(page)
    assert "<img" not in dom and "<script" not in dom  # the browser built no element from the text
    grid = cells(dom)
    shown = evil.replace("\x1b", "\\x1b")
    kinds = {key: c["kind"] for key, c in grid.cells.items()}
    assert kinds == {("0.1.0", "A"): "blocked-patch", ("0.1.0", shown): "blocked-no-patch",
                     ("0.2.0", "A"): "unknown", ("0.2.0", shown): "supported",
                     ("0.3.0", "A"): "absent", ("0.3.0", shown): "absent"}
    assert "vllm/<b>x</b>.py:7" in grid.cells[("0.1.0", "A")]["text"]  # shown as text
    assert grid.first[shown].strip() == "0.2.0" and grid.first["A"].strip() == "none of those listed"
    pixels = screenshot(page, tmp_path / "hostile.png", size="1600,900")
    counts = {k: pixels.count(_rgb(bg)) for k, (_, bg, _) in KINDS.items()}
    assert all(n > 2000 for n in counts.values()), counts  # each cell's area, not only the legend's swatch


def test_html_is_a_format_of_matrix_and_compare_only(tmp_path):
    from conftest import MINIVLLM

    p = _run("scan", MINIVLLM, "--no-config", "-o", "r.html", cwd=tmp_path)
    assert p.returncode == 2 and "names html, which this command does not write" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    helps = {cmd: _run(cmd, "--help", cwd=tmp_path).stdout for cmd in ("matrix", "compare")}
    assert all("html" in h for h in helps.values())


def _measured(page_text: str, tmp_path: Path, name: str, size: str) -> dict[str, list[int]]:
    """Lay ``page_text`` out in Chromium at ``size`` and return, per ``span.loc`` (``file:line``)
    and per ``span.where`` (the whole location), the number of lines each box spans (its
    ``getClientRects()``): a copy of the page with a measuring script appended (the report's own
    Content-Security-Policy forbids scripts, so the copy drops that one meta element)."""
    import json
    import re

    probe = ("<script>var out = {};"
             "for (const k of ['loc', 'where']) { out[k] = Array.from(document.querySelectorAll('span.' + k))"
             ".map(e => new Set(Array.from(e.getClientRects()).map(r => Math.round(r.top))).size); }"
             "var p = document.createElement('pre'); p.id = 'measured'; p.textContent = JSON.stringify(out);"
             "document.body.appendChild(p);</script>")
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>\n', "", page_text)
    page = tmp_path / name
    page.write_text(text.replace("</body>", probe + "</body>"))
    p = _browser(page, "--dump-dom", size=size)
    assert p.returncode == 0, p.stderr[-2000:]
    m = re.search(r'<pre id="measured">(.*?)</pre>', p.stdout, re.S)
    assert m, p.stdout[-2000:]
    return json.loads(html.unescape(m.group(1)))


def test_a_file_line_never_breaks_in_the_page_however_narrow(tmp_path):
    """Issue 21 (ux3b): the browser broke ``deepseek_v2.py:1118`` inside the number. Each
    ``file:line`` is one unbreakable box; a long path wraps only after a ``/`` of its folders."""
    from auditor.orchestration.matrix import MatrixReport, MatrixRow

    # a file name wider than a cell at its narrowest (14em): the old page broke it, number and all
    long_path = "vllm/model_executor/models/a_rather_long_folder_name/a_model_file_with_a_long_name_v2.py"
    gate = lambda g, path, line: {"gate": g, "rule": "EA303", "severity": "error", "message": "m", "path": path,
                                  "line": line, "fix_available": True}
    archs = ["DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "Qwen3MoeForCausalLM"]
    rows = [MatrixRow(v, a, "eagle3", ReleaseVerdict.BLOCKED, ["aux-capture", "interface"], fix_available=True,
                      gates=[gate("aux-capture", "vllm/model_executor/models/deepseek_v2.py", 1118),
                             gate("interface", long_path, 123456)])
            for v in ("0.16.0", "0.17.1") for a in archs]
    text = matrix_html(MatrixReport(["kimi_k2"], "0.16.0,0.17.1", "eagle3", archs, rows))
    assert '<span class="loc">deepseek_v2.py:1118</span>' in text
    assert "vllm/<wbr>model_executor/<wbr>models/<wbr>" in text
    for size in ("420,900", "900,900", "1400,900"):
        got = _measured(text, tmp_path, f"narrow-{size.split(',')[0]}.html", size)
        assert len(got["loc"]) == 2 * 2 * len(archs), got
        assert set(got["loc"]) == {1}, (size, got["loc"])  # every file:line on one line
    assert max(_measured(text, tmp_path, "w420.html", "420,900")["where"]) > 1  # the long path did wrap (at a /)
    dom = dump_dom(tmp_path / "narrow-420.html")
    assert "vllm/model_executor/models/deepseek_v2.py:1118" in cells(dom).cells[("0.16.0", archs[0])]["text"]

"""Every renderer of the command line, one class per (report kind, format), and :data:`RENDERERS`.

Kinds and their reports: ``scan`` (:class:`auditor.model.results.ScanReport`), ``platforms``
(``scan --platform all``: ``(reports by platform, differences)``), ``gate``
(:class:`auditor.orchestration.upgrade_results.UpgradeReport`), ``matrix``, ``compare``, ``explain`` (the
list of explanations), ``verify`` (:class:`auditor.orchestration.verify.VerifyReport`), ``rules``
(None: every rule) and ``rule-details`` (the rules chosen). The serialisers they call are those
of :mod:`auditor.render.report`, :mod:`auditor.render.rules`, :mod:`auditor.render.explain`,
:mod:`auditor.render.ci_formats`, :mod:`auditor.render.html` and :mod:`auditor.render.verify`,
imported on first use (``scan --format json`` never loads
rich or the SARIF model).
"""

from __future__ import annotations

import json
from typing import Any

from auditor.render.registry import Registry, Renderer


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2)


# -- scan ------------------------------------------------------------------------------------


class ScanTable(Renderer):
    """The scan's table (``verbose``: every target and warning)."""
    KIND, name = "scan", "table"

    def draw(self, report, console, verbose: bool = False, **context) -> None:
        from auditor.render.report import scan_table

        scan_table(report, console, verbose=verbose)


class ScanJson(Renderer):
    """The scan's JSON document."""
    KIND, name = "scan", "json"

    def text(self, report, **context) -> str:
        from auditor.render.report import scan_json

        return scan_json(report)


class ScanMarkdown(Renderer):
    """The scan's Markdown report."""
    KIND, name = "scan", "markdown"

    def text(self, report, **context) -> str:
        from auditor.render.report import scan_markdown

        return scan_markdown(report)


class ScanSarif(Renderer):
    """The scan's SARIF log, its results placed on ``settings_file`` when it lies in the working folder."""
    KIND, name = "scan", "sarif"

    def text(self, report, settings_file=None, **context) -> str:
        from auditor.render import ci_formats

        return ci_formats.scan_sarif(report, ci_formats.settings_anchor(settings_file))


class ScanJunit(Renderer):
    """The scan's JUnit XML."""
    KIND, name = "scan", "junit"

    def text(self, report, **context) -> str:
        from auditor.render import ci_formats

        return ci_formats.scan_junit(report)


# -- scan --platform all -----------------------------------------------------------------------


class PlatformsTable(Renderer):
    """Per platform its summary line, then where the verdicts differ."""
    KIND, name = "platforms", "table"

    def draw(self, report, console, **context) -> None:
        from auditor.render import report as rep

        reports, diffs = report
        for plat, r in reports.items():
            console.print(f"[bold]{plat}[/bold]: {rep.summary_line(r)}", highlight=False)
        rep.platform_differences_table(diffs, console)


class PlatformsJson(Renderer):
    """``{"platform": "all", "reports": {platform: scan}, "differences": [...]}``."""
    KIND, name = "platforms", "json"

    def text(self, report, **context) -> str:
        reports, diffs = report
        return _dump({"platform": "all", "reports": {p: r.as_dict() for p, r in reports.items()},
                      "differences": diffs})


# -- gate ------------------------------------------------------------------------------------


class GateTable(Renderer):
    """The gate's table."""
    KIND, name = "gate", "table"

    def draw(self, report, console, **context) -> None:
        from auditor.render.upgrade_text import gate_table

        gate_table(report, console)


class GateJson(Renderer):
    """The gate's JSON document."""
    KIND, name = "gate", "json"

    def text(self, report, **context) -> str:
        return _dump(report.as_dict())


class GateMarkdown(Renderer):
    """The gate's Markdown report (also what ``--summary`` appends)."""
    KIND, name = "gate", "markdown"

    def text(self, report, **context) -> str:
        from auditor.render.upgrade_text import gate_markdown

        return gate_markdown(report)


class GateSarif(Renderer):
    """The gate's SARIF log, placed on ``settings_file`` when it lies in the working folder."""
    KIND, name = "gate", "sarif"

    def text(self, report, settings_file=None, **context) -> str:
        from auditor.render import ci_formats

        return ci_formats.gate_sarif(report, ci_formats.settings_anchor(settings_file))


class GateJunit(Renderer):
    """The gate's JUnit XML."""
    KIND, name = "gate", "junit"

    def text(self, report, **context) -> str:
        from auditor.render.ci_formats import gate_junit

        return gate_junit(report)


# -- matrix ----------------------------------------------------------------------------------


class MatrixTable(Renderer):
    """The matrix: one row per release."""
    KIND, name = "matrix", "table"

    def draw(self, report, console, **context) -> None:
        from auditor.render.upgrade_text import matrix_table

        matrix_table(report, console)


class MatrixJson(Renderer):
    """The matrix's JSON document."""
    KIND, name = "matrix", "json"

    def text(self, report, **context) -> str:
        return _dump(report.as_dict())


class MatrixMarkdown(Renderer):
    """The matrix in Markdown (also what ``--summary`` appends)."""
    KIND, name = "matrix", "markdown"

    def text(self, report, **context) -> str:
        from auditor.render.upgrade_text import matrix_markdown

        return matrix_markdown(report)


class MatrixHtml(Renderer):
    """The matrix as one HTML page."""
    KIND, name = "matrix", "html"

    def text(self, report, **context) -> str:
        from auditor.render.html import matrix_html

        return matrix_html(report)


# -- compare ---------------------------------------------------------------------------------


class CompareTable(Renderer):
    """The comparison: one row per target, one column per engine."""
    KIND, name = "compare", "table"

    def draw(self, report, console, **context) -> None:
        from auditor.render.report import compare_table

        compare_table(report, console)


class CompareJson(Renderer):
    """The comparison's JSON document."""
    KIND, name = "compare", "json"

    def text(self, report, **context) -> str:
        return _dump(report.as_dict())


class CompareMarkdown(Renderer):
    """The comparison in Markdown."""
    KIND, name = "compare", "markdown"

    def text(self, report, **context) -> str:
        from auditor.render.report import compare_markdown

        return compare_markdown(report)


class CompareHtml(Renderer):
    """The comparison as one HTML page."""
    KIND, name = "compare", "html"

    def text(self, report, **context) -> str:
        from auditor.render.html import compare_html

        return compare_html(report)


# -- explain, verify, rules ------------------------------------------------------------------


class ExplainTable(Renderer):
    """Each explanation's tree, one after the other."""
    KIND, name = "explain", "table"

    def draw(self, report, console, **context) -> None:
        from auditor.render.explain import explain_tree

        for info in report:
            explain_tree(info, console)


class ExplainJson(Renderer):
    """The explanations as a JSON list (``one``: the only one, as an object)."""
    KIND, name = "explain", "json"

    def text(self, report, one: bool = False, **context) -> str:
        return _dump(report[0] if one else report)


class VerifyTable(Renderer):
    """The engine run's table."""
    KIND, name = "verify", "table"

    def draw(self, report, console, **context) -> None:
        from auditor.render.verify import verify_table

        verify_table(report, console)


class VerifyJson(Renderer):
    """The engine run's JSON document."""
    KIND, name = "verify", "json"

    def text(self, report, **context) -> str:
        from auditor.render.verify import verify_json

        return verify_json(report)


class RulesTable(Renderer):
    """Every rule, one row each (the report is None: the rules are the registry's)."""
    KIND, name = "rules", "table"

    def draw(self, report, console, **context) -> None:
        from auditor.render.rules import rules_table

        rules_table(console)


class RulesJson(Renderer):
    """Every rule, as JSON."""
    KIND, name = "rules", "json"

    def text(self, report, **context) -> str:
        from auditor.render.rules import rules_json

        return rules_json()


class RulesMarkdown(Renderer):
    """Every rule in full, in Markdown."""
    KIND, name = "rules", "markdown"

    def text(self, report, **context) -> str:
        from auditor.render.rules import rules_markdown

        return rules_markdown(details=True)


class RuleDetailsTable(Renderer):
    """The rules chosen, in full, with their examples."""
    KIND, name = "rule-details", "table"

    def draw(self, report, console, **context) -> None:
        from auditor.render.rules import print_rule_details

        print_rule_details(console, report)


class RuleDetailsJson(Renderer):
    """The rules chosen, as JSON."""
    KIND, name = "rule-details", "json"

    def text(self, report, **context) -> str:
        from auditor.render.rules import rule_details_json

        return rule_details_json(report)


class RuleDetailsMarkdown(Renderer):
    """The rules chosen, in Markdown."""
    KIND, name = "rule-details", "markdown"

    def text(self, report, **context) -> str:
        from auditor.render.rules import rule_details_markdown

        return rule_details_markdown(report)


#: The renderers of the command line, by (report kind, format).
RENDERERS = Registry(
    ScanTable, ScanJson, ScanMarkdown, ScanSarif, ScanJunit, PlatformsTable, PlatformsJson,
    GateTable, GateJson, GateMarkdown, GateSarif, GateJunit,
    MatrixTable, MatrixJson, MatrixMarkdown, MatrixHtml, CompareTable, CompareJson, CompareMarkdown, CompareHtml,
    ExplainTable, ExplainJson, VerifyTable, VerifyJson, RulesTable, RulesJson, RulesMarkdown,
    RuleDetailsTable, RuleDetailsJson, RuleDetailsMarkdown,
)

"""EA301 ``allowlist``: the target's text model_type is not on vLLM's EAGLE-3 allowlist."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from auditor.cache import cacheable
from auditor.model.findings import Finding, Severity
from rules.allowlist.facts import EXTRACTOR, allowlist_for
from rules.base import AuditTarget, Context, Example, Rule

_SPEC = """
class SpeculativeConfig:
    def _verify_args(self):
        {body}
"""

_LIST = '''supported = {entries!r}
        if (
            self.method == "eagle3"
            and self.target_model_config
            and not any(s in self.target_model_config.hf_text_config.model_type for s in supported)
        ):
            raise ValueError("Eagle3 is only supported for some models")'''


_INLINE = '''if self.method == "eagle3" and self.target_model_config and \\
                "llama" not in self.target_model_config.hf_text_config.model_type:
            raise ValueError("Eagle3 is only supported for Llama models.")'''


def _why(error: str) -> str:
    """``does not parse (line 3: ...)`` or ``cannot be read (...)`` for a module's error."""
    return error if error.startswith("cannot be read") else f"does not parse ({error})"


def _spec(entries: list[str]) -> dict[str, str]:
    return {"vllm/config/speculative.py": _SPEC.format(body=_LIST.format(entries=entries))}


@cacheable
@dataclass
class AllowlistData:
    """EA301 details: the allowlist's ``list_name`` (None for an inline test) and ``entries``,
    the text ``model_type`` checked, or the module ``unanalysed`` that may hold the allowlist."""

    list_name: str | None = None
    entries: list[str] = field(default_factory=list)
    model_type: str | None = None
    unanalysed: str | None = None


class AllowlistRule(Rule):
    """The EAGLE-3 target model_type allowlist.

    What it does: finds the condition in vLLM's speculative config validation that tests the
    method against ``"eagle3"`` together with a membership test on the target's text
    ``model_type`` and raises, and applies it with vLLM's own semantics (substring:
    ``any(s in model_type for s in LIST)``).
    """

    CODE = "EA301"
    GATE = "allowlist"
    NAME = "model-type-not-allowlisted"
    SUMMARY = ("the text model_type is not on the EAGLE-3 allowlist (substring match, found by what the code "
               "does; renamed across releases, gone from 0.22)")
    WHY = (
        "vLLM's SpeculativeConfig validation raises ValueError before the target is built when "
        "the method is eagle3 and none of the allowlisted strings is a substring of the target's "
        "hf_text_config.model_type (vllm/config.py in 0.10.0, vllm/config/speculative.py in "
        "0.11–0.21; the list is named eagle3_target_supported, later aux_hidden_states_supported; "
        "gone from 0.22)."
    )
    HOW_TO_FIX = (
        "Add the target's text model_type to the allowlist (the codemod appends it to the list "
        "literal, or turns an inline single-name test into a list test)."
    )
    FIX_AVAILABLE = True
    DATA = AllowlistData
    VALID = [Example(_spec(["llama", "qwen"]), "LlamaForCausalLM", text_model_type="qwen3_moe")]
    INVALID = [
        Example(
            _spec(["llama", "qwen"]),
            "LlamaForCausalLM",
            text_model_type="deepseek_v3",
            expect_severity=Severity.ERROR,
        ),
        Example({"vllm/config/speculative.py": _SPEC.format(body=_INLINE)}, "LlamaForCausalLM",
                text_model_type="qwen2", expect_severity=Severity.ERROR, note="0.10.0's inline test"),
    ]

    def check(self, ctx: Context, target: AuditTarget) -> Iterator[Finding]:
        found = allowlist_for(ctx, target.method)
        if found is None:
            for path, why in ctx.facts.unanalysed(EXTRACTOR):
                yield self.finding(Severity.UNKNOWN, f"{path} may hold the {target.method} allowlist but is "
                                   f"missing from the analysis: it {_why(why)}", path, None, unanalysed=path)
            return
        path, fact = found
        if fact.kind == "refuses-all":
            shown = ""
            if fact.construct:  # spelled otherwise than ``method == "eagle3"``: name it
                shown = f": `{fact.construct}`" + (", unless Python runs with -O, which drops asserts"
                                                     if fact.construct.startswith("assert") else "")
            what = "a `raise` reached for every method" if (fact.construct or "").startswith("raise ") \
                else "an unconditional test of the method"
            yield self.finding(Severity.ERROR, f"{fact.function}() raises for every {target.method} target "
                               f"({what} at {path}:{fact.line}{shown})", path, fact.line)
            return
        if fact.kind == "rewrites-method":
            yield self.finding(Severity.UNKNOWN, f"{fact.function}() gives the method a new value by "
                               f"`{fact.construct}` at {path}:{fact.line}: which method the tests after it read "
                               f"for {target.method} is not followed", path, fact.line)
            return
        if fact.kind == "unfollowed":
            yield self.finding(Severity.UNKNOWN, f"{fact.function}() may raise for every {target.method} target: "
                               f"`{fact.construct}` at {path}:{fact.line} reads {', '.join(fact.unfollowable or [])}, "
                               "which static analysis cannot follow", path, fact.line)
            return
        if fact.unfollowable:
            yield self.finding(Severity.UNKNOWN, f"the {target.method} allowlist {fact.list_name} read at "
                               f"{path}:{fact.list_line or fact.line} depends on {', '.join(fact.unfollowable)}, "
                               "which static analysis cannot follow",
                               path, fact.list_line or fact.line, list_name=fact.list_name, entries=fact.entries)
            return
        mt = target.text_model_type
        if mt is None:
            yield self.finding(
                Severity.UNKNOWN,
                "the target's text model_type is unknown: pass --model-type or --hf-config",
                path,
                fact.list_line or fact.line,
            )
            return
        ok = any(s in mt for s in fact.entries) if fact.substring else mt in fact.entries
        if ok:
            return
        name = fact.list_name or "inline test"
        yield self.finding(
            Severity.ERROR,
            f"text model_type {mt!r} ({target.model_type_source}) is not admitted by the "
            f"{target.method} allowlist {name} {fact.entries} "
            f"({'substring' if fact.substring else 'exact'} match) in {fact.function}()",
            path,
            fact.list_line or fact.line,
            list_name=fact.list_name,
            entries=fact.entries,
            model_type=mt,
        )

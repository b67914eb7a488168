"""The rule registry: one table mapping stable codes to rule classes (ruff's ``codes.rs``)."""

from __future__ import annotations

from rules.allowlist import AllowlistRule
from rules.aux_capture import AuxCaptureRule, PPRelativeIndexRule
from rules.base import Rule
from rules.image_token import ImageTokenRule
from rules.interface import InterfaceRule, StaleMemberRule, StubMemberRule

#: Every rule, in report order.
RULES: dict[str, type[Rule]] = {
    r.CODE: r
    for r in (
        AllowlistRule,
        InterfaceRule,
        AuxCaptureRule,
        ImageTokenRule,
        StubMemberRule,
        StaleMemberRule,
        PPRelativeIndexRule,
    )
}

#: Gate ids that block a target.
BLOCKING_GATES = [r.GATE for r in RULES.values() if r.BLOCKING]

"""``[tool.eagle-audit]`` in ``pyproject.toml``: the defaults of ``eagle-audit gate`` and
``eagle-audit matrix``, so that CI and ``pre-commit`` can run them without repeating flags.

```toml
[tool.eagle-audit]
targets = ["kimi_k2"]                        # --model (architectures or model_types)
methods = ["eagle3"]                         # --method
codemods = "eagle-audit/kimi_k2.codemods.json"  # --codemods (relative to this file's folder)
allowed-warnings = ["stale-member"]          # --allow-warning (gate ids or rule codes)
fail-on-warnings = false                     # --fail-on-warnings
current = "0.16.0"                           # --current (a release or a path)
candidate = "0.18.0"                         # --candidate (a release or a path)
versions = "0.16.0.."                        # matrix --versions
model-type = "kimi_k2"                       # --model-type
hf-config = "config.json"                    # --hf-config (relative to this file's folder)
pipeline-parallel-size = 2                   # --pipeline-parallel-size
draft-config = "drafter/config.json"         # --draft-config (file or folder, relative to this file's folder)
parallel-drafting = false                    # --parallel-drafting
num-speculative-tokens = 3                   # --num-speculative-tokens
```

The file is found by walking up from the working folder to the first ``pyproject.toml`` that has
a ``[tool.eagle-audit]`` table (``--config FILE`` names one instead). Flags override the file.
Unknown keys and values of the wrong type are input errors (exit 2), never ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.model.errors import AuditError
from auditor.model.inputs import check_model_type
from auditor.model.options import (
    RunOptions,
    check_methods,
    check_num_speculative_tokens,
    check_pipeline_parallel_size,
    load_draft_config,
)

#: The table read from pyproject.toml.
TABLE = ("tool", "eagle-audit")


@dataclass(frozen=True)
class Config:
    """Settings of ``gate`` and ``matrix``: from a ``pyproject.toml`` (``path``), else defaults.

    Paths (``codemods``, ``hf_config``) are absolute once read from a file; ``current`` and
    ``candidate`` become absolute when they name a path that exists beside the file.
    """

    path: Path | None = None
    targets: tuple[str, ...] = ()
    methods: tuple[str, ...] = ("eagle3",)
    codemods: Path | None = None
    allowed_warnings: tuple[str, ...] = ()
    fail_on_warnings: bool = False
    current: str | None = None
    candidate: str | None = None
    versions: str | None = None
    model_type: str | None = None
    hf_config: Path | None = None
    pipeline_parallel_size: int = 1
    draft_config: Path | None = None
    parallel_drafting: bool = False
    num_speculative_tokens: int | None = None

    def merged(self, **flags: Any) -> "Config":
        """This config with every flag that was given (not None, not an empty list) in place of
        the file's value. Lists replace, they do not extend."""
        given = {k: (tuple(v) if isinstance(v, list) else v) for k, v in flags.items()
                 if v is not None and v != [] and v != ()}
        unknown = set(given) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(f"not a config field: {', '.join(sorted(unknown))}")
        if "allowed_warnings" in given:
            given["allowed_warnings"] = _check_warnings(list(given["allowed_warnings"]), "--allow-warning")
        if "methods" in given:
            given["methods"] = check_methods(list(given["methods"]), "--method")
        if "model_type" in given:
            check_model_type(given["model_type"], "--model-type")
        if "pipeline_parallel_size" in given:
            check_pipeline_parallel_size(given["pipeline_parallel_size"], "--pipeline-parallel-size")
        if "num_speculative_tokens" in given:
            check_num_speculative_tokens(given["num_speculative_tokens"], "--num-speculative-tokens")
        return dataclasses.replace(self, **given)

    def run_options(self, method: str | None = None, platform: str = "cuda") -> RunOptions:
        """The run these settings describe (the drafter config read and validated here), for
        ``method`` (default: the first of :attr:`methods`).

        Raises:
            AuditError: the drafter config cannot be read or has the wrong form.
        """
        draft, draft_path = (load_draft_config(self.draft_config) if self.draft_config is not None
                             else (None, None))
        return RunOptions(method=method or self.methods[0], pipeline_parallel_size=self.pipeline_parallel_size,
                          draft_config=draft, draft_config_path=draft_path, parallel_drafting=self.parallel_drafting,
                          num_speculative_tokens=self.num_speculative_tokens, platform=platform)

    def as_dict(self) -> dict:
        """The settings as plain JSON values (for reports)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = str(v) if isinstance(v, Path) else (list(v) if isinstance(v, tuple) else v)
        return out


#: Key in the file → field of :class:`Config`.
_KEYS: dict[str, str] = {
    "targets": "targets",
    "methods": "methods",
    "codemods": "codemods",
    "allowed-warnings": "allowed_warnings",
    "fail-on-warnings": "fail_on_warnings",
    "current": "current",
    "candidate": "candidate",
    "versions": "versions",
    "model-type": "model_type",
    "hf-config": "hf_config",
    "pipeline-parallel-size": "pipeline_parallel_size",
    "draft-config": "draft_config",
    "parallel-drafting": "parallel_drafting",
    "num-speculative-tokens": "num_speculative_tokens",
}


def find_pyproject(start: Path | None = None) -> Path | None:
    """The first ``pyproject.toml`` with a ``[tool.eagle-audit]`` table in ``start`` (default:
    the working folder) or one of its parents; None when there is none."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _table(_read(candidate)) is not None:
            return candidate
    return None


def load_config(path: Path | str | None = None, start: Path | None = None) -> Config:
    """Read ``[tool.eagle-audit]`` from ``path``, or from :func:`find_pyproject` (``start``);
    defaults when no file has the table.

    Raises:
        AuditError: the file is missing or is not TOML, the table has an unknown key, or a
            value has the wrong type (one line, naming the file and the key).
    """
    if path is not None:
        p = Path(path).expanduser()
        if not p.is_file():
            raise AuditError(f"--config: no such file: {p}")
        table = _table(_read(p))
        if table is None:
            raise AuditError(f"--config: {p} has no tool.eagle-audit table")
    else:
        p = find_pyproject(start)
        if p is None:
            return Config()
        table = _table(_read(p))
    return _parse(table, p.resolve())


def _read(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise AuditError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise AuditError(f"{path} is not valid TOML: {exc}") from None


def _table(data: dict) -> dict | None:
    t = data.get(TABLE[0], {})
    t = t.get(TABLE[1]) if isinstance(t, dict) else None
    return t if isinstance(t, dict) else None


def _parse(table: dict, path: Path) -> Config:
    where = f"{path} (tool.eagle-audit)"
    base = path.parent
    values: dict[str, Any] = {}
    for key, value in table.items():
        field = _KEYS.get(key)
        if field is None:
            close = difflib.get_close_matches(key, list(_KEYS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(_KEYS)}"
            raise AuditError(f"{where}: unknown key {key!r}{hint}")
        label = f"{where} {key}"
        if field in ("targets", "methods", "allowed_warnings"):
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise AuditError(f"{label}: expected a list of strings, got {value!r}")
            if field == "methods":
                value = check_methods(value, label)
            elif field == "allowed_warnings":
                value = _check_warnings(value, label)
            values[field] = tuple(value)
        elif field in ("fail_on_warnings", "parallel_drafting"):
            if not isinstance(value, bool):
                raise AuditError(f"{label}: expected true or false, got {value!r}")
            values[field] = value
        elif field == "pipeline_parallel_size":
            values[field] = check_pipeline_parallel_size(value, label)
        elif field == "num_speculative_tokens":
            values[field] = check_num_speculative_tokens(value, label)
        else:
            if not isinstance(value, str) or not value.strip():
                raise AuditError(f"{label}: expected a string, got {value!r}")
            if field in ("codemods", "hf_config", "draft_config"):
                values[field] = (base / value).resolve()
            elif field in ("current", "candidate") and (base / value).exists():
                values[field] = str((base / value).resolve())
            elif field == "model_type":
                values[field] = check_model_type(value, label)
            else:
                values[field] = value.strip()
    return Config(path=path, **values)


def warning_ids() -> dict[str, str]:
    """Every warning rule: its code and its gate id, each mapped to the gate id."""
    from rules.registry import RULES

    out = {}
    for code, r in RULES.items():
        if not r.BLOCKING:
            out[code] = r.GATE
            out[r.GATE] = r.GATE
    return out


def _check_warnings(names: list[str], label: str) -> tuple[str, ...]:
    """Normalise allowed warnings to gate ids; an unknown one is an input error."""
    known = warning_ids()
    out: list[str] = []
    for n in names:
        gate = known.get(n) or known.get(n.upper())
        if gate is None:
            raise AuditError(f"{label}: {n!r} is not a warning rule (expected one of "
                             f"{', '.join(sorted(set(known.values())))} or their codes)")
        if gate not in out:
            out.append(gate)
    return tuple(out)

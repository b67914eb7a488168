"""Settings of every command: ``[tool.eagle-audit]`` in ``pyproject.toml``, then flags.

One typed model (:class:`Settings`) serves ``scan``, ``explain``, ``fix``, ``gate``, ``matrix`` and
``compare`` (``rules``, ``cache`` and ``verify`` read no settings);
precedence is flags > settings > defaults. Every setting is named like its flag: a repeatable flag
gives a plural setting (``--model`` ↔ ``models``, ``--method`` ↔ ``methods``, ``--allow-warning`` ↔
``allow-warnings``), any other flag its own name without the dashes (``--candidate-version`` ↔
``candidate-version``). :data:`SETTINGS` lists them with the commands that read each; the README's
settings block is generated from it (``tests/test_cli_settings.py`` keeps them equal).

The file is found by walking up from the working folder to the first ``pyproject.toml`` that has
a ``[tool.eagle-audit]`` table; ``--config FILE`` names one instead and ``--no-config`` reads none.
The table is validated against ``auditor/model/schemas/settings.json``: an unknown key or a value
of the wrong form is an input error naming the file and the key (exit 2), never ignored. The old
spellings (``targets``, ``allowed-warnings``, ``current``, ``candidate``) are still read, each
with a deprecation notice (:attr:`Settings.deprecations`; the command line prints them on stderr).
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.model.errors import AuditError
from auditor.model.inputs import check_json, check_model_type, read_input_bytes
from auditor.model.options import (
    RunOptions,
    check_methods,
    check_num_speculative_tokens,
    check_pipeline_parallel_size,
    load_draft_config,
)

#: The table read from pyproject.toml.
TABLE = ("tool", "eagle-audit")

#: Largest settings file read (a pyproject.toml is a few kB).
MAX_SETTINGS_BYTES = 1 << 20

#: The commands that read settings.
COMMANDS = ("scan", "explain", "fix", "gate", "matrix", "compare")

_RUN = ("scan", "fix", "gate", "matrix", "compare")


@dataclass(frozen=True)
class Setting:
    """One key of ``[tool.eagle-audit]``: its ``field`` of :class:`Settings`, the ``flag`` it
    stands for, the ``commands`` that read it, a ``help`` phrase, an ``example`` value (TOML
    text, for the README), the ``old`` spellings still read with a deprecation notice, and
    whether the example is a ``placeholder`` (a file of the user's: the README's block shows it
    commented out, so that the block runs as copied)."""

    key: str
    field: str
    flag: str
    commands: tuple[str, ...]
    help: str
    example: str
    old: tuple[str, ...] = ()
    placeholder: bool = False


#: Every setting, in the order of the README's settings block.
SETTINGS: tuple[Setting, ...] = (
    Setting("models", "models", "--model", COMMANDS, "targets: architectures or model_types",
            '["kimi_k2"]', old=("targets",)),
    Setting("methods", "methods", "--method", COMMANDS, "speculative methods (scan audits each; the "
            "others take the first)", '["eagle3"]'),
    Setting("model-type", "model_type", "--model-type", _RUN, "the targets' text model_type", '"kimi_k2"'),
    Setting("hf-config", "hf_config", "--hf-config", ("scan", "fix", "gate", "compare"), "the checkpoint's config.json or its "
            "folder (relative to this file)", '"checkpoint"', placeholder=True),
    Setting("pipeline-parallel-size", "pipeline_parallel_size", "--pipeline-parallel-size", _RUN,
            "the target's pipeline-parallel size", "1"),
    Setting("draft-config", "draft_config", "--draft-config", _RUN, "the drafter's config.json or its folder "
            "(relative to this file)", '"drafter"', placeholder=True),
    Setting("parallel-drafting", "parallel_drafting", "--parallel-drafting", _RUN,
            "the speculative config's parallel_drafting", "false"),
    Setting("num-speculative-tokens", "num_speculative_tokens", "--num-speculative-tokens", _RUN,
            "the speculative config's num_speculative_tokens", "3"),
    Setting("codemods", "codemods", "--codemods", ("gate",), "your codemods file, replayed on the candidate "
            "(relative to this file)", '"eagle-audit/kimi_k2.vllm-0.16.0.eagle3.codemods.json"', placeholder=True),
    Setting("allow-warnings", "allow_warnings", "--allow-warning", ("gate",), "warnings to accept (gate ids "
            "or rule codes)", '["stale-member"]', old=("allowed-warnings",)),
    Setting("fail-on-warnings", "fail_on_warnings", "--fail-on-warnings", ("gate",),
            "break the gate on a warning that is not allowed", "false"),
    Setting("current-version", "current_version", "--current-version", ("gate",), "the release in use (a "
            "version, or a path relative to this file)", '"0.16.0"', old=("current",)),
    Setting("candidate-version", "candidate_version", "--candidate-version", ("gate",), "the release to "
            "upgrade to (a version, or a path relative to this file)", '"0.18.0"', old=("candidate",)),
    Setting("versions", "versions", "--versions", ("matrix",), "releases: a list, a range or both (each "
            "release not yet in the cache is a download of 30-40 MB; matrix says how many before it starts)",
            '"0.16.0..0.18.0"'),
)

#: Key (new or old spelling) → its setting.
_BY_KEY: dict[str, Setting] = {k: s for s in SETTINGS for k in (s.key, *s.old)}
#: Field of :class:`Settings` → its setting.
_BY_FIELD: dict[str, Setting] = {s.field: s for s in SETTINGS}


def setting(field: str) -> Setting:
    """The setting of a :class:`Settings` field (``allow_warnings``): its current key in
    ``[tool.eagle-audit]`` and its flag, for messages that tell the user what to write.

    Raises:
        KeyError: no setting has that field.
    """
    return _BY_FIELD[field]


@dataclass(frozen=True)
class Settings:
    """The settings of one run: defaults, replaced by a ``pyproject.toml`` (``path``), replaced
    by the flags given (:meth:`merged`). The fields are those of :data:`SETTINGS`.

    Paths (``codemods``, ``hf_config``, ``draft_config``) are absolute once read from a file;
    ``current_version`` and ``candidate_version`` become absolute when they name a path that
    exists beside the file. ``deprecations`` holds one notice per old spelling the file used.
    """

    path: Path | None = None
    models: tuple[str, ...] = ()
    methods: tuple[str, ...] = ("eagle3",)
    model_type: str | None = None
    hf_config: Path | None = None
    pipeline_parallel_size: int = 1
    draft_config: Path | None = None
    parallel_drafting: bool = False
    num_speculative_tokens: int | None = None
    codemods: Path | None = None
    allow_warnings: tuple[str, ...] = ()
    fail_on_warnings: bool = False
    current_version: str | None = None
    candidate_version: str | None = None
    versions: str | None = None
    deprecations: tuple[str, ...] = ()
    origins: tuple[tuple[str, str], ...] = ()

    def label(self, field: str) -> str:
        """Where the value of ``field`` came from, for an error message: the file and the key
        (``/p/pyproject.toml [tool.eagle-audit] draft-config``) when the file set it, else the
        flag (``--draft-config``), so that a bad value is blamed on what the user wrote.

        Raises:
            KeyError: ``field`` is not a field of :data:`SETTINGS`.
        """
        return dict(self.origins).get(field) or _BY_FIELD[field].flag

    def sources(self, shown: str | None = None) -> dict[str, str]:
        """The flags whose value this settings file gave (no flag was given) → the file and key
        that gave it, for findings (``{"--model-type": "pyproject.toml model-type"}``; ``shown``:
        how to show the file, default its path).

        Returns:
            A dict for :func:`relabel_sources` (empty without a settings file).
        """
        if self.path is None:
            return {}
        out = {}
        for field, _ in self.origins:
            st = _BY_FIELD.get(field)
            if st is not None and field in ("model_type", "hf_config"):
                out[st.flag] = f"{shown or self.path} {st.key}"
        return out

    def merged(self, **flags: Any) -> "Settings":
        """These settings with every flag that was given (not None, not an empty list) in place
        of the file's value. Lists replace, they do not extend.

        Raises:
            AuditError: a flag value of the wrong form (named by its flag).
            TypeError: a keyword that is not a field.
        """
        given = {k: (tuple(v) if isinstance(v, list) else v) for k, v in flags.items()
                 if v is not None and v != [] and v != ()}
        unknown = set(given) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(f"not a settings field: {', '.join(sorted(unknown))}")
        if "allow_warnings" in given:
            given["allow_warnings"] = _check_warnings(list(given["allow_warnings"]), "--allow-warning")
        if "methods" in given:
            given["methods"] = check_methods(list(given["methods"]), "--method")
        if "model_type" in given:
            check_model_type(given["model_type"], "--model-type")
        if "pipeline_parallel_size" in given:
            check_pipeline_parallel_size(given["pipeline_parallel_size"], "--pipeline-parallel-size")
        if "num_speculative_tokens" in given:
            check_num_speculative_tokens(given["num_speculative_tokens"], "--num-speculative-tokens")
        origins = tuple((f, where) for f, where in self.origins if f not in given)  # a flag given: its own name
        return dataclasses.replace(self, origins=origins, **given)

    def run_options(self, method: str | None = None, platform: str = "cuda") -> RunOptions:
        """The run these settings describe (the drafter config read and validated here), for
        ``method`` (default: the first of :attr:`methods`).

        Raises:
            AuditError: the drafter config cannot be read or has the wrong form.
        """
        draft, draft_path = (load_draft_config(self.draft_config, self.label("draft_config"))
                             if self.draft_config is not None else (None, None))
        return RunOptions(method=method or self.methods[0], pipeline_parallel_size=self.pipeline_parallel_size,
                          draft_config=draft, draft_config_path=draft_path, parallel_drafting=self.parallel_drafting,
                          num_speculative_tokens=self.num_speculative_tokens, platform=platform)

    def as_dict(self) -> dict:
        """The settings as plain JSON values (for reports)."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name == "origins":
                continue
            v = getattr(self, f.name)
            out[f.name] = str(v) if isinstance(v, Path) else (list(v) if isinstance(v, tuple) else v)
        return out


def find_pyproject(start: Path | None = None) -> Path | None:
    """The first ``pyproject.toml`` with a ``[tool.eagle-audit]`` table in ``start`` (default:
    the working folder) or one of its parents; None when there is none.

    Raises:
        AuditError: a ``pyproject.toml`` on the way cannot be read or is not TOML.
    """
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _table(_read(candidate, "settings"), candidate) is not None:
            return candidate
    return None


def load_settings(path: Path | str | None = None, start: Path | None = None, *, enabled: bool = True) -> Settings:
    """Read ``[tool.eagle-audit]`` from ``path`` (``--config``), or from :func:`find_pyproject`
    (``start``); the defaults when no file has the table, or when ``enabled`` is False
    (``--no-config``: no file is read at all).

    Raises:
        AuditError: the file is missing or is not TOML, the table has an unknown key, or a
            value has the wrong form (one line, naming the file and the key).
    """
    if not enabled:
        if path is not None:
            raise AuditError("give either --config FILE or --no-config, not both")
        return Settings()
    if path is not None:
        p = Path(path).expanduser()
        table = _table(_read(p, "--config"), p)
        if table is None:
            raise AuditError(f"--config: {p} has no tool.eagle-audit table")
    else:
        p = find_pyproject(start)
        if p is None:
            return Settings()
        table = _table(_read(p, "settings"), p)
    return _parse(table, p.resolve())


def settings_markdown() -> str:
    """The README's settings block: one TOML line per setting with its flag and the commands
    that read it (generated from :data:`SETTINGS`). A setting whose example is a placeholder
    (a path to a file of the user's) is commented out: the block, copied as is, is a valid
    table whose every value works."""
    lines = ["```toml", "[tool.eagle-audit]"]
    for s in SETTINGS:
        used = "every command that reads settings" if s.commands == COMMANDS else ", ".join(s.commands)
        if s.placeholder:
            lines += [f"# {s.flag} ({used}): {s.help}; a placeholder: uncomment it with your path",
                      f"# {s.key} = {s.example}"]
        else:
            lines += [f"# {s.flag} ({used}): {s.help}", f"{s.key} = {s.example}"]
    lines.append("```")
    return "\n".join(lines)


def _read(path: Path, label: str) -> dict:
    """The TOML document of a settings file: a regular file of at most :data:`MAX_SETTINGS_BYTES`
    (a FIFO, a device or a folder is refused unread), UTF-8, parsed with ``tomllib``.

    Raises:
        AuditError: one line naming ``label`` and the file.
    """
    data = read_input_bytes(path, label, MAX_SETTINGS_BYTES, "a settings file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AuditError(f"{label}: {path} is not UTF-8 text (byte {exc.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AuditError(f"{label}: {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise AuditError(f"{label}: {path} nests too deep for a settings file") from None
    except ValueError as exc:  # an integer of more digits than Python converts (its hint names an API)
        if "integer string conversion" not in str(exc):
            raise
        raise AuditError(f"{label}: {path} holds an integer of more than {sys.get_int_max_str_digits()} digits, "
                         "which no setting needs") from None


def _path(base: Path, value: str, label: str) -> Path:
    """``value`` (a path setting, relative to the settings file's folder ``base``) made absolute,
    symbolic links resolved.

    Raises:
        AuditError: a NUL in the value, or a loop of symbolic links on the way.
    """
    if "\0" in value:
        raise AuditError(f"{label}: {value!r} is not a path (it holds a NUL character)")
    try:
        return (base / value).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of symbolic links (Python < 3.13)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "a loop of symbolic links"
        raise AuditError(f"{label}: cannot resolve the path {value!r}: {why}") from None


def _table(data: dict, path: Path) -> dict | None:
    """The ``[tool.eagle-audit]`` table of a parsed pyproject at ``path``, or None when it has none.

    Raises:
        AuditError: ``tool.eagle-audit`` is there but is no table (``[[tool.eagle-audit]]``, an
            array of tables, or a string): a setting written so would otherwise be ignored.
    """
    t = data.get(TABLE[0], {})
    if not isinstance(t, dict) or TABLE[1] not in t:
        return None
    t = t[TABLE[1]]
    if not isinstance(t, dict):
        if isinstance(t, list) and t and all(isinstance(x, dict) for x in t):
            shape = "an array of tables ([[tool.eagle-audit]])"
        else:
            shape = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
                     list: "an array"}.get(type(t), "a value")
        raise AuditError(f"{path} tool.eagle-audit: {shape}, not a table; write the settings under one "
                         "[tool.eagle-audit] table")
    return t


def _parse(table: dict, path: Path) -> Settings:
    where = f"{path} [tool.eagle-audit]"
    for key in table:
        if key not in _BY_KEY:
            close = difflib.get_close_matches(key, [s.key for s in SETTINGS], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(s.key for s in SETTINGS)}"
            raise AuditError(f"{where} {key}: not a setting{hint}")
    try:
        check_json(table, where, "settings")  # the form of every value (the message names the key)
    except AuditError as exc:  # one format for every settings error: FILE [tool.eagle-audit] KEY: reason
        raise AuditError(str(exc).replace(f"{where}: ", f"{where} ", 1)) from None
    base = path.parent
    values: dict[str, Any] = {}
    notes: list[str] = []
    origins: list[tuple[str, str]] = []
    for key, value in table.items():
        setting = _BY_KEY[key]
        field = setting.field
        label = f"{where} {key}"
        origins.append((field, label))
        if key != setting.key:
            if setting.key in table:
                raise AuditError(f"{where} {key}: the same setting as {setting.key!r}; keep {setting.key!r}")
            notes.append(f"{path}: setting {key!r} is deprecated; call it {setting.key!r} (like {setting.flag})")
        if field in ("models", "methods", "allow_warnings"):
            value = [value] if isinstance(value, str) else list(value)
            if field == "methods":
                value = check_methods(value, label)
            elif field == "allow_warnings":
                value = _check_warnings(value, label)
            values[field] = tuple(value)
        elif field == "pipeline_parallel_size":
            values[field] = check_pipeline_parallel_size(value, label)
        elif field == "num_speculative_tokens":
            values[field] = check_num_speculative_tokens(value, label)
        elif field in ("codemods", "hf_config", "draft_config"):
            values[field] = _path(base, value, label)
        elif field in ("current_version", "candidate_version"):
            values[field] = str(_path(base, value, label)) if (base / value).exists() else value.strip()
        elif field == "model_type":
            values[field] = check_model_type(value, label)
        elif isinstance(value, str):
            values[field] = value.strip()
        else:
            values[field] = value
    return Settings(path=path, deprecations=tuple(notes), origins=tuple(origins), **values)


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


def relabel_sources(specs: list, sources: dict[str, str] | None) -> list:
    """``specs`` (:class:`~auditor.model.results.TargetSpec`) with each ``source`` that names a
    flag (``--model-type``, ``--hf-config``) replaced by where the value really came from, as
    ``sources`` maps them (``{"--model-type": "pyproject.toml model-type"}``, from
    :meth:`Settings.sources`), so that a finding says "(pyproject.toml model-type)" when no flag
    was given."""
    import dataclasses

    if not sources:
        return list(specs)
    return [dataclasses.replace(sp, source=sources[sp.source]) if sp.source in sources else sp for sp in specs]


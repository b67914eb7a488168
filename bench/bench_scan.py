"""Speed of eagle-audit on a real vLLM release, reported as ratios (never as timed tests).

One run, on one tree (default: vLLM 0.33.0, fetched through pip's index and extracted once
into a temporary folder), measures:

- baseline: a bare single-process stdlib ``ast.parse`` loop over ``vllm/model_executor/models/``;
- index: building the index of the same files (``Tree.prefetch``, no cache);
- cold full scan: every registry architecture, no cache, from opening the tree to the report;
- warm full scan: the same with the content-keyed cache filled by the cold scan;
- single: ``--model kimi_k2`` (cold, no cache);
- peak RSS of this process and of its worker processes (``resource.getrusage``).

Usage: ``python bench/bench_scan.py [--version 0.33.0 | --tree PATH] [--repeat 3]``.
Each measured job is paired with a baseline run right before it; the median ratio is reported.
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.engines.vllm.targets import resolve_targets
from auditor.index.tree import SummaryCache  # noqa: E402
from auditor.orchestration.scan import Auditor, make_tree  # noqa: E402
from auditor.source.fetch import fetch_release  # noqa: E402
from auditor.source.sources import FolderSource  # noqa: E402


def extract(version: str) -> Path:
    """Extract the release's sdist once into a temporary folder; returns the folder with vllm/."""
    archive = fetch_release(version, progress=False)
    dest = Path(tempfile.mkdtemp(prefix=f"eagle-audit-bench-{version}-"))
    with tarfile.open(archive) as tf:
        members = [m for m in tf.getmembers() if "/vllm/" in m.name and m.name.endswith(".py") or m.name.endswith("PKG-INFO")]
        tf.extractall(dest, members=members, filter="data")
    (root,) = [p for p in dest.iterdir() if p.is_dir()]
    return root


def baseline(root: Path) -> float:
    files = sorted((root / "vllm" / "model_executor" / "models").rglob("*.py"))
    t = time.perf_counter()
    for f in files:
        ast.parse(f.read_bytes())
    return time.perf_counter() - t


def index_only(root: Path) -> float:
    t = time.perf_counter()
    tree = make_tree(FolderSource(root), SummaryCache(enabled=False))
    tree.prefetch([p for p in tree.files if p.startswith("vllm/model_executor/models/")])
    return time.perf_counter() - t


def full_scan(root: Path, cache: SummaryCache) -> tuple[float, dict]:
    t = time.perf_counter()
    a = Auditor(make_tree(FolderSource(root), cache))
    specs = resolve_targets(a.registry, [])
    report = a.scan(specs, ["eagle3"], prefetch=True)
    elapsed = time.perf_counter() - t
    return elapsed, report.as_dict()["summary"]


def single(root: Path, name: str) -> float:
    t = time.perf_counter()
    a = Auditor(make_tree(FolderSource(root), SummaryCache(enabled=False)))
    specs = resolve_targets(a.registry, [name])
    a.scan(specs, ["eagle3"])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="0.33.0")
    ap.add_argument("--tree", help="a folder that contains vllm/ (instead of --version)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default="kimi_k2")
    args = ap.parse_args()
    root = Path(args.tree) if args.tree else extract(args.version)
    try:
        # Each repeat runs the baseline right before each measured job, and the ratio of the
        # pair is kept: on a shared machine the speed drifts between runs, and a ratio of two
        # neighbouring runs is steadier than the ratio of two minima. The median is reported.
        cache_dir = Path(tempfile.mkdtemp(prefix="eagle-audit-bench-cache-"))
        full_scan(root, SummaryCache(root=cache_dir))  # fill the cache for the warm runs
        rows: dict[str, list[tuple[float, float]]] = {"index": [], "cold": [], "warm": [], "single": []}
        summary = None
        for _ in range(args.repeat):
            b = baseline(root)
            rows["index"].append((index_only(root), b))
            b = baseline(root)
            t, summary = full_scan(root, SummaryCache(enabled=False))
            rows["cold"].append((t, b))
            b = baseline(root)
            rows["warm"].append((full_scan(root, SummaryCache(root=cache_dir))[0], b))
            rows["single"].append((single(root, args.model), t))
        shutil.rmtree(cache_dir, ignore_errors=True)

        def med(key: str) -> tuple[float, float]:
            ratios = sorted(x / y for x, y in rows[key])
            times = sorted(x for x, _ in rows[key])
            return times[len(times) // 2], ratios[len(ratios) // 2]

        self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        bases = sorted(y for k in ("index", "cold", "warm") for _, y in rows[k])
        print(f"tree: {root}  (cpus: {os.cpu_count()}, {args.repeat} repeats, medians)")
        print(f"verdicts (full scan, eagle3): {summary}")
        print(f"baseline ast.parse loop over model_executor/models: {bases[len(bases) // 2]:.3f} s "
              f"(range {bases[0]:.2f}-{bases[-1]:.2f})")
        for key, label, target in (
            ("index", "index build (same files, no cache)", ""),
            ("cold", "cold full scan (no cache)", "  (target <= 1.0x)"),
            ("warm", "warm full scan (content cache)", "  (target <= 0.1x)"),
        ):
            t, r = med(key)
            print(f"{label + ':':38s} {t:.3f} s  ratio {r:.2f}x{target}")
        t, r = med("single")
        print(f"{'single --model ' + args.model + ' (cold):':38s} {t:.3f} s  ratio to cold full scan {r:.2f}x  (target <= 0.2x)")
        print(f"peak RSS: this process {self_rss:.0f} MB, largest worker {child_rss:.0f} MB  (target <= 300 MB)")
    finally:
        if not args.tree:
            shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()

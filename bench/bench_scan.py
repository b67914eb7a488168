"""Speed of eagle-audit on a real vLLM release, reported as ratios (never as timed tests).

One run, on one tree (default: vLLM 0.33.0, fetched through pip's index; extracted once into a
temporary folder for the in-process part), measures two things.

**In-process** (``--part in-process``): functions called in this process, against a bare
single-process stdlib ``ast.parse`` loop over ``vllm/model_executor/models/`` of the extracted
folder:

- index: building the index of the same files (``Tree.prefetch``, no cache);
- cold full scan: every registry architecture, no cache, from opening the tree to the report;
- warm full scan: the same with the content-keyed cache filled by the cold scan;
- single: ``--model kimi_k2`` (cold, no cache), as a ratio to the cold full scan;
- peak RSS of this process and of its worker processes (``resource.getrusage``).

**Whole process** (``--part process``): the command a user runs, ``eagle-audit scan SOURCE
--format json --no-progress`` as a subprocess (interpreter start, imports, reading the source,
the scan, the JSON on stdout), against a bare ``python -c`` loop that ``ast.parse``-es every
file of ``vllm/model_executor/models/`` read the same way (SOURCE is the release archive, read in
place, and with ``--source both`` also the extracted folder):

- cold: an empty cache folder (``EAGLE_AUDIT_CACHE_DIR``), so the run also writes the caches;
- cold ``--no-cache``: nothing read from or written to any cache;
- warm: the cache folder a previous run of the same command filled;
- single cold / single warm: ``--model kimi_k2`` with an empty / a filled cache folder;
- peak RSS of each job (``os.wait4`` from a small launcher: the largest process, workers included).

Usage: ``python bench/bench_scan.py [--version 0.33.0 | --tree PATH] [--repeat 5]
[--part all|in-process|process] [--source archive|folder|both]``.
Each measured job is paired with a baseline run right before it; the median ratio is reported.
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.hf.targets import resolve_targets
from auditor.index.tree import SummaryCache  # noqa: E402
from auditor.orchestration.scan import Auditor, make_tree  # noqa: E402
from auditor.source.fetch import fetch_release  # noqa: E402
from auditor.source.folder import FolderSource  # noqa: E402


def extract(archive: Path) -> Path:
    """Extract a release's sdist once into a temporary folder; returns the folder with vllm/."""
    dest = Path(tempfile.mkdtemp(prefix=f"eagle-audit-bench-{archive.name}-"))
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


# -- whole process ------------------------------------------------------------------------------

#: The bare loop, reading ``vllm/model_executor/models/**/*.py`` from a folder.
BARE_FOLDER = """
import ast, pathlib, sys
for f in sorted((pathlib.Path(sys.argv[1]) / "vllm" / "model_executor" / "models").rglob("*.py")):
    ast.parse(f.read_bytes())
"""

#: The bare loop, reading the same files from the release archive in one sequential pass (as
#: eagle-audit reads an sdist: decompressing the whole stream).
BARE_ARCHIVE = """
import ast, sys, tarfile
with tarfile.open(sys.argv[1], "r|*") as tf:
    for m in tf:
        parts = m.name.split("/")
        if m.isfile() and m.name.endswith(".py") and parts[1:4] == ["vllm", "model_executor", "models"]:
            ast.parse(tf.extractfile(m).read())
"""


def eagle_audit() -> list[str]:
    """The ``eagle-audit`` console script of this interpreter's environment (else
    ``python -m auditor``)."""
    script = Path(sys.executable).parent / "eagle-audit"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "auditor"]


#: Runs ``argv[2:]`` and writes ``"<seconds> <ru_maxrss KiB>"`` to ``argv[1]``. On Linux a process
#: reports as its peak RSS at least the size of the process it was spawned from (``exec`` keeps
#: the old image's high-water mark), so the jobs are spawned from this small interpreter, not
#: from the bench (which is large once the in-process part has run); the timing is taken here
#: too, around the job only.
TRAMPOLINE = """
import os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t = time.perf_counter()
pid = os.posix_spawn(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
elapsed = time.perf_counter() - t
with open(out, "w") as fh:
    fh.write(f"{elapsed} {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_process(argv: list[str], cache_dir: Path | None = None) -> tuple[float, float]:
    """Run ``argv`` (an absolute executable first) to completion, output discarded:
    ``(seconds, peak RSS in MB)``, the RSS being the largest of the process and its waited-for
    workers. Exit codes 0 and 1 (a blocked target) are fine; anything else stops the bench with
    the stderr. :func:`run_process_cpu` also gives the CPU seconds."""
    return run_process_cpu(argv, cache_dir)[:2]


def run_process_cpu(argv: list[str], cache_dir: Path | None = None) -> tuple[float, float, float]:
    """As :func:`run_process`, and the CPU seconds (user + system) of the process and its
    waited-for workers, last: on a loaded machine, the figure that depends least on what else
    runs."""
    env = dict(os.environ, NO_COLOR="1")
    env.pop("FORCE_COLOR", None)
    if cache_dir is not None:
        env["EAGLE_AUDIT_CACHE_DIR"] = str(cache_dir)
    with tempfile.TemporaryFile() as errfile, tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result"
        code = subprocess.run([sys.executable, "-c", TRAMPOLINE, str(result), *argv],
                              stdout=subprocess.DEVNULL, stderr=errfile, env=env).returncode
        if code not in (0, 1):
            errfile.seek(0)
            raise SystemExit(f"{' '.join(argv)} exited {code}: {errfile.read().decode()[-2000:]}")
        elapsed, maxrss, cpu = result.read_text().split()
    return float(elapsed), int(maxrss) / 1024, float(cpu)


def whole_process(sources: dict[str, Path], repeat: int, model: str) -> None:
    """Paired whole-process runs per source kind (``archive``/``folder``); prints medians."""
    tool = eagle_audit()
    for kind, src in sources.items():
        bare = [sys.executable, "-c", BARE_ARCHIVE if kind == "archive" else BARE_FOLDER, str(src)]
        scan = [*tool, "scan", str(src), "--format", "json", "--no-progress"]
        single = [*scan, "--model", model]
        work = Path(tempfile.mkdtemp(prefix="eagle-audit-bench-process-"))
        try:
            filled = {"full": work / "warm-full", "single": work / "warm-single"}
            run_process(scan, filled["full"])  # fill the caches the warm runs read
            run_process(single, filled["single"])
            jobs = {
                "cold": (scan, None),
                "cold --no-cache": ([*scan, "--no-cache"], None),
                "warm": (scan, filled["full"]),
                f"single --model {model} cold": (single, None),
                f"single --model {model} warm": (single, filled["single"]),
            }
            rows: dict[str, list[tuple[float, float, float]]] = {k: [] for k in jobs}
            bares: list[tuple[float, float]] = []
            for i in range(repeat):
                for name, (argv, cache) in jobs.items():
                    b = run_process(bare)
                    bares.append(b)
                    t, rss = run_process(argv, cache if cache is not None else work / f"cold-{i}-{len(bares)}")
                    rows[name].append((t, b[0], rss))
            print(f"\nwhole process, {kind}: {src}  ({repeat} repeats, paired, medians)")
            print(f"  tool: {' '.join(tool)} scan ... --format json --no-progress")
            bt = sorted(b for b, _ in bares)
            print(f"  bare python -c ast.parse loop over vllm/model_executor/models/: {bt[len(bt) // 2]:.3f} s "
                  f"(range {bt[0]:.2f}-{bt[-1]:.2f}), peak RSS {max(r for _, r in bares):.0f} MB")
            goals = {"cold": "  (goal <= 1.0x)", "warm": "  (goal <= 0.1x)"}
            for name, vals in rows.items():
                ratios = sorted(t / b for t, b, _ in vals)
                times = sorted(t for t, _, _ in vals)
                print(f"  {name + ':':34s} {times[len(times) // 2]:.3f} s  ratio {ratios[len(ratios) // 2]:.2f}x"
                      f"  (range {ratios[0]:.2f}-{ratios[-1]:.2f}), peak RSS {max(r for _, _, r in vals):.0f} MB"
                      f"{goals.get(name, '')}")
        finally:
            shutil.rmtree(work, ignore_errors=True)


# -- main -----------------------------------------------------------------------------------------


def in_process(root: Path, repeat: int, model: str) -> None:
    """The in-process ratios (see the module docstring); prints medians."""
    # Each repeat runs the baseline right before each measured job, and the ratio of the
    # pair is kept: on a shared machine the speed drifts between runs, and a ratio of two
    # neighbouring runs is steadier than the ratio of two minima. The median is reported.
    cache_dir = Path(tempfile.mkdtemp(prefix="eagle-audit-bench-cache-"))
    full_scan(root, SummaryCache(root=cache_dir))  # fill the cache for the warm runs
    rows: dict[str, list[tuple[float, float]]] = {"index": [], "cold": [], "warm": [], "single": []}
    summary = None
    for _ in range(repeat):
        b = baseline(root)
        rows["index"].append((index_only(root), b))
        b = baseline(root)
        t, summary = full_scan(root, SummaryCache(enabled=False))
        rows["cold"].append((t, b))
        b = baseline(root)
        rows["warm"].append((full_scan(root, SummaryCache(root=cache_dir))[0], b))
        rows["single"].append((single(root, model), t))
    shutil.rmtree(cache_dir, ignore_errors=True)

    def med(key: str) -> tuple[float, float]:
        ratios = sorted(x / y for x, y in rows[key])
        times = sorted(x for x, _ in rows[key])
        return times[len(times) // 2], ratios[len(ratios) // 2]

    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    bases = sorted(y for k in ("index", "cold", "warm") for _, y in rows[k])
    print(f"in process, folder: {root}  (cpus: {os.cpu_count()}, {repeat} repeats, medians)")
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
    print(f"{'single --model ' + model + ' (cold):':38s} {t:.3f} s  ratio to cold full scan {r:.2f}x  (target <= 0.2x)")
    print(f"peak RSS: this process {self_rss:.0f} MB, largest worker {child_rss:.0f} MB  (target <= 300 MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="0.33.0")
    ap.add_argument("--tree", help="a folder that contains vllm/ (instead of --version)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default="kimi_k2")
    ap.add_argument("--part", choices=("all", "in-process", "process"), default="all")
    ap.add_argument("--source", choices=("archive", "folder", "both"), default="archive",
                    help="what the whole-process runs read (default: the release archive, in place)")
    args = ap.parse_args()
    archive = None if args.tree else fetch_release(args.version, progress=False)
    root = Path(args.tree) if args.tree else None
    need_folder = args.part != "process" or args.source != "archive" or archive is None
    if root is None and need_folder:
        root = extract(archive)
    try:
        if args.part in ("all", "in-process"):
            in_process(root, args.repeat, args.model)
        if args.part in ("all", "process"):
            sources = {}
            if archive is not None and args.source in ("archive", "both"):
                sources["archive"] = archive
            if root is not None and (args.source in ("folder", "both") or archive is None):
                sources["folder"] = root
            whole_process(sources, args.repeat, args.model)
    finally:
        if root is not None and not args.tree:
            shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()

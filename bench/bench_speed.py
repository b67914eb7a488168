"""The speed targets of issue 18, measured side by side in one run, as ratios to one bare loop.

Every job is a whole process (interpreter start, imports, the work, the output), run from a small
launcher that times it and reads its peak RSS (``os.wait4``: the largest of the process and its
waited-for workers), with stdout discarded. The yardstick is a bare ``python -c`` loop that
``ast.parse``-es every file of ``vllm/model_executor/models/`` of an extracted vLLM 0.33.0 folder;
each job is paired with a bare run right before it, and the median of the pairs' ratios is kept.

Jobs (``eagle-audit`` is ``python -m auditor`` run from this checkout, so that the checkout's code
is measured, not that of whichever checkout the environment's console script was installed from):

- ``cold``: ``scan FOLDER --format json --no-progress --exit-zero`` over the extracted 0.33.0
  folder, with an empty cache folder (``EAGLE_AUDIT_CACHE_DIR``; its ``archives`` links to the
  real archive cache so that nothing is downloaded);
- ``warm``: the same with the cache folder a previous run of the same command filled;
- ``warm --vllm-version``: ``scan --vllm-version 0.33.0 ...`` (the archive cached, the cache
  folder filled by a previous run of the same command);
- ``fix kimi_k2`` and ``single kimi_k2``: ``fix --model kimi_k2 --vllm-version 0.16.0`` (the dry-run
  diff) and ``scan --vllm-version 0.16.0 --model kimi_k2 ...``, both with an empty cache folder,
  reported as the ratio of the two (paired, same repeat);
- peak RSS: of the cold full scan (the largest of its processes).

Each job's wall seconds and CPU seconds (user + system of the process and its waited-for workers,
from ``os.wait4``) are both kept, with both ratios: on a loaded machine the CPU ratio is the
steadier one.

Bytecode is compiled once into a private ``PYTHONPYCACHEPREFIX`` (as an installed tool has it),
also where the environment sets ``PYTHONDONTWRITEBYTECODE``.

Usage: ``python bench/bench_speed.py [--repeat 3] [--label NAME] [--checkout DIR]`` (``DIR``: measure
that checkout's code, e.g. an earlier commit's ``git archive``, with this script). The figures are printed and
written to ``bench/results/speed-NAME.json`` and ``.md`` (raw seconds, ratios, RSS, the load
average before and after, the commit).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_scan import BARE_FOLDER, extract, run_process, run_process_cpu  # noqa: E402

from auditor.source.fetch import fetch_release  # noqa: E402
from auditor.source.pipconfig import archive_cache_dir  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

#: The issue's targets: job → (what the ratio is to, the bound).
TARGETS = {
    "cold": ("bare", 1.0),
    "warm": ("bare", 0.1),
    "warm --vllm-version": ("bare", 0.1),
    "fix kimi_k2": ("single kimi_k2", 2.0),
}
RSS_TARGET_MB = 150.0


def fresh_cache(work: Path, name: str) -> Path:
    """An empty cache folder under ``work`` whose ``archives`` links to the real archive cache."""
    d = work / name
    d.mkdir()
    (d / "archives").symlink_to(archive_cache_dir(), target_is_directory=True)
    return d


def median(xs: list[float]) -> float:
    """The median (upper middle for an even count)."""
    s = sorted(xs)
    return s[len(s) // 2]


def commit() -> str:
    """The checkout's commit and whether it has uncommitted changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "auditor", "rules"],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"
    return head + (" (uncommitted changes)" if dirty else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--label", default="now")
    ap.add_argument("--commit", help="the commit measured (default: this checkout's HEAD)")
    ap.add_argument("--checkout", help="measure the code of this checkout (a folder with auditor/ and rules/) "
                                       "instead of this one's")
    ap.add_argument("--render", metavar="JSON", help="only write the report of an earlier run's JSON again")
    args = ap.parse_args()
    if args.render:
        return report(json.loads(Path(args.render).read_text()))
    repo = Path(args.checkout).resolve() if args.checkout else Path(__file__).resolve().parents[1]
    os.chdir(repo)  # the jobs' ``python -m auditor`` imports that checkout's auditor
    # Bytecode as an installed tool has it: compiled once (into a private prefix, so that no
    # environment's files are written), not on every start even where PYTHONDONTWRITEBYTECODE is set.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    work_pyc = Path(tempfile.mkdtemp(prefix="eagle-audit-bench-pycache-"))
    os.environ["PYTHONPYCACHEPREFIX"] = str(work_pyc)
    tool = [sys.executable, "-m", "auditor"]
    a33 = fetch_release("0.33.0", progress=False)
    fetch_release("0.16.0", progress=False)
    root = extract(a33)
    work = Path(tempfile.mkdtemp(prefix="eagle-audit-bench-speed-"))
    load_before = os.getloadavg()
    started = time.time()
    try:
        bare = [sys.executable, "-c", BARE_FOLDER, str(root)]
        common = ["--format", "json", "--no-progress", "--exit-zero"]
        full = [*tool, "scan", str(root), *common]
        by_version = [*tool, "scan", "--vllm-version", "0.33.0", *common]
        single = [*tool, "scan", "--vllm-version", "0.16.0", "--model", "kimi_k2", *common]
        fix = [*tool, "fix", "--model", "kimi_k2", "--vllm-version", "0.16.0", "--no-progress"]
        warm_full, warm_version = fresh_cache(work, "warm-full"), fresh_cache(work, "warm-version")
        run_process(bare)  # compile the bytecode of the bare loop and the tool once
        run_process(full, warm_full)  # fill the caches the warm runs read
        run_process(by_version, warm_version)
        jobs = {
            "cold": lambda i: (full, fresh_cache(work, f"cold-{i}")),
            "warm": lambda i: (full, warm_full),
            "warm --vllm-version": lambda i: (by_version, warm_version),
            "single kimi_k2": lambda i: (single, fresh_cache(work, f"single-{i}")),
            "fix kimi_k2": lambda i: (fix, fresh_cache(work, f"fix-{i}")),
        }
        argvs = {"cold": full, "warm": full, "warm --vllm-version": by_version, "single kimi_k2": single,
                 "fix kimi_k2": fix}
        raw: dict[str, list[dict]] = {name: [] for name in jobs}
        bares: list[float] = []
        bare_cpus: list[float] = []
        for i in range(args.repeat):
            for name, job in jobs.items():
                argv, cache = job(i)
                b, _, bc = run_process_cpu(bare)
                bares.append(b)
                bare_cpus.append(bc)
                t, rss, c = run_process_cpu(argv, cache)
                raw[name].append({"seconds": t, "bare_seconds": b, "rss_mb": rss, "cpu_seconds": c,
                                  "bare_cpu_seconds": bc})
            RESULTS.mkdir(exist_ok=True)  # the raw figures so far, should the run be stopped
            (RESULTS / f"speed-{args.label}.partial.json").write_text(json.dumps(raw, indent=1) + "\n")
        out: dict = {
            "commit": args.commit or commit(), "checkout": str(repo), "label": args.label, "repeat": args.repeat, "cpus": os.cpu_count(),
            "load_before": load_before, "load_after": os.getloadavg(), "wall_seconds": time.time() - started,
            "bare": {"what": "python -c ast.parse loop over vllm/model_executor/models of extracted 0.33.0",
                     "median_seconds": median(bares), "seconds": bares,
                     "median_cpu_seconds": median(bare_cpus), "cpu_seconds": bare_cpus},
            "jobs": {},
        }
        for name, rows in raw.items():
            out["jobs"][name] = {
                "argv": " ".join(argvs[name]).replace(str(root), "<extracted 0.33.0>"),
                "median_seconds": median([r["seconds"] for r in rows]),
                "ratio_to_bare": median([r["seconds"] / r["bare_seconds"] for r in rows]),
                "median_cpu_seconds": median([r["cpu_seconds"] for r in rows]),
                "cpu_ratio_to_bare": median([r["cpu_seconds"] / r["bare_cpu_seconds"] for r in rows]),
                "peak_rss_mb": max(r["rss_mb"] for r in rows),
                "runs": rows,
            }
        fix_rows, single_rows = raw["fix kimi_k2"], raw["single kimi_k2"]
        out["jobs"]["fix kimi_k2"]["ratio_to_single"] = median(
            [f["seconds"] / s["seconds"] for f, s in zip(fix_rows, single_rows)])
        out["jobs"]["fix kimi_k2"]["cpu_ratio_to_single"] = median(
            [f["cpu_seconds"] / s["cpu_seconds"] for f, s in zip(fix_rows, single_rows)])
        out["peak_rss_full_scan_mb"] = out["jobs"]["cold"]["peak_rss_mb"]
        report(out)
        (RESULTS / f"speed-{args.label}.partial.json").unlink(missing_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(root.parent, ignore_errors=True)
        shutil.rmtree(work_pyc, ignore_errors=True)


def report(out: dict) -> None:
    """Print the figures and write them to ``bench/results/speed-LABEL.{json,md}``."""
    lines = [f"# eagle-audit speed ({out['label']}, commit {out['commit']})", "",
             f"{out['cpus']} cpus, {out['repeat']} paired repeats, medians; load average before "
             f"{out['load_before'][0]:.2f}, after {out['load_after'][0]:.2f}; wall {out['wall_seconds']:.0f} s", "",
             f"bare: {out['bare']['what']}: {out['bare']['median_seconds']:.3f} s"
             + (f" ({out['bare']['median_cpu_seconds']:.3f} s of CPU)" if "median_cpu_seconds" in out["bare"] else ""),
             "", "Ratios are medians of paired runs (each job right after a bare run); the CPU ratio compares "
             "user + system seconds (the process and its workers), which depend far less on the machine's "
             "load than wall seconds.", "",
             "| job | command | seconds | ratio | CPU seconds | CPU ratio | target | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|"]
    for name, j in out["jobs"].items():
        if name == "fix kimi_k2":
            ratio, tgt = j["ratio_to_single"], "<= 2.0x single kimi_k2"
            cpu_ratio = j.get("cpu_ratio_to_single")
        else:
            ratio = j["ratio_to_bare"]
            tgt = f"<= {TARGETS[name][1]}x bare" if name in TARGETS else ""
            cpu_ratio = j.get("cpu_ratio_to_bare")
        argv = j["argv"].replace(sys.executable, "python")
        cpu = f"{j['median_cpu_seconds']:.3f} | {cpu_ratio:.2f}x" if cpu_ratio is not None else "— | —"
        lines.append(f"| {name} | `{argv}` | {j['median_seconds']:.3f} | {ratio:.2f}x | {cpu} | {tgt} | "
                     f"{j['peak_rss_mb']:.0f} |")
    lines += ["", f"peak RSS of a full scan: {out['peak_rss_full_scan_mb']:.0f} MB (target <= {RSS_TARGET_MB:.0f} MB)"]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"speed-{out['label']}.json").write_text(json.dumps(out, indent=1) + "\n")
    (RESULTS / f"speed-{out['label']}.md").write_text(text)


if __name__ == "__main__":
    main()

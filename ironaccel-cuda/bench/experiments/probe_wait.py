"""Does polling see a stream's work finish sooner than cuStreamSynchronize?  Builds and runs probe_wait.c.

    python3 ironaccel-cuda/bench/experiments/probe_wait.py [--sched auto spin yield blocking] [--rounds 30] [--out DIR]

The copy rows of the cuda.core compat benchmark sit 1-1.5 µs above the C floor for every Python side, and the
floor itself is `cuMemcpy*Async + cuStreamSynchronize`.  This asks whether another way of waiting (a query
loop, an event, a flag the GPU writes to host memory) sees the end sooner, per kind of work and per context
scheduling flag, and whether a pool buffer copies slower than a cuMemAlloc one.  Each (work, wait) cell is the
median over rounds of the time per operation (submit + wait); "vs sync" is the median of the per-round ratio
cuStreamSynchronize / that wait, with a bootstrap 95% interval (above 1: that wait is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # paths.py lives in bench/

import paths  # noqa: E402

paths.ensure_import_paths()  # harness.py is in the repository's bench/

from harness import bootstrap_median  # noqa: E402
from report import format_ns  # noqa: E402


def build(out_dir: Path) -> Path:
    exe = out_dir / "probe_wait"
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([nvcc, "-O2", "-o", str(exe), str(HERE / "probe_wait.c"), "-lcuda"], check=True)
    return exe


def run(exe: Path, sched: str, rounds: int, n: int) -> list[dict[str, object]]:
    done = subprocess.run([str(exe), sched, str(rounds), str(n)], capture_output=True, text=True, timeout=300)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or any("error" in line for line in lines):
        raise SystemExit(f"probe_wait {sched}: rc={done.returncode} {lines[-1:]} {done.stderr[-500:]}")
    return lines


def table(lines: list[dict[str, object]]) -> list[str]:
    cells: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for line in lines:
        if "work" in line:
            cells[(str(line["work"]), str(line["wait"]))][int(line["round"])] = float(line["ns"])  # type: ignore
    works = list(dict.fromkeys(w for w, _ in cells))
    waits = list(dict.fromkeys(m for _, m in cells))
    sync = waits[0]
    out = ["| work | " + " | ".join(waits) + " |", "|---|" + "---:|" * len(waits)]
    for w in works:
        base = cells[(w, sync)]
        row = []
        for m in waits:
            got = cells.get((w, m), {})
            if not got:
                row.append("-")
                continue
            med = bootstrap_median(list(got.values())).median
            if m == sync:
                row.append(format_ns(med))
                continue
            ratio = bootstrap_median([base[r] / got[r] for r in got if r in base])
            row.append(f"{format_ns(med)} ({ratio.median:.2f} [{ratio.low:.2f}, {ratio.high:.2f}])")
        out.append(f"| {w} | " + " | ".join(row) + " |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sched", nargs="+", default=["auto", "spin", "yield", "blocking"])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("-n", type=int, default=100, help="operations per timed batch")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work_dir = Path(tempfile.mkdtemp(prefix="probe_wait-"))
    exe = build(work_dir)
    report = ["# Waiting for a stream's work: cuStreamSynchronize against polling (probe_wait.py)", "",
              "Cells: median time per operation (submit + wait); in brackets, cuStreamSynchronize / that wait "
              "(median of per-round ratios, bootstrap 95% interval; above 1 = faster than the driver's wait).",
              f"Rounds: {args.rounds}, {args.n} operations each; CUDA_VISIBLE_DEVICES="
              f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}", ""]
    everything = {}
    for sched in args.sched:
        lines = run(exe, sched, args.rounds, args.n)
        everything[sched] = lines
        report += [f"## Context scheduling: {sched} (host flag wait usable: {lines[0].get('flag_wait')})", "",
                   *table(lines), ""]
    text = "\n".join(report)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "probe_wait.md").write_text(text + "\n")
        (args.out / "probe_wait.json").write_text(json.dumps(everything))


if __name__ == "__main__":
    main()

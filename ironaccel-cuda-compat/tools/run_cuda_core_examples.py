"""Run cuda.core's own examples, unchanged, with cuda.core and then with ironaccel's cuda.core surface.

    python3 ironaccel-cuda-compat/tools/run_cuda_core_examples.py CUDA_PYTHON/cuda_core/examples [--json OUT]

The examples folder comes from a cuda-python checkout (NVIDIA/cuda-python or a fork holding cuda.core 1.2's);
nothing of it is copied into this repository.  Each example runs as a script in a child process twice: once
with the installed cuda.core (the baseline: an example that needs what this machine lacks fails there too), once
after `ironaccel_cuda_compat.cuda_core.install()`, so `import cuda.core` is the compat, the one line a user
would add.  Verdicts: PASS (the compat's run exits 0), "as cuda.core" (both runs fail; the baseline's reason
is shown), FAIL (cuda.core's run passes, the compat's does not), and "out of scope" for the examples of what
the compat does not cover (graphics interop, textures, TMA descriptors) or what one GPU cannot run.  Prints a
table and exits 1 on any FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from repo_sources import missing_sources

OUT_OF_SCOPE = {
    "gl_interop_": "graphics interop (OpenGL) and a display: out of the compat's scope",
    "texture_sample": "textures and CUDA arrays: out of the compat's scope",
    "tma_tensor_map": "TMA tensor map descriptors: out of the compat's scope",
}
TWO_GPUS = ("simple_multi_gpu_example",)

_BOOT = "from ironaccel_cuda_compat import cuda_core as compat\ncompat.install()\n"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    extra = missing_sources()
    if extra:
        env["PYTHONPATH"] = os.pathsep.join([*extra, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def _run(path: Path, compat: bool, timeout: float) -> tuple[int, float, str]:
    """(exit code, seconds, the last line of stderr or stdout) of one run of the example."""
    code = (_BOOT if compat else "") + (f"import runpy, sys\nsys.argv = [{str(path)!r}]\n"
                                        f"runpy.run_path({str(path)!r}, run_name='__main__')\n")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=str(path.parent), env=_env(), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, time.perf_counter() - t0, f"timed out after {timeout:.0f} s"
    lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines() if proc.returncode else \
        proc.stdout.strip().splitlines()
    return proc.returncode, time.perf_counter() - t0, (lines[-1] if lines else "")[:240]


def _device_count() -> int:
    try:
        import ironaccel_cuda as cu

        return cu.device_count()
    except Exception:
        return 0


def run(folder: Path, timeout: float) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    gpus = _device_count()
    for path in sorted(folder.glob("*.py")):
        name = path.stem
        scope = next((why for prefix, why in OUT_OF_SCOPE.items() if name.startswith(prefix)), None)
        if scope is None and name in TWO_GPUS and gpus < 2:
            scope = f"needs two GPUs (this machine has {gpus})"
        if scope is not None:
            rows.append({"example": name, "verdict": "out of scope", "detail": scope})
            continue
        base_rc, base_s, base_tail = _run(path, False, timeout)
        rc, secs, tail = _run(path, True, timeout)
        if rc == 0:
            verdict, detail = "PASS", tail
        elif base_rc != 0:
            verdict, detail = "as cuda.core", f"cuda.core: {base_tail}; compat: {tail}"
        else:
            verdict, detail = "FAIL", tail
        rows.append({"example": name, "verdict": verdict, "cuda.core exit": base_rc, "cuda.core s": round(base_s, 1),
                     "compat exit": rc, "compat s": round(secs, 1), "detail": detail})
    return rows


def table(rows: list[dict[str, object]]) -> str:
    lines = ["| example | cuda.core | compat | verdict | detail |", "|---|---|---|---|---|"]
    for r in rows:
        base = f"exit {r['cuda.core exit']}, {r['cuda.core s']} s" if "cuda.core exit" in r else "-"
        mine = f"exit {r['compat exit']}, {r['compat s']} s" if "compat exit" in r else "-"
        detail = str(r.get("detail", "")).replace("|", "/")
        lines.append(f"| {r['example']} | {base} | {mine} | {r['verdict']} | {detail} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("examples", type=Path, help="cuda.core's examples folder")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run of an example")
    args = parser.parse_args(argv)
    if not args.examples.is_dir():
        parser.error(f"{args.examples} is not a folder")
    rows = run(args.examples.resolve(), args.timeout)
    print(table(rows))
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("PASS", "as cuda.core", "out of scope", "FAIL")}
    print("\n" + ", ".join(f"{n} {v}" for v, n in counts.items()))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())

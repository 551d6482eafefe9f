"""Sweep of the pageable-copy staging settings on a GPU: one command, each setting in a fresh process.

    python3 ironaccel-cuda/bench/sweep_transfer.py                 # the built-in grid, about 1.5 minutes
    python3 ironaccel-cuda/bench/sweep_transfer.py --budget-s 60   # stop starting configs after 60 s
    python3 ironaccel-cuda/bench/sweep_transfer.py --config "THREADS=8 CHUNK=1M" --config "NT=0"

The settings (`ironaccel_cuda.transfer`, IRONACCEL_CUDA_COPY_THREADS / CHUNK / SLOTS / SPLIT / NT and
IRONACCEL_CUDA_PIPELINE_MIN) are read once per process, so every config runs in a child Python.  A child
proves its copies exact (random bytes, poisoned destinations), then times synchronous pageable copies,
host to device and device to host, at 1, 16 and 64 MiB, and pinned copies of the same sizes for reference:
the median of --reps copies, after warm-up.

Two timings per pageable case:
  * idle: each copy after a pause of --idle-ms, so the copy threads have gone back to sleep -- what the
    benchmark sees, where another library's batch runs between two of ours;
  * b2b: copies back to back (threads still awake).
The score of a config is its worst idle fraction of pinned bandwidth at 16 and 64 MiB (the issue's bar:
75%); the table is sorted by it and the best config is printed as environment variables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paths

MiB = 1 << 20
SIZES = (1 * MiB, 16 * MiB, 64 * MiB)
JUDGED = (16 * MiB, 64 * MiB)
ENV_PREFIX = {"PIPELINE_MIN": "IRONACCEL_CUDA_PIPELINE_MIN"}
KNOBS = ("THREADS", "CHUNK", "SLOTS", "SPLIT", "NT", "PIPELINE_MIN")

# Each entry changes the defaults (see transfer.py) in one or two settings; "" is the defaults.
GRID = (
    "",
    "NT=0", "NT=3", "NT=2",
    "THREADS=6", "THREADS=8", "THREADS=10", "THREADS=14", "THREADS=15",
    "SPLIT=16", "SPLIT=64",
    "CHUNK=256K", "CHUNK=1M", "CHUNK=2M", "CHUNK=1M SPLIT=16", "CHUNK=128K SPLIT=128",
    "SLOTS=16", "SLOTS=24", "SLOTS=96",
    "THREADS=8 CHUNK=1M", "THREADS=14 NT=0", "THREADS=8 NT=0",
    "PIPELINE_MIN=1M", "PIPELINE_MIN=2M",
)


def env_var(knob: str) -> str:
    return ENV_PREFIX.get(knob, f"IRONACCEL_CUDA_COPY_{knob}")


def parse_size(text: str) -> int:
    text = text.strip().upper()
    for suffix, scale in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if text.endswith(suffix):
            return int(text[:-1]) * scale
    return int(text, 0)


def parse_config(text: str) -> dict[str, str]:
    """'THREADS=8 CHUNK=1M' -> {'IRONACCEL_CUDA_COPY_THREADS': '8', 'IRONACCEL_CUDA_COPY_CHUNK': '1048576'}"""
    env = {}
    for item in text.split():
        knob, _, value = item.partition("=")
        knob = knob.upper()
        if knob not in KNOBS or not value:
            raise SystemExit(f"bad config item {item!r}: use KNOB=VALUE with KNOB one of {', '.join(KNOBS)}")
        env[env_var(knob)] = str(parse_size(value))
    return env


# -- the child: one config ------------------------------------------------------------------------------


def _median_ns(copy, reps: int, idle_s: float) -> float:
    times = []
    for _ in range(reps):
        if idle_s:
            time.sleep(idle_s)
        start = time.perf_counter_ns()
        copy()
        times.append(time.perf_counter_ns() - start)
    return float(statistics.median(times))


def child(reps: int, idle_s: float) -> dict:
    paths.ensure_import_paths()
    import numpy as np

    import ironaccel_cuda as cu
    from ironaccel_cuda import _core, transfer

    dev = cu.Device(0)
    top = max(SIZES)
    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, top, dtype=np.uint8)
    out = np.full(top, 0xA5, dtype=np.uint8)  # touched: no first-touch page faults in the timings
    buf = dev.alloc(top, "uint8")
    pinned = dev.alloc_pinned(top, "uint8")
    pinned.array[:] = src
    results: dict = {"settings": transfer.settings(), "cases": {}}
    try:
        for n in SIZES:  # exact copies both ways, through whatever path this config takes
            buf.memset(0x5A)
            buf[:n].copy_from(src[:n])
            out[:n] = ~src[:n]
            buf[:n].copy_to_host(out=out[:n])
            if not np.array_equal(out[:n], src[:n]):
                bad = int(np.flatnonzero(out[:n] != src[:n])[0])
                raise SystemExit(f"copy of {n} bytes is wrong from byte {bad}")
        for n in SIZES:
            dview, hsrc, hout, pview = buf[:n], src[:n], out[:n], pinned.array[:n]
            cases = {
                "h2d": lambda d=dview, h=hsrc: d.copy_from(h),
                "d2h": lambda d=dview, h=hout: d.copy_to_host(out=h),
                "h2d_pinned": lambda d=dview, h=pview: d.copy_from(h),
                "d2h_pinned": lambda d=dview, h=pview: d.copy_to_host(out=h),
            }
            for name, copy in cases.items():
                for _ in range(3):
                    copy()
                entry = {"b2b": _median_ns(copy, reps, 0.0)}
                if not name.endswith("pinned"):
                    entry["idle"] = _median_ns(copy, reps, idle_s)
                results["cases"][f"{name}/{n}"] = entry
        info = _core.staging_info()
        results["paths_taken"] = {k: info[k] for k in ("pipeline", "bounce", "direct")}
    finally:
        pinned.close()
        buf.close()
    return results


# -- the parent: the grid, the table ---------------------------------------------------------------------


def gbps(nbytes: int, ns: float) -> float:
    return nbytes / ns if ns else 0.0


def score(res: dict) -> float:
    """Worst idle fraction of pinned bandwidth over the judged sizes and both directions."""
    worst = float("inf")
    for n in JUDGED:
        for d in ("h2d", "d2h"):
            worst = min(worst, res["cases"][f"{d}_pinned/{n}"]["b2b"] / res["cases"][f"{d}/{n}"]["idle"])
    return worst


def describe(res: dict) -> str:
    cfg = res["settings"]
    return (f"T={cfg['threads']} C={cfg['chunk'] >> 10}K S={cfg['slots']} split={cfg.get('split', '?')} "
            f"nt={cfg.get('nt', '?')} min={cfg['pipeline_min'] >> 10}K")


def run_config(config: str, args: argparse.Namespace) -> dict:
    env = paths.child_environment(parse_config(config))
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--reps", str(args.reps),
               "--idle-ms", str(args.idle_ms)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        return {"config": config, "error": (done.stderr or done.stdout).strip()[-400:]}
    res = json.loads(done.stdout.strip().splitlines()[-1])
    res["config"] = config
    return res


def print_table(results: list[dict]) -> None:
    ok = sorted((r for r in results if "error" not in r), key=score, reverse=True)
    head = ["config", "score"] + [f"{d} {n // MiB}M idle" for n in JUDGED for d in ("h2d", "d2h")] + \
        ["h2d 16M b2b", "d2h 16M b2b", "h2d 1M", "d2h 1M", "pinned h2d/d2h 64M"]
    rows = []
    for r in ok:
        c = r["cases"]
        cells = [r["config"] or "(defaults)", f"{score(r):.0%}"]
        for n in JUDGED:
            for d in ("h2d", "d2h"):
                pct = c[f"{d}_pinned/{n}"]["b2b"] / c[f"{d}/{n}"]["idle"]
                cells.append(f"{gbps(n, c[f'{d}/{n}']['idle']):5.1f} {pct:4.0%}")
        for d in ("h2d", "d2h"):
            cells.append(f"{gbps(16 * MiB, c[f'{d}/{16 * MiB}']['b2b']):5.1f}")
        for d in ("h2d", "d2h"):
            pct = c[f"{d}_pinned/{MiB}"]["b2b"] / c[f"{d}/{MiB}"]["idle"]
            cells.append(f"{gbps(MiB, c[f'{d}/{MiB}']['idle']):5.1f} {pct:4.0%}")
        cells.append(f"{gbps(64 * MiB, c[f'h2d_pinned/{64 * MiB}']['b2b']):.1f}/"
                     f"{gbps(64 * MiB, c[f'd2h_pinned/{64 * MiB}']['b2b']):.1f}")
        rows.append(cells)
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for cells in rows:
        print("  ".join(x.rjust(w) for x, w in zip(cells, widths)))
    print("GB/s; % = pinned DMA time / pageable time (same size and direction, same process); "
          "idle = after a pause (as in the benchmark), b2b = back to back; score = worst idle % at 16/64 MiB")
    for r in results:
        if "error" in r:
            print(f"config {r['config'] or '(defaults)'} failed: {r['error']}")
    if ok:
        best = ok[0]
        cfg = best["settings"]
        print(f"best: {best['config'] or '(defaults)'} = {describe(best)}, score {score(best):.0%}")
        print("best as environment: " + " ".join(
            f"{env_var(k)}={cfg[key]}" for k, key in (("THREADS", "threads"), ("CHUNK", "chunk"), ("SLOTS", "slots"),
                                                     ("SPLIT", "split"), ("NT", "nt"),
                                                     ("PIPELINE_MIN", "pipeline_min"))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", help="a config to run instead of the grid, e.g. 'THREADS=8 NT=0'")
    parser.add_argument("--reps", type=int, default=15, help="copies per timing (median)")
    parser.add_argument("--idle-ms", type=float, default=2.0, help="pause before each 'idle' copy")
    parser.add_argument("--budget-s", type=float, default=130.0, help="start no config after this many seconds")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.reps, args.idle_ms / 1e3)))
        return 0
    configs = args.config if args.config else list(GRID)
    for config in configs:
        parse_config(config)  # reject a typo before any GPU time is spent
    start, results = time.monotonic(), []
    for i, config in enumerate(configs):
        if time.monotonic() - start > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: {len(configs) - i} configs not run", flush=True)
            break
        res = run_config(config, args)
        results.append(res)
        note = res.get("error", "").splitlines()[-1:] if "error" in res else [f"score {score(res):.0%}"]
        print(f"[{i + 1}/{len(configs)}] {config or '(defaults)'}: {note[0] if note else 'failed'} "
              f"({time.monotonic() - start:.0f} s)", flush=True)
    print()
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

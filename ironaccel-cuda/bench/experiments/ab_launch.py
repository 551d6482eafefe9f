"""A/B of the plain launch between two builds of ironaccel-cuda, on one GPU, interleaved.

    python3 ironaccel-cuda/bench/experiments/ab_launch.py --a SITE_A --b SITE_B [--rounds 12] [--json OUT]

SITE_A and SITE_B are folders that each hold an installed ironaccel + ironaccel_cuda (``pip install
--target``); an empty string means the ones installed in this interpreter. Issue 15 asks that the
plain launch stay as fast as before the launch work: A is the build before it, B is main.

Each round starts one child process per build, in alternating order (A B, B A, ...). A child opens
device 0 with ``ironaccel_cuda.Device(0)`` (the same call in every version, so the registry and its
entry points play no part), loads the benchmark's 4- and 16-argument kernels and times batches of
``Function.launch(1, 32, out, 1, 2, ..., stream=s)`` (the main benchmark's launch row), a
``Stream.synchronize`` after each batch, untimed. Per round the statistic is A's median ns per
launch over B's (above 1: B faster); the report is its median with a bootstrap 95% interval.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # paths.py lives in bench/

import paths  # noqa: E402

paths.ensure_import_paths()  # harness.py is in the repository's bench/

from harness import bootstrap_median  # noqa: E402
from sides.base import KERNEL_SOURCE, kernel_ints, kernel_name  # noqa: E402

BATCH, BATCHES, WARMUP = 256, 40, 5


def child(nargs_list: list[int]) -> None:
    import ironaccel_cuda as cu

    dev = cu.Device(0)
    mod = dev.load_module(cu.Program(KERNEL_SOURCE).compile())
    stream = dev.create_stream()
    out = dev.alloc(4, "int32")
    result: dict[str, object] = {"file": cu.__file__}
    for nargs in nargs_list:
        fn = mod.function(kernel_name(nargs))
        args = (out, *kernel_ints(nargs))
        launch, sync, clock = fn.launch, stream.synchronize, time.perf_counter_ns
        per: list[float] = []
        for b in range(WARMUP + BATCHES):
            t0 = clock()
            for _ in range(BATCH):
                launch(1, 32, *args, stream=stream)
            t1 = clock()
            sync()
            if b >= WARMUP:
                per.append((t1 - t0) / BATCH)
        got = np.empty(4, np.int32)  # alloc(4, "int32"): four elements in every version
        out.copy_to_host(out=got)
        if int(got[0]) != sum(kernel_ints(nargs)):
            raise SystemExit(f"launch with {nargs} args wrote {int(got[0])}")
        result[str(nargs)] = float(np.median(per))
    print(json.dumps(result))


def run_child(site: str, nargs_list: list[int]) -> dict[str, object]:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p)
    done = subprocess.run([sys.executable, __file__, "--child", ",".join(map(str, nargs_list))],
                          capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"child for {site or 'installed'} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", default="", help="site folder of build A (before)")
    parser.add_argument("--b", default="", help="site folder of build B (after)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--nargs", default="4,16")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    nargs_list = [int(x) for x in args.nargs.split(",")]
    if args.child:
        child([int(x) for x in args.child.split(",")])
        return
    rounds: list[dict[str, dict[str, object]]] = []
    for r in range(args.rounds):
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        got = {side: run_child(args.a if side == "a" else args.b, nargs_list) for side in order}
        rounds.append(got)
    report: dict[str, object] = {"a": rounds[0]["a"]["file"], "b": rounds[0]["b"]["file"], "rounds": rounds,
                                 "batch": BATCH, "batches": BATCHES}
    print(f"A: {report['a']}\nB: {report['b']}\n{args.rounds} rounds, alternating; per child {BATCHES} batches "
          f"of {BATCH} launches, median ns per launch\n")
    print("| launch | A ns | B ns | A/B [95% CI] |\n|---|---:|---:|---:|")
    for nargs in nargs_list:
        a = [float(x["a"][str(nargs)]) for x in rounds]  # type: ignore[arg-type]
        b = [float(x["b"][str(nargs)]) for x in rounds]  # type: ignore[arg-type]
        ci = bootstrap_median(np.asarray(a) / np.asarray(b))
        report[f"ratio_{nargs}"] = ci.to_json()
        print(f"| Function.launch, {nargs} args | {np.median(a):.0f} | {np.median(b):.0f} | "
              f"{ci.median:.3f} [{ci.low:.3f}, {ci.high:.3f}] |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""The ironaccel-cuda benchmark of issue 4: one command, every peer, paired ratios, targets.

    python3 ironaccel-cuda/bench/run.py --out DIR            # full run (~3-5 minutes on the H200)
    python3 ironaccel-cuda/bench/run.py --out DIR --quick    # smoke run (~1 minute)

Writes DIR/results.md, DIR/results.json and DIR/transfers.png, and prints the markdown last.
See README.md beside this file for what each row means and how the intervals are computed.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paths

paths.ensure_import_paths()

import env_info  # noqa: E402
import ops  # noqa: E402
import report  # noqa: E402
from harness import SamplingConfig  # noqa: E402
from runner import RunConfig, Runner  # noqa: E402
from sides import SIDE_NAMES, all_sides, open_context  # noqa: E402
from sides.base import SideUnavailable  # noqa: E402
from versus import write_baseline  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="folder for results.md/json/png")
    parser.add_argument("--no-baseline", action="store_true",
                        help="do not overwrite bench/BASELINE.md (a full run of every group overwrites it)")
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer rounds and sizes (~1 minute)")
    parser.add_argument("--only", default="", help=f"comma-separated groups to run, of: {','.join(ops.GROUPS)}")
    parser.add_argument("--sides", default="", help=f"comma-separated sides to open, of: {','.join(SIDE_NAMES)}")
    parser.add_argument("--rounds", type=int, help="pairs per comparison, at most")
    parser.add_argument("--min-rounds", type=int, help="pairs per comparison, at least")
    parser.add_argument("--max-seconds", type=float, help="a comparison stops adding pairs past this")
    parser.add_argument("--batch-ms", type=float, help="target duration of one timed batch")
    parser.add_argument("--nvrtc-children", type=int, help="pairs of fresh processes (disk hit / cold) per side")
    parser.add_argument("--nvrtc-pairs", type=int, help="later (disk hit, cold) pairs in each disk-hit process")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--per-side-host-arrays", action="store_true",
                        help="each side copies from and to its own pageable arrays, not the shared ones (see HostData)")
    parser.add_argument("--keep-workdir", action="store_true", help="keep the scratch folder (floor binary, caches)")
    return parser.parse_args(argv)


def sampling_from(args: argparse.Namespace) -> SamplingConfig:
    config = SamplingConfig.quick() if args.quick else SamplingConfig()
    changes = {}
    if args.rounds is not None:
        changes["rounds"] = args.rounds
    if args.min_rounds is not None:
        changes["min_rounds"] = args.min_rounds
    if args.max_seconds is not None:
        changes["max_seconds"] = args.max_seconds
    if args.batch_ms is not None:
        changes["batch_ns"] = int(args.batch_ms * 1e6)
    config = replace(config, **changes)
    return replace(config, min_rounds=min(config.min_rounds, config.rounds))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    sampling = sampling_from(args)
    groups = frozenset(g for g in args.only.split(",") if g) or None
    unknown = (groups or frozenset()) - set(ops.GROUPS)
    if unknown:
        print(f"unknown group(s) {sorted(unknown)}; choose from {ops.GROUPS}", file=sys.stderr)
        return 2
    wanted = {s for s in args.sides.split(",") if s}
    if wanted - set(SIDE_NAMES):
        print(f"unknown side(s) {sorted(wanted - set(SIDE_NAMES))}; choose from {SIDE_NAMES}", file=sys.stderr)
        return 2
    plan = ops.plan(quick=args.quick, groups=groups)
    config = RunConfig(
        sampling,
        nvrtc_children=args.nvrtc_children or (2 if args.quick else 6),
        nvrtc_pairs=args.nvrtc_pairs or (2 if args.quick else 4),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="ironaccel-bench-"))
    try:
        transfer_sizes = [op.nbytes for op in plan if op.group == "transfer"]
        try:
            ctx, device = open_context(args.device, workdir, max(transfer_sizes, default=4096),
                                       shared_host=not args.per_side_host_arrays)
        except SideUnavailable as exc:
            print(f"no usable CUDA device: {exc}", file=sys.stderr)
            return 1
        sides = [side for side in all_sides() if not wanted or side.name in wanted]
        print(f"device {device['name']} (sm_{device['arch']}), {len(plan)} operations, "
              f"sides {[s.name for s in sides]}, sampling {sampling}", flush=True)
        runner = Runner(sides, ctx, config, log=lambda line: print(line, flush=True))
        runner.result.meta.update(env_info.run_facts())
        runner.result.meta["device"] = device
        runner.result.meta["mode"] = "quick" if args.quick else "full"
        runner.result.meta["sampling"] = (
            f"{sampling.min_rounds}-{sampling.rounds} pairs per comparison (stop after {sampling.max_seconds:g} s), "
            f"batches of ~{sampling.batch_ns / 1e6:g} ms, {sampling.bootstrap} bootstrap resamples"
        )
        runner.result.meta["versions"] = {}
        result = runner.run(plan, fresh_process_nvrtc=groups is None or "nvrtc" in groups)
        result.meta["seconds"] = time.perf_counter() - started
        report.write_json(result, args.out / "results.json")
        text = report.markdown(result)
        (args.out / "results.md").write_text(text + "\n")
        if not args.no_baseline and not args.quick and groups is None:
            write_baseline(Path(__file__).with_name("BASELINE.md"), text,
                           machine=f"{device['name']} (sm_{device['arch']}), {platform.node()}")
        try:
            if report.plot_transfers(result, args.out / "transfers.png"):
                print(f"chart: {args.out / 'transfers.png'}")
        except ImportError as exc:
            print(f"no chart (matplotlib missing: {exc})")
        print(text)
        print(f"\nwrote {args.out}/results.md, results.json; {result.meta['seconds']:.0f} s in all")
        return 0
    finally:
        if args.keep_workdir:
            print(f"scratch kept at {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

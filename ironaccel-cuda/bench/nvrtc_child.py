"""Child process of the fresh-process NVRTC rows: one side's disk-cached compile, timed, as JSON.

    nvrtc_child.py --side ironaccel --cache-dir D --arch 90 --sources S.json --mode populate
    nvrtc_child.py ... --mode hit --index I [--later K]     first call: a disk hit of sources[I]
    nvrtc_child.py ... --mode cold                          first call: a source no cache has seen

The library's import plus the first compile call is what a fresh process pays (wherever the library
loads NVRTC), so the runner pairs a `hit` child with a `cold` child and adds import_ns to first_ns.
Importing the bench's own adapter module (sides/<side>_side.py) happens before the clock (adapter_ns,
reported only); the runner byte-compiles the bench and the libraries' packages first, as a pip install
does, so no child pays for compiling Python source that an installed package would not recompile.
With --later K a hit child then times K pairs (disk hit of sources[-K:], cold compile), the order
alternating: disk hits once the process is warm.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paths

paths.ensure_import_paths()

FRESH_PROCESS_SIDES = ("ironaccel", "cuda.core")


def compiler_factory(side: str):  # -> Callable[[Path, str], Callable[[str], bytes]]
    """The side's `disk_cached_compiler`.  Importing the bench's adapter module is harness work, done before
    the clock starts; the adapter imports its library inside disk_cached_compiler, which is timed."""
    if side == "ironaccel":
        from sides.ironaccel_side import disk_cached_compiler
    elif side == "cuda.core":
        from sides.cudacore_side import disk_cached_compiler
    else:
        raise SystemExit(f"no fresh-process compiler for side {side!r}")
    return disk_cached_compiler


def timed(compile_source, source: str) -> int:
    start = time.perf_counter_ns()
    code = compile_source(source)
    elapsed = time.perf_counter_ns() - start
    if not bytes(code).startswith(b"\x7fELF"):
        raise SystemExit("compile did not return an ELF cubin")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--side", required=True)
    parser.add_argument("--cache-dir", required=True, type=Path)
    parser.add_argument("--arch", required=True)
    parser.add_argument("--sources", required=True, type=Path)
    parser.add_argument("--mode", choices=("populate", "hit", "cold"), required=True)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--later", type=int, default=0)
    args = parser.parse_args(argv)
    sources = json.loads(args.sources.read_text())

    from sides.base import unique_source

    token = uuid.uuid4().hex
    start = time.perf_counter_ns()
    make_compiler = compiler_factory(args.side)
    adapter_ns = time.perf_counter_ns() - start  # reported, not counted: the harness's own module
    start = time.perf_counter_ns()
    compile_source = make_compiler(args.cache_dir, args.arch)
    import_ns = time.perf_counter_ns() - start
    if args.mode == "populate":
        for source in sources:
            timed(compile_source, source)
        print(json.dumps({"ok": True, "compiled": len(sources)}))
        return 0
    first_source = sources[args.index] if args.mode == "hit" else unique_source(0, token)
    first_ns = timed(compile_source, first_source)
    later = []
    for index, source in enumerate(sources[len(sources) - args.later:] if args.later else []):
        cold_source = unique_source(index + 1, token)
        if index % 2 == 0:
            hit = timed(compile_source, source)
            cold = timed(compile_source, cold_source)
        else:
            cold = timed(compile_source, cold_source)
            hit = timed(compile_source, source)
        later.append([hit, cold])
    print(json.dumps({"ok": True, "mode": args.mode, "import_ns": import_ns, "first_ns": first_ns,
                      "adapter_ns": adapter_ns, "later": later}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""PyCUDA itself against ironaccel's PyCUDA surface, call for call, on one GPU.

    python3 ironaccel-cuda/bench/bench_pycuda_compat.py --pycuda DIR [--out OUTDIR] [--quick] [--shared-process]

DIR holds a built PyCUDA and its pure-Python dependencies (`pip install
--target DIR`); it is put first on sys.path and imported as `pycuda`, while
the compat is imported as `ironaccel_cuda_compat.pycuda` (not installed
under PyCUDA's name).  Each side runs in a child process of its own (this
script with `--serve pycuda|compat`), as a program that uses only that
library does: a process's state is then its own library's doing.  (In one
shared process, PyCUDA's lazily loaded kernel leaves every idle stream and
event wait of the process, the compat's too, 1.2-1.3 us slower -- the state
`module.settle_lazy_load` ends for the compat's own kernels; see
bench/experiments/README.md  `--shared-process` runs the old
way, both sides in this process on one primary context, for comparison.)
Each child times its own batches (the pipe is outside the figure), and the
rounds are the paired, order-alternating rounds and bootstrap intervals of
`harness.py`; the ratio is PyCUDA's time over the compat's (above 1: the
compat is faster) and the target (issue 12) is 1.2x, met only when the whole
95% interval is above it.

Rows: `mem_alloc(64 KiB).free()`; `memcpy_htod` / `memcpy_dtoh` of 1 KiB and
64 MiB between pageable numpy arrays and device memory (each batch of copies
ends with `Context.synchronize()`, timed, so every copy has landed);
`Function.__call__` and `prepared_async_call` of a kernel with 4 arguments
(pointer + 3 ints; the stream is drained after each batch, untimed);
`Stream.synchronize()` of an idle stream; `Event.record(stream)` +
`synchronize()` of one reused event (PyCUDA's default flags: timing on).
Before timing, every case is checked once (kernels write the sum, copies move
random bytes exactly).

A third column is the C floor (floor.c: the same driver calls from C, in a
child process), sampled in the same rounds: PyCUDA / floor is the most any
Python wrapper could be faster than PyCUDA on the row, so a row where it is
below 1.2 cannot meet the target (`--no-floor` leaves it out; it needs nvcc).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paths

paths.ensure_import_paths()

import numpy as np  # noqa: E402
from harness import Case, Interval, SamplingConfig, measure_rounds, verdict  # noqa: E402
from report import format_interval, format_ns  # noqa: E402

TARGET = 1.2
KERNEL = r"""
__global__ void k4(int* out, int a, int b, int c) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = a + b + c;
}
"""
ROWS = [
    ("mem_alloc(64 KiB).free()", "alloc", 64 << 10),
    ("memcpy_htod 1 KiB pageable", "htod", 1 << 10),
    ("memcpy_dtoh 1 KiB pageable", "dtoh", 1 << 10),
    ("memcpy_htod 64 MiB pageable", "htod", 64 << 20),
    ("memcpy_dtoh 64 MiB pageable", "dtoh", 64 << 20),
    ("Function.__call__, 4 args", "call", 4),
    ("prepared_async_call, 4 args", "prepared", 4),
    ("Stream.synchronize (idle)", "sync", 0),
    ("Event.record + synchronize", "event", 0),
]


FLOOR_OPS = {"alloc": "mem_alloc", "htod": "htod_sync", "dtoh": "dtoh_sync", "call": "launch4",
             "prepared": "launch4", "sync": "sync", "event": "event_timed"}  # floor.c's op for each row kind


class FloorCases:
    """floor.c's --serve child (the main benchmark's FloorSide): PyCUDA's calls made from C (cuMemAlloc/cuMemFree,
    cuMemcpyHtoD/DtoH + a context synchronize, cuLaunchKernel of a 4-parameter kernel on 32 threads,
    cuStreamSynchronize, cuEventRecord + cuEventSynchronize of a timing event)."""

    label = "floor"

    def __init__(self, workdir: Path):
        from sides.base import BenchContext, HostData
        from sides.bindings_side import benchmark_cubin, device_facts
        from sides.floor_side import FloorSide

        arch = str(device_facts(0)["arch"])
        cubin = workdir / "bench_kernels.cubin"
        cubin.write_bytes(benchmark_cubin(arch))
        self.side = FloorSide()
        self.side.open(BenchContext(0, arch, cubin.read_bytes(), cubin, HostData(16), workdir))  # builds, checks

    def case(self, kind: str, size: int) -> Case:
        return self.side._case(FLOOR_OPS[kind], size, max_batch=100_000 if size < 1 << 20 else 50)

    def close(self) -> None:
        self.side.close()


class Side:
    """One PyCUDA-shaped API (the real one or the compat) with its context, stream and kernel."""

    def __init__(self, label: str, drv: Any, compiler: Any):
        self.label = label
        self.drv = drv
        self.ctx = drv.Device(0).retain_primary_context()
        self.ctx.push()
        self.stream = drv.Stream()
        self.compiler = compiler
        self._kernel: Any = None
        self.out = drv.mem_alloc(4)
        self.ints = (np.int32(1), np.int32(2), np.int32(3))
        self.rng = np.random.default_rng(20261201)

    @property
    def kernel(self) -> Any:
        if self._kernel is None:
            self.module = self.compiler.SourceModule(KERNEL)
            self._kernel = self.module.get_function("k4")
        return self._kernel

    def case(self, kind: str, size: int) -> Case:
        drv = self.drv
        if kind == "alloc":
            def run(n: int) -> None:
                for _ in range(n):
                    drv.mem_alloc(size).free()

            def check() -> None:
                a = drv.mem_alloc(size)
                drv.memset_d8(a, 1, size)
                a.free()

            return Case(run=run, check=check)
        if kind in ("htod", "dtoh"):
            data = self.rng.integers(0, 256, size, dtype=np.uint8)
            host = data.copy() if kind == "htod" else np.zeros(size, np.uint8)
            dev = drv.mem_alloc(size)
            drv.memcpy_htod(dev, data)
            sync = drv.Context.synchronize

            if kind == "htod":
                def run(n: int) -> None:
                    for _ in range(n):
                        drv.memcpy_htod(dev, host)
                    sync()
            else:
                def run(n: int) -> None:
                    for _ in range(n):
                        drv.memcpy_dtoh(host, dev)
                    sync()

            def check() -> None:
                back = np.zeros(size, np.uint8)
                drv.memset_d8(dev, 0xA5, size)
                if kind == "htod":
                    drv.memcpy_htod(dev, host)
                    drv.memcpy_dtoh(back, dev)
                    ok = np.array_equal(back, host)
                else:
                    drv.memcpy_htod(dev, data)
                    host[:] = 0
                    drv.memcpy_dtoh(host, dev)
                    ok = np.array_equal(host, data)
                if not ok:
                    raise AssertionError(f"{self.label}: a {kind} copy of {size} bytes did not move the bytes")

            return Case(run=run, check=check, close=dev.free, max_batch=100_000 if size < 1 << 20 else 50)
        if kind == "call":
            f, out, (a, b, c), s = self.kernel, self.out, self.ints, self.stream
            block, grid = (32, 1, 1), (1, 1)

            def run(n: int) -> None:
                for _ in range(n):
                    f(out, a, b, c, block=block, grid=grid, stream=s)

            def check() -> None:
                drv.memset_d32(out, 0, 1)
                f(out, a, b, c, block=block, grid=grid)
                self.check_kernel_result()

            return Case(run=run, settle=s.synchronize, check=check, max_batch=20_000)
        if kind == "prepared":
            f, out, s = self.kernel, self.out, self.stream
            f.prepare("Piii")
            block, grid = (32, 1, 1), (1, 1)

            def run(n: int) -> None:
                call = f.prepared_async_call
                for _ in range(n):
                    call(grid, block, s, out, 1, 2, 3)

            def check() -> None:
                drv.memset_d32(out, 0, 1)
                f.prepared_async_call(grid, block, s, out, 1, 2, 3)
                s.synchronize()
                self.check_kernel_result()

            return Case(run=run, settle=s.synchronize, check=check, max_batch=20_000)
        if kind == "sync":
            s = self.stream

            def run(n: int) -> None:
                sync = s.synchronize
                for _ in range(n):
                    sync()

            return Case(run=run, check=s.synchronize)
        if kind == "event":
            e, s = drv.Event(), self.stream

            def run(n: int) -> None:
                for _ in range(n):
                    e.record(s)
                    e.synchronize()

            def check() -> None:
                e.record(s)
                e.synchronize()
                if not e.query():
                    raise AssertionError(f"{self.label}: the event is not complete after synchronize()")

            return Case(run=run, check=check)
        raise ValueError(kind)

    def idle_ns(self, remedies: bool = False) -> Any:
        """The idle synchronize figure (`idle_sync_ns`); with `remedies`, {"ns", "after_settle_ns", ...}."""
        ns = idle_sync_ns(self)
        return {"ns": ns, **ways_out(self)} if remedies else ns

    def waits(self) -> dict[str, int]:
        return _waits()

    def close(self) -> None:
        self.drv.Context.pop()  # PyCUDA aborts at exit if its context stack is not empty

    def check_kernel_result(self) -> None:
        self.drv.Context.synchronize()
        host = np.zeros(1, np.int32)
        self.drv.memcpy_dtoh(host, self.out)
        if host[0] != 6:
            raise AssertionError(f"{self.label}: the kernel wrote {host[0]}, expected 6")


def import_pycuda(folder: Path) -> tuple[Any, Any]:
    sys.path.insert(0, str(folder))
    import pycuda
    import pycuda.compiler
    import pycuda.driver

    if not str(Path(pycuda.__file__).resolve()).startswith(str(folder.resolve())):
        raise SystemExit(f"imported pycuda from {pycuda.__file__}, not from {folder}")
    pycuda.driver.init()
    return pycuda.driver, pycuda.compiler


def pycuda_versions(real: Any) -> dict[str, str]:
    """What PyCUDA's side ran: the GPU, the driver, PyCUDA and the CUDA it was built for."""
    dev = real.Device(0)
    return {"gpu": dev.name(), "driver": str(real.get_driver_version()),
            "pycuda": ".".join(map(str, _pycuda_version())),
            "pycuda built for CUDA": ".".join(map(str, real.get_version()))}


def compat_versions() -> dict[str, str]:
    """What the compat's side ran: cuda-bindings and the compiled core."""
    import cuda.bindings

    import ironaccel_cuda._core

    return {"cuda-bindings": cuda.bindings.__version__, "ironaccel core": str(Path(ironaccel_cuda._core.__file__).name)}


def run_facts() -> dict[str, str]:
    return {"python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def _pycuda_version() -> tuple[int, ...]:
    import pycuda

    return tuple(pycuda.VERSION)


class RemoteSide:
    """A Side in a child process of its own (this script with `--serve`): the same cases, each batch timed in
    the child, so the pipe is outside the figure."""

    def __init__(self, which: str, pycuda_dir: Path):
        self.label = "PyCUDA" if which == "pycuda" else "compat"
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", which, "--pycuda", str(pycuda_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, env=paths.child_environment())
        self.meta: dict[str, str] = self.request("hello")["meta"]

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            raise RuntimeError(f"the {self.label} child exited ({self.proc.wait(timeout=10)}) during {op!r}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{self.label} child, {op}: {answer['error']}")
        return answer

    def case(self, kind: str, size: int) -> Case:
        made = self.request("case", kind=kind, size=size)
        cid = made["id"]

        def run(n: int) -> int:
            return int(self.request("run", id=cid, n=n)["ns"])

        def settle() -> None:
            self.request("settle", id=cid)

        def check() -> None:
            self.request("check", id=cid)

        def close() -> None:
            self.request("close", id=cid)

        return Case(run=run, settle=settle if made["settle"] else None, check=check if made["check"] else None,
                    close=close, max_batch=int(made["max_batch"]))

    def waits(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.request("waits")["waits"].items()}

    def idle_ns(self, remedies: bool = False) -> Any:
        answer = self.request("idle", remedies=remedies)
        return answer if remedies else float(answer["ns"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.request("quit")
                self.proc.wait(timeout=30)
            except (RuntimeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def idle_sync_ns(side: Side) -> float:
    """Median per call of 5 batches of 2,000 `Stream.synchronize()` of the side's idle stream: whether the
    process is in the slow state of experiments/probe_idle_sync.py (about 0.2-0.5 us when not, 1.5-2 us when in it)."""
    sync = side.stream.synchronize
    sync()
    per = []
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(2000):
            sync()
        per.append((time.perf_counter_ns() - start) / 2000)
    return sorted(per)[2]


def ways_out(side: Side) -> dict[str, float]:
    """Diagnostics (--remedies): the idle figure after each way out of the slow state, in turn: an event recorded
    on a new non-blocking stream and waited for (the settle), then a context synchronize."""
    drv = side.drv
    quiet, mark = drv.Stream(1), drv.Event(drv.event_flags.DISABLE_TIMING)
    mark.record(quiet)
    mark.synchronize()
    after_settle = idle_sync_ns(side)
    drv.Context.synchronize()
    return {"after_settle_ns": after_settle, "after_ctx_sync_ns": idle_sync_ns(side)}


def serve(which: str, pycuda_dir: Path) -> int:
    """The child's loop: one JSON request per line on stdin, one JSON answer per line on the original stdout
    (everything else the libraries print goes to stderr)."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    if which == "pycuda":
        drv, compiler = import_pycuda(pycuda_dir)
        side = Side("PyCUDA", drv, compiler)
        meta = pycuda_versions(drv)
    else:
        from ironaccel_cuda_compat.pycuda import compiler as compat_compiler
        from ironaccel_cuda_compat.pycuda import driver as compat_drv

        side = Side("compat", compat_drv, compat_compiler)
        meta = compat_versions()
    cases: dict[int, Case] = {}
    ids = itertools.count(1)
    clock = time.perf_counter_ns
    try:
        for line in sys.stdin:
            request = json.loads(line)
            op = request["op"]
            answer: dict[str, Any] = {}
            try:
                if op == "quit":
                    break
                if op == "hello":
                    answer = {"meta": meta}
                elif op == "case":
                    case = side.case(str(request["kind"]), int(request["size"]))
                    cid = next(ids)
                    cases[cid] = case
                    answer = {"id": cid, "settle": case.settle is not None, "check": case.check is not None,
                              "max_batch": case.max_batch}
                elif op == "run":
                    case, n = cases[request["id"]], int(request["n"])
                    start = clock()
                    own = case.run(n)
                    answer = {"ns": own if own is not None else clock() - start}
                elif op in ("settle", "check"):
                    getattr(cases[request["id"]], op)()
                elif op == "close":
                    done = cases.pop(request["id"])
                    if done.close is not None:
                        done.close()
                elif op == "waits":
                    answer = {"waits": side.waits()}
                elif op == "idle":
                    answer = side.idle_ns(True) if request.get("remedies") else {"ns": side.idle_ns()}
                else:
                    raise ValueError(f"unknown request {op!r}")
            except Exception as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            proto.write(json.dumps(answer) + "\n")
    finally:
        for case in cases.values():
            if case.close is not None:
                case.close()
        side.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pycuda", type=Path, required=True, help="folder with the built PyCUDA (pip --target)")
    parser.add_argument("--out", type=Path, help="write results.md and results.json here")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--only", default="", help="row kinds (alloc,htod,dtoh,call,prepared,sync,event)")
    parser.add_argument("--no-floor", action="store_true", help="leave out the C floor column (needs nvcc)")
    parser.add_argument("--shared-process", action="store_true",
                        help="both sides in this process, on one primary context (the old way)")
    parser.add_argument("--remedies", action="store_true",
                        help="diagnostics: after each row, try ways out of the slow state")
    parser.add_argument("--serve", choices=("pycuda", "compat"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.pycuda)
    config = SamplingConfig.quick() if args.quick else SamplingConfig()

    sides: list[Any]
    if args.shared_process:
        real_drv, real_compiler = import_pycuda(args.pycuda)
        from ironaccel_cuda_compat.pycuda import compiler as compat_compiler
        from ironaccel_cuda_compat.pycuda import driver as compat_drv

        sides = [Side("PyCUDA", real_drv, real_compiler), Side("compat", compat_drv, compat_compiler)]
        if sides[0].ctx.handle != sides[1].ctx.handle:
            raise SystemExit("the two sides are not on the same (primary) context")
        meta = {**pycuda_versions(real_drv), **compat_versions(), "processes": "one, shared"}
    else:
        sides = []
        try:
            sides.append(RemoteSide("pycuda", args.pycuda))
            sides.append(RemoteSide("compat", args.pycuda))
        except Exception:
            for side in sides:
                side.close()
            raise
        meta = {**sides[0].meta, **sides[1].meta, "processes": "one per side"}
    meta.update(run_facts())
    floor = None
    workdir = Path(tempfile.mkdtemp(prefix="ironaccel-pycuda-bench-"))
    if not args.no_floor:
        try:
            floor = FloorCases(workdir)
        except Exception as exc:  # no nvcc, or a floor that cannot start: the column stays blank
            print(f"no C floor column: {type(exc).__name__}: {exc}", file=sys.stderr)
    try:
        return _run(args, config, sides, meta, floor)
    finally:
        for side in sides:
            side.close()
        if floor is not None:
            floor.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _run(args: argparse.Namespace, config: SamplingConfig, sides: list[Any], meta: dict[str, str],
         floor: FloorCases | None = None) -> int:
    """The rows, on sides[0] (PyCUDA) and sides[1] (the compat: its waits are counted)."""
    only = {k for k in args.only.split(",") if k}
    waits = sides[1].waits
    meta["idle sync at start"] = ", ".join(f"{side.label} {format_ns(side.idle_ns())}" for side in sides)
    rows = []
    for title, kind, size in ROWS:
        if only and kind not in only:
            continue
        cases: list[tuple[str, Case]] = []
        try:
            for side in sides:
                cases.append((side.label, side.case(kind, size)))
            if floor is not None:
                cases.append(("floor", floor.case(kind, size)))
            for _, case in cases:
                if case.check is not None:
                    case.check()
            before = waits()
            samples = measure_rounds(cases, config)
            interval = samples.ratio(["PyCUDA"], ["compat"], resamples=config.bootstrap, seed=config.seed)
            rows.append({
                "row": title, "pycuda_ns": samples.median_ns("PyCUDA"), "compat_ns": samples.median_ns("compat"),
                "ratio": interval.to_json(), "rounds": interval.n,
                "verdict": "PASS" if interval.above(TARGET) else "FAIL", "vs_parity": verdict(interval),
                "compat_waits": {k: v - before[k] for k, v in waits().items()},
            })
            if floor is not None:
                rows[-1]["floor_ns"] = samples.median_ns("floor")
                rows[-1]["pycuda_vs_floor"] = samples.ratio(["PyCUDA"], ["floor"], resamples=config.bootstrap,
                                                            seed=config.seed).to_json()
        except Exception as exc:
            rows.append({"row": title, "error": f"{type(exc).__name__}: {exc}", "verdict": "FAIL"})
        finally:
            for _, case in cases:
                if case.close is not None:
                    case.close()
        if args.remedies:
            rows[-1]["remedies"] = {side.label: side.idle_ns(remedies=True) for side in sides}
            print(f"  slow state after {title}: {rows[-1]['remedies']}", flush=True)
        rows[-1]["idle_sync_after_ns"] = {side.label: round(side.idle_ns()) for side in sides}
        print(_line(rows[-1]), flush=True)
    text = _markdown(meta, rows, config)
    print("\n" + text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(text)
        (args.out / "results.json").write_text(json.dumps({"meta": meta, "target": TARGET, "rows": rows}, indent=1))
    return 0


def _waits() -> dict[str, int]:
    """How this process's busy waits ended so far (the compat's small copies among them): on the fence word, or
    past its spin through the driver (`_core.fence_info`; waits that never tried the word are in neither)."""
    from ironaccel_cuda import _core

    info = _core.fence_info()
    return {k: int(info[k]) for k in ("fenced", "missed")}


def _line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"| {row['row']} | | | | error: {row['error']} | | FAIL |"
    floor = format_ns(row["floor_ns"]) if "floor_ns" in row else "-"
    best = format_interval(Interval(**row["pycuda_vs_floor"]), TARGET) if "pycuda_vs_floor" in row else "-"
    return (f"| {row['row']} | {format_ns(row['pycuda_ns'])} | {format_ns(row['compat_ns'])} | {floor} | "
            f"{format_interval(Interval(**row['ratio']), TARGET)} | {best} | {row['verdict']} |")


def _markdown(meta: dict[str, str], rows: list[dict[str, Any]], config: SamplingConfig) -> str:
    lines = ["# PyCUDA against ironaccel's PyCUDA surface", "",
             ", ".join(f"{k}: {v}" for k, v in meta.items()),
             f"{config.min_rounds}-{config.rounds} paired rounds per row, bootstrap 95% intervals; "
             f"ratio = PyCUDA time / compat time; PASS when the whole interval is above {TARGET}.  "
             "C floor: the same driver calls from C (floor.c); PyCUDA / floor is the most any wrapper could gain "
             "over PyCUDA on the row.", "",
             "| row | PyCUDA | compat | C floor | ratio [95% CI] | PyCUDA / floor | >= 1.2x |",
             "|---|---:|---:|---:|---:|---:|---|"]
    lines += [_line(row) for row in rows]
    passed = sum(row["verdict"] == "PASS" for row in rows)
    summary = f"{passed} of {len(rows)} rows meet the target."
    missed = [row for row in rows if row["verdict"] != "PASS"]
    if missed:  # out of any wrapper's reach: PyCUDA / floor's own interval does not clear the target
        floored = [str(row["row"]) for row in missed if "pycuda_vs_floor" in row
                   and row["pycuda_vs_floor"]["low"] <= TARGET]
        summary += (f"  Of the {len(missed)} that miss, {len(floored)} are rows where PyCUDA / floor does not clear "
                    f"{TARGET} either: " + ("; ".join(floored) or "none") + ".")
    lines += ["", summary, "",
              "Each side's idle `Stream.synchronize()` after the row (median of 5 x 2,000 calls; 1.5-2 us means "
              "the process is in the slow state of bench/experiments/probe_idle_sync.py):", "",
              "| after row | PyCUDA | compat |", "|---|---:|---:|"]
    for row in rows:
        idle = row.get("idle_sync_after_ns", {})
        lines.append(f"| {row['row']} | {format_ns(idle['PyCUDA']) if 'PyCUDA' in idle else '-'} | "
                     f"{format_ns(idle['compat']) if 'compat' in idle else '-'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

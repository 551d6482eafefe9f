"""The contract every side of the benchmark implements, and what they share.

A side is one way to drive the GPU from this process (ironaccel, raw cuda.bindings, cuda.core,
CuPy, PyTorch) or the C floor in its own process. Each operation method returns a `Case`
or raises `Unsupported` (its column stays blank). `open()` raises `SideUnavailable` when the
library is missing, so that column is skipped cleanly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from harness import Case
from ops import OpSpec

KERNEL_SOURCE = r"""
extern "C" __global__ void bench_k4(int* out, int a, int b, int c) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = a + b + c;
}
extern "C" __global__ void bench_k16(int* out, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8,
                                     int a9, int a10, int a11, int a12, int a13, int a14, int a15) {
    if (threadIdx.x == 0 && blockIdx.x == 0)
        out[0] = a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15;
}
"""
NVRTC_SOURCE = r"""
extern "C" __global__ void bench_saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
# The while-graph row: the body runs bench_k4's work and counts down; -rdc, linked with the device runtime.
WHILE_SOURCE = r"""
extern "C" __global__ void bench_k4(int* out, int a, int b, int c) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = a + b + c;
}
extern "C" __global__ void bench_countdown(cudaGraphConditionalHandle handle, int* left) {
    if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(handle, --(*left) > 0 ? 1u : 0u);
}
"""
GRID = (1, 1, 1)
BLOCK = (32, 1, 1)
CLUSTER_GRID = 2  # blocks of a launch with a cluster attribute: a multiple of every cluster size measured


def kernel_name(nargs: int) -> str:
    if nargs not in (4, 16):
        raise Unsupported(f"no benchmark kernel with {nargs} arguments")
    return f"bench_k{nargs}"


def kernel_ints(nargs: int) -> tuple[int, ...]:
    """The int arguments after the output pointer: 1, 2, ..., nargs-1."""
    return tuple(range(1, nargs))


def kernel_expected(nargs: int) -> int:
    return sum(kernel_ints(nargs))


class Unsupported(Exception):
    """This side has no such operation; its cell stays blank."""


class SideUnavailable(Exception):
    """This side cannot run here (library missing, no GPU); its column is skipped."""


class CheckFailed(AssertionError):
    """An operation ran but did not do its job (wrong bytes, wrong kernel result)."""


@dataclass
class HostData:
    """Host bytes for the transfer rows: one random reference (never zeros) and the pageable source and
    destination arrays every side copies from and into, so both sides of a pairing copy the same memory (issue
    14: "the same pinned or pageable source on both sides").  No side registers these arrays with the driver,
    so no library's copies change another's memory.

    `shared=False` gives each side its own pair of arrays instead (run.py --per-side-host-arrays; once the
    default).  On the H200 (quick runs) the pageable peers ran faster with shared arrays:
    16 MiB host-to-device 13.7-14.6 GB/s per side against 16.5-16.8 shared, 64 MiB device-to-host 9.3-10.0
    against 10.9-11.4 (a source another side has just read is cache-warm; the host's L3 is 300 MiB), while
    ironaccel's rates moved by 1-3%: shared is the condition that favours the peers."""

    max_bytes: int
    seed: int = 4
    shared: bool = True
    _src: np.ndarray | None = field(default=None, repr=False)
    _per_side: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    @property
    def src(self) -> np.ndarray:
        """The reference bytes every copy is checked against."""
        if self._src is None:
            self._src = np.random.default_rng(self.seed).integers(0, 256, self.max_bytes, dtype=np.uint8)
        return self._src

    def pageable(self, side: str, direction: str, nbytes: int) -> np.ndarray:
        """This side's pageable host array for a copy: the source of "h2d", the destination of "d2h"."""
        if self.shared:
            side = "shared"
        if side not in self._per_side:
            dst = np.full(self.max_bytes, 0xA5, dtype=np.uint8)  # touched now, so page faults are not timed
            self._per_side[side] = (self.src.copy(), dst)
        src, dst = self._per_side[side]
        return src[:nbytes] if direction == "h2d" else dst[:nbytes]

    def expect_equal(self, got: np.ndarray, nbytes: int, what: str) -> None:
        if got.shape[0] < nbytes or not np.array_equal(got[:nbytes], self.src[:nbytes]):
            bad = int(np.count_nonzero(got[:nbytes] != self.src[:nbytes])) if got.shape[0] >= nbytes else nbytes
            raise CheckFailed(f"{what}: {bad} of {nbytes} bytes differ from the source")


@dataclass
class BenchContext:
    """What the runner hands every side at open()."""

    device: int
    arch: str  # "90" for sm_90
    cubin: bytes  # KERNEL_SOURCE compiled once for `arch` (the same kernel bytes for every side that loads bytes)
    cubin_path: Path
    host: HostData
    workdir: Path


def written_out(target: Callable[..., Any], args: tuple[Any, ...], **kw: Any) -> Callable[[int], None]:
    """`run(n)`: n calls of `target(*args, **kw)` with every argument written out at the call site, the way code
    with a fixed argument list calls a launch (`fn.launch(grid, block, out, a, b, c, stream=s)`).  Unpacking a
    stored tuple there costs CPython allocations of its own: against the fake libcuda, ironaccel's launch took
    471 ns as `launch(g, b, *args, stream=s)` and 193 ns written out, cuda.core-style `f(s, c, k, *args)` 111 ns
    more than written out.  The launch rows of every side that takes arguments one by one use this.
    """
    names = [f"a{i}" for i in range(len(args))]
    keys = list(kw)
    call = ", ".join(names + [f"{k}={k}" for k in keys])
    source = (f"def make(target, {', '.join(names + keys)}):\n"
              f"    def run(n):\n"
              f"        for _ in range(n):\n"
              f"            target({call})\n"
              f"    return run\n")
    scope: dict[str, Any] = {}
    exec(source, scope)  # the source is built here from an argument count and keyword names only
    return scope["make"](target, *args, **kw)


def expect_kernel_result(got: int, nargs: int, side: str) -> None:
    want = kernel_expected(nargs)
    if int(got) != want:
        raise CheckFailed(f"{side}: bench_k{nargs} wrote {int(got)}, expected {want}")


def unique_source(counter: int, token: str) -> str:
    """NVRTC_SOURCE made unique, so no cache of any kind can answer it."""
    return f"{NVRTC_SOURCE}\n// bench nonce {token} {counter}\n"


class Side:
    """Base of every side; each operation raises Unsupported unless the side overrides it."""

    name: ClassVar[str] = "?"
    label: ClassVar[str] = "?"

    def open(self, ctx: BenchContext) -> dict[str, str]:
        """Start the side; return {package: version}. Raise SideUnavailable when it cannot run."""
        raise NotImplementedError

    def close(self) -> None:
        """Release everything open() made."""

    def kernel_check(self, run: Callable[[int], object], nargs: int = 4) -> Callable[[], None]:
        """A Case check for a row that runs bench_k<nargs>: clear the output, run once, read what the kernel wrote.

        For sides that define `_clear_out()` and `_read_out()` over their output word.
        """

        def check() -> None:
            self._clear_out()
            run(1)
            expect_kernel_result(self._read_out(), nargs, self.name)

        return check

    def case(self, op: OpSpec) -> Case:
        method = getattr(self, op.method, None)
        if method is None:
            raise Unsupported(f"{self.name} has no {op.method}")
        return method(**op.arguments())

    # Operations (see ops.py). Each returns a Case or raises Unsupported.
    def stream_sync(self) -> Case:
        raise Unsupported("stream_sync")

    def event_cycle(self) -> Case:
        raise Unsupported("event_cycle")

    def event_reuse(self) -> Case:
        raise Unsupported("event_reuse")

    def stream_alloc(self, nbytes: int) -> Case:
        raise Unsupported("stream_alloc")

    def pool_alloc(self, nbytes: int) -> Case:
        raise Unsupported("pool_alloc")

    def copy(self, direction: str, nbytes: int, pinned: bool) -> Case:
        raise Unsupported("copy")

    def launch(self, nargs: int) -> Case:
        raise Unsupported("launch")

    def launch_prepared(self, nargs: int) -> Case:
        """A launch repeated with the same arguments; a library without a prepared form repeats its launch."""
        case = self.launch(nargs)
        case.note = f"{case.note} (no prepared form: the same call)" if case.note else case.note
        return case

    def launch_cluster(self, cluster: int) -> Case:
        raise Unsupported("launch_cluster")

    def copy_to_new(self, nbytes: int) -> Case:
        raise Unsupported("copy_to_new")

    def launch_call_overhead(self, nargs: int) -> Case:
        raise Unsupported("launch_call_overhead")

    def eager_launches(self, count: int) -> Case:
        raise Unsupported("eager_launches")

    def graph_replay(self, count: int) -> Case:
        raise Unsupported("graph_replay")

    def nvrtc_cold(self) -> Case:
        raise Unsupported("nvrtc_cold")

    def nvrtc_memory_hit(self) -> Case:
        raise Unsupported("nvrtc_memory_hit")

    # Memory rows (issue 10; ops.memory_ops). Each returns a Case or raises Unsupported.
    def pool_cycle(self, nbytes: int, raised: bool) -> Case:
        raise Unsupported("pool_cycle")

    def ipc_roundtrip(self, nbytes: int) -> Case:
        raise Unsupported("ipc_roundtrip")

    def grow_in_place(self, nbytes: int, steps: int) -> Case:
        raise Unsupported("grow_in_place")

    def grow_by_copy(self, nbytes: int) -> Case:
        raise Unsupported("grow_by_copy")

    def managed_prefetch(self, nbytes: int) -> Case:
        raise Unsupported("managed_prefetch")


# -- shared by the memory rows ---------------------------------------------------------------------------------

MAX_THRESHOLD = (1 << 64) - 1


def set_default_pool_threshold(ordinal: int, value: int) -> None:
    """The release threshold of the device's default pool, set through cuda.bindings.

    The default pool is one per device and process, shared by every side; a pool_cycle case sets it
    for its row and its close() leaves it raised (MAX_THRESHOLD), as ironaccel leaves it at its first
    use, so no later row runs with another setting.
    """
    from cuda.bindings import driver

    err, dev = driver.cuDeviceGet(ordinal)
    if not err:
        err, pool = driver.cuDeviceGetDefaultMemPool(dev)
    if not err:
        attr = driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        (err,) = driver.cuMemPoolSetAttribute(pool, attr, driver.cuuint64_t(value))
    if err:
        raise RuntimeError(f"setting the default pool's release threshold failed: {err!r}")


class IpcImporter:
    """The other process of the IPC row: spawned once per case, it imports and closes `n` times and times that.

    `target(conn)` is a module-level function of the side (spawn imports it) that calls
    `serve_ipc(conn, setup)`.  A batch's time is the parent's n exports plus the child's n import+close,
    each measured where it happens (the pipe between them is not counted).
    """

    def __init__(self, target: Any, setup: Any, timeout: float = 120.0):
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # CUDA is initialised in this process
        self.timeout = timeout
        self.conn, child = context.Pipe()
        self.proc = context.Process(target=target, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        try:
            self.request(("setup", setup))
        except BaseException:
            self.close()
            raise

    def request(self, message: tuple) -> Any:
        self.conn.send(message)
        if not self.conn.poll(self.timeout):
            raise RuntimeError(f"the IPC importer did not answer within {self.timeout:.0f} s")
        status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"the IPC importer failed: {value}")
        return value

    def import_close(self, payload: Any, n: int) -> int:
        return int(self.request(("run", payload, n)))

    def close(self) -> None:
        try:
            self.conn.send(("stop", None))
        except (OSError, ValueError):
            pass
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()


def serve_ipc(conn: Any, setup: Any) -> None:
    """The importer's loop: `setup(payload)` returns `run(payload, n) -> ns`; replies ("ok", v) or ("error", text)."""
    import traceback

    run = None
    try:
        while True:
            kind, *rest = conn.recv()
            if kind == "stop":
                return
            try:
                if kind == "setup":
                    run = setup(rest[0])
                    conn.send(("ok", None))
                else:
                    conn.send(("ok", run(rest[0], rest[1])))
            except BaseException:
                conn.send(("error", traceback.format_exc(limit=6)))
    finally:
        conn.close()

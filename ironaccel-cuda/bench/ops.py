"""What the benchmark measures: the operations of issue 4, each a method every side may implement.

An `OpSpec` names a `Side` method and its arguments; the plan is the list of them, in the order
the table shows them. Sizes and counts are here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

ALLOC_SIZES = (256, 64 * KiB, 1 * MiB)
TRANSFER_SIZES = tuple(256 * 4**i for i in range(11))  # 256 B, 1 KiB, ... 64 MiB, 256 MiB
QUICK_TRANSFER_SIZES = (256, 1 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB)
LAUNCH_ARGS = (4, 16)
GRAPH_LAUNCHES = 100


@dataclass(frozen=True)
class OpSpec:
    """One operation: `method` of a Side, called with `kwargs`; `key` is unique and stable (JSON)."""

    key: str
    method: str
    title: str
    group: str
    kwargs: tuple[tuple[str, object], ...] = ()
    nbytes: int = 0

    def arguments(self) -> dict[str, object]:
        return dict(self.kwargs)


def human_bytes(nbytes: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def stream_sync() -> OpSpec:
    return OpSpec("stream_sync", "stream_sync", "stream synchronize (idle stream)", "host")


def event_cycle() -> OpSpec:
    return OpSpec("event_cycle", "event_cycle", "event create/record/sync/destroy (timing off)", "host")


def event_reuse() -> OpSpec:
    return OpSpec("event_reuse", "event_reuse", "event record+sync (event reused)", "host")


def stream_alloc(nbytes: int) -> OpSpec:
    return OpSpec(
        f"stream_alloc/{nbytes}", "stream_alloc", f"stream-ordered alloc+free {human_bytes(nbytes)}", "alloc",
        (("nbytes", nbytes),), nbytes,
    )


def pool_alloc(nbytes: int) -> OpSpec:
    return OpSpec(
        f"pool_alloc/{nbytes}", "pool_alloc", f"pooled alloc+free {human_bytes(nbytes)} (warm)", "pool",
        (("nbytes", nbytes),), nbytes,
    )


def copy(direction: str, nbytes: int, pinned: bool) -> OpSpec:
    if direction not in ("h2d", "d2h"):
        raise ValueError(f"copy direction must be 'h2d' or 'd2h', got {direction!r}")
    memory = "pinned" if pinned else "pageable"
    arrow = "host to device" if direction == "h2d" else "device to host"
    return OpSpec(
        f"{direction}/{memory}/{nbytes}", "copy", f"{arrow} {human_bytes(nbytes)} {memory}", "transfer",
        (("direction", direction), ("nbytes", nbytes), ("pinned", pinned)), nbytes,
    )


def launch(nargs: int) -> OpSpec:
    return OpSpec(f"launch/{nargs}", "launch", f"kernel launch, {nargs} arguments", "launch", (("nargs", nargs),))


def launch_prepared(nargs: int) -> OpSpec:
    """A launch repeated with the same arguments: ironaccel's Function.prepare; peers repeat their launch call."""
    return OpSpec(f"launch_prepared/{nargs}", "launch_prepared",
                  f"kernel launch, {nargs} arguments, repeated (prepared)", "launch", (("nargs", nargs),))


def launch_cluster(cluster: int) -> OpSpec:
    """A launch with a thread-block-cluster attribute (cuLaunchKernelEx), grid of two clusters."""
    return OpSpec(f"launch_cluster/{cluster}", "launch_cluster",
                  f"kernel launch, 4 arguments, cluster of {cluster} (launch attributes)", "launch",
                  (("cluster", cluster),))


def copy_to_new(nbytes: int) -> OpSpec:
    """Device to a new host array (the library allocates the destination), synchronous."""
    return OpSpec(f"d2h_new/{nbytes}", "copy_to_new", f"device to a new host array {human_bytes(nbytes)}", "transfer",
                  (("nbytes", nbytes),), nbytes)


def launch_call_overhead(nargs: int) -> OpSpec:
    """A no-op Python call shaped like ironaccel's launch call: the unavoidable Python cost."""
    return OpSpec(
        f"python_call/{nargs}", "launch_call_overhead", f"no-op Python call shaped like launch, {nargs} arguments",
        "launch", (("nargs", nargs),),
    )


def eager_launches(count: int) -> OpSpec:
    return OpSpec(
        f"eager/{count}", "eager_launches", f"{count} launches issued eagerly + stream sync", "graph",
        (("count", count),),
    )


def graph_replay(count: int) -> OpSpec:
    return OpSpec(
        f"graph/{count}", "graph_replay", f"graph replay of {count} launches + stream sync", "graph",
        (("count", count),),
    )


def conditional_while(count: int) -> OpSpec:
    return OpSpec(
        f"while/{count}", "conditional_while", f"conditional while-graph of {count} launches + stream sync", "graph",
        (("count", count),),
    )


def host_func() -> OpSpec:
    return OpSpec("host_func", "host_func", "host callback round trip (launch a host function + stream sync)",
                  "hostfn")


def nvrtc_cold() -> OpSpec:
    return OpSpec("nvrtc/cold", "nvrtc_cold", "NVRTC compile to CUBIN, cold (new source each time)", "nvrtc")


def nvrtc_memory_hit() -> OpSpec:
    return OpSpec("nvrtc/memory_hit", "nvrtc_memory_hit", "NVRTC compile, in-memory cache hit", "nvrtc")


def transfer_ops(sizes: tuple[int, ...]) -> list[OpSpec]:
    return [copy(direction, n, pinned) for pinned in (False, True) for direction in ("h2d", "d2h") for n in sizes]


def plan(*, quick: bool = False, groups: frozenset[str] | None = None) -> list[OpSpec]:
    """Every operation of issue 4, in table order; `groups` keeps only those groups."""
    ops: list[OpSpec] = [stream_sync(), event_cycle(), event_reuse()]
    ops += [stream_alloc(n) for n in ALLOC_SIZES]
    ops += [pool_alloc(n) for n in ALLOC_SIZES]
    ops += [launch(n) for n in LAUNCH_ARGS]
    ops += [launch_prepared(4), launch_cluster(2)]
    ops += [eager_launches(GRAPH_LAUNCHES), graph_replay(GRAPH_LAUNCHES), conditional_while(GRAPH_LAUNCHES)]
    ops += [host_func()]
    ops += [nvrtc_cold(), nvrtc_memory_hit()]
    ops += transfer_ops(QUICK_TRANSFER_SIZES if quick else TRANSFER_SIZES)
    ops += [copy_to_new(64 * MiB)]
    ops += memory_ops()
    if groups is not None:
        ops = [op for op in ops if op.group in groups]
    return ops


GROUPS = ("host", "alloc", "pool", "launch", "graph", "hostfn", "nvrtc", "transfer", "memory")


# -- memory (issue 10): the default pool's release threshold, IPC, growable virtual memory, managed memory -----
POOL_CYCLE_SIZES = (1 * MiB, 64 * MiB)
IPC_BYTES = 1 * MiB
GROW_BYTES = 1 * GiB
GROW_STEPS = 8  # grows per timed batch at most (the reservation holds 1 + GROW_STEPS times GROW_BYTES)
PREFETCH_BYTES = 1 * GiB


def pool_cycle(nbytes: int, raised: bool) -> OpSpec:
    """Allocate, free, synchronize: with threshold 0 every synchronize gives the memory back to the driver."""
    which = "raised" if raised else "0"
    return OpSpec(
        f"pool_cycle/{'raised' if raised else 'zero'}/{nbytes}", "pool_cycle",
        f"alloc+free+sync {human_bytes(nbytes)}, default pool threshold {which}", "memory",
        (("nbytes", nbytes), ("raised", raised)), nbytes,
    )


def ipc_roundtrip(nbytes: int) -> OpSpec:
    return OpSpec(
        f"ipc/{nbytes}", "ipc_roundtrip", f"IPC export + import + close of a {human_bytes(nbytes)} buffer "
        "(importer: another process)", "memory", (("nbytes", nbytes),), nbytes,
    )


def grow_in_place(nbytes: int) -> OpSpec:
    return OpSpec(
        f"grow/vmm/{nbytes}", "grow_in_place", f"grow a buffer by {human_bytes(nbytes)} in place (virtual memory)",
        "memory", (("nbytes", nbytes), ("steps", GROW_STEPS)), nbytes,
    )


def grow_by_copy(nbytes: int) -> OpSpec:
    return OpSpec(
        f"grow/copy/{nbytes}", "grow_by_copy",
        f"grow a {human_bytes(nbytes)} buffer by {human_bytes(nbytes)}: allocate a bigger one, copy, free",
        "memory", (("nbytes", nbytes),), nbytes,
    )


def managed_prefetch(nbytes: int) -> OpSpec:
    return OpSpec(
        f"prefetch/{nbytes}", "managed_prefetch", f"managed prefetch of {human_bytes(nbytes)} to the device + sync",
        "memory", (("nbytes", nbytes),), nbytes,
    )


def memory_ops() -> list[OpSpec]:
    ops = [pool_cycle(n, raised) for n in POOL_CYCLE_SIZES for raised in (True, False)]
    return ops + [ipc_roundtrip(IPC_BYTES), grow_in_place(GROW_BYTES), grow_by_copy(GROW_BYTES),
                  managed_prefetch(PREFETCH_BYTES)]

"""Vulkan-specific behaviour of VulkanDevice: both memory paths, reuse, async, limits, errors, teardown.

Each test runs on a device with mapped memory (the default on lavapipe), one with device-local
memory and a small staging chunk (the default path on a discrete GPU, here with many chunks), and
one with the validation layer on (skipped where the layer is not installed).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ironaccel.errors import ClosedError, CompileError, InvalidArgument, Timeout
from ironaccel.protocols import ComputeDevice, Submission
from ironaccel.testing.conformance import scale_offset
from ironaccel.testing.pytest_plugin import require
from ironaccel_vulkan import Backend
from ironaccel_vulkan.dispatch import MAX_COMMANDS_PER_SET, Command
from ironaccel_vulkan.physical import TYPE_CPU

F32 = np.float32
MODES = {
    "mapped": {"memory": "auto"},
    "staged": {"memory": "staged", "staging_chunk_bytes": 1 << 16},
    "validated": {"memory": "auto"},
}


@pytest.fixture(params=list(MODES))
def device(request: pytest.FixtureRequest) -> Iterator[Any]:
    require("vulkan")
    backend = Backend(validation=True) if request.param == "validated" else Backend(validation=False)
    if request.param == "validated" and not backend.probe().available:
        pytest.skip(backend.probe().reason)
    dev = backend.open(0, **MODES[request.param])
    yield dev
    dev.close()


@pytest.fixture
def so(device: Any, scale_offset_spv: bytes) -> Any:
    return device.pipeline(scale_offset_spv, buffers=2, params=3)


def params(a: float, b: float, n: int) -> tuple[Any, ...]:
    return (F32(a), F32(b), np.uint32(n))


# -- memory ---------------------------------------------------------------------------------------------------


def test_memory_mode(device: Any) -> None:
    assert device.memory_mode in ("mapped", "staged")
    buf = device.alloc(16)
    assert buf.mapped == (device.memory_mode == "mapped")
    if device.info.unified_memory and device._state.memory_mode != "staged":
        assert device.memory_mode == "mapped"
    buf.close()


def grid(n: int) -> tuple[int, int]:
    """A 2-D grid of 64-wide workgroups covering n (rows of 4096 groups), within every device's limits."""
    groups = -(-n // 64)
    return (min(groups, 4096), -(-groups // 4096))


def test_64_mib_round_trip(device: Any, so: Any) -> None:
    n = 16 << 20  # 64 MiB of float32
    x = np.random.default_rng(1).standard_normal(n, dtype=F32)
    xs, ys = device.upload(x), device.alloc(n)
    device.dispatch(so, [xs, ys], grid(n), params(1.5, -2.0, n))
    y = device.download(ys)
    np.testing.assert_allclose(y, F32(1.5) * x + F32(-2.0), rtol=1e-6, atol=1e-6)
    xs.close()
    ys.close()


def test_write_into_an_existing_buffer(device: Any, so: Any) -> None:
    rng = np.random.default_rng(2)
    xs, ys = device.alloc(1000), device.alloc(1000)
    for _ in range(3):
        x = rng.standard_normal(1000, dtype=F32)
        device.write(xs, x)
        device.dispatch(so, [xs, ys], 16, params(2, 0, 1000))
        device.write(xs, np.zeros(1000, F32))  # must wait for the dispatch that reads xs (mapped) or queue after it
        np.testing.assert_allclose(device.download(ys), 2 * x, rtol=1e-6)
        np.testing.assert_array_equal(device.download(xs), 0)
    with pytest.raises(InvalidArgument):
        device.write(xs, np.zeros(1001, F32))
    with pytest.raises(InvalidArgument):
        device.write(xs, np.zeros((4, 8), F32)[:, ::2])
    xs.close()
    ys.close()


def test_partial_download_and_reinterpretation(device: Any) -> None:
    data = np.arange(100, dtype=np.int32)
    buf = device.upload(data)
    out = np.full(10, -1, np.int32)
    np.testing.assert_array_equal(device.download(buf, out), data[:10])
    as_bytes = device.download(buf, np.empty(400, np.uint8))
    np.testing.assert_array_equal(as_bytes.view(np.int32), data)
    with pytest.raises(InvalidArgument):
        device.download(buf, [0] * 10)
    with pytest.raises(InvalidArgument):
        ro = np.zeros(10, np.int32)
        ro.flags.writeable = False
        device.download(buf, ro)
    buf.close()


def test_upload_forms(device: Any) -> None:
    grid = np.arange(12, dtype=np.float64).reshape(3, 4)
    buf = device.upload(grid)
    assert buf.size == 12 and buf.dtype.value == "float64"
    np.testing.assert_array_equal(device.download(buf), grid.ravel())
    buf.close()
    for bad in (np.zeros(0, F32), np.array([object()]), np.zeros((4, 4), F32).T):
        with pytest.raises(InvalidArgument):
            device.upload(bad)
    with pytest.raises(InvalidArgument):
        device.alloc(4, "not-a-dtype")


# -- pipelines ------------------------------------------------------------------------------------------------


def test_pipelines_are_cached_and_refcounted(device: Any, scale_offset_spv: bytes) -> None:
    before = device.stats().get("pipelines_created", 0)
    p1 = device.pipeline(scale_offset_spv, buffers=2, params=3)
    p2 = device.pipeline(list(np.frombuffer(scale_offset_spv, "<u4")), buffers=2, params=3)  # same words
    assert device.stats()["pipelines_created"] == before + 1
    assert p1 is not p2 and p1.program is p2.program and p1.program.users == 2
    p1.close()
    p1.close()
    xs, ys = device.upload(np.ones(64, F32)), device.alloc(64)
    device.dispatch(p2, [xs, ys], 1, params(3, 1, 64))
    np.testing.assert_array_equal(device.download(ys), 4)
    with pytest.raises(ClosedError):
        device.dispatch(p1, [xs, ys], 1, params(3, 1, 64))
    p2.close()
    assert p2.closed and p1.program is None
    p3 = device.pipeline(scale_offset_spv, buffers=2, params=3)
    assert device.stats()["pipelines_created"] == before + 1  # closing every handle left it cached
    p3.close()
    xs.close()
    ys.close()


def test_three_buffers_integer_params_2d_grid(device: Any, axpy_int_spv: bytes) -> None:
    p = device.pipeline(axpy_int_spv, buffers=3, params=3)
    rng = np.random.default_rng(3)
    row, rows = 256, 37
    n = row * rows - 5
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    y = rng.integers(-1000, 1000, n, dtype=np.int32)
    xs, ys, zs = device.upload(x), device.upload(y), device.upload(np.full(n, 7, np.int32))
    device.dispatch(p, [xs, ys, zs], (row // 64, rows), (np.int32(-3), np.uint32(n), np.uint32(row)))
    np.testing.assert_array_equal(device.download(zs), -3 * x + y)
    device.dispatch(p, [xs, ys, zs], [row // 64, rows, 1], (5, n, row))  # Python ints pack as int32
    np.testing.assert_array_equal(device.download(zs), 5 * x + y)
    for b in (xs, ys, zs, p):
        b.close()


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"buffers": 1, "params": 3}, InvalidArgument, "binding 1"),
        ({"buffers": 2, "params": 2}, InvalidArgument, "12 bytes of push constants"),
        ({"buffers": 2, "params": 0}, InvalidArgument, "push constants"),
        ({"buffers": 2, "params": 1000}, InvalidArgument, "push constants"),
        ({"buffers": -1, "params": 3}, InvalidArgument, "buffers must be an int >= 0"),
        ({"buffers": 2, "params": 3, "entry": "scale"}, CompileError, "no GLCompute entry point named 'scale'"),
    ],
)
def test_pipeline_interface_mismatch(device: Any, scale_offset_spv: bytes, kwargs: dict, error: type,
                                     match: str) -> None:
    kwargs = dict(kwargs)
    entry = kwargs.pop("entry", "main")
    with pytest.raises(error, match=match) as info:
        device.pipeline(scale_offset_spv, entry, **kwargs)
    assert info.value.op


def test_more_buffers_than_the_device_binds(device: Any, scale_offset_spv: bytes) -> None:
    limit = device.limits["max_storage_buffers_per_stage"]
    with pytest.raises(InvalidArgument) as info:
        device.pipeline(scale_offset_spv, buffers=limit + 1, params=3)
    assert info.value.op == "pipeline" and f"maxPerStageDescriptorStorageBuffers ({limit})" in info.value.detail


def test_a_recording_that_fails_gives_its_command_buffer_back(device: Any, so: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from ironaccel.errors import DriverError
    from ironaccel_vulkan import dispatch

    xs, ys = device.upload(np.arange(64, dtype=F32)), device.alloc(64)
    device.dispatch(so, [xs, ys], 1, params(2, 1, 64)).wait()
    state = device._state
    spare = len(state.free_command_buffers)

    def failing(*args: Any) -> None:
        raise DriverError("vulkan", "vkEndCommandBuffer", code=-1)

    monkeypatch.setattr(dispatch, "_record", failing)
    with pytest.raises(DriverError):
        device.dispatch(so, [xs, ys], 1, params(5, 1, 64))  # new params: a new recording, which fails
    assert len(state.free_command_buffers) == max(spare, 1)  # the buffer it took is on the free list again
    monkeypatch.undo()
    device.dispatch(so, [xs, ys], 1, params(5, 1, 64)).wait()
    np.testing.assert_array_equal(device.download(ys), 5 * np.arange(64, dtype=F32) + 1)
    xs.close()
    ys.close()


def test_not_spirv(device: Any, scale_offset_spv: bytes) -> None:
    with pytest.raises(InvalidArgument, match="glslangValidator"):
        device.pipeline("#version 450\nvoid main() {}", buffers=0)
    with pytest.raises(CompileError, match="magic") as info:
        device.pipeline(b"\0" * 64, buffers=2, params=3)
    assert info.value.log and info.value.op == "pipeline"


# -- dispatch: reuse, async, order ----------------------------------------------------------------------------


def test_repeated_dispatch_rebuilds_nothing(device: Any, so: Any) -> None:
    xs, ys = device.upload(np.arange(256, dtype=F32)), device.alloc(256)
    device.dispatch(so, [xs, ys], 4, params(2, 1, 256)).wait()
    first = device.stats()
    for _ in range(50):
        device.dispatch(so, [xs, ys], 4, params(2, 1, 256))
    device.synchronize()
    queued = device.stats()
    assert queued["submits"] >= first["submits"] + 50
    # back to back, an identical dispatch takes another recording while the last is pending, up to a few
    assert queued["commands_recorded"] - first["commands_recorded"] <= Command.MAX_COPIES - 1
    for _ in range(50):
        device.dispatch(so, [xs, ys], 4, params(2, 1, 256)).wait()
    after = device.stats()
    assert after["submits"] == queued["submits"] + 50
    for key in ("commands_recorded", "descriptor_sets_written", "pipelines_created", "memory_allocations",
                "fences_created"):
        assert after.get(key) == queued.get(key), key
    np.testing.assert_array_equal(device.download(ys), 2 * np.arange(256, dtype=F32) + 1)
    device.dispatch(so, [xs, ys], 4, params(3, 1, 256))  # new params: one recording, same descriptor set
    assert device.stats()["commands_recorded"] == after["commands_recorded"] + 1
    assert device.stats()["descriptor_sets_written"] == after["descriptor_sets_written"]
    zs = device.alloc(256)
    device.dispatch(so, [xs, zs], 4, params(3, 1, 256))  # new buffers: one new descriptor set
    assert device.stats()["descriptor_sets_written"] == after["descriptor_sets_written"] + 1
    np.testing.assert_array_equal(device.download(zs), 3 * np.arange(256, dtype=F32) + 1)
    for b in (xs, ys, zs):
        b.close()


def test_fences_are_recycled(device: Any, so: Any) -> None:
    xs, ys = device.upload(np.ones(64, F32)), device.alloc(64)
    start = device.stats().get("fences_created", 0)
    for i in range(300):
        device.dispatch(so, [xs, ys], 1, params(i, 0, 64)).wait()
    assert device.stats()["fences_created"] - start <= 2
    np.testing.assert_array_equal(device.download(ys), 299)
    xs.close()
    ys.close()


class _CountingLib:
    """The device's cffi library with its fence waits and polls counted."""

    def __init__(self, lib: Any):
        self._lib = lib
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._lib, name)
        if name not in ("vkWaitForFences", "vkGetFenceStatus"):
            return found

        def counted(*args: Any) -> Any:
            self.calls.append(name)
            return found(*args)

        return counted


def test_a_wait_on_a_cpu_device_polls_its_fence_before_blocking(device: Any, so: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from ironaccel_vulkan.physical import TYPE_CPU, TYPE_DISCRETE
    from ironaccel_vulkan.submission import ENV_SPIN, spin_seconds

    timeline = device._state.timeline
    lib = _CountingLib(timeline.lib)
    monkeypatch.setattr(timeline, "lib", lib)
    xs, ys = device.upload(np.ones(64, F32)), device.alloc(64)
    monkeypatch.setattr(timeline, "spin", 5.0)  # a 64-element dispatch is done well within the poll
    device.dispatch(so, [xs, ys], 1, params(2, 0, 64)).wait()
    assert "vkGetFenceStatus" in lib.calls and "vkWaitForFences" not in lib.calls
    lib.calls.clear()
    monkeypatch.setattr(timeline, "spin", 0.0)
    device.dispatch(so, [xs, ys], 1, params(3, 0, 64)).wait()
    assert lib.calls.count("vkWaitForFences") >= 1 and "vkGetFenceStatus" not in lib.calls
    np.testing.assert_array_equal(device.download(ys), 3)
    monkeypatch.delenv(ENV_SPIN, raising=False)
    assert spin_seconds(TYPE_DISCRETE) == 0.0  # GPUs block at once
    assert spin_seconds(TYPE_CPU) in (0.0, 200e-6)  # lavapipe polls where a second core can run it
    monkeypatch.setenv(ENV_SPIN, "50")
    assert spin_seconds(TYPE_DISCRETE) == 50e-6
    for bad in ("-1", "nan", "inf", "soon"):
        monkeypatch.setenv(ENV_SPIN, bad)
        with pytest.raises(InvalidArgument):
            spin_seconds(TYPE_CPU)
    xs.close()
    ys.close()


def test_a_wait_after_a_long_one_blocks_at_once(device: Any, so: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait that outlasted its poll makes the next one block at once (polling takes a core a CPU device's threads
    need for long work); one that blocks briefly brings the poll back."""
    timeline = device._state.timeline
    lib = _CountingLib(timeline.lib)
    monkeypatch.setattr(timeline, "lib", lib)
    cpu = device.info.device_type == TYPE_CPU
    n, repeats = (1 << 20, 1) if cpu else (1 << 24, 8)  # a GPU does 1 Mi elements before the first poll
    xs, ys = device.upload(np.ones(n, F32)), device.alloc(n)
    small_x, small_y = device.upload(np.ones(64, F32)), device.alloc(64)
    monkeypatch.setattr(timeline, "spin", 1e-7)  # far shorter than the dispatches over `n` elements
    for _ in range(repeats):
        last = device.dispatch(so, [xs, ys], grid(n), params(2, 0, n))
    last.wait()
    assert timeline.long_waits
    lib.calls.clear()
    monkeypatch.setattr(timeline, "spin", 5.0)
    device.dispatch(so, [small_x, small_y], 1, params(3, 0, 64)).wait()
    assert "vkGetFenceStatus" not in lib.calls and "vkWaitForFences" in lib.calls  # no poll after a long wait
    assert not timeline.long_waits  # that one was short
    lib.calls.clear()
    device.dispatch(so, [small_x, small_y], 1, params(4, 0, 64)).wait()
    assert "vkGetFenceStatus" in lib.calls and "vkWaitForFences" not in lib.calls  # polled again
    np.testing.assert_array_equal(device.download(small_y), 4)
    np.testing.assert_array_equal(device.download(ys)[:8], 2)


def test_many_distinct_params_stay_bounded_and_correct(device: Any, so: Any) -> None:
    x = np.arange(64, dtype=F32)
    xs, ys = device.upload(x), device.alloc(64)
    subs = []
    for a in range(3 * MAX_COMMANDS_PER_SET):
        subs.append(device.dispatch(so, [xs, ys], 1, params(a, 0.5, 64)))
    np.testing.assert_array_equal(device.download(ys), (3 * MAX_COMMANDS_PER_SET - 1) * x + 0.5)
    assert all(s.done() for s in subs)
    entry = next(iter(device._state.bindings.values()))
    assert len(entry.commands) <= MAX_COMMANDS_PER_SET
    xs.close()
    ys.close()


def test_submission_is_asynchronous_and_waitable(device: Any, so: Any) -> None:
    n = 1 << 20
    xs, ys = device.upload(np.ones(n, F32)), device.alloc(n)
    subs = [device.dispatch(so, [xs, ys], n // 64, params(k, 0, n)) for k in range(8)]
    assert all(isinstance(s, Submission) for s in subs)
    subs[-1].wait(timeout=60)
    assert all(s.done() for s in subs)  # a later submission finishing implies the earlier ones did
    subs[0].wait()
    np.testing.assert_array_equal(device.download(ys), 7)
    xs.close()
    ys.close()


def test_wait_timeout_is_typed(device: Any, so: Any) -> None:
    n = 16 << 20
    xs, ys = device.upload(np.ones(n, F32)), device.alloc(n)
    sub = None
    for _ in range(4):
        sub = device.dispatch(so, [xs, ys], grid(n), params(1, 1, n))
    try:
        sub.wait(timeout=0)
    except Timeout as exc:
        assert exc.op == "wait" and exc.backend == "vulkan" and isinstance(exc, TimeoutError)
    sub.wait(1e11)  # past vkWaitForFences' 64-bit nanoseconds: waited in slices, never an overflow
    sub.wait()
    assert sub.done()
    xs.close()
    ys.close()


def test_close_while_pending_defers_the_free(device: Any, so: Any) -> None:
    n = 1 << 20
    x = np.random.default_rng(4).standard_normal(n, dtype=F32)
    xs, ys = device.upload(x), device.alloc(n)
    device.dispatch(so, [xs, ys], n // 64, params(2, 1, n))
    xs.close()  # still read by the pending dispatch: freed only after it finishes
    np.testing.assert_allclose(device.download(ys), 2 * x + 1, rtol=1e-6)
    assert xs.closed
    with pytest.raises(ClosedError):
        device.dispatch(so, [xs, ys], n // 64, params(2, 1, n))
    ys.close()


def test_threads_share_a_device(device: Any, so: Any) -> None:
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            for _ in range(10):
                x = rng.standard_normal(4096, dtype=F32)
                np.testing.assert_allclose(scale_offset(device, x, seed, 1.0, so), F32(seed) * x + 1, rtol=1e-5,
                                           atol=1e-6 * (1 + abs(seed)))  # GPUs fuse a*x+b into an FMA
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# -- limits and bad input -------------------------------------------------------------------------------------


def test_dispatch_limits(device: Any, so: Any) -> None:
    limit = device.limits["max_workgroup_count"]
    a, b = device.alloc(64), device.alloc(64)
    for groups in ((limit[0] + 1,), (1, 1, limit[2] + 1), (1, 2, 3, 4), (), "4", 2.0, (True,), -3):
        with pytest.raises(InvalidArgument) as info:
            device.dispatch(so, [a, b], groups, params(1, 0, 64))
        assert info.value.op == "dispatch"
    for bad in ((np.float64(1), F32(0), np.uint32(64)), (F32(1), "0", np.uint32(64)), (F32(1), F32(0), 2**40),
                (F32(1), F32(0), True), (F32(1), F32(0), np.int64(-1)), (F32(1), F32(0), np.int64(2**33))):
        # The module's push-constant block is reflected (a: float, b: float, n: uint): an int of any width is
        # checked against uint32's range, a float64 is refused for a float field.
        with pytest.raises(InvalidArgument, match="param"):
            device.dispatch(so, [a, b], 1, bad)
    with pytest.raises(InvalidArgument):
        device.dispatch(object(), [a, b], 1, params(1, 0, 64))
    with pytest.raises(InvalidArgument):
        device.dispatch(so, [a, np.zeros(64, F32)], 1, params(1, 0, 64))
    a.close()
    b.close()


def test_buffer_over_the_storage_range(device: Any, so: Any) -> None:
    limit = device.limits["max_storage_buffer_range"]
    if limit >= device.limits["max_buffer_bytes"] or limit + 64 > device.descriptor.memory_bytes // 4:
        pytest.skip(f"maxStorageBufferRange ({limit}) is not below what can be allocated here")
    big, small = device.alloc(limit // 4 + 16), device.alloc(64)
    with pytest.raises(InvalidArgument, match="maxStorageBufferRange"):
        device.dispatch(so, [big, small], 1, params(1, 0, 64))
    big.close()
    small.close()


def test_objects_of_another_device(device: Any, so: Any, scale_offset_spv: bytes) -> None:
    other = Backend(validation=False).open(0)
    try:
        theirs = other.pipeline(scale_offset_spv, buffers=2, params=3)
        a, b = device.alloc(64), device.alloc(64)
        with pytest.raises(InvalidArgument, match="another device"):
            device.dispatch(theirs, [a, b], 1, params(1, 0, 64))
        foreign = other.alloc(64)
        with pytest.raises(InvalidArgument, match="another device"):
            device.write(foreign, np.zeros(64, F32))
        a.close()
        b.close()
    finally:
        other.close()


def test_everything_after_close(device: Any, so: Any, scale_offset_spv: bytes) -> None:
    dev = Backend(validation=False).open(0, memory=device._state.memory_mode)
    buf = dev.upload(np.ones(64, F32))
    out = dev.alloc(64)
    p = dev.pipeline(scale_offset_spv, buffers=2, params=3)
    sub = dev.dispatch(p, [buf, out], 1, params(1, 0, 64))
    dev.close()
    dev.close()
    sub.wait()
    assert sub.done() and dev.closed
    for call in (lambda: dev.upload(np.ones(4, F32)), lambda: dev.alloc(4), lambda: dev.download(buf),
                 lambda: dev.write(buf, np.ones(4, F32)), lambda: dev.pipeline(scale_offset_spv, buffers=2, params=3),
                 lambda: dev.dispatch(p, [buf, out], 1, params(1, 0, 64)), dev.synchronize):
        with pytest.raises(ClosedError):
            call()
    buf.close()  # freed with the device: a no-op now
    p.close()
    assert buf.closed and p.closed


def test_garbage_collected_objects_are_freed(device: Any, scale_offset_spv: bytes) -> None:
    core = device._state
    live = len(core.allocations)
    bufs = [device.alloc(1024) for _ in range(10)]
    assert len(core.allocations) == live + 10
    p = device.pipeline(scale_offset_spv, buffers=2, params=3)
    program = p.program
    device.dispatch(p, bufs[:2], 1, params(1, 0, 64))
    del bufs, p
    gc.collect()
    device.synchronize()  # the next operation frees what the collector released
    assert len(core.allocations) == live
    assert not core.bindings and program.users == 0  # the program stays cached for the next request


def test_dropped_device_is_torn_down() -> None:
    require("vulkan")
    dev = Backend(validation=False).open(0)
    core = dev._state
    dev.upload(np.ones(8, F32))
    del dev
    gc.collect()
    assert core.closed and core.handle is None


def test_satisfies_the_protocol(device: Any) -> None:
    assert isinstance(device, ComputeDevice)
    assert "VulkanDevice" in repr(device)


CUT_MODULES = """
import sys
import numpy as np
from ironaccel.errors import CompileError, InvalidArgument
from ironaccel_vulkan import Backend

spv = open(sys.argv[1], "rb").read()
words = np.frombuffer(spv, "<u4")
starts, i = [], 5
while i < words.size:
    starts.append(i)
    i += int(words[i]) >> 16
prefixes = [words[:s].tobytes() for s in starts[1:]]  # every cut at an instruction boundary: no OpFunctionEnd
dropped = [np.concatenate([words[:s], words[s + (int(words[s]) >> 16):]]).tobytes()  # one instruction left out,
           for s in starts]                                                            # e.g. a block's OpReturn
dev = Backend(validation=False).open(0)
refused = []
for kind, codes in (("cut before instruction", prefixes), ("without instruction", dropped)):
    refused.append(0)
    for n, code in enumerate(codes):
        # If the driver kills the process, the last line of stderr names the module (H200: SIGSEGV
        # without instruction 21, a BuiltIn decoration, which spirv-val accepts; spirv.reflect refuses it now).
        at = starts[n + 1] if kind.startswith("cut") else starts[n]
        print(kind, n, "opcode", int(words[at]) & 0xFFFF, file=sys.stderr, flush=True)
        try:
            dev.pipeline(code, buffers=2, params=3).close()
        except (CompileError, InvalidArgument):
            refused[-1] += 1
dev.close()
print(len(prefixes), refused[0], len(dropped), refused[1])
"""


def test_spirv_cut_at_any_instruction_never_reaches_the_driver(scale_offset_spv: bytes, tmp_path: Any) -> None:
    import subprocess
    import sys

    require("vulkan")
    spv = tmp_path / "scale_offset.spv"
    spv.write_bytes(scale_offset_spv)
    done = subprocess.run([sys.executable, "-c", CUT_MODULES, str(spv)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-2000:]}"
    prefixes, refused, dropped, refused_dropped = map(int, done.stdout.split())
    assert prefixes > 100 and refused == prefixes  # every one reached the validator and was refused
    assert refused_dropped > dropped // 2  # most instructions are needed; the rest (names, some decorations) not

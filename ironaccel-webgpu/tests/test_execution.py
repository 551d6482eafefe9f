"""The execution model on WebGPU beyond ExecutionConformance: what its API lacks says why, memory kinds it
has, WGSL overrides by @id, bad input a WebGPU recording could hit, and writes of any byte length (issue 41)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from ironaccel.compute.execution import ExternalFence, ExternalMemory
from ironaccel.errors import InvalidArgument, InvalidState, IronAccelError, Unsupported

KERNELS = Path(__file__).with_name("kernels")
SCALE_OFFSET = (KERNELS / "scale_offset.wgsl").read_text()
TYPED = (KERNELS / "typed_params.wgsl").read_text()

pytestmark = pytest.mark.backend("webgpu")

OVERRIDES_BY_ID = """
@id(7) override GAIN: f32;
override ON: bool = true;
override SHIFT: u32 = 0u;
@group(0) @binding(0) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&y) && ON) {
        y[id.x] = y[id.x] * GAIN + f32(SHIFT);
    }
}
"""


def test_what_webgpu_lacks_says_why(device) -> None:
    assert device.max_queues == 1 and "queues" not in device.features
    with pytest.raises(Unsupported, match="exactly one queue"):
        device.create_queue()
    with pytest.raises(Unsupported, match="no external memory"):
        device.alloc(16, exportable=True)
    with pytest.raises(Unsupported, match="no external memory"):
        device.import_memory(ExternalMemory(-1, 16), 4)
    with pytest.raises(Unsupported, match="emulated"):
        device.create_fence(exportable=True)
    with pytest.raises(Unsupported, match="no fences"):
        device.import_fence(ExternalFence(-1))
    with pytest.raises(Unsupported, match="mappable"):
        device.alloc(16, memory="host")
    with pytest.raises(InvalidState, match="download"):
        np.asarray(device.alloc(4))  # no zero-copy view of WebGPU memory: a typed error, never an object array


def test_upload_and_readback_memory_map_by_copy_and_copy_in_a_batch(device) -> None:
    n = 100
    data = np.arange(n, dtype=np.float32)
    up, down, mid = device.alloc(n, memory="upload"), device.alloc(n, memory="readback"), device.alloc(n)
    with up.map() as view:
        view[:] = data
    batch = device.batch()
    batch.copy(up, mid)
    batch.copy(mid, down)
    device.submit(batch).wait(timeout=60)
    with down.map(write=False) as view:
        np.testing.assert_array_equal(view, data)
    np.testing.assert_array_equal(device.download(up), data)  # both kinds also take download and write
    device.write(down, data[::-1].copy())
    np.testing.assert_array_equal(device.download(down), data[::-1])
    pipe = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
    for staging in (up, down):
        with pytest.raises(InvalidArgument, match="cannot bind"):
            device.dispatch(pipe, [staging, mid], 1, (1.0, 0.0, n))
    with pytest.raises(InvalidArgument, match="download"):
        device.alloc(4).map().__enter__()  # device memory is not host-visible


def test_a_copy_into_memory_webgpu_cannot_write_is_a_typed_error(device) -> None:
    up = device.alloc(16, memory="upload")  # MAP_WRITE | COPY_SRC: no copy may land in it
    x = device.upload(np.ones(16, np.float32))
    batch = device.batch()
    batch.copy(x, up)
    with pytest.raises(IronAccelError) as info:
        device.submit(batch).wait(timeout=60)
    assert "wgpu" in info.value.op
    np.testing.assert_array_equal(device.download(x), np.ones(16, np.float32))  # the device still works


def test_overrides_by_name_and_id_are_checked(device) -> None:
    interface = device.pipeline(OVERRIDES_BY_ID, buffers=1, constants={7: 2.0}).interface
    assert {c.name: c.id for c in interface.constants} == {"GAIN": 7, "ON": None, "SHIFT": None}
    y = device.upload(np.full(64, 3, np.float32))
    by_id = device.pipeline(OVERRIDES_BY_ID, buffers=1, constants={7: 2.0, "SHIFT": 1})
    by_name = device.pipeline(OVERRIDES_BY_ID, buffers=1, constants={"GAIN": 0.5, "ON": False})
    device.dispatch(by_id, [y], 1)
    np.testing.assert_array_equal(device.download(y), np.full(64, 7, np.float32))
    device.dispatch(by_name, [y], 1)  # ON false: untouched
    np.testing.assert_array_equal(device.download(y), np.full(64, 7, np.float32))
    for bad in ({"ON": 1}, {"SHIFT": -1}, {"SHIFT": 2**32}, {"SHIFT": 1.5}, {"GAIN": True}, {8: 1.0}):
        with pytest.raises(InvalidArgument) as info:
            device.pipeline(OVERRIDES_BY_ID, buffers=1, constants={7: 1.0, **bad})
        assert info.value.op == "pipeline"
    with pytest.raises(IronAccelError):  # GAIN has no default: wgpu refuses, typed
        device.pipeline(OVERRIDES_BY_ID, buffers=1)


def test_batch_of_typed_params_rebinds_by_name_and_groups(device) -> None:
    pipe = device.pipeline(TYPED, buffers=2)
    n = 256
    data = np.arange(n, dtype=np.float32)
    x, y = device.upload(data), device.alloc(n)
    out = np.zeros(n, np.float32)
    batch = device.batch()
    run = batch.dispatch(pipe, [x, y], 1, {"a": 1.0, "pair": (0.0, 0.0), "n": n, "k": 0})
    batch.dispatch(pipe, [y, x], n // 64, {"a": 2.0, "pair": (1.0, 0.5), "n": n, "k": 2})  # x = 2y
    batch.read(x, out)
    device.submit(batch).wait(timeout=60)
    expected = np.concatenate([data[:64], np.zeros(n - 64, np.float32)]) * 2  # one group of 64 ran first
    np.testing.assert_array_equal(out, expected)
    device.write(x, data)
    run.update(groups=n // 64, params={"a": 3.0, "pair": (0.0, 0.0), "n": n, "k": 0})
    device.submit(batch).wait(timeout=60)
    np.testing.assert_array_equal(out, data * 6)
    with pytest.raises(InvalidArgument, match="params"):
        run.update(params={"a": 1.0, "pair": (0.0, 0.0), "n": n, "nope": 0})
    device.write(x, data)
    device.submit(batch).wait(timeout=60)  # the refused update left the batch as it was
    np.testing.assert_array_equal(out, data * 6)


@pytest.mark.parametrize("kind", ["device", "upload", "readback"])
def test_writes_of_any_byte_length_land(device, kind) -> None:
    """Issue 41 said a write whose size is not a multiple of 4 did nothing: every length lands, and the bytes
    after it are kept (WebGPU copies whole words; the last word is merged)."""
    size = 16
    for length in range(1, size + 1):
        buf = device.alloc(size, "uint8", memory=kind)
        device.write(buf, np.full(size, 0xEE, np.uint8))
        data = np.arange(1, length + 1, dtype=np.uint8)
        device.write(buf, data)
        got = device.download(buf)
        np.testing.assert_array_equal(got[:length], data, err_msg=f"{length} bytes")
        np.testing.assert_array_equal(got[length:], np.full(size - length, 0xEE, np.uint8), err_msg=f"{length}")
        buf.close()
    odd = device.alloc(3, "int16", memory=kind)  # 6 bytes: one whole word and half of one
    device.write(odd, np.array([-1, 2, -3], np.int16))
    np.testing.assert_array_equal(device.download(odd), [-1, 2, -3])
    assert device.upload(np.array([7, 8, 9], np.uint8)).size == 3
    np.testing.assert_array_equal(device.download(device.upload(np.array([7, 8, 9], np.uint8))), [7, 8, 9])


def test_timestamps_are_nanoseconds_within_the_wall_clock(device) -> None:
    """Resolved timestamps are ticks; times the queue's period they are ns, so a batch's device time lies within
    the host's wall time around its submit and wait (a wrong unit is off by orders of magnitude)."""
    if "timestamps" not in device.features:
        with pytest.raises(Unsupported, match="timestamp-query"):
            device.batch(timestamps=True)
        return
    n = 1 << 18
    pipe = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
    x, y = device.upload(np.ones(n, np.float32)), device.alloc(n)
    batch = device.batch(timestamps=True)
    for _ in range(4):
        batch.dispatch(pipe, [x, y], n // 64, (2.0, 1.0, n))
    device.submit(batch).wait(timeout=60)  # first run: compiles and warms up
    start = time.perf_counter_ns()
    timings = device.submit(batch).timings(timeout=60)
    wall = time.perf_counter_ns() - start
    assert 0 < timings.total_ns <= wall, (timings.total_ns, wall)
    assert all(ns > 0 for ns in timings.commands_ns)


def test_batches_and_refused_submits_leak_no_wgpu_objects(device) -> None:
    """Recordings (uniform, staging, read-back buffers, query sets, bind groups) are freed with their batch, and a
    submit wgpu refuses leaves nothing behind: wgpu-py's own count of live objects comes back."""
    import gc

    import wgpu

    pipe = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
    n = 256
    x, y, up = device.upload(np.ones(n, np.float32)), device.alloc(n), device.alloc(n, memory="upload")
    out = np.zeros(n, np.float32)

    def cycle() -> None:
        timed = "timestamps" in device.features
        batch = device.batch(timestamps=timed)
        batch.write(x, np.ones(n, np.float32))
        batch.fill(y, np.float32(2))
        batch.dispatch(pipe, [x, y], n // 64, {"a": 2.0, "b": 1.0, "n": n})
        batch.read(y, out)
        device.submit(batch).wait(timeout=60)
        bad = device.batch()
        bad.copy(x, up)  # refused by wgpu at submit
        with pytest.raises(IronAccelError):
            device.submit(bad)
        bad.close()
        batch.close()

    def live() -> dict[str, int]:
        gc.collect()
        counts = wgpu.diagnostics.object_counts.get_dict()
        return {kind: counts[kind]["count"] for kind in (
            "Buffer", "BindGroup", "QuerySet", "CommandEncoder", "CommandBuffer", "ComputePassEncoder")}

    cycle()
    before = live()
    assert before["Buffer"] >= 3  # x, y, up and the device's own: the count sees ironaccel's objects
    for _ in range(5):
        cycle()
    assert live() == before
    np.testing.assert_array_equal(out, np.full(n, 3, np.float32))

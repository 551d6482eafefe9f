"""Further queues of the compute family: the limit, the refusal, and work on two queues ordered by fences.

A device offers `open(queues=)` queues of its compute family (default: `state.DEFAULT_QUEUES`, or fewer where
the family has fewer); lavapipe has one, so CI checks the refusal there, and the multi-queue path on a
device that offers three queues over lavapipe's one (`state.SHARED_QUEUES`: the extra queues share its
VkQueue).  On a GPU (the H200: NVIDIA has 8 or 16 in its compute families)
`test_two_queues_ordered_by_a_fence` runs on separate hardware queues.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ironaccel.errors import ClosedError, InvalidArgument, InvalidState, Unsupported
from ironaccel.testing.execution import ExecutionConformance
from ironaccel.testing.pytest_plugin import require
from ironaccel_vulkan import Backend, state

F32 = np.float32
N = 1 << 14


def _open(shared: int, monkeypatch: pytest.MonkeyPatch, validation: bool = False, queues: int | None = None,
          **kwargs: Any) -> Any:
    require("vulkan")
    monkeypatch.setattr(state, "SHARED_QUEUES", shared)
    backend = Backend(validation=validation)
    if validation and not backend.probe().available:
        pytest.skip(backend.probe().reason)
    return backend.open(0, queues=queues, **kwargs)


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The device as it is: its family's own queues."""
    dev = _open(0, monkeypatch)
    yield dev
    dev.close()


@pytest.fixture(params=["plain", "validated", "staged"])
def multi(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A device with at least three queues: the hardware's where it has them, else sharing its one VkQueue; with
    the validation layer on in the second run (a test fails on any validation error, see conftest), with
    device-local buffers and staged copies (a discrete GPU's default) in the third."""
    staged = {"memory": "staged", "staging_chunk_bytes": 1 << 16} if request.param == "staged" else {}
    dev = _open(3, monkeypatch, request.param == "validated", **staged)
    yield dev
    dev.close()


@pytest.fixture
def so(multi: Any, scale_offset_spv: bytes) -> Any:
    return multi.pipeline(scale_offset_spv, buffers=2, params=3)


def params(a: float, b: float, n: int) -> tuple[Any, ...]:
    return (F32(a), F32(b), np.uint32(n))


def groups(n: int) -> int:
    return (n + 63) // 64


def test_queue_limit_is_the_compute_familys(device: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    family = device.info.compute_family()
    assert device.max_queues == min(family.count, state.DEFAULT_QUEUES)
    for bad in (0, family.count + 1, 1.5, True, "2"):
        with pytest.raises(InvalidArgument) as bad_info:
            Backend(validation=False).open(0, queues=bad)
        assert "open" in str(bad_info.value) and "queues" in str(bad_info.value)
    validated = Backend(validation=True)
    if validated.probe().available:  # the layer's default: one queue (see state.DeviceState)
        checked = validated.open(0)
        try:
            assert checked.max_queues == 1
            with pytest.raises(Unsupported) as why:
                checked.create_queue()
            assert family.count == 1 or "validation" in str(why.value)
        finally:
            checked.close()
    alone = _open(0, monkeypatch, queues=1)  # one queue, whatever the family has
    try:
        assert alone.max_queues == 1 and "queues" not in alone.features
        with pytest.raises(Unsupported):
            alone.create_queue()
    finally:
        alone.close()
    if family.count >= 2:
        assert "queues" in device.features
        every = _open(0, monkeypatch, queues=family.count)
        try:
            assert every.max_queues == family.count
            made = [every.create_queue() for _ in range(family.count - 1)]
            assert len({q._vq.queue for q in made} | {every._state.queue}) == family.count
            for queue in made:
                queue.close()
        finally:
            every.close()
        return
    assert "queues" not in device.features
    with pytest.raises(Unsupported) as info:
        device.create_queue()
    message = str(info.value)
    assert "create_queue" in message and "1 queue" in message and f"family {family.index}" in message
    x = device.upload(np.ones(4, F32))  # usable afterwards
    np.testing.assert_array_equal(device.download(x), np.ones(4, F32))


@pytest.mark.backend("vulkan")
def test_two_queues_ordered_by_a_fence(multi: Any, so: Any) -> None:
    """On the GPU: two hardware queues of the compute family; the second waits on the first's fence."""
    hardware = multi._state.queue_count >= 2
    data = np.random.default_rng(5).standard_normal(N).astype(F32)
    x, y, z = multi.upload(data), multi.alloc(N, "float32"), multi.alloc(N, "float32")
    first, second = multi.create_queue(), multi.create_queue()
    assert {first.index, second.index}.isdisjoint({0}) and first.index != second.index
    if hardware:  # distinct VkQueues of the family
        vk = {multi._state.queue, first._vq.queue, second._vq.queue}
        assert len(vk) == 3
    fence = multi.create_fence()
    for round_ in range(1, 4):  # y = 3x + r on the first queue, then z = 2y on the second, after the fence
        first.dispatch(so, [x, y], groups(N), params(3.0, round_, N))
        first.signal(fence, round_)
        second.wait(fence, round_)
        sub = second.dispatch(so, [y, z], groups(N), params(2.0, 0.0, N))
        assert sub.queue is second
        sub.wait(timeout=60)
        np.testing.assert_allclose(multi.download(z), (F32(3) * data + F32(round_)) * 2, rtol=1e-5,
                                   atol=1e-5)  # a fused multiply-add moves values near zero by ~1e-7
    assert fence.value == 3
    # A batch recorded once, submitted on either queue; the default queue waits for the second queue's signal.
    out = np.zeros(N, F32)
    batch = multi.batch(timestamps="timestamps" in multi.features)
    run = batch.dispatch(so, [x, y], groups(N), params(1.0, 1.0, N))
    batch.read(y, out)
    for queue, value in ((first, 4), (second, 5), (multi.queue, 6)):
        queue.submit(batch, signal=[(fence, value)]).wait(timeout=60)
        np.testing.assert_allclose(out, data + 1, rtol=1e-6)
    run.update(params=params(-1.0, 0.0, N))
    sub = second.submit(batch, wait=[(fence, 6)], signal=[(fence, 7)])
    if batch.timestamps:
        assert len(sub.timings(timeout=60).spans) == 2
    sub.wait(timeout=60)
    np.testing.assert_allclose(out, -data, rtol=1e-6)
    multi.queue.wait(fence, 7)
    multi.dispatch(so, [y, z], groups(N), params(1.0, 0.5, N))
    np.testing.assert_allclose(multi.download(z), -data + F32(0.5), rtol=1e-6)
    batch.close()
    first.close()
    second.close()
    assert fence.value == 7


def test_queues_are_handed_out_and_given_back(multi: Any, so: Any) -> None:
    limit = multi.max_queues
    assert limit >= 3 and "queues" in multi.features
    made = [multi.create_queue() for _ in range(limit - 1)]
    assert len({q.index for q in made}) == limit - 1
    with pytest.raises(InvalidState) as info:
        multi.create_queue()
    assert "create_queue" in str(info.value)
    made[0].close()
    again = multi.create_queue()  # the closed queue's place
    x, y = multi.upload(np.ones(64, F32)), multi.alloc(64, "float32")
    again.dispatch(so, [x, y], 1, params(2.0, 0.0, 64)).wait(timeout=60)
    np.testing.assert_array_equal(multi.download(y), np.full(64, 2, F32))
    with pytest.raises(ClosedError):
        made[0].dispatch(so, [x, y], 1, params(2.0, 0.0, 64))
    for queue in made[1:] + [again]:
        queue.close()
    assert not multi._state.queues and len(multi._state.idle_queues) == limit - 1


def test_objects_used_on_another_queue_outlive_their_close(multi: Any, so: Any) -> None:
    """A buffer and a batch closed while another queue still runs them are freed only after it."""
    other = multi.create_queue()
    live = len(multi._state.allocations)
    x, y = multi.upload(np.ones(N, F32)), multi.alloc(N, "float32")
    batch = multi.batch()
    for _ in range(20):
        batch.dispatch(so, [x, y], groups(N), params(1.0, 1.0, N))
    sub = other.submit(batch)
    alloc = x.handle
    batch.close()
    x.close()
    assert alloc.buffer is not None or sub.done()  # not destroyed under the running submission
    sub.wait(timeout=60)
    other.synchronize()
    assert alloc.buffer is None  # freed once the other queue finished with it
    np.testing.assert_array_equal(multi.download(y), np.full(N, 2, F32))
    assert len(multi._state.allocations) == live + 1  # y alone
    other.close()


def test_work_on_another_queue_follows_the_default_queues_copies(monkeypatch: pytest.MonkeyPatch,
                                                                  scale_offset_spv: bytes) -> None:
    """upload and write are ordered on the default queue; a queue's dispatch or submit that uses their buffers
    starts after them, with no fence (a staged upload is a copy on the default queue)."""
    require("vulkan")
    monkeypatch.setattr(state, "SHARED_QUEUES", 2)
    dev = Backend(validation=False).open(0, memory="staged", staging_chunk_bytes=1 << 16)
    try:
        so = dev.pipeline(scale_offset_spv, buffers=2, params=3)
        other = dev.create_queue()
        data = np.arange(N, dtype=F32)
        x, y = dev.upload(data), dev.alloc(N, "float32")
        copied = x.handle.last_serial
        assert copied > 0  # staged: the upload was a copy on the default queue
        other.dispatch(so, [x, y], groups(N), params(2.0, 1.0, N)).wait(timeout=60)
        assert dev._state.timeline.completed >= copied
        np.testing.assert_array_equal(dev.download(y), data * 2 + 1)
        dev.write(x, data + 1)
        batch = dev.batch()
        batch.dispatch(so, [x, y], groups(N), params(1.0, 0.0, N))
        written = x.handle.last_serial
        other.submit(batch).wait(timeout=60)
        assert dev._state.timeline.completed >= written
        np.testing.assert_array_equal(dev.download(y), data + 1)
        batch.close()
        other.close()
    finally:
        dev.close()


def test_host_access_waits_for_another_queue(multi: Any, so: Any) -> None:
    other = multi.create_queue()
    data = np.arange(N, dtype=F32)
    x, y = multi.upload(data), multi.alloc(N, "float32")
    for _ in range(8):
        other.dispatch(so, [x, y], groups(N), params(2.0, 1.0, N))
    np.testing.assert_array_equal(multi.download(y), data * 2 + 1)  # no fence: the download waits for it
    other.close()


def test_device_closes_with_queues_open(multi: Any, so: Any) -> None:
    other = multi.create_queue()
    x, y = multi.upload(np.ones(N, F32)), multi.alloc(N, "float32")
    other.dispatch(so, [x, y], groups(N), params(2.0, 0.0, N))
    fence = multi.create_fence()
    other.signal(fence, 1)
    multi.close()
    with pytest.raises(ClosedError):
        other.dispatch(so, [x, y], 1, params(1.0, 0.0, 64))


def test_bad_queue_arguments(multi: Any, device: Any, so: Any) -> None:
    other = multi.create_queue()
    foreign = device.batch()
    x = device.upload(np.ones(64, F32))
    foreign.fill(x, F32(0))
    with pytest.raises(InvalidArgument) as info:
        other.submit(foreign)  # a batch of another device
    assert "submit" in str(info.value)
    mine = multi.batch()
    mine.fill(multi.alloc(64, "float32"), F32(0))
    with pytest.raises(InvalidArgument):
        device.queue.submit(mine)  # to another device's queue
    foreign_fence = device.create_fence()
    with pytest.raises(InvalidArgument) as info:
        other.signal(foreign_fence, 1)
    assert "signal" in str(info.value)
    with pytest.raises(InvalidArgument):
        other.submit(mine, wait=[(foreign_fence, 0)])
    other.submit(mine).wait(timeout=60)  # both usable afterwards
    device.queue.submit(foreign).wait(timeout=60)
    other.close()


class TestSharedQueuesExecution(ExecutionConformance):
    """The execution-model conformance tests on a device that offers three queues (over lavapipe's one)."""

    backend_name = "vulkan"
    entry = "main"

    @pytest.fixture
    def device(self, multi: Any) -> Any:
        return multi

    @pytest.fixture
    def pipeline(self, multi: Any, scale_offset_spv: bytes) -> Any:
        return multi.pipeline(scale_offset_spv, buffers=2, params=3, workgroup_size=(64, 1, 1))

    def open_device(self) -> Any:
        return Backend(validation=False).open(0)

    @pytest.fixture(autouse=True)
    def _code(self, scale_offset_spv: bytes) -> None:
        from pathlib import Path

        kernels = Path(__file__).resolve().parent / "kernels"
        type(self).scale_offset_code = scale_offset_spv
        type(self).typed_params_code = (kernels / "typed_params.spv").read_bytes()
        type(self).constants_code = (kernels / "constants.spv").read_bytes()

"""The cuda.core compat's device resources and green contexts on a device.

SM resource queries and splits run against the fake driver too (it has 132 SMs in
partitions of 8, like an H200); green contexts themselves need a real GPU.
"""

from __future__ import annotations

import pytest
from conftest import FAKE

import ironaccel_cuda as cu
from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import CUDAError, call

pytestmark = pytest.mark.backend("cuda")

SMID = r"""
extern "C" __global__ void record_smid(unsigned* out, long long spin) {
    if (threadIdx.x == 0) {
        unsigned id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        out[blockIdx.x] = id;
        long long start = clock64();
        while (clock64() - start < spin) { }
    }
}
"""


def test_device_sm_resource_is_the_whole_device(cc, device):
    assert device.resources is device.resources
    sm = device.resources.sm
    assert sm.sm_count == device.properties.multiprocessor_count
    assert sm.handle != 0
    assert sm.min_partition_size >= 2 and sm.coscheduled_alignment >= 2
    if device.compute_capability >= (9, 0):
        assert sm.min_partition_size % 2 == 0
    assert device.context.resources.sm.sm_count == sm.sm_count  # the primary context has every SM
    assert device.create_stream().resources.sm.sm_count == sm.sm_count


def test_split_gives_disjoint_groups_and_refuses_what_cannot_fit(cc, device):
    sm = device.resources.sm
    total = sm.sm_count
    (smallest,), rest = sm.split(cc.SMResourceOptions())
    assert smallest.sm_count >= sm.min_partition_size
    assert smallest.sm_count % sm.coscheduled_alignment == 0
    assert smallest.sm_count + rest.sm_count <= total
    groups, rest = sm.split(cc.SMResourceOptions(count=(20, 20)))
    assert len(groups) == 2 and all(g.sm_count >= 20 for g in groups)
    assert sum(g.sm_count for g in groups) + rest.sm_count <= total
    (one,), _ = sm.split({"count": sm.min_partition_size + 1})  # options as a dict; rounded up
    assert one.sm_count >= sm.min_partition_size + 1 and one.sm_count % sm.coscheduled_alignment == 0
    with pytest.raises(CUDAError, match="CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"):
        sm.split(cc.SMResourceOptions(count=(total // 2 + 1,) * 2))
    with pytest.raises(ValueError, match="count must be non-negative"):
        sm.split(cc.SMResourceOptions(count=-1))
    with pytest.raises(RuntimeError, match="13.1"):
        sm.split(cc.SMResourceOptions(count=16, coscheduled_sm_count=16))
    with pytest.raises(RuntimeError, match="same count"):
        sm.split(cc.SMResourceOptions(count=(16, 24)))
    dry, _ = sm.split(cc.SMResourceOptions(count=(20, 20)), dry_run=True)
    assert [g.sm_count for g in dry] == [g.sm_count for g in groups]
    with pytest.raises(ValueError, match="dry-run SMResource"):
        device.create_context(cc.ContextOptions(resources=[dry[0]]))


def test_backfill_allows_finer_groups(cc, device):
    sm = device.resources.sm
    half = sm.sm_count // 2
    if half % sm.coscheduled_alignment == 0:
        pytest.skip("half the device is already aligned")  # never on a 132-SM H200
    with pytest.raises(CUDAError, match="CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"):
        sm.split(cc.SMResourceOptions(count=(half, half)))
    groups, rest = sm.split(cc.SMResourceOptions(count=(half, half), backfill=True))
    assert len(groups) == 2 and all(g.sm_count >= half for g in groups)
    assert sum(g.sm_count for g in groups) + rest.sm_count <= sm.sm_count


def test_create_context_argument_errors(cc, device):
    with pytest.raises(ValueError, match="resources must be provided"):
        device.create_context()
    with pytest.raises(ValueError, match="resources must be provided"):
        device.create_context(cc.ContextOptions(resources=None))
    with pytest.raises(ValueError, match="must not be empty"):
        device.create_context(cc.ContextOptions(resources=[]))
    with pytest.raises(TypeError, match="Unsupported context resource type"):
        device.create_context(cc.ContextOptions(resources=[object()]))
    with pytest.raises(TypeError):
        device.create_context(object())
    with pytest.raises(RuntimeError, match="only supported on green contexts"):
        device.context.create_stream()


def test_workqueue_needs_a_cuda_13_1_driver(cc, device):
    version = int(call("cuDriverGetVersion"))
    if version < 13010:
        with pytest.raises(RuntimeError, match="13.1"):
            _ = device.resources.workqueue
        return
    wq = device.resources.workqueue
    assert wq.handle != 0 and wq.concurrency_limit >= 1 and wq.device.device_id == 0
    wq.configure(cc.WorkqueueResourceOptions(sharing_scope="green_ctx_balanced", concurrency_limit=2))
    assert wq.sharing_scope == "green_ctx_balanced" and wq.concurrency_limit == 2


@pytest.mark.skipif(FAKE, reason="the fake driver has one context per device: no green contexts")
def test_green_contexts_run_their_streams_on_their_own_sms(cc, device):
    ia = cu.Device(0)
    total = device.resources.sm.sm_count
    groups, _ = device.resources.sm.split(cc.SMResourceOptions(count=(32, 32)))
    a = device.create_context(cc.ContextOptions(resources=[groups[0]]))
    b = device.create_context(cc.ContextOptions(resources=[groups[1]]))
    assert a.is_green and b.is_green and a != b and a != device.context
    assert a.resources.sm.sm_count == groups[0].sm_count and b.resources.sm.sm_count == groups[1].sm_count
    lib = cu.Library(cu.Program(SMID).compile("cubin", arch=ia))
    fn = lib.function("record_smid", ia)
    blocks = 4 * total
    streams = {"a": a.create_stream(), "b": b.create_stream()}
    assert streams["a"].context is a and streams["a"].is_nonblocking
    assert streams["a"].resources.sm.sm_count == groups[0].sm_count
    with pytest.raises(ValueError, match="must be non-blocking"):
        a.create_stream(cc.StreamOptions(nonblocking=False))
    outs = {name: ia.alloc(blocks, "uint32") for name in streams}
    for out in outs.values():
        out.memset(0xFFFFFFFF)
    ia.default_stream.synchronize()
    for name, s in streams.items():
        fn.launch(blocks, 32, outs[name], 20_000, stream=s)
    events = {name: s.record() for name, s in streams.items()}
    for name, e in events.items():
        e.sync()
        assert e.context is (a if name == "a" else b)
    used = {name: set(out.copy_to_host().tolist()) for name, out in outs.items()}
    assert 0xFFFFFFFF not in used["a"] | used["b"]
    assert used["a"].isdisjoint(used["b"]), used
    assert 1 < len(used["a"]) <= groups[0].sm_count and 1 < len(used["b"]) <= groups[1].sm_count

    plain = device.create_stream()
    primary = device.set_current(a)
    assert primary == cc.Context._from_ctx(ia._state.ctx, 0) and not primary.is_green
    try:
        assert device.context is a
        made_here = device.create_stream()
        assert made_here.context is a
        assert device.create_event().context is a
        with pytest.raises(RuntimeError, match="while it is current"):
            a.close()
        on_plain = plain.record()  # in the primary context, the plain stream's, leaving `a` current
        on_plain.sync()
        assert not on_plain.context.is_green and device.context is a
        assert cc.Context._from_ctx(call("cuCtxGetCurrent"), 0) is a
    finally:
        assert device.set_current(primary) is a
    for out in outs.values():
        out.close()
    a.close()
    a.close()  # idempotent
    assert a.is_closed and all(s.is_closed for s in (streams["a"], made_here))
    with pytest.raises(RuntimeError, match="closed context"):
        _ = a.resources
    with pytest.raises(RuntimeError, match="closed context"):
        a.create_stream()
    assert not streams["b"].is_closed
    b.close()
    assert streams["b"].is_closed and events["b"].is_closed
    lib.close()

"""Bad input to a device's calls gets a typed error naming the call.

Each case here once let something else out: a TypeError from hashing an unhashable choice ("unhashable type:
'list'") given to a device, a stream's capture, a graph, a pool or VMM access grant or copy attributes, and an
OverflowError from the binding for a green-context group count too wide for its C type.  Each now raises
InvalidArgument with the operation's name in `op` and in the message, before any driver call, and leaves
nothing behind (no node, stream or context push).
Every check runs before the driver is asked, so the cases hold on a real GPU as on the fake driver.
"""

from __future__ import annotations

import pytest
from helpers.expect import raises_exactly

import ironaccel_cuda as cu
from ironaccel import InvalidArgument

pytestmark = pytest.mark.backend("cuda")


# -- choices given as unhashable objects: once TypeError("unhashable type") -------------------------------


def test_unhashable_choices(dev):
    raises_exactly(InvalidArgument, "cuCtxSetCacheConfig", dev.set_cache_config, [])
    raises_exactly(InvalidArgument, "cuCtxCreate", dev.create_context, [])
    s = dev.create_stream()
    raises_exactly(InvalidArgument, "cuStreamBeginCapture", s.begin_capture, [])
    assert not s.is_capturing
    g = cu.Graph(dev)
    raises_exactly(InvalidArgument, "cuGraphAddNode", g.add_conditional, ["if"])
    assert g.node_count == 0
    pool = dev.create_driver_pool()
    raises_exactly(InvalidArgument, "cuMemPoolSetAccess", pool.grant_access, 0, [])
    vb = dev.reserve(1 << 21)
    raises_exactly(InvalidArgument, "cuMemSetAccess", vb.grant_access, 0, {})
    raises_exactly(InvalidArgument, "cuMemcpyBatchAsync", cu.CopyAttributes, src_access=[])
    vb.close()
    g.close()
    s.close()


# -- ints too wide for the driver's C type: once OverflowError from the binding -------------------------


def test_split_sms_too_many_groups(dev):
    total = dev.attributes.multiprocessor_count
    err = raises_exactly(InvalidArgument, "cuDevSmResourceSplitByCount", dev.split_sms, 1, 1 << 40)
    assert f"{total} SMs" in str(err)
    raises_exactly(InvalidArgument, "cuDevSmResourceSplitByCount", dev.split_sms, 1, total + 1)

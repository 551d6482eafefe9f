"""Bad input to graphs gets a typed error naming the call.

Each case here once let something else out: an OverflowError from the binding for a kernel node's grid or
block too wide for its C type, and a dangling graph handle reaching the driver (a conditional body or a
node of a graph already closed).  Each now raises InvalidArgument (or ClosedError) with the operation's
name in `op` and in the message, before any driver call, and leaves nothing behind (no node).
Every check runs before the driver is asked, so the cases hold on a real GPU as on the fake driver.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.expect import raises_exactly

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")


# -- ints too wide for the driver's C type: once OverflowError from the binding -------------------------


def test_graph_kernel_grid_int_checked(dev, fn):
    x, y = dev.alloc(16, "float32"), dev.alloc(16, "float32")
    args = (np.float32(1), x, y, np.uint32(16))
    g = cu.Graph(dev)
    for grid in (1 << 32, 1 << 40, 0, -1):
        err = raises_exactly(InvalidArgument, "cuGraphAddKernelNode", g.add_kernel, fn, grid, 32, *args)
        assert "below 2**32" in str(err)
    raises_exactly(InvalidArgument, "cuGraphAddKernelNode", g.add_kernel, fn, 1, 1 << 32, *args)
    assert g.node_count == 0
    k = g.add_kernel(fn, 1, 32, *args)
    exe = g.instantiate()
    raises_exactly(InvalidArgument, "cuGraphExecKernelNodeSetParams", exe.set_params, k, fn, 1 << 40, 32, *args)
    exe.close()
    g.close()
    x.close()
    y.close()


# -- graphs -----------------------------------------------------------------------------------------


def test_update_from_body_of_closed_graph(dev):
    """A conditional body's handle is destroyed with its parent graph: updating from it is ClosedError, not a
    dangling handle handed to cuGraphExecUpdate."""
    g = cu.Graph(dev)
    g.add_empty()
    exe = g.instantiate()
    parent = cu.Graph(dev)
    body = parent.add_conditional("if").body
    parent.close()
    raises_exactly(ClosedError, "cuGraphExecUpdate", exe.update, body)
    exe.launch()  # the executable is untouched
    dev.synchronize()
    exe.close()
    g.close()


def test_set_params_with_a_node_of_a_closed_graph(dev):
    """A node's handle dies with its graph: set_params on it is ClosedError, not a freed handle handed to
    cuGraphExecMemsetNodeSetParams; the executable keeps its old parameters."""
    buf = dev.alloc(64, "uint8")
    g = cu.Graph(dev)
    node = g.add_memset(buf, 7)
    exe = g.instantiate()
    g.close()
    raises_exactly(ClosedError, "GraphExec.set_params(memset)", exe.set_params, node, buf, 9)
    exe.launch()
    dev.synchronize()
    assert (buf.copy_to_host() == 7).all()
    exe.close()
    buf.close()

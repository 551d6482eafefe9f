"""Bad input to a kernel's occupancy queries gets a typed error naming the call.

Each case here once let something else out: an OverflowError from the binding for a block size too wide for
its C type, and a ZeroDivisionError for a zero cluster.  Each now raises InvalidArgument with the operation's
name in `op` and in the message, before any driver call.
Every check runs before the driver is asked, so the cases hold on a real GPU as on the fake driver.
"""

from __future__ import annotations

import pytest
from helpers.expect import raises_exactly

from ironaccel import InvalidArgument

pytestmark = pytest.mark.backend("cuda")


# -- ints too wide for the driver's C type: once OverflowError from the binding -------------------------


def test_occupancy_dims_checked(fn):
    # once an OverflowError from the binding, and a ZeroDivisionError for a zero cluster
    raises_exactly(InvalidArgument, "cuOccupancyMaxPotentialClusterSize", fn.max_potential_cluster_size, 1 << 40, 32)
    raises_exactly(InvalidArgument, "cuOccupancyMaxActiveClusters", fn.max_active_clusters, 4, 32, 0)
    raises_exactly(InvalidArgument, "cuOccupancyMaxActiveClusters", fn.max_active_clusters, 4, 32, -2)

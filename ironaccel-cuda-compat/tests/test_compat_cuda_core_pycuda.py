"""The cuda.core compat's device-resource and context options without a device: construction and validation.

The device-side checks (queries, splits, green contexts) are in tests/gpu/test_compat_cuda_core_green.py.
"""

from __future__ import annotations

import pytest


def test_resource_objects_come_only_from_queries(cc):
    for cls in (cc.DeviceResources, cc.SMResource, cc.WorkqueueResource, cc.Context):
        with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
            cls()


def test_workqueue_options_are_checked_when_made(cc):
    with pytest.raises(ValueError, match="'bogus' is not a valid WorkqueueSharingScopeType. Must be "):
        cc.WorkqueueResourceOptions(sharing_scope="bogus")
    for bad in (0, -3):
        with pytest.raises(ValueError, match="concurrency_limit must be >= 1"):
            cc.WorkqueueResourceOptions(concurrency_limit=bad)
    ok = cc.WorkqueueResourceOptions(sharing_scope="green_ctx_balanced", concurrency_limit=4)
    assert (ok.sharing_scope, ok.concurrency_limit) == ("green_ctx_balanced", 4)
    from ironaccel_cuda_compat.cuda_core.typing import WorkqueueSharingScopeType

    assert cc.WorkqueueResourceOptions(sharing_scope=WorkqueueSharingScopeType.DEVICE_CTX).sharing_scope == "device_ctx"


def test_split_options_are_checked_before_the_driver(cc):
    from ironaccel_cuda_compat.cuda_core._device_resources import _group_count

    assert _group_count(cc.SMResourceOptions()) == 1
    assert _group_count(cc.SMResourceOptions(count=(8, 8, 8), backfill=(True, True, True))) == 3
    with pytest.raises(ValueError, match="count is scalar"):
        _group_count(cc.SMResourceOptions(count=8, coscheduled_sm_count=(8, 8)))
    with pytest.raises(ValueError, match="expected 2"):
        _group_count(cc.SMResourceOptions(count=(8, 8), preferred_coscheduled_sm_count=(8, 8, 8)))
    with pytest.raises(ValueError, match="must not be empty"):
        _group_count(cc.SMResourceOptions(count=()))
    with pytest.raises(TypeError, match="count must be int, Sequence, or None"):
        _group_count(cc.SMResourceOptions(count=2.5))


def test_context_options_hold_the_resources(cc):
    assert cc.ContextOptions().resources is None
    assert cc.ContextOptions(resources=[1, 2]).resources == [1, 2]

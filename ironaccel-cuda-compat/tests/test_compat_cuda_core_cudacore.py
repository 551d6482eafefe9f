"""The cuda.core compat's memory options and location records without a GPU: validation as cuda.core does it.

The device-side checks are in tests/gpu/test_compat_memory_resources.py.
"""

from __future__ import annotations

import pytest


def test_managed_options_name_the_preferred_location(cc):
    from ironaccel_cuda_compat.cuda_core._memory._managed_memory_resource import _preferred

    opts = cc.ManagedMemoryResourceOptions
    assert _preferred(opts()) is None
    assert _preferred(opts(preferred_location=-1)) == ("host", None)
    assert _preferred(opts(preferred_location=3)) == ("device", 3)
    assert _preferred(opts(preferred_location=2, preferred_location_type=cc.typing.ManagedMemoryLocationType.DEVICE)
                      ) == ("device", 2)
    assert _preferred(opts(preferred_location_type="host")) == ("host", None)
    assert _preferred(opts(preferred_location=1, preferred_location_type="host_numa")) == ("host_numa", 1)
    for bad, match in ((opts(preferred_location=-2), "preferred_location must be"),
                       (opts(preferred_location=True), "preferred_location must be"),
                       (opts(preferred_location_type="invalid"), "is not a valid ManagedMemoryLocationType. Must be"),
                       (opts(preferred_location_type="device"), "must be a device ordinal"),
                       (opts(preferred_location=0, preferred_location_type="host"), "must be None"),
                       (opts(preferred_location=-1, preferred_location_type="host_numa"), "must be a NUMA node ID")):
        with pytest.raises(ValueError, match=match):
            _preferred(bad)


def test_locations_coerce_from_host_and_refuse_the_rest(cc):
    from ironaccel_cuda_compat.cuda_core._memory._managed_location import _coerce_location, _LocSpec

    assert _coerce_location(cc.Host()) == _LocSpec("host")
    assert _coerce_location(cc.Host(numa_id=2)) == _LocSpec("host_numa", 2)
    assert _coerce_location(cc.Host.numa_current()).kind == "host_numa_current"
    assert _coerce_location(None, allow_none=True) is None
    with pytest.raises(ValueError, match="location is required"):
        _coerce_location(None)
    for bad in (0, "device", 1.5):
        with pytest.raises(TypeError, match="Device, Host, or None"):
            _coerce_location(bad)


def test_virtual_memory_options_validate_each_spec(cc):
    opts = cc.VirtualMemoryResourceOptions
    assert opts._access_to_flags("rw") == 3 and opts._access_to_flags("r") == 1 and opts._access_to_flags(None) == 0
    assert opts._access_to_flags(cc.typing.VirtualMemoryAccessType.READ) == 1
    assert int(opts._handle_type_to_driver("posix_fd")) == 1 and int(opts._handle_type_to_driver(None)) == 0
    assert opts._granularity_to_driver("minimum").name == "CU_MEM_ALLOC_GRANULARITY_MINIMUM"
    assert opts._location_type_to_driver("host_numa").name == "CU_MEM_LOCATION_TYPE_HOST_NUMA"
    assert opts._allocation_type_to_driver("pinned").name == "CU_MEM_ALLOCATION_TYPE_PINNED"
    for method, what in (("_access_to_flags", "Unknown access spec"), ("_allocation_type_to_driver", "allocation_type"),
                         ("_location_type_to_driver", "location_type"), ("_handle_type_to_driver", "handle_type"),
                         ("_granularity_to_driver", "granularity")):
        with pytest.raises(ValueError, match=what):
            getattr(opts, method)("bogus")
    with pytest.raises(NotImplementedError, match="win32"):
        opts._handle_type_to_driver("win32")


def test_unsupported_virtual_memory_options_are_refused_after_validation(cc):
    from ironaccel_cuda_compat.cuda_core._memory._virtual_memory_resource import _check_supported

    opts = cc.VirtualMemoryResourceOptions
    _check_supported(opts())
    _check_supported(opts(handle_type=None, granularity="minimum", self_access="r"))
    for kwargs in ({"location_type": "host"}, {"allocation_type": "managed"}, {"handle_type": "fabric"},
                   {"addr_hint": 1 << 40}, {"addr_align": 1 << 21}):
        with pytest.raises(NotImplementedError, match="not supported"):
            _check_supported(opts(**kwargs))
    with pytest.raises(ValueError, match="Unknown access spec"):
        _check_supported(opts(peer_access="x"))


def test_pool_option_dataclasses_take_dicts(cc):
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import check_or_create_options

    o = check_or_create_options(cc.PinnedMemoryResourceOptions, {"max_size": 2048, "numa_id": 0}, "x")
    assert (o.ipc_enabled, o.max_size, o.numa_id) == (False, 2048, 0)
    d = check_or_create_options(cc.DeviceMemoryResourceOptions, {"ipc_enabled": True}, "x")
    assert d.ipc_enabled and d.max_size == 0
    with pytest.raises(TypeError):
        check_or_create_options(cc.DeviceMemoryResourceOptions, 5, "DeviceMemoryResource options")

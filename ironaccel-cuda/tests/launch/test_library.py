"""Library: what it gives other APIs -- its CUmodule in a device's context."""

from __future__ import annotations

import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")


def test_module_handle_is_the_librarys_module_in_the_devices_context(dev, kernel_code):
    from ironaccel_cuda._driver import call

    lib = cu.Library(kernel_code)
    module = lib.module_handle(dev)
    assert isinstance(module, int) and module != 0 and lib.module_handle(dev) == module  # one module per context
    assert cu.current_device_ordinal() == dev.ordinal  # the device's context is current now
    fn = call("cuModuleGetFunction", module, b"saxpy")  # what an API taking a CUmodule does with it
    assert int(fn) != 0
    with pytest.raises(InvalidArgument):
        lib.module_handle(0)  # a Device, not an ordinal
    lib.close()
    with pytest.raises(ClosedError):
        lib.module_handle(dev)

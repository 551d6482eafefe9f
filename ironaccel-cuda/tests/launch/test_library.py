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


def test_disowned_library_is_left_for_the_handles_holder_to_unload(dev, kernel_code):
    from ironaccel_cuda._driver import call, try_call

    lib = cu.Library(kernel_code)
    assert lib.owned
    handle = lib.disown()
    assert handle == int(lib._h) and not lib.owned and lib.disown() == handle  # idempotent
    fn = lib.function("saxpy", dev)  # still usable until the holder unloads it
    assert fn.handle
    lib.close()  # closes the Library and its Functions, leaves the CUlibrary loaded
    assert lib.closed
    err, _ = try_call("cuLibraryUnload", handle)  # the holder's unload is the only one
    assert not err
    with pytest.raises(ClosedError):
        lib.disown()

    lib = cu.Library(kernel_code)
    handle = lib.disown()
    del lib  # collection does not unload it either
    import gc

    gc.collect()
    call("cuLibraryUnload", handle)


def test_owned_library_is_unloaded_once_by_close(kernel_code):
    from ironaccel_cuda._driver import try_call

    lib = cu.Library(kernel_code)
    handle = int(lib._h)
    lib.close()
    err, _ = try_call("cuLibraryUnload", handle)
    assert err  # already unloaded by close()

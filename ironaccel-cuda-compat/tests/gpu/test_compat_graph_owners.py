"""What a cuda.core compat graph node uses lives as long as the driver can run the node.

The compat holds every node's attachments through the library's `_core.graph_attach` (CUDA user objects), and
a Buffer a node uses shares its allocation with the node, so `Buffer.close()` keeps the memory while a graph can
still touch it (cuda.core's semantics).  The library's own side is ironaccel-cuda's tests/graphs/test_graph_owners.py.
Results are read back from device memory.
"""

from __future__ import annotations

import ctypes
import gc
import struct
import threading
import weakref

import pytest
from conftest import _wait_until as wait_until
from helpers.kernels import SOURCE

pytestmark = pytest.mark.backend("cuda")

N = 64


class CallbackSentinel:
    """A weak-referenceable host function that records the thread that dropped it."""

    def __init__(self, dropped: list[int]):
        self.dropped = dropped

    def __call__(self) -> None:
        pass

    def __del__(self) -> None:
        self.dropped.append(threading.get_ident())


def drv(name: str, *args):
    from cuda.bindings import driver

    err, *out = getattr(driver, name)(*args)
    assert int(err) == 0, (name, err)
    return out[0] if len(out) == 1 else out


def read(ptr: int, nbytes: int) -> bytes:
    out = (ctypes.c_ubyte * nbytes)()
    drv("cuMemcpyDtoH", out, ptr, nbytes)
    return bytes(out)


@pytest.fixture
def mr(cc, device):
    return cc.DeviceMemoryResource(device)


@pytest.fixture
def kernel(cc, device):
    return cc.Program(SOURCE, "c++", cc.ProgramOptions(std="c++17")).compile("cubin").get_kernel("scale_offset")


def test_memset_node_keeps_the_memory_of_a_closed_buffer(cc, device, mr, stream):
    buf = mr.allocate(4, stream=device.default_stream)
    device.default_stream.sync()
    dptr = int(buf.handle)
    g = cc.graph.GraphDefinition()
    g.memset(buf, 0xAB, 4)
    buf.close()
    assert buf.is_closed
    g.instantiate().launch(stream)
    stream.sync()
    assert read(dptr, 4) == b"\xab" * 4


def test_memcpy_operands_are_freed_when_the_last_holder_goes(cc, device, mr, stream):
    from ironaccel_cuda_compat.cuda_core._utils._weak_handles import weak_handle

    src = mr.allocate(4, stream=device.default_stream)
    dst = mr.allocate(4, stream=device.default_stream)
    src.fill(0xCD, stream=device.default_stream)
    device.default_stream.sync()
    g = cc.graph.GraphDefinition()
    g.memcpy(dst, src, 4)
    src_weak, dst_weak = weak_handle(src), weak_handle(dst)
    exe = g.instantiate()
    src.close()
    dst.close()
    del g
    gc.collect()
    assert src_weak and dst_weak, "the executable graph still holds both"
    exe.launch(stream)
    stream.sync()
    exe.close()
    wait_until(lambda: not src_weak and not dst_weak)


def test_kernel_arguments_survive_a_raw_clone(cc, device, mr, stream, kernel):
    from cuda.bindings import driver

    from ironaccel_cuda_compat.cuda_core._utils._weak_handles import weak_handle

    x = mr.allocate(4 * N, stream=device.default_stream)
    y = mr.allocate(4 * N, stream=device.default_stream)
    drv("cuMemcpyHtoD", int(x.handle), struct.pack(f"{N}f", *range(N)), 4 * N)
    y_ptr = int(y.handle)
    g = cc.graph.GraphDefinition()
    g.launch(cc.LaunchConfig(grid=1, block=N), kernel, x, y, 2.0, 1.0, N)
    clone = drv("cuGraphClone", driver.CUgraph(int(g.handle)))
    x_weak = weak_handle(x)
    x.close()
    del x, y, g
    gc.collect()
    _ia_drain()
    assert x_weak, "the clone's user object holds the kernel's arguments"
    exe = drv("cuGraphInstantiate", clone, 0)
    drv("cuGraphLaunch", exe, driver.CUstream(int(stream.handle)))
    stream.sync()
    assert list(struct.unpack(f"{N}f", read(y_ptr, 4 * N))) == [2.0 * i + 1.0 for i in range(N)]
    drv("cuGraphExecDestroy", exe)
    drv("cuGraphDestroy", clone)
    wait_until(lambda: not x_weak)


def test_closing_a_running_graph_keeps_what_it_uses_until_it_is_done(cc, device, mr, stream, module_spin):
    """The executable graph is closed while a spinning kernel holds the stream; the copy after it still reads
    the closed Buffer's memory."""
    src = mr.allocate(4, stream=device.default_stream)
    dst = mr.allocate(4, stream=device.default_stream)
    src.fill(0x5A, stream=device.default_stream)
    dst.fill(0, stream=device.default_stream)
    device.default_stream.sync()
    dst_ptr = int(dst.handle)
    g = cc.graph.GraphDefinition()
    spin = g.launch(cc.LaunchConfig(grid=1, block=1), module_spin, 50_000_000)
    spin.memcpy(dst, src, 4)
    exe = g.instantiate()
    del g
    src.close()
    exe.launch(stream)
    exe.close()
    gc.collect()
    _ia_drain()
    stream.sync()
    assert read(dst_ptr, 4) == b"\x5a" * 4
    dst.close()


def test_a_destroyed_node_releases_its_attachments(cc, device):
    dropped: list[int] = []
    callback = CallbackSentinel(dropped)
    ref = weakref.ref(callback)
    g = cc.graph.GraphDefinition()
    node = g.callback(callback)
    del callback
    gc.collect()
    _ia_drain()
    assert ref() is not None
    node.destroy()
    wait_until(lambda: ref() is None)
    assert dropped == [threading.main_thread().ident]


def test_weak_handle_refuses_what_it_cannot_observe(cc, device, mr):
    from ironaccel_cuda_compat.cuda_core._utils._weak_handles import weak_handle

    buf = mr.allocate(8, stream=device.default_stream)
    handle = weak_handle(buf)
    assert handle and not handle.expired() and handle.use_count() >= 1
    buf.close()
    assert not handle and handle.expired() and handle.use_count() == 0
    with pytest.raises(ValueError, match="no active allocation"):
        weak_handle(buf)
    with pytest.raises(TypeError, match="supports? types: Buffer|does not support"):
        weak_handle(object())


@pytest.fixture
def module_spin(cc, device):
    return cc.Program(SOURCE, "c++", cc.ProgramOptions(std="c++17")).compile("cubin").get_kernel("spin")


def _ia_drain() -> None:
    from ironaccel_cuda import _core

    _core.drain_owners()

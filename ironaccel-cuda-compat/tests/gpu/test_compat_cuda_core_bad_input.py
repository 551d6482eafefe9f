"""The cuda.core compat on bad input: a typed error of the class cuda.core code catches, naming the call, and
nothing let go or leaked on the way.

Each test is one input that used to crash, leak a raw binding exception, or fail with an error that named
nothing: a closed stream handed to Buffer calls (a raw TypeError from cuda.bindings), Buffer.close on such a
stream (the buffer was let go anyway), DLPack of a closed buffer (a tensor over address 0 said to be host
memory), LaunchConfig fields of the wrong type (cuda.core types them), a cluster too large for the driver, graph
options that are not options (AttributeError, or an instantiated graph dropped), malformed array interfaces
(AttributeError / KeyError / IndexError), nvJitLink and NVVM failures (now also CUDAErrors), foreign handles
out of range (OverflowError with no call named).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.kernels import NAME_EXPRESSIONS, SOURCE

from ironaccel import ClosedError

pytestmark = pytest.mark.backend("cuda")


@pytest.fixture
def closed_stream(device):
    s = device.create_stream()
    s.close()
    return s


@pytest.fixture
def module(cc, device):
    return cc.Program(SOURCE, "c++", cc.ProgramOptions(std="c++17")).compile(
        "cubin", name_expressions=tuple(NAME_EXPRESSIONS))


def test_a_closed_stream_is_a_closed_error_naming_the_buffer_call(cc, device, stream, closed_stream):
    mr = device.memory_resource
    a, b = mr.allocate(64, stream=stream), mr.allocate(64, stream=stream)
    host = cc.LegacyPinnedMemoryResource().allocate(64)
    stream.sync()
    for call, op in ((lambda: a.fill(0, stream=closed_stream), "Buffer.fill"),
                     (lambda: a.copy_from(b, stream=closed_stream), "Buffer.copy_from"),
                     (lambda: a.copy_from(host, stream=closed_stream), "Buffer.copy_from"),
                     (lambda: a.copy_to(host, stream=closed_stream), "Buffer.copy_to"),
                     (lambda: a.copy_to(stream=closed_stream), "Buffer.copy_to"),
                     (lambda: a.set_deallocation_stream(closed_stream), "Buffer.set_deallocation_stream"),
                     (lambda: cc.utils.copy_batch(closed_stream, [b], [a]), "copy_batch")):
        with pytest.raises(ClosedError, match=f"{op}: stream is closed"):
            call()
    with pytest.raises(ClosedError, match=r"Stream\.__cuda_stream__"):
        closed_stream.__cuda_stream__()
    a.fill(7, stream=stream)  # the buffers are untouched and still work
    a.copy_to(host, stream=stream)
    stream.sync()
    assert bytes(np.from_dlpack(host)) == b"\x07" * 64
    for buf in (a, b, host):
        buf.close()


def test_close_on_a_closed_stream_keeps_the_buffer(cc, device, stream, closed_stream):
    import ironaccel_cuda as cu

    buf = device.memory_resource.allocate(1 << 20, stream=stream)
    host = cc.LegacyPinnedMemoryResource().allocate(64)
    stream.sync()
    ptr, used = int(buf.handle), cu.Device(0).pool_usage()[0]
    for b in (buf, host):
        with pytest.raises(ClosedError, match=r"Buffer\.close: stream is closed"):
            b.close(stream=closed_stream)
        assert not b.is_closed
    with pytest.raises(TypeError, match="stream must be a Stream"):
        buf.close(stream=3)
    assert int(buf.handle) == ptr and cu.Device(0).pool_usage()[0] == used  # nothing was let go
    buf.close(stream=stream)
    host.close()
    stream.sync()
    assert buf.is_closed and host.is_closed and cu.Device(0).pool_usage()[0] <= used - (1 << 20)


def test_dlpack_of_a_closed_buffer_is_a_buffer_error(cc, device, stream):
    buf = cc.LegacyPinnedMemoryResource().allocate(64)
    buf.close()
    with pytest.raises(BufferError, match=r"Buffer\.__dlpack__: the buffer is closed"):
        buf.__dlpack__()
    with pytest.raises(BufferError):
        np.from_dlpack(buf)
    empty = device.memory_resource.allocate(0, stream=stream)  # open, at address 0: still exports
    assert empty.__dlpack__() is not None
    empty.close()


def test_launch_config_fields_are_typed_as_in_cuda_core(cc, device):
    config = cc.LaunchConfig(grid=1, block=64, shmem_size=np.int64(16))
    assert config.shmem_size == 16 and type(config.shmem_size) is int
    with pytest.raises(TypeError, match=r"LaunchConfig\.grid must be a tuple, got int"):
        config.grid = 5
    with pytest.raises(TypeError, match=r"LaunchConfig\.block must be a tuple, got str"):
        config.block = "abc"
    with pytest.raises(TypeError, match=r"LaunchConfig\.cluster must be a tuple, got list"):
        config.cluster = [1]
    with pytest.raises(TypeError, match=r"LaunchConfig\.shmem_size must be an int, got str"):
        cc.LaunchConfig(grid=1, block=1, shmem_size="x")
    with pytest.raises(TypeError, match=r"LaunchConfig\.shmem_size must be an int, got float"):
        cc.LaunchConfig(grid=1, block=1, shmem_size=1.5)
    with pytest.raises(OverflowError, match=r"LaunchConfig\.shmem_size=1099511627776 does not fit a C int"):
        cc.LaunchConfig(grid=1, block=1, shmem_size=1 << 40)
    assert config.grid == (1, 1, 1) and config.block == (64, 1, 1) and config._fast == (1, 64, 16)


def test_a_cluster_too_large_names_the_launch(cc, device, stream, module):
    if tuple(device.compute_capability) < (9, 0):
        pytest.skip("thread block clusters need compute capability 9.0")
    kernel = module.get_kernel("saxpy")
    x = device.allocate(256, stream=stream)
    config = cc.LaunchConfig(grid=1, block=64, cluster=1 << 40)
    with pytest.raises(OverflowError, match=r"launch: LaunchConfig\.cluster=\(1099511627776, 1, 1\)"):
        cc.launch(stream, config, kernel, np.float32(2), x, x, np.uint32(64))
    x.close(stream=stream)
    stream.sync()


def test_graph_options_that_are_not_options_are_type_errors(cc, device, stream, tmp_path):
    gb = device.create_graph_builder().begin_building()
    buf = device.allocate(64, stream=stream)
    stream.sync()
    buf.fill(1, stream=gb)
    gb.end_building()
    with pytest.raises(TypeError, match="GraphCompleteOptions"):
        gb.complete(3)
    with pytest.raises(TypeError, match="stream must be a Stream"):  # checked before anything is instantiated
        gb.complete(cc.graph.GraphCompleteOptions(upload_stream=3))
    with pytest.raises(TypeError, match="GraphDebugPrintOptions"):
        gb.debug_dot_print(str(tmp_path / "g.dot"), 3)
    graph = gb.complete({"upload_stream": stream})  # a dict of the options, as check_or_create_options takes
    graph.launch(stream)
    stream.sync()
    graph.close()
    gb.close()
    buf.close()


def test_malformed_array_interfaces_are_type_errors(cc, device, stream):
    smv = cc.utils.StridedMemoryView
    with pytest.raises(TypeError, match=r"StridedMemoryView\.from_dlpack: int has no __dlpack__"):
        smv.from_dlpack(3, stream_ptr=-1)
    with pytest.raises(TypeError, match=r"from_cuda_array_interface: int has no __cuda_array_interface__"):
        smv.from_cuda_array_interface(3, stream_ptr=-1)
    with pytest.raises(TypeError, match=r"from_array_interface: int has no __array_interface__"):
        smv.from_array_interface(3)
    with pytest.raises(TypeError, match=r"StridedMemoryView\.from_buffer: buffer must be a Buffer, got int"):
        smv.from_buffer(3, (4,), dtype=np.float32)

    class Producer:
        def __init__(self, cai):
            self.__cuda_array_interface__ = cai

    buf = device.allocate(64, stream=stream)
    base = {"shape": (4,), "typestr": "<f4", "data": (int(buf.handle), False), "version": 3}
    with pytest.raises(TypeError, match="__cuda_array_interface__ lacks 'data'"):
        smv(Producer({"shape": (4,), "typestr": "<f4", "version": 3}), stream_ptr=-1)
    with pytest.raises(TypeError, match="__cuda_array_interface__ must be a dict, got int"):
        smv(Producer(3), stream_ptr=-1)
    view = smv(Producer(dict(base, strides=(4, 8, 12))), stream_ptr=-1)
    with pytest.raises(BufferError, match="3 strides for 1 dimensions"):
        view.__dlpack__()
    view = smv.from_buffer(buf, (-4,), dtype=np.float32)
    with pytest.raises(BufferError, match="negative shape"):
        view.__dlpack__()
    good = smv(Producer(dict(base, strides=(4,))), stream_ptr=-1)
    assert good.shape == (4,) and good.strides == (1,) and good.__dlpack__() is not None
    buf.close(stream=stream)
    stream.sync()


def test_handles_out_of_range_name_the_call(cc, device):
    for bad in (-1, 1 << 64):
        with pytest.raises(OverflowError, match=r"Stream\.from_handle"):
            cc.Stream.from_handle(bad)
        with pytest.raises(OverflowError, match=r"Kernel\.from_handle"):
            cc.Kernel.from_handle(bad)
    with pytest.raises(TypeError, match=r"Event\.from_ipc_descriptor: .*IPCEventDescriptor, got int"):
        cc.Event.from_ipc_descriptor(3)


def test_link_and_nvvm_failures_are_the_binding_errors_and_cuda_errors(cc, device):
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import CUDAError

    nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")
    try:
        nvjitlink.version()
    except Exception:  # pragma: no cover - the library is missing
        pytest.skip("libnvJitLink is not loadable")
    with pytest.raises(nvjitlink.nvJitLinkError) as info:
        cc.Program("not ptx", "ptx", cc.ProgramOptions(arch=f"sm_{device.arch}")).compile("cubin")
    exc = info.value
    assert isinstance(exc, CUDAError) and isinstance(exc, RuntimeError)
    assert str(exc).startswith("nvJitLink") and exc.status == exc.code and exc.status > 0
    assert exc.args == (str(nvjitlink.nvJitLinkError(exc.status)),)  # the binding's own args

    from ironaccel_cuda_compat.cuda_core._program import _get_nvvm_module

    try:
        nvvm = _get_nvvm_module()
    except RuntimeError:
        pytest.skip("libNVVM is not loadable here")
    with pytest.raises(nvvm.nvvmError) as info:
        cc.Program("not IR", "nvvm", cc.ProgramOptions(arch=f"sm_{device.arch}")).compile("ptx")
    exc = info.value
    assert isinstance(exc, CUDAError) and str(exc).startswith("nvvm") and exc.status > 0
    assert exc.args[0].startswith(str(nvvm.nvvmError(exc.status)))  # the binding's message, then the program log


def test_a_closed_buffer_is_not_launched_as_address_0(cc, device, stream, module):
    # Its address 0 would fault the kernel, and a fault ends the context for the rest of the process.
    kernel = module.get_kernel("saxpy")
    x, y = device.allocate(256, stream=stream), device.allocate(256, stream=stream)
    y.close(stream=stream)
    for config in (cc.LaunchConfig(grid=1, block=64),  # the compiled launch
                   cc.LaunchConfig(grid=1, block=64, cluster=1) if tuple(device.compute_capability) >= (9, 0)
                   else cc.LaunchConfig(grid=1, block=64, cooperative=True)):  # the converting one
        with pytest.raises(ClosedError, match="cuLaunchKernel"):
            cc.launch(stream, config, kernel, np.float32(2), x, y, np.uint32(64))
    cc.launch(stream, cc.LaunchConfig(grid=1, block=64), kernel, np.float32(2), x, x, np.uint32(64))
    stream.sync()  # the context still works
    x.close(stream=stream)

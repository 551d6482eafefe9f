"""Kernel argument packing, without a GPU: layouts, every scalar type, pointers, errors."""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

from ironaccel import ClosedError, DType, InvalidArgument
from ironaccel_cuda.launch import build_packer, pack_error, param_layout_fallback
from ironaccel_cuda.memory import DeviceBuf

DEVICE0 = SimpleNamespace(ordinal=0)
DEVICE1 = SimpleNamespace(ordinal=1)


def fake_buf(ptr: int, device=DEVICE0, size: int = 4) -> DeviceBuf:
    """A DeviceBuf over a made-up address (never dereferenced here)."""
    return DeviceBuf._wrap(ptr, size, DType.FLOAT32, np.dtype(np.float32), device, None, None)


def block_bytes(packer) -> bytes:
    return ctypes.string_at(ctypes.addressof(packer._block), packer.size)


def pointers(packer, n):
    return list((ctypes.c_void_p * n).from_address(packer.params))


SAXPY_LAYOUT = ((0, 4), (8, 8), (16, 8), (24, 4))  # float a, float* x, float* y, unsigned n


def test_saxpy_layout():
    x, y = fake_buf(0x7000_0000_1000), fake_buf(0x7000_0000_2000)
    args = (2.5, x, y, 1000)
    packer = build_packer(SAXPY_LAYOUT, args, ordinal=0, reachable={0}, name="saxpy")
    packer.pack(args)
    expected = struct.pack("<f4xQQi4x", 2.5, x.ptr, y.ptr, 1000)
    assert block_bytes(packer) == expected
    base = ctypes.addressof(packer._block)
    assert pointers(packer, 4) == [base + off for off, _ in SAXPY_LAYOUT]
    numpy_args = (np.float32(-1), y, x, np.uint32(7))
    other = build_packer(SAXPY_LAYOUT, numpy_args, ordinal=0, reachable={0}, name="saxpy")
    other.pack(numpy_args)
    assert block_bytes(other) == struct.pack("<f4xQQI4x", -1, y.ptr, x.ptr, 7)


def test_repacking_overwrites_only_values():
    x = fake_buf(0x1000)
    packer = build_packer(SAXPY_LAYOUT, (1.0, x, x, 1), ordinal=0, reachable={0}, name="k")
    params = packer.params
    for i in range(5):
        packer.pack((float(i), x, x, i))
        assert struct.unpack_from("<f", block_bytes(packer), 0)[0] == i
        assert struct.unpack_from("<i", block_bytes(packer), 24)[0] == i
    assert packer.params == params  # prepared once, reused


ECHO_LAYOUT = ((0, 8), (8, 1), (10, 2), (12, 4), (16, 8), (24, 4), (32, 8), (40, 1), (42, 2), (44, 4), (48, 8),
               (56, 4), (64, 8), (72, 4), (76, 4), (80, 8))


def test_every_scalar_type():
    out = fake_buf(0xABC000)
    values = [np.int8(-5), np.int16(-300), -70000, np.int64(-(2**40)), 1.25, np.float64(2.5), np.uint8(200),
              np.uint16(60000), np.uint32(4_000_000_000), np.uint64(2**63 + 5), np.float32(-0.5), -1e300,
              np.int32(123), 3.5, 2**40]
    args = (out, *values)
    packer = build_packer(ECHO_LAYOUT, args, ordinal=0, reachable={0}, name="echo16")
    packer.pack(args)
    raw = block_bytes(packer)
    codes = ["Q", "b", "h", "i", "q", "f", "d", "B", "H", "I", "Q", "f", "d", "i", "f", "q"]
    for (offset, size), code, value in zip(ECHO_LAYOUT, codes, (out.ptr, *values)):
        assert raw[offset:offset + size] == struct.pack("<" + code, value), (offset, code)


def test_half_bool_and_complex():
    layout = ((0, 2), (2, 1), (8, 8), (16, 16))
    args = (np.float16(1.5), np.bool_(True), np.complex64(1 + 2j), np.complex128(3 - 4j))
    packer = build_packer(layout, args, ordinal=0, reachable={0}, name="k")
    packer.pack(args)
    raw = block_bytes(packer)
    assert raw[0:2] == np.float16(1.5).tobytes() and raw[2] == 1
    assert raw[8:16] == np.complex64(1 + 2j).tobytes() and raw[16:32] == np.complex128(3 - 4j).tobytes()
    py = build_packer(((0, 2), (4, 4)), (0.5, True), ordinal=0, reachable={0}, name="k")
    py.pack((0.5, True))
    assert block_bytes(py)[:2] == np.float16(0.5).tobytes()
    assert struct.unpack_from("<i", block_bytes(py), 4)[0] == 1


def test_no_arguments():
    packer = build_packer((), (), ordinal=0, reachable={0}, name="k")
    packer.pack(())
    assert packer.params == 0


BUF = "<buf>"


@pytest.mark.parametrize("args,needle", [
    ((1.0, 2), "takes 4 argument"),
    (("1.0", BUF, BUF, 3), "unsupported type str"),
    ((1.0, None, BUF, 1), "unsupported type NoneType"),
    ((np.float64(1), BUF, BUF, 1), "float64 (8 bytes)"),
    ((BUF, BUF, BUF, 1), "DeviceBuf (8-byte pointer)"),
    (([1], BUF, BUF, 1), "unsupported type list"),
    ((1.0, BUF, BUF, np.float16(1)), "float16 (2 bytes)"),
])
def test_signature_errors(args, needle):
    x = fake_buf(0x1000)
    args = tuple(x if a is BUF else a for a in args)
    with pytest.raises(InvalidArgument) as info:
        build_packer(SAXPY_LAYOUT, args, ordinal=0, reachable={0}, name="saxpy")
    assert info.value.op == "cuLaunchKernel" and needle in str(info.value)


def test_buffer_for_a_small_parameter():
    x = fake_buf(0x1000)
    with pytest.raises(InvalidArgument) as info:
        build_packer(SAXPY_LAYOUT, (x, x, x, 1), ordinal=0, reachable={0}, name="saxpy")
    assert "DeviceBuf" in str(info.value)


def test_value_errors_at_pack_time():
    x = fake_buf(0x1000)
    packer = build_packer(SAXPY_LAYOUT, (1.0, x, x, 1), ordinal=0, reachable={0}, name="saxpy")
    with pytest.raises(struct.error) as info:
        packer.pack((1.0, x, x, 2**40))
    err = pack_error((1.0, x, x, 2**40), info.value, "saxpy")
    assert isinstance(err, InvalidArgument) and "np.uint32" in str(err)
    closed = fake_buf(0x2000)
    closed.close()  # a view-like buffer (nothing to free): ptr becomes None
    with pytest.raises(struct.error) as info:
        packer.pack((1.0, closed, x, 1))
    err = pack_error((1.0, closed, x, 1), info.value, "saxpy")
    assert isinstance(err, ClosedError) and err.op == "cuLaunchKernel"


def test_buffers_of_another_device():
    mine, theirs = fake_buf(0x1000), fake_buf(0x2000, DEVICE1)
    reachable = {0}
    packer = build_packer(SAXPY_LAYOUT, (1.0, mine, theirs, 1), ordinal=0, reachable=reachable, name="saxpy")
    with pytest.raises(InvalidArgument) as info:
        packer.pack((1.0, mine, theirs, 1))
    assert "cuda:1" in str(info.value) and "enable_peer_access" in str(info.value)
    reachable.add(1)  # what Device.enable_peer_access does
    packer.pack((1.0, mine, theirs, 1))


def test_fallback_layout():
    x = fake_buf(0x1000)
    assert param_layout_fallback((x, 1, 2.0, np.int32(3), np.int8(1), np.float64(1))) == (
        (0, 8), (8, 8), (16, 8), (24, 4), (28, 1), (32, 8))


def test_single_argument_and_views():
    x = fake_buf(0x1000, size=64)
    packer = build_packer(((0, 8),), (x,), ordinal=0, reachable={0}, name="k")
    packer.pack((x,))
    assert struct.unpack("<Q", block_bytes(packer))[0] == 0x1000


PTX = """
.visible .entry fill(
	.param .u64 fill_param_0,
	.param .u32 fill_param_1,
	.param .f32 fill_param_2,
	.param .align 8 .b8 fill_param_3[16]
)
{ ret; }
.visible .entry _Z4zeroPf(.param .u64 _Z4zeroPf_param_0) { ret; }
"""


def test_ptx_parameter_types():
    from ironaccel_cuda.launch import ptx_param_types

    assert ptx_param_types(PTX) == {"fill": ("u64", "u32", "f32", "b8"), "_Z4zeroPf": ("u64",)}
    assert ptx_param_types(PTX.encode()) == ptx_param_types(PTX)
    assert ptx_param_types("no entries here") == {}


def test_known_parameter_types_catch_a_float_for_an_integer():
    layout, types = [(0, 8), (8, 4), (12, 4)], ("u64", "u32", "f32")
    buf = fake_buf(0x1000)
    with pytest.raises(InvalidArgument, match="argument 1 is a float but the kernel parameter is .u32"):
        build_packer(layout, (buf, 8.0, 1.0), ordinal=0, reachable={0}, name="fill", types=types)
    packer = build_packer(layout, (buf, 8, 3), ordinal=0, reachable={0}, name="fill", types=types)
    packer.pack((buf, 8, 3))  # the int 3 meets a float parameter: converted, not its bits
    assert struct.unpack("<QIf", block_bytes(packer)[:16]) == (0x1000, 8, 3.0)
    # a numpy scalar is its own bytes, whatever the type: it says what it means
    bits = build_packer(layout, (buf, np.float32(1.5), np.uint32(7)), ordinal=0, reachable={0}, name="fill",
                        types=types)
    bits.pack((buf, np.float32(1.5), np.uint32(7)))
    assert block_bytes(bits)[8:12] == np.float32(1.5).tobytes()
    # without types (CUBIN from elsewhere) the sizes are all there is: the old rule
    untyped = build_packer(layout, (buf, 8.0, 1.0), ordinal=0, reachable={0}, name="fill")
    untyped.pack((buf, 8.0, 1.0))


def test_graph_kernel_nodes_pack_as_launches_do(monkeypatch):
    """A kernel node's arguments meet the same PTX types as a launch's: no float for an integer, ints converted."""
    from cuda.bindings import driver as raw

    from ironaccel_cuda import graph
    from ironaccel_cuda.module import Function

    device = SimpleNamespace(ordinal=0, _state=SimpleNamespace(default_stream=None, reachable={0}))
    fn = Function._make(0x1234, SimpleNamespace(device=device), "fill", types=("u64", "u32", "f32"))
    fn._layout = ((0, 8), (8, 4), (12, 4))
    monkeypatch.setattr(graph, "driver", lambda: raw)  # the node's parameter struct, no driver call
    buf = fake_buf(0x1000)
    with pytest.raises(InvalidArgument, match="argument 1 is a float but the kernel parameter is .u32"):
        graph._kernel_params(device, fn, 1, 8, (buf, 8.0, 1.0), 0, "cuGraphAddKernelNode")
    params, (_, _, packer) = graph._kernel_params(device, fn, 1, 8, (buf, 8, 3), 0, "cuGraphAddKernelNode")
    assert struct.unpack("<QIf", block_bytes(packer)[:16]) == (0x1000, 8, 3.0)
    assert int(params.func) == 0x1234 and params.kernelParams == packer.params

"""Value types and the error hierarchy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ironaccel import (
    BackendSpec,
    CapabilityFlags,
    ClosedError,
    CompileError,
    ComputeTier,
    DeviceDescriptor,
    DeviceKind,
    Dim3,
    DriverError,
    DType,
    InvalidArgument,
    IronAccelError,
    LaunchDims,
    NotAvailable,
    OutOfMemory,
    ProbeResult,
    Unsupported,
    Vendor,
)


@pytest.mark.parametrize("value", ["float32", "FLOAT32", np.float32, np.dtype("float32"), DType.FLOAT32])
def test_dtype_of_accepts_every_spelling(value):
    assert DType.of(value) is DType.FLOAT32


def test_dtype_numpy_round_trip():
    for dt in DType:
        if dt is DType.BFLOAT16:
            continue
        assert DType.of(dt.numpy) is dt
        assert dt.numpy.itemsize == dt.itemsize
    with pytest.raises(TypeError):
        DType.of("float128")
    with pytest.raises(TypeError):
        DType.of(object)


def test_bfloat16_without_ml_dtypes_says_what_to_install():
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError, match="ml_dtypes"):
            _ = DType.BFLOAT16.numpy
    else:
        assert DType.BFLOAT16.numpy.itemsize == 2


def test_dim3_and_launch_dims():
    assert tuple(Dim3.of(5)) == (5, 1, 1)
    assert Dim3.of((2, 3)).total == 6
    assert LaunchDims.of((4, 2, 2), 128).block.x == 128
    for bad in (0, -1, (1, 2, 3, 4), (), 1.5, True, (2, 0)):
        with pytest.raises(ValueError):
            Dim3.of(bad)


def test_vendor_from_pci_id():
    assert Vendor.from_pci_id(0x10DE) is Vendor.NVIDIA
    assert Vendor.from_pci_id(0x10005) is Vendor.MESA
    assert Vendor.from_pci_id(0xDEAD) is Vendor.UNKNOWN


def test_descriptors_are_json_able():
    caps = CapabilityFlags.FP16 | CapabilityFlags.GRAPHS
    d = DeviceDescriptor("cuda", 0, "X", Vendor.NVIDIA, DeviceKind.GPU, 1 << 30, ComputeTier.DATACENTER, caps,
                         {"sm": (9, 0)})
    doc = json.loads(json.dumps(d.to_dict()))
    assert doc["capabilities"] == ["fp16", "graphs"] and doc["compute_tier"] == "datacenter"
    assert doc["extras"] == {"sm": [9, 0]}
    p = ProbeResult("cuda", False, reason="r", searched=("/a",))
    assert json.loads(json.dumps(p.to_dict()))["searched"] == ["/a"]


def test_backend_spec_validates():
    with pytest.raises(ValueError):
        BackendSpec("Bad Name", factory="a:b")
    with pytest.raises(ValueError):
        BackendSpec("ok", factory="no_colon")
    assert BackendSpec("ok", factory=lambda: None).name == "ok"


def test_errors_name_backend_op_and_code_and_subclass_builtins():
    err = DriverError("cuda", "cuMemAllocAsync", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory")
    assert str(err) == "cuda: cuMemAllocAsync: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"
    assert (err.backend, err.op, err.code, err.code_name) == ("cuda", "cuMemAllocAsync", 2, "CUDA_ERROR_OUT_OF_MEMORY")
    assert isinstance(OutOfMemory("cuda", "cuMemAlloc", 2), MemoryError)
    assert isinstance(InvalidArgument("cuda", "alloc", detail="size 0"), ValueError)
    assert "alloc: size 0" in str(InvalidArgument("cuda", "alloc", detail="size 0"))
    assert isinstance(ClosedError("cuda", "copy_to_host", "buffer"), ValueError)
    assert "buffer is closed" in str(ClosedError("cuda", "copy_to_host", "buffer"))
    compile_error = CompileError("cuda", "nvrtcCompileProgram", log="x.cu(1): error: oops\n", code=6)
    assert compile_error.log.startswith("x.cu(1)") and "oops" in str(compile_error)
    assert isinstance(Unsupported("pjrt", "PJRT_Foo", "API 0.81 lacks it"), NotImplementedError)
    for e in (err, compile_error, NotAvailable("x", "why")):
        assert isinstance(e, IronAccelError)


def test_not_available_carries_fix_library_and_env_var():
    e = NotAvailable("levelzero", "loader not found", fix="apt install libze1", library="libze_loader.so.1",
                     searched=["/usr/lib/libze_loader.so.1"])
    assert isinstance(e, RuntimeError)
    assert e.reason == "loader not found" and e.fix == "apt install libze1"
    assert e.searched == ("/usr/lib/libze_loader.so.1",)
    assert "IRONACCEL_DISABLE=levelzero" in str(e) and "apt install libze1" in str(e)


def test_dtype_of_refuses_non_native_byte_order_and_is_memoised():
    swapped = np.dtype("float32").newbyteorder("S")
    with pytest.raises(TypeError, match="native byte order"):
        DType.of(swapped)
    assert DType.of(np.dtype("int16")) is DType.INT16
    assert DType.of(np.dtype("int16")) is DType.INT16  # second lookup from the cache
    with pytest.raises(TypeError):
        DType.of([1, 2])  # unhashable and not a dtype


def test_compute_helpers_check_and_pack():
    import struct

    from ironaccel.compute import check_out, host_array, pack_params, workgroups

    assert workgroups("x", 5, (10, 10, 10)) == (5, 1, 1)
    assert workgroups("x", (np.int64(2), 3), (10, 10, 10)) == (2, 3, 1)
    for bad in (0, 11, (1, 11), (1, 2, 3, 4), (), "4", 2.0, True, (True,)):
        with pytest.raises(InvalidArgument) as info:
            workgroups("x", bad, (10, 10, 10))
        assert info.value.backend == "x" and info.value.op == "dispatch"
    packed = pack_params("x", (np.float32(1.5), np.uint32(7), 3, -2, 2**31, 0.25), 6)
    assert packed == struct.pack("<fIiiIf", 1.5, 7, 3, -2, 2**31, 0.25)
    for bad in ((np.float64(1),), (True,), ("1",), (2**32,), (np.int64(1),), (1e300,)):
        with pytest.raises(InvalidArgument, match="param"):
            pack_params("x", bad, 1)
    with pytest.raises(InvalidArgument, match="takes 2 params"):
        pack_params("x", (1,), 2)
    with pytest.raises(InvalidArgument):
        host_array("x", np.zeros((4, 4))[:, ::2], "upload")
    with pytest.raises(InvalidArgument):
        host_array("x", np.zeros(4, ">f4"), "upload")
    with pytest.raises(InvalidArgument):
        check_out("x", np.zeros(5, np.float32), 16)


def test_evict_unused_keeps_programs_in_use_and_releases_the_oldest_first():
    from collections import OrderedDict

    from ironaccel.compute import evict_unused

    class Program:
        def __init__(self, users):
            self.users, self.released = users, False

        def release(self):
            self.released = True

    programs = OrderedDict((k, Program(users)) for k, users in (("a", 1), ("b", 0), ("c", 0), ("d", 0)))
    old = dict(programs)
    evict_unused(programs, 2)
    assert list(programs) == ["a", "d"]  # "a" is in use; "b" and "c" were the oldest unused
    assert old["b"].released and old["c"].released and not old["a"].released
    evict_unused(programs, 0)
    assert list(programs) == ["a"]

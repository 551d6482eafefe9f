"""Reusable conformance tests: adopt them by subclassing.

    from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance

    class TestMyBackend(BackendConformance):
        backend_name = "mydev"
        vendor_modules = ("my_vendor_binding",)

    class TestMyCompute(ComputeDeviceConformance):
        backend_name = "mydev"
        scale_offset_code = "..."   # y[i] = a * x[i] + b for i < n, workgroup size 64
        broken_code = "..."         # code that must fail to compile
        entry = "main"

The tests that need a working backend skip with the probe's reason when it is
unavailable (failures under IRONACCEL_REQUIRE, see `pytest_plugin`).

The kernel contract of `scale_offset_code`: two storage buffers (x: float32[n],
y: float32[n]) bound in that order, three params (a: float32, b: float32,
n: uint32), workgroup size 64, y[i] = a * x[i] + b for every i < n.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

from ironaccel.errors import ClosedError, CompileError, InvalidArgument, NotAvailable
from ironaccel.protocols import ComputeDevice
from ironaccel.registry import registry
from ironaccel.types import DeviceDescriptor, DType, ProbeResult

from .pytest_plugin import require

__all__ = ["BackendConformance", "ComputeDeviceConformance", "scale_offset"]

WORKGROUP = 64


def scale_offset(device: ComputeDevice, x: np.ndarray, a: float, b: float, pipeline: Any) -> np.ndarray:
    """The generic routine: y = a * x + b on any ComputeDevice, written once.

    Uploads `x`, runs `pipeline` (built from the backend's scale_offset code),
    downloads and returns y.  Frees what it allocated.
    """
    n = x.size
    xs = device.upload(np.ascontiguousarray(x, dtype=np.float32))
    ys = device.alloc(n, "float32")
    try:
        groups = (n + WORKGROUP - 1) // WORKGROUP
        device.dispatch(pipeline, [xs, ys], groups, (np.float32(a), np.float32(b), np.uint32(n)))
        return device.download(ys)
    finally:
        xs.close()
        ys.close()


class BackendConformance:
    """Identity, probe, enumerate and open: what every backend must get right."""

    backend_name: ClassVar[str] = ""
    #: Vendor modules that loading the plugin (not probing it) must not import.
    vendor_modules: ClassVar[tuple[str, ...]] = ()

    def test_registered(self) -> None:
        assert self.backend_name in registry.installed(), registry.failures()

    def test_probe_is_typed_and_cached(self) -> None:
        first = registry.probe(self.backend_name)
        assert isinstance(first, ProbeResult)
        assert first.backend == self.backend_name
        assert registry.probe(self.backend_name) is first
        if not first.available:
            assert first.reason, "an unavailable backend must say why"

    def test_open_agrees_with_probe(self) -> None:
        result = registry.probe(self.backend_name)
        if result.available:
            device = registry.open(self.backend_name, 0)
            assert device is not None
            getattr(device, "close", lambda: None)()
            return
        with pytest.raises(NotAvailable) as info:
            registry.open(self.backend_name, 0)
        assert info.value.reason == result.reason
        assert self.backend_name in str(info.value)

    def test_devices_are_descriptors(self) -> None:
        require(self.backend_name)
        devices = registry.devices(self.backend_name)
        assert devices, "an available backend lists at least one device"
        assert [d.ordinal for d in devices] == list(range(len(devices)))
        for d in devices:
            assert isinstance(d, DeviceDescriptor)
            assert d.backend == self.backend_name
            assert isinstance(d.name, str) and d.name
            assert d.memory_bytes >= 0
            d.to_dict()  # JSON-able

    def test_open_bad_ordinal(self) -> None:
        require(self.backend_name)
        count = len(registry.devices(self.backend_name))
        with pytest.raises(InvalidArgument):
            registry.open(self.backend_name, count)
        with pytest.raises(InvalidArgument):
            registry.open(self.backend_name, -1)

    def test_plugin_loading_imports_no_vendor_module(self) -> None:
        code = textwrap.dedent(
            f"""
            import sys, ironaccel
            ironaccel.registry.names(); ironaccel.registry.installed(); ironaccel.registry.failures()
            bad = [m for m in {list(self.vendor_modules)!r} if m in sys.modules]
            assert not bad, bad
            """
        )
        subprocess.run([sys.executable, "-c", code], check=True)


class ComputeDeviceConformance:
    """The cross-vendor compute contract, run against a backend's ComputeDevice."""

    backend_name: ClassVar[str] = ""
    scale_offset_code: ClassVar[Any] = None
    broken_code: ClassVar[Any] = None
    entry: ClassVar[str] = "main"

    def open_device(self) -> ComputeDevice:
        """Open the ComputeDevice under test; override if `open(0)` is not it."""
        return require(self.backend_name).open(0)

    @pytest.fixture
    def device(self) -> Iterator[ComputeDevice]:
        require(self.backend_name)
        dev = self.open_device()
        try:
            yield dev
        finally:
            dev.close()

    @pytest.fixture
    def pipeline(self, device: ComputeDevice) -> Any:
        return device.pipeline(
            self.scale_offset_code, self.entry, buffers=2, params=3, workgroup_size=(WORKGROUP, 1, 1)
        )

    def test_satisfies_protocol(self, device: ComputeDevice) -> None:
        assert isinstance(device, ComputeDevice)
        assert device.descriptor.backend == self.backend_name

    @pytest.mark.parametrize("dtype,size", [("float32", 4097), ("int32", 64), ("uint8", 1001), ("float64", 3)])
    def test_upload_download_round_trip(self, device: ComputeDevice, dtype: str, size: int) -> None:
        rng = np.random.default_rng()
        data = (rng.random(size) * 200).astype(dtype)
        buf = device.upload(data)
        assert buf.dtype is DType.of(dtype) and buf.size == size and buf.nbytes == data.nbytes
        np.testing.assert_array_equal(device.download(buf), data)
        out = np.full(size, 7, dtype=dtype)
        assert device.download(buf, out) is out
        np.testing.assert_array_equal(out, data)
        buf.close()

    def test_generic_routine(self, device: ComputeDevice, pipeline: Any) -> None:
        rng = np.random.default_rng()
        for n in (1, 63, 64, 65, 100_003):
            x = rng.standard_normal(n).astype(np.float32)
            a, b = float(rng.uniform(-4, 4)), float(rng.uniform(-4, 4))
            y = scale_offset(device, x, a, b, pipeline)
            np.testing.assert_allclose(y, np.float32(a) * x + np.float32(b), rtol=1e-5, atol=1e-5)

    def test_repeated_dispatch_reuses_pipeline(self, device: ComputeDevice, pipeline: Any) -> None:
        x = np.arange(1000, dtype=np.float32)
        xs, ys = device.upload(x), device.alloc(1000, "float32")
        for a in (1.0, 2.0, -3.0):
            params = (np.float32(a), np.float32(1), np.uint32(1000))
            sub = device.dispatch(pipeline, [xs, ys], (1000 + 63) // 64, params)
            sub.wait()
            assert sub.done()
            np.testing.assert_allclose(device.download(ys), a * x + 1)
        device.synchronize()
        xs.close()
        ys.close()

    def test_dispatch_is_ordered_before_download(self, device: ComputeDevice, pipeline: Any) -> None:
        x = np.ones(1 << 16, dtype=np.float32)
        xs, ys = device.upload(x), device.alloc(x.size, "float32")
        for _ in range(3):  # chain: y = 2x + 1, then x <- y via a second dispatch
            device.dispatch(pipeline, [xs, ys], x.size // 64, (np.float32(2), np.float32(1), np.uint32(x.size)))
            device.dispatch(pipeline, [ys, xs], x.size // 64, (np.float32(1), np.float32(0), np.uint32(x.size)))
        np.testing.assert_array_equal(device.download(xs), np.full(x.size, 15, np.float32))
        xs.close()
        ys.close()

    def test_write_refills_a_buffer_in_order(self, device: ComputeDevice, pipeline: Any) -> None:
        rng = np.random.default_rng()
        n = 1000
        xs, ys = device.alloc(n, "float32"), device.alloc(n, "float32")
        groups = (n + 63) // 64
        for _ in range(3):
            data = rng.standard_normal(n).astype(np.float32)
            device.write(xs, data)
            device.dispatch(pipeline, [xs, ys], groups, (np.float32(2), np.float32(0), np.uint32(n)))
            np.testing.assert_array_equal(device.download(ys), 2 * data)
        # A write after a dispatch must not change what that dispatch reads.
        old = data
        device.dispatch(pipeline, [xs, ys], groups, (np.float32(1), np.float32(0), np.uint32(n)))
        device.write(xs, np.zeros(n, np.float32))
        np.testing.assert_array_equal(device.download(ys), old)
        head = rng.standard_normal(16).astype(np.float32)
        device.write(xs, head)  # a partial write fills the start only
        got = device.download(xs)
        np.testing.assert_array_equal(got[:16], head)
        np.testing.assert_array_equal(got[16:], 0)
        with pytest.raises(InvalidArgument):
            device.write(xs, np.zeros(n + 1, np.float32))
        with pytest.raises(InvalidArgument):
            device.write(xs, np.zeros((8, 8), np.float32)[:, ::2])
        xs.close()
        with pytest.raises(ClosedError):
            device.write(xs, head)
        ys.close()

    def test_compile_error_carries_log(self, device: ComputeDevice) -> None:
        with pytest.raises(CompileError) as info:
            device.pipeline(self.broken_code, self.entry, buffers=2, params=3, workgroup_size=(WORKGROUP, 1, 1))
        assert info.value.log.strip()
        assert info.value.op

    def test_wrong_buffer_count(self, device: ComputeDevice, pipeline: Any) -> None:
        buf = device.alloc(64, "float32")
        with pytest.raises(InvalidArgument) as info:
            device.dispatch(pipeline, [buf], 1, (np.float32(1), np.float32(0), np.uint32(64)))
        assert info.value.op
        buf.close()

    def test_wrong_param_count(self, device: ComputeDevice, pipeline: Any) -> None:
        a, b = device.alloc(64, "float32"), device.alloc(64, "float32")
        with pytest.raises(InvalidArgument):
            device.dispatch(pipeline, [a, b], 1, (np.float32(1),))
        a.close()
        b.close()

    def test_groups_over_limit(self, device: ComputeDevice, pipeline: Any) -> None:
        a, b = device.alloc(64, "float32"), device.alloc(64, "float32")
        with pytest.raises(InvalidArgument):
            device.dispatch(pipeline, [a, b], (1, 10**7, 1), (np.float32(1), np.float32(0), np.uint32(64)))
        with pytest.raises(InvalidArgument):
            device.dispatch(pipeline, [a, b], 0, (np.float32(1), np.float32(0), np.uint32(64)))
        a.close()
        b.close()

    def test_download_larger_than_buffer(self, device: ComputeDevice) -> None:
        buf = device.upload(np.zeros(16, np.float32))
        with pytest.raises(InvalidArgument):
            device.download(buf, np.empty(17, np.float32))
        with pytest.raises(InvalidArgument):
            device.download(buf, np.empty((4, 8), np.float32)[:, ::2])  # not contiguous
        buf.close()

    def test_bad_sizes(self, device: ComputeDevice) -> None:
        for size in (0, -1, 2**62):
            with pytest.raises(InvalidArgument):
                device.alloc(size, "float32")
        with pytest.raises(InvalidArgument):
            device.upload(np.zeros((8, 8), np.float32)[:, ::2])
        with pytest.raises((InvalidArgument, TypeError)):
            device.alloc(1.5, "float32")  # type: ignore[arg-type]

    def test_buffer_of_another_device(self, device: ComputeDevice, pipeline: Any) -> None:
        other = self.open_device()
        try:
            foreign = other.alloc(64, "float32")
            mine = device.alloc(64, "float32")
            with pytest.raises(InvalidArgument):
                device.dispatch(pipeline, [foreign, mine], 1, (np.float32(1), np.float32(0), np.uint32(64)))
            with pytest.raises(InvalidArgument):
                device.download(foreign)
            foreign.close()
            mine.close()
        finally:
            other.close()

    def test_use_after_close(self, device: ComputeDevice, pipeline: Any) -> None:
        buf = device.upload(np.ones(8, np.float32))
        buf.close()
        buf.close()  # closing twice is a no-op, never a double free
        with pytest.raises(ClosedError):
            device.download(buf)
        other = self.open_device()
        other.close()
        other.close()
        with pytest.raises(ClosedError):
            other.upload(np.ones(8, np.float32))
        with pytest.raises(ClosedError):
            other.alloc(8, "float32")

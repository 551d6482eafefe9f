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

Versions: the kit runs the tests of the plugin API version the plugin
targets (`ironaccel.contract`).  That is the class attribute ``plugin_api``
when set, else the ``plugin_api`` of the backend's registered `BackendSpec`,
else "1.1" (a suite written before plugins stated a version) -- or "1.2" where
the class adopted `ExecutionConformance` by hand.  A test marked
``@since("1.1")`` is skipped, saying so, for an older target.  From 1.2 on
`ComputeDeviceConformance` includes `ExecutionConformance` (the execution
model), whose tests are 1.2's.

The tests that need a working backend skip with the probe's reason when it is
unavailable (failures under IRONACCEL_REQUIRE, see `pytest_plugin`).

The kernel contract of `scale_offset_code`: two storage buffers (x: float32[n],
y: float32[n]) bound in that order, x declared read-only and y writable where
the language declares access, three params (a: float32, b: float32, n: uint32),
workgroup size 64, y[i] = a * x[i] + b for every i < n.  Set
`declares_element_types = False` where the code cannot declare its buffers'
element types (CUDA); the kit then checks that none are enforced.

Each rule of `ironaccel.protocols.ComputeDevice` has a test here, including
the bad input every ComputeDevice must survive: wrong kinds of arguments
(None, generators, bare numbers), NaN and huge timeouts, a buffer bound twice,
text code with a NUL or a lone surrogate, and use in a forked child.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

from ironaccel.contract import PLUGIN_API, incompatible, is_at_least, since, since_of
from ironaccel.errors import (
    ClosedError,
    CompileError,
    InvalidArgument,
    InvalidState,
    IronAccelError,
    NotAvailable,
    Timeout,
)
from ironaccel.protocols import ComputeDevice
from ironaccel.registry import registry
from ironaccel.types import DeviceDescriptor, DType, ProbeResult

from .execution import ExecutionConformance
from .pytest_plugin import require

__all__ = ["BackendConformance", "ComputeDeviceConformance", "scale_offset"]

since("1.2")(ExecutionConformance)
#: What a suite that states no version targets: the last contract before plugins could state one.
UNSTATED = "1.1"

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


class _Versioned:
    """The plugin API version a test class targets, and the skip of the tests introduced after it."""

    backend_name: ClassVar[str] = ""
    #: The plugin API version the backend under test targets (see the module docstring for the default).
    plugin_api: ClassVar[str | None] = None

    @classmethod
    def target_plugin_api(cls) -> str:
        """The version whose tests run: the class's, the BackendSpec's, or the default for neither."""
        if cls.plugin_api is not None:
            return cls.plugin_api
        try:
            stated = registry.spec(cls.backend_name).plugin_api if cls.backend_name else None
        except IronAccelError:
            stated = None
        if stated is not None:
            return stated
        return "1.2" if any(ExecutionConformance in klass.__bases__ for klass in cls.__mro__
                            if klass is not ComputeDeviceConformance) else UNSTATED

    @pytest.fixture(autouse=True)
    def _plugin_api_version(self, request: pytest.FixtureRequest) -> None:
        target = self.target_plugin_api()
        why = incompatible(target)
        if why is not None:
            pytest.fail(f"the test class targets plugin API {target}, which this kit ({PLUGIN_API}) cannot test: "
                        f"{why}", pytrace=False)
        name = request.function.__name__
        owner = next((k for k in type(self).__mro__ if name in vars(k)), type(self))
        # the mark of the class that defines the test, not one it inherits
        introduced = since_of(request.function, vars(owner).get("__plugin_api_since__", "1.0"))
        if not is_at_least(target, introduced):
            request.node._ironaccel_not_in_target = True  # not required: IRONACCEL_REQUIRE leaves this skip alone
            pytest.skip(f"introduced in plugin API {introduced}; {self.backend_name or 'the plugin'} targets {target}")


class BackendConformance(_Versioned):
    """Identity, probe, enumerate and open: what every backend must get right."""

    backend_name: ClassVar[str] = ""
    #: Vendor modules that loading the plugin (not probing it) must not import.
    vendor_modules: ClassVar[tuple[str, ...]] = ()

    def test_registered(self) -> None:
        """The backend is installed under its name through the entry point."""
        assert self.backend_name in registry.installed(), registry.failures()

    def test_probe_is_typed_and_cached(self) -> None:
        """The probe returns a ProbeResult for this backend, cached, with a reason when unavailable."""
        first = registry.probe(self.backend_name)
        assert isinstance(first, ProbeResult)
        assert first.backend == self.backend_name
        assert registry.probe(self.backend_name) is first
        if not first.available:
            assert first.reason, "an unavailable backend must say why"

    def test_open_agrees_with_probe(self) -> None:
        """`open(0)` works when the probe says available, and raises NotAvailable with the probe's reason when not."""
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
        """An available backend lists descriptors with ordinals 0..n-1, its own name and JSON-able fields."""
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
        """An ordinal past the device count, or negative, is InvalidArgument."""
        require(self.backend_name)
        count = len(registry.devices(self.backend_name))
        with pytest.raises(InvalidArgument):
            registry.open(self.backend_name, count)
        with pytest.raises(InvalidArgument):
            registry.open(self.backend_name, -1)

    def test_plugin_loading_imports_no_vendor_module(self) -> None:
        """Listing the plugins (in a fresh process) imports none of the backend's vendor modules."""
        code = textwrap.dedent(
            f"""
            import sys, ironaccel
            ironaccel.registry.names(); ironaccel.registry.installed(); ironaccel.registry.failures()
            bad = [m for m in {list(self.vendor_modules)!r} if m in sys.modules]
            assert not bad, bad
            """
        )
        subprocess.run([sys.executable, "-c", code], check=True)


class ComputeDeviceConformance(_Versioned, ExecutionConformance):
    """The cross-vendor compute contract, run against a backend's ComputeDevice, with the execution model's
    tests (`ExecutionConformance`) for a plugin that targets plugin API 1.2 or later."""

    backend_name: ClassVar[str] = ""
    scale_offset_code: ClassVar[Any] = None
    broken_code: ClassVar[Any] = None
    entry: ClassVar[str] = "main"
    declares_element_types: ClassVar[bool] = True

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
        """The opened device is a ComputeDevice whose descriptor names this backend."""
        assert isinstance(device, ComputeDevice)
        assert device.descriptor.backend == self.backend_name

    @pytest.mark.parametrize("dtype,size", [("float32", 4097), ("int32", 64), ("uint8", 1001), ("float64", 3)])
    def test_upload_download_round_trip(self, device: ComputeDevice, dtype: str, size: int) -> None:
        """Uploaded arrays of several dtypes and sizes download unchanged, also into a given `out`."""
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
        """scale_offset gives numpy's answer for sizes around the workgroup size and a large one."""
        rng = np.random.default_rng()
        for n in (1, 63, 64, 65, 100_003):
            x = rng.standard_normal(n).astype(np.float32)
            a, b = float(rng.uniform(-4, 4)), float(rng.uniform(-4, 4))
            y = scale_offset(device, x, a, b, pipeline)
            np.testing.assert_allclose(y, np.float32(a) * x + np.float32(b), rtol=1e-5, atol=1e-5)

    def test_repeated_dispatch_reuses_pipeline(self, device: ComputeDevice, pipeline: Any) -> None:
        """Dispatching one pipeline repeatedly with new params gives each run's result."""
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
        """A download sees the result of every dispatch queued before it, without an explicit wait."""
        x = np.ones(1 << 16, dtype=np.float32)
        xs, ys = device.upload(x), device.alloc(x.size, "float32")
        for _ in range(3):  # chain: y = 2x + 1, then x <- y via a second dispatch
            device.dispatch(pipeline, [xs, ys], x.size // 64, (np.float32(2), np.float32(1), np.uint32(x.size)))
            device.dispatch(pipeline, [ys, xs], x.size // 64, (np.float32(1), np.float32(0), np.uint32(x.size)))
        np.testing.assert_array_equal(device.download(xs), np.full(x.size, 15, np.float32))
        xs.close()
        ys.close()

    def test_write_refills_a_buffer_in_order(self, device: ComputeDevice, pipeline: Any) -> None:
        """`write` refills a buffer between dispatches and each dispatch sees the data written before it."""
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
        """Code that does not compile raises CompileError carrying the compiler's log."""
        with pytest.raises(CompileError) as info:
            device.pipeline(self.broken_code, self.entry, buffers=2, params=3, workgroup_size=(WORKGROUP, 1, 1))
        assert info.value.log.strip()
        assert info.value.op

    def test_wrong_buffer_count(self, device: ComputeDevice, pipeline: Any) -> None:
        """A dispatch with fewer buffers than the pipeline declares is InvalidArgument naming the call."""
        buf = device.alloc(64, "float32")
        with pytest.raises(InvalidArgument) as info:
            device.dispatch(pipeline, [buf], 1, (np.float32(1), np.float32(0), np.uint32(64)))
        assert info.value.op
        buf.close()

    def test_wrong_param_count(self, device: ComputeDevice, pipeline: Any) -> None:
        """A dispatch with fewer params than the pipeline declares is InvalidArgument."""
        a, b = device.alloc(64, "float32"), device.alloc(64, "float32")
        with pytest.raises(InvalidArgument):
            device.dispatch(pipeline, [a, b], 1, (np.float32(1),))
        a.close()
        b.close()

    def test_groups_over_limit(self, device: ComputeDevice, pipeline: Any) -> None:
        """Workgroup counts of zero or past the device's limit are InvalidArgument."""
        a, b = device.alloc(64, "float32"), device.alloc(64, "float32")
        with pytest.raises(InvalidArgument):
            device.dispatch(pipeline, [a, b], (1, 10**7, 1), (np.float32(1), np.float32(0), np.uint32(64)))
        with pytest.raises(InvalidArgument):
            device.dispatch(pipeline, [a, b], 0, (np.float32(1), np.float32(0), np.uint32(64)))
        a.close()
        b.close()

    def test_download_larger_than_buffer(self, device: ComputeDevice) -> None:
        """A download into an `out` larger than the buffer, or not contiguous, is InvalidArgument."""
        buf = device.upload(np.zeros(16, np.float32))
        with pytest.raises(InvalidArgument):
            device.download(buf, np.empty(17, np.float32))
        with pytest.raises(InvalidArgument):
            device.download(buf, np.empty((4, 8), np.float32)[:, ::2])  # not contiguous
        buf.close()

    def test_bad_sizes(self, device: ComputeDevice) -> None:
        """Zero, negative, huge and non-int sizes, unknown, non-native and object dtypes are InvalidArgument."""
        for size in (0, -1, 2**62):
            with pytest.raises(InvalidArgument):
                device.alloc(size, "float32")
        with pytest.raises(InvalidArgument):
            device.upload(np.zeros((8, 8), np.float32)[:, ::2])
        for bad in (1.5, "8", None, True):
            with pytest.raises(InvalidArgument):
                device.alloc(bad, "float32")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            device.alloc(8, "no-such-type")
        with pytest.raises(InvalidArgument):
            device.upload(np.zeros(0, np.float32))  # a buffer holds at least one element
        with pytest.raises(InvalidArgument):
            device.upload(np.zeros(4, ">f4"))  # not native byte order
        with pytest.raises(InvalidArgument):
            device.upload(np.zeros(4, object))

    def test_buffer_of_another_device(self, device: ComputeDevice, pipeline: Any) -> None:
        """A buffer of another open device is refused by dispatch and download."""
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
        """A closed buffer or device raises ClosedError; closing twice is a no-op."""
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

    # -- rules the protocol states once for every backend --------------------------------------------------

    def _run_params(self, n: int, a: float = 2.0, b: float = 1.0) -> tuple[Any, ...]:
        return (np.float32(a), np.float32(b), np.uint32(n))

    @since("1.1")
    def test_upload_flattens_in_c_order(self, device: ComputeDevice) -> None:
        """An n-d upload is flattened in C order; a numpy scalar uploads as one element."""
        data = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
        buf = device.upload(data)
        assert (buf.size, buf.nbytes) == (24, data.nbytes)
        got = device.download(buf)
        assert got.shape == (24,)
        np.testing.assert_array_equal(got, data.ravel())
        scalar = device.upload(np.float32(3.5))
        assert scalar.size == 1 and device.download(scalar)[0] == np.float32(3.5)
        buf.close()
        scalar.close()

    @since("1.1")
    def test_download_out_gets_raw_leading_bytes(self, device: ComputeDevice) -> None:
        """`download(out=)` copies the buffer's leading bytes into `out` whatever its dtype."""
        data = np.arange(16, dtype=np.float32)
        buf = device.upload(data)
        smaller = np.zeros(5, np.float32)
        assert device.download(buf, smaller) is smaller
        np.testing.assert_array_equal(smaller, data[:5])
        as_words = np.zeros(16, np.uint32)  # another dtype: the raw bytes, no conversion
        device.download(buf, as_words)
        np.testing.assert_array_equal(as_words, data.view(np.uint32))
        shaped = np.zeros((2, 4), np.float32)  # any shape, if C-contiguous
        device.download(buf, shaped)
        np.testing.assert_array_equal(shaped.ravel(), data[:8])
        empty = np.zeros(0, np.float32)
        assert device.download(buf, empty) is empty
        frozen = np.zeros(4, np.float32)
        frozen.flags.writeable = False
        for bad in (frozen, [0.0] * 4, np.zeros(2, object), np.zeros(17, np.float32), "out"):
            with pytest.raises(InvalidArgument):
                device.download(buf, bad)
        buf.close()

    @since("1.1")
    def test_dispatch_argument_kinds(self, device: ComputeDevice, pipeline: Any) -> None:
        """Dispatch arguments of the wrong kind (buffers, groups, params) are InvalidArgument."""
        n = 64
        x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
        params = self._run_params(n)
        cases = [
            ([x, y], 1, None), ([x, y], 1, 5), ([x, y], 1, (p for p in params)), ([x, y], 1, "abc"),
            ([x, y], 1, params[:2]), ([x, y], 1, (*params, np.float32(0))),
            ([x, y], 1, (True, np.float32(1), np.uint32(n))), ([x, y], 1, (np.float64(1), np.float32(1), n)),
            ([x, y], 1, (np.float32(1), np.float32(1), 2**40)),
            (None, 1, params), ((b for b in (x, y)), 1, params), (x, 1, params), ([x], 1, params),
            ([x, y, y], 1, params), ([x, "y"], 1, params), ([x, None], 1, params),
            ([x, y], None, params), ([x, y], "1", params), ([x, y], 1.0, params), ([x, y], (1, 1, 1, 1), params),
            ([x, y], -1, params), ([x, y], True, params),
        ]
        for buffers, groups, bad in cases:
            with pytest.raises(InvalidArgument) as info:
                device.dispatch(pipeline, buffers, groups, bad)  # type: ignore[arg-type]
            assert info.value.op
        with pytest.raises(InvalidArgument):
            device.dispatch(None, [x, y], 1, params)  # type: ignore[arg-type]
        device.dispatch(pipeline, (x, y), (1,), list(params)).wait()  # tuples and lists alike
        np.testing.assert_array_equal(device.download(y), np.full(n, 3, np.float32))
        x.close()
        y.close()

    @since("1.1")
    def test_pipeline_argument_kinds(self, device: ComputeDevice) -> None:
        """Pipeline arguments of the wrong kind (buffer and param counts, workgroup sizes) are InvalidArgument."""
        code, entry = self.scale_offset_code, self.entry
        cases: list[dict[str, Any]] = [
            {"buffers": -1}, {"buffers": "2"}, {"buffers": 2.0}, {"buffers": None}, {"buffers": True},
            {"params": -1}, {"params": None}, {"params": 3.0},
            {"workgroup_size": 0}, {"workgroup_size": "64"}, {"workgroup_size": (64, 1, 1, 1)},
            {"workgroup_size": (0, 1, 1)}, {"workgroup_size": None},
        ]
        for case in cases:
            kwargs = {"buffers": 2, "params": 3, "workgroup_size": (WORKGROUP, 1, 1), **case}
            with pytest.raises(InvalidArgument):
                device.pipeline(code, entry, **kwargs)
        for bad_entry in (None, "", 5):
            with pytest.raises(InvalidArgument):
                device.pipeline(code, bad_entry, buffers=2, params=3)  # type: ignore[arg-type]
        for bad_code in (None, 12345, 1.5, object()):
            with pytest.raises(InvalidArgument):
                device.pipeline(bad_code, entry, buffers=2, params=3)  # type: ignore[arg-type]

    @since("1.1")
    def test_text_code_with_nul_or_lone_surrogate(self, device: ComputeDevice) -> None:
        """Text code with a NUL or a lone surrogate is InvalidArgument before the compiler sees it."""
        code = self.scale_offset_code
        if not isinstance(code, str):
            assert isinstance(code, (bytes, bytearray, list, tuple, np.ndarray))  # binary code: NUL is data
            return
        for bad in (code + "\0 trailing text the compiler must not silently drop", code + "\n// \ud800\n",
                    code.encode() + b"\xff\xfe"):
            with pytest.raises(InvalidArgument):
                device.pipeline(bad, self.entry, buffers=2, params=3, workgroup_size=(WORKGROUP, 1, 1))

    @since("1.1")
    def test_pipelines_are_cached_handles(self, device: ComputeDevice, pipeline: Any) -> None:
        """Each `pipeline()` call gives its own handle over a cached compiled program."""
        again = device.pipeline(self.scale_offset_code, self.entry, buffers=2, params=3,
                                workgroup_size=(WORKGROUP, 1, 1))
        assert again is not pipeline
        again.close()
        again.close()
        x, y = device.upload(np.ones(64, np.float32)), device.alloc(64, "float32")
        with pytest.raises(ClosedError):
            device.dispatch(again, [x, y], 1, self._run_params(64))
        device.dispatch(pipeline, [x, y], 1, self._run_params(64)).wait()  # the other handle still works
        np.testing.assert_array_equal(device.download(y), np.full(64, 3, np.float32))
        x.close()
        y.close()

    @since("1.1")
    def test_element_types_against_the_shader(self, device: ComputeDevice, pipeline: Any) -> None:
        """A buffer whose element type differs from the shader's declaration is refused (or read as raw bytes when
        undeclared)."""
        n = 64
        ints, y = device.upload(np.zeros(n, np.int32)), device.upload(np.full(n, 9, np.float32))
        params = self._run_params(n, 2.0, 1.5)
        if self.declares_element_types:
            with pytest.raises(InvalidArgument) as info:
                device.dispatch(pipeline, [ints, y], 1, params)
            assert "float32" in str(info.value) and "int32" in str(info.value)
            words = device.upload(np.zeros(n, np.float32).view(np.uint32))  # a view reinterprets: still uint32
            with pytest.raises(InvalidArgument):
                device.dispatch(pipeline, [words, y], 1, params)
            words.close()
        else:  # not declared: the bytes are read as the kernel's type (int 0 is float 0.0)
            device.dispatch(pipeline, [ints, y], 1, params).wait()
            np.testing.assert_array_equal(device.download(y), np.full(n, 1.5, np.float32))
        ints.close()
        y.close()

    @since("1.1")
    def test_one_buffer_bound_twice_to_a_writable_binding(self, device: ComputeDevice, pipeline: Any) -> None:
        """One buffer bound twice where a binding is writable is InvalidArgument naming the call."""
        n = 64
        x = device.upload(np.ones(n, np.float32))
        with pytest.raises(InvalidArgument) as info:
            device.dispatch(pipeline, [x, x], 1, self._run_params(n))
        assert "same buffer" in str(info.value)
        np.testing.assert_array_equal(device.download(x), np.ones(n, np.float32))  # nothing ran
        x.close()

    def _long_work(self, device: ComputeDevice, pipeline: Any) -> tuple[Any, list[Any]]:
        n = 1 << 20
        x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
        groups = n // WORKGROUP  # 16384: a 1-D grid, as the kernel contract says, within every device's limit
        sub = None
        for _ in range(8):
            sub = device.dispatch(pipeline, [x, y], groups, self._run_params(n))
            sub = device.dispatch(pipeline, [y, x], groups, self._run_params(n, 1.0, 0.0))
        return sub, [x, y]

    @since("1.1")
    def test_wait_timeouts(self, device: ComputeDevice, pipeline: Any) -> None:
        """Bad timeouts are InvalidArgument; `wait(0)` polls (errors.Timeout while busy) and `wait(1e11)` is legal."""
        for bad in (float("nan"), -1, -1e-9, "1", [1], True):
            sub, held = self._long_work(device, pipeline)
            with pytest.raises(InvalidArgument):
                sub.wait(bad)
            for buf in held:
                buf.close()
        sub, held = self._long_work(device, pipeline)
        try:
            sub.wait(0)  # polls once: done, or Timeout while the work goes on
        except Timeout as exc:
            assert isinstance(exc, TimeoutError) and isinstance(exc, IronAccelError)
            assert exc.backend == self.backend_name and exc.op
        sub.wait(1e11)  # a legal wait, however long: never an overflow
        assert sub.done()
        sub.wait(0)
        sub.wait(float("inf"))
        sub.wait(10**400)
        sub.wait()
        with pytest.raises(InvalidArgument):
            sub.wait(float("nan"))  # refused even when there is nothing left to wait for
        np.testing.assert_array_equal(device.download(held[0]), np.full(1 << 20, 2**9 - 1, np.float32))
        for buf in held:
            buf.close()

    @since("1.1")
    def test_submissions_after_the_device_closed(self) -> None:
        """Closing a device waits for its work in flight; its submissions stay waitable, later calls raise
        ClosedError."""
        device = self.open_device()
        pipeline = device.pipeline(self.scale_offset_code, self.entry, buffers=2, params=3,
                                   workgroup_size=(WORKGROUP, 1, 1))
        sub, held = self._long_work(device, pipeline)
        device.close()
        sub.wait()  # closing waited for it
        sub.wait(0)
        assert sub.done()
        with pytest.raises(ClosedError):
            device.download(held[0])
        with pytest.raises(ClosedError):
            device.dispatch(pipeline, held, 1, self._run_params(64))
        with pytest.raises(ClosedError):
            device.synchronize()
        for buf in held:
            buf.close()
            buf.close()
        pipeline.close()

    @since("1.1")
    def test_calls_from_another_thread(self, device: ComputeDevice) -> None:
        """A call from another thread works, or raises InvalidState for a device tied to its opening thread."""
        outcome: list[Any] = []

        def other() -> None:
            try:
                buf = device.alloc(16, "float32")
                device.write(buf, np.arange(16, dtype=np.float32))
                outcome.append(device.download(buf))
                buf.close()
            except InvalidState as exc:  # a device tied to the thread that opened it says so
                outcome.append(exc)
            except BaseException as exc:  # noqa: B036 - reported below
                outcome.append(exc)

        worker = threading.Thread(target=other, daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "a call from another thread hung"
        result = outcome[0]
        if not isinstance(result, InvalidState):
            assert isinstance(result, np.ndarray), result
            np.testing.assert_array_equal(result, np.arange(16, dtype=np.float32))

    @since("1.1")
    def test_forked_child_gets_invalid_state(self, device: ComputeDevice, pipeline: Any) -> None:
        """A forked child using the parent's device gets a typed error, not a crash or hang."""
        if not hasattr(os, "fork"):
            pytest.skip("no os.fork on this platform")
        n = 64
        x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
        device.synchronize()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what each call did, then leave without running any teardown
            try:
                os.close(read)
                results = []
                calls = [
                    lambda: device.dispatch(pipeline, [x, y], 1, self._run_params(n)),
                    lambda: device.download(y),
                    lambda: device.upload(np.ones(4, np.float32)),
                    lambda: device.synchronize(),
                ]
                for call in calls:
                    try:
                        call()
                        results.append("ran")
                    except InvalidState:
                        results.append("InvalidState")
                    except BaseException as exc:  # noqa: B036 - reported to the parent
                        results.append(type(exc).__name__)
                x.close()
                device.close()  # forgets the device, no driver call
                results.append("closed")
                os.write(write, ",".join(results).encode())
            finally:
                os._exit(0)
        os.close(write)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("a call in a forked child hung")
        with os.fdopen(read, "rb") as pipe:
            report = pipe.read().decode()
        assert report == "InvalidState,InvalidState,InvalidState,InvalidState,closed", report
        device.dispatch(pipeline, [x, y], 1, self._run_params(n)).wait()  # the parent's device is untouched
        np.testing.assert_array_equal(device.download(y), np.full(n, 3, np.float32))
        x.close()
        y.close()

"""The pjrt backend through the registry: conformance, survey, opened devices."""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.errors import ClosedError, InvalidArgument
from ironaccel.registry import registry
from ironaccel.testing.conformance import BackendConformance
from ironaccel.types import ComputeTier, DeviceKind
from ironaccel_pjrt.device import PjrtDevice

pytestmark = pytest.mark.backend("pjrt")

SCALE_OFFSET = """
func.func public @main(%x: tensor<1000xf32>, %a: tensor<f32>, %b: tensor<f32>) -> tensor<1000xf32> {
  %a1 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<1000xf32>
  %b1 = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<1000xf32>
  %0 = stablehlo.multiply %a1, %x : tensor<1000xf32>
  %1 = stablehlo.add %0, %b1 : tensor<1000xf32>
  return %1 : tensor<1000xf32>
}
"""


class TestPjrtBackend(BackendConformance):
    backend_name = "pjrt"
    vendor_modules = ("jax", "jaxlib", "ironaccel_pjrt.api", "ironaccel_pjrt.client")


def test_survey_lists_pjrt_devices() -> None:
    (report,) = registry.survey(["pjrt"])
    assert report.probe.available, report.probe.reason
    assert report.error is None, report.error
    assert report.devices
    for d in report.devices:
        assert d.backend == "pjrt" and d.extras["api_version"].startswith("0.")
        assert d.extras["plugin"] and d.extras["platform"]
        if d.kind is DeviceKind.CPU:
            assert d.compute_tier is ComputeTier.SOFTWARE
        if d.extras["platform"] == "cuda":
            assert d.kind is DeviceKind.GPU and d.vendor.value == "nvidia"
            assert "compute_capability" in d.extras["attributes"]
        d.to_dict()
    plugins = {d.extras["plugin_path"] for d in report.devices}
    assert len(plugins) >= 1


def test_open_runs_a_program() -> None:
    count = len(registry.devices("pjrt"))
    rng = np.random.default_rng()
    for ordinal in range(count):
        with registry.open("pjrt", ordinal) as dev:
            assert isinstance(dev, PjrtDevice) and dev.descriptor.ordinal == ordinal
            x = rng.standard_normal(1000).astype(np.float32)
            a, b = np.float32(rng.uniform(-3, 3)), np.float32(rng.uniform(-3, 3))
            (y,) = dev.run(SCALE_OFFSET, x, a, b)
            np.testing.assert_allclose(y, a.astype(np.float64) * x + b, rtol=1e-6, atol=1e-6)


def test_device_object_surface() -> None:
    dev = registry.open("pjrt", 0)
    exe = dev.compile(SCALE_OFFSET)
    assert exe is dev.compile(SCALE_OFFSET)  # cached by the client
    assert exe.devices == [dev.info]
    x = dev.upload(np.arange(1000, dtype=np.float32))
    (y,) = dev.execute(exe, [x, dev.upload(np.float32(2)), dev.upload(np.float32(1))])
    dev.synchronize()
    out = np.zeros(1000, np.float32)
    assert dev.download(y, out) is out
    np.testing.assert_array_equal(out, 2 * np.arange(1000, dtype=np.float32) + 1)
    with pytest.raises(InvalidArgument):
        dev.download(np.zeros(3))  # type: ignore[arg-type]
    dev.close()
    dev.close()
    assert x.closed and y.closed  # the device object's buffers go with it
    with pytest.raises(ClosedError):
        dev.upload(np.ones(3))
    with pytest.raises(ClosedError):
        dev.compile(SCALE_OFFSET)
    again = registry.open("pjrt", 0)  # the shared client is still open
    np.testing.assert_array_equal(again.download(again.upload(np.arange(5))), np.arange(5))
    again.close()

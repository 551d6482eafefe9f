"""Bad input the compute kit used to let through raw or unbounded, on the in-memory double."""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.compute import element_type, entry_name
from ironaccel.errors import InvalidArgument
from ironaccel.testing.double import SCALE_OFFSET, MemoryBackend, MemoryDevice
from ironaccel.types import DType

#: numpy dtype specs that np.dtype() refuses with ValueError, not TypeError.
MALFORMED_DTYPES = [("f4", -1), ("f4", (1 << 40,))]


@pytest.mark.parametrize("spec", MALFORMED_DTYPES, ids=["negative-shape", "huge-shape"])
def test_a_malformed_dtype_spec_is_a_type_error_of_dtype_of(spec: object) -> None:
    with pytest.raises(ValueError):
        np.dtype(spec)  # type: ignore[call-overload]  # the premise: numpy raises ValueError here
    with pytest.raises(TypeError, match="unsupported dtype"):
        DType.of(spec)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument) as info:
        element_type("x", spec, "alloc")
    assert info.value.op == "alloc"


@pytest.mark.parametrize("spec", MALFORMED_DTYPES, ids=["negative-shape", "huge-shape"])
def test_alloc_with_a_malformed_dtype_spec_is_invalid_argument(spec: object) -> None:
    device = MemoryDevice(MemoryBackend().devices()[0])
    with pytest.raises(InvalidArgument) as info:
        device.alloc(4, spec)
    assert info.value.op == "alloc" and "unsupported dtype" in str(info.value)
    device.close()


def test_an_entry_with_a_lone_surrogate_is_refused_before_the_driver() -> None:
    assert entry_name("x", "main") == "main" and entry_name("x", "mä") == "mä"
    with pytest.raises(InvalidArgument) as info:
        entry_name("x", "ma\ud800in")
    assert info.value.op == "pipeline" and "surrogate" in str(info.value)
    device = MemoryDevice(MemoryBackend().devices()[0])
    with pytest.raises(InvalidArgument) as info:
        device.pipeline(SCALE_OFFSET, "\udc00", buffers=2, params=3)
    assert info.value.op == "pipeline"
    device.close()


class ThreeParams(MemoryDevice):
    params_limit_name = "the double's three params"

    def __init__(self, descriptor: object):
        self._open(descriptor, max_buffer_bytes=1 << 20, group_limits=(8, 8, 8), max_params=3)  # type: ignore[arg-type]


def test_pipeline_refuses_more_params_than_the_device_takes() -> None:
    device = ThreeParams(MemoryBackend().devices()[0])
    device.pipeline(SCALE_OFFSET, buffers=2, params=3).close()
    for params in (4, 1 << 70):
        with pytest.raises(InvalidArgument) as info:
            device.pipeline(SCALE_OFFSET, buffers=2, params=params)
        assert info.value.op == "pipeline" and info.value.detail == f"params={params} is over the double's three " \
            "params (3)"
    device.close()


def test_params_are_unbounded_where_the_device_sets_no_limit() -> None:
    device = MemoryDevice(MemoryBackend().devices()[0])
    with pytest.raises(InvalidArgument) as info:  # the double's own check: main takes 5 arguments
        device.pipeline(SCALE_OFFSET, buffers=2, params=1 << 20)
    assert "takes 5 arguments" in str(info.value)
    device.close()

"""hipDeviceProp_t translation rules, without a GPU."""

from __future__ import annotations

import types

import pytest

from ironaccel.types import CapabilityFlags, ComputeTier
from ironaccel_rocm.binding import format_version
from ironaccel_rocm.properties import capabilities, isa_of, text, tier


@pytest.mark.parametrize(
    "value,expected",
    [(b"gfx90a\0junk", "gfx90a"), ("MI250X\0", "MI250X"), ([103, 102, 120, 0, 49], "gfx"), (b"", "")],
)
def test_text(value, expected) -> None:
    assert text(value) == expected


def test_isa_of() -> None:
    assert isa_of("gfx90a:sramecc+:xnack-") == "gfx90a"
    assert isa_of("gfx1100") == "gfx1100"


@pytest.mark.parametrize(
    "isa,matrix,bf16,int8",
    [
        ("gfx90a", True, True, True),
        ("gfx942", True, True, True),
        ("gfx908", True, True, True),
        ("gfx906", False, False, True),
        ("gfx900", False, False, False),
        ("gfx803", False, False, False),
        ("gfx1030", False, False, True),
        ("gfx1100", True, True, True),
        ("gfx1201", True, True, True),
    ],
)
def test_isa_flags(isa: str, matrix: bool, bf16: bool, int8: bool) -> None:
    flags = capabilities(types.SimpleNamespace(), isa)
    assert (CapabilityFlags.MATRIX_UNITS in flags) is matrix
    assert (CapabilityFlags.BF16 in flags) is bf16
    assert (CapabilityFlags.INT8 in flags) is int8
    assert CapabilityFlags.FP16 in flags and CapabilityFlags.RUNTIME_COMPILE in flags
    assert CapabilityFlags.MANAGED_MEMORY not in flags  # not claimed without the property


def test_property_flags() -> None:
    props = types.SimpleNamespace(managedMemory=1, unifiedAddressing=0, asyncEngineCount=0,
                                  arch=types.SimpleNamespace(hasDoubles=0))
    flags = capabilities(props, "gfx90a")
    assert CapabilityFlags.MANAGED_MEMORY in flags
    assert CapabilityFlags.UNIFIED_ADDRESSING not in flags
    assert CapabilityFlags.ASYNC_COPY not in flags
    assert CapabilityFlags.FP64 not in flags


@pytest.mark.parametrize(
    "name,isa,integrated,expected",
    [
        ("AMD Instinct MI250X", "gfx90a", False, ComputeTier.DATACENTER),
        ("AMD Instinct MI300X", "gfx942", False, ComputeTier.DATACENTER),
        ("AMD Radeon PRO W7900", "gfx1100", False, ComputeTier.WORKSTATION),
        ("AMD Radeon RX 7900 XTX", "gfx1100", False, ComputeTier.CONSUMER),
        ("AMD Radeon Graphics", "gfx1035", True, ComputeTier.CONSUMER),
    ],
)
def test_tier(name: str, isa: str, integrated: bool, expected: ComputeTier) -> None:
    assert tier(name, isa, integrated) is expected


def test_format_version() -> None:
    assert format_version(50221153) == "5.2.21153"
    assert format_version(60342134) == "6.3.42134"

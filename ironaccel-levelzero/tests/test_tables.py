"""The ze_result_t table and the ctypes struct layouts, checked against the real header."""

from __future__ import annotations

import ctypes
import re
import subprocess

import pytest

from ironaccel_levelzero import api, structs
from ironaccel_levelzero.results import RESULT_NAMES, result_name


def test_result_names() -> None:
    assert result_name(0x78000001) == "ZE_RESULT_ERROR_UNINITIALIZED"
    assert result_name(0) == "ZE_RESULT_SUCCESS"
    assert result_name(0x70000003) == "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"
    assert result_name(0x7FF00099) == "ZE_RESULT_0x7FF00099"
    assert len(set(RESULT_NAMES.values())) == len(RESULT_NAMES)


def test_result_table_matches_the_header(ze_header) -> None:
    header = ze_header.read_text()
    body = header[header.index("typedef enum _ze_result_t"): header.index("} ze_result_t;")]
    declared = {
        name: int(value, 0)
        for name, value in re.findall(r"^\s*(ZE_RESULT_\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", body, re.M)
        if name != "ZE_RESULT_FORCE_UINT32"
    }
    assert len(declared) > 40
    assert {v: k for k, v in declared.items()} == RESULT_NAMES


MIRRORS = {
    "ze_driver_properties_t": structs.DriverProperties,
    "ze_device_properties_t": structs.DeviceProperties,
    "ze_device_compute_properties_t": structs.DeviceComputeProperties,
    "ze_device_module_properties_t": structs.DeviceModuleProperties,
    "ze_device_memory_properties_t": structs.DeviceMemoryProperties,
    "ze_command_queue_group_properties_t": structs.CommandQueueGroupProperties,
    "zel_component_version_t": structs.LoaderComponentVersion,
    "ze_context_desc_t": api.ContextDesc,
    "ze_command_queue_desc_t": api.CommandQueueDesc,
    "ze_command_list_desc_t": api.CommandListDesc,
    "ze_device_mem_alloc_desc_t": api.DeviceMemAllocDesc,
    "ze_host_mem_alloc_desc_t": api.HostMemAllocDesc,
    "ze_module_desc_t": api.ModuleDesc,
    "ze_kernel_desc_t": api.KernelDesc,
    "ze_kernel_properties_t": api.KernelProperties,
    "ze_fence_desc_t": api.FenceDesc,
    "ze_event_pool_desc_t": api.EventPoolDesc,
    "ze_event_desc_t": api.EventDesc,
    "ze_group_count_t": api.GroupCount,
    "ze_kernel_timestamp_result_t": api.KernelTimestampResult,
}


def test_struct_layouts_match_the_header(layout_exe) -> None:
    lines = subprocess.run([str(layout_exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    checked = 0
    for line in lines:
        c_name, field, value = line.split()
        mirror = MIRRORS[c_name]
        if field == "sizeof":
            assert ctypes.sizeof(mirror) == int(value), c_name
        else:
            assert getattr(mirror, field).offset == int(value), f"{c_name}.{field}"
        checked += 1
    assert checked >= 50


def test_new_sets_stype() -> None:
    assert structs.new(structs.DeviceProperties).stype == 0x3
    assert [s.stype for s in structs.new(structs.DeviceMemoryProperties, 3)] == [0x7] * 3
    assert structs.version_text(structs.make_version(1, 4)) == "1.4"


@pytest.mark.parametrize("code", [0x78000004, 0x78000017])
def test_invalid_argument_range(code: int) -> None:
    from ironaccel.errors import InvalidArgument
    from ironaccel_levelzero.loader import check

    with pytest.raises(InvalidArgument) as info:
        check(code, "zeDeviceGet")
    assert info.value.op == "zeDeviceGet" and info.value.code == code

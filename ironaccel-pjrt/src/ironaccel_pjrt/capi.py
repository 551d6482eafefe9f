"""The PJRT C API as ctypes structures, written from `xla/pjrt/c/pjrt_c_api.h`.

Layouts follow header API 0.81 (the oldest plugin we support; the header
ships in the `xla-cpu-pjrt` wheel); the `PJRT_Api` function table also lists
the slots appended up to 0.94.  The C API only ever appends: a newer plugin
has the same prefix, an older one a shorter table.  So every call is made
through `Api.function(name)`, which checks that the slot lies inside the
plugin's own `PJRT_Api.struct_size` before reading it, and every `*_Args`
struct is sent with the `struct_size` of the layout written here, which tells
the plugin how many fields we know.

Nothing here loads a library; importing this module is cheap.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_bool, c_char_p, c_float, c_int, c_int64, c_size_t, c_void_p
from typing import Any, ClassVar

__all__ = ["ERROR_CODES", "BUFFER_TYPES", "API_FUNCTIONS", "args_struct", "struct_size"]

#: PJRT_Error_Code values (abseil status codes).
ERROR_CODES = {
    0: "OK",
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}

#: PJRT_Buffer_Type enumerators, in header order (value = index).
BUFFER_TYPES = (
    "INVALID", "PRED", "S8", "S16", "S32", "S64", "U8", "U16", "U32", "U64", "F16", "F32", "F64", "BF16",
    "C64", "C128", "F8E5M2", "F8E4M3FN", "F8E4M3B11FNUZ", "F8E5M2FNUZ", "F8E4M3FNUZ", "S4", "U4", "TOKEN",
    "S2", "U2", "F8E4M3", "F8E3M4", "F8E8M0FNU", "F4E2M1FN",
)
BUFFER_TYPE = {name: value for value, name in enumerate(BUFFER_TYPES)}

# PJRT_NamedValue_Type
NAMED_STRING, NAMED_INT64, NAMED_INT64_LIST, NAMED_FLOAT, NAMED_BOOL = range(5)

# PJRT_HostBufferSemantics
HOST_IMMUTABLE_ONLY_DURING_CALL = 0
HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES = 1

# PJRT_Buffer_MemoryLayout_Type
LAYOUT_TILED = 0

_HEAD: list[Any] = [("struct_size", c_size_t), ("extension_start", c_void_p)]


class PjrtStruct(ctypes.Structure):
    """Base of every header struct here; `STRUCT_SIZE` is its PJRT_STRUCT_SIZE."""

    STRUCT_SIZE: ClassVar[int] = 0


def struct_size(cls: type[ctypes.Structure]) -> int:
    """PJRT_STRUCT_SIZE: offset of the last field plus its size (no tail padding)."""
    name, ctype = cls._fields_[-1][:2]
    return getattr(cls, name).offset + ctypes.sizeof(ctype)


_ARGS: dict[str, type[PjrtStruct]] = {}
#: Every struct defined here, by header name.
STRUCTS = _ARGS


def _define(name: str, fields: list[tuple[str, Any]]) -> type[PjrtStruct]:
    cls = type(name, (PjrtStruct,), {"_fields_": _HEAD + fields})
    return _register(name, cls)


def _register(name: str, cls: type[PjrtStruct]) -> type[PjrtStruct]:
    cls.STRUCT_SIZE = struct_size(cls)
    _ARGS[name] = cls
    return cls


def args_struct(name: str) -> type[PjrtStruct]:
    """The ctypes class of a header struct, e.g. ``args_struct("PJRT_Client_Create_Args")``."""
    return _ARGS[name]


# -- plain structs -------------------------------------------------------------

Version = _define("PJRT_Api_Version", [("major_version", c_int), ("minor_version", c_int)])
Version.__doc__ = "PJRT_Api_Version: the API version a plugin was built with."


class _NamedValueUnion(ctypes.Union):
    _fields_ = [
        ("string_value", c_void_p),
        ("int64_value", c_int64),
        ("int64_array_value", POINTER(c_int64)),
        ("float_value", c_float),
        ("bool_value", c_bool),
    ]


class NamedValue(PjrtStruct):
    """PJRT_NamedValue: a key and a string, int64, int64 list, float or bool."""

    _anonymous_ = ("value",)
    _fields_ = _HEAD + [
        ("name", c_void_p),
        ("name_size", c_size_t),
        ("type", c_int),
        ("value", _NamedValueUnion),
        ("value_size", c_size_t),
    ]


_register("PJRT_NamedValue", NamedValue)

Program = _define(
    "PJRT_Program",
    [("code", c_void_p), ("code_size", c_size_t), ("format", c_char_p), ("format_size", c_size_t)],
)

LayoutTiled = _define(
    "PJRT_Buffer_MemoryLayout_Tiled",
    [
        ("minor_to_major", POINTER(c_int64)),
        ("minor_to_major_size", c_size_t),
        ("tile_dims", POINTER(c_int64)),
        ("tile_dim_sizes", POINTER(c_size_t)),
        ("num_tiles", c_size_t),
    ],
)
LayoutStrides = _define(
    "PJRT_Buffer_MemoryLayout_Strides", [("byte_strides", POINTER(c_int64)), ("num_byte_strides", c_size_t)]
)


class _LayoutUnion(ctypes.Union):
    _fields_ = [("tiled", LayoutTiled), ("strides", LayoutStrides)]


class MemoryLayout(PjrtStruct):
    """PJRT_Buffer_MemoryLayout: tiled (minor_to_major + tiles) or strided."""

    _anonymous_ = ("u",)
    _fields_ = _HEAD + [("u", _LayoutUnion), ("type", c_int)]


_register("PJRT_Buffer_MemoryLayout", MemoryLayout)

ExecuteOptions = _define(
    "PJRT_ExecuteOptions",
    [
        ("send_callbacks", c_void_p),
        ("recv_callbacks", c_void_p),
        ("num_send_ops", c_size_t),
        ("num_recv_ops", c_size_t),
        ("launch_id", c_int),
        ("non_donatable_input_indices", POINTER(c_int64)),
        ("num_non_donatable_input_indices", c_size_t),
        ("context", c_void_p),
        ("call_location", c_char_p),
        ("num_tasks", c_size_t),
        ("task_ids", POINTER(c_int)),
        ("incarnation_ids", POINTER(c_int64)),
    ],
)

# -- *_Args structs -------------------------------------------------------------

_define("PJRT_Error_Destroy_Args", [("error", c_void_p)])
_define("PJRT_Error_Message_Args", [("error", c_void_p), ("message", c_void_p), ("message_size", c_size_t)])
_define("PJRT_Error_GetCode_Args", [("error", c_void_p), ("code", c_int)])
_define("PJRT_Plugin_Initialize_Args", [])
_define("PJRT_Plugin_Attributes_Args", [("attributes", c_void_p), ("num_attributes", c_size_t)])

_define("PJRT_Event_Destroy_Args", [("event", c_void_p)])
_define("PJRT_Event_IsReady_Args", [("event", c_void_p), ("is_ready", c_bool)])
_define("PJRT_Event_Await_Args", [("event", c_void_p)])

_define(
    "PJRT_Client_Create_Args",
    [
        ("create_options", c_void_p),
        ("num_options", c_size_t),
        ("kv_get_callback", c_void_p),
        ("kv_get_user_arg", c_void_p),
        ("kv_put_callback", c_void_p),
        ("kv_put_user_arg", c_void_p),
        ("client", c_void_p),
        ("kv_try_get_callback", c_void_p),
        ("kv_try_get_user_arg", c_void_p),
    ],
)
_define("PJRT_Client_Destroy_Args", [("client", c_void_p)])
_define("PJRT_Client_PlatformName_Args", [("client", c_void_p), ("platform_name", c_void_p),
                                          ("platform_name_size", c_size_t)])
_define("PJRT_Client_PlatformVersion_Args", [("client", c_void_p), ("platform_version", c_void_p),
                                             ("platform_version_size", c_size_t)])
_define("PJRT_Client_ProcessIndex_Args", [("client", c_void_p), ("process_index", c_int)])
_define("PJRT_Client_AddressableDevices_Args", [("client", c_void_p), ("addressable_devices", c_void_p),
                                                ("num_addressable_devices", c_size_t)])
_define("PJRT_Client_AddressableMemories_Args", [("client", c_void_p), ("addressable_memories", c_void_p),
                                                 ("num_addressable_memories", c_size_t)])
_define(
    "PJRT_Client_Compile_Args",
    [
        ("client", c_void_p),
        ("program", c_void_p),
        ("compile_options", c_void_p),
        ("compile_options_size", c_size_t),
        ("executable", c_void_p),
    ],
)
_define(
    "PJRT_Client_BufferFromHostBuffer_Args",
    [
        ("client", c_void_p),
        ("data", c_void_p),
        ("type", c_int),
        ("dims", POINTER(c_int64)),
        ("num_dims", c_size_t),
        ("byte_strides", POINTER(c_int64)),
        ("num_byte_strides", c_size_t),
        ("host_buffer_semantics", c_int),
        ("device", c_void_p),
        ("memory", c_void_p),
        ("device_layout", c_void_p),
        ("done_with_host_buffer", c_void_p),
        ("buffer", c_void_p),
    ],
)

_define("PJRT_DeviceDescription_Id_Args", [("device_description", c_void_p), ("id", c_int)])
_define("PJRT_DeviceDescription_ProcessIndex_Args", [("device_description", c_void_p), ("process_index", c_int)])
_define("PJRT_DeviceDescription_Attributes_Args", [("device_description", c_void_p), ("num_attributes", c_size_t),
                                                   ("attributes", c_void_p)])
_define("PJRT_DeviceDescription_Kind_Args", [("device_description", c_void_p), ("device_kind", c_void_p),
                                             ("device_kind_size", c_size_t)])
_define("PJRT_DeviceDescription_DebugString_Args", [("device_description", c_void_p), ("debug_string", c_void_p),
                                                    ("debug_string_size", c_size_t)])
_define("PJRT_DeviceDescription_ToString_Args", [("device_description", c_void_p), ("to_string", c_void_p),
                                                 ("to_string_size", c_size_t)])

_define("PJRT_Device_GetDescription_Args", [("device", c_void_p), ("device_description", c_void_p)])
_define("PJRT_Device_IsAddressable_Args", [("device", c_void_p), ("is_addressable", c_bool)])
_define("PJRT_Device_LocalHardwareId_Args", [("device", c_void_p), ("local_hardware_id", c_int)])
_define("PJRT_Device_AddressableMemories_Args", [("device", c_void_p), ("memories", c_void_p),
                                                 ("num_memories", c_size_t)])
_define("PJRT_Device_DefaultMemory_Args", [("device", c_void_p), ("memory", c_void_p)])
_MEMORY_STATS = ["bytes_in_use", "peak_bytes_in_use", "num_allocs", "largest_alloc_size", "bytes_limit",
                 "bytes_reserved", "peak_bytes_reserved", "bytes_reservable_limit", "largest_free_block_bytes",
                 "pool_bytes", "peak_pool_bytes"]
_define(
    "PJRT_Device_MemoryStats_Args",
    [("device", c_void_p), ("bytes_in_use", c_int64)]
    + [f for name in _MEMORY_STATS[1:] for f in ((name, c_int64), (f"{name}_is_set", c_bool))],
)
MEMORY_STATS = tuple(_MEMORY_STATS)

_define("PJRT_Memory_Id_Args", [("memory", c_void_p), ("id", c_int)])
_define("PJRT_Memory_Kind_Args", [("memory", c_void_p), ("kind", c_void_p), ("kind_size", c_size_t)])
_define("PJRT_Memory_ToString_Args", [("memory", c_void_p), ("to_string", c_void_p), ("to_string_size", c_size_t)])

_define("PJRT_Executable_Destroy_Args", [("executable", c_void_p)])
_define("PJRT_Executable_Name_Args", [("executable", c_void_p), ("executable_name", c_void_p),
                                      ("executable_name_size", c_size_t)])
_define("PJRT_Executable_NumOutputs_Args", [("executable", c_void_p), ("num_outputs", c_size_t)])
_define("PJRT_Executable_NumReplicas_Args", [("executable", c_void_p), ("num_replicas", c_size_t)])
_define("PJRT_Executable_NumPartitions_Args", [("executable", c_void_p), ("num_partitions", c_size_t)])
_define("PJRT_Executable_OutputElementTypes_Args", [("executable", c_void_p), ("output_types", POINTER(c_int)),
                                                    ("num_output_types", c_size_t)])
_define("PJRT_Executable_OutputDimensions_Args", [("executable", c_void_p), ("num_outputs", c_size_t),
                                                  ("dims", POINTER(c_int64)), ("dim_sizes", POINTER(c_size_t))])
_define("PJRT_LoadedExecutable_Destroy_Args", [("executable", c_void_p)])
_define("PJRT_LoadedExecutable_GetExecutable_Args", [("loaded_executable", c_void_p), ("executable", c_void_p)])
_define("PJRT_LoadedExecutable_AddressableDevices_Args", [("executable", c_void_p), ("addressable_devices", c_void_p),
                                                          ("num_addressable_devices", c_size_t)])
_define(
    "PJRT_LoadedExecutable_Execute_Args",
    [
        ("executable", c_void_p),
        ("options", c_void_p),
        ("argument_lists", c_void_p),
        ("num_devices", c_size_t),
        ("num_args", c_size_t),
        ("output_lists", c_void_p),
        ("device_complete_events", c_void_p),
        ("execute_device", c_void_p),
    ],
)

_define("PJRT_Buffer_Destroy_Args", [("buffer", c_void_p)])
_define("PJRT_Buffer_Delete_Args", [("buffer", c_void_p)])
_define("PJRT_Buffer_IsDeleted_Args", [("buffer", c_void_p), ("is_deleted", c_bool)])
_define("PJRT_Buffer_ElementType_Args", [("buffer", c_void_p), ("type", c_int)])
_define("PJRT_Buffer_Dimensions_Args", [("buffer", c_void_p), ("dims", POINTER(c_int64)), ("num_dims", c_size_t)])
_define("PJRT_Buffer_Device_Args", [("buffer", c_void_p), ("device", c_void_p)])
_define("PJRT_Buffer_Memory_Args", [("buffer", c_void_p), ("memory", c_void_p)])
_define("PJRT_Buffer_ReadyEvent_Args", [("buffer", c_void_p), ("event", c_void_p)])
_define("PJRT_Buffer_OnDeviceSizeInBytes_Args", [("buffer", c_void_p), ("on_device_size_in_bytes", c_size_t)])
_define(
    "PJRT_Buffer_ToHostBuffer_Args",
    [("src", c_void_p), ("host_layout", c_void_p), ("dst", c_void_p), ("dst_size", c_size_t), ("event", c_void_p)],
)
_define("PJRT_Buffer_UnsafePointer_Args", [("buffer", c_void_p), ("buffer_pointer", c_size_t)])
_define("PJRT_Buffer_CopyToDevice_Args", [("buffer", c_void_p), ("dst_device", c_void_p), ("dst_buffer", c_void_p)])

# -- the function table -----------------------------------------------------------

#: Slots of PJRT_Api after `pjrt_api_version`, in header order.  0.81 ends at
#: PJRT_LoadedExecutable_GetDeviceAssignment; later names were appended by 0.82-0.94.
API_FUNCTIONS = (
    "PJRT_Error_Destroy", "PJRT_Error_Message", "PJRT_Error_GetCode",
    "PJRT_Plugin_Initialize", "PJRT_Plugin_Attributes",
    "PJRT_Event_Destroy", "PJRT_Event_IsReady", "PJRT_Event_Error", "PJRT_Event_Await", "PJRT_Event_OnReady",
    "PJRT_Client_Create", "PJRT_Client_Destroy", "PJRT_Client_PlatformName", "PJRT_Client_ProcessIndex",
    "PJRT_Client_PlatformVersion", "PJRT_Client_Devices", "PJRT_Client_AddressableDevices",
    "PJRT_Client_LookupDevice", "PJRT_Client_LookupAddressableDevice", "PJRT_Client_AddressableMemories",
    "PJRT_Client_Compile", "PJRT_Client_DefaultDeviceAssignment", "PJRT_Client_BufferFromHostBuffer",
    "PJRT_DeviceDescription_Id", "PJRT_DeviceDescription_ProcessIndex", "PJRT_DeviceDescription_Attributes",
    "PJRT_DeviceDescription_Kind", "PJRT_DeviceDescription_DebugString", "PJRT_DeviceDescription_ToString",
    "PJRT_Device_GetDescription", "PJRT_Device_IsAddressable", "PJRT_Device_LocalHardwareId",
    "PJRT_Device_AddressableMemories", "PJRT_Device_DefaultMemory", "PJRT_Device_MemoryStats",
    "PJRT_Memory_Id", "PJRT_Memory_Kind", "PJRT_Memory_DebugString", "PJRT_Memory_ToString",
    "PJRT_Memory_AddressableByDevices",
    "PJRT_Executable_Destroy", "PJRT_Executable_Name", "PJRT_Executable_NumReplicas",
    "PJRT_Executable_NumPartitions", "PJRT_Executable_NumOutputs", "PJRT_Executable_SizeOfGeneratedCodeInBytes",
    "PJRT_Executable_GetCostAnalysis", "PJRT_Executable_OutputMemoryKinds", "PJRT_Executable_OptimizedProgram",
    "PJRT_Executable_Serialize",
    "PJRT_LoadedExecutable_Destroy", "PJRT_LoadedExecutable_GetExecutable", "PJRT_LoadedExecutable_AddressableDevices",
    "PJRT_LoadedExecutable_Delete", "PJRT_LoadedExecutable_IsDeleted", "PJRT_LoadedExecutable_Execute",
    "PJRT_Executable_DeserializeAndLoad", "PJRT_LoadedExecutable_Fingerprint",
    "PJRT_Buffer_Destroy", "PJRT_Buffer_ElementType", "PJRT_Buffer_Dimensions", "PJRT_Buffer_UnpaddedDimensions",
    "PJRT_Buffer_DynamicDimensionIndices", "PJRT_Buffer_GetMemoryLayout", "PJRT_Buffer_OnDeviceSizeInBytes",
    "PJRT_Buffer_Device", "PJRT_Buffer_Memory", "PJRT_Buffer_Delete", "PJRT_Buffer_IsDeleted",
    "PJRT_Buffer_CopyToDevice", "PJRT_Buffer_ToHostBuffer", "PJRT_Buffer_IsOnCpu", "PJRT_Buffer_ReadyEvent",
    "PJRT_Buffer_UnsafePointer", "PJRT_Buffer_IncreaseExternalReferenceCount",
    "PJRT_Buffer_DecreaseExternalReferenceCount", "PJRT_Buffer_OpaqueDeviceMemoryDataPointer",
    "PJRT_CopyToDeviceStream_Destroy", "PJRT_CopyToDeviceStream_AddChunk", "PJRT_CopyToDeviceStream_TotalBytes",
    "PJRT_CopyToDeviceStream_GranuleSize", "PJRT_CopyToDeviceStream_CurrentBytes",
    "PJRT_TopologyDescription_Create", "PJRT_TopologyDescription_Destroy", "PJRT_TopologyDescription_PlatformName",
    "PJRT_TopologyDescription_PlatformVersion", "PJRT_TopologyDescription_GetDeviceDescriptions",
    "PJRT_TopologyDescription_Serialize", "PJRT_TopologyDescription_Attributes",
    "PJRT_Compile",
    "PJRT_Executable_OutputElementTypes", "PJRT_Executable_OutputDimensions",
    "PJRT_Buffer_CopyToMemory",
    "PJRT_Client_CreateViewOfDeviceBuffer",
    "PJRT_Executable_Fingerprint",
    "PJRT_Client_TopologyDescription",
    "PJRT_Executable_GetCompiledMemoryStats",
    "PJRT_Memory_Kind_Id",
    "PJRT_ExecuteContext_Create", "PJRT_ExecuteContext_Destroy", "PJRT_Buffer_CopyRawToHost",
    "PJRT_AsyncHostToDeviceTransferManager_Destroy", "PJRT_AsyncHostToDeviceTransferManager_TransferData",
    "PJRT_Client_CreateBuffersForAsyncHostToDevice", "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer",
    "PJRT_AsyncHostToDeviceTransferManager_Device", "PJRT_AsyncHostToDeviceTransferManager_BufferCount",
    "PJRT_AsyncHostToDeviceTransferManager_BufferSize", "PJRT_AsyncHostToDeviceTransferManager_SetBufferError",
    "PJRT_AsyncHostToDeviceTransferManager_AddMetadata", "PJRT_Client_DmaMap", "PJRT_Client_DmaUnmap",
    "PJRT_Client_CreateUninitializedBuffer", "PJRT_Client_UpdateGlobalProcessInfo",
    "PJRT_TopologyDescription_Deserialize", "PJRT_Client_CreateAliasBuffer", "PJRT_Client_FulfillAliasBuffer",
    "PJRT_LoadedExecutable_GetDeviceAssignment",
    # appended after 0.81
    "PJRT_Client_CreateErrorBuffer", "PJRT_AsyncHostToDeviceTransferManager_TransferLiteral",
    "PJRT_Buffer_CopyRawToHostFuture", "PJRT_Device_PoisonExecution", "PJRT_Device_CreateAsyncTrackingEvent",
    "PJRT_AsyncTrackingEvent_Destroy", "PJRT_Executable_GetCompileOptions", "PJRT_Buffer_DonateWithControlDependency",
    "PJRT_Event_Create", "PJRT_Event_Set", "PJRT_Device_GetAttributes",
)

#: Byte offset of the first function pointer: struct_size, extension_start, PJRT_Api_Version.
FIRST_SLOT_OFFSET = 2 * ctypes.sizeof(c_void_p) + ctypes.sizeof(Version)
SLOT_OFFSET = {name: FIRST_SLOT_OFFSET + i * ctypes.sizeof(c_void_p) for i, name in enumerate(API_FUNCTIONS)}

#: Every PJRT function takes one `*_Args*` and returns a `PJRT_Error*` (the two
#: error accessors return void; their result is ignored).
FUNCTION = ctypes.CFUNCTYPE(c_void_p, c_void_p)

"""`CompileOptions`: the serialized `xla.CompileOptionsProto` that `PJRT_Client_Compile` takes.

The proto is written by hand (a few varints and length-delimited fields) so
that no protobuf runtime is needed.  Field numbers are those of
``xla/pjrt/proto/compile_options.proto`` and ``xla/xla_data.proto``::

    CompileOptionsProto { executable_build_options = 3; compile_portable_executable = 4;
                          env_option_overrides = 7 (map<string, OptionOverrideProto>) }
    ExecutableBuildOptionsProto { num_replicas = 4; num_partitions = 5; use_spmd_partitioning = 6;
                                  device_assignment = 9 }
    DeviceAssignmentProto { replica_count = 1; computation_count = 2;
                            computation_devices = 3 { replica_device_ids = 1 (repeated int64) } }
    OptionOverrideProto { string_field = 1; bool_field = 2; int_field = 3; double_field = 4 }

`CompileOptions()` serializes to the minimal ``1a 04 20 01 28 01``.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from ironaccel.errors import InvalidArgument

from .api import BACKEND

__all__ = ["CompileOptions"]

OverrideValue: TypeAlias = "str | bool | int | float"


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 two's complement, as protobuf encodes negative int64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _override(value: OverrideValue) -> bytes:
    if isinstance(value, bool):
        return _int_field(2, int(value))
    if isinstance(value, int):
        return _int_field(3, value)
    if isinstance(value, float):
        return _varint((4 << 3) | 1) + struct.pack("<d", value)
    return _bytes_field(1, str(value).encode())


_INT64 = 1 << 63


def _device_id(value: object) -> int:
    """A PJRT device id: an int (not a bool) in the int64 range, else InvalidArgument."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgument(BACKEND, "PJRT_Client_Compile", detail=f"device ids are ints, got {value!r}") from None
    if not -_INT64 <= number < _INT64:
        raise InvalidArgument(BACKEND, "PJRT_Client_Compile", detail=f"device id {number} does not fit int64")
    return number


def _rows(assignment: object) -> tuple[tuple[int, ...], ...]:
    """`device_assignment` as a tuple of tuples of device ids, else InvalidArgument."""
    try:
        return tuple(tuple(_device_id(d) for d in row) for row in assignment)  # type: ignore[attr-defined]
    except TypeError:  # not a sequence of sequences
        raise InvalidArgument(BACKEND, "PJRT_Client_Compile", detail="device_assignment must be rows (one per "
                              f"replica) of device ids, got {assignment!r}") from None


@dataclass(frozen=True)
class CompileOptions:
    """What to compile for: replicas x partitions, optionally pinned to devices.

    `device_assignment[replica][partition]` holds PJRT device ids (the `id` in
    a device's extras); None lets the client choose its default assignment.
    `portable=True` builds an executable that can run on any one device.
    `env_overrides` sets XLA options by name (``{"xla_cpu_enable_fast_math": False}``).
    Instances are hashable: they key the executable cache.
    """

    num_replicas: int = 1
    num_partitions: int = 1
    device_assignment: tuple[tuple[int, ...], ...] | None = None
    portable: bool = False
    use_spmd_partitioning: bool = False
    env_overrides: tuple[tuple[str, OverrideValue], ...] = field(default=())

    @classmethod
    def for_devices(cls, device_ids: Sequence[int], **kwargs: object) -> CompileOptions:
        """One replica per device, in the order given."""
        try:
            ids = tuple(_device_id(d) for d in device_ids)
        except TypeError:  # not iterable
            raise InvalidArgument(BACKEND, "PJRT_Client_Compile", detail=f"device_ids must be a sequence of "
                                  f"device ids, got {device_ids!r}") from None
        return cls(num_replicas=len(ids), device_assignment=tuple((d,) for d in ids), **kwargs)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        op = "PJRT_Client_Compile"
        for name in ("num_replicas", "num_partitions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < _INT64:
                raise InvalidArgument(BACKEND, op, detail=f"{name} must be a positive int64, got {value!r}")
        if isinstance(self.env_overrides, Mapping):
            object.__setattr__(self, "env_overrides", tuple(sorted(self.env_overrides.items())))
        if self.device_assignment is not None:
            rows = _rows(self.device_assignment)
            object.__setattr__(self, "device_assignment", rows)
            if len(rows) != self.num_replicas or any(len(r) != self.num_partitions for r in rows):
                raise InvalidArgument(BACKEND, op, detail=(
                    f"device_assignment must be {self.num_replicas} replicas x {self.num_partitions} partitions, "
                    f"got {[len(r) for r in rows]}"))
            flat = [d for r in rows for d in r]
            if len(set(flat)) != len(flat):
                raise InvalidArgument(BACKEND, op, detail=f"device_assignment repeats a device: {rows}")
        if self.device_assignment is not None and self.portable:
            raise InvalidArgument(BACKEND, op, detail="a portable executable takes no device_assignment")

    @property
    def num_devices(self) -> int:
        """Devices one execution spans: replicas times partitions."""
        return self.num_replicas * self.num_partitions

    def serialize(self) -> bytes:
        """The CompileOptionsProto bytes."""
        build = _int_field(4, self.num_replicas) + _int_field(5, self.num_partitions)
        if self.use_spmd_partitioning:
            build += _int_field(6, 1)
        if self.device_assignment is not None:
            assignment = _int_field(1, self.num_replicas) + _int_field(2, self.num_partitions)
            for partition in range(self.num_partitions):
                ids = b"".join(_varint(row[partition]) for row in self.device_assignment)
                assignment += _bytes_field(3, _bytes_field(1, ids))  # packed repeated int64
            build += _bytes_field(9, assignment)
        out = _bytes_field(3, build)
        if self.portable:
            out += _int_field(4, 1)
        for key, value in self.env_overrides:
            out += _bytes_field(7, _bytes_field(1, key.encode()) + _bytes_field(2, _override(value)))
        return out

"""What an AMDGPU code object says about its kernels: each kernel's explicit arguments (offset, size, kind).

hipRTC's code objects (v3+) carry an ELF note "AMDGPU" of type NT_AMDGPU_METADATA whose payload is MessagePack
(``amdhsa.kernels``: ``.name``, ``.args`` with ``.offset``, ``.size``, ``.value_kind``).  This is HIP's
counterpart of cuFuncGetParamInfo: the launch packs arguments against it and refuses a wrong count or size.
Arguments whose kind starts with ``hidden_`` are the runtime's, not the caller's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

NT_AMDGPU_METADATA = 32


@dataclass(frozen=True)
class KernelArg:
    offset: int
    size: int
    kind: str  # "global_buffer", "by_value", ...
    name: str = ""

    @property
    def pointer(self) -> bool:
        return self.kind in ("global_buffer", "dynamic_shared_pointer")


def kernel_args(image: bytes) -> dict[str, tuple[KernelArg, ...]]:
    """Kernel name -> its explicit arguments, from the code object's metadata note ({} where it has none)."""
    out: dict[str, tuple[KernelArg, ...]] = {}
    for payload in _notes(image):
        try:
            meta = _Reader(payload).read()
        except (IndexError, ValueError, struct.error, UnicodeDecodeError):
            continue
        if not isinstance(meta, dict):
            continue
        for kernel in meta.get("amdhsa.kernels", ()) or ():
            if not isinstance(kernel, dict) or not isinstance(kernel.get(".name"), str):
                continue
            args = [KernelArg(int(a.get(".offset", 0)), int(a.get(".size", 0)), str(a.get(".value_kind", "")),
                              str(a.get(".name", ""))) for a in kernel.get(".args", ()) if isinstance(a, dict)]
            explicit = tuple(a for a in args if not a.kind.startswith("hidden_"))
            out[kernel[".name"]] = explicit
            symbol = kernel.get(".symbol")
            if isinstance(symbol, str):
                out.setdefault(symbol.removesuffix(".kd"), explicit)
    return out


def _notes(image: bytes) -> list[bytes]:
    """The descriptors of AMDGPU metadata notes in the ELF's note sections."""
    if image[:4] != b"\x7fELF" or len(image) < 64 or image[4] != 2:
        return []
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    found = []
    for i in range(shnum):
        base = shoff + i * shentsize
        if base + 64 > len(image):
            break
        sh_type, = struct.unpack_from("<I", image, base + 4)
        offset, size = struct.unpack_from("<QQ", image, base + 0x18)
        if sh_type != 7 or offset + size > len(image):  # SHT_NOTE
            continue
        pos, end = offset, offset + size
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", image, pos)
            name = image[pos + 12: pos + 12 + namesz].rstrip(b"\0")
            desc = pos + 12 + (namesz + 3) // 4 * 4
            if name == b"AMDGPU" and ntype == NT_AMDGPU_METADATA:
                found.append(bytes(image[desc: desc + descsz]))
            pos = desc + (descsz + 3) // 4 * 4
    return found


class _Reader:
    """The MessagePack subset the metadata uses (maps, arrays, strings, ints, bools, floats)."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise IndexError("truncated MessagePack")
        chunk = self.data[self.pos: self.pos + n]
        self.pos += n
        return chunk

    def _int(self, fmt: str) -> int:
        return int(struct.unpack(">" + fmt, self._take(struct.calcsize(fmt)))[0])

    def read(self) -> Any:
        b = self._take(1)[0]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0x80 <= b <= 0x8F:
            return self._map(b & 0x0F)
        if 0x90 <= b <= 0x9F:
            return [self.read() for _ in range(b & 0x0F)]
        if 0xA0 <= b <= 0xBF:
            return self._take(b & 0x1F).decode()
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if b in simple:
            return simple[b]
        ints = {0xCC: "B", 0xCD: "H", 0xCE: "I", 0xCF: "Q", 0xD0: "b", 0xD1: "h", 0xD2: "i", 0xD3: "q"}
        if b in ints:
            return self._int(ints[b])
        if b in (0xCA, 0xCB):
            return struct.unpack(">f" if b == 0xCA else ">d", self._take(4 if b == 0xCA else 8))[0]
        if b in (0xD9, 0xDA, 0xDB):
            return self._take(self._int({0xD9: "B", 0xDA: "H", 0xDB: "I"}[b])).decode()
        if b in (0xC4, 0xC5, 0xC6):
            return self._take(self._int({0xC4: "B", 0xC5: "H", 0xC6: "I"}[b]))
        if b in (0xDC, 0xDD):
            return [self.read() for _ in range(self._int("H" if b == 0xDC else "I"))]
        if b in (0xDE, 0xDF):
            return self._map(self._int("H" if b == 0xDE else "I"))
        raise ValueError(f"unsupported MessagePack byte {b:#x}")

    def _map(self, n: int) -> dict[Any, Any]:
        out = {}
        for _ in range(n):
            key = self.read()
            out[key] = self.read()
        return out

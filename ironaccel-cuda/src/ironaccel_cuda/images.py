"""Device-code images checked against their own headers before any driver or linker sees them.

The driver trusts the bytes it is given: a CUBIN cut short or with a garbled
header makes `cuModuleLoadData` read past the buffer and crash the process.
`check_image(data, op)` says what an image is ("cubin", "fatbin", "ptx",
"ltoir") after checking it: an ELF's header, program and section tables,
symbol and string tables and every section's extent against the buffer; a
fatbin's header and each entry (and each uncompressed ELF inside) against the
size the header declares; PTX as UTF-8 text with a `.version` and a `.target` and no
NUL before its end.  Anything else is `InvalidArgument`.  A check of structure,
not a proof: code that is well formed but wrong is the driver's to refuse.
"""

from __future__ import annotations

import struct

from .errors import invalid

__all__ = ["check_image", "cubin_sm", "ELF_MAGIC", "FATBIN_MAGIC", "LTOIR_MAGIC"]

ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = b"\x50\xed\x55\xba"
LTOIR_MAGIC = b"\xedCN\x7f"
EM_CUDA = 190
_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SEGMENT = struct.Struct("<IIQQQQQQ")
_FATBIN_HEADER = struct.Struct("<IHHQ")
_FATBIN_ENTRY = struct.Struct("<HHIQ")
_SHT_NOBITS = 8
_SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_REL, _SHT_DYNSYM = 2, 3, 4, 9, 11
_FATBIN_COMPRESSED = 0xA000  # entry flags of a compressed payload (LZ4, zstd): not checked as an ELF


def check_image(data: bytes, op: str) -> str:
    """The kind of device-code image `data` is, after checking it is sound; InvalidArgument otherwise."""
    if not data:
        raise invalid(op, "the image is empty")
    head = data[:4]
    if head == ELF_MAGIC:
        _check_elf(data, op, "CUBIN")
        return "cubin"
    if head == FATBIN_MAGIC:
        _check_fatbin(data, op)
        return "fatbin"
    if head == LTOIR_MAGIC:
        return "ltoir"
    _check_ptx(data, op)
    return "ptx"


def cubin_sm(data: bytes) -> int | None:
    """The SM number a CUBIN was made for (90 for sm_90), from its ELF flags; None if unreadable."""
    if len(data) < _ELF_HEADER.size or data[:4] != ELF_MAGIC:
        return None
    flags = struct.unpack_from("<I", data, 48)[0]
    return (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF  # the layout of e_flags changed with ABI 8


def _bad(op: str, what: str, detail: str) -> Exception:
    return invalid(op, f"not a sound {what} image: {detail}")


def _check_elf(data: bytes | memoryview, op: str, what: str) -> None:
    size = len(data)
    if size < _ELF_HEADER.size:
        raise _bad(op, what, f"{size} bytes is shorter than an ELF header")
    (ident, _type, machine, _version, _entry, phoff, shoff, _flags, ehsize, phentsize, phnum, shentsize, shnum,
     shstrndx) = _ELF_HEADER.unpack_from(data)
    if ident[4] != 2 or ident[5] != 1:
        raise _bad(op, what, "not a 64-bit little-endian ELF")
    if machine != EM_CUDA:
        raise _bad(op, what, f"ELF machine {machine} is not CUDA ({EM_CUDA})")
    if ehsize != _ELF_HEADER.size:
        raise _bad(op, what, f"ELF header size {ehsize}")
    if phnum:
        if phentsize != _SEGMENT.size or phoff + phnum * phentsize > size:
            raise _bad(op, what, f"the program header table (offset {phoff}, {phnum} entries) lies outside the "
                                 f"{size}-byte image")
        for i in range(phnum):
            _type, _f, offset, _va, _pa, filesz, _memsz, _align = _SEGMENT.unpack_from(data, phoff + i * phentsize)
            if offset + filesz > size:
                raise _bad(op, what, f"segment {i} (offset {offset}, {filesz} bytes) ends past the image "
                                     f"({size} bytes): truncated?")
    if not shnum:
        raise _bad(op, what, "no section table")
    if shentsize != _SECTION.size or shoff + shnum * shentsize > size:
        raise _bad(op, what, f"the section table (offset {shoff}, {shnum} entries) lies outside the {size}-byte "
                             f"image: truncated?")
    if shstrndx >= shnum:
        raise _bad(op, what, f"section-name table index {shstrndx} of {shnum} sections")
    sections = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    for i, (_name, kind, _flags, _addr, offset, length, link, info, _align, entsize) in enumerate(sections):
        if kind != _SHT_NOBITS and offset + length > size:
            raise _bad(op, what, f"section {i} (offset {offset}, {length} bytes) ends past the image ({size} "
                                 f"bytes): truncated?")
        if kind == _SHT_STRTAB and length and data[offset + length - 1] != 0:
            raise _bad(op, what, f"string table {i} does not end with NUL")
        if kind in (_SHT_SYMTAB, _SHT_DYNSYM):
            if entsize != 24 or length % 24 or link >= shnum or sections[link][1] != _SHT_STRTAB:
                raise _bad(op, what, f"symbol table {i} is malformed")
            names = sections[link][5]
            for s in range(length // 24):
                (st_name,) = struct.unpack_from("<I", data, offset + s * 24)
                if st_name >= max(names, 1):
                    raise _bad(op, what, f"symbol {s} of table {i} names string {st_name} past its table")
        if kind in (_SHT_REL, _SHT_RELA):
            want = 16 if kind == _SHT_REL else 24
            if entsize != want or length % want or link >= shnum or info >= shnum:
                raise _bad(op, what, f"relocation section {i} is malformed")
    names = sections[shstrndx]
    if names[1] != _SHT_STRTAB:
        raise _bad(op, what, "the section-name table is not a string table")
    for i, section in enumerate(sections):
        if section[0] >= max(names[5], 1):
            raise _bad(op, what, f"section {i} names string {section[0]} past the section-name table")


def _check_fatbin(data: bytes, op: str) -> None:
    size = len(data)
    if size < _FATBIN_HEADER.size:
        raise _bad(op, "fatbin", f"{size} bytes is shorter than a fatbin header")
    _magic, version, header_size, fat_size = _FATBIN_HEADER.unpack_from(data)
    if version != 1 or header_size != _FATBIN_HEADER.size:
        raise _bad(op, "fatbin", f"unknown fatbin header (version {version}, size {header_size})")
    end = header_size + fat_size
    if end > size:
        raise _bad(op, "fatbin", f"the header declares {fat_size} bytes of entries but only {size - header_size} "
                                 f"follow: truncated?")
    view = memoryview(data)
    offset, count = header_size, 0
    while offset < end:
        if offset + 64 > end:
            raise _bad(op, "fatbin", f"entry {count} at offset {offset} is cut short")
        kind, _version, entry_header, payload = _FATBIN_ENTRY.unpack_from(data, offset)
        if kind == 0 or entry_header < 64 or entry_header % 8 or offset + entry_header + payload > end:
            raise _bad(op, "fatbin", f"entry {count} at offset {offset} (header {entry_header}, payload {payload} "
                                     f"bytes) does not fit the {fat_size} declared bytes")
        flags = struct.unpack_from("<Q", data, offset + 40)[0] if entry_header >= 48 else 0
        body = view[offset + entry_header:offset + entry_header + payload]
        if kind == 2 and not flags & _FATBIN_COMPRESSED and bytes(body[:4]) == ELF_MAGIC:
            _check_elf(body, op, f"CUBIN (fatbin entry {count})")
        offset += entry_header + payload
        count += 1
    if count == 0:
        raise _bad(op, "fatbin", "no entries")


def _check_ptx(data: bytes, op: str) -> None:
    text = data[:-1] if data.endswith(b"\0") else data
    if b"\0" in text:
        raise invalid(op, f"not a CUBIN (ELF), fatbin or PTX image: a NUL byte at offset {text.index(0)} would end "
                          f"PTX text there")
    try:
        decoded = text.decode()
    except UnicodeDecodeError as exc:
        raise invalid(op, f"not a CUBIN (ELF), fatbin or PTX image: byte {exc.start} is not UTF-8 text "
                          f"(first bytes {bytes(data[:8])!r})") from None
    if ".version" not in decoded or ".target" not in decoded:
        raise invalid(op, "not a CUBIN (ELF), fatbin or PTX image: no .version or .target directive")

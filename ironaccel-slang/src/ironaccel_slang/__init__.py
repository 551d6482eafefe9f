"""Slang kernels on every ironaccel ComputeDevice: one source, compiled per device, bound from its reflection.

::

    from ironaccel_slang import Slang

    SAXPY = Slang('''
        struct Params { float a; uint n; };
        [shader("compute")] [numthreads(64, 1, 1)]
        void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y,
                   uniform StructuredBuffer<float> x, uniform Params p)
        { if (tid.x < p.n) y[tid.x] = p.a * x[tid.x] + y[tid.x]; }
    ''')
    pipeline = device.pipeline(SAXPY, "saxpy", buffers=2)       # any of vulkan, webgpu, opengl, cuda
    device.dispatch(pipeline, [y, x], groups, {"p": {"a": 2.0, "n": n}})

`Slang(source)` is a source object (`ironaccel.compute.sources`): the device's
`pipeline()` hands it the device, and it compiles the entry point with `slangc`
for that device -- SPIR-V (Vulkan), WGSL (WebGPU), GLSL (OpenGL), CUDA C++
(CUDA, then NVRTC) -- and says from slangc's reflection what the pipeline binds:
buffers in the entry point's order with their names, element types and access,
and the params block with the source's names and the target's offsets.  Metal
(MSL) text comes from `Slang.compile(target="metal")`.  The kernel's workgroup
size is its `[numthreads]`.

The kernel contract (what makes one source bind the same everywhere): every
buffer (`RWStructuredBuffer<T>`, `StructuredBuffer<T>`, `ByteAddressBuffer`)
and every value is a `uniform` parameter of the entry point; the values form
the params block, passed by name (`{"p": {"a": 2.0, "n": n}}`, a numpy record,
a dataclass) or in order.  Specialization: `extern static const` declarations
are Slang link-time constants, set per pipeline with `constants={"NAME": v}`
(each set is a compile of its own; their defaults apply otherwise), and a
generic entry point's type parameters are bound with `Slang.specialized`.

What a kernel needs of the device (16-bit floats, subgroup operations, a GL
extension) is read from the compiled code (`Compiled.needs`) and checked
against the device's capabilities at `pipeline()`: `Unsupported` naming it, not
a driver's compile log.  groupshared memory, barriers, `Atomic<T>` buffers,
2-D/3-D dispatch, `half` and wave ops bind on every target (OpenGL gets core
GLSL barriers; CUDA gets a kernel using `half` as a CUBIN built with the CUDA
headers, which the device's own C++ compile does not have).

Why a wrapper object rather than a `language=` argument: the language belongs
to the code, not to the call, so the source travels as one value (to batches,
caches, helpers) and every backend's `pipeline()` -- CUDA's included -- takes it
unchanged, without the kit knowing Slang.
"""

from __future__ import annotations

import array
import glob
import math
import os
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ironaccel import CapabilityFlags, DType
from ironaccel.compute import ConstantInfo, Interface, ParamBlock, Translation, source_text
from ironaccel.compute.params import wgsl_params
from ironaccel.errors import CompileError, InvalidArgument, NotAvailable, Unsupported

from .compiler import CACHE, ENV_SLANGC, INSTALL, Output, find_slangc, run_slangc
from .reflect import Kernel, leaves, read

__all__ = ["Slang", "Compiled", "TARGETS", "needs", "cuda_include", "find_slangc", "ENV_SLANGC", "INSTALL", "CACHE",
           "__version__"]

__version__ = "0.2.0"

#: The slangc target for each backend; "metal" is compiled for its text only (no device here runs it).
TARGETS = {"vulkan": "spirv", "webgpu": "wgsl", "opengl": "glsl", "cuda": "cuda", "metal": "metal"}

#: slangc options per target, and why.
#: spirv: -O0 (the slangtorch wheel has no spirv-opt, which -O1 and up run), -g0 (lavapipe's SPIR-V parser
#: rejects Slang's debug instructions), SPIR-V 1.3 (Vulkan 1.1), the entry point keeps its name.
#: glsl: GLSL 4.50, as llvmpipe and every GL 4.5 driver take it.  Line directives are left out everywhere.
_OPTIONS = {
    "spirv": ("-O0", "-g0", "-profile", "spirv_1_3", "-fvk-use-entrypoint-name"),
    "wgsl": ("-g0", "-line-directive-mode", "none"),
    "glsl": ("-g0", "-profile", "glsl_450", "-line-directive-mode", "none"),
    "cuda": ("-g0", "-line-directive-mode", "none"),
    "metal": ("-g0", "-line-directive-mode", "none"),
}

_MEMO_ENTRIES = 64
_TYPE_NAME = re.compile(r"[A-Za-z_][\w<>, ]*")
_CONSTANT = re.compile(r"\bextern\s+static\s+const\s+(\w+)\s+(\w+)\s*(?:=\s*([^;]+?))?\s*;")
_CONSTANT_TYPES = {"int": DType.INT32, "uint": DType.UINT32, "int32_t": DType.INT32, "uint32_t": DType.UINT32,
                   "int64_t": DType.INT64, "uint64_t": DType.UINT64, "float": DType.FLOAT32,
                   "double": DType.FLOAT64, "bool": DType.BOOL}
_HALF = re.compile(r"\b(half|float16_t|half[2-4](x[2-4])?)\b")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@dataclass(frozen=True)
class Compiled:
    """One entry point compiled for one target: the code as the target takes it, the entry point's name in it,
    slangc's reflection, and what it binds (`kernel`)."""

    target: str
    code: bytes | str
    entry: str
    reflection: dict[str, Any]
    kernel: Kernel
    #: What the code needs of a device (`needs()`), read from slangc's output before any fixup.
    needs: frozenset[str] = frozenset()


class Slang:
    """Slang source, compiled for each device it is given to (see the module docstring)."""

    def __init__(self, source: str | bytes, *, options: tuple[str, ...] = ()):
        """`options`: extra slangc options (-D defines, -I include folders), applied on every target."""
        self.source = source_text("slang", source, "Slang", "Slang")
        if not isinstance(options, (tuple, list)) or not all(isinstance(o, str) for o in options):
            raise InvalidArgument("slang", "Slang", detail="options must be a tuple of slangc option strings")
        self.options = tuple(options)
        self.constants = _declared(self.source)
        #: Translations made from this source in this process, by (backend, entry, constants): a repeated
        #: pipeline() costs a dict lookup, not a cache key over the source.
        self._translations: dict[Hashable, tuple[Translation, frozenset[str]]] = {}

    def __repr__(self) -> str:
        return f"Slang({len(self.source)} characters)"

    def specialized(self, *args: str | int) -> Slang:
        """This source with its generic entry point's parameters bound, in order (slangc -specialize): a type
        name for a type parameter, an int for a value one (`let N : int`):
        `Slang("... void fill<T : __BuiltinArithmeticType>(...) ...").specialized("int")`."""
        bound = []
        for arg in args:
            if isinstance(arg, int) and not isinstance(arg, bool):
                bound.append(str(arg))
            elif isinstance(arg, str) and _TYPE_NAME.fullmatch(arg):
                bound.append(arg)
            else:
                raise InvalidArgument("slang", "Slang.specialized", detail=f"a Slang type name or an int, got {arg!r}")
        return Slang(self.source, options=self.options + tuple(o for t in bound for o in ("-specialize", t)))

    def compile(self, target: str, entry: str, constants: Mapping[str, Any] | None = None,
                backend: str = "slang") -> Compiled:
        """`entry` compiled for `target` ("vulkan", "webgpu", "opengl", "cuda", "metal", or a slangc target name),
        made to bind as the kit's devices do."""
        name = TARGETS.get(target, target)
        if name not in _OPTIONS:
            raise Unsupported(backend, "pipeline", f"no Slang target for {target!r}; targets: "
                              f"{', '.join(TARGETS)}")
        module = _constants_module(backend, self.constants, dict(constants or {}))
        out = run_slangc(backend, self.source, entry, name, _OPTIONS[name] + self.options, module)
        kernel = read(backend, out.reflection, entry)
        fixed = _FIXUPS[name](backend, out, kernel)  # needs: WGSL's before the subgroups enable goes
        if name == "cuda" and _HALF.search(_COMMENTS.sub(" ", self.source)):
            # Slang's CUDA prelude declares half (cuda_fp16.h, which NVRTC carries) only on request.
            fixed = replace(fixed, code="#define SLANG_CUDA_ENABLE_HALF 1\n" + str(fixed.code))
        return replace(fixed, needs=needs(name, out.code if name == "wgsl" else fixed.code))

    def __ironaccel_translate__(self, device: Any, entry: str, constants: dict[str | int, Any]) -> Translation:
        """The kit's hook: this source as `device`'s code, with the interface its reflection gives."""
        backend = getattr(device, "backend", None) or device.descriptor.backend
        memo = (backend, entry, tuple(sorted(((str(k), type(v).__name__, v) for k, v in constants.items()),
                                             key=lambda item: item[0])))
        found = self._translations.get(memo)  # the kit checked the values: bool, int or float
        if found is None:
            found = self._translate(backend, entry, constants)
            self._remember(memo, found)
        _check_device(backend, device, entry, found[1])
        if backend == "cuda" and "float16" in found[1]:
            arch = _cuda_arch(device)
            image = self._translations.get((memo, arch))
            if image is None:
                image = (_cuda_cubin(found[0], arch), found[1])
                self._remember((memo, arch), image)
            return image[0]
        return found[0]

    def _remember(self, memo: Hashable, found: tuple[Translation, frozenset[str]]) -> None:
        if len(self._translations) >= _MEMO_ENTRIES:
            self._translations.pop(next(iter(self._translations)))
        self._translations[memo] = found

    def _translate(self, backend: str, entry: str, constants: dict[str | int, Any]
                   ) -> tuple[Translation, frozenset[str]]:
        if backend not in TARGETS or backend == "metal":
            raise Unsupported(backend, "pipeline", f"no Slang target for the {backend} backend; Slang source runs "
                              f"on {', '.join(b for b in TARGETS if b != 'metal')}")
        for name in constants:
            if not isinstance(name, str):
                raise InvalidArgument(backend, "pipeline", detail=f"Slang constants are named, got id {name!r}")
        compiled = self.compile(backend, entry, {str(k): v for k, v in constants.items()}, backend)
        kernel = compiled.kernel
        rule, layout = _BLOCKS[TARGETS[backend]]
        block = kernel.block(rule, layout)
        interface = Interface(tuple(b.element for b in kernel.buffers), tuple(b.writable for b in kernel.buffers),
                              kernel.bindings(), block, self.constants)
        key: Hashable = ("slang", TARGETS[backend], compiled.code)
        return Translation(compiled.code, compiled.entry, key, _asked(compiled, block), kernel.workgroup_size,
                           interface, _verifier(backend, kernel, block)), compiled.needs


def _asked(compiled: Compiled, block: ParamBlock | None) -> int:
    """The params count to ask the device for: the number of values, except on WebGPU where the device cannot
    read the WGSL uniform slangc wrote (arrays become structs of vec4 there): then as many 32-bit words as the
    block's bytes, which sizes the device's uniform buffer for the block."""
    values = len(compiled.kernel.values)
    if block is None or compiled.target != "wgsl":
        return values
    own = wgsl_params(str(compiled.code))
    if own is not None and leaves(own[1].struct) == leaves(block.struct):
        return values
    return -(-block.size // 4)


#: Per target: the rule the params block is laid out by (None: slangc's offsets hold) and its layout name.
_BLOCKS: dict[str, tuple[str | None, str]] = {
    "spirv": (None, "std430"), "wgsl": (None, "wgsl-uniform"), "glsl": ("std140", "std140"), "cuda": ("c", "c"),
    "metal": (None, "c"),
}


def _verifier(backend: str, kernel: Kernel, block: ParamBlock | None) -> Callable[[Interface], None]:
    def verify(own: Interface) -> None:
        """The device's own reading of the compiled code against the reflection: buffer count and param layout."""
        if len(own.elements) != len(kernel.buffers):
            raise InvalidArgument(backend, "pipeline", detail=f"the Slang entry point {kernel.entry!r} takes "
                                  f"{len(kernel.buffers)} buffers ({', '.join(b.name for b in kernel.buffers)}), "
                                  f"the pipeline was asked for {len(own.elements)}")
        theirs = own.params
        if block is not None and theirs is not None and (leaves(theirs.struct) != leaves(block.struct)
                                                         or block.size > theirs.size):
            raise CompileError(backend, "pipeline", f"the {backend} code slangc made lays the params out as\n"
                               f"{theirs.describe()}\nbut its reflection says\n{block.describe()}")
    return verify


# -- per-target fixups: code the device's own pipeline() takes, binding as the reflection says --------------

def _spirv(backend: str, out: Output, kernel: Kernel) -> Compiled:
    for slot, buf in enumerate(kernel.buffers):
        if buf.binding != slot:
            raise Unsupported(backend, "pipeline", f"slangc bound Slang buffer {buf.name!r} at {buf.binding}, not "
                              f"{slot}; Vulkan pipelines bind buffers at 0..n-1 in the entry point's order")
    return Compiled("spirv", _without_opsource(out.code), kernel.entry, out.reflection, kernel)


def _without_opsource(code: bytes) -> bytes:
    """SPIR-V without its OpSource instruction: debug information only, and the Khronos validation layer's
    SPIRV-Tools (before 2024) refuses the source language Slang writes there (11)."""
    if len(code) < 20 or len(code) % 4:
        raise CompileError("vulkan", "slangc", f"slangc's SPIR-V is {len(code)} bytes, not a module")
    words = memoryview(bytearray(code)).cast("I")
    kept, i = list(words[:5]), 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise CompileError("vulkan", "slangc", f"slangc's SPIR-V has a malformed instruction at word {i}")
        if opcode != 3:  # OpSource
            kept.extend(words[i:i + count])
        i += count
    return array.array("I", kept).tobytes()


def _wgsl(backend: str, out: Output, kernel: Kernel) -> Compiled:
    text = out.code.decode()
    slots = {b.binding: i for i, b in enumerate(kernel.buffers)}
    after = len(kernel.buffers)

    def remap(match: re.Match[str]) -> str:  # buffers to 0..n-1 in order, the params uniform after them
        return f"@binding({slots.get(int(match.group(1)), after)}) @group(0)"

    text = re.sub(r"@binding\(\s*(\d+)\s*\)\s*@group\(\s*0\s*\)", remap, text)
    # wgpu-native's naga takes the subgroup builtins under the device's "subgroup" feature and refuses the
    # `enable subgroups;` directive slangc writes ("not yet supported"); the need is checked from the code.
    text = re.sub(r"^\s*enable\s+subgroups\s*;\s*\n", "", text, flags=re.M)
    found = re.search(r"@compute\s*(?:@workgroup_size\([^)]*\)\s*)?fn\s+(\w+)", text)
    if found is None:
        raise CompileError(backend, "slangc", "slangc's WGSL has no @compute function")
    return Compiled("wgsl", text, found.group(1), out.reflection, kernel)


def _glsl(backend: str, out: Output, kernel: Kernel) -> Compiled:
    text = out.code.decode()
    # OpenGL has no push constants: the entry point's values become a std140 uniform block at binding 0.
    text, pushed = re.subn(r"layout\(push_constant\)\s*layout\(std430\)\s*uniform", "layout(std140, binding = 0) "
                           "uniform", text)
    if kernel.values and pushed != 1:
        raise CompileError(backend, "slangc", "slangc's GLSL does not hold the entry point's values in one "
                           "push-constant block")
    slots = {b.binding: i for i, b in enumerate(kernel.buffers)}
    text = re.sub(r"layout\(std430,\s*binding\s*=\s*(\d+)\)(\s*(?:readonly\s+|writeonly\s+)*buffer)",
                  lambda m: f"layout(std430, binding = {slots.get(int(m.group(1)), int(m.group(1)))}){m.group(2)}",
                  text)
    return Compiled("glsl", _core_barriers(text), "main", out.reflection, kernel)


_SCOPED_BARRIER = re.compile(r"\b(controlBarrier|memoryBarrier)\(([\w\s|(),]*?)\)\s*;")
_STORAGE = {"gl_StorageSemanticsShared": "memoryBarrierShared();",
            "gl_StorageSemanticsBuffer": "memoryBarrierBuffer();", "gl_StorageSemanticsImage": "memoryBarrierImage();"}


def _core_barriers(text: str) -> str:
    """Slang's barriers (GroupMemoryBarrierWithGroupSync, DeviceMemoryBarrier, ...) written with GLSL 4.50's
    own calls.

    slangc writes them with GL_KHR_memory_scope_semantics, a Vulkan-GLSL extension that OpenGL drivers
    (llvmpipe among them) do not take.  A workgroup-wide execution barrier is `barrier()`, preceded by the
    memoryBarrierShared/Buffer/Image() of the storage classes it orders (each of those is device-wide, which
    covers a workgroup scope too).  The extension line goes where no scoped call is left."""

    def core(match: re.Match[str]) -> str:
        args = [a.strip() for a in match.group(2).replace("(", " ").replace(")", " ").split(",")]
        execution = args.pop(0) if match.group(1) == "controlBarrier" and len(args) == 4 else None
        if len(args) != 3 or execution not in (None, "gl_ScopeWorkgroup") or \
                args[0] not in ("gl_ScopeWorkgroup", "gl_ScopeQueueFamily", "gl_ScopeDevice"):
            return match.group(0)
        storage = [s.strip() for s in args[1].split("|")]
        if not all(s in _STORAGE for s in storage):
            return match.group(0)
        fences = " ".join(_STORAGE[s] for s in storage)
        return f"{fences} barrier();" if execution else fences

    text = _SCOPED_BARRIER.sub(core, text)
    if not re.search(r"\bgl_(Scope|StorageSemantics|Semantics)\w+", text):
        text = re.sub(r"#extension\s+GL_KHR_memory_scope_semantics\s*:\s*require\s*\n", "", text)
    return text


_CUDA_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


def _cuda(backend: str, out: Output, kernel: Kernel) -> Compiled:
    text = out.code.decode()
    # the kernels are after Slang's prelude (hundreds of KB where Slang's own is used): the search starts there
    start = out.head if out.code[:out.head].isascii() else 0
    found = _CUDA_KERNEL.findall(text, start)
    if len(found) != 1:
        raise CompileError(backend, "slangc", f"slangc's CUDA C++ has kernels {found}, expected one")
    # A structured buffer is then one pointer, passed as the kit passes each buffer.
    return Compiled("cuda", "#define SLANG_CUDA_STRUCTURED_BUFFER_NO_COUNT 1\n" + text, found[0], out.reflection,
                    kernel)


def _metal(backend: str, out: Output, kernel: Kernel) -> Compiled:
    text = out.code.decode()
    found = re.search(r"\[\[kernel\]\]\s*void\s+(\w+)\s*\(", text)
    if found is None:
        raise CompileError(backend, "slangc", "slangc's Metal code has no [[kernel]] function")
    return Compiled("metal", text, found.group(1), out.reflection, kernel)


_FIXUPS: dict[str, Callable[[str, Output, Kernel], Compiled]] = {
    "spirv": _spirv, "wgsl": _wgsl, "glsl": _glsl, "cuda": _cuda, "metal": _metal}


# -- what the compiled code needs of the device ---------------------------------------------------------------

#: SPIR-V capabilities (OpCapability operands) that a device must offer, by the need they name.
_SPIRV_NEEDS = {9: "float16", 4433: "float16", 4434: "float16", 4435: "float16", 61: "subgroups",
                62: "subgroups:vote", 63: "subgroups:arithmetic", 64: "subgroups:ballot", 65: "subgroups:shuffle",
                66: "subgroups:shuffle_relative", 67: "subgroups:clustered", 68: "subgroups:quad"}
_GLOSS = {"float16": "16-bit floats (half)", "subgroups": "subgroup (wave) operations"}


def needs(target: str, code: bytes | str) -> frozenset[str]:
    """What `code` (slangc's output for `target`; WGSL's before its fixup, the others' after) needs of a device:
    "float16", "subgroups", "subgroups:<operation class>" (SPIR-V), "extension:<name>" (GLSL's required
    extensions)."""
    found: set[str] = set()
    if target == "spirv" and isinstance(code, bytes) and len(code) % 4 == 0:
        words = memoryview(code).cast("I")
        i = 5
        while i < len(words):
            count, opcode = words[i] >> 16, words[i] & 0xFFFF
            if count == 0:
                break
            if opcode != 17:  # OpCapability: they open every module, before any other instruction
                break
            need = _SPIRV_NEEDS.get(words[i + 1]) if count > 1 else None
            if need is not None:
                found.update({need, need.split(":")[0]})
            i += count
    elif target == "wgsl":
        text = code.decode(errors="replace") if isinstance(code, bytes) else code
        if re.search(r"^\s*enable\s+f16\s*;", text, re.M):
            found.add("float16")
        if re.search(r"^\s*enable\s+subgroups\s*;", text, re.M):
            found.add("subgroups")
    elif target == "cuda":
        if str(code).startswith("#define SLANG_CUDA_ENABLE_HALF"):
            found.add("float16")
    elif target == "glsl":
        text = code.decode(errors="replace") if isinstance(code, bytes) else code
        for name in re.findall(r"^\s*#extension\s+(\w+)\s*:\s*(?:require|enable)", text, re.M):
            found.add(f"extension:{name}")
            if "float16" in name or "16bit" in name:
                found.add("float16")
            if "subgroup" in name:
                found.add("subgroups")
    return frozenset(found)


def _check_device(backend: str, device: Any, entry: str, wanted: frozenset[str]) -> None:
    """Unsupported, naming what the kernel uses, where `device` lacks it (read from its capabilities, its
    subgroup operations, its GL extensions); the device's own compiler would refuse it less legibly."""
    if not wanted:
        return
    descriptor = getattr(device, "descriptor", None)
    caps = getattr(descriptor, "capabilities", None)
    extras = getattr(descriptor, "extras", None) or {}
    lacking = []
    if caps is not None:
        for need, flag in (("float16", CapabilityFlags.FP16), ("subgroups", CapabilityFlags.SUBGROUPS)):
            if need in wanted and flag not in caps and backend != "opengl":
                lacking.append(_GLOSS[need])
    operations = extras.get("subgroup_operations")
    if isinstance(operations, (list, tuple)):
        lacking += [f"subgroup {w.split(':')[1]} operations" for w in sorted(wanted)
                    if w.startswith("subgroups:") and w.split(":")[1] not in operations]
    context = getattr(device, "ctx", None)
    if backend == "opengl" and context is not None:
        have = set(getattr(context, "extensions", ()))
        for w in sorted(wanted):
            name = w.partition(":")[2]
            if w.startswith("extension:") and name not in have:
                what = " (subgroup (wave) operations)" if "subgroup" in name else \
                    " (16-bit floats (half))" if "16" in name else ""
                lacking.append(f"the GLSL extension {name}{what}")
    if lacking:
        name = getattr(descriptor, "name", backend)
        raise Unsupported(backend, "pipeline", f"the Slang kernel {entry!r} uses {', '.join(lacking)}, which this "
                          f"{backend} device ({name}) lacks")


# -- CUDA: half through the toolkit's headers -------------------------------------------------------------

def cuda_include() -> str | None:
    """The CUDA headers' folder (cuda_fp16.h): cuda.pathfinder's (the NVIDIA wheels, conda, CUDA_HOME), else
    CUDA_HOME / CUDA_PATH or a toolkit under /usr/local; None where there is none."""
    folders: list[str] = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
        if found:
            folders.append(str(found))
    except Exception:  # absent, too old to find headers, or found none: the fallbacks follow
        pass
    folders += [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    folders += sorted(glob.glob("/usr/local/cuda*/include"), reverse=True)
    return next((f for f in folders if os.path.isfile(os.path.join(f, "cuda_fp16.h"))), None)


def _cuda_arch(device: Any) -> str:
    arch = getattr(device, "arch", None)
    if isinstance(arch, str) and re.fullmatch(r"sm_\d+[a-z]?", arch):
        return arch
    major, minor = device.compute_capability
    return f"sm_{major}{minor}"


def _cuda_cubin(translation: Translation, arch: str) -> Translation:
    """A kernel using half, compiled by NVRTC to a CUBIN for `arch` with the CUDA headers on the include path.

    Slang's CUDA prelude takes half from cuda_fp16.h; NVRTC carries no copy, and the CUDA device's pipeline()
    compiles C++ without include folders, so such a kernel reaches the device as a module image (a CUBIN, as
    the device makes from C++ itself: no PTX version for its driver to refuse); the rest stay C++."""
    from ironaccel_cuda.options import CompileOptions
    from ironaccel_cuda.program import Program

    folder = cuda_include()
    if folder is None:
        raise NotAvailable("cuda", "a Slang kernel using half needs the CUDA headers (cuda_fp16.h), and none "
                           "were found (cuda.pathfinder, CUDA_HOME, CUDA_PATH, /usr/local/cuda*)",
                           fix="pip install nvidia-cuda-runtime, or set CUDA_HOME", named=True)
    compiled = Program(str(translation.code), CompileOptions(include_paths=[folder]),
                       name_expressions=[translation.entry]).compile("cubin", arch=arch)
    return replace(translation, code=bytes(compiled.code), key=(translation.key, "cubin", arch))


# -- link-time constants -------------------------------------------------------------------------------------

def _declared(source: str) -> tuple[ConstantInfo, ...]:
    """The `extern static const` declarations of the source: its link-time constants."""
    found = []
    for type_name, name, default in _CONSTANT.findall(_COMMENTS.sub(" ", source)):
        found.append(ConstantInfo(name, None, _CONSTANT_TYPES.get(type_name), _literal(default)))
    return tuple(found)


def _literal(text: str) -> Any:
    text = text.strip().rstrip("uUlLfFhH") if text else ""
    if not text:
        return None
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text, 0)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _constants_module(backend: str, declared: tuple[ConstantInfo, ...], values: dict[str, Any]) -> str | None:
    """A Slang module exporting the constants' values (linked with the source), or None where none is given."""
    by_name = {c.name: c for c in declared}
    for c in declared:
        if c.name not in values and c.default is None:
            raise InvalidArgument(backend, "pipeline", detail=f"Slang constant {c.name!r} has no default; pass "
                                  f"constants={{{c.name!r}: ...}}")
    if not values:
        return None
    lines = []
    for name, value in sorted(values.items()):
        info = by_name.get(name)
        if info is None:
            raise InvalidArgument(backend, "pipeline", detail=f"the Slang source declares no constant {name!r} "
                                  f"(`extern static const`); it declares {sorted(by_name) or 'none'}")
        lines.append(f"export static const {_slang_type(info)} {name} = {_value(backend, info, value)};")
    return "\n".join(lines) + "\n"


def _slang_type(info: ConstantInfo) -> str:
    return {DType.INT32: "int", DType.UINT32: "uint", DType.INT64: "int64_t", DType.UINT64: "uint64_t",
            DType.FLOAT32: "float", DType.FLOAT64: "double", DType.BOOL: "bool"}.get(info.dtype or DType.INT32, "int")


def _value(backend: str, info: ConstantInfo, value: Any) -> str:
    """`value` as a Slang literal of the constant's type (InvalidArgument where it does not fit)."""
    dtype = info.dtype
    if hasattr(value, "item") and not isinstance(value, (bool, int, float)):
        value = value.item()
    bad = InvalidArgument(backend, "pipeline", detail=f"Slang constant {info.name!r} is "
                          f"{dtype.value if dtype else 'of an unknown type'}, got {value!r}")
    if dtype is None:
        raise bad
    if dtype is DType.BOOL:
        if not isinstance(value, bool):
            raise bad
        return "true" if value else "false"
    if dtype in (DType.FLOAT32, DType.FLOAT64):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            raise bad
        return repr(float(value)) + ("f" if dtype is DType.FLOAT32 else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad
    bits = dtype.itemsize * 8
    low, high = (0, 2 ** bits - 1) if dtype.value.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not low <= value <= high:
        raise bad
    return str(value)

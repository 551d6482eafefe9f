"""pycuda.compiler on NVRTC: SourceModule, DynamicModule and DynamicSourceModule with no CUDA toolkit.

Sources compile through ironaccel's `Program` (NVRTC from the
`nvidia-cuda-nvrtc` wheel, with ironaccel's memory and disk caches), never
through nvcc.  PyCUDA's behaviour is kept where code depends on it:

* the source is wrapped in `extern "C" { ... }` unless `no_extern_c=True`,
  so kernels are found by their plain names;
* `arch` defaults to the current context's device (`sm_XY`, a CUBIN: no
  driver JIT); `arch="compute_XY"` or `code="compute_XY"` makes PTX;
  `code="sm_XY"` a CUBIN for that target;
* nvcc options are translated: `-I`/`--include-path`, `-D`/`-U`, `-std`,
  `--use_fast_math`, `-ftz/-prec-div/-prec-sqrt/-fmad`, `-G`, `-lineinfo`,
  `-maxrregcount`, `-rdc`, `-Xptxas`, `--expt-relaxed-constexpr`,
  `--extended-lambda`, `-w`, `-restrict` pass to NVRTC; `-arch`/`-code`/
  `-gencode` choose the target; host-side options (`-O*`, `-g`,
  `-Xcompiler`, `-m64`, `--keep`, `-L`, `-l`) have no NVRTC meaning and are
  dropped (`-l` libraries are linked by DynamicModule); anything else goes to
  NVRTC as given, whose log then says what it did not understand;
* `include_dirs` are include paths; NVRTC has printf, assert and the math
  functions built in but no C library headers, so `<stdio.h>`, `<cstdio>`,
  `<assert.h>`, `<cassert>`, `<math.h>` and `<cmath>` resolve to empty
  headers unless an include directory has them;
* an alignment attribute written after a struct's closing brace
  (`typedef struct {...} __align__(32) rec_t;`, `__attribute__((aligned(N)))`,
  or a macro of the source defined as either, such as reikna's `ALIGN(N)`) is
  moved before the braces (`struct __align__(32) {...}`): nvcc, in GNU mode,
  applies it to the struct type (padding `sizeof` to N, so nested records and
  arrays of them land where numpy's `itemsize=` puts them), while NVRTC
  applies it to the typedef name or nothing (`sizeof` stays unpadded);
* `keep=True` writes the source and the result to a temporary folder and
  prints its name, as PyCUDA does;
* failures raise `CompileError` (PyCUDA's, also ironaccel's) with NVRTC's
  log as `stderr`; warnings in a successful compile are warned.

Differences: `cache_dir` is accepted and not used (results are cached by
ironaccel: `IRONACCEL_CUDA_CACHE_DIR`, `IRONACCEL_CUDA_CACHE=0`); the `nvcc`
argument is ignored; PyCUDA's own headers (`pycuda-complex.hpp`,
`pycuda-helpers.hpp`) are not provided; `target="fatbin"` gives a CUBIN.
DynamicModule links with nvJitLink (see `driver.Linker`), its sources compiled
as relocatable CUBIN.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from typing import Any

from ironaccel import errors as ia

from ._errors import CompileError, Error, bad_type, invalid, translate

__all__ = ["SourceModule", "DynamicModule", "DynamicSourceModule", "compile", "compile_plain", "DEFAULT_NVCC_FLAGS",
           "get_nvcc_version", "preprocess_source", "nvcc_to_nvrtc"]

DEFAULT_NVCC_FLAGS = [flag.strip() for flag in os.environ.get("PYCUDA_DEFAULT_NVCC_FLAGS", "").split() if flag.strip()]

_C_HEADERS = ("stdio.h", "cstdio", "assert.h", "cassert", "math.h", "cmath")
_EMPTY_HEADER = "/* NVRTC has this header's device functions built in */\n"

# nvcc option -> NVRTC spelling, for options that take no value
_SAME = {
    "--use_fast_math": "--use_fast_math", "-use_fast_math": "--use_fast_math",
    "-G": "--device-debug", "--device-debug": "--device-debug",
    "-lineinfo": "--generate-line-info", "--generate-line-info": "--generate-line-info",
    "--expt-relaxed-constexpr": "--expt-relaxed-constexpr", "-expt-relaxed-constexpr": "--expt-relaxed-constexpr",
    "--expt-extended-lambda": "--extended-lambda", "--extended-lambda": "--extended-lambda",
    "-extended-lambda": "--extended-lambda", "-w": "--disable-warnings", "--disable-warnings": "--disable-warnings",
    "-restrict": "--restrict", "--restrict": "--restrict", "-dc": "--relocatable-device-code=true",
    "--device-c": "--relocatable-device-code=true", "-dw": "--relocatable-device-code=false",
}
# host-side or driver-side nvcc options with no NVRTC meaning; those taking a value are listed with True
_DROP = {
    "-g": False, "--debug": False, "-m64": False, "-m32": False, "--keep": False, "-keep": False, "--ptx": False,
    "--cubin": False, "--fatbin": False, "-ptx": False, "-cubin": False, "-fatbin": False, "-c": False,
    "--compile": False, "-Wno-deprecated-gpu-targets": False, "-Wno-deprecated-declarations": False,
    "--keep-dir": True, "-keep-dir": True, "-Xcompiler": True, "--compiler-options": True, "-Xlinker": True,
    "--linker-options": True, "-ccbin": True, "--compiler-bindir": True, "-o": True, "--output-file": True,
    "-L": True, "--library-path": True, "-odir": True, "--output-directory": True,
}
_VALUED = {  # nvcc option taking a value -> NVRTC option prefix
    "-I": "--include-path=", "--include-path": "--include-path=", "-D": "-D", "--define-macro": "-D",
    "-U": "-U", "--undefine-macro": "-U", "-std": "--std=", "--std": "--std=",
    "-maxrregcount": "--maxrregcount=", "--maxrregcount": "--maxrregcount=",
    "-Xptxas": "--ptxas-options=", "--ptxas-options": "--ptxas-options=",
    "-rdc": "--relocatable-device-code=", "--relocatable-device-code": "--relocatable-device-code=",
    "-ftz": "--ftz=", "--ftz": "--ftz=", "-prec-div": "--prec-div=", "--prec-div": "--prec-div=",
    "-prec-sqrt": "--prec-sqrt=", "--prec-sqrt": "--prec-sqrt=", "-fmad": "--fmad=", "--fmad": "--fmad=",
    "-include": "--pre-include=", "--pre-include": "--pre-include=",
}
_TARGET = {"-arch": "arch", "--gpu-architecture": "arch", "-code": "code", "--gpu-code": "code",
           "-gencode": "gencode", "--generate-code": "gencode"}


class _Translated:
    def __init__(self) -> None:
        self.nvrtc: list[str] = []
        self.include_dirs: list[str] = []
        self.arch: str | None = None
        self.code: str | None = None
        self.libs: list[str] = []
        self.relocatable = False


def nvcc_to_nvrtc(options: Sequence[str]) -> _Translated:
    """Split nvcc options into NVRTC options, the target (-arch/-code/-gencode) and link libraries (-l)."""
    out = _Translated()
    items = [str(o) for o in options]
    i = 0
    while i < len(items):
        opt = items[i]
        i += 1
        name, eq, value = opt.partition("=")
        if opt in _SAME:
            translated = _SAME[opt]
            out.nvrtc.append(translated)
            out.relocatable |= translated.endswith("code=true")
            continue
        if name in _DROP:
            if _DROP[name] and not eq:
                i += 1
            continue
        if opt.startswith("-l") and len(opt) > 2:
            out.libs.append(opt[2:])
            continue
        if opt.startswith("-L") or opt.startswith("-O") or opt.startswith("--optimize"):
            continue
        target = _TARGET.get(name)
        if target is not None:
            if not eq:
                if i >= len(items):
                    break
                value = items[i]
                i += 1
            if target == "gencode":
                parts = dict(p.split("=", 1) for p in value.split(",") if "=" in p)
                out.arch = parts.get("arch", out.arch)
                out.code = parts.get("code", out.code)
            else:
                setattr(out, target, value)
            continue
        prefix = _VALUED.get(name)
        if prefix is None:
            for short in ("-I", "-D", "-U"):
                if opt.startswith(short) and len(opt) > 2:
                    prefix, value, eq = _VALUED[short], opt[2:], "="
                    name = short
                    break
        if prefix is not None:
            if not eq:
                if i >= len(items):
                    break
                value = items[i]
                i += 1
            if name in ("-I", "--include-path"):
                out.include_dirs.append(value)
                continue
            out.nvrtc.append(prefix + value)
            if prefix.startswith("--relocatable") and value.lower() == "true":
                out.relocatable = True
            continue
        out.nvrtc.append(opt)
    return out


def get_nvcc_version(nvcc: str = "nvcc") -> str:
    """What compiles here: NVRTC (nvcc is not used)."""
    from ironaccel_cuda.program import nvrtc_version

    major, minor = nvrtc_version()
    return f"NVRTC {major}.{minor} (ironaccel_cuda; nvcc is not used)"


def preprocess_source(source: str, options: Sequence[str], nvcc: str) -> str:
    """The source as given: NVRTC preprocesses while compiling (PyCUDA ran nvcc --preprocess for its cache key)."""
    return source


def _default_arch() -> str | None:
    from .driver import Context

    try:
        major, minor = Context.get_device().compute_capability()
        return f"sm_{major}{minor}"
    except Error:
        return None


def _include_stubs(source: str, include_dirs: Sequence[str]) -> dict[str, str]:
    stubs = {}
    for header in _C_HEADERS:
        if re.search(r"#\s*include\s*[<\"]" + re.escape(header) + r"[>\"]", source):
            if not any(os.path.isfile(os.path.join(d, header)) for d in include_dirs):
                stubs[header] = _EMPTY_HEADER
    return stubs


def _target_of(arch: str | None, code: str | None, target: str) -> tuple[str, str | None]:
    """(NVRTC target "cubin"/"ptx", architecture) from PyCUDA's arch / code / target."""
    if code:
        first = code.split(",")[0].strip()
        if first.startswith("compute_"):
            return "ptx", first
        if first.startswith("sm_"):
            return "cubin", first
    if target == "ptx":
        return "ptx", arch
    if arch and arch.startswith("compute_"):
        return "ptx", arch
    return "cubin", arch


_IDENT = r"[A-Za-z_]\w*"
_ATTR_ALIGNED = r"__attribute__\s*\(\(\s*(?:__)?aligned(?:__)?\s*(?:\([^()]*\))?\s*\)\)"
_DEFINE = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+({_IDENT})\([ \t]*({_IDENT})[ \t]*\)[ \t]*(.*?)[ \t]*$", re.M)
_KEYWORD_BEFORE_BRACE = re.compile(rf"\b(struct|union|class)\b((?:\s+{_IDENT})?)\s*$")


def _alignment_macros(source: str) -> list[str]:
    """Names of the source's function-like macros that expand to an alignment attribute of their argument."""
    names = ["__align__"]
    defines = _DEFINE.findall(source)
    grew = True
    while grew:
        grew = False
        for name, param, body in defines:
            if name in names:
                continue
            p = re.escape(param)
            spelled = "|".join(map(re.escape, names))
            if re.fullmatch(rf"(?:{spelled})\s*\(\s*{p}\s*\)", body) or re.fullmatch(
                    rf"__attribute__\s*\(\(\s*(?:__)?aligned(?:__)?\s*\(\s*{p}\s*\)\s*\)\)", body):
                names.append(name)
                grew = True
    return names


def _opening_brace(source: str, close: int) -> int:
    """Index of the `{` matching the `}` at `close`, or -1."""
    depth = 0
    for i in range(close, -1, -1):
        c = source[i]
        if c == "}":
            depth += 1
        elif c == "{":
            depth -= 1
            if depth == 0:
                return i
    return -1


def gnu_struct_alignment(source: str) -> str:
    """Move alignment attributes that follow a struct's closing brace to after its keyword, as nvcc applies them.

    `struct [tag] {...} ATTR` becomes `struct ATTR [tag] {...}` for ATTR `__align__(N)`,
    `__attribute__((aligned(N)))` or a macro defined in the source as one of them (reikna's
    `ALIGN`).  Anything else (attributes of a declarator, structs in headers) is left as written.
    """
    if "}" not in source:
        return source
    names = _alignment_macros(source)
    spelled = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    trailing = re.compile(rf"\}}(\s*)((?:{spelled})\s*\([^()]*\)|{_ATTR_ALIGNED})")
    pos = 0
    while True:
        m = trailing.search(source, pos)
        if m is None:
            return source
        open_at = _opening_brace(source, m.start())
        head = _KEYWORD_BEFORE_BRACE.search(source, 0, open_at) if open_at >= 0 else None
        if head is None:
            pos = m.end()
            continue
        attr = " " + m.group(2)
        source = (source[:head.end(1)] + attr + source[head.end(1):m.start() + 1] + m.group(1)
                  + source[m.end():])
        pos = m.start() + len(attr) + 1  # past this `}`; the text before the keyword did not move


def compile(
    source: str, nvcc: str = "nvcc", options: Sequence[str] | None = None, keep: bool = False,
    no_extern_c: bool = False, arch: str | None = None, code: str | None = None, cache_dir: Any = None,
    include_dirs: Sequence[str] | None = None, target: str = "cubin",
) -> bytes:
    """Compile CUDA C++ to CUBIN (or PTX) bytes with NVRTC, as pycuda.compiler.compile does with nvcc."""
    if target not in ("cubin", "ptx", "fatbin"):
        raise CompileError(f"unknown target {target!r}", None)
    for what, value in (("arch", arch), ("code", code)):
        if value is not None and not isinstance(value, str):
            raise bad_type("compile", f"{what} must be a str such as 'sm_90', not {value!r}")
    if isinstance(source, str):
        source = gnu_struct_alignment(source)
    if not no_extern_c:
        source = f'extern "C" {{\n{source}\n}}\n'
    try:
        options = list(DEFAULT_NVCC_FLAGS if options is None else options)
    except TypeError:
        raise bad_type("compile", f"options must be a list of str, not {type(options).__name__}") from None
    from . import driver

    if driver.CUDA_DEBUGGING:
        keep = True
        options += ["-G"]
    translated = nvcc_to_nvrtc(options)
    arch = arch or translated.arch or _default_arch()
    code = code or translated.code
    nv_target, nv_arch = _target_of(arch, code, "ptx" if target == "ptx" else "cubin")
    dirs = [*(include_dirs or ()), *translated.include_dirs]
    return compile_plain(source, translated.nvrtc, keep, nvcc, cache_dir, nv_target, arch=nv_arch, include_dirs=dirs)


def compile_plain(source: str, options: Sequence[str], keep: bool, nvcc: str, cache_dir: Any, target: str = "cubin",
                  *, arch: str | None = None, include_dirs: Sequence[str] = ()) -> bytes:
    """NVRTC on `source` as given (no extern "C"), `options` already NVRTC options."""
    from ironaccel_cuda import CompileOptions, Program

    headers = _include_stubs(source, include_dirs)
    args = [str(o) for o in options]
    try:
        program = Program(source, CompileOptions(include_paths=list(include_dirs), extra=args), name="kernel.cu",
                          headers=headers or None)
        kind = "ptx" if target == "ptx" else "cubin"
        try:
            obj = program.compile(kind, arch=arch)
        except ia.Unsupported:
            if kind != "cubin":
                raise
            obj = program.compile("ptx", arch=arch)  # a GPU newer than this NVRTC: PTX for the newest it knows
    except ia.CompileError as exc:
        command = ["nvrtc", *args, *[f"--include-path={d}" for d in include_dirs]]
        if arch:
            command.append(f"--gpu-architecture={arch}")
        raise CompileError("nvrtc compilation of kernel.cu failed", command, stderr=exc.log) from None
    except ia.IronAccelError as exc:
        raise translate(exc, "nvrtcCompileProgram") from None
    if obj.log:
        warnings.warn("The CUDA compiler succeeded, but said the following:\n" + obj.log, stacklevel=3)
    if keep:
        _keep(source, obj)
    return bytes(obj.code)


def _keep(source: str, obj: Any) -> None:
    from tempfile import mkdtemp

    folder = mkdtemp()
    with open(os.path.join(folder, "kernel.cu"), "w") as f:
        f.write(source)
    with open(os.path.join(folder, f"kernel.{obj.kind}"), "wb") as f:
        f.write(obj.code)
    print(f"*** compiler output in {folder}")


class CudaModule:
    """What SourceModule and DynamicModule share: kernels and globals of `self.module`."""

    module: Any

    def _check_arch(self, arch: str | None) -> None:
        if arch is None:
            return
        try:
            from .driver import Context

            capability = Context.get_device().compute_capability()
            digits = arch.split("_")[1]
            if (int(digits[0]), int(digits[1:] or 0)) > capability:
                warnings.warn("trying to compile for a compute capability higher than selected GPU", stacklevel=3)
        except Exception:
            pass

    def _bind_module(self) -> None:
        self.get_global = self.module.get_global
        self.get_texref = self.module.get_texref
        self.get_surfref = self.module.get_surfref

    def get_function(self, name: str) -> Any:
        return self.module.get_function(name)


class SourceModule(CudaModule):
    """CUDA C++ source compiled (NVRTC) and loaded into the current context."""

    def __init__(self, source: str, nvcc: str = "nvcc", options: Sequence[str] | None = None, keep: bool = False,
                 no_extern_c: bool = False, arch: str | None = None, code: str | None = None, cache_dir: Any = None,
                 include_dirs: Sequence[str] | None = None):
        self._check_arch(arch)
        cubin = compile(source, nvcc, options, keep, no_extern_c, arch, code, cache_dir, include_dirs or [])
        from .driver import module_from_buffer

        self.module = module_from_buffer(cubin)
        self._bind_module()


class DynamicModule(CudaModule):
    """Several sources, objects and libraries linked (nvJitLink) into one module: `add_source`, `add_data`,
    `add_file`, `add_stdlib("cudadevrt")`, then `link()`."""

    def __init__(self, nvcc: str = "nvcc", link_options: Any = None, keep: bool = False, no_extern_c: bool = False,
                 arch: str | None = None, code: str | None = None, cache_dir: Any = None,
                 include_dirs: Sequence[str] | None = None, message_handler: Any = None, log_verbose: bool = False,
                 cuda_libdir: str | None = None):
        from .driver import Context, Linker

        capability = Context.get_device().compute_capability()
        if capability < (3, 5):
            from ._errors import unsupported

            raise unsupported("DynamicModule", "Minimum compute capability for dynamic parallelism is 3.5 "
                                               f"(found: {capability[0]}.{capability[1]})!")
        self.linker: Any = Linker(message_handler, link_options, log_verbose)
        self._check_arch(arch)
        self.nvcc = nvcc
        self.keep = keep
        self.no_extern_c = no_extern_c
        self.arch = arch
        self.code = code
        self.cache_dir = cache_dir
        self.include_dirs = list(include_dirs or [])
        self.cuda_libdir = cuda_libdir
        self.module = None

    def _linker(self, routine: str) -> Any:
        """The Linker still collecting inputs; LogicError once link() has run."""
        if self.linker is None:
            raise invalid(routine, "this DynamicModule is already linked")
        return self.linker

    def add_source(self, source: str, nvcc_options: Sequence[str] | None = None, name: str = "kernel.ptx"
                   ) -> DynamicModule:
        """Compile `source` to relocatable device code (a CUBIN, linked without driver JIT) and add it."""
        options = list(DEFAULT_NVCC_FLAGS if nvcc_options is None else nvcc_options)
        if not any(o.replace("--relocatable-device-code", "-rdc") in ("-rdc=true", "-dc") for o in options):
            options.append("-rdc=true")
        code = self.code if self.code and self.code.startswith("sm_") else None
        cubin = compile(source, nvcc=self.nvcc, options=options, keep=self.keep, no_extern_c=self.no_extern_c,
                        arch=self.arch, code=code, cache_dir=self.cache_dir, include_dirs=self.include_dirs)
        from .driver import jit_input_type

        kind = jit_input_type.CUBIN if cubin[:4] == b"\x7fELF" else jit_input_type.PTX
        self._linker("DynamicModule.add_source").add_data(cubin, kind, name)
        return self

    def add_data(self, data: Any, input_type: Any, name: str = "unknown") -> DynamicModule:
        self._linker("DynamicModule.add_data").add_data(data, input_type, name)
        return self

    def add_file(self, filename: str, input_type: Any) -> DynamicModule:
        self._linker("DynamicModule.add_file").add_file(filename, input_type)
        return self

    def add_stdlib(self, libname: str) -> DynamicModule:
        """Link CUDA library `lib<libname>.a` (e.g. "cudadevrt"), found as `_link.find_static_library` says."""
        from ._link import find_static_library
        from .driver import jit_input_type

        linker = self._linker("DynamicModule.add_stdlib")
        linker.add_file(find_static_library(libname, self.cuda_libdir), jit_input_type.LIBRARY)
        return self

    def link(self) -> DynamicModule:
        self.module = self._linker("DynamicModule.link").link_module()
        self.linker = None
        self._bind_module()
        return self


class DynamicSourceModule(DynamicModule):
    """One source compiled as relocatable device code and linked with cudadevrt (dynamic parallelism)."""

    def __init__(self, source: str, nvcc: str = "nvcc", options: Sequence[str] | None = None, keep: bool = False,
                 no_extern_c: bool = False, arch: str | None = None, code: str | None = None, cache_dir: Any = None,
                 include_dirs: Sequence[str] | None = None, cuda_libdir: str | None = None):
        super().__init__(nvcc=nvcc, link_options=None, keep=keep, no_extern_c=no_extern_c, arch=arch, code=code,
                         cache_dir=cache_dir, include_dirs=include_dirs or [], cuda_libdir=cuda_libdir)
        options = list(DEFAULT_NVCC_FLAGS if options is None else options)
        if "-rdc=true" not in options:
            options.append("-rdc=true")
        if "-lcudadevrt" not in options:
            options.append("-lcudadevrt")
        self.add_source(source, nvcc_options=options)
        self.add_stdlib("cudadevrt")
        self.link()

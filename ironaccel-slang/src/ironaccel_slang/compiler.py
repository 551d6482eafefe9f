"""Finding and running `slangc`: Slang source to one target's code plus its reflection JSON.

The compiler is the `slangc` executable, found (first wins) at ``IRONACCEL_SLANGC``,
inside the `slangtorch` wheel (its bundled compiler, located without importing
slangtorch, which would import torch), or on PATH (the Vulkan SDK ships one).
Without it, compiling raises `NotAvailable` naming the install command.  Where Slang's compiler library lies
beside it, compiles run in process instead (`inprocess`: Slang's COM API, one session per target and options kept
for the process, a module per source); slangc runs where that library cannot be used or
IRONACCEL_SLANG_INPROCESS=0.

Every run is keyed on everything that changes its output -- the source, the
entry point, the target, the options, the constants module and the compiler
build -- and its output is kept in memory and on disk (`ironaccel.diskcache`:
a private folder, owner and mode checks on the open file, a checksum per entry),
so a process that compiled a kernel once never starts slangc for it again.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NoReturn

from ironaccel.diskcache import DiskCache, sha256
from ironaccel.errors import CompileError, InvalidArgument, NotAvailable

from . import inprocess

__all__ = ["ENV_SLANGC", "INSTALL", "Output", "find_slangc", "run_slangc", "compiler_id", "clear_memory", "CACHE"]

ENV_SLANGC = "IRONACCEL_SLANGC"
INSTALL = "pip install --no-deps slangtorch  (its bundled slangc; --no-deps: the compiler needs no torch), or put " \
          "the Vulkan SDK's slangc on PATH, or set IRONACCEL_SLANGC to a slangc executable"
TIMEOUT_S = 300
MEMORY_ENTRIES = 256
#: A prelude at least this long (bytes) is kept in a disk-cache entry of its own, not in every kernel's.
_PRELUDE_SPLIT = 4096

#: Compiled outputs on disk (IRONACCEL_SLANG_CACHE=0 turns it off, IRONACCEL_SLANG_CACHE_DIR moves it).
CACHE = DiskCache("slang", magic=b"IASLNG\x01\n", env_off="IRONACCEL_SLANG_CACHE", env_dir="IRONACCEL_SLANG_CACHE_DIR")


@dataclass(frozen=True)
class Output:
    """What one compile made: the target code (bytes) and the reflection (parsed JSON); `head`: how many of the
    code's first bytes are Slang's prelude (CUDA's), which holds no kernel (0: not known)."""

    code: bytes
    reflection: dict[str, Any]
    head: int = 0


_found: dict[tuple[str, str, tuple[str, ...]], str] = {}


def find_slangc() -> str | None:
    """The slangc to run: IRONACCEL_SLANGC, slangtorch's bundled one, or slangc on PATH; None if there is none.

    A compiler found is remembered per (IRONACCEL_SLANGC, PATH, sys.path) while its file is there: looking for
    slangtorch's package costs more than a compile served from memory."""
    where = (os.environ.get(ENV_SLANGC, ""), os.environ.get("PATH", ""), tuple(sys.path))
    found = _found.get(where)
    if found is not None and os.path.isfile(found):
        return found
    found = _find_slangc()
    if found is not None:
        _found[where] = found
    return found


def _find_slangc() -> str | None:
    explicit = os.environ.get(ENV_SLANGC, "").strip()
    if explicit:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    try:
        spec = importlib.util.find_spec("slangtorch")  # finds the package without importing it (nor torch)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            path = os.path.join(folder, "bin", "slangc")
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return shutil.which("slangc")


def missing(backend: str) -> NotAvailable:
    """The error for Slang source where no compiler is installed."""
    return NotAvailable(backend, "Slang source needs the slangc compiler, and none was found (IRONACCEL_SLANGC, "
                        "the slangtorch package, PATH)", fix=INSTALL, named=True)


_ids: dict[tuple[str, int, int, int], str] = {}


def compiler_id(path: str) -> str:
    """The compiler's build, for cache keys: its `-v` output and the size and mtime of the executable.

    `slangc -v` starts a process (most of a new process's first compile), so its answer is also kept in the
    disk cache, keyed by the executable's path, size, mtime and inode: a new process reads it from there."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns, st.st_ino)
    found = _ids.get(key)
    if found is None:
        found = _ids[key] = f"{_version(path, st)} {st.st_size} {int(st.st_mtime)}"
    return found


def _version(path: str, st: os.stat_result) -> str:
    on_disk = CACHE.enabled()
    key = CACHE.key(kind="slangc -v", path=path, size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino)
    if on_disk:
        hit = CACHE.get(key)
        if hit is not None and isinstance(hit[0].get("version"), str):
            return str(hit[0]["version"])
    try:
        done = subprocess.run([path, "-v"], capture_output=True, timeout=60, check=False)
        version = (done.stdout + done.stderr).decode(errors="replace").strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"  # not kept: the next process asks again
    if on_disk and done.returncode == 0 and version:
        CACHE.put(key, {"version": version}, b"")
    return version


_memory: OrderedDict[str, Output] = OrderedDict()
_lock = threading.Lock()


def run_slangc(backend: str, source: str, entry: str, target: str, options: tuple[str, ...],
               constants_module: str | None) -> Output:
    """Compile `source`'s `entry` for `target` with `options` (and the link-time constants module, if any).

    Raises NotAvailable without a compiler, InvalidArgument for an entry point the source lacks, CompileError
    with the compiler's log for anything else slangc refuses.
    """
    for what, text in (("the entry point name", entry), *(("a slangc option", o) for o in options)):
        if "\0" in text:
            raise InvalidArgument(backend, "pipeline", detail=f"{what} holds a NUL character: {text!r}")
    slangc = find_slangc()
    if slangc is None:
        raise missing(backend)
    key = CACHE.key(source=source, entry=entry, target=target, options=list(options), constants=constants_module,
                    compiler=compiler_id(slangc))
    with _lock:
        hit = _memory.get(key)
        if hit is not None:
            _memory.move_to_end(key)
            return hit
    on_disk = CACHE.enabled()
    entry_on_disk = CACHE.get(key) if on_disk else None
    if entry_on_disk is not None:
        meta, payload = entry_on_disk
        reflection, digest = meta.get("reflection"), meta.get("prelude")
        prelude = _prelude(digest) if isinstance(digest, str) else b""
        if isinstance(reflection, dict) and prelude is not None:
            return _remember(key, Output(prelude + payload, reflection, len(prelude)))
    output = _compile(backend, slangc, source, entry, target, options, constants_module)
    if on_disk:
        meta = {"reflection": output.reflection}
        digest = _keep_prelude(output.code[:output.head]) if output.head else None
        if digest is not None:  # the entry holds the kernel's code; the prelude is an entry of its own
            meta["prelude"] = digest
        CACHE.put(key, meta, output.code[output.head:] if digest is not None else output.code)
    return _remember(key, output)


#: Slang's CUDA prelude (its text, before every kernel's code), by its SHA-256: read from its entry or kept once
#: per process.
_preludes: dict[str, bytes] = {}


def _prelude(digest: str) -> bytes | None:
    """The prelude of this digest: kept, or read from its own cache entry (None where it has none)."""
    found = _preludes.get(digest)
    if found is None:
        entry = CACHE.get(CACHE.key(prelude=digest))  # the entry's key and checksum vouch for its bytes
        if entry is None:
            return None
        found = _preludes[digest] = entry[1]
    return found


def _keep_prelude(prelude: bytes) -> str | None:
    """The digest of `prelude`, its cache entry written where this process has not read or written it yet (None
    where it cannot be written: the compile's entry then holds the whole code)."""
    digest = str(sha256(prelude).hexdigest())
    if digest not in _preludes:
        if CACHE.put(CACHE.key(prelude=digest), {}, prelude) is None:
            return None
        _preludes[digest] = prelude
    return digest


def clear_memory() -> None:
    """Forget the outputs kept in this process (the disk cache is untouched)."""
    with _lock:
        _memory.clear()


def _remember(key: str, output: Output) -> Output:
    with _lock:
        _memory[key] = output
        while len(_memory) > MEMORY_ENTRIES:
            _memory.popitem(last=False)
    return output


def _compile(backend: str, slangc: str, source: str, entry: str, target: str, options: tuple[str, ...],
             constants_module: str | None) -> Output:
    try:
        done = inprocess.compile(slangc, compiler_id(slangc), source, entry, target, options, constants_module)
    except inprocess.Refused as refused:
        _refuse(backend, refused.log, refused.result, entry)
    if done is not None:
        code, text = done
        head = 0
        if target == "cuda":
            prelude = inprocess.cuda_prelude(slangc, compiler_id(slangc))
            if prelude and len(prelude) >= _PRELUDE_SPLIT and code.startswith(prelude.encode()):
                head = len(prelude.encode())
        return Output(code, _reflection(backend, text), head)
    return _compile_with_slangc(backend, slangc, source, entry, target, options, constants_module)


def _compile_with_slangc(backend: str, slangc: str, source: str, entry: str, target: str, options: tuple[str, ...],
                         constants_module: str | None) -> Output:
    with tempfile.TemporaryDirectory(prefix="ironaccel-slang-") as folder:
        main = os.path.join(folder, "kernel.slang")
        with open(main, "w", encoding="utf-8") as f:
            f.write(source)
        inputs = [main]
        if constants_module is not None:
            spec = os.path.join(folder, "constants.slang")
            with open(spec, "w", encoding="utf-8") as f:
                f.write(constants_module)
            module = os.path.join(folder, "constants.slang-module")
            _run(backend, [slangc, spec, "-o", module], folder)
            inputs.append(module)
        out, refl = os.path.join(folder, "out"), os.path.join(folder, "reflection.json")
        _run(backend, [slangc, *inputs, "-entry", entry, "-stage", "compute", "-target", target, *options,
                       "-reflection-json", refl, "-o", out], folder, entry)
        try:
            with open(out, "rb") as f:
                code = f.read()
            with open(refl, encoding="utf-8") as f:
                text = f.read()
        except (OSError, ValueError) as exc:
            raise CompileError(backend, "slangc", f"slangc reported success but its output is unreadable: {exc}") \
                from None
    return Output(code, _reflection(backend, text))


#: A backslash before a single quote, itself not escaped: Slang's JSON writer escapes ' in strings (in the
#: "hashedStrings" it lists), which JSON does not allow.
_QUOTE_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\'")


def _reflection(backend: str, text: str) -> dict[str, Any]:
    """Slang's reflection JSON as a dict (CompileError where it is not one)."""
    try:
        reflection = json.loads(_QUOTE_ESCAPE.sub(r"\1'", text) if "\\'" in text else text)
    except ValueError as exc:
        raise CompileError(backend, "slangc", f"Slang's reflection JSON is unreadable: {exc}") from None
    if not isinstance(reflection, dict):
        raise CompileError(backend, "slangc", "Slang's reflection JSON is not an object")
    return reflection


def _run(backend: str, argv: list[str], folder: str, entry: str | None = None) -> None:
    try:
        done = subprocess.run(argv, cwd=folder, capture_output=True, timeout=TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise CompileError(backend, "slangc", f"slangc ran past {TIMEOUT_S} s and was stopped") from None
    except OSError as exc:
        raise NotAvailable(backend, f"slangc ({argv[0]}) could not be started: {exc}", fix=INSTALL,
                           named=True) from None
    if done.returncode != 0:
        _refuse(backend, (done.stdout + done.stderr).decode(errors="replace").replace(folder + os.sep, ""),
                done.returncode, entry)


def _refuse(backend: str, log: str, code: int, entry: str | None) -> NoReturn:
    """The error for a compile Slang refused: InvalidArgument for an entry point the source lacks, else
    CompileError with Slang's diagnostics."""
    if entry is not None and "E38000" in log:  # "no function found matching entry point name"
        raise InvalidArgument(backend, "pipeline", detail=f"the Slang source has no entry point {entry!r}: "
                              + log.strip())
    raise CompileError(backend, "slangc", log, code=code)

"""The compat stands on public ironaccel_cuda names only: a ratchet towards issue 40's goal, not the goal yet.

Issue 40 wants the compat to import no private ironaccel_cuda name and to call no driver entry point itself.
Today it does both, many times.  This test scans the package's source (ast; nothing is imported) and finds

* private imports: an import of an ironaccel_cuda module or name with a part starting with "_"
  (`from ironaccel_cuda import _core`, `from ironaccel_cuda.ipc import _filled`), and a private attribute read
  on an imported ironaccel_cuda module (`ipc._raw`);
* driver calls: an entry point named as the first argument of a `call` / `try_call` (the compat's own
  wrapper and ironaccel_cuda._driver's), an attribute `cuX` (cuda.bindings.driver's functions), and every
  function of the compiled core (`_core.X`, its raw entry points) the compat uses.

`KNOWN` is today's set.  A name that is not in it fails the test (a new private import or driver call); one
that is in it but no longer found fails too, so the list shrinks with the work that removes them.  The count
is printed (pytest -s, or -rP).  Zero entries is issue 40's done.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ironaccel_cuda_compat"
LIBRARY = "ironaccel_cuda"
ENTRY_POINT = re.compile(r"cu[A-Z]\w*")


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split(".")[1:])


def _is_library(module: str) -> bool:
    return module == LIBRARY or module.startswith(LIBRARY + ".")


def scan(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Every private import and driver call under `root`: entry ("private ironaccel_cuda.ipc._filled",
    "driver cuMemAlloc", "core _core.graph_attach") -> the files (relative to root) it occurs in."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        modules: set[str] = set()  # local names bound to ironaccel_cuda modules (or to the compiled core)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if _is_library(alias.name):
                        if _private(alias.name):
                            found[f"private {alias.name}"].add(where)
                        if alias.asname:
                            modules.add(alias.asname)
                        elif "." not in alias.name:
                            modules.add(alias.name)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _is_library(node.module):
                for alias in node.names:
                    dotted = f"{node.module}.{alias.name}"
                    if _private(dotted):
                        found[f"private {dotted}"].add(where)
                    modules.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                base = node.value
                if isinstance(base, ast.Name) and base.id == "_core" or (
                        isinstance(base, ast.Attribute) and base.attr == "_core"):
                    found[f"core _core.{node.attr}"].add(where)
                elif ENTRY_POINT.fullmatch(node.attr):
                    found[f"driver {node.attr}"].add(where)
                elif (isinstance(base, ast.Name) and base.id in modules and node.attr.startswith("_")
                      and not node.attr.startswith("__") and base.id != "_core"):
                    found[f"private {base.id}.{node.attr}"].add(where)
            elif isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                first = node.args[0]
                if (name in ("call", "try_call") and isinstance(first, ast.Constant) and isinstance(first.value, str)
                        and ENTRY_POINT.fullmatch(first.value)):
                    found[f"driver {first.value}"].add(where)
    return dict(found)


#: Today's private imports and driver calls of the compat (issue 40 removes them; this list may only shrink).
KNOWN: frozenset[str] = frozenset({
    "core _core.CLOSED", "core _core.CompatBuffer", "core _core.HtodRing", "core _core.all_instances",
    "core _core.bind", "core _core.compat_create_event", "core _core.compat_device_allocate",
    "core _core.compat_dmr_allocate", "core _core.compat_launch", "core _core.compat_stream_record",
    "core _core.ensure", "core _core.event_create", "core _core.event_destroy", "core _core.event_query",
    "core _core.event_record", "core _core.event_sync", "core _core.graph_attach", "core _core.graph_detach",
    "core _core.launch", "core _core.mem_alloc", "core _core.mem_alloc_async", "core _core.mem_free",
    "core _core.mem_free_async", "core _core.memcpy_dtod", "core _core.memcpy_dtoh", "core _core.memcpy_dtoh_sync",
    "core _core.memcpy_htod", "core _core.memset_d16", "core _core.memset_d32", "core _core.memset_d8",
    "core _core.pinned_add", "core _core.pinned_remove", "core _core.set_compat_buffer",
    "core _core.set_compat_events", "core _core.set_compat_launch", "core _core.stream_query",
    "core _core.stream_sync", "core _core.stream_wait", "driver cuCtxGetDevResource",
    "driver cuDevSmResourceSplitByCount", "driver cuDeviceGetDevResource", "driver cuGraphExecKernelNodeSetParams",
    "driver cuGraphExecMemcpyNodeSetParams", "driver cuGraphExecMemsetNodeSetParams",
    "driver cuGraphKernelNodeSetParams", "driver cuGraphMemcpyNodeSetParams", "driver cuGraphMemsetNodeSetParams",
    "driver cuGreenCtxGetDevResource", "driver cuMemAdvise", "driver cuMemDiscardAndPrefetchBatchAsync",
    "driver cuMemDiscardBatchAsync", "driver cuMemPoolExportPointer", "driver cuMemPoolGetAccess",
    "driver cuMemPoolImportPointer", "driver cuMemPrefetchAsync", "driver cuMemPrefetchBatchAsync",
    "driver cuMemRangeGetAttribute", "driver cuStreamCreate", "driver cuStreamDestroy",
    "private hostfn._entry", "private ironaccel_cuda._core", "private ironaccel_cuda._dlpack",
    "private ironaccel_cuda._driver", "private ironaccel_cuda.graph._kernel_params",
})


def test_the_compat_adds_no_private_import_or_driver_call():
    found = scan()
    new = sorted(set(found) - KNOWN)
    gone = sorted(KNOWN - set(found))
    kinds = defaultdict(int)
    for entry in found:
        kinds[entry.split()[0]] += 1
    print(f"\nironaccel_cuda_compat: {len(found)} private imports and driver calls left "
          f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); issue 40 wants 0")
    assert not new, "new private imports or driver calls in the compat (use public ironaccel_cuda names):\n" + \
        "\n".join(f"  {e}  ({', '.join(sorted(found[e]))})" for e in new)
    assert not gone, f"no longer found, remove from KNOWN (the ratchet moves): {gone}"


def test_the_scan_finds_each_kind(tmp_path):
    """The scan is not blind: each kind it looks for, written once, is found."""
    (tmp_path / "m.py").write_text(
        "from ironaccel_cuda import _core, ipc\n"
        "from ironaccel_cuda.device import _complete, Device\n"
        "import ironaccel_cuda._driver as d\n"
        "from cuda.bindings import driver\n"
        "def f(call):\n"
        "    _core.graph_attach(1)\n"
        "    driver.cuMemAlloc(8)\n"
        "    call('cuMemFree', 1)\n"
        "    return ipc._raw, Device\n")
    assert set(scan(tmp_path)) == {
        "private ironaccel_cuda._core", "private ironaccel_cuda.device._complete", "private ironaccel_cuda._driver",
        "core _core.graph_attach", "driver cuMemAlloc", "driver cuMemFree", "private ipc._raw"}

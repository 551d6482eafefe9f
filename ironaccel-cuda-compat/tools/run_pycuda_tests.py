"""Run PyCUDA's own tests and examples, unchanged, against ironaccel's PyCUDA surface.

    python3 ironaccel-cuda-compat/tools/run_pycuda_tests.py --tests PYCUDA/test --examples PYCUDA/examples [--json OUT]

PYCUDA is an unpacked PyCUDA source distribution (`pip download --no-deps
--no-binary pycuda pycuda==2026.1`); nothing of it is copied into this
repository.  Each run is a child process that calls
`ironaccel_cuda_compat.pycuda.install()` first, so `import pycuda...` is the
compat there.  The tests run under pytest (`test_driver.py` by default);
every test gets a verdict:

* the driver-level tests, the linker tests and the `vec` tests of the issue
  (REQUIRED) must pass;
* texture and surface tests may skip only with PyCUDA's own reason (texture
  and surface references were removed in CUDA 12), as they do with PyCUDA;
* tests of `pycuda.gpuarray` (above the driver layer, out of scope) are
  expected to fail, and `test_register_host_memory` to xfail (PyCUDA marks it
  a known issue);
* any other skip or failure fails the run.

The examples (hello_gpu, dump_properties, demo_struct, demo_meta_template)
run as scripts after `import pycuda.autoinit`: PyCUDA's documentation opens
hello_gpu.py with that line, which the 2026.1 sdist's copies lost in a lint
clean-up; without it they fail with PyCUDA itself for want of a context.
Prints a table and exits 1 if any verdict failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from repo_sources import missing_sources

REQUIRED = (
    "test_memory", "test_simple_kernel", "test_simple_kernel_2", "test_streamed_kernel", "test_multi_context",
    "test_additional_primary_context", "test_prepared_invocation", "test_constant_memory", "test_pass_cai_array",
    "test_import_pyopencl_before_pycuda", "test_bitlog", "test_mempool_2", "test_mempool",
    "test_recursive_launch", "test_jit_link_module", "test_vector_types", "test_prepared_with_vector",
)
ABOVE_DRIVER = ("test_gpuarray", "test_gpuarray_cai", "test_large_smem", "test_pointer_holder_base")
KNOWN_XFAIL = ("test_register_host_memory",)
REMOVED_IN_CUDA_12 = ("texture references were removed in CUDA 12", "surface references were removed in CUDA 12")
EXAMPLES = ("hello_gpu.py", "dump_properties.py", "demo_struct.py", "demo_meta_template.py")

_BOOT = (
    "from ironaccel_cuda_compat import pycuda as compat\n"
    "compat.install()\n"
)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    extra = missing_sources()
    if extra:
        env["PYTHONPATH"] = os.pathsep.join([*extra, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


# -- the child that runs pytest --------------------------------------------------------------


class _Collector:
    """A pytest plugin recording each test's outcome (and its skip reason or failure text)."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, str]] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        name = report.nodeid.split("::")[-1]
        if report.when != "call" and report.outcome == "passed":
            return
        if hasattr(report, "wasxfail"):
            outcome, detail = "xfail", str(report.wasxfail)
        elif report.skipped:
            longrepr = report.longrepr
            outcome = "skipped"
            detail = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        elif report.failed:
            outcome = "failed"
            text = getattr(report, "longreprtext", "") or str(report.longrepr)
            lines = [line for line in text.splitlines() if line.startswith("E ")]
            detail = " | ".join(lines[-3:]) if lines else text.strip().splitlines()[-1:][0] if text.strip() else ""
        else:
            outcome, detail = "passed", ""
        if report.when == "call" or name not in self.results or outcome != "passed":
            self.results[name] = {"outcome": outcome, "detail": detail[:400], "when": report.when}


def _child_pytest(test_file: str, out: str, extra: list[str]) -> int:
    from ironaccel_cuda_compat import pycuda as compat

    compat.install()
    import pytest

    collector = _Collector()
    code = pytest.main([test_file, "-q", "-p", "no:cacheprovider", "-rs", "--import-mode=importlib", *extra],
                       plugins=[collector])
    Path(out).write_text(json.dumps(collector.results, indent=1))
    return int(code)


# -- the parent ------------------------------------------------------------------------------


def verdict(name: str, outcome: str, detail: str) -> tuple[str, str]:
    """("PASS" | "FAIL" | "expected", note) for one test's outcome."""
    if name in REQUIRED:
        return ("PASS", "required") if outcome == "passed" else ("FAIL", "required test did not pass")
    if outcome == "skipped":
        if any(reason in detail for reason in REMOVED_IN_CUDA_12) and ("texture" in name or "surface" in name):
            return "expected", "skips itself on CUDA 12+, as with PyCUDA"
        return "FAIL", "skips count as failures"
    if name in ABOVE_DRIVER and outcome == "failed":
        return "expected", "needs pycuda.gpuarray (above the driver layer, out of scope)"
    if name in KNOWN_XFAIL and outcome == "xfail":
        return "expected", "PyCUDA marks it a known issue (xfail)"
    if outcome == "passed":
        return "PASS", ""
    return "FAIL", f"unexpected {outcome}"


def run_tests(folder: Path, files: list[str], extra: list[str]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for name in files:
        test_file = folder / name
        if not test_file.is_file():
            rows.append((name, "missing", "", "FAIL", f"no {test_file}"))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "results.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child-pytest", str(test_file), str(out), *extra]
            proc = subprocess.run(cmd, cwd=tmp, env=_child_env(), capture_output=True, text=True, timeout=1800)
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
            results = json.loads(out.read_text()) if out.is_file() else {}
        if not results:
            rows.append((name, "error", f"pytest exited {proc.returncode}", "FAIL", "nothing ran"))
        for test, r in results.items():
            v, note = verdict(test, r["outcome"], r["detail"])
            rows.append((test, r["outcome"], r["detail"], v, note))
        for test in REQUIRED:
            if name == "test_driver.py" and results and test not in results:
                rows.append((test, "not run", "", "FAIL", "required test was not collected"))
    return rows


def run_examples(folder: Path) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for name in EXAMPLES:
        path = folder / name
        if not path.is_file():
            rows.append((name, "missing", "", "FAIL", f"no {path}"))
            continue
        code = _BOOT + f"import pycuda.autoinit\nimport runpy\nrunpy.run_path({str(path)!r}, run_name='__main__')\n"
        proc = subprocess.run([sys.executable, "-c", code], cwd=str(folder), env=_child_env(), capture_output=True,
                              text=True, timeout=600)
        tail = (proc.stdout.strip().splitlines() or [""])[-1][:120]
        if proc.returncode == 0:
            rows.append((name, "ran", tail, "PASS", "after import pycuda.autoinit"))
        else:
            err = (proc.stderr.strip().splitlines() or [""])[-1][:300]
            rows.append((name, f"exit {proc.returncode}", err, "FAIL", ""))
    return rows


def table(rows: list[tuple[str, str, str, str, str]]) -> str:
    lines = ["| test | outcome | verdict | note / detail |", "|---|---|---|---|"]
    for name, outcome, detail, v, note in rows:
        text = "; ".join(p for p in (note, detail) if p).replace("|", "/").replace("\n", " ")
        lines.append(f"| {name} | {outcome} | {v} | {text} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child-pytest"]:
        sys.path[:0] = missing_sources()
        return _child_pytest(argv[1], argv[2], argv[3:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=Path, help="PyCUDA's test folder")
    parser.add_argument("--examples", type=Path, help="PyCUDA's examples folder")
    parser.add_argument("--files", default="test_driver.py", help="comma-separated test files in --tests")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.tests is None and args.examples is None:
        parser.error("give --tests and/or --examples")
    rows: list[tuple[str, str, str, str, str]] = []
    if args.tests is not None:
        rows += run_tests(args.tests.resolve(), [f for f in args.files.split(",") if f], args.pytest_args)
    if args.examples is not None:
        rows += run_examples(args.examples.resolve())
    print(table(rows))
    failed = [r[0] for r in rows if r[3] == "FAIL"]
    passed = sum(r[3] == "PASS" for r in rows)
    print(f"\n{passed} passed, {sum(r[3] == 'expected' for r in rows)} as expected, {len(failed)} failed"
          + (f": {', '.join(failed)}" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps([dict(zip(("test", "outcome", "detail", "verdict", "note"), r)) for r in rows],
                                        indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

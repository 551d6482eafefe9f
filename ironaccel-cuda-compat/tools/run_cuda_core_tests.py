#!/usr/bin/env python3
"""Run NVIDIA cuda.core's own tests against ironaccel_cuda_compat.cuda_core, and judge them.

    python3 ironaccel-cuda-compat/tools/run_cuda_core_tests.py PATH/cuda_core/tests [--out DIR] [--set issue|core|all]
                                                        [--against compat|cuda.core] [FILES...] [-- PYTEST ARGS]

PATH/cuda_core/tests is a checkout of cuda-python's `cuda_core/tests` (next to its
`cuda_python_test_helpers` folder, as in the repository: the tests' conftest looks for it
there).  For the run, `cuda.core` is the compat (an import hook installed by the pytest
plugin `cuda_core_compat_plugin.py` beside this script, before any conftest loads; an
installed cuda-core is never imported), every skip is a failure, and an expected failure
(xfail) does not pass.  The tests are not part of this repository.

Before the run the same files are collected against the compat and, when it is installed, the
real cuda-core; a file counts the larger number of cases, so a file that cannot even be collected
under the compat, or a run stopped at --timeout, still counts every case it did not pass.
Output: a pass/fail table per file (stdout and DIR/table.md), DIR/junit.xml, DIR/results.json
(every case with its outcome and reason) and DIR/summary.json.  The exit status is 0 when the
pass rate over the chosen files reaches --target (default 0.90).

Extra pytest arguments go after `--`; on the GPU machine `-- -n 6 --timeout 120` (pytest-xdist,
pytest-timeout) runs the set in a few minutes instead of one case at a time.

--set issue (default): the files of ironaccel issue 11; core: the ten files the compat covers
without issues 10 and 15; all: every test file in the folder.  `--against cuda.core` runs the
same files against the installed cuda-core (a baseline; nothing is installed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from repo_sources import missing_sources

TOOLS = Path(__file__).resolve().parent

CORE_FILES = [
    "test_device.py", "test_stream.py", "test_event.py", "test_context.py", "test_launcher.py", "test_module.py",
    "test_program.py", "test_memory.py", "graph/test_graph_builder.py", "graph/test_graph_update.py",
]
REACHABLE_FILES = [  # reachable once issues 10 (memory) and 15 (execution) land
    "test_linker.py", "memory_ipc", "memory/test_managed_ops.py", "test_green_context.py",
    "graph/test_graph_definition.py", "graph/test_graph_definition_errors.py",
    "graph/test_graph_definition_integration.py", "graph/test_graph_definition_lifetime.py",
    "graph/test_graph_definition_mutation.py", "graph/test_graph_builder_conditional.py",
    "graph/test_graph_memory_resource.py",
]
MARKERS = ("agent_authored(model)", "human_reviewed", "human_authored", "flaky", "thread_unsafe",
           "parallel_threads_limit", "timeout", "core", "smoke", "cython", "bindings", "pathfinder")
OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")


def _no_cases() -> dict[str, int]:
    """A file's (or a group's) counters before any case is counted."""
    return {k: 0 for k in ("cases", "not run", *OUTCOMES)}


def _environment(against: str, extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(TOOLS), *missing_sources()]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["IRONACCEL_CCT_AGAINST"] = against
    if not env.get("CUDA_HOME") and not env.get("CUDA_PATH") and Path("/usr/local/cuda/include/cuda.h").is_file():
        env["CUDA_HOME"] = "/usr/local/cuda"  # the tests find CUDA (and CCCL) headers through it
    env.pop("IRONACCEL_REQUIRE", None)
    env.update(extra)
    return env


def _ini(out: Path) -> Path:
    """An ini of our own, so no pytest configuration above the tests folder (this repo's) applies."""
    path = out / "pytest.ini"
    lines = ["[pytest]", "markers ="] + [f"    {m}: registered by run_cuda_core_tests" for m in MARKERS]
    lines += ["norecursedirs = cython example_tests", "filterwarnings =", "    ignore::pytest.PytestUnknownMarkWarning"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _pytest(tests: Path, files: list[str], out: Path, against: str, extra_env: dict[str, str],
            args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """pytest in a child; past `timeout` seconds it is stopped and what it wrote so far is kept."""
    command = [sys.executable, "-m", "pytest", "-p", "cuda_core_compat_plugin", "-p", "no:cacheprovider",
               "-c", str(_ini(out)), "--rootdir", str(tests), *args, *files]
    try:
        return subprocess.run(command, cwd=tests, env=_environment(against, extra_env), text=True,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        def text(b: bytes | str | None) -> str:
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

        note = f"\n[run_cuda_core_tests: stopped after {timeout:.0f} s; the cases not reached count as not run]\n"
        return subprocess.CompletedProcess(command, 124, text(exc.stdout) + note, text(exc.stderr))


def _collect(tests: Path, files: list[str], out: Path, against: str) -> dict[str, Any] | None:
    target = out / f"collect-{against.replace('.', '_')}.json"
    proc = _pytest(tests, files, out, against, {"IRONACCEL_CCT_COLLECT": str(target)}, ["--collect-only", "-q"],
                   timeout=900)
    if not target.is_file():
        sys.stderr.write(f"collection against {against} wrote nothing:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}\n")
        return None
    return json.loads(target.read_text())


def _real_cuda_core_installed() -> bool:
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('cuda.core') else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def _file_key(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _group(path: str) -> str:
    for f in CORE_FILES:
        if path == f or path.startswith(f.rstrip("/") + "/"):
            return "core"
    return "reachable (issues 10, 15)"


def _table(counts: dict[str, dict[str, int]]) -> tuple[str, dict[str, Any]]:
    head = "| file | cases | passed | failed | skipped (= failed) | xfail | errors | not run | pass % |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    totals: dict[str, dict[str, int]] = {}

    def row(name: str, c: dict[str, int]) -> str:
        cases = c["cases"]
        pct = 100.0 * c["passed"] / cases if cases else 0.0
        return (f"| {name} | {cases} | {c['passed']} | {c['failed']} | {c['skipped']} | "
                f"{c['xfailed'] + c['xpassed']} | {c['error']} | {c['not run']} | {pct:.1f} |")

    for name in sorted(counts):
        c = counts[name]
        lines.append(row(name, c))
        for key in (_group(name), "all"):
            t = totals.setdefault(key, _no_cases())
            for k, v in c.items():
                t[k] += v
    for key in ("core", "reachable (issues 10, 15)", "all"):
        if key in totals:
            lines.append(row(f"**{key}**", totals[key]))
    summary = {k: {**v, "pass_rate": (v["passed"] / v["cases"] if v["cases"] else 0.0)} for k, v in totals.items()}
    return "\n".join(lines) + "\n", summary


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tests", type=Path, help="cuda-python's cuda_core/tests folder")
    parser.add_argument("files", nargs="*", help="test files or folders, relative to the tests folder")
    parser.add_argument("--set", choices=("issue", "core", "all"), default="issue")
    parser.add_argument("--against", choices=("compat", "cuda.core"), default="compat")
    parser.add_argument("--out", type=Path, default=Path("cuda-core-tests-results"))
    parser.add_argument("--target", type=float, default=0.90)
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds for the test run (stopped past it; the cases not reached count as not run)")
    opts = parser.parse_args(argv)

    tests = opts.tests.resolve()
    if not (tests / "conftest.py").is_file():
        parser.error(f"{tests} is not cuda-python's cuda_core/tests folder (no conftest.py)")
    if opts.files:
        files = opts.files
    elif opts.set == "core":
        files = CORE_FILES
    elif opts.set == "issue":
        files = CORE_FILES + REACHABLE_FILES
    else:
        files = ["."]
    files = [f for f in files if (tests / f).exists()] or files
    out = opts.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    expected: dict[str, int] = {}  # cases per file: the larger of the two collections
    against = [opts.against] + (["cuda.core"] if opts.against == "compat" and _real_cuda_core_installed() else [])
    for implementation in against:
        collected = _collect(tests, files, out, implementation)
        per_file: dict[str, int] = {}
        for nodeid in (collected or {}).get("items", []):
            per_file[_file_key(nodeid)] = per_file.get(_file_key(nodeid), 0) + 1
        for file, n in per_file.items():
            expected[file] = max(expected.get(file, 0), n)

    started = time.time()
    results_path = out / "results.json"
    proc = _pytest(tests, files, out, opts.against, {"IRONACCEL_CCT_JSON": str(results_path)},
                   ["-q", "-rN", "--continue-on-collection-errors", f"--junitxml={out / 'junit.xml'}", *extra],
                   timeout=opts.timeout)
    (out / "pytest.log").write_text(proc.stdout + "\n" + proc.stderr)
    if not results_path.is_file():
        sys.stderr.write(f"pytest wrote no results (exit {proc.returncode}):\n{proc.stdout[-5000:]}\n"
                         f"{proc.stderr[-5000:]}\n")
        return 2
    results = json.loads(results_path.read_text())

    counts: dict[str, dict[str, int]] = {}
    for case in results["cases"]:
        c = counts.setdefault(case["file"], _no_cases())
        c["cases"] += 1
        c[case["outcome"]] += 1
    for file, n in expected.items():
        c = counts.setdefault(file, _no_cases())
        if n > c["cases"]:
            c["not run"] += n - c["cases"]
            c["cases"] = n
    for nodeid in results.get("collection_errors", {}):
        if nodeid.endswith(".py") and nodeid not in counts:
            counts[nodeid] = _no_cases()

    table, summary = _table(counts)
    stopped = " (stopped at --timeout)" if proc.returncode == 124 else ""
    header = (f"cuda.core tests from {tests} against {opts.against}{stopped} "
              f"({time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(started))} UTC, "
              f"{time.time() - started:.0f} s; skips count as failures)\n\n")
    errors = results.get("collection_errors", {})
    if errors:
        table += "\nCollection errors (their cases count as not run):\n\n" + "".join(
            f"- `{k}`: {v}\n" for k, v in sorted(errors.items()))
    (out / "table.md").write_text(header + table)
    total = summary.get("all", {"pass_rate": 0.0})
    (out / "summary.json").write_text(json.dumps({"against": opts.against, "tests": str(tests), "files": files,
                                                  "groups": summary, "per_file": counts,
                                                  "target": opts.target}, indent=1))
    print(header + table)
    rate = float(total["pass_rate"])  # type: ignore[arg-type]
    print(f"pass rate {100 * rate:.1f}% (target {100 * opts.target:.0f}%); details in {out}")
    return 0 if rate >= opts.target else 1


if __name__ == "__main__":
    sys.exit(main())

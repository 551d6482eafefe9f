#!/usr/bin/env python3
"""Run numba-cuda's own tests on cuda.core and on ironaccel_cuda_compat.cuda_core, and compare them test by test.

    python3 ironaccel-cuda-compat/tools/run_numba_cuda_tests.py [--out DIR] [--set issue|all]
        [--against both|compat|cuda.core] [--numpy-wheel W] [--wheel W]... [--site DIR]...
        [--numba-cuda-testing TESTING [--no-make]] [--baseline RESULTS] [--only MODULE]... [--timeout S]
        [-- PYTEST ARGS]

The tests are those numba-cuda installs (`numba.cuda.tests`, run with `pytest --pyargs`); none is in this
repository.  The selection runs twice: on the installed cuda-core (the baseline; nothing installed), then with
the compat installed in every Python process of the run (pytest, its xdist workers, the processes the tests
start): a generated sitecustomize.py, first on PYTHONPATH, calls `cuda_core.install()`, and a process where that
fails exits 97.  Before the runs a check process (and its child) must see `cuda.core` as the compat and numba's
`launch` as the compat's; each pytest process checks `cuda.core` again when it starts.  Otherwise: exit 2.

--set issue (default): numba.cuda.tests.cudadrv, .doc_examples, and the .cudapy modules of launches, streams,
linking, IPC, exceptions and device arrays that the installed version has (printed); all: numba.cuda.tests.
--only MODULE (repeatable): those dotted modules instead.

numba-cuda 0.30 needs numpy < 2.5 and numba.cuda.testing imports filecheck: --numpy-wheel/--wheel W install
wheels (pip --no-index --no-deps --target) into a private folder, --site DIR names a ready one; both go first on
every test process's PYTHONPATH.  CUDATestCase uses a fixture of numba-cuda's repository file testing/conftest.py,
which wheels lack: the runner loads (-p) the installed module that defines it, else TESTING/conftest.py, else a
built-in equivalent.  TESTING, numba-cuda's testing/ folder of the installed version, is copied to
DIR/numba-cuda-testing, where `make` builds the linking tests' binaries with nvcc (not with --no-make) for
NUMBA_CUDA_TEST_BIN_DIR (without TESTING those tests skip); its pytest.ini's filterwarnings apply (else the same
list, built in: warnings are errors), less lines whose category does not import.

A regression is a test id (junit, xunit1) that passed on cuda.core and did not pass on the compat (failed,
error, skipped, xfail, not run).  Crashes: xdist's "node down" / "crashed while running", pytest ending on a
signal (exit < 0 or > 128: the test that started and did not finish), a child dying on a signal in a failure
message.  Exit 0 only with no regression, no crash on the compat (but of a test that crashes on cuda.core too)
and no side stopped at --timeout (seconds per side); else 1.  --baseline RESULTS: cuda.core's side from an
earlier DIR/results.json (implies --against compat).  Output: the table per module (stdout, DIR/table.md),
DIR/regressions.md, DIR/results.json, DIR/summary.json, and per side DIR/cuda_core/ and DIR/compat/ (junit.xml,
pytest.log, events.jsonl, processes.jsonl).  CUDA_HOME defaults to /usr/local/cuda when that has cuda.h.

On the GPU machine (offline; the numpy 2.4 and filecheck wheels and numba-cuda's testing/ folder carried):

    python3 -m pip install -q --no-index --no-deps --no-build-isolation ./ironaccel-core ./ironaccel-cuda \\
        ./ironaccel-cuda-compat
    PATH=/usr/local/cuda/bin:$PATH python3 ironaccel-cuda-compat/tools/run_numba_cuda_tests.py --out /tmp/nc \\
        --numpy-wheel numpy-2.4.6-cp312-*.whl --wheel filecheck-1.0.3-py3-none-any.whl \\
        --numba-cuda-testing numba-cuda/testing --timeout 240 -- -n 8 --timeout 120
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import pkgutil
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent

SIDES = ("cuda.core", "compat")
COMPAT_MODULE = "ironaccel_cuda_compat.cuda_core"
TESTS_PACKAGE = "numba.cuda.tests"
FIXTURE = "initialize_from_pytest_config"
INSTALL_FAILED_EXIT = 97

#: the packages of numba.cuda.tests that --set issue runs whole
ISSUE_PACKAGES = ("cudadrv", "doc_examples")
#: numba.cuda.tests.cudapy modules of --set issue (those the installed version has): launches and their
#: configurations, streams, linking (compile_ptx and the TEST_BIN_DIR binaries, extensions linking CUDA C),
#: IPC and the processes that carry kernels (spawn, fork, pickled dispatchers), exceptions, device arrays
ISSUE_CUDAPY = (
    "test_dispatcher", "test_launch_config_sensitive", "test_forall", "test_cuda_jit_no_types",
    "test_stream_api", "test_multithreads", "test_multiprocessing", "test_serialize",
    "test_compiler", "test_extending", "test_cooperative_groups",
    "test_ipc",
    "test_exception", "test_userexc", "test_errors",
    "test_array", "test_array_args", "test_device_array_capture", "test_cuda_array_interface",
    "test_retrieve_autoconverted_arrays",
)
#: and any other cudapy module whose name says one of these
ISSUE_CUDAPY_WORDS = re.compile(r"launch|stream|link|ipc|exception|userexc|event|device_?array|multiprocess|"
                                r"multithread|cooperative")

#: numba-cuda's testing/pytest.ini filterwarnings (v0.30.4), used when no TESTING folder is given
UPSTREAM_FILTERWARNINGS = (
    "error",
    r"ignore:.*Grid size .* will likely result in GPU under-utilization.+:"
    r"numba.cuda.core.errors.NumbaPerformanceWarning",
    r"ignore:.*Grid size .* will likely result in GPU under-utilization.+:numba.core.errors.NumbaPerformanceWarning",
    r"ignore:.*dynamic initialization is not supported for a function-scope static __shared__.*:UserWarning",
    r"ignore:.*The keyword argument .nopython=False. was supplied.+:numba.core.errors.NumbaDeprecationWarning",
    r"ignore:.*nvJitLink is not installed or too old.*:RuntimeWarning",
    r"ignore:.*libnvJitLink.*is too old.*:RuntimeWarning",
    r"ignore:.*float16 relies on LTO for performance. LTO requires nvjitlink.*:"
    r"numba.cuda.core.errors.NumbaPerformanceWarning",
    r"ignore:.*The CUDA driver version is older than the backend version.*:RuntimeWarning",
    r"ignore:.*class \"double4\" was declared deprecated.*:UserWarning",
    r"ignore:All-NaN slice encountered:RuntimeWarning",
    r"ignore:Mean of empty slice:RuntimeWarning",
    r"ignore:(invalid value|divide by zero) encountered in.+:RuntimeWarning",
    r"ignore:.*Compilation is falling back to object mode WITHOUT looplifting enabled.*:"
    r"numba.cuda.core.errors.NumbaWarning",
    r"ignore:\nCompilation is falling back to object mode WITHOUT looplifting enabled.*:numba.core.errors.NumbaWarning",
    r"ignore:overflow encountered in scalar .+:RuntimeWarning",
    r"ignore:.*Host array used in CUDA kernel will incur copy overhead.*:"
    r"numba.cuda.core.errors.NumbaPerformanceWarning",
    r"ignore:NVRTC log messages.*Architectures prior to.*are deprecated.*:UserWarning",
    r"ignore:Benchmark machine_info is different:pytest_benchmark.logger.PytestBenchmarkWarning",
)

#: appended to either list: the compat's sitecustomize imports ironaccel, whose distribution has a pytest11 plugin,
#: before pytest can mark it for assertion rewriting; that warning must not be an error
RUNNER_FILTERWARNINGS = ("ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",)

# -- files written for the test processes ---------------------------------------------------------------

SITECUSTOMIZE = '''\
"""Written by run_numba_cuda_tests.py: cuda.core is ironaccel_cuda_compat.cuda_core in every process of the run."""
import os
import sys


def _run_hidden_sitecustomize():
    """The sitecustomize this one hides (a later one on sys.path), if any, still runs."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _install_compat():
    from ironaccel_cuda_compat import cuda_core

    cuda_core.install()
    import cuda.core

    if cuda.core.__name__ != "ironaccel_cuda_compat.cuda_core":
        raise RuntimeError("after install(), cuda.core is " + cuda.core.__name__)
    log = os.environ.get("IRONACCEL_NUMBA_PROCESSES")
    if log:
        import json

        argv = [str(a)[:120] for a in getattr(sys, "orig_argv", sys.argv)[:4]]
        record = {"source": "sitecustomize", "pid": os.getpid(), "ppid": os.getppid(), "argv": argv,
                  "cuda_core": cuda.core.__name__}
        with open(log, "a") as f:
            f.write(json.dumps(record) + "\\n")


try:
    _run_hidden_sitecustomize()
except Exception as exc:
    sys.stderr.write(f"run_numba_cuda_tests: the sitecustomize hidden by the compat's failed: {exc!r}\\n")
try:
    _install_compat()
except BaseException as exc:
    sys.stderr.write(f"run_numba_cuda_tests: ironaccel_cuda_compat.cuda_core.install() failed in this process "
                     f"(pid {os.getpid()}): {exc!r}\\n")
    sys.stderr.flush()
    os._exit({exit_code})
'''.replace("{exit_code}", str(INSTALL_FAILED_EXIT))

RUN_PLUGIN = "ironaccel_numba_run"
RUN_PLUGIN_SOURCE = '''\
"""Written by run_numba_cuda_tests.py: its pytest plugin (RunPlugin), loaded from the runner's file."""
import importlib.util
import sys

_spec = importlib.util.spec_from_file_location("_ironaccel_numba_runner", {runner!r})
_runner = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _runner
_spec.loader.exec_module(_runner)


def pytest_configure(config):
    _runner.RunPlugin.start(config)
'''

FIXTURES_PLUGIN = "ironaccel_numba_fixtures"
FIXTURES_PLUGIN_SOURCE = '''\
"""Written by run_numba_cuda_tests.py: what numba-cuda's testing/conftest.py gives its tests (wheels lack it)."""
import pytest


def pytest_addoption(parser):
    parser.addoption("--dump-failed-filechecks", action="store_true",
                     help="Dump reproducers for FileCheck tests that fail.")


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")
'''

UPSTREAM_CONFTEST_PLUGIN = "numba_cuda_testing_conftest"

PREFLIGHT = r'''
import importlib, importlib.util, json, os, subprocess, sys
info = {"python": sys.version.split()[0], "executable": sys.executable}
def attempt(key, fn):
    try:
        info[key] = fn()
    except BaseException as exc:
        info[key + "_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:400]
def core():
    import cuda.core
    return {"name": cuda.core.__name__, "file": getattr(cuda.core, "__file__", None),
            "version": getattr(cuda.core, "__version__", None)}
attempt("cuda_core", core)
def child():
    p = subprocess.run([sys.executable, "-c", "import cuda.core; print(cuda.core.__name__)"], capture_output=True,
                       text=True, timeout=300)
    return (p.stdout.strip().splitlines() or [""])[-1] or ("exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
attempt("cuda_core_in_child", child)
attempt("numpy", lambda: importlib.import_module("numpy").__version__)
attempt("numba", lambda: importlib.import_module("numba").__version__)
def numba_cuda():
    importlib.import_module("numba.cuda")
    from importlib import metadata
    try:
        return metadata.version("numba-cuda")
    except metadata.PackageNotFoundError:
        return "unknown"
attempt("numba_cuda", numba_cuda)
attempt("numba_launch", lambda: importlib.import_module("numba.cuda.dispatcher").launch.__module__)
attempt("numba_testing", lambda: importlib.import_module("numba.cuda.testing").__name__)
attempt("tests_root", lambda: os.path.dirname(os.path.abspath(importlib.import_module("numba.cuda.tests").__file__)))
for name in ("xdist", "pytest_timeout", "pytest_benchmark", "filecheck", "cffi"):
    attempt(name, lambda name=name: importlib.util.find_spec(name) is not None)
attempt("pytest", lambda: importlib.import_module("pytest").__version__)
def categories():
    found = {}
    for module in json.loads(os.environ.get("IRONACCEL_NUMBA_CATEGORIES", "[]")):
        try:
            importlib.import_module(module)
            found[module] = True
        except BaseException:
            found[module] = False
    return found
attempt("warning_categories", categories)
print("IRONACCEL_PREFLIGHT " + json.dumps(info))
'''


def write_sitecustomize(directory: Path) -> Path:
    """The compat's sitecustomize.py in `directory` (put that folder first on PYTHONPATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "sitecustomize.py"
    path.write_text(SITECUSTOMIZE)
    return path


def write_run_plugin(directory: Path) -> str:
    """The module that loads RunPlugin from this file; returns its name for `-p`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{RUN_PLUGIN}.py").write_text(RUN_PLUGIN_SOURCE.format(runner=str(Path(__file__).resolve())))
    return RUN_PLUGIN


# -- what runs inside pytest ----------------------------------------------------------------------------


def first_line(text: str | None, limit: int = 300) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def _report_reason(report: Any) -> str:
    longrepr = getattr(report, "longrepr", None)
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return first_line(str(longrepr[2]))
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return first_line(str(crash.message))
    return first_line(str(longrepr))


def process_identity_problem(against: str, modules: Mapping[str, Any]) -> str | None:
    """Why this process's `cuda.core` is not the one `against` wants (None when it is)."""
    core = modules.get("cuda.core")
    name = str(getattr(core, "__name__", "")) if core is not None else None
    if against == "compat":
        if name != COMPAT_MODULE:
            return (f"cuda.core is {name or 'not imported'} in this process, not {COMPAT_MODULE}: the generated "
                    f"sitecustomize did not run (is its folder first on PYTHONPATH?)")
        return None
    if any(m == "ironaccel_cuda_compat" or m.startswith("ironaccel_cuda_compat.") for m in modules):
        return "ironaccel_cuda_compat is imported in a cuda.core baseline process"
    if name is not None and not name.startswith("cuda.core"):
        return f"cuda.core is {name} in a cuda.core baseline process"
    return None


def process_record(modules: Mapping[str, Any], worker: str, against: str) -> dict[str, Any]:
    """What one pytest process ran on: its cuda.core and the module of numba's `launch`."""
    core = modules.get("cuda.core")
    dispatcher = modules.get("numba.cuda.dispatcher")
    launch = getattr(dispatcher, "launch", None) if dispatcher is not None else None
    return {"source": "pytest", "pid": os.getpid(), "worker": worker, "against": against,
            "cuda_core": getattr(core, "__name__", None) if core is not None else None,
            "cuda_core_file": getattr(core, "__file__", None) if core is not None else None,
            "numba_launch": getattr(launch, "__module__", None) if launch is not None else None}


class RunPlugin:
    """The runner's pytest plugin, in every pytest process of a run (controller and xdist workers).

    At start it checks that `cuda.core` is what the side wants (else pytest exits 2); the controller logs each
    test's start and reports to IRONACCEL_NUMBA_EVENTS (JSON lines: what a crash or a kill leaves behind); each
    process adds its record (process_record) to IRONACCEL_NUMBA_PROCESSES at its start and at its end.
    """

    def __init__(self, against: str, events: str | None, processes: str | None, worker: str) -> None:
        self.against, self.events_path, self.processes_path, self.worker = against, events, processes, worker
        self._events: Any = None

    @classmethod
    def start(cls, config: Any) -> RunPlugin:
        import pytest

        plugin = cls(os.environ.get("IRONACCEL_NUMBA_AGAINST", "compat"), os.environ.get("IRONACCEL_NUMBA_EVENTS"),
                     os.environ.get("IRONACCEL_NUMBA_PROCESSES"), os.environ.get("PYTEST_XDIST_WORKER", "controller"))
        problem = process_identity_problem(plugin.against, sys.modules)
        record = {**process_record(sys.modules, plugin.worker, plugin.against), "at": "start"}
        plugin._append_record({**record, "problem": problem} if problem else record)  # kept if the process dies
        if problem is not None:
            pytest.exit(f"run_numba_cuda_tests: {problem}", returncode=2)
        config.pluginmanager.register(plugin, "ironaccel-numba-run")
        return plugin

    def _append_record(self, record: dict[str, Any]) -> None:
        if self.processes_path:
            with open(self.processes_path, "a") as f:
                f.write(json.dumps(record) + "\n")

    def _event(self, record: dict[str, Any]) -> None:
        if not self.events_path or self.worker != "controller":  # under xdist the controller sees every report
            return
        if self._events is None:
            self._events = open(self.events_path, "a", buffering=1)  # open for the whole session
        self._events.write(json.dumps(record) + "\n")

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self._event({"e": "start", "id": nodeid})

    def pytest_runtest_logreport(self, report: Any) -> None:
        self._event({"e": "report", "id": report.nodeid, "when": report.when, "outcome": report.outcome,
                     "xfail": hasattr(report, "wasxfail"), "reason": _report_reason(report),
                     "s": round(float(getattr(report, "duration", 0.0) or 0.0), 4)})

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self._event({"e": "collect", "id": report.nodeid, "outcome": "error", "reason": _report_reason(report)})

    def pytest_unconfigure(self, config: Any) -> None:
        self._append_record({**process_record(sys.modules, self.worker, self.against), "at": "end"})
        if self._events is not None:
            self._events.close()
            self._events = None


# -- selection and discovery ----------------------------------------------------------------------------


def discover_selection(tests_root: Path, which: str = "issue") -> list[str]:
    """The dotted test modules/packages of `which` that exist below `tests_root` (numba/cuda/tests)."""
    if which == "all":
        return [TESTS_PACKAGE]
    chosen = [f"{TESTS_PACKAGE}.{p}" for p in ISSUE_PACKAGES if (tests_root / p / "__init__.py").is_file()]
    cudapy = tests_root / "cudapy"
    names = sorted(m.name for m in pkgutil.iter_modules([str(cudapy)]) if not m.ispkg and m.name.startswith("test_"))
    chosen += [f"{TESTS_PACKAGE}.cudapy.{n}" for n in names if n in ISSUE_CUDAPY or ISSUE_CUDAPY_WORDS.search(n)]
    return chosen


def find_fixture_provider(package_root: Path, tests_root: Path) -> tuple[str, str | None]:
    """Where the installed numba-cuda defines `initialize_from_pytest_config`.

    ("plugin", dotted module) for a module to load with -p; ("auto", path) for a conftest.py that pytest loads
    itself for the selected tests (one in tests_root or a folder above it, up to package_root); ("none", None).
    `package_root` is the folder holding `numba/` (dotted names are relative to it).
    """
    define = re.compile(rf"^\s*def {FIXTURE}\s*\(", re.M)
    above = {tests_root, *(p for p in tests_root.parents if p == package_root or package_root in p.parents)}
    found: list[Path] = []
    for path in sorted(package_root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        inside_tests = tests_root in path.parents
        if inside_tests and not (path.name == "conftest.py" and path.parent == tests_root):
            continue
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if define.search(text):
            found.append(path)
    for path in found:
        if path.name == "conftest.py" and path.parent in above:
            return "auto", str(path)
    for path in found:
        rel = path.relative_to(package_root).with_suffix("")
        return "plugin", ".".join(rel.parts)
    return "none", None


def read_filterwarnings(ini: Path) -> list[str]:
    """The filterwarnings lines of a pytest.ini."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ini)
    if not parser.has_option("pytest", "filterwarnings"):
        return []
    return [line.strip() for line in parser.get("pytest", "filterwarnings").splitlines() if line.strip()]


def category_module(line: str) -> str | None:
    """The module of a filterwarnings line's category ("action:message:category:module:lineno"), if dotted."""
    parts = line.split(":")
    category = parts[2].strip() if len(parts) > 2 else ""
    return category.rsplit(".", 1)[0] if "." in category else None


def usable_filters(lines: Iterable[str], importable: Mapping[str, bool]) -> tuple[list[str], list[str]]:
    """(kept, dropped): a line whose category's module does not import would stop pytest (UsageError)."""
    kept: list[str] = []
    dropped: list[str] = []
    for line in lines:
        module = category_module(line)
        (dropped if module is not None and not importable.get(module, False) else kept).append(line)
    return kept, dropped


def write_ini(path: Path, filterwarnings: Iterable[str], namespace_packages: bool) -> Path:
    """Our own pytest ini (no configuration of this repository or of site-packages applies)."""
    lines = ["[pytest]", "minversion = 8.0", "junit_family = xunit1", "junit_logging = no"]
    if namespace_packages:
        lines.append("consider_namespace_packages = true")  # numba-cuda's own setting (pytest 8.1+)
    fw = list(filterwarnings)
    if fw:
        lines += ["filterwarnings ="] + [f"    {line}" for line in fw]
    path.write_text("\n".join(lines) + "\n")
    return path


# -- environments ----------------------------------------------------------------------------------------


def child_environment(base: Mapping[str, str], against: str, *, plugin_dir: Path, boot_dir: Path | None,
                      sites: Iterable[str | Path] = (), sources: Iterable[str] = (),
                      extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a side's processes: PYTHONPATH = [boot (compat)] + plugins + sites + sources + old."""
    env = dict(base)
    paths = ([str(boot_dir)] if against == "compat" and boot_dir is not None else [])
    paths += [str(plugin_dir), *(str(s) for s in sites), *sources]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["IRONACCEL_NUMBA_AGAINST"] = against
    env.pop("IRONACCEL_REQUIRE", None)
    env.pop("PYTEST_ADDOPTS", None)
    if not env.get("CUDA_HOME") and not env.get("CUDA_PATH") and Path("/usr/local/cuda/include/cuda.h").is_file():
        env["CUDA_HOME"] = "/usr/local/cuda"  # CUDA headers for the tests that include them
    env.update(extra or {})
    return env


def install_wheels(wheels: list[Path], target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
               "--disable-pip-version-check", "--upgrade", "--target", str(target), *map(str, wheels)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"run_numba_cuda_tests: installing {', '.join(map(str, wheels))} failed:\n"
                         f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def preflight(env: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", PREFLIGHT], env=dict(env), cwd=cwd, capture_output=True, text=True,
                          timeout=900)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("IRONACCEL_PREFLIGHT "):
            info: dict[str, Any] = json.loads(line.split(" ", 1)[1])
            info["exit"] = proc.returncode
            return info
    return {"exit": proc.returncode, "error": f"the check process wrote nothing (exit {proc.returncode}): "
                                              f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}"}


def preflight_problems(info: Mapping[str, Any], against: str) -> list[str]:
    """What in a side's check process (PREFLIGHT's output) makes the run meaningless."""
    problems = []
    if "error" in info:
        return [str(info["error"])]
    if info.get("exit") == INSTALL_FAILED_EXIT:
        problems.append("the compat's install() failed in the check process (sitecustomize, exit 97)")
    name = (info.get("cuda_core") or {}).get("name")
    child = info.get("cuda_core_in_child")
    launch = info.get("numba_launch")
    if "cuda_core_error" in info:
        problems.append(f"import cuda.core failed: {info['cuda_core_error']}")
    elif against == "compat":
        if name != COMPAT_MODULE:
            problems.append(f"cuda.core is {name}, not {COMPAT_MODULE}")
        if child != COMPAT_MODULE:
            problems.append(f"in a child process cuda.core is {child!r}, not {COMPAT_MODULE}")
        if launch is not None and not str(launch).startswith("ironaccel"):
            problems.append(f"numba.cuda.dispatcher.launch comes from {launch}, not the compat")
    else:
        if not str(name).startswith("cuda.core") or not str(child).startswith("cuda.core"):
            problems.append(f"the baseline's cuda.core is {name} (child: {child}), not NVIDIA's cuda.core")
        if launch is not None and str(launch).startswith("ironaccel"):
            problems.append(f"numba.cuda.dispatcher.launch comes from {launch} in the baseline")
    for key, hint in (("numba_cuda", "numba-cuda 0.30 needs numpy < 2.5: --numpy-wheel"),
                      ("numba_testing", "numba.cuda.testing imports filecheck: --wheel filecheck-*.whl"),
                      ("tests_root", "")):
        if f"{key}_error" in info:
            problems.append(f"{key}: {info[key + '_error']}" + (f" ({hint})" if hint else ""))
    return problems


def process_problems(records: list[dict[str, Any]], against: str) -> list[str]:
    """What the processes' own records (processes.jsonl) say against the side."""
    pytest_records = [r for r in records if r.get("source") == "pytest"]
    problems = [f"pid {r.get('pid')} ({r.get('worker')}): {r['problem']}" for r in pytest_records if r.get("problem")]
    if not pytest_records:
        problems.append("no pytest process recorded what it ran on")
    for r in pytest_records:
        if r.get("problem"):
            continue
        core, launch = r.get("cuda_core"), r.get("numba_launch")
        if against == "compat":
            if core != COMPAT_MODULE:
                problems.append(f"pid {r.get('pid')} ({r.get('worker')}): cuda.core was {core}")
            if launch is not None and not str(launch).startswith("ironaccel"):
                problems.append(f"pid {r.get('pid')} ({r.get('worker')}): numba's launch was {launch}")
        elif core is not None and not str(core).startswith("cuda.core"):
            problems.append(f"pid {r.get('pid')} ({r.get('worker')}): cuda.core was {core} in the baseline")
    return problems


# -- results ---------------------------------------------------------------------------------------------


def module_of(test_id: str) -> str:
    """The dotted module of a test id ("numba/cuda/tests/x/test_y.py::T::t" -> "numba.cuda.tests.x.test_y")."""
    file = test_id.split("::", 1)[0]
    return (file[:-3] if file.endswith(".py") else file).replace("/", ".")


def short_module(module: str) -> str:
    prefix = TESTS_PACKAGE + "."
    return module[len(prefix):] if module.startswith(prefix) else module


def junit_test_id(classname: str, name: str, file: str | None) -> str:
    """A junit testcase's pytest node id.

    xunit1's `file` is where the test function is defined: the module's file, except for a function a decorator
    of another module made (numba's run_test_in_subprocess: tests/support.py).  Where `file` does not match the
    classname, the module is the classname up to its last part that starts with test_.
    """
    if file and not classname:  # a collection error
        return file
    if file:
        module = module_of(file)
        if classname == module or classname.startswith(module + "."):
            return "::".join([file, *[p for p in classname[len(module):].split(".") if p], name])
    if not classname:  # a collection error without `file`: name is the dotted module
        return name.replace(".", "/") + ".py"
    comps = classname.split(".")
    at = max((i for i, c in enumerate(comps) if c.startswith("test_")), default=len(comps) - 1)
    return "::".join(["/".join(comps[:at + 1]) + ".py", *comps[at + 1:], name])


_RANK = {"passed": 0, "xfailed": 1, "skipped": 2, "failed": 3, "error": 4}


def _keep(cases: dict[str, dict[str, Any]], test_id: str, case: dict[str, Any]) -> None:
    """A test reported twice keeps its worse outcome."""
    old = cases.get(test_id)
    if old is None or _RANK.get(case["outcome"], 5) > _RANK.get(old["outcome"], 5):
        cases[test_id] = case


def parse_junit(path: Path) -> dict[str, dict[str, Any]]:
    """Every testcase of a junit file: {test id: {outcome, reason, module, seconds, detail}}."""
    cases: dict[str, dict[str, Any]] = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        classname, name = tc.get("classname", ""), tc.get("name", "")
        if not classname and not name:
            continue  # what an interrupted run writes for the test it stopped
        test_id = junit_test_id(classname, name, tc.get("file"))
        fail, err, skip = tc.find("failure"), tc.find("error"), tc.find("skipped")
        detail = ""
        if fail is not None:
            outcome, reason, detail = "failed", fail.get("message") or first_line(fail.text), fail.text or ""
        elif err is not None:
            outcome, reason, detail = "error", err.get("message") or first_line(err.text), err.text or ""
            if not classname or reason == "collection failure":
                e_lines = [x[1:].strip() for x in (err.text or "").splitlines() if x.startswith("E ") and x[1:].strip()]
                reason = "collection error: " + (e_lines[0] if e_lines else first_line(err.text))
        elif skip is not None:
            outcome = "xfailed" if skip.get("type") == "pytest.xfail" else "skipped"
            reason = skip.get("message") or first_line(skip.text)
        else:
            outcome, reason = "passed", ""
        try:
            seconds = float(tc.get("time") or 0.0)
        except ValueError:
            seconds = 0.0
        _keep(cases, test_id, {"outcome": outcome, "reason": first_line(reason), "module": module_of(test_id),
                               "seconds": seconds, "detail": (detail or "")[:3000]})
    return cases


def parse_events(path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The cases of a run's events.jsonl, and the tests that started and never finished (in start order)."""
    cases: dict[str, dict[str, Any]] = {}
    started: dict[str, None] = {}
    finished: set[str] = set()
    if not path.is_file():
        return cases, []
    for line in path.read_text(errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        test_id = ev.get("id", "")
        if ev.get("e") == "start":
            started[test_id] = None
        elif ev.get("e") == "collect":
            _keep(cases, test_id, {"outcome": "error", "reason": "collection error: " + ev.get("reason", ""),
                                   "module": module_of(test_id), "seconds": 0.0, "detail": ev.get("reason", "")})
        elif ev.get("e") == "report":
            when, outcome = ev.get("when"), ev.get("outcome")
            if when == "teardown":
                finished.add(test_id)
            if ev.get("xfail"):
                result = "xfailed" if outcome != "passed" else "passed"
            elif outcome == "failed":
                result = "failed" if when == "call" else "error"
            elif outcome == "skipped":
                result = "skipped"
            elif when == "call":
                result = "passed"
            else:
                continue  # a passing setup or teardown
            reason = ev.get("reason", "") if result != "passed" else ""
            if when != "call" and result == "error":
                reason = f"[{when}] {reason}"
            _keep(cases, test_id, {"outcome": result, "reason": reason, "module": module_of(test_id),
                                   "seconds": float(ev.get("s", 0.0)), "detail": ev.get("reason", "")})
    return cases, [t for t in started if t not in finished]


XDIST_NODE_DOWN = re.compile(r"\[(gw\d+)\] node down: ?(.*)")
XDIST_CRASHED = re.compile(r"worker '?(gw\d+)'? crashed while running '?([^'\n]+?)'?\s*$", re.M)
CHILD_SIGNAL = re.compile(r"segmentation fault|core dumped|\bSIG(SEGV|ABRT|BUS|ILL|FPE|KILL)\b|died with <Signals|"
                          r"(exit ?code|return ?code|returncode|exited with|failed with code)[ =:]*-\d+", re.I)


def find_crashes(cases: Mapping[str, Mapping[str, Any]], log: str, returncode: int | None, timed_out: bool,
                 unfinished: list[str]) -> list[dict[str, Any]]:
    """The crashes of one run: {test (id or None), module, kind (worker, process, child), detail}."""
    crashes: dict[str, dict[str, Any]] = {}
    unattributed: list[dict[str, Any]] = []
    crashed_workers: dict[str, int] = {}

    def add(test: str | None, kind: str, detail: str) -> None:
        entry = {"test": test, "module": module_of(test) if test else None, "kind": kind, "detail": detail[:300],
                 "count": 1}
        if test is None:
            unattributed.append(entry)
        elif test not in crashes or crashes[test]["kind"] == "child":
            crashes[test] = entry
        elif kind == "worker":
            crashes[test]["count"] += 1  # xdist gives a crashed worker's tests to the next one

    for m in XDIST_CRASHED.finditer(log):
        crashed_workers[m.group(1)] = crashed_workers.get(m.group(1), 0) + 1
        add(m.group(2), "worker", m.group(0).strip())
    if "maximum crashed workers reached" in log:
        add(None, "worker", "xdist: maximum crashed workers reached; the tests left were not run")
    for test_id, case in cases.items():
        text = f"{case.get('reason', '')}\n{case.get('detail', '')}"
        found = XDIST_CRASHED.search(text)
        if found:
            if test_id not in crashes:
                add(test_id, "worker", found.group(0).strip())
        elif case.get("outcome") in ("failed", "error") and CHILD_SIGNAL.search(text):
            if test_id not in crashes:
                add(test_id, "child", "a process the test started died on a signal: " + first_line(case.get("reason")))
    for m in XDIST_NODE_DOWN.finditer(log):
        if crashed_workers.get(m.group(1), 0) > 0:
            crashed_workers[m.group(1)] -= 1
        else:
            add(None, "worker", m.group(0).strip())
    if returncode is not None and not timed_out and (returncode < 0 or returncode > 128):
        sig = -returncode if returncode < 0 else returncode - 128
        try:
            signame = signal.Signals(sig).name
        except ValueError:
            signame = f"signal {sig}"
        detail = f"pytest ended on {signame} (exit {returncode})"
        if unfinished:
            add(unfinished[-1], "process", detail)
        else:
            add(None, "process", detail)
    return list(crashes.values()) + unattributed


def compare(base: Mapping[str, Mapping[str, Any]] | None, compat: Mapping[str, Mapping[str, Any]] | None,
            base_crashes: list[dict[str, Any]] | None = None,
            compat_crashes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per module counts, the regressions (passed on cuda.core, not on the compat) and the failing crashes."""
    base_crashes, compat_crashes = base_crashes or [], compat_crashes or []
    sides = {"cuda.core": base, "compat": compat}
    ids = sorted(set(base or {}) | set(compat or {}))
    crashed = {side: {c["test"]: c for c in crashes if c.get("test")}
               for side, crashes in (("cuda.core", base_crashes), ("compat", compat_crashes))}
    rows: dict[str, dict[str, int]] = {}
    regressions = []
    keys = ("cases", "passed cuda.core", "passed compat", "skipped cuda.core", "skipped compat", "regressions",
            "crashes cuda.core", "crashes compat")
    for test_id in ids:
        case = (compat or {}).get(test_id) or (base or {}).get(test_id) or {}
        module = str(case.get("module") or module_of(test_id))
        row = rows.setdefault(module, dict.fromkeys(keys, 0))
        row["cases"] += 1
        for side, cases in sides.items():
            outcome = (cases or {}).get(test_id, {}).get("outcome")
            row[f"passed {side}"] += outcome == "passed"
            row[f"skipped {side}"] += outcome == "skipped"
        if base is not None and compat is not None and base.get(test_id, {}).get("outcome") == "passed":
            got = compat.get(test_id)
            if got is None or got.get("outcome") != "passed":
                if test_id in crashed["compat"]:
                    reason = "crashed: " + crashed["compat"][test_id]["detail"]
                elif got is None:
                    reason = "not run on the compat"
                else:
                    reason = f"{got['outcome']} on the compat: {got.get('reason') or '(no message)'}"
                regressions.append({"test": test_id, "module": module, "cuda.core": "passed",
                                    "compat": got.get("outcome") if got else "not run", "reason": first_line(reason)})
                row["regressions"] += 1
    for side, crashes in (("cuda.core", base_crashes), ("compat", compat_crashes)):
        for c in crashes:
            module = c.get("module") or "(no test)"
            rows.setdefault(module, dict.fromkeys(keys, 0))[f"crashes {side}"] += 1
    failing_crashes = [c for c in compat_crashes if not c.get("test") or c["test"] not in crashed["cuda.core"]]
    totals = dict.fromkeys(keys, 0)
    for row in rows.values():
        for k, v in row.items():
            totals[k] += v
    return {"rows": rows, "totals": totals, "regressions": regressions, "failing_crashes": failing_crashes}


def render_table(comparison: Mapping[str, Any], sides: Iterable[str]) -> str:
    """The markdown table per module (the sides that ran; regressions need both)."""
    sides = [s for s in SIDES if s in set(sides)]
    both = len(sides) == 2
    head = ["module (numba.cuda.tests.)", "cases"] + [f"passed on {s}" for s in sides]
    head += [f"skipped on {s}" for s in sides]
    if both:
        head.append("pass on cuda.core but not on compat")
    head += [f"crashes on {s}" for s in sides]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]

    def cells(name: str, row: Mapping[str, int]) -> str:
        values = [row["cases"], *(row[f"passed {s}"] for s in sides), *(row[f"skipped {s}"] for s in sides)]
        if both:
            values.append(row["regressions"])
        values += [row[f"crashes {s}"] for s in sides]
        return "| " + " | ".join([name, *map(str, values)]) + " |"

    for module in sorted(comparison["rows"]):
        lines.append(cells(short_module(module), comparison["rows"][module]))
    lines.append(cells("**all**", comparison["totals"]))
    return "\n".join(lines) + "\n"


def render_regressions(comparison: Mapping[str, Any], crashes: Mapping[str, list[dict[str, Any]]]) -> str:
    out = ["# numba-cuda tests that pass on cuda.core and not on the compat", ""]
    regressions = comparison["regressions"]
    out += [f"- `{r['test']}` ({r['compat']}): {r['reason']}" for r in regressions] or ["None."]
    for side in SIDES:
        if crashes.get(side):
            out += ["", f"## Crashes on {side}", ""]
            out += [f"- {c['kind']}: `{c['test'] or '(no test)'}`: {c['detail']}"
                    + (f" ({c['count']} times)" if c.get("count", 1) > 1 else "") for c in crashes[side]]
    return "\n".join(out) + "\n"


# -- running ---------------------------------------------------------------------------------------------


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGINT to the run's process group (pytest then writes its junit), SIGKILL 30 s later."""
    for sig, wait in ((signal.SIGINT, 30.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_side(side: str, selection: list[str], *, side_dir: Path, env: Mapping[str, str], ini: Path, rootdir: Path,
             plugins: list[str], extra: list[str], timeout: float) -> dict[str, Any]:
    """One pytest run of the selection; its cases, crashes and what its processes ran on."""
    side_dir.mkdir(parents=True, exist_ok=True)
    junit, log, events, processes = (side_dir / n for n in ("junit.xml", "pytest.log", "events.jsonl",
                                                             "processes.jsonl"))
    for path in (junit, events, processes):
        path.unlink(missing_ok=True)
    run_env = {**env, "IRONACCEL_NUMBA_EVENTS": str(events), "IRONACCEL_NUMBA_PROCESSES": str(processes)}
    command = [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(rootdir), "--confcutdir", str(rootdir),
               # no:benchmark: pytest-benchmark, where installed, warns under xdist and numba's ini makes that an error
               "-p", "no:cacheprovider", "-p", "no:ironaccel", "-p", "no:benchmark", *[a for p in plugins for a in ("-p", p)], "-rs",
               "--continue-on-collection-errors", f"--junitxml={junit}", *extra, "--pyargs", *selection]
    started = time.time()
    timed_out = False
    with open(log, "w") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        proc = subprocess.Popen(command, cwd=side_dir, env=run_env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
    wall = time.time() - started
    text = log.read_text(errors="replace")
    if timed_out:
        with open(log, "a") as out:
            out.write(f"\n[run_numba_cuda_tests: stopped after {timeout:.0f} s]\n")
    junit_ok = junit.is_file() and junit.stat().st_size > 0
    cases: dict[str, dict[str, Any]] = {}
    if junit_ok:
        try:
            cases = parse_junit(junit)
        except ET.ParseError:
            junit_ok = False
    event_cases, unfinished = parse_events(events)
    if not junit_ok:
        cases = event_cases
    if timed_out:
        for test_id in unfinished:
            if test_id not in cases:
                cases[test_id] = {"outcome": "error", "reason": f"[timeout] running when --timeout ({timeout:.0f} s) "
                                  f"stopped the run", "module": module_of(test_id), "seconds": 0.0, "detail": ""}
    records = []
    if processes.is_file():
        for line in processes.read_text(errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                pass
    crashes = find_crashes(cases, text, proc.returncode, timed_out, unfinished)
    return {"side": side, "returncode": proc.returncode, "timed_out": timed_out, "junit": junit_ok,
            "wall_s": round(wall, 1), "cases": cases, "crashes": crashes, "processes": records,
            "process_problems": process_problems(records, side), "log_tail": text[-4000:]}


def build_testing(testing: Path, out: Path, env: Mapping[str, str], tmp: Path, make: bool) -> dict[str, Any]:
    """Copy numba-cuda's testing/ folder to out/numba-cuda-testing and build its binaries with make."""
    target = out / "numba-cuda-testing"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(testing, target)
    result: dict[str, Any] = {"dir": str(target), "make": None}
    if not make:
        return result
    bin_dir = tmp / "bin"  # the Makefile runs `python`: this one (a script, so a virtual environment stays one)
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    path = [str(bin_dir), env.get("PATH", os.defpath)]
    if shutil.which("nvcc", path=os.pathsep.join(path)) is None and Path("/usr/local/cuda/bin/nvcc").is_file():
        path.append("/usr/local/cuda/bin")
    make_env = {**env, "PATH": os.pathsep.join(path)}
    started = time.time()
    try:
        proc = subprocess.run(["make", "-j", str(os.cpu_count() or 4)], cwd=target, env=make_env, capture_output=True,
                              text=True, timeout=600)
        result["make"] = {"exit": proc.returncode, "seconds": round(time.time() - started, 1),
                          "tail": (proc.stdout + proc.stderr)[-3000:]}
    except (OSError, subprocess.TimeoutExpired) as exc:
        result["make"] = {"exit": None, "seconds": round(time.time() - started, 1), "tail": repr(exc)}
    (out / "make.log").write_text(str(result["make"]["tail"]))
    return result


def _load_baseline(path: Path, selection: list[str]) -> dict[str, Any]:
    data = json.loads(path.read_text())
    side = data.get("sides", {}).get("cuda.core")
    if not side:
        raise SystemExit(f"run_numba_cuda_tests: {path} has no cuda.core side")
    if data.get("selection") not in (None, selection):
        print(f"note: {path} ran another selection ({' '.join(data['selection'])}); its other tests count as not run")
    return dict(side)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("numba-cuda-tests-results"))
    parser.add_argument("--set", choices=("issue", "all"), default="issue")
    parser.add_argument("--only", action="append", default=[], metavar="MODULE",
                        help="dotted test module or package to run instead of --set (repeatable)")
    parser.add_argument("--against", choices=("both", "compat", "cuda.core"), default="both")
    parser.add_argument("--numpy-wheel", "--wheel", dest="wheels", action="extend", nargs="+", type=Path, default=[],
                        metavar="WHEEL", help="wheels to install into the private site (repeatable)")
    parser.add_argument("--site", action="append", type=Path, default=[], help="a folder put first on PYTHONPATH")
    parser.add_argument("--numba-cuda-testing", type=Path, metavar="TESTING",
                        help="numba-cuda's testing/ folder (conftest.py, pytest.ini, Makefile), installed version")
    parser.add_argument("--no-make", action="store_true", help="do not build TESTING's binaries")
    parser.add_argument("--baseline", type=Path, help="an earlier results.json whose cuda.core side to compare with")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for each side's pytest run")
    parser.add_argument("--keep-temp", action="store_true")
    opts = parser.parse_args(argv)

    out = opts.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if opts.baseline is not None and opts.against == "both":
        opts.against = "compat"
    sides = list(SIDES) if opts.against == "both" else [opts.against]
    if any(a.startswith(("-n", "--numprocesses")) for a in extra) and not any(a.startswith("--dist") for a in extra):
        extra = ["--dist", "loadscope", *extra]  # numba-cuda's CUDATestCase wants a class's tests together

    tmp = Path(tempfile.mkdtemp(prefix="run-numba-cuda-"))
    try:
        return _run(opts, sides, extra, out, tmp)
    finally:
        if not opts.keep_temp:
            shutil.rmtree(tmp, ignore_errors=True)


def _run(opts: argparse.Namespace, sides: list[str], extra: list[str], out: Path, tmp: Path) -> int:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    sites = [str(s.resolve()) for s in opts.site]
    if opts.wheels:
        install_wheels([w.resolve() for w in opts.wheels], tmp / "site")
        sites.insert(0, str(tmp / "site"))
    plugin_dir, boot_dir = tmp / "plugins", tmp / "boot"
    run_plugin = write_run_plugin(plugin_dir)
    write_sitecustomize(boot_dir)
    # Here, not at the top: pytest's processes load this file by path as their plugin, without tools/ on sys.path.
    from repo_sources import missing_sources

    sources = missing_sources()

    def env_for(side: str, more: Mapping[str, str] | None = None) -> dict[str, str]:
        return child_environment(os.environ, side, plugin_dir=plugin_dir, boot_dir=boot_dir, sites=sites,
                                 sources=sources, extra=more)

    testing = opts.numba_cuda_testing.resolve() if opts.numba_cuda_testing else None
    filterwarnings: list[str] = list(UPSTREAM_FILTERWARNINGS)
    if testing is not None and (testing / "pytest.ini").is_file():
        filterwarnings = read_filterwarnings(testing / "pytest.ini")
    filterwarnings += RUNNER_FILTERWARNINGS
    modules = sorted({m for m in map(category_module, filterwarnings) if m})
    check_env = {"IRONACCEL_NUMBA_CATEGORIES": json.dumps(modules)}
    infos = {side: preflight(env_for(side, check_env), tmp) for side in sides}
    problems = [f"{side}: {p}" for side, info in infos.items() for p in preflight_problems(info, side)]
    roots = {info.get("tests_root") for info in infos.values() if info.get("tests_root")}
    if len(roots) > 1:
        problems.append(f"the sides see different numba.cuda.tests: {sorted(map(str, roots))}")
    (out / "preflight.json").write_text(json.dumps(infos, indent=1))
    if problems:
        sys.stderr.write("run_numba_cuda_tests: the setup is not right:\n" + "".join(f"  {p}\n" for p in problems))
        return 2
    info = infos[sides[0]]
    tests_root = Path(str(roots.pop()))
    rootdir = tests_root.parents[2]  # the folder holding numba/: test ids read numba/cuda/tests/...
    print(f"python {info.get('python')}, numpy {info.get('numpy')}, numba {info.get('numba')}, numba-cuda "
          f"{info.get('numba_cuda')}, pytest {info.get('pytest')}; cuda.core: "
          + ", ".join(f"{s} -> {infos[s]['cuda_core']['name']} {infos[s]['cuda_core'].get('version')}" for s in sides))
    print(f"numba.cuda.tests: {tests_root}")
    if info.get("cffi") is False:
        print("no cffi: cudadrv.test_cuda_driver and cudapy.test_cooperative_groups import it, so they fail to collect "
              "on both sides (--wheel cffi-*.whl pycparser-*.whl)")

    selection = list(opts.only) or discover_selection(tests_root, opts.set)
    if not selection:
        sys.stderr.write(f"run_numba_cuda_tests: nothing of --set {opts.set} exists in {tests_root}\n")
        return 2
    if opts.set == "issue" and not opts.only:
        present = {m.rsplit(".", 1)[1] for m in selection if ".cudapy." in m}
        missing = [n for n in ISSUE_CUDAPY if n not in present]
        if missing:
            print(f"not in this numba-cuda: cudapy.{', cudapy.'.join(missing)}")
    print(f"selection ({len(selection)}): " + " ".join(selection))

    plugins = [run_plugin]
    mode, provider = find_fixture_provider(rootdir, tests_root)
    if mode == "plugin" and provider:
        plugins.append(provider)
        fixtures = f"-p {provider} (installed)"
    elif mode == "auto":
        fixtures = f"{provider} (loaded by pytest itself)"
    elif testing is not None and (testing / "conftest.py").is_file():
        shutil.copyfile(testing / "conftest.py", plugin_dir / f"{UPSTREAM_CONFTEST_PLUGIN}.py")
        plugins.append(UPSTREAM_CONFTEST_PLUGIN)
        fixtures = f"-p {UPSTREAM_CONFTEST_PLUGIN} (a copy of {testing / 'conftest.py'})"
    else:
        (plugin_dir / f"{FIXTURES_PLUGIN}.py").write_text(FIXTURES_PLUGIN_SOURCE)
        plugins.append(FIXTURES_PLUGIN)
        fixtures = f"-p {FIXTURES_PLUGIN} (built in: --dump-failed-filechecks, {FIXTURE})"
    print(f"{FIXTURE}: {fixtures}")

    more_env: dict[str, str] = {}
    built: dict[str, Any] | None = None
    if testing is not None:
        built = build_testing(testing, out, env_for("cuda.core"), tmp, make=not opts.no_make)
        make = built.get("make")
        more_env["NUMBA_CUDA_TEST_BIN_DIR"] = str(built["dir"])
        print(f"NUMBA_CUDA_TEST_BIN_DIR={built['dir']}" + (f" (make: {make['seconds']} s)" if make else ""))
        if make is not None and make.get("exit") != 0:  # what was built still serves; a missing file fails both
            print(f"make in {built['dir']} failed (exit {make.get('exit')}), see DIR/make.log:\n"
                  f"{make.get('tail', '')[-1500:]}")
    importable = {m: all((i.get("warning_categories") or {}).get(m, False) for i in infos.values()) for m in modules}
    filterwarnings, dropped = usable_filters(filterwarnings, importable)
    if dropped:
        print("filterwarnings left out (their category does not import here): " + "; ".join(dropped))
    namespace_packages = _version_tuple(str(info.get("pytest", "0"))) >= (8, 1)
    ini = write_ini(tmp / "pytest.ini", filterwarnings, namespace_packages)
    if opts.set == "all" and not opts.only:
        extra = (["--benchmark-disable"] if info.get("pytest_benchmark") else ["--ignore-glob=*/benchmarks/*"]) + extra

    results: dict[str, dict[str, Any]] = {}
    if opts.baseline is not None:
        results["cuda.core"] = _load_baseline(opts.baseline, selection)
    for side in sides:
        print(f"--- {side}: pytest {' '.join(extra)} ({'nothing installed' if side == 'cuda.core' else 'install()'})",
              flush=True)
        results[side] = run_side(side, selection, side_dir=out / side.replace(".", "_"), env=env_for(side, more_env),
                                 ini=ini, rootdir=rootdir, plugins=plugins, extra=extra, timeout=opts.timeout)
        r = results[side]
        counts = _outcome_counts(r["cases"])
        print(f"    exit {r['returncode']}{' (stopped at --timeout)' if r['timed_out'] else ''}, {r['wall_s']} s, "
              + ", ".join(f"{v} {k}" for k, v in counts.items()) + f"; {len(r['crashes'])} crashes", flush=True)
        if not r["cases"]:
            sys.stderr.write(f"no test ran on {side}; pytest's output ends:\n{r['log_tail']}\n")

    comparison = compare(results.get("cuda.core", {}).get("cases") if "cuda.core" in results else None,
                         results.get("compat", {}).get("cases") if "compat" in results else None,
                         results.get("cuda.core", {}).get("crashes"), results.get("compat", {}).get("crashes"))
    identity = [f"{side}: {p}" for side in sides for p in results[side]["process_problems"]]
    for side in sides:
        if not results[side]["cases"]:
            identity.append(f"{side}: no test ran (exit {results[side]['returncode']})")
    compat_processes = sum(1 for r in results.get("compat", {}).get("processes", [])
                           if r.get("source") == "sitecustomize")
    both = "cuda.core" in results and "compat" in results
    stopped = [s for s in sides if results[s].get("timed_out")]
    failed = bool(comparison["regressions"] or comparison["failing_crashes"] or stopped)
    status = 2 if identity else (1 if failed else 0)

    header = (f"numba-cuda {info.get('numba_cuda')} tests ({opts.set if not opts.only else 'only'}: "
              f"{len(selection)} parts) on {' and '.join(sides)} ({started} UTC"
              + "".join(f", {s} {results[s]['wall_s']} s" for s in sides) + ")\n\n")
    table = render_table(comparison, [s for s in SIDES if s in results])
    if status == 2:
        verdict = "**not judged**: " + "; ".join(identity)
    elif not both:
        verdict = (f"**{' '.join(sides)} only** (no comparison): {len(comparison['failing_crashes'])} crashes on "
                   f"the compat" if "compat" in results else f"**{' '.join(sides)} only** (no comparison)")
    elif status == 0:
        verdict = "**every test that passes on cuda.core passes on the compat, and no process crashed**"
    else:
        verdict = (f"**{len(comparison['regressions'])} tests pass on cuda.core and not on the compat; "
                   f"{len(comparison['failing_crashes'])} crashes on the compat**")
    if stopped and status != 2:
        verdict += f" (incomplete: {' and '.join(stopped)} stopped at --timeout {opts.timeout:.0f} s)"
    notes = f"\n{verdict}\n"
    if "compat" in results:
        notes += f"\n{compat_processes} Python processes ran with the compat installed (sitecustomize).\n"
    (out / "table.md").write_text(header + table + notes)
    crashes = {s: results[s]["crashes"] for s in results if "crashes" in results[s]}
    (out / "regressions.md").write_text(render_regressions(comparison, crashes))
    slim = {s: {k: v for k, v in r.items() if k != "log_tail"} for s, r in results.items()}
    for r in slim.values():
        r["cases"] = {k: {f: v for f, v in c.items() if f != "detail"} for k, c in r.get("cases", {}).items()}
    (out / "results.json").write_text(json.dumps({"selection": selection, "tests_root": str(tests_root),
                                                  "sides": slim, "regressions": comparison["regressions"],
                                                  "failing_crashes": comparison["failing_crashes"]}, indent=1))
    summary = {"exit": status, "verdict": verdict, "set": opts.set, "selection": selection, "pytest_args": extra,
               "fixtures": fixtures, "testing": built, "preflight": infos, "modules": comparison["rows"],
               "totals": comparison["totals"], "regressions": len(comparison["regressions"]),
               "failing_crashes": len(comparison["failing_crashes"]), "problems": identity,
               "compat_processes": compat_processes,
               "sides": {s: {"returncode": r.get("returncode"), "timed_out": r.get("timed_out"),
                             "junit": r.get("junit"), "wall_s": r.get("wall_s"), "crashes": len(r.get("crashes", [])),
                             **_outcome_counts(r.get("cases", {}))} for s, r in results.items()}}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print()
    print(header + table + notes)
    for r in comparison["regressions"][:50]:
        print(f"  {r['test']}: {r['reason']}")
    if len(comparison["regressions"]) > 50:
        print(f"  ... {len(comparison['regressions']) - 50} more in {out / 'regressions.md'}")
    for c in comparison["failing_crashes"]:
        print(f"  crash ({c['kind']}) {c['test'] or ''}: {c['detail']}")
    for p in identity:
        print(f"  PROBLEM {p}")
    print(f"details in {out}")
    return status


def _outcome_counts(cases: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(("passed", "failed", "error", "skipped", "xfailed"), 0)
    for case in cases.values():
        counts[case["outcome"]] = counts.get(case["outcome"], 0) + 1
    return counts


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:2]) or (0,)


if __name__ == "__main__":
    sys.exit(main())

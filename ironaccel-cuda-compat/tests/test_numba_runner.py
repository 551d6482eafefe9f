"""tools/run_numba_cuda_tests.py without a GPU: selection, junit and event parsing, crashes, the comparison, the
compat's sitecustomize, and whole runs over a fake numba-cuda (a fake `numba` and `cuda.core` made in tmp_path).

numba-cuda's own tests run through the runner on the GPU machine only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

RUNNER_PATH = Path(__file__).resolve().parents[1] / "tools" / "run_numba_cuda_tests.py"
COMPAT = "ironaccel_cuda_compat.cuda_core"


def _load_runner() -> ModuleType:
    if str(RUNNER_PATH.parent) not in sys.path:  # as when it runs as a script: its sibling modules import
        sys.path.insert(0, str(RUNNER_PATH.parent))
    spec = importlib.util.spec_from_file_location("run_numba_cuda_tests_under_test", RUNNER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


R = _load_runner()


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


# -- selection and discovery --------------------------------------------------------------------------------


def test_issue_selection_keeps_the_parts_the_installed_package_has(tmp_path: Path) -> None:
    tests = tmp_path / "numba" / "cuda" / "tests"
    _write(tests, {"__init__.py": "", "cudadrv/__init__.py": "", "doc_examples/__init__.py": "",
                   "nrt/__init__.py": "", "cudapy/__init__.py": "", "cudapy/test_ipc.py": "",
                   "cudapy/test_stream_api.py": "", "cudapy/test_dispatcher.py": "", "cudapy/test_math.py": "",
                   "cudapy/test_new_launch_bounds.py": "", "cudapy/cache_usecases.py": "",
                   "cudapy/test_exception.py": "", "cudapy/test_atomics.py": ""})
    got = R.discover_selection(tests, "issue")
    assert got == ["numba.cuda.tests.cudadrv", "numba.cuda.tests.doc_examples",
                   "numba.cuda.tests.cudapy.test_dispatcher", "numba.cuda.tests.cudapy.test_exception",
                   "numba.cuda.tests.cudapy.test_ipc", "numba.cuda.tests.cudapy.test_new_launch_bounds",
                   "numba.cuda.tests.cudapy.test_stream_api"]
    (tests / "doc_examples" / "__init__.py").unlink()  # a part the package lacks is left out
    assert "numba.cuda.tests.doc_examples" not in R.discover_selection(tests, "issue")
    assert R.discover_selection(tests, "all") == ["numba.cuda.tests"]


def test_fixture_provider_is_found_where_the_package_defines_it(tmp_path: Path) -> None:
    root = tmp_path / "numba_cuda"
    tests = root / "numba" / "cuda" / "tests"
    use = '@pytest.mark.usefixtures("initialize_from_pytest_config")\nclass CUDATestCase: pass\n'
    define = "import pytest\n@pytest.fixture(scope='class')\ndef initialize_from_pytest_config(request):\n    pass\n"
    _write(root, {"numba/cuda/testing.py": use, "numba/cuda/tests/__init__.py": "",
                  "numba/cuda/tests/cudapy/conftest.py": define})  # a conftest deeper than tests/ does not count
    assert R.find_fixture_provider(root, tests) == ("none", None)
    _write(root, {"numba/cuda/testing/conftest.py": define})
    assert R.find_fixture_provider(root, tests) == ("plugin", "numba.cuda.testing.conftest")
    _write(root, {"numba/cuda/conftest.py": define})  # above tests/: pytest loads it itself
    assert R.find_fixture_provider(root, tests) == ("auto", str(root / "numba" / "cuda" / "conftest.py"))


def test_filterwarnings_lines_whose_category_does_not_import_are_left_out(tmp_path: Path) -> None:
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\naddopts = -q\nfilterwarnings =\n    error\n    ignore:a.*b:RuntimeWarning\n"
                   "    ignore:Grid (size):numba.cuda.core.errors.NumbaPerformanceWarning\n")
    lines = R.read_filterwarnings(ini)
    assert lines == ["error", "ignore:a.*b:RuntimeWarning", "ignore:Grid (size):numba.cuda.core.errors."
                                                             "NumbaPerformanceWarning"]
    assert R.category_module(lines[2]) == "numba.cuda.core.errors" and R.category_module(lines[1]) is None
    kept, dropped = R.usable_filters(lines, {"numba.cuda.core.errors": False})
    assert kept == lines[:2] and dropped == lines[2:]
    assert R.usable_filters(lines, {"numba.cuda.core.errors": True}) == (lines, [])
    text = R.write_ini(tmp_path / "ours.ini", kept, namespace_packages=True).read_text()
    assert "junit_family = xunit1" in text and "    ignore:a.*b:RuntimeWarning" in text
    assert "consider_namespace_packages = true" in text


# -- junit, events and crashes ----------------------------------------------------------------------------

XDIST_CRASH = ("worker 'gw3' crashed while running "
               "'numba/cuda/tests/cudapy/test_stream_api.py::TestStreamAPI::test_crashes'")
JUNIT = f"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="8">
 <testcase classname="numba.cuda.tests.cudadrv.test_events.TestEvent" name="test_ok"
   file="numba/cuda/tests/cudadrv/test_events.py" time="0.5"/>
 <testcase classname="numba.cuda.tests.cudadrv.test_events.TestEvent" name="test_bad"
   file="numba/cuda/tests/cudadrv/test_events.py" time="0.1">
   <failure message="AssertionError: 1 != 2&#10;second line">trace</failure></testcase>
 <testcase classname="numba.cuda.tests.cudadrv.test_events" name="test_param[a.b]"
   file="numba/cuda/tests/cudadrv/test_events.py" time="0.0">
   <skipped type="pytest.skip" message="needs two GPUs">skip</skipped></testcase>
 <testcase classname="numba.cuda.tests.cudadrv.test_events.TestEvent" name="test_xf"
   file="numba/cuda/tests/cudadrv/test_events.py"><skipped type="pytest.xfail" message=""/></testcase>
 <testcase classname="numba.cuda.tests.cudadrv.test_events" name="test_teardown"
   file="numba/cuda/tests/cudadrv/test_events.py">
   <error message="failed on teardown with &quot;RuntimeError: leak&quot;">trace</error></testcase>
 <testcase classname="" name="numba.cuda.tests.cudapy.test_ipc" file="numba/cuda/tests/cudapy/test_ipc.py">
   <error message="collection failure">Traceback:
E   ImportError: cannot import name 'IPCBuffer' from 'cuda.core'</error></testcase>
 <testcase classname="numba.cuda.tests.cudapy.test_stream_api.TestStreamAPI" name="test_crashes"
   file="numba/cuda/tests/cudapy/test_stream_api.py">
   <failure message="{XDIST_CRASH}">x</failure></testcase>
 <testcase classname="numba.cuda.tests.cudapy.test_ipc.TestIpc" name="test_child"
   file="numba/cuda/tests/cudapy/test_ipc.py">
   <failure message="AssertionError: process failed with code -11: stderr:">x</failure></testcase>
 <testcase time="0.000" />
</testsuite></testsuites>
"""


def test_parse_junit_gives_node_ids_outcomes_and_first_lines(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    cases = R.parse_junit(path)
    ev = "numba/cuda/tests/cudadrv/test_events.py"
    assert {k: v["outcome"] for k, v in cases.items()} == {
        f"{ev}::TestEvent::test_ok": "passed",
        f"{ev}::TestEvent::test_bad": "failed",
        f"{ev}::test_param[a.b]": "skipped",
        f"{ev}::TestEvent::test_xf": "xfailed",
        f"{ev}::test_teardown": "error",
        "numba/cuda/tests/cudapy/test_ipc.py": "error",
        "numba/cuda/tests/cudapy/test_stream_api.py::TestStreamAPI::test_crashes": "failed",
        "numba/cuda/tests/cudapy/test_ipc.py::TestIpc::test_child": "failed",
    }
    assert cases[f"{ev}::TestEvent::test_bad"]["reason"] == "AssertionError: 1 != 2"
    assert cases[f"{ev}::test_param[a.b]"]["reason"] == "needs two GPUs"
    assert cases["numba/cuda/tests/cudapy/test_ipc.py"]["reason"] == (
        "collection error: ImportError: cannot import name 'IPCBuffer' from 'cuda.core'")
    assert cases[f"{ev}::TestEvent::test_ok"]["module"] == "numba.cuda.tests.cudadrv.test_events"


def test_junit_ids_without_a_usable_file_attribute() -> None:
    assert R.junit_test_id("numba.cuda.tests.cudapy.test_ipc.TestIpc", "test_x", None) == (
        "numba/cuda/tests/cudapy/test_ipc.py::TestIpc::test_x")
    assert R.junit_test_id("", "numba.cuda.tests.cudapy.test_ipc", None) == "numba/cuda/tests/cudapy/test_ipc.py"
    # a test made by a decorator of another module: `file` is that module's (numba's run_test_in_subprocess)
    assert R.junit_test_id("numba.cuda.tests.cudapy.test_extending.TestLowLevelExtending", "test_func1_isolated",
                           "numba/cuda/tests/support.py") == (
        "numba/cuda/tests/cudapy/test_extending.py::TestLowLevelExtending::test_func1_isolated")


def test_events_give_outcomes_and_the_test_a_crash_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    a, b, c = "m/test_a.py::t1", "m/test_a.py::t2", "m/test_a.py::t3"
    events = [{"e": "start", "id": a}, {"e": "report", "id": a, "when": "setup", "outcome": "passed"},
              {"e": "report", "id": a, "when": "call", "outcome": "passed"},
              {"e": "report", "id": a, "when": "teardown", "outcome": "passed"},
              {"e": "start", "id": b}, {"e": "report", "id": b, "when": "setup", "outcome": "skipped",
                                        "reason": "no GPU"},
              {"e": "report", "id": b, "when": "teardown", "outcome": "passed"},
              {"e": "start", "id": c}, {"e": "report", "id": c, "when": "setup", "outcome": "passed"}]
    path.write_text("\n".join(json.dumps(e) for e in events) + '\n{"e": "rep')  # the last line cut by the kill
    cases, unfinished = R.parse_events(path)
    assert cases[a]["outcome"] == "passed" and cases[b]["outcome"] == "skipped" and cases[b]["reason"] == "no GPU"
    assert unfinished == [c]


def test_crashes_from_xdist_signals_and_children(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    cases = R.parse_junit(path)
    log = ("[gw3] node down: Not properly terminated\n"
           "replacing crashed worker gw3\n"
           "[gw5] node down: Not properly terminated\n")  # no test named for gw5
    crashes = R.find_crashes(cases, log, 1, False, [])
    by_test = {c["test"]: c["kind"] for c in crashes}
    assert by_test == {"numba/cuda/tests/cudapy/test_stream_api.py::TestStreamAPI::test_crashes": "worker",
                       "numba/cuda/tests/cudapy/test_ipc.py::TestIpc::test_child": "child",
                       None: "worker"}
    # xdist hands a crashed worker's test to the next worker: one crash, counted
    again = ("worker 'gw0' crashed while running 'm/test_a.py::t1'\nworker 'gw1' crashed while running "
             "'m/test_a.py::t1'\n[gw0] node down: x\n[gw1] node down: x\nmaximum crashed workers reached: 2\n")
    crashes = R.find_crashes({}, again, 1, False, [])
    assert [(c["test"], c["count"]) for c in crashes] == [("m/test_a.py::t1", 2), (None, 1)]
    # without xdist: pytest dies on a signal; the crash is the test that started and did not finish
    crashes = R.find_crashes({}, "", -11, False, ["m/test_a.py::t1", "m/test_a.py::t2"])
    assert [(c["test"], c["kind"]) for c in crashes] == [("m/test_a.py::t2", "process")]
    assert "SIGSEGV" in crashes[0]["detail"]
    assert R.find_crashes({}, "", 139, False, [])[0]["test"] is None
    assert R.find_crashes({}, "", -2, True, ["m/test_a.py::t1"]) == []  # stopped by --timeout: not a crash
    assert R.find_crashes({}, "", 1, False, ["m/test_a.py::t1"]) == []  # tests failed: not a crash


def _case(outcome: str, reason: str = "", module: str = "numba.cuda.tests.cudadrv.test_x") -> dict[str, Any]:
    return {"outcome": outcome, "reason": reason, "module": module, "seconds": 0.0}


def test_compare_lists_every_test_that_passes_on_cuda_core_and_not_on_the_compat() -> None:
    t = "numba/cuda/tests/cudadrv/test_x.py::T::"
    base = {t + "same": _case("passed"), t + "fails": _case("passed"), t + "skips": _case("passed"),
            t + "missing": _case("passed"), t + "crash": _case("passed"), t + "better": _case("failed", "x"),
            t + "skip_both": _case("skipped", "no")}
    compat = {t + "same": _case("passed"), t + "fails": _case("failed", "AssertionError: wrong"),
              t + "skips": _case("skipped", "needs cuda.core X"), t + "better": _case("passed"),
              t + "skip_both": _case("skipped", "no"), t + "crash": _case("failed", "worker 'gw0' crashed")}
    compat_crashes = [{"test": t + "crash", "module": "numba.cuda.tests.cudadrv.test_x", "kind": "worker",
                       "detail": "worker 'gw0' crashed while running"},
                      {"test": t + "better", "module": "numba.cuda.tests.cudadrv.test_x", "kind": "child",
                       "detail": "child died"}]
    base_crashes = [{"test": t + "better", "module": "numba.cuda.tests.cudadrv.test_x", "kind": "child",
                     "detail": "child died"}]
    result = R.compare(base, compat, base_crashes, compat_crashes)
    regressions = {r["test"].rsplit("::", 1)[1]: (r["compat"], r["reason"]) for r in result["regressions"]}
    assert regressions == {
        "fails": ("failed", "failed on the compat: AssertionError: wrong"),
        "skips": ("skipped", "skipped on the compat: needs cuda.core X"),
        "missing": ("not run", "not run on the compat"),
        "crash": ("failed", "crashed: worker 'gw0' crashed while running"),
    }
    # the crash that cuda.core has too is not the compat's
    assert [c["test"] for c in result["failing_crashes"]] == [t + "crash"]
    row = result["rows"]["numba.cuda.tests.cudadrv.test_x"]
    assert row == {"cases": 7, "passed cuda.core": 5, "passed compat": 2, "skipped cuda.core": 1,
                   "skipped compat": 2, "regressions": 4, "crashes cuda.core": 1, "crashes compat": 2}
    table = R.render_table(result, ["cuda.core", "compat"])
    assert "| cudadrv.test_x | 7 | 5 | 2 | 1 | 2 | 4 | 1 | 2 |" in table
    assert "pass on cuda.core but not on compat" in table
    md = R.render_regressions(result, {"compat": compat_crashes})
    assert f"- `{t}skips` (skipped): skipped on the compat: needs cuda.core X" in md
    assert "## Crashes on compat" in md
    assert R.compare(base, dict(base))["regressions"] == []


# -- the identity checks ------------------------------------------------------------------------------------


def test_identity_checks_of_a_process() -> None:
    compat = SimpleNamespace(__name__=COMPAT)
    real = SimpleNamespace(__name__="cuda.core.cu13")
    assert R.process_identity_problem("compat", {"cuda.core": compat}) is None
    assert "not imported" in R.process_identity_problem("compat", {})
    assert "cuda.core.cu13" in R.process_identity_problem("compat", {"cuda.core": real})
    assert R.process_identity_problem("cuda.core", {"cuda.core": real}) is None
    assert R.process_identity_problem("cuda.core", {"cuda.core": real, COMPAT: compat}) is not None
    dispatcher = SimpleNamespace(launch=SimpleNamespace(__module__="ironaccel_cuda._core"))
    record = R.process_record({"cuda.core": compat, "numba.cuda.dispatcher": dispatcher}, "gw1", "compat")
    assert (record["cuda_core"], record["numba_launch"], record["worker"]) == (COMPAT, "ironaccel_cuda._core", "gw1")
    assert R.process_problems([record], "compat") == []
    assert R.process_problems([{**record, "cuda_core": "cuda.core.cu13"}], "compat") != []
    assert R.process_problems([], "compat") == ["no pytest process recorded what it ran on"]


def test_preflight_problems() -> None:
    good = {"cuda_core": {"name": COMPAT}, "cuda_core_in_child": COMPAT, "numba_launch": "ironaccel_cuda._core",
            "exit": 0}
    assert R.preflight_problems(good, "compat") == []
    assert R.preflight_problems({**good, "cuda_core_in_child": "cuda.core.cu13"}, "compat") != []
    assert R.preflight_problems({**good, "numba_launch": "cuda.core._launcher"}, "compat") != []
    assert R.preflight_problems(good, "cuda.core") != []  # the compat in a baseline
    numpy = {**good, "numba_cuda_error": "AttributeError: module 'numpy' has no attribute 'row_stack'"}
    assert any("--numpy-wheel" in p for p in R.preflight_problems(numpy, "compat"))
    base = {"cuda_core": {"name": "cuda.core.cu13"}, "cuda_core_in_child": "cuda.core.cu13",
            "numba_launch": "cuda.core._launcher", "exit": 0}
    assert R.preflight_problems(base, "cuda.core") == []


# -- the compat in every process ----------------------------------------------------------------------------

PRINT_CORE = ("import subprocess, sys, cuda.core; print('parent', cuda.core.__name__); "
              "print(subprocess.run([sys.executable, '-c', 'import cuda.core; print(\"child\", cuda.core.__name__)'],"
              " capture_output=True, text=True).stdout.strip())")


def test_sitecustomize_makes_cuda_core_the_compat_in_every_process(tmp_path: Path) -> None:
    R.write_sitecustomize(tmp_path / "boot")
    hidden = tmp_path / "hidden"  # an existing sitecustomize later on the path still runs
    _write(hidden, {"sitecustomize.py": "import os\nopen(os.environ['HIDDEN_MARK'], 'a').write('ran\\n')\n"})
    log = tmp_path / "processes.jsonl"
    env = R.child_environment(os.environ, "compat", plugin_dir=tmp_path / "plugins", boot_dir=tmp_path / "boot",
                              sites=[hidden], extra={"IRONACCEL_NUMBA_PROCESSES": str(log),
                                                     "HIDDEN_MARK": str(tmp_path / "mark")})
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path / "boot")
    proc = subprocess.run([sys.executable, "-c", PRINT_CORE], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["parent", COMPAT, "child", COMPAT]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 2 and {r["cuda_core"] for r in records} == {COMPAT}
    assert records[1]["ppid"] == records[0]["pid"]
    assert (tmp_path / "mark").read_text() == "ran\nran\n"


def test_the_baseline_environment_installs_nothing(tmp_path: Path) -> None:
    R.write_sitecustomize(tmp_path / "boot")
    env = R.child_environment(os.environ, "cuda.core", plugin_dir=tmp_path / "plugins", boot_dir=tmp_path / "boot")
    assert str(tmp_path / "boot") not in env["PYTHONPATH"].split(os.pathsep)
    code = "import sys\ntry:\n    import cuda.core\nexcept ImportError:\n    pass\nprint(sorted(sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ironaccel_cuda_compat" not in proc.stdout


def test_a_process_where_install_fails_exits_loudly(tmp_path: Path) -> None:
    R.write_sitecustomize(tmp_path / "boot")
    broken = tmp_path / "broken"  # an ironaccel_cuda_compat that cannot be imported, ahead of the real one
    _write(broken, {"ironaccel_cuda_compat/__init__.py": "raise ImportError('broken on purpose')\n"})
    env = R.child_environment(os.environ, "compat", plugin_dir=tmp_path / "plugins", boot_dir=tmp_path / "boot",
                              sites=[broken])
    proc = subprocess.run([sys.executable, "-c", "print('ran')"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == R.INSTALL_FAILED_EXIT
    assert "ran" not in proc.stdout
    assert "install() failed" in proc.stderr and "broken on purpose" in proc.stderr


# -- whole runs over a fake numba-cuda ---------------------------------------------------------------------

FAKE = {
    # cuda.core, found before an installed one (a namespace portion first on the path); the compat replaces it
    "cuda/core/__init__.py": """
        __version__ = "1.2.0"
        def launch(*args):
            pass
    """,
    # numba-cuda's site-packages .pth imports this module, which would send `numba.cuda` to the installed
    # numba-cuda; first on the path, this empty one keeps the fake found where numba-cuda is installed
    "_numba_cuda_redirector.py": "",
    "numba/__init__.py": "__version__ = '0.0.fake'\n",
    "numba/cuda/__init__.py": "",
    "numba/cuda/dispatcher.py": "from cuda.core import launch\n",
    "numba/cuda/testing.py": """
        import unittest
        import pytest

        @pytest.mark.usefixtures("initialize_from_pytest_config")
        class CUDATestCase(unittest.TestCase):
            pass
    """,
    "numba/cuda/tests/__init__.py": "",
    "numba/cuda/tests/cudadrv/__init__.py": "",
    "numba/cuda/tests/cudadrv/test_fake_drv.py": """
        import subprocess
        import sys

        import cuda.core
        from numba.cuda.testing import CUDATestCase

        COMPAT = cuda.core.__name__.startswith("ironaccel")

        class TestFake(CUDATestCase):
            def test_fixture_ran(self):
                self.assertIs(self._dump_failed_filechecks, False)

            def test_child_sees_the_same_cuda_core(self):
                out = subprocess.run([sys.executable, "-c", "import cuda.core; print(cuda.core.__name__)"],
                                     capture_output=True, text=True, check=True).stdout.split()
                self.assertEqual(out[-1], cuda.core.__name__)

            def test_fails_on_the_compat(self):
                self.assertFalse(COMPAT, "this one needs the real cuda.core")

            def test_skips_on_the_compat(self):
                if COMPAT:
                    self.skipTest("not on the compat")

            def test_fails_everywhere(self):
                self.fail("always")

            def test_bin_dir(self):
                import os
                if not os.environ.get("NUMBA_CUDA_TEST_BIN_DIR"):
                    self.skipTest("necessary binaries not generated.")
                self.assertTrue(os.path.isfile(os.path.join(os.environ["NUMBA_CUDA_TEST_BIN_DIR"], "Makefile")))
    """,
    "numba/cuda/tests/doc_examples/__init__.py": "",
    "numba/cuda/tests/doc_examples/test_fake_doc.py": "def test_doc():\n    pass\n",
    "numba/cuda/tests/cudapy/__init__.py": "",
    "numba/cuda/tests/cudapy/test_stream_api.py": """
        import cuda.core
        from numba.cuda import dispatcher

        def test_numba_launches_with_cuda_core():
            assert dispatcher.launch is cuda.core.launch
    """,
    "numba/cuda/tests/cudapy/test_math.py": "def test_not_selected():\n    raise AssertionError\n",
    "numba/cuda/tests/cudapy/test_crash.py": """
        import os
        import signal

        import cuda.core

        def test_before():
            pass

        def test_crash():
            if cuda.core.__name__.startswith("ironaccel"):
                os.kill(os.getpid(), signal.SIGSEGV)

        def test_after():
            pass
    """,
    "numba/cuda/tests/cudapy/test_sleep.py": """
        import time

        def test_quick():
            pass

        def test_sleeps():
            time.sleep(120)

        def test_later():
            pass
    """,
}


def _fake_numba(tmp_path: Path) -> Path:
    site = tmp_path / "fake"
    _write(site, FAKE)
    return site


def test_a_whole_run_finds_the_tests_that_fail_only_on_the_compat(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    site = _fake_numba(tmp_path)
    testing = tmp_path / "testing"  # numba-cuda's testing/ folder: its conftest, its ini, its Makefile
    _write(testing, {
        "conftest.py": """
            import pytest

            def pytest_addoption(parser):
                parser.addoption("--dump-failed-filechecks", action="store_true")

            @pytest.fixture(scope="class")
            def initialize_from_pytest_config(request):
                request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")
        """,
        "pytest.ini": "[pytest]\nfilterwarnings =\n    error\n    ignore:x:numba.no_such_module.Warning\n",
        "Makefile": "all:\n\tpython -c \"import numba, sys; open('built.txt', 'w').write(numba.__version__ + ' ' + "
                    "sys.prefix)\"\n",
    })
    out = tmp_path / "out"
    status = R.main(["--out", str(out), "--site", str(site), "--numba-cuda-testing", str(testing),
                     "--timeout", "300"])
    printed, errors = capsys.readouterr()
    assert status == 1, printed + errors
    assert f"NUMBA_CUDA_TEST_BIN_DIR={out / 'numba-cuda-testing'}" in printed
    if shutil.which("make"):  # make ran with the tests' environment (`python` finds the fake numba)
        assert (out / "numba-cuda-testing" / "built.txt").read_text() == f"0.0.fake {sys.prefix}"
    else:
        assert "make in" in printed and "failed (exit None)" in printed
    assert "-p numba_cuda_testing_conftest" in printed
    assert "ignore:x:numba.no_such_module.Warning" in printed  # left out, or pytest would stop
    results = json.loads((out / "results.json").read_text())
    assert results["selection"] == ["numba.cuda.tests.cudadrv", "numba.cuda.tests.doc_examples",
                                    "numba.cuda.tests.cudapy.test_stream_api"]
    drv = "numba/cuda/tests/cudadrv/test_fake_drv.py::TestFake::"
    assert {r["test"]: r["compat"] for r in results["regressions"]} == {
        drv + "test_fails_on_the_compat": "failed", drv + "test_skips_on_the_compat": "skipped"}
    for side in ("cuda.core", "compat"):
        cases = results["sides"][side]["cases"]
        assert cases[drv + "test_fixture_ran"]["outcome"] == "passed"
        assert cases[drv + "test_bin_dir"]["outcome"] == "passed"  # NUMBA_CUDA_TEST_BIN_DIR reached the tests
        assert cases[drv + "test_child_sees_the_same_cuda_core"]["outcome"] == "passed"
        assert cases["numba/cuda/tests/cudapy/test_stream_api.py::test_numba_launches_with_cuda_core"][
            "outcome"] == "passed"
        assert cases[drv + "test_fails_everywhere"]["outcome"] == "failed"
        assert not any("test_math" in k for k in cases)
        assert results["sides"][side]["process_problems"] == []
    table = (out / "table.md").read_text()
    assert "| cudadrv.test_fake_drv | 6 | 5 | 3 | 0 | 1 | 2 | 0 | 0 |" in table
    assert "**2 tests pass on cuda.core and not on the compat; 0 crashes on the compat**" in table
    regressions = (out / "regressions.md").read_text()
    assert "skipped on the compat: not on the compat" in regressions
    assert "failed on the compat: AssertionError: True is not false : this one needs the real cuda.core" in regressions
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit"] == 1 and summary["regressions"] == 2
    assert summary["compat_processes"] >= 2  # pytest and the child of test_child_sees_the_same_cuda_core
    pytest_processes = [r for r in results["sides"]["compat"]["processes"] if r["source"] == "pytest"]
    assert [(r["at"], r["cuda_core"], r["numba_launch"]) for r in pytest_processes] == [
        ("start", COMPAT, None), ("end", COMPAT, "ironaccel_cuda._core")]
    assert (out / "compat" / "junit.xml").is_file() and (out / "cuda_core" / "junit.xml").is_file()


def test_a_whole_run_reports_a_crash_on_the_compat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = _fake_numba(tmp_path)
    out = tmp_path / "out"
    status = R.main(["--out", str(out), "--site", str(site), "--only", "numba.cuda.tests.cudapy.test_crash"])
    printed, errors = capsys.readouterr()
    assert status == 1, printed + errors
    assert "-p ironaccel_numba_fixtures (built in" in printed
    results = json.loads((out / "results.json").read_text())
    crash = "numba/cuda/tests/cudapy/test_crash.py::test_crash"
    compat = results["sides"]["compat"]
    assert not compat["junit"] and compat["returncode"] < 0
    assert [(c["test"], c["kind"]) for c in compat["crashes"]] == [(crash, "process")]
    assert [c["test"] for c in results["failing_crashes"]] == [crash]
    assert {r["test"]: r["reason"].split(":")[0] for r in results["regressions"]} == {
        crash: "crashed", "numba/cuda/tests/cudapy/test_crash.py::test_after": "not run on the compat"}
    assert results["sides"]["cuda.core"]["crashes"] == []
    # the process that died left its start record: it ran on the compat
    assert [(r["at"], r["cuda_core"]) for r in compat["processes"] if r["source"] == "pytest"] == [("start", COMPAT)]
    assert "| cudapy.test_crash | 3 | 3 | 1 | 0 | 0 | 2 | 0 | 1 |" in (out / "table.md").read_text()


def test_a_run_stopped_by_timeout_is_compared_with_a_saved_baseline(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    site = _fake_numba(tmp_path)
    module = "numba/cuda/tests/cudapy/test_sleep.py::"
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"sides": {"cuda.core": {"crashes": [], "cases": {
        module + name: _case("passed", module="numba.cuda.tests.cudapy.test_sleep")
        for name in ("test_quick", "test_sleeps", "test_later")}}}}))
    out = tmp_path / "out"
    status = R.main(["--out", str(out), "--site", str(site), "--only", "numba.cuda.tests.cudapy.test_sleep",
                     "--baseline", str(baseline), "--timeout", "10"])
    printed, errors = capsys.readouterr()
    assert status == 1, printed + errors
    results = json.loads((out / "results.json").read_text())
    compat = results["sides"]["compat"]
    assert compat["timed_out"] and compat["junit"]  # interrupted, pytest still wrote its junit
    assert {k.rsplit("::", 1)[1]: c["outcome"] for k, c in compat["cases"].items()} == {
        "test_quick": "passed", "test_sleeps": "error"}
    assert compat["cases"][module + "test_sleeps"]["reason"].startswith("[timeout]")
    assert {r["test"].rsplit("::", 1)[1]: r["compat"] for r in results["regressions"]} == {
        "test_sleeps": "error", "test_later": "not run"}
    assert not (out / "cuda_core").exists()  # the baseline came from the file
    assert "stopped at --timeout 10 s" in (out / "table.md").read_text()


def test_a_run_stops_when_the_compat_is_not_cuda_core(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = _fake_numba(tmp_path)
    broken = tmp_path / "broken"  # the compat's install() fails: the check process exits 97, nothing runs
    _write(broken, {"ironaccel_cuda_compat/__init__.py": "raise ImportError('broken on purpose')\n"})
    out = tmp_path / "out"
    status = R.main(["--out", str(out), "--site", str(broken), "--site", str(site), "--against", "compat"])
    assert status == 2
    assert "install() failed" in capsys.readouterr().err
    assert not (out / "compat").exists()

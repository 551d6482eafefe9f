"""pytest plugin of run_cuda_core_tests.py: cuda.core's own tests against the compat, with skips as failures.

Loaded with `-p cuda_core_compat_plugin` (the runner puts this folder on PYTHONPATH):

* IRONACCEL_CCT_AGAINST=compat (the default) installs `ironaccel_cuda_compat.cuda_core` as
  `cuda.core` before any conftest is imported; `cuda.core` runs them against the installed
  cuda-core instead (a baseline of the same tests).  The install carries into the children the
  memory_ipc tests start with multiprocessing's spawn method (see `_install.py`), so their
  `import cuda.core` is the compat too.
* A skipped test is reported as failed, its reason kept ("skip counted as a failure: ...");
  an expected failure (xfail) stays an xfail and counts as not passed.
* IRONACCEL_CCT_JSON=path writes every case: node id, file, outcome (passed, failed, skipped,
  xfailed, xpassed, error), seconds and the first line of the reason.
* IRONACCEL_CCT_COLLECT=path (with --collect-only) writes the collected node ids.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

AGAINST = os.environ.get("IRONACCEL_CCT_AGAINST", "compat")
if AGAINST == "compat":
    from ironaccel_cuda_compat import cuda_core as _compat

    _compat.install()
elif AGAINST != "cuda.core":
    raise RuntimeError(f"IRONACCEL_CCT_AGAINST must be 'compat' or 'cuda.core', got {AGAINST!r}")

_results: dict[str, dict[str, Any]] = {}
_collect_errors: dict[str, str] = {}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _first_line(report: Any) -> str:
    longrepr = getattr(report, "longrepr", None)
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return str(longrepr[2]).splitlines()[0] if str(longrepr[2]) else ""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message).splitlines()[0]
    text = str(longrepr).strip().splitlines()
    return text[-1] if text else ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = _first_line(report)
        report.outcome = "failed"
        report.longrepr = f"skip counted as a failure: {reason}"
        report.ironaccel_skip = reason


def _write_results() -> None:
    path = os.environ.get("IRONACCEL_CCT_JSON")
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):  # under xdist the controller sees every report
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"against": AGAINST, "cases": list(_results.values()), "collection_errors": _collect_errors},
                      f, indent=1)
        os.replace(tmp, path)


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "teardown" and len(_results) % 25 == 0:
        _write_results()  # partial results survive a run that is killed for time
    entry = _results.setdefault(report.nodeid, {"nodeid": report.nodeid, "file": _file_of(report.nodeid),
                                                "outcome": "passed", "seconds": 0.0, "reason": ""})
    entry["seconds"] += float(getattr(report, "duration", 0.0) or 0.0)
    if hasattr(report, "wasxfail"):
        entry["outcome"] = "xpassed" if report.passed else "xfailed"
        entry["reason"] = str(report.wasxfail)
        return
    if getattr(report, "ironaccel_skip", None) is not None:
        entry["outcome"] = "skipped"
        entry["reason"] = report.ironaccel_skip
        return
    if report.failed:
        if entry["outcome"] != "passed":
            return  # keep the first failure (a failing call and then a failing teardown: one case)
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["reason"] = (f"[{report.when}] " if report.when != "call" else "") + _first_line(report)


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _collect_errors[report.nodeid] = _first_line(report) or "collection failed"
    elif report.skipped:
        _collect_errors[report.nodeid] = "skipped at collection (counted as a failure): " + _first_line(report)


def pytest_collection_finish(session: Any) -> None:
    path = os.environ.get("IRONACCEL_CCT_COLLECT")
    if path:
        with open(path, "w") as f:
            json.dump({"items": [item.nodeid for item in session.items], "errors": _collect_errors}, f)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    _write_results()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if AGAINST == "compat":
        terminalreporter.write_line("cuda.core was ironaccel_cuda_compat.cuda_core in this run; skips counted as "
                                    "failures")

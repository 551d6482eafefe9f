"""CPU tests of the shared bench code: the direction of the ratio and of the target, the report's one shape, the
checks that run before any timing, and the dispatch cases on the in-memory test double.

    .venv/bin/python -m pytest bench/test_versus.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import dispatch_cases  # noqa: E402
import versus  # noqa: E402
from harness import Case, Interval  # noqa: E402

ROW_KEYS = {"case", "ironaccel_us", "direct_us", "ratio", "rounds", "batch", "target", "verdict", "vs_direct"}
REPORT_KEYS = {"backend", "device", "peer", "date", "host", "python", "facts", "ratio", "rule", "cases"}


class FakeClock:
    """Nanoseconds that pass only when a fake operation says so."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def costing(clock: FakeClock, ns: int, log: list[str] | None = None, name: str = "") -> Case:
    """A case whose every operation takes `ns` on the fake clock."""

    def run(n: int) -> None:
        clock.now += ns * n
        if log is not None:
            log.append(f"run {name}")

    return Case(run=run, close=(lambda: log.append(f"close {name}")) if log is not None else None)


@pytest.mark.parametrize(("interval", "target", "expected"), [
    (Interval(1.10, 1.05, 1.14, 20), 1.15, "met"),  # the whole interval under the target
    (Interval(1.10, 1.05, 1.20, 20), 1.15, "unclear"),  # the upper bound over it: not shown to be met
    (Interval(1.20, 1.16, 1.30, 20), 1.15, "missed"),  # the whole interval over it
    (Interval(0.98, 0.95, 1.01, 20), 1.0, "unclear"),  # parity is not "no slower" shown
])
def test_a_target_is_met_only_when_the_whole_interval_is_below_it(interval, target, expected):
    assert versus.target_verdict(interval, target) == expected


@pytest.mark.parametrize(("interval", "expected"), [
    (Interval(0.90, 0.85, 0.95, 20), "faster"), (Interval(1.0, 0.95, 1.05, 20), "parity"),
    (Interval(1.10, 1.05, 1.20, 20), "slower"),
])
def test_vs_direct_reads_the_ratio_as_ironaccel_time_over_direct_time(interval, expected):
    assert versus.vs_direct(interval) == expected


@pytest.mark.parametrize(("ours_ns", "target", "verdict", "vs"), [
    (1200, 1.15, "missed", "slower"), (1200, 1.3, "met", "slower"), (800, 1.0, "met", "faster"),
    (1000, 1.0, "unclear", "parity"),
])
def test_compare_reports_ironaccel_over_direct(ours_ns, target, verdict, vs):
    clock = FakeClock()
    row = versus.compare("op", costing(clock, ours_ns), costing(clock, 1000), rounds=9, target=target, clock=clock)
    assert set(row) == ROW_KEYS
    assert row["ratio"]["median"] == pytest.approx(ours_ns / 1000)
    assert row["ironaccel_us"] == pytest.approx(ours_ns / 1e3) and row["direct_us"] == pytest.approx(1.0)
    assert (row["verdict"], row["vs_direct"]) == (verdict, vs)
    assert row["rounds"] == row["ratio"]["n"] == 9  # exactly the rounds asked for: the --pairs flags
    assert set(row["batch"]) == {versus.IRONACCEL, versus.DIRECT}


def test_a_failing_check_fails_the_comparison_before_anything_is_timed():
    clock = FakeClock()
    log: list[str] = []
    ours, direct = costing(clock, 1000, log, "ours"), costing(clock, 1000, log, "direct")

    def wrong() -> None:
        raise AssertionError("y differs")

    direct.check = wrong
    with pytest.raises(AssertionError, match="y differs"):
        versus.compare("op", ours, direct, rounds=5, target=1.0, clock=clock)
    assert log == ["close ours", "close direct"]  # nothing ran, both were closed


def test_the_report_has_one_shape_and_its_table_says_the_direction(tmp_path, capsys):
    clock = FakeClock()
    rows = [versus.compare(name, costing(clock, ns), costing(clock, 1000), rounds=6, target=1.15, clock=clock)
            for name, ns in (("round_trip_4KiB", 1100), ("repeated_4KiB", 1300))]
    doc = versus.report("memory", "memory0", "numpy", {"n": 1024, "nested": {"left": "out"}}, rows)
    assert set(doc) == REPORT_KEYS and all(set(r) == ROW_KEYS for r in doc["cases"])
    versus.publish(doc, tmp_path / "out.json")
    text = capsys.readouterr().out
    assert "ironaccel time / direct time" in text and "below the target" in text
    assert "| round_trip_4KiB | 1.1 | 1.0 | 1.100 [1.100, 1.100] | 6 | <= 1.15 | met | slower |" in text
    assert "| repeated_4KiB |" in text and "| missed |" in text
    assert "n 1024" in text and "left" not in text  # scalar facts only
    assert json.loads((tmp_path / "out.json").read_text()) == json.loads(json.dumps(doc))


def test_no_module_of_the_shared_folder_shadows_one_of_a_backends_bench():
    """The CUDA bench puts both folders on sys.path (paths.ensure_import_paths), so a name in both is a clash."""

    def modules(folder: Path) -> set[str]:
        return {p.stem for p in folder.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}

    shared = modules(BENCH)
    assert {"harness", "versus", "dispatch_cases"} <= shared
    for folder in BENCH.parent.glob("ironaccel-*/bench"):
        assert not shared & modules(folder), folder


# the dispatch cases of the webgpu and opengl benches, on the in-memory test double --------------------------

class NumpyPeer:
    """A direct side in numpy: the same arithmetic as the kernel; `off` adds an error to check the checks."""

    def __init__(self, off: float = 0.0):
        self.off = off

    def round_trip(self, x: np.ndarray) -> np.ndarray:
        return x * dispatch_cases.F(2) + dispatch_cases.F(1 + self.off)

    def persistent(self, x: np.ndarray):  # type: ignore[no-untyped-def]
        y = np.empty_like(x)

        def run(dispatches: int) -> np.ndarray:
            for k in range(dispatches):
                y[:] = x * dispatch_cases.F(dispatch_cases.scale(k)) + dispatch_cases.F(1 + self.off)
            return y

        return run, lambda: None


@pytest.fixture
def memory_side():
    from ironaccel.testing.double import SCALE_OFFSET, MemoryBackend

    dev = MemoryBackend().open(0)
    yield dispatch_cases.ComputeSide(dev, SCALE_OFFSET)
    dev.close()


@pytest.mark.parametrize("dispatches", [1, 50])
def test_the_last_dispatch_of_a_burst_reads_x(dispatches):
    assert dispatch_cases.scale(dispatches - 1) == 1.0  # so the check's y = x + 1 depends on x


def test_the_dispatch_cases_check_and_time_both_sides(memory_side):
    x = np.random.default_rng(1).standard_normal(dispatch_cases.SMALL).astype(dispatch_cases.F)
    peer = NumpyPeer()
    for make in (lambda s: dispatch_cases.round_trip_case(s, x), lambda s: dispatch_cases.repeated_case(s, x, 1),
                 lambda s: dispatch_cases.repeated_case(s, x, 50)):
        row = versus.compare("case", make(memory_side), make(peer), rounds=3, target=1.15)
        assert row["rounds"] == 3 and row["ironaccel_us"] > 0 and row["direct_us"] > 0


@pytest.mark.parametrize("make", [lambda s, x: dispatch_cases.round_trip_case(s, x),
                                  lambda s, x: dispatch_cases.repeated_case(s, x, 50)])
def test_a_side_that_computes_the_wrong_thing_fails_its_case(memory_side, make):
    x = np.random.default_rng(2).standard_normal(dispatch_cases.SMALL).astype(dispatch_cases.F)
    with pytest.raises(AssertionError):
        versus.compare("case", make(memory_side, x), make(NumpyPeer(off=0.5), x), rounds=3, target=1.15)


def test_publish_overwrites_the_baseline_with_command_machine_commit_and_table(tmp_path, capsys):
    clock = FakeClock()
    rows = [versus.compare("round_trip_4KiB", costing(clock, 1100), costing(clock, 1000), rounds=6, target=1.15,
                           clock=clock)]
    doc = versus.report("memory", "memory0", "numpy", {}, rows)
    baseline = tmp_path / "BASELINE.md"
    baseline.write_text("# Baseline\n\nhand-written notes\n")
    versus.publish(doc, None, baseline=baseline)
    versus.publish(doc, None, baseline=baseline)  # a second run replaces its own section, keeps the rest
    text = baseline.read_text()
    assert "hand-written notes" in text and text.count("<!-- bench: ") == 1
    assert "- command: `python " in text and "- machine: memory0 on " in text and "- commit: " in text
    assert "| round_trip_4KiB | 1.1 | 1.0 |" in text


def test_a_named_section_sits_beside_the_script_section_and_is_replaced_alone(tmp_path):
    baseline = tmp_path / "BASELINE.md"
    versus.write_baseline(baseline, "vulkan table 1", machine="m", command=["bench_x.py"])
    versus.write_baseline(baseline, "cuda table 1", machine="m", command=["bench_x.py", "--backend", "cuda"],
                          section="bench_x.py --backend cuda")
    versus.write_baseline(baseline, "cuda table 2", machine="m", command=["bench_x.py", "--backend", "cuda"],
                          section="bench_x.py --backend cuda")
    text = baseline.read_text()
    assert text.count("<!-- bench: ") == 2 and "vulkan table 1" in text
    assert "cuda table 2" in text and "cuda table 1" not in text

"""CPU tests of the benchmark's machinery: pairing, bootstrap, runner, targets, rendering, the C floor.

    /work/venv/bin/python -m pytest ironaccel-cuda/bench/test_harness.py

Sides here are fakes driven by a fake clock, so every ratio has a known true value.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import paths  # noqa: E402

paths.ensure_import_paths()  # harness.py is in the repository's bench/

import ops  # noqa: E402
import report  # noqa: E402
import targets  # noqa: E402
from harness import Case, SamplingConfig, bootstrap_median, calibrate, measure_rounds, rotation, verdict  # noqa: E402
from results import RunResult  # noqa: E402
from runner import RunConfig, Runner  # noqa: E402
from sides.base import BenchContext, HostData, Side, SideUnavailable, Unsupported  # noqa: E402
from sides.floor_side import FloorError, FloorSide  # noqa: E402


class FakeClock:
    """Nanoseconds that pass only when a fake operation says so; `drift` slows the machine down over time."""

    def __init__(self, drift_per_s: float = 0.0):
        self.now = 0
        self.drift_per_s = drift_per_s

    def __call__(self) -> int:
        return int(self.now)

    def spend(self, ns: float) -> None:
        self.now += ns * (1.0 + self.drift_per_s * self.now / 1e9)


def fake_case(clock: FakeClock, cost_ns: float, *, jitter: float = 0.0, seed: int = 0, log=None, label="") -> Case:
    rng = np.random.default_rng(seed)

    def run(n: int) -> None:
        if log is not None:
            log.append(label)
        clock.spend(n * cost_ns * (1.0 + jitter * rng.standard_normal()))

    return Case(run)


FAST = SamplingConfig(rounds=30, min_rounds=10, max_seconds=60.0, batch_ns=1_000_000, warmup_calls=1, bootstrap=500)


# statistics -------------------------------------------------------------------------------------------------
def test_bootstrap_interval_brackets_the_median_and_narrows_with_more_data():
    rng = np.random.default_rng(1)
    small = bootstrap_median(2.0 + 0.2 * rng.standard_normal(20), resamples=1000, seed=3)
    large = bootstrap_median(2.0 + 0.2 * rng.standard_normal(2000), resamples=1000, seed=3)
    for interval in (small, large):
        assert interval.low <= interval.median <= interval.high
        assert 1.8 < interval.median < 2.2
    assert (large.high - large.low) < (small.high - small.low) / 3
    assert bootstrap_median([5.0, 5.0, 5.0]).low == bootstrap_median([5.0, 5.0, 5.0]).high == 5.0
    assert bootstrap_median([1.0, 2.0, 3.0, 4.0], seed=7) == bootstrap_median([1.0, 2.0, 3.0, 4.0], seed=7)
    with pytest.raises(ValueError):
        bootstrap_median([float("nan")])


def test_verdict_claims_a_win_only_when_the_whole_interval_clears_one():
    assert verdict(bootstrap_median([1.2, 1.3, 1.25, 1.22, 1.28])) == "win"
    assert verdict(bootstrap_median([0.7, 0.8, 0.75, 0.72, 0.78])) == "loss"
    assert verdict(bootstrap_median([0.9, 1.1, 0.95, 1.05, 1.0, 1.02, 0.98])) == "parity"
    assert verdict(None) == "n/a"


# sampling ---------------------------------------------------------------------------------------------------
def test_rounds_alternate_the_order_so_each_pair_is_back_to_back():
    assert [rotation(2, r) for r in range(4)] == [[0, 1], [1, 0], [0, 1], [1, 0]]
    assert [rotation(3, r) for r in range(3)] == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    for k in range(2, 8):  # every case right after every other equally often (a cyclic shift never does this)
        period = k if k % 2 == 0 else 2 * k
        follows: dict[tuple[int, int], int] = {}
        for r in range(period):
            order = rotation(k, r)
            assert sorted(order) == list(range(k))
            for a, b in zip(order, order[1:]):
                follows[(a, b)] = follows.get((a, b), 0) + 1
        assert len(follows) == k * (k - 1) and len(set(follows.values())) == 1, (k, follows)
    clock, calls = FakeClock(), []
    a = fake_case(clock, 100, log=calls, label="A")
    b = fake_case(clock, 300, log=calls, label="B")
    config = SamplingConfig(rounds=4, min_rounds=4, batch_ns=10_000, warmup_calls=1)
    samples = measure_rounds([("A", a), ("B", b)], config, clock)
    assert calls[-8:] == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert samples.per_op_ns.shape == (4, 2)
    assert samples.median_ns("A") == pytest.approx(100) and samples.median_ns("B") == pytest.approx(300)


def test_calibration_sizes_batches_to_the_target_duration():
    clock = FakeClock()
    for cost in (50.0, 3_000.0, 400_000.0, 30_000_000.0):
        n = calibrate(fake_case(clock, cost), SamplingConfig(batch_ns=2_000_000, warmup_calls=1), clock)
        assert n == max(1, round(2_000_000 / cost))
    capped = Case(lambda n: clock.spend(n), max_batch=64)
    assert calibrate(capped, SamplingConfig(batch_ns=2_000_000, warmup_calls=1), clock) == 64


def test_paired_ratio_survives_drift_that_fools_separate_runs():
    # The machine slows down 5% per simulated second; B truly costs 1.5x A.
    clock = FakeClock(drift_per_s=0.05)
    a = fake_case(clock, 1_000, jitter=0.02, seed=1)
    b = fake_case(clock, 1_500, jitter=0.02, seed=2)
    config = SamplingConfig(rounds=200, min_rounds=200, batch_ns=20_000_000, warmup_calls=1, bootstrap=500)
    paired = measure_rounds([("A", a), ("B", b)], config, clock).ratio(["B"], ["A"])
    assert paired.low < 1.5 < paired.high or abs(paired.median - 1.5) < 0.01
    # the same cases sampled one after the other (A's rounds, then B's) mistake drift for speed
    only_a = measure_rounds([("A", a)], config, clock).median_ns("A")
    only_b = measure_rounds([("B", b)], config, clock).median_ns("B")
    assert abs(only_b / only_a - 1.5) > 0.1


def test_a_case_that_times_itself_is_taken_at_its_word():
    clock = FakeClock()

    def run(n: int) -> int:
        clock.spend(1e6)  # pipe and process overhead the harness must not count
        return 250 * n

    samples = measure_rounds([("floor", Case(run))], SamplingConfig(rounds=5, min_rounds=5, warmup_calls=1), clock)
    assert samples.median_ns("floor") == pytest.approx(250)


def test_three_way_rounds_give_the_floor_plus_call_statistic():
    clock = FakeClock()
    cases = [("ia", fake_case(clock, 1_200)), ("floor", fake_case(clock, 800)), ("call", fake_case(clock, 200))]
    samples = measure_rounds(cases, FAST, clock)
    assert samples.ratio(["floor", "call"], ["ia"]).median == pytest.approx(1000 / 1200, rel=1e-6)


def test_sampling_stops_at_max_seconds_once_min_rounds_are_in():
    clock = FakeClock()
    config = SamplingConfig(rounds=1000, min_rounds=7, max_seconds=0.001, batch_ns=1_000_000, warmup_calls=1)
    samples = measure_rounds([("A", fake_case(clock, 10_000))], config, clock)
    assert len(samples.per_op_ns) == 7


def test_per_side_host_arrays_give_each_side_its_own_arrays_with_the_same_bytes():
    host = HostData(1 << 12, shared=False)
    a, b = host.pageable("ironaccel", "h2d", 1024), host.pageable("cupy", "h2d", 1024)
    assert not np.shares_memory(a, b) and np.array_equal(a, b) and np.array_equal(a, host.src[:1024])
    assert len(np.unique(host.src)) > 200  # random bytes, not zeros
    out = host.pageable("ironaccel", "d2h", 1024)
    assert not np.shares_memory(out, a)
    with pytest.raises(AssertionError, match="1024 of 1024 bytes differ"):
        host.expect_equal(np.bitwise_not(host.src[:1024]), 1024, "poisoned")


def test_by_default_every_side_copies_the_same_pageable_arrays():
    host = HostData(1 << 12)
    a, b = host.pageable("ironaccel", "h2d", 1024), host.pageable("cupy", "h2d", 1024)
    assert np.shares_memory(a, b) and np.array_equal(a, host.src[:1024])
    assert not np.shares_memory(host.pageable("torch", "d2h", 1024), a)


# plan -------------------------------------------------------------------------------------------------------
def test_plan_covers_issue_4_with_unique_keys():
    full = ops.plan()
    keys = [op.key for op in full]
    assert len(keys) == len(set(keys))
    assert {op.group for op in full} == set(ops.GROUPS)
    sizes = sorted({op.nbytes for op in full if op.group == "transfer"})
    assert sizes[0] == 256 and sizes[-1] == 256 * ops.MiB and len(sizes) == 11
    # 11 sizes x 2 directions x 2 memories, and the copy into a new array
    assert len([op for op in full if op.group == "transfer"]) == 45
    assert {op.key for op in full if op.group == "alloc"} == {"stream_alloc/256", "stream_alloc/65536",
                                                                "stream_alloc/1048576"}
    assert [op.key for op in ops.plan(groups=frozenset({"launch"}))] == ["launch/4", "launch/16", "launch_prepared/4",
                                                                         "launch_cluster/2"]
    assert len(ops.plan(quick=True)) < len(full)
    with pytest.raises(ValueError):
        ops.copy("sideways", 1, False)


# runner, targets, report ------------------------------------------------------------------------------------
# Per-op costs (ns) of the fake sides; ironaccel is built to pass some targets and fail others.
COSTS = {
    "ironaccel": {"stream_sync": 250, "event_cycle": 1000, "event_reuse": 700, "stream_alloc": 900, "pool_alloc": 100,
                  "launch": 3000, "python_call": 150, "eager": 400_000, "graph": 60_000, "nvrtc_cold": 30e6,
                  "nvrtc_memory_hit": 2_000, "h2d": 0.05, "d2h": 0.06, "h2d_pinned": 0.019, "d2h_pinned": 0.019,
                  "while": 100_000, "host_func": 9_000},
    "cuda.bindings": {"stream_sync": 488, "event_cycle": 1389, "event_reuse": 828, "stream_alloc": 1167,
                      "pool_alloc": 1167, "launch": 3932, "eager": 420_000, "graph": 62_000, "nvrtc_cold": 30e6,
                      "h2d": 0.1, "d2h": 0.12, "h2d_pinned": 0.019, "d2h_pinned": 0.019},
    "cupy": {"host_func": 12_000, "stream_sync": 1544, "event_cycle": 7931, "stream_alloc": 1543,
             "pool_alloc": 549, "launch": 5197,
             "h2d": 0.11, "d2h": 0.13, "h2d_pinned": 0.02, "d2h_pinned": 0.02},
    "floor": {"stream_sync": 200, "launch": 2400, "h2d": 0.1, "d2h": 0.1, "h2d_pinned": 0.018, "d2h_pinned": 0.018},
}


class FakeSide(Side):
    """A side whose operations cost what COSTS says (transfers: ns per byte plus 5 us)."""

    def __init__(self, name: str, clock: FakeClock, *, broken_check: str = "", fails_open: bool = False,
                 self_timed: bool = False):
        self.self_timed = self_timed  # report its own ns (as the C floor does) instead of spending clock time
        self.name = name
        self.label = name
        self.clock = clock
        self.costs = COSTS.get(name, {})
        self.broken_check = broken_check
        self.fails_open = fails_open
        self.closed_cases = 0

    def open(self, ctx: BenchContext) -> dict[str, str]:
        if self.fails_open:
            raise SideUnavailable(f"{self.name} is not installed")
        return {self.name: "0.0-fake"}

    def _case(self, key: str, cost: float | None = None) -> Case:
        cost = self.costs.get(key) if cost is None else cost
        if cost is None:
            raise Unsupported(key)

        def check() -> None:
            if key == self.broken_check:
                raise AssertionError(f"{self.name} wrote the wrong bytes")

        def close() -> None:
            self.closed_cases += 1

        clock = self.clock

        def run(n: int) -> int | None:
            if self.self_timed:
                return int(n * cost)
            clock.spend(n * cost)
            return None

        return Case(run, check=check, close=close, note=f"fake {key}")

    def stream_sync(self):
        return self._case("stream_sync")

    def event_cycle(self):
        return self._case("event_cycle")

    def event_reuse(self):
        return self._case("event_reuse")

    def stream_alloc(self, nbytes):
        return self._case("stream_alloc")

    def pool_alloc(self, nbytes):
        return self._case("pool_alloc")

    def launch(self, nargs):
        return self._case("launch")

    def launch_call_overhead(self, nargs):
        return self._case("python_call")

    def eager_launches(self, count):
        return self._case("eager")

    def graph_replay(self, count):
        return self._case("graph")

    def conditional_while(self, count):
        return self._case("while")

    def host_func(self):
        return self._case("host_func")

    def nvrtc_cold(self):
        return self._case("nvrtc_cold")

    def nvrtc_memory_hit(self):
        return self._case("nvrtc_memory_hit")

    def copy(self, direction, nbytes, pinned):
        per_byte = self.costs.get(f"{direction}_pinned" if pinned else direction)
        if per_byte is None:
            raise Unsupported("copy")
        return self._case(f"{direction}_pinned" if pinned else direction, 5_000 + per_byte * nbytes)


def fake_fresh_process(side: str, arch: str, workdir: Path) -> dict[str, list[list[float]]]:
    hit, cold = (400_000, 40e6) if side == "ironaccel" else (2e6, 41e6)
    first = [[1e6 + hit * (1 + 0.01 * i), 1e6 + cold * (1 + 0.01 * i)] for i in range(6)]  # 1 ms of library loading
    later = [[hit * (1 + 0.01 * i), cold * (1 + 0.01 * i)] for i in range(8)]
    return {"first": first, "later": later}


def run_fake(tmp_path: Path, sides: list[Side], clock: FakeClock, plan=None) -> RunResult:
    ctx = BenchContext(0, "90", b"\x7fELF", tmp_path / "k.cubin", HostData(4096), tmp_path)
    config = RunConfig(FAST)
    runner = Runner(sides, ctx, config, clock=clock, log=lambda line: None, fresh_process=fake_fresh_process)
    plan = plan if plan is not None else ops.plan(quick=True)
    result = runner.run(plan, fresh_process_nvrtc=True)
    result.meta.update({"date": "2026-11-30 12:00 UTC", "device": {"name": "Fake GPU"}, "seconds": 1.0})
    return result


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory) -> tuple[RunResult, list[FakeSide]]:
    clock = FakeClock()
    sides = [
        FakeSide("ironaccel", clock),
        FakeSide("cuda.bindings", clock),
        FakeSide("cuda.core", clock, fails_open=True),
        FakeSide("cupy", clock, broken_check="event_cycle"),
        FakeSide("floor", clock),
    ]
    return run_fake(tmp_path_factory.mktemp("run"), sides, clock), sides


def test_runner_pairs_every_peer_with_ironaccel(fake_run):
    result, sides = fake_run
    assert result.sides == ["ironaccel", "cuda.bindings", "cupy", "floor"]
    assert result.skipped == {"cuda.core": "cuda.core is not installed"}
    sync = result.row("stream_sync")
    assert list(sync.cells) == ["ironaccel", "cuda.bindings", "cupy", "floor"]
    assert sync.cells["ironaccel"].ns == pytest.approx(250)
    assert sync.cells["cupy"].ratio.median == pytest.approx(1544 / 250)
    assert sync.cells["floor"].verdict == "loss"
    assert sync.cells["cuda.bindings"].verdict == "win"
    # CuPy's event cycle failed its check: left out of the row, the error recorded, the rest measured
    cycle = result.row("event_cycle")
    assert "cupy" not in cycle.cells and any("wrong bytes" in e for e in cycle.errors)
    assert set(cycle.cells) == {"ironaccel", "cuda.bindings"}
    # every case that was built was closed
    assert all(side.closed_cases > 0 for side in sides if side.name != "cuda.core")


def test_targets_pass_and_fail_on_the_true_ratios(fake_run):
    result, _ = fake_run
    status = {t.name: t for t in result.targets}
    assert status["MemPool alloc+free 64 KiB >= 3x CuPy MemoryPool"].status == "PASS"  # 549/100
    assert status["MemPool alloc+free 64 KiB >= 6x raw stream-ordered alloc+free"].status == "PASS"  # 1167/100
    assert status["launch, 4 args >= 1.2x CuPy RawKernel"].status == "PASS"  # 5197/3000
    assert status["launch, 4 args >= 1.2x cuda.core launch()"].status == "NOT MEASURED"
    floor = status["launch, 4 args within 1.2x of C floor + Python call"]
    assert floor.interval.median == pytest.approx((2400 + 150) / 3000) and floor.status == "PASS"
    assert status["graph replay of 100 launches >= 3x faster than eager"].status == "PASS"  # 400/60
    assert not any("while-graph" in name for name in status)  # a row of the execution issue, not a target
    assert result.special("while_vs_eager/100").interval is not None
    nvrtc = status["NVRTC disk-cache hit in a fresh process >= 30x faster than compiling"]
    # 1 ms of library loading in each fresh process: (1 + 40) / (1 + 0.4) = 29.3x, just short of 30x
    assert nvrtc.status == "FAIL" and nvrtc.interval.median == pytest.approx(41 / 1.4, rel=0.05)
    assert result.special("nvrtc_warm_process/ironaccel").interval.median == pytest.approx(100, rel=0.05)
    # pageable 16 MiB h2d: ironaccel 0.05 ns/B against raw 0.1: 2x, short of 2.5x
    assert status["pageable h2d 16 MiB >= 2.5x fastest peer"].status == "FAIL"
    pinned = status["pageable h2d 16 MiB >= 75% of pinned bandwidth"]
    assert pinned.interval.median == pytest.approx((5e3 + 0.018 * 16 * ops.MiB) / (5e3 + 0.05 * 16 * ops.MiB))
    assert pinned.status == "FAIL"
    assert status["pageable h2d 1 KiB >= 1.2x fastest peer"].status == "FAIL"  # 5 us fixed cost dominates
    ahead = [t for t in result.targets if "ahead of" in t.name]
    assert ahead and all(t.status == "PASS" for t in ahead)
    assert not any("C floor" in t.name and "ahead" in t.name for t in result.targets)


def test_markdown_and_json_render_every_row_and_target(fake_run, tmp_path):
    result, _ = fake_run
    text = report.markdown(result)
    assert "# ironaccel-cuda benchmark" in text and "Fake GPU" in text
    assert f"## Targets: {sum(t.status == 'PASS' for t in result.targets)} of {len(result.targets)} pass" in text
    for row in result.rows:
        assert row.title in text
    assert "6.18x" in text  # CuPy stream sync 1544 / 250
    assert "cuda.core is not installed" in text and "wrong bytes" in text
    assert "GB/s" in text
    path = tmp_path / "results.json"
    report.write_json(result, path)
    data = json.loads(path.read_text())
    assert data["meta"]["device"]["name"] == "Fake GPU"
    assert {t["status"] for t in data["targets"]} <= {"PASS", "FAIL", "NOT MEASURED"}
    sync = next(r for r in data["rows"] if r["key"] == "stream_sync")
    assert sync["cells"]["cupy"]["ratio_vs_ironaccel"]["median"] == pytest.approx(1544 / 250)
    assert any(s["key"] == "nvrtc_fresh_process/ironaccel" for s in data["special_comparisons"])


def test_transfer_chart_is_written(fake_run, tmp_path):
    pytest.importorskip("matplotlib")
    result, _ = fake_run
    path = tmp_path / "transfers.png"
    assert report.plot_transfers(result, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    series = report.ratio_series(result)
    assert set(series) == {("h2d", "pageable"), ("d2h", "pageable"), ("h2d", "pinned"), ("d2h", "pinned")}


def test_without_ironaccel_the_table_keeps_absolute_figures(tmp_path):
    clock = FakeClock()
    sides = [FakeSide("ironaccel", clock, fails_open=True), FakeSide("cupy", clock)]
    result = run_fake(tmp_path, sides, clock, plan=[ops.stream_sync(), ops.pool_alloc(65536)])
    assert result.row("stream_sync").cells["cupy"].ns == pytest.approx(1544)
    assert result.row("stream_sync").cells["cupy"].ratio is None
    assert result.errors and "ironaccel did not open" in result.errors[0]
    assert {t.status for t in result.targets} == {"NOT MEASURED"}
    assert "NOT MEASURED" in report.markdown(result)


def test_special_comparison_reports_a_side_that_cannot_run(tmp_path):
    clock = FakeClock()
    sides = [FakeSide("ironaccel", clock), FakeSide("cupy", clock)]
    result = run_fake(tmp_path, sides, clock, plan=[ops.launch(4)])
    floor_target = next(t for t in result.targets if "C floor" in t.name)
    assert floor_target.status == "NOT MEASURED"
    spec = targets.SpecialSpec("x", (("a", "ironaccel", ops.launch(4)), ("b", "torch", ops.launch(4))), ("b",), ("a",))
    runner = Runner(sides, BenchContext(0, "90", b"", tmp_path / "k", HostData(16), tmp_path), RunConfig(FAST),
                    clock=clock, log=lambda line: None)
    runner.open_sides()
    special = runner.measure_special(spec)
    assert special.interval is None and "torch" in special.error


def test_the_one_command_writes_table_json_and_chart(tmp_path, monkeypatch, capsys):
    import run
    import sides.bindings_side as bindings_side

    clock = FakeClock()
    fakes = [FakeSide(name, clock, self_timed=True) for name in ("ironaccel", "cuda.bindings", "cupy", "floor")]
    monkeypatch.setattr(run, "all_sides", lambda: fakes)
    monkeypatch.setattr(bindings_side, "device_facts", lambda ordinal: {"name": "Fake H200", "arch": "90",
                                                                         "compute_capability": "9.0"})
    monkeypatch.setattr(bindings_side, "benchmark_cubin", lambda arch: b"\x7fELF")
    monkeypatch.setenv("IRONACCEL_CUDA_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    assert run.main(["--out", str(out), "--quick", "--only", "host,pool,transfer", "--sides",
                     "ironaccel,cupy,floor", "--max-seconds", "0.01"]) == 0
    text = (out / "results.md").read_text()
    assert "Fake H200" in text and "pooled alloc+free 64 KiB" in text and "GB/s" in text
    assert "cuda.bindings (Python)" not in text  # not asked for: no column
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["mode"] == "quick" and data["sides"] == ["ironaccel", "cupy", "floor"]
    assert data["meta"]["date"].endswith("UTC") and "python" in data["meta"]
    if report_has_matplotlib():
        assert (out / "transfers.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Targets" in capsys.readouterr().out
    assert run.main(["--out", str(out), "--only", "nonsense"]) == 2


def report_has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


# the C floor ------------------------------------------------------------------------------------------------
CUDA_INCLUDE = Path("/usr/local/cuda/include")


@pytest.fixture(scope="module")
def floor_binary(tmp_path_factory) -> Path:
    """floor.c built against a pretend libcuda (testing/fake_libcuda.c), so it runs without a GPU."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None or not (CUDA_INCLUDE / "cuda.h").is_file():
        pytest.skip("needs a C compiler and cuda.h (CUDA toolkit headers)")
    folder = tmp_path_factory.mktemp("floor")
    subprocess.run([gcc, "-shared", "-fPIC", f"-I{CUDA_INCLUDE}", "-o", str(folder / "libcuda.so"),
                    str(BENCH / "testing" / "fake_libcuda.c")], check=True)
    subprocess.run([gcc, "-O2", "-Wall", "-Werror", f"-I{CUDA_INCLUDE}", "-o", str(folder / "floor"),
                    str(BENCH / "floor.c"), f"-L{folder}", "-lcuda", f"-Wl,-rpath,{folder}"], check=True)
    (folder / "k.cubin").write_bytes(b"\x7fELF fake cubin")
    return folder / "floor"


def test_probe_wait_compiles_with_warnings_as_errors(tmp_path):
    """probe_wait.c runs only on the GPU machine (built there with nvcc); here it must at least compile."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None or not (CUDA_INCLUDE / "cuda.h").is_file():
        pytest.skip("needs a C compiler and cuda.h (CUDA toolkit headers)")
    source = BENCH / "experiments" / "probe_wait.c"
    subprocess.run([gcc, "-c", "-O2", "-Wall", "-Werror", f"-I{CUDA_INCLUDE}", str(source), "-o",
                    str(tmp_path / "probe_wait.o")], check=True)


def test_floor_json_mode_prints_every_operation(floor_binary):
    done = subprocess.run([str(floor_binary), str(floor_binary.parent / "k.cubin"), "--json"], capture_output=True,
                          text=True, timeout=120, check=True)
    figures = json.loads(done.stdout)
    assert {"stream_sync", "event_cycle", "launch/4", "launch/16", "graph/100", "h2d/pageable/67108864",
            "d2d/65536"} <= set(figures)
    assert all(value > 0 for value in figures.values())


def test_floor_side_serves_timed_batches(floor_binary, tmp_path):
    ctx = BenchContext(0, "90", b"", floor_binary.parent / "k.cubin", HostData(16), tmp_path)
    side = FloorSide(binary=floor_binary)
    assert side.open(ctx) == {"nvcc": "prebuilt"}  # open() runs the floor's own self-check
    try:
        for op in (ops.stream_sync(), ops.event_cycle(), ops.stream_alloc(65536), ops.launch(16),
                   ops.copy("d2h", 1 << 20, True), ops.graph_replay(100), ops.eager_launches(100)):
            case = side.case(op)
            if case.check:
                case.check()
            assert case.run(10) > 0
        d2d = side.copy_d2d(1 << 20)  # the compat benchmark's d2d rows (compat_cuda_core.py)
        assert d2d.run(10) > 0
        for op, arg in (("event_timed", 0), ("mem_alloc", 65536), ("htod_sync", 1024), ("dtoh_sync", 1 << 20)):
            assert side.process.request(op, arg, 10)["ns"] > 0  # PyCUDA's calls (bench_pycuda_compat.py)
        with pytest.raises(Unsupported):
            side.case(ops.nvrtc_cold())
        with pytest.raises(FloorError, match="unknown op"):
            side.process.request("bogus", 0, 1)
    finally:
        side.close()
    assert side.process.proc.returncode == 0


def test_every_peer_cell_carries_the_medians_of_its_own_pairing(fake_run):
    result, _ = fake_run
    for row in result.rows:
        for name, cell in row.cells.items():
            if cell.ratio is not None:
                assert cell.base_ns is not None and cell.disagreement() is None, (row.key, name)
    assert report.disagreements(result) == []
    text = report.markdown(result)
    assert "in this pairing" in text and "## What each side calls" in text
    assert " ✗ |" not in text and "contradict themselves" not in text


def test_a_cell_whose_medians_and_ratio_disagree_is_flagged():
    from harness import Interval
    from results import Cell, Row

    # an earlier report printed "event cycle: 1.73x ahead of cuda.core, ironaccel 1,636 ns vs cuda.core
    # 1,524 ns": the ratio came from one pairing, ironaccel's median from all of them pooled
    bad = Cell("cuda.core", 1524.0, Interval(1.73, 1.70, 1.76, 40), 40, 100, "Event()", 1636.0)
    good = Cell("cuda.core", 1524.0, Interval(1.73, 1.70, 1.76, 40), 40, 100, "Event()", 880.0)
    assert bad.disagreement() and "outside the ratio's interval" in bad.disagreement()
    assert good.disagreement() is None
    assert Cell("cupy", 10.0, Interval(1.0, 0.9, 1.1, 5)).disagreement()  # a ratio with no paired median
    result = RunResult()
    result.rows.append(Row("event_cycle", "event create/record/sync/destroy", "host", 0,
                           {"ironaccel": Cell("ironaccel", 1636.0), "cuda.core": bad}))
    assert len(report.disagreements(result)) == 1
    text = report.markdown(result)
    assert " ✗ |" in text and "contradict themselves" in text


# the memory rows (issue 10), run for real against the fake libcuda of ../tests/fakecuda -------------------
MEMORY_ROWS_SCRIPT = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import paths
paths.ensure_import_paths()
import ops
import ironaccel_cuda as ia
from sides.base import BenchContext, HostData
from sides.bindings_side import BindingsSide, init_primary_context
from sides.ironaccel_side import IronaccelSide

work = Path(sys.argv[2])
ctx = BenchContext(0, "90", b"", work / "k.cubin", HostData(4096), work)
ours = IronaccelSide()  # opened by hand: the fake driver has none of the benchmark's kernels
ours.ia, ours.ctx, ours.dev = ia, ctx, ia.Device(0)
ours.stream = ours.dev.create_stream()
raw = BindingsSide()
raw.cu, raw.dev, raw.pctx = init_primary_context(0)
raw.ctx = ctx
err, raw.stream = raw.cu.cuStreamCreate(1)
assert not err, err
small = [ops.pool_cycle(1 << 20, True), ops.pool_cycle(1 << 20, False), ops.ipc_roundtrip(1 << 20),
         ops.grow_in_place(2 << 20), ops.grow_by_copy(1 << 20), ops.managed_prefetch(1 << 20)]
assert {op.method for op in small} == {op.method for op in ops.memory_ops()}
for op in small:
    for side in (ours, raw):
        case = side.case(op)
        if case.check is not None:
            case.check()
        for _ in range(2):
            took = case.run(min(2, case.max_batch))
            assert took is None or took > 0
            if case.settle is not None:
                case.settle()
        case.close()
        print("ok", side.name, op.key)
assert ours.dev.default_pool.release_threshold == (1 << 64) - 1  # every pool_cycle case leaves it raised
"""


def test_memory_rows_run_against_the_fake_driver(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not (CUDA_INCLUDE / "cuda.h").is_file():
        pytest.skip("needs a C compiler and cuda.h (CUDA toolkit headers)")
    fake = BENCH.parent / "tests" / "fakecuda"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", f"-I{CUDA_INCLUDE}", "-o", str(tmp_path / "libcuda.so.1"),
                    *map(str, sorted(fake.glob("*.c"))), "-Wl,-soname,libcuda.so.1", "-lpthread"], check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path), IRONACCEL_CUDA_FAKE="1",
               IRONACCEL_CUDA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("IRONACCEL_REQUIRE", None)
    done = subprocess.run([sys.executable, "-c", MEMORY_ROWS_SCRIPT, str(BENCH), str(tmp_path)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("ok ") == 12, done.stdout


def test_written_out_calls_the_target_with_every_argument_n_times():
    from sides.base import written_out

    seen = []
    run = written_out(lambda *a, **k: seen.append((a, k)), (1, "two", 3.0), stream="s")
    run(3)
    assert seen == [((1, "two", 3.0), {"stream": "s"})] * 3
    run_plain = written_out(lambda *a: seen.append(a), ())
    run_plain(1)
    assert seen[-1] == ()


# the compat benchmarks' summaries ---------------------------------------------------------------------------


def _interval(low: float, median: float, high: float) -> dict[str, float]:
    return {"low": low, "median": median, "high": high, "n": 20}


def test_compat_summaries_name_the_misses_no_wrapper_could_meet():
    """A missed row counts as out of reach only when the peer / floor interval does not clear the target."""
    import bench_pycuda_compat
    import compat_cuda_core

    rows = [
        {"title": "met", "verdict": "PASS", "errors": {}, "core_vs_floor": _interval(1.3, 1.4, 1.5)},
        {"title": "reachable", "verdict": "FAIL", "errors": {}, "core_vs_floor": _interval(1.11, 1.2, 1.26)},
        {"title": "at the floor", "verdict": "FAIL", "errors": {}, "core_vs_floor": _interval(0.96, 0.97, 0.98)},
        {"title": "skipped", "verdict": "NOT MEASURED", "errors": {}},
    ]
    assert compat_cuda_core._summary(rows) == (
        "1 of 3 rows meet the target.  Of the 2 that miss, 1 are rows where cuda.core / floor does not clear 1.1 "
        "either: at the floor.")
    assert compat_cuda_core._summary(rows[:1]) == "1 of 1 rows meet the target."

    def row(name: str, verdict: str, floor: dict[str, float]) -> dict[str, object]:
        return {"row": name, "verdict": verdict, "pycuda_ns": 2.0, "compat_ns": 1.0, "floor_ns": 1.0,
                "ratio": _interval(1.9, 2.0, 2.1), "pycuda_vs_floor": floor}

    text = bench_pycuda_compat._markdown({}, [row("a", "PASS", _interval(2, 2, 2)),
                                              row("b", "FAIL", _interval(1.05, 1.1, 1.2))], FAST)
    assert ("1 of 2 rows meet the target.  Of the 1 that miss, 1 are rows where PyCUDA / floor does not clear "
            "1.2 either: b.") in text

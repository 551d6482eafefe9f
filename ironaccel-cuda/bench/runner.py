"""Runs the plan: opens the sides, measures each row pairwise against ironaccel, then the targets.

A failure of one side on one operation (an exception, a failed check) is recorded on that row and
the run goes on; a side that cannot open is skipped with its reason. Nothing here knows a
library: the sides do.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import targets
from harness import Case, Clock, SamplingConfig, bootstrap_median, measure_rounds
from ops import OpSpec
from paths import BENCH_DIR, child_environment
from results import Cell, Row, RunResult, Special
from sides import BASELINE
from sides.base import BenchContext, Side, SideUnavailable, Unsupported, unique_source

FreshProcessRunner = Callable[[str, str, Path], dict[str, list[list[float]]]]


@dataclass(frozen=True)
class RunConfig:
    sampling: SamplingConfig
    nvrtc_children: int = 6  # pairs of fresh processes (first compile a disk hit / a cold compile) per side
    nvrtc_pairs: int = 4  # later (disk hit, cold compile) pairs inside each disk-hit process


# The packages a fresh-process NVRTC child imports on each side, beside the bench's own modules.
_SIDE_PACKAGES = {"ironaccel": ("ironaccel_cuda", "ironaccel"), "cuda.core": ("cuda.core",)}


def precompile_bytecode(side: str) -> None:
    """Write missing .pyc files for the bench and the side's packages (as `pip install` does by default), so
    fresh processes do not compile Python source -- with PYTHONDONTWRITEBYTECODE=1, or an install made with
    --no-compile, each would otherwise recompile every module it imports.  Failures (read-only folders) are
    ignored: the children then run as before."""
    import compileall
    import importlib.util

    folders = [BENCH_DIR]
    for name in _SIDE_PACKAGES.get(side, ()):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            folders += [Path(p) for p in spec.submodule_search_locations]
    for folder in folders:
        try:
            compileall.compile_dir(str(folder), quiet=2, workers=1)
        except Exception:
            pass


def _short(exc: BaseException) -> str:
    """The error in at most ~600 characters: its head and its last line (a child's traceback ends with the
    exception itself, which a cut at the head alone lost: the IPC importer's error)."""
    text = f"{type(exc).__name__}: {exc}"
    if len(text) < 600:
        return text
    last = text.rstrip().splitlines()[-1][:300]
    return f"{text[:300]} ... {last}"


class Runner:
    def __init__(
        self,
        sides: Sequence[Side],
        ctx: BenchContext,
        config: RunConfig,
        *,
        clock: Clock = time.perf_counter_ns,
        log: Callable[[str], None] = print,
        fresh_process: FreshProcessRunner | None = None,
    ):
        self.all_sides = list(sides)
        self.ctx = ctx
        self.config = config
        self.clock = clock
        self.log = log
        self.fresh_process = fresh_process or self._run_nvrtc_children
        self.sides: dict[str, Side] = {}
        self.result = RunResult()

    # sides
    def open_sides(self) -> None:
        for side in self.all_sides:
            try:
                versions = side.open(self.ctx)
            except SideUnavailable as exc:
                self.result.skipped[side.name] = str(exc)
                self.log(f"  skip {side.label}: {exc}")
                continue
            except Exception as exc:  # a peer that breaks on open is skipped, with the reason shown
                self.result.skipped[side.name] = _short(exc)
                self.log(f"  skip {side.label}: {_short(exc)}")
                continue
            self.sides[side.name] = side
            self.result.sides.append(side.name)
            self.result.meta.setdefault("versions", {}).update(versions)
            self.log(f"  open {side.label}: {versions}")

    def close_sides(self) -> None:
        for side in self.sides.values():
            try:
                side.close()
            except Exception as exc:
                self.result.errors.append(f"{side.name} close: {_short(exc)}")

    # cases
    def _build(self, side: Side, op: OpSpec, errors: list[str]) -> Case | None:
        try:
            case = side.case(op)
        except Unsupported:
            return None
        except Exception as exc:
            errors.append(f"{side.name}: {_short(exc)}")
            self.log(f"    {side.name} {op.key}: {_short(exc)}")
            return None
        if case.check is not None:
            try:
                case.check()
            except Exception as exc:
                errors.append(f"{side.name} check: {_short(exc)}")
                self.log(f"    {side.name} {op.key} check failed: {_short(exc)}")
                self._close(case, errors, side.name)
                return None
        return case

    def _close(self, case: Case, errors: list[str], name: str) -> None:
        if case.close is not None:
            try:
                case.close()
            except Exception as exc:
                errors.append(f"{name} close: {_short(exc)}")

    def _sample(self, cases: list[tuple[str, Case]], errors: list[str]):  # -> Samples | None
        try:
            return measure_rounds(cases, self.config.sampling, self.clock)
        except Exception as exc:
            errors.append(f"{' vs '.join(label for label, _ in cases)}: {_short(exc)}")
            self.log(f"    sampling failed: {_short(exc)}")
            self.log(traceback.format_exc(limit=3))
            return None

    # rows
    def measure_row(self, op: OpSpec) -> Row:
        row = Row(op.key, op.title, op.group, op.nbytes)
        cases: dict[str, Case] = {}
        for name, side in self.sides.items():
            case = self._build(side, op, row.errors)
            if case is not None:
                cases[name] = case
        seed = self.config.sampling.seed
        resamples = self.config.sampling.bootstrap
        try:
            base = cases.get(BASELINE)
            if base is None:
                for name, case in cases.items():  # no ironaccel: absolute figures only
                    samples = self._sample([(name, case)], row.errors)
                    if samples is not None:
                        row.cells[name] = Cell(name, samples.median_ns(name), None, len(samples.per_op_ns),
                                               samples.batch[0], case.note)
                return row
            base_ns: list[np.ndarray] = []
            base_batch = 0
            for name, case in cases.items():
                if name == BASELINE:
                    continue
                samples = self._sample([(BASELINE, base), (name, case)], row.errors)
                if samples is None:
                    continue
                base_ns.append(samples.column(BASELINE))
                base_batch = samples.batch[0]
                ratio = samples.ratio([name], [BASELINE], resamples=resamples, seed=seed)
                row.cells[name] = Cell(name, samples.median_ns(name), ratio, len(samples.per_op_ns),
                                       samples.batch[1], case.note, samples.median_ns(BASELINE))
                why = row.cells[name].disagreement()
                if why:
                    row.errors.append(f"{name}: the cell contradicts itself: {why}")
            if not base_ns:
                samples = self._sample([(BASELINE, base)], row.errors)
                if samples is not None:
                    base_ns.append(samples.column(BASELINE))
                    base_batch = samples.batch[0]
            if base_ns:
                pooled = np.concatenate(base_ns)
                row.cells = {BASELINE: Cell(BASELINE, float(np.median(pooled)), None, len(pooled), base_batch,
                                            base.note), **row.cells}
            return row
        finally:
            for name, case in cases.items():
                self._close(case, row.errors, name)

    def measure_special(self, spec: targets.SpecialSpec) -> Special:
        errors: list[str] = []
        built: list[tuple[str, Case]] = []
        special = Special(spec.key, {}, None, list(spec.numerator), list(spec.denominator))
        try:
            for label, side_name, op in spec.entries:
                side = self.sides.get(side_name)
                case = self._build(side, op, errors) if side is not None else None
                if case is None:
                    special.error = "; ".join(errors) or f"{side_name} cannot run {op.key}"
                    return special
                built.append((label, case))
            samples = self._sample(built, errors)
            if samples is None:
                special.error = "; ".join(errors)
                return special
            special.medians = {label: samples.median_ns(label) for label, _ in built}
            special.interval = samples.ratio(spec.numerator, spec.denominator,
                                             resamples=self.config.sampling.bootstrap, seed=self.config.sampling.seed)
            special.rounds = len(samples.per_op_ns)
            return special
        finally:
            for label, case in built:
                self._close(case, errors, label)
            if errors and not special.error:
                special.error = "; ".join(errors)

    # NVRTC in a fresh process
    def _run_nvrtc_children(self, side: str, arch: str, workdir: Path) -> dict[str, list[list[float]]]:
        """Pairs of fresh processes, one whose first compile hits the disk cache, one whose first compile
        is cold; plus, inside the hit processes, later (disk hit, cold) pairs."""
        token = uuid.uuid4().hex
        count, later = self.config.nvrtc_children, self.config.nvrtc_pairs
        sources = [unique_source(i, f"fresh-{token}") for i in range(count + later)]
        cache_dir = workdir / f"nvrtc-disk-{side.replace('.', '-')}-{token[:8]}"
        cache_dir.mkdir(parents=True)
        source_file = cache_dir.parent / f"{cache_dir.name}.json"
        source_file.write_text(json.dumps(sources))
        command = [sys.executable, str(BENCH_DIR / "nvrtc_child.py"), "--side", side, "--cache-dir", str(cache_dir),
                   "--arch", arch, "--sources", str(source_file)]
        env = child_environment()
        precompile_bytecode(side)

        def child(*extra: str) -> dict:
            done = subprocess.run(command + list(extra), capture_output=True, text=True, env=env, timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"nvrtc_child {extra} exited {done.returncode}: {done.stderr.strip()[-600:]}")
            return json.loads(done.stdout.strip().splitlines()[-1])

        child("--mode", "populate")
        first, warm = [], []
        for index in range(count):
            hit_args = ("--mode", "hit", "--index", str(index), "--later", str(later))
            if index % 2 == 0:
                hit, cold = child(*hit_args), child("--mode", "cold")
            else:
                cold, hit = child("--mode", "cold"), child(*hit_args)
            # a fresh process pays its import too: some libraries load NVRTC at import, others at first use
            first.append([hit["import_ns"] + hit["first_ns"], cold["import_ns"] + cold["first_ns"]])
            warm += hit["later"]
        return {"first": first, "later": warm}

    def nvrtc_fresh_process_rows(self) -> list[Row]:
        from nvrtc_child import FRESH_PROCESS_SIDES

        fresh = Row(targets.NVRTC_FRESH_ROW, "NVRTC disk-cache hit in a fresh process (import + first compile)",
                    "nvrtc")
        warm = Row("nvrtc/disk_hit_warm_process", "NVRTC disk-cache hit, later compiles of that process", "nvrtc")
        config = self.config.sampling
        for side in FRESH_PROCESS_SIDES:
            if side not in self.sides:
                continue
            try:
                answers = self.fresh_process(side, self.ctx.arch, self.ctx.workdir)
            except Exception as exc:
                fresh.errors.append(f"{side}: {_short(exc)}")
                self.log(f"    {side} fresh-process NVRTC: {_short(exc)}")
                continue
            for row, key, pairs, how in (
                (fresh, targets.nvrtc_fresh_key(side), answers["first"], "import + first compile, fresh processes"),
                (warm, f"nvrtc_warm_process/{side}", answers["later"], "later calls, same process"),
            ):
                if not pairs:
                    continue
                data = np.asarray(pairs, dtype=np.float64)
                interval = bootstrap_median(data[:, 1] / data[:, 0], resamples=config.bootstrap, seed=config.seed)
                hit, cold = float(np.median(data[:, 0])), float(np.median(data[:, 1]))
                self.result.specials.append(Special(key, {"disk hit": hit, "cold compile": cold}, interval,
                                                    ["cold compile"], ["disk hit"], len(data)))
                row.cells[side] = Cell(side, hit, None, len(data), 1,
                                       f"{row.title}: cold compile {cold / 1e6:,.1f} ms = {interval.median:,.1f}x "
                                       f"the hit ({how})")
        return [fresh, warm]

    # the whole run
    def run(self, plan: Sequence[OpSpec], *, fresh_process_nvrtc: bool = True) -> RunResult:
        self.log("opening sides")
        self.open_sides()
        try:
            if BASELINE not in self.sides:
                self.result.errors.append(f"ironaccel did not open: {self.result.skipped.get(BASELINE)}")
            for index, op in enumerate(plan, 1):
                started = time.perf_counter()
                row = self.measure_row(op)
                self.result.rows.append(row)
                took = time.perf_counter() - started
                self.log(f"[{index}/{len(plan)}] {op.title}: {self._summary(row)} ({took:.1f} s)")
            if fresh_process_nvrtc:
                for row in self.nvrtc_fresh_process_rows():
                    self.result.rows.append(row)
                    self.log(f"[nvrtc] {row.title}: {self._summary(row)}")
            self.log("targets")
            self.result.targets = targets.evaluate(self.result, self.measure_special)
        finally:
            self.close_sides()
        return self.result

    @staticmethod
    def _summary(row: Row) -> str:
        parts = []
        for name, cell in row.cells.items():
            text = f"{name} {cell.ns:,.0f} ns"
            if cell.ratio is not None:
                text += f" ({cell.ratio.median:.2f}x {cell.verdict})"
            parts.append(text)
        if row.errors:
            parts.append(f"{len(row.errors)} error(s)")
        return "; ".join(parts) or "nothing measured"

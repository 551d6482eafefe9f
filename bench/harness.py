"""Paired sampling and its statistics: the method of every backend's benchmark, free of any GPU code.

It lives in the repository's bench/ (no distribution ships it): ironaccel-cuda/bench finds it through
paths.ensure_import_paths(), the other backends' benches through their own path (see versus.py).

A `Case` runs `n` operations per call. Cases compared with one another are sampled in rounds:
each round times one batch of every case, back to back, in an order that changes from round to
round (A B, B A, A B, ...; for more cases the rows of a balanced Latin square, so each case runs
right after each other equally often), so drift of the machine (clocks, other tenants, caches, the
state another case leaves behind) hits every side alike. Per round we form a statistic of the
per-operation times, usually a ratio, and report its median with a bootstrap 95% interval over rounds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

Clock = Callable[[], int]


@dataclass
class Case:
    """One operation of one side, ready to time.

    `run(n)` performs the operation n times and returns None (the harness times the call with
    the clock) or its own measured nanoseconds (the C floor times itself, pipe excluded).
    `settle()` runs untimed after every batch (drains queued launches so they don't leak into
    the next batch); `check()` proves once, before timing, that the operation does its job;
    `close()` frees what the case holds.
    """

    run: Callable[[int], int | None]
    settle: Callable[[], None] | None = None
    check: Callable[[], None] | None = None
    close: Callable[[], None] | None = None
    max_batch: int = 1_000_000
    note: str = ""


@dataclass(frozen=True)
class SamplingConfig:
    """How long and how often to sample. `quick()` is the smoke-run setting."""

    rounds: int = 40  # pairs (or triples) per comparison, at most
    min_rounds: int = 12  # never fewer, whatever max_seconds says
    max_seconds: float = 3.0  # a comparison stops early past this, once min_rounds are in
    batch_ns: int = 2_000_000  # aim for ~2 ms per timed batch
    warmup_calls: int = 3
    bootstrap: int = 2000
    seed: int = 20261130

    @classmethod
    def quick(cls) -> SamplingConfig:
        return cls(rounds=10, min_rounds=6, max_seconds=0.8, batch_ns=1_000_000, warmup_calls=2, bootstrap=1000)


@dataclass(frozen=True)
class Interval:
    """Median of a per-round statistic with its bootstrap confidence interval."""

    median: float
    low: float
    high: float
    n: int

    def above(self, threshold: float) -> bool:
        return self.low > threshold

    def below(self, threshold: float) -> bool:
        return self.high < threshold

    def to_json(self) -> dict[str, float | int]:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n}


def verdict(interval: Interval | None, threshold: float = 1.0) -> str:
    """'win' only when the whole interval is above the threshold, 'loss' when wholly below."""
    if interval is None:
        return "n/a"
    if interval.above(threshold):
        return "win"
    if interval.below(threshold):
        return "loss"
    return "parity"


def bootstrap_median(
    values: Sequence[float] | np.ndarray, *, resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> Interval:
    """Median of `values` and a percentile-bootstrap interval for it (resampling with replacement)."""
    data = np.asarray(values, dtype=np.float64)
    data = data[np.isfinite(data)]
    if data.size == 0:
        raise ValueError("bootstrap_median needs at least one finite value")
    median = float(np.median(data))
    if data.size == 1:
        return Interval(median, median, median, 1)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.size, size=(resamples, data.size))
    medians = np.median(data[picks], axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(medians, [tail, 100.0 - tail])
    return Interval(median, float(low), float(high), int(data.size))


def timed_batch(case: Case, n: int, clock: Clock) -> float:
    """Nanoseconds per operation of one batch of n operations (settle runs after, untimed)."""
    start = clock()
    own = case.run(n)
    stop = clock()
    if case.settle is not None:
        case.settle()
    total = own if own is not None else stop - start
    return max(float(total), 1.0) / n


def calibrate(case: Case, config: SamplingConfig, clock: Clock) -> int:
    """Warm the case up, then pick n so that a batch takes about `config.batch_ns`."""
    for _ in range(config.warmup_calls):
        timed_batch(case, 1, clock)
    n = 1
    per_op = timed_batch(case, n, clock)
    while per_op * n < config.batch_ns / 8 and n < case.max_batch:
        n = min(case.max_batch, n * 4)
        per_op = timed_batch(case, n, clock)
    if per_op * n < config.batch_ns:  # cheap to repeat: take the best of three, so one hiccup doesn't shrink n
        per_op = min(per_op, timed_batch(case, n, clock), timed_batch(case, n, clock))
    return int(min(case.max_batch, max(1, round(config.batch_ns / per_op))))


@dataclass
class Samples:
    """Per-operation nanoseconds of k cases over the rounds they were sampled in (rows = rounds)."""

    labels: list[str]
    per_op_ns: np.ndarray  # shape (rounds, k)
    batch: list[int]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def column(self, label: str) -> np.ndarray:
        return self.per_op_ns[:, self.labels.index(label)]

    def median_ns(self, label: str) -> float:
        return float(np.median(self.column(label)))

    def ratio(
        self, numerator: Sequence[str], denominator: Sequence[str], *, resamples: int = 2000, seed: int = 0
    ) -> Interval:
        """Per round: sum(numerator times) / sum(denominator times); median and interval over rounds.

        With numerator=[peer] and denominator=[ironaccel] this is the speed-up of ironaccel:
        above 1.0 means ironaccel took less time.
        """
        top = sum(self.column(label) for label in numerator)
        bottom = sum(self.column(label) for label in denominator)
        return bootstrap_median(np.asarray(top) / np.asarray(bottom), resamples=resamples, seed=seed)


def rotation(k: int, round_index: int) -> list[int]:
    """The order of the k cases in a round: a row of a balanced Latin square (Williams design), so that over k
    rounds (2k when k is odd) each case runs right after each other case equally often.

    A plain cyclic shift kept the cyclic order, so one case always ran right after the same other: behind the C
    floor (another process, another context on the GPU) the compat's graph replay paid the context switch in
    every batch, 0.91 of ironaccel's own against 1.00 without the floor (H200)."""
    if k <= 0:
        return []
    seq, lo, hi = [0], 1, k - 1
    while len(seq) < k:
        seq.append(lo)
        lo += 1
        if len(seq) < k:
            seq.append(hi)
            hi -= 1
    shift = round_index % k
    order = [(x + shift) % k for x in seq]
    if k % 2 and (round_index // k) % 2:
        order.reverse()
    return order


def measure_rounds(
    cases: Sequence[tuple[str, Case]], config: SamplingConfig, clock: Clock = time.perf_counter_ns
) -> Samples:
    """Sample the labelled cases together, one batch each per round, in the order `rotation` gives."""
    if not cases:
        raise ValueError("measure_rounds needs at least one case")
    labels = [label for label, _ in cases]
    if len(set(labels)) != len(labels):
        raise ValueError(f"measure_rounds needs distinct labels, got {labels}")
    batch = [calibrate(case, config, clock) for _, case in cases]
    rows: list[list[float]] = []
    start = clock()
    for index in range(config.rounds):
        row = [math.nan] * len(cases)
        for i in rotation(len(cases), index):
            row[i] = timed_batch(cases[i][1], batch[i], clock)
        rows.append(row)
        if index + 1 >= config.min_rounds and clock() - start > config.max_seconds * 1e9:
            break
    seconds = (clock() - start) / 1e9
    return Samples(labels, np.asarray(rows, dtype=np.float64), batch, seconds)

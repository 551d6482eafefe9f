"""What a run produced: rows of cells, special comparisons, target verdicts; JSON in and out."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness import Interval, verdict
from sides import BASELINE

FLOOR = "floor"


def _interval_from(data: dict | None) -> Interval | None:
    if not data:
        return None
    return Interval(float(data["median"]), float(data["low"]), float(data["high"]), int(data["n"]))


CONSISTENCY_SLACK = 1.10  # how far outside its interval the ratio of a cell's paired medians may fall


@dataclass
class Cell:
    """One side on one row. `ratio` = this side's time / ironaccel's time, paired (above 1: ironaccel faster).

    `ns` is this side's median; for a peer, `base_ns` is ironaccel's median in the same pairing (the rounds
    the ratio came from), so the two medians printed beside a ratio are the ones it was computed from.
    `note` names the call this side makes.
    """

    side: str
    ns: float
    ratio: Interval | None = None
    rounds: int = 0
    batch: int = 0
    note: str = ""
    base_ns: float | None = None

    @property
    def verdict(self) -> str:
        return verdict(self.ratio)

    def disagreement(self) -> str | None:
        """Why this cell contradicts itself, or None: its paired medians and its ratio must tell the same story
        (the medians' ratio inside the ratio's interval, widened by CONSISTENCY_SLACK each way)."""
        if self.ratio is None:
            return None
        if self.base_ns is None or self.base_ns <= 0:
            return "a ratio without ironaccel's median from the same pairing"
        of_medians = self.ns / self.base_ns
        low, high = self.ratio.low / CONSISTENCY_SLACK, self.ratio.high * CONSISTENCY_SLACK
        if not low <= of_medians <= high:
            return (f"medians {self.ns:,.0f} ns vs ironaccel {self.base_ns:,.0f} ns give {of_medians:.2f}x, outside "
                    f"the ratio's interval [{self.ratio.low:.2f}, {self.ratio.high:.2f}]")
        return None

    def to_json(self) -> dict:
        return {
            "side": self.side,
            "ns_per_op": self.ns,
            "ratio_vs_ironaccel": self.ratio.to_json() if self.ratio else None,
            "verdict": self.verdict if self.ratio else None,
            "rounds": self.rounds,
            "batch": self.batch,
            "note": self.note,
            "ironaccel_ns_paired": self.base_ns,
        }

    @classmethod
    def from_json(cls, data: dict) -> Cell:
        return cls(
            data["side"], float(data["ns_per_op"]), _interval_from(data.get("ratio_vs_ironaccel")),
            int(data.get("rounds", 0)), int(data.get("batch", 0)), data.get("note", ""),
            data.get("ironaccel_ns_paired"),
        )


@dataclass
class Row:
    key: str
    title: str
    group: str
    nbytes: int = 0
    cells: dict[str, Cell] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    note: str = ""

    def fastest_peer(self, *, exclude: tuple[str, ...] = (BASELINE, FLOOR)) -> Cell | None:
        """The peer library with the lowest median time (the baseline and the C floor are not peers here)."""
        peers = [cell for name, cell in self.cells.items() if name not in exclude]
        return min(peers, key=lambda cell: cell.ns) if peers else None

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "title": self.title,
            "group": self.group,
            "nbytes": self.nbytes,
            "cells": {name: cell.to_json() for name, cell in self.cells.items()},
            "errors": self.errors,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: dict) -> Row:
        cells = {name: Cell.from_json(cell) for name, cell in data["cells"].items()}
        return cls(
            data["key"], data["title"], data["group"], int(data.get("nbytes", 0)), cells,
            list(data.get("errors", [])), data.get("note", ""),
        )


@dataclass
class Special:
    """A comparison a target needs beyond the rows: labelled cases sampled together, one ratio."""

    key: str
    medians: dict[str, float]  # label -> median ns per op
    interval: Interval | None
    numerator: list[str]
    denominator: list[str]
    rounds: int = 0
    error: str = ""

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "medians_ns": self.medians,
            "ratio": self.interval.to_json() if self.interval else None,
            "ratio_is": f"({' + '.join(self.numerator)}) / ({' + '.join(self.denominator)})",
            "rounds": self.rounds,
            "error": self.error,
        }


@dataclass
class TargetResult:
    name: str
    threshold: float
    interval: Interval | None
    detail: str = ""

    @property
    def status(self) -> str:
        if self.interval is None:
            return "NOT MEASURED"
        return "PASS" if self.interval.low > self.threshold else "FAIL"

    def to_json(self) -> dict:
        return {
            "target": self.name,
            "threshold": self.threshold,
            "ratio": self.interval.to_json() if self.interval else None,
            "status": self.status,
            "detail": self.detail,
        }


@dataclass
class RunResult:
    meta: dict = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    specials: list[Special] = field(default_factory=list)
    targets: list[TargetResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # side -> why its column is missing
    errors: list[str] = field(default_factory=list)
    sides: list[str] = field(default_factory=list)  # the columns that opened, in order

    def row(self, key: str) -> Row | None:
        for row in self.rows:
            if row.key == key:
                return row
        return None

    def special(self, key: str) -> Special | None:
        for special in self.specials:
            if special.key == key:
                return special
        return None

    def to_json(self) -> dict:
        return {
            "meta": self.meta,
            "sides": self.sides,
            "skipped_sides": self.skipped,
            "rows": [row.to_json() for row in self.rows],
            "special_comparisons": [special.to_json() for special in self.specials],
            "targets": [target.to_json() for target in self.targets],
            "errors": self.errors,
        }

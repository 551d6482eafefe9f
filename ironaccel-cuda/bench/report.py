"""Renders a run: the markdown table, the JSON record and the PNG chart of the transfer sweep."""

from __future__ import annotations

import json
from pathlib import Path

from harness import Interval
from ops import human_bytes
from results import Cell, Row, RunResult
from sides import BASELINE, SIDE_NAMES

SIDE_LABELS = {
    "ironaccel": "ironaccel",
    "cuda.bindings": "cuda.bindings (Python)",
    "cuda.core": "cuda.core",
    "cupy": "CuPy",
    "torch": "PyTorch",
    "floor": "C floor",
}
VERDICT_WORDS = {"win": "faster", "loss": "slower", "parity": "parity"}


def format_ns(ns: float) -> str:
    if ns >= 10_000_000:
        return f"{ns / 1e6:,.1f} ms"
    if ns >= 10_000:
        return f"{ns / 1e3:,.1f} µs"
    return f"{ns:,.0f} ns"


def format_gbps(nbytes: int, ns: float) -> str:
    return f"{nbytes / ns:,.2f} GB/s"


def format_interval(interval: Interval, threshold: float = 1.0, unit: str = "") -> str:
    """"median[unit] [low, high]": 2 decimals, more when 2 would hide which side of the threshold a figure is on."""
    digits = 2
    while digits < 4 and any(
        round(value, digits) == round(threshold, digits) and value != threshold
        for value in (interval.low, interval.median, interval.high)
    ):
        digits += 1
    return f"{interval.median:.{digits}f}{unit} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def format_ratio(cell: Cell) -> str:
    if cell.ratio is None:
        return ""
    return f" · {format_interval(cell.ratio, unit='x')} {VERDICT_WORDS[cell.verdict]}"


def _columns(result: RunResult) -> list[str]:
    present = set(result.sides) | {name for row in result.rows for name in row.cells}
    return [name for name in SIDE_NAMES if name in present]


def _cell_text(row: Row, name: str, *, bandwidth: bool) -> str:
    cell = row.cells.get(name)
    if cell is None:
        return "—"
    shown = format_gbps if bandwidth else (lambda _n, ns: format_ns(ns))
    figure = shown(row.nbytes, cell.ns)
    if cell.ratio is not None and cell.base_ns is not None:
        figure += f" (ironaccel {shown(row.nbytes, cell.base_ns)} in this pairing)"
    return figure + format_ratio(cell) + (" ✗" if cell.disagreement() else "")


def disagreements(result: RunResult) -> list[str]:
    """Every cell whose paired medians and ratio disagree: a report that contradicts itself."""
    return [f"{row.title} / {SIDE_LABELS.get(name, name)}: {why}"
            for row in result.rows for name, cell in row.cells.items() if (why := cell.disagreement())]


def _table(rows: list[Row], columns: list[str], *, bandwidth: bool) -> list[str]:
    header = ["operation"] + [SIDE_LABELS.get(name, name) for name in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * len(columns)]
    for row in rows:
        cells = [_cell_text(row, name, bandwidth=bandwidth) for name in columns]
        title = row.title + (" ⚠" if row.errors else "")
        lines.append("| " + " | ".join([title] + cells) + " |")
    return lines


def _meta_lines(result: RunResult) -> list[str]:
    meta = result.meta
    device = meta.get("device", {})
    lines = [
        f"Run {meta.get('date', '?')} on {device.get('name', '?')} (compute capability "
        f"{device.get('compute_capability', '?')}, PCI {device.get('pci_bus_id', '?')}), driver "
        f"{meta.get('driver_version', '?')} (CUDA driver API {device.get('cuda_driver_api', '?')}), "
        f"Python {meta.get('python', '?')}, host {meta.get('host', '?')}.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(meta.get("versions", {}).items())) + ".",
        "",
        "Installed: " + ", ".join(f"{k} {v}" for k, v in sorted(meta.get("distributions", {}).items())) + ".",
        "",
        f"Mode: {meta.get('mode', 'full')}; {meta.get('sampling', '')}; total {meta.get('seconds', 0):.0f} s.",
    ]
    return lines


METHOD_NOTE = (
    "Each cell: median time per operation (transfers: GB/s) and, for a peer, the median of per-pair "
    "ratios peer time / ironaccel time with its bootstrap 95% interval, from batches of ironaccel and "
    "that peer timed back to back in alternating order. 'faster' = ironaccel faster (the whole interval "
    "above 1), 'slower' = ironaccel slower (wholly below 1), otherwise parity. — = not offered by that "
    "side; ⚠ = an error on that row (see the JSON). Beside a peer's figure is ironaccel's median from the same "
    "pairing, the one its ratio was computed from; ✗ marks a cell whose medians and ratio disagree (listed below)."
)


def markdown(result: RunResult) -> str:
    columns = _columns(result)
    out = ["# ironaccel-cuda benchmark (issue 4)", "", *_meta_lines(result), ""]
    if result.targets:
        passed = sum(1 for t in result.targets if t.status == "PASS")
        out += [f"## Targets: {passed} of {len(result.targets)} pass", "",
                "| target | status | ratio [95% CI] | needs | detail |", "|---|---|---:|---:|---|"]
        for target in result.targets:
            ratio = format_interval(target.interval, target.threshold) if target.interval else "—"
            out.append(f"| {target.name} | **{target.status}** | {ratio} | > {target.threshold:.2f} | "
                       f"{target.detail} |")
        out.append("")
    groups = [
        ("Host-side operations", ("host", "alloc", "pool"), False),
        ("Launches, graphs and host functions", ("launch", "graph", "hostfn"), False),
        ("NVRTC", ("nvrtc",), False),
        ("Transfers (GB/s)", ("transfer",), True),
        ("Memory: pool threshold, IPC, growing, managed prefetch", ("memory",), False),
    ]
    out += [METHOD_NOTE, ""]
    for title, group_names, bandwidth in groups:
        rows = [row for row in result.rows if row.group in group_names]
        if not rows:
            continue
        out += [f"## {title}", "", *_table(rows, columns, bandwidth=bandwidth), ""]
    calls = [row for row in result.rows if row.cells]
    if calls:
        out += ["## What each side calls", "", "| operation | " + " | ".join(SIDE_LABELS.get(n, n) for n in columns)
                + " |", "|---|" + "---|" * len(columns)]
        for row in calls:
            named = [row.cells[n].note or "(not named)" if n in row.cells else "—" for n in columns]
            out.append("| " + " | ".join([row.title] + named) + " |")
        out.append("")
    bad = disagreements(result)
    if bad:
        out += ["## Cells that contradict themselves (✗)", ""] + [f"- {line}" for line in bad] + [""]
    if result.specials:
        out += ["## Comparisons behind the targets", ""]
        for special in result.specials:
            ratio = (f"{special.interval.median:.3f} [{special.interval.low:.3f}, {special.interval.high:.3f}]"
                     if special.interval else "not measured")
            medians = ", ".join(f"{label} {format_ns(ns)}" for label, ns in special.medians.items())
            out.append(f"- {special.key}: ({' + '.join(special.numerator)}) / ({' + '.join(special.denominator)}) "
                       f"= {ratio}; {medians}{'; ' + special.error if special.error else ''}")
        out.append("")
    if result.skipped:
        out += ["## Sides not measured", ""]
        out += [f"- {SIDE_LABELS.get(name, name)}: {why}" for name, why in result.skipped.items()]
        out.append("")
    errors = [f"{row.key}: {error}" for row in result.rows for error in row.errors] + result.errors
    if errors:
        out += ["## Errors", ""] + [f"- {error}" for error in errors] + [""]
    return "\n".join(out)


def write_json(result: RunResult, path: Path) -> None:
    path.write_text(json.dumps(result.to_json(), indent=1, sort_keys=False, default=str) + "\n")


def _sweep_point(row: Row) -> tuple[str, str] | None:
    """(direction, memory) of a row of the transfer sweep ("h2d/pageable/<bytes>"), else None."""
    parts = row.key.split("/")
    return (parts[0], parts[1]) if row.group == "transfer" and len(parts) == 3 else None


def transfer_series(result: RunResult) -> dict[tuple[str, str, str], list[tuple[int, float]]]:
    """(direction, memory, side) -> [(bytes, GB/s)] sorted by size."""
    series: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for row in result.rows:
        point = _sweep_point(row)
        if point is None:
            continue
        direction, memory = point
        for name, cell in row.cells.items():
            series.setdefault((direction, memory, name), []).append((row.nbytes, row.nbytes / cell.ns))
    return {key: sorted(points) for key, points in series.items()}


def ratio_series(result: RunResult) -> dict[tuple[str, str], list[tuple[int, float, float, float]]]:
    """(direction, memory) -> [(bytes, median, low, high)] of ironaccel against the fastest peer."""
    series: dict[tuple[str, str], list[tuple[int, float, float, float]]] = {}
    for row in result.rows:
        point = _sweep_point(row)
        peer = row.fastest_peer()
        if point is None or peer is None or peer.ratio is None:
            continue
        direction, memory = point
        series.setdefault((direction, memory), []).append((row.nbytes, peer.ratio.median, peer.ratio.low,
                                                          peer.ratio.high))
    return {key: sorted(points) for key, points in series.items()}


def plot_transfers(result: RunResult, path: Path) -> bool:
    """PNG of the sweep: GB/s by size per side (left), ironaccel / fastest peer with its CI (right)."""
    series = transfer_series(result)
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios = ratio_series(result)
    figure, axes = plt.subplots(2, 2, figsize=(14, 9), constrained_layout=True)
    colors = {name: f"C{i}" for i, name in enumerate(SIDE_NAMES)}
    for r, direction in enumerate(("h2d", "d2h")):
        speed, ratio = axes[r][0], axes[r][1]
        for (d, memory, name), points in sorted(series.items()):
            if d != direction:
                continue
            sizes, gbps = zip(*points)
            speed.plot(sizes, gbps, marker="o", markersize=3, color=colors.get(name, "k"),
                       linestyle="-" if memory == "pageable" else "--",
                       linewidth=2.2 if name == BASELINE else 1.2,
                       label=f"{SIDE_LABELS.get(name, name)}, {memory}")
        arrow = "host to device" if direction == "h2d" else "device to host"
        speed.set(xscale="log", yscale="log", xlabel="bytes", ylabel="GB/s", title=f"{arrow}: bandwidth")
        speed.grid(True, which="both", alpha=0.3)
        speed.legend(fontsize=7, ncol=2)
        for (d, memory), points in sorted(ratios.items()):
            if d != direction:
                continue
            sizes, med, low, high = (list(v) for v in zip(*points))
            errors = [[m - lo for m, lo in zip(med, low)], [hi - m for m, hi in zip(med, high)]]
            ratio.errorbar(sizes, med, yerr=errors, marker="o", markersize=3, capsize=3,
                           linestyle="-" if memory == "pageable" else "--", label=f"{memory}")
        ratio.axhline(1.0, color="k", linewidth=0.8)
        largest = max(size for points in series.values() for size, _ in points)
        if largest >= 16 * 1024 * 1024:
            ratio.hlines(2.5, 16 * 1024 * 1024, largest, color="r", linewidth=1.0, linestyle=":",
                         label="target, pageable >= 16 MiB")
        ratio.set(xscale="log", xlabel="bytes", ylabel="fastest peer time / ironaccel time",
                  title=f"{arrow}: ironaccel vs the fastest peer (median, 95% CI)")
        ratio.grid(True, which="both", alpha=0.3)
        ratio.legend(fontsize=7)
        ticks = sorted({size for points in series.values() for size, _ in points})
        for ax in (speed, ratio):
            ax.set_xticks(ticks)
            ax.set_xticklabels([human_bytes(t).replace(" ", "") for t in ticks], rotation=45, fontsize=7)
            ax.minorticks_off()
    device = result.meta.get("device", {}).get("name", "?")
    figure.suptitle(f"ironaccel-cuda transfers on {device}, {result.meta.get('date', '')}")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True

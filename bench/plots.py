"""PNG plots of how each benchmark's cost grows with its input, drawn from the scripts' JSON (the
documents `summary.load` returns). Needs matplotlib (`pip install -e '.[bench]'`).

One file per benchmark whose document is there: collector.png (cycle seconds vs partitions),
ingest.png (rows/s vs batch rows), evaluate.png (read, compute and write seconds stacked vs
group-partitions), alerts.png (cycle seconds vs firing findings) and web.png (p95 latency of each
endpoint vs topics, one panel per kind of endpoint).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.summary import ALERT_CYCLE_TARGET, EVALUATE_TARGET, INGEST_TARGET, cycle_seconds, evaluate_run


def _when(doc: dict[str, Any]) -> str:
    """When the document was written, and the 1-minute load average then."""
    machine = doc.get("machine", {})
    load = machine.get("loadavg_start")
    return str(machine.get("date", "")) + (f", load {load:.1f}" if load is not None else "")


def _finish(fig: Figure, ax: Axes | None, title: str, path: Path, footer: str) -> None:
    if ax is not None:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    fig.suptitle(title, fontsize="medium")
    fig.text(0.01, 0.01, footer, fontsize="x-small", color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def collector(doc: dict[str, Any], path: Path, footer: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = [s for s in doc.get("sizes", []) if s.get("cycles") and not s.get("error")]
    for groups in sorted({s.get("groups", 0) for s in sizes}):
        same = sorted((s for s in sizes if s.get("groups", 0) == groups), key=lambda s: s["partitions"])
        x = [s["partitions"] for s in same]
        cycles = [cycle_seconds(s) for s in same]
        ax.plot(x, [c[0] for c in cycles], "o-", label=f"cold cycle, {groups:,} groups")
        ax.plot(x, [c[-1] for c in cycles], "s--", label=f"warm cycle, {groups:,} groups")
    ax.axhline(10, color="red", linewidth=0.8, linestyle=":", label="target 10 s (at 10k partitions)")
    ax.set_xscale("log")
    ax.set_xlabel("partitions")
    ax.set_ylabel("offsets cycle, seconds")
    _finish(fig, ax, f"Collector: offsets cycle vs partitions ({_when(doc)})", path, footer)


def ingest(doc: dict[str, Any], path: Path, footer: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = sorted(doc.get("sizes", []), key=lambda s: s["rows"])
    x = [s["rows"] for s in sizes]
    for key, label, style in (
        ("median_rate", "median", "o-"),
        ("best_rate", "best", "^--"),
        ("replay_rate", "idempotent replay", "s:"),
    ):
        ax.plot(x, [s[key] for s in sizes], style, label=label)
    ax.axhline(INGEST_TARGET, color="red", linewidth=0.8, linestyle=":", label="target 50,000 rows/s")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("rows per batch")
    ax.set_ylabel("rows per second")
    _finish(fig, ax, f"Ingest: write_offsets_batch rows/s vs batch size ({_when(doc)})", path, footer)


def evaluate(doc: dict[str, Any], path: Path, footer: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = sorted((s for s in doc.get("sizes", []) if s.get("runs")), key=lambda s: s["rows"])
    labels = [f"{s['rows']:,}" for s in sizes]
    runs = [evaluate_run(s) for s in sizes]
    bottom = [0.0] * len(runs)
    for phase in ("read", "compute", "write"):
        heights = [r["seconds"].get(phase, 0.0) for r in runs]
        ax.bar(labels, heights, width=0.5, bottom=bottom, label=phase)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    for i, r in enumerate(runs):
        ax.annotate(f"{r['wall_s']:.0f} s", (i, bottom[i]), ha="center", va="bottom", fontsize="small")
    target = f"target {EVALUATE_TARGET[1]:g} s (at 1M)"
    ax.axhline(EVALUATE_TARGET[1], color="red", linewidth=0.8, linestyle=":", label=target)
    pad = max(0.6, (3 - len(labels)) / 2)  # one or two sizes would fill the width with a bar
    ax.set_xlim(-pad, len(labels) - 1 + pad)
    ax.set_ylim(0, 1.3 * max([*bottom, EVALUATE_TARGET[1]]))
    ax.set_xlabel("group-partitions")
    ax.set_ylabel("seconds")
    _finish(fig, ax, f"Evaluation: read, compute, write vs group-partitions ({_when(doc)})", path, footer)


def alerts(doc: dict[str, Any], path: Path, footer: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    cycles = sorted(doc.get("cycles", []), key=lambda c: c["findings"])
    x = [c["findings"] for c in cycles]
    for key, label, style in (
        ("first", "first cycle (creates alerts)", "o-"),
        ("notify", "notifying cycle", "^--"),
        ("steady", "steady cycle", "s:"),
    ):
        ax.plot(x, [c[key] for c in cycles], style, label=label)
    ax.axhline(ALERT_CYCLE_TARGET[1], color="red", linewidth=0.8, linestyle=":", label="target 5 s (at 10k)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("firing findings")
    ax.set_ylabel("alert cycle, seconds")
    _finish(fig, ax, f"Alert stage: cycle time vs firing findings ({_when(doc)})", path, footer)


def web(doc: dict[str, Any], path: Path, footer: str) -> None:
    sizes = sorted(doc.get("sizes", []), key=lambda s: s["topics"])
    results = [(s["topics"], r) for s in sizes for r in s.get("results", [])]
    if not results:
        return
    top = max(r["concurrency"] for _, r in results)
    kinds = list(dict.fromkeys(r["kind"] for _, r in results))
    columns = min(2, len(kinds))
    fig, axes = plt.subplots(
        math.ceil(len(kinds) / columns),
        columns,
        figsize=(6.5 * columns, 4.2 * math.ceil(len(kinds) / columns)),
        squeeze=False,
    )
    for ax in axes.flat[len(kinds) :]:
        ax.set_visible(False)
    for ax, kind in zip(axes.flat, kinds, strict=False):
        for endpoint in dict.fromkeys(r["path"] for _, r in results if r["kind"] == kind):
            mine = [(t, r) for t, r in results if r["path"] == endpoint and r["concurrency"] == top]
            answered = [(t, r["p95_ms"]) for t, r in mine if r["p95_ms"] == r["p95_ms"]]
            (line,) = ax.plot([p[0] for p in answered], [p[1] for p in answered], "o-", label=endpoint)
            # Nothing answered within the time limit: the warm-up request's latency, alone.
            alone = [(t, r["warmup_ms"]) for t, r in mine if r["p95_ms"] != r["p95_ms"] and "warmup_ms" in r]
            if alone:
                label = f"{endpoint}: one request alone (none answered within the limit)"
                xs, ys = [p[0] for p in alone], [p[1] for p in alone]
                ax.plot(xs, ys, "x", markersize=10, color=line.get_color(), label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(kind, fontsize="medium")
        ax.set_xlabel("topics (10 partitions each)")
        ax.set_ylabel(f"p95 latency, ms ({top} clients)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="x-small")
    _finish(
        fig, None, f"Web: p95 latency vs data size, {top} concurrent clients ({_when(doc)})", path, footer
    )


PLOTS: dict[str, Callable[[dict[str, Any], Path, str], None]] = {
    "collector": collector,
    "ingest": ingest,
    "evaluate": evaluate,
    "alerts": alerts,
    "web": web,
}


def draw(documents: dict[str, dict[str, Any]], directory: Path, footer: str) -> list[Path]:
    """One PNG per benchmark document into `directory`; returns the files written."""
    matplotlib.use("Agg")  # files only, no display
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, plot in PLOTS.items():
        if name in documents:
            path = directory / f"{name}.png"
            path.unlink(missing_ok=True)
            plot(documents[name], path, footer)
            if path.exists():
                written.append(path)
    return written

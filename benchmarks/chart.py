"""benchmarks/ratios.png: each target's measured ratio as a bar, the target as a tick."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.analysis import measured_text, verdicts_of


def draw(results: dict[str, Any], path: Path) -> None:
    """A horizontal bar per target: measured ratio, with the target marked (Agg canvas)."""
    verdicts = verdicts_of(results)
    labels = [v.target.label for v in verdicts]
    # An absolute target (rows/s) is drawn as its share of the target, the tick at 1.
    ratios = [(v.ratio or 0.0) / (v.target.minimum if v.target.unit else 1.0)
              for v in verdicts]
    ticks = [1.0 if v.target.unit else v.target.minimum for v in verdicts]
    colors = {"met": "#2e7d32", "missed": "#c62828", "error": "#9e9e9e", "skipped": "#9e9e9e"}
    fig = Figure(figsize=(9, 0.55 * len(verdicts) + 1.5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ys = list(range(len(verdicts)))[::-1]
    ax.barh(ys, ratios, color=[colors[v.status] for v in verdicts], height=0.6)
    for y, verdict, ratio, tick in zip(ys, verdicts, ratios, ticks, strict=True):
        ax.plot([tick] * 2, [y - 0.4, y + 0.4], color="black", lw=2)
        text = f"{ratio:.2f}x ({verdict.status})" if ratio else verdict.status
        if verdict.target.unit and verdict.ratio:
            text = f"{measured_text(verdict)}, {ratio:.2f}x the target ({verdict.status})"
        ax.text(max(ratio, tick) * 1.06, y, text, va="center", fontsize=8)
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_xscale("log")
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("ratio, > 1 = nats_sync better (log scale); black tick = target; "
                  "rows/s targets as their share of the target")
    ax.set_title("nats_sync vs baselines: measured ratio against target")
    fig.tight_layout()
    fig.savefig(path, dpi=110)

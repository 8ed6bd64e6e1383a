"""benchmarks/ratios.png: each target's measured ratio as a bar, the target as a tick;
benchmarks/scaling.png: the thread-scaling curve, req/s against T for each client;
benchmarks/greenlets.png: the greenlet curve, req/s against T for each client;
benchmarks/services.png: the services curve, req/s against max_workers W."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.analysis import all_stats, measured_text, verdicts_of
from benchmarks.scenarios import (
    GEVENT_CASES,
    MICRO_CASES,
    NATSIO,
    NATSPY,
    SCALE_CASES,
    SYNC,
    SYNC_GEVENT,
    Case,
)


def draw(results: dict[str, Any], path: Path) -> None:
    """A horizontal bar per target: measured ratio, with the target marked (Agg canvas)."""
    verdicts = verdicts_of(results)
    labels = [v.target.label for v in verdicts]
    # An absolute target (rows/s) is drawn as its share of the target, the tick at 1.
    ratios = [(v.ratio or 0.0) / (v.target.minimum if v.target.unit else 1.0) for v in verdicts]
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
    ax.set_xlabel(
        "ratio, > 1 = nats_sync better (log scale); black tick = target; "
        "rows/s targets as their share of the target"
    )
    ax.set_title("nats_sync vs baselines: measured ratio against target")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _draw_curve(
    results: dict[str, Any],
    path: Path,
    points_of: list[tuple[int, Case]],
    clients: tuple[str, ...],
    xlabel: str,
    title: str,
    labels: dict[str, str] | None = None,
) -> bool:
    """Median req/s against x (``points_of``: (x, case)), one line per client; False
    (nothing drawn) when the results hold no point."""
    stats = all_stats(results)
    fig = Figure(figsize=(7, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    drawn = False
    styles = {SYNC: "o-", NATSPY: "s--", NATSIO: "^--", SYNC_GEVENT: "D-"}
    labels = labels or {}
    for client in clients:
        points = [
            (x, stat.median)
            for x, case in points_of
            if (stat := stats.get((case.key, client), {}).get("reqs_per_s"))
        ]
        if points:
            ax.plot(*zip(*points, strict=True), styles[client], label=labels.get(client, client))
            drawn = True
    if not drawn:
        return False
    ax.set_xscale("log", base=2)
    ax.set_xticks([x for x, _ in points_of], [str(x) for x, _ in points_of])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("requests per second (median)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def draw_scale(results: dict[str, Any], path: Path) -> bool:
    """Median req/s against the number of requesters T, one line per client.

    Returns False (and draws nothing) when the results hold no point of the curve.
    """
    return _draw_curve(
        results,
        path,
        [(case.threads, case) for case in SCALE_CASES],
        (SYNC, NATSPY, NATSIO),
        "requesters T on one connection (threads; coroutines for the asyncio clients)",
        "Thread-scaling curve: sequential 64 B requests, raw echo responder",
    )


def draw_gevent(results: dict[str, Any], path: Path) -> bool:
    """Median req/s against T of the greenlet curve: nats_sync's greenlets and threads,
    nats-py's and natsio's coroutines.

    Returns False (and draws nothing) when the results hold no point of the curve.
    """
    return _draw_curve(
        results,
        path,
        [(case.greenlets, case) for case in GEVENT_CASES],
        (SYNC_GEVENT, SYNC, NATSPY, NATSIO),
        "requesters T on one connection (greenlets; threads; coroutines)",
        "Greenlet curve: sequential 64 B requests, raw echo responder",
        {SYNC_GEVENT: "nats_sync greenlets (gevent)", SYNC: "nats_sync threads"},
    )


def draw_services(results: dict[str, Any], path: Path) -> bool:
    """Median req/s of the echo service against its ``max_workers`` W, per client.

    Returns False (and draws nothing) when the results hold no point of the curve.
    """
    return _draw_curve(
        results,
        path,
        [(case.args(False)["workers"], case) for case in MICRO_CASES],
        (SYNC, NATSPY),
        "max_workers W of the endpoint (nats-py: no pool, the same service at every W)",
        "Services curve: echo endpoint, request_batch driver, 1,024 in flight",
    )

"""From raw runs to numbers: medians, min-max, ratios and verdicts against the targets."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks.scenarios import (
    BEST_ASYNCIO,
    NATSIO,
    NATSPY,
    SPARK_KEY,
    SPARK_ROW,
    SPARK_VECTOR,
    TARGETS,
    Target,
)

#: The clients a ``BEST_ASYNCIO`` denominator picks from.
ASYNCIO_CLIENTS = (NATSPY, NATSIO)

NO_RATIO_METRICS = {
    "lost",
    "duplicates",
    "out_of_order",
    "dropped",
    "received",
    "errors",
    "unacked",
}


@dataclass(frozen=True)
class Stat:
    """Median, min and max of one metric over the successful runs."""

    median: float
    low: float
    high: float
    count: int


@dataclass(frozen=True)
class Verdict:
    """A target checked against the medians."""

    target: Target
    ratio: float | None
    status: str  # "met", "missed", "error" or "skipped"
    note: str


def stat_of(values: list[float]) -> Stat | None:
    if not values:
        return None
    return Stat(statistics.median(values), min(values), max(values), len(values))


def collect(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Stat]]:
    """(case, client) -> metric -> Stat over the successful runs."""
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for run in runs:
        if run.get("ok"):
            bucket = values.setdefault((run["case"], run["client"]), {})
            for metric, value in run["metrics"].items():
                bucket.setdefault(metric, []).append(float(value))
    return {
        key: {m: s for m, vs in metrics.items() if (s := stat_of(vs)) is not None}
        for key, metrics in values.items()
    }


def all_runs(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The client runs plus the Spark runs, the latter with client = variant: request_udf's
    as case "spark", the JetStream parts' under their own case keys."""
    spark_runs = [
        {**run, "case": SPARK_KEY, "client": run["variant"]}
        for run in (results.get("spark") or {}).get("runs", [])
    ]
    js_runs = [
        {**run, "client": run["variant"]} for run in (results.get("spark_js") or {}).get("runs", [])
    ]
    return [*results["runs"], *spark_runs, *js_runs]


def all_stats(results: dict[str, Any]) -> dict[tuple[str, str], dict[str, Stat]]:
    """`collect` over every run, Spark included."""
    return collect(all_runs(results))


def paired_ratios(runs: list[dict[str, Any]], target: Target) -> list[float]:
    """The target's ratio within each repetition (both sides measured minutes apart at most);
    for an absolute target, the measured value of each repetition."""
    by_rep: dict[tuple[Any, str], float] = {}
    for run in runs:
        if run.get("ok") and run["case"] == target.case and target.metric in run["metrics"]:
            by_rep[(run["rep"], run["client"])] = float(run["metrics"][target.metric])
    ratios = []
    for rep in sorted({rep for rep, _ in by_rep}):
        top = by_rep.get((rep, target.numerator))
        if target.denominator == BEST_ASYNCIO:  # the faster of the two in that repetition
            found = [v for c in ASYNCIO_CLIENTS if (v := by_rep.get((rep, c))) is not None]
            bottom = max(found) if found else None
        else:
            bottom = by_rep.get((rep, target.denominator)) if target.denominator else 1.0
        if top is not None and bottom:
            ratios.append(top / bottom)
    return ratios


def skipped_cases(results: dict[str, Any]) -> frozenset[str]:
    """Cases not run at all: Spark with ``--no-spark``, any case left out by ``--only``."""
    ran = {run["case"] for run in results["runs"]}
    if results.get("spark") is not None:
        ran.add(SPARK_KEY)
    spark_js = results.get("spark_js")
    if spark_js is not None:
        ran |= {run["case"] for run in spark_js.get("runs", [])}
        if spark_js.get("error"):  # the process died: every part it was to run failed
            ran |= set((spark_js.get("args") or {}).get("js_parts", []))
    return frozenset(t.case for t in TARGETS if t.case not in ran)


def verdicts_of(results: dict[str, Any]) -> list[Verdict]:
    """Every target judged on a whole results document."""
    return judge(all_stats(results), all_runs(results), skipped_cases(results))


def errors_of(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [run for run in runs if not run.get("ok")]


def higher_is_better(metric: str) -> bool | None:
    """True for rates, False for latency and CPU, None where a ratio makes no sense."""
    if metric in NO_RATIO_METRICS:
        return None
    return metric.endswith("_per_s")


def better_ratio(metric: str, ours: Stat | None, theirs: Stat | None) -> float | None:
    """How many times better nats_sync is (> 1: nats_sync wins), or None."""
    direction = higher_is_better(metric)
    if direction is None or ours is None or theirs is None or not ours.median or not theirs.median:
        return None
    return ours.median / theirs.median if direction else theirs.median / ours.median


def best_asyncio(stats: dict[tuple[str, str], dict[str, Stat]], case: str, metric: str) -> str:
    """The asyncio client with the higher median of ``metric`` (a rate) in ``case``; nats-py
    when neither ran."""
    found = [
        (stat.median, client)
        for client in ASYNCIO_CLIENTS
        if (stat := stats.get((case, client), {}).get(metric))
    ]
    return max(found)[1] if found else NATSPY


def judge(
    stats: dict[tuple[str, str], dict[str, Stat]],
    runs: list[dict[str, Any]],
    skipped: frozenset[str] = frozenset(),
) -> list[Verdict]:
    """Checks every target against the medians (and the zero-loss conditions)."""
    verdicts = []
    for target in TARGETS:
        top = stats.get((target.case, target.numerator), {}).get(target.metric)
        denominator = target.denominator
        notes = []
        if denominator == BEST_ASYNCIO:
            denominator = best_asyncio(stats, target.case, target.metric)
            notes.append(f"best: {denominator}")
        bottom = (
            stats.get((target.case, denominator), {}).get(target.metric)
            if denominator
            else Stat(1.0, 1.0, 1.0, 1)
        )
        if target.case in skipped:
            verdicts.append(Verdict(target, None, "skipped", ""))
            continue
        if top is None or bottom is None or not bottom.median:
            verdicts.append(Verdict(target, None, "error", "no successful runs to compare"))
            continue
        ratio = top.median / bottom.median  # an absolute target's: the median itself
        status = "met" if ratio >= target.minimum else "missed"
        for metric in target.zero:
            worst = max(
                (
                    run["metrics"].get(metric, 0)
                    for run in runs
                    if run.get("ok")
                    and run["case"] == target.case
                    and run["client"] == target.checked
                ),
                default=0,
            )
            if worst:
                status = "missed"
                notes.append(f"{metric} up to {worst:,.0f}")
        verdicts.append(Verdict(target, ratio, status, "; ".join(notes)))
    return verdicts


def measured_text(verdict: Verdict) -> str:
    """The verdict's measurement: ``2.50x``, or ``123,456 rows/s`` for an absolute target."""
    if verdict.ratio is None:
        return "—"
    if verdict.target.unit:
        return f"{verdict.ratio:,.0f} {verdict.target.unit}"
    return f"{verdict.ratio:.2f}x"


def spark_stats(spark: dict[str, Any] | None) -> dict[str, tuple[Stat | None, int]]:
    """variant -> (rows/s Stat, rows per run)."""
    out: dict[str, tuple[Stat | None, int]] = {}
    for variant in (SPARK_VECTOR, SPARK_ROW):
        ok = [
            r["metrics"]
            for r in (spark or {}).get("runs", [])
            if r.get("ok") and r["variant"] == variant
        ]
        rows = ok[0]["rows"] if ok else 0
        out[variant] = (stat_of([m["rows_per_s"] for m in ok]), rows)
    return out

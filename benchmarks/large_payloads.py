"""Publish throughput by payload size and by how large payloads are sent.

``python -m benchmarks.large_payloads [--reps N] [--sizes ...] [--rules ...]``

How it works: one nats-server (``max_payload`` raised to 8 MiB so 1 MiB payloads fit)
serves every run. For each repetition and each payload size, nats_sync runs once per
rule, then nats-py and the raw socket for reference; each run is a fresh worker process
publishing to a subject nobody listens on and flushing, as ``benchmarks.worker_*``'s
``publish`` do. The order of the nats_sync rules is reversed every other repetition.
Prints markdown tables of medians with each cell's min-max: msgs/s and MB/s (MB =
10^6 bytes), then the client's CPU per message.

A rule is a threshold ``T``: payloads below it are joined into their frame by the
publisher, the rest are queued as ``[control line, payload, CRLF]`` and go to the
socket as their own buffers (set in the worker through
``_core.components.publishing._LARGE_PAYLOAD``).
``T/wC`` adds a writer that joins runs of frames, large ones included, into buffers of
up to ``C`` bytes (one copy in the writer instead of one buffer per piece); a frame
larger than ``C`` still goes as it is. The rules patch private names of nats_sync: they
measure alternatives, the library keeps one.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.procs import python_command, run_streaming
from benchmarks.worker import MODULES
from nats_sync.testing import NatsServer

KIB = 1024
MIB = 1024 * KIB
SIZES = (1 * KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB)
#: ``1 MiB + 1`` joins every payload into its frame.
RULES = ("4096", "8192", "16384", "65536", "1048577", "4096/w262144")
REFERENCES = ("nats-py", "raw")
#: Bytes each run publishes, within these counts.
BYTES_PER_RUN = 1024 * MIB
MIN_COUNT, MAX_COUNT = 1_000, 1_000_000
SERVER_CONFIG = "max_payload: 8MB\n"
WORKER_TIMEOUT = 120.0


def count_for(size: int) -> int:
    return max(MIN_COUNT, min(MAX_COUNT, BYTES_PER_RUN // size))


def size_name(size: int) -> str:
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB} MiB"
    return f"{size // KIB} KiB" if size % KIB == 0 else f"{size:,} B"


def parse_rule(rule: str) -> tuple[int, int | None]:
    """``"T"`` or ``"T/wC"`` as (threshold, writer cap or None)."""
    threshold, _, cap = rule.partition("/w")
    return int(threshold), int(cap) if cap else None


def label(column: str) -> str:
    """A column's heading: a reference client, or nats_sync under a rule."""
    if column in REFERENCES:
        return column
    threshold, cap = parse_rule(column)
    text = "join all" if threshold > MIB else f"join < {size_name(threshold)}"
    if cap is not None:
        text += f", writer joins runs ≤ {size_name(cap)}"
    return text


def segments_joining_runs(cap: int) -> Callable[[list[Any]], list[Any]]:
    """A ``_core.threads.connection._segments`` that joins runs of frames into buffers of
    up to ``cap``."""

    def segments(frames: list[Any]) -> list[Any]:
        try:
            return [b"".join(frames)]  # all joined frames: one buffer, as the library does
        except TypeError:
            pass
        out: list[Any] = []
        run: list[bytes] = []
        run_size = 0
        for frame in frames:
            parts = [frame] if isinstance(frame, bytes) else frame
            size = sum(len(part) for part in parts)
            if run and run_size + size > cap:
                out.append(b"".join(run))
                run, run_size = [], 0
            if size > cap:
                out.extend(parts)
            else:
                run.extend(parts)
                run_size += size
        if run:
            out.append(b"".join(run))
        return out

    return segments


def patch(module: str, name: str, value: object) -> None:
    """Replaces a module global the library reads at call time (it must exist: a
    renamed one would leave the rule silently unapplied)."""
    names = vars(importlib.import_module(module))
    if name not in names:
        raise RuntimeError(f"{module}.{name} is gone: update benchmarks/large_payloads.py")
    names[name] = value


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One run in this (fresh) process; only the measured client's modules are imported."""
    column, size, count, url = spec["column"], spec["size"], spec["count"], spec["url"]
    if column in REFERENCES:
        module = importlib.import_module(MODULES[column])
        return dict(module.SCENARIOS["publish"](url=url, size=size, count=count))
    threshold, cap = parse_rule(column)
    patch("nats_sync._core.components.publishing", "_LARGE_PAYLOAD", threshold)
    if cap is not None:
        patch("nats_sync._core.threads.connection", "_segments", segments_joining_runs(cap))
    module = importlib.import_module(MODULES["nats_sync"])
    return dict(module.SCENARIOS["publish"](url=url, size=size, count=count))


def run_one(spec: dict[str, Any]) -> dict[str, float] | None:
    """The metrics of one run in a fresh process, or None if it failed."""
    outcome = run_streaming(
        python_command("benchmarks.large_payloads", "--worker", json.dumps(spec)), WORKER_TIMEOUT
    )
    for line in reversed(outcome.lines):
        if line.startswith("{"):
            metrics: dict[str, float] = json.loads(line)
            return metrics
    print(f"  FAILED {spec}: {outcome.stderr.strip()[-300:]}", file=sys.stderr, flush=True)
    return None


def cell(values: list[float], fmt: Callable[[float], str]) -> str:
    if not values:
        return "failed"
    mid, low, high = statistics.median(values), min(values), max(values)
    return f"{fmt(mid)} ({fmt(low)}-{fmt(high)})" if len(values) > 1 else fmt(mid)


def tables(
    runs: dict[tuple[int, str], list[dict[str, float]]], sizes: list[int], columns: list[str]
) -> str:
    """Throughput (msgs/s and MB/s) and CPU per message, one row per size."""
    head = "| payload | " + " | ".join(label(column) for column in columns) + " |"
    rule = "|---|" + "---:|" * len(columns)
    rates, cpus = [head, rule], [head, rule]
    for size in sizes:
        rate_cells, cpu_cells = [], []
        for column in columns:
            got = runs.get((size, column), [])
            rate = [m["msgs_per_s"] for m in got]
            mid = f"<br>{statistics.median(rate) * size / 1e6:,.0f} MB/s" if rate else ""
            rate_cells.append(cell(rate, lambda v: f"{v:,.0f}") + mid)
            cpu_cells.append(cell([m["cpu_us_per_msg"] for m in got], lambda v: f"{v:,.2f}"))
        rates.append(f"| {size_name(size)} | " + " | ".join(rate_cells) + " |")
        cpus.append(f"| {size_name(size)} | " + " | ".join(cpu_cells) + " |")
    return (
        "msgs/s, median (min-max), and MB/s of the median:\n\n"
        + "\n".join(rates)
        + "\n\nclient CPU per message (µs, all threads), median (min-max):\n\n"
        + "\n".join(cpus)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.large_payloads",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in SIZES),
        help="comma-separated payload sizes in bytes",
    )
    parser.add_argument(
        "--rules", default=",".join(RULES), help="comma-separated rules, T or T/wC (see above)"
    )
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the nats-py and raw socket runs"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        print(json.dumps(worker(json.loads(options.worker))), flush=True)
        return 0
    sizes = [int(s) for s in options.sizes.split(",")]
    rules = options.rules.split(",")
    for rule in rules:
        parse_rule(rule)  # fail now, not in every worker
    references = [] if options.no_reference else list(REFERENCES)
    runs: dict[tuple[int, str], list[dict[str, float]]] = {}
    started = time.perf_counter()
    with NatsServer(config=SERVER_CONFIG) as server:
        for rep in range(options.reps):
            order = (rules if rep % 2 == 0 else rules[::-1]) + references
            for size in sizes:
                for column in order:
                    spec = {
                        "column": column,
                        "size": size,
                        "count": count_for(size),
                        "url": server.url,
                    }
                    metrics = run_one(spec)
                    if metrics is not None:
                        runs.setdefault((size, column), []).append(metrics)
                    shown = (
                        "failed"
                        if metrics is None
                        else (
                            f"{metrics['msgs_per_s']:>10,.0f} msgs/s "
                            f"{metrics['cpu_us_per_msg']:>8.2f} µs CPU/msg"
                        )
                    )
                    print(
                        f"rep {rep + 1}/{options.reps} {size_name(size):>7} "
                        f"{label(column):<42} {shown}  load {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
    print(f"\n{options.reps} repetitions in {(time.perf_counter() - started) / 60:.1f} min\n")
    print(tables(runs, sizes, rules + references))
    return 0


if __name__ == "__main__":
    sys.exit(main())

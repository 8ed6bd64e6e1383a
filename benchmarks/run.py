"""The suite: ``python -m benchmarks [--quick] [--no-spark]`` (``make bench`` runs it).

How it works: one nats-server and one raw echo responder serve the whole run. For each
repetition and each case, nats_sync (the greenlet curve: nats_sync under gevent) and
nats-py (order swapped every other repetition) and, where it applies, the raw socket (or
the WSGI case's app with no NATS call, or the greenlet curve's nats_sync threads) and
natsio (on its own Python >= 3.13, after the others) each run in a fresh worker
process with a timeout; a failed run is recorded and the suite goes on. Spark runs
last, in one child process of its own (request_udf first, then the JetStream parts).
Writes BENCHMARKS.md, benchmarks/results.json, benchmarks/ratios.png,
benchmarks/scaling.png (the thread-scaling curve), benchmarks/greenlets.png (the
greenlet curve, once its rows have run) and benchmarks/services.png (the services
curve); with ``--merge`` the runs of whatever this run left out are kept from
the previous results.json.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import chart, report
from benchmarks.analysis import measured_text, verdicts_of
from benchmarks.common import cpu_seconds
from benchmarks.procs import (
    ROOT,
    Responder,
    python_command,
    python_for,
    run_streaming,
    why_no_natsio,
)
from benchmarks.scenarios import (
    CASES,
    NATSIO,
    NATSPY,
    SPARK_FULL,
    SPARK_JS_ALL,
    SPARK_JS_FULL,
    SPARK_JS_PARTS,
    SPARK_JS_QUICK,
    SPARK_JS_READ,
    SPARK_JS_WRITE,
    SPARK_KEY,
    SPARK_KV,
    SPARK_QUICK,
    SYNC_GEVENT,
    Case,
)
from nats_sync.testing import NatsServer

HERE = Path(__file__).resolve().parent
#: The worker's entry module per client: nats_sync under gevent needs one that patches
#: the process before anything else is imported.
ENTRY_MODULES = {SYNC_GEVENT: "benchmarks.worker_gevent"}
WORKER_TIMEOUT = 120.0
#: Seconds the Spark process may take: request_udf, then each JetStream part it runs.
SPARK_TIMEOUTS = {SPARK_KEY: 480.0, SPARK_JS_READ: 900.0, SPARK_JS_WRITE: 400.0, SPARK_KV: 300.0}
SPARK_PARTS = (SPARK_KEY, *SPARK_JS_PARTS)
HEADLINE_UNITS = {
    "msgs_per_s": "msgs/s",
    "replies_per_s": "replies/s",
    "reqs_per_s": "req/s",
    "acks_per_s": "acks/s",
    "puts_per_s": "puts/s",
    "mib_per_s": "MiB/s",
    "p50_us": "µs p50",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and one repetition (smoke test)"
    )
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark comparison")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3)")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated case keys to run (default: all); Spark keys: "
        f"{', '.join(SPARK_PARTS)} or {SPARK_JS_ALL} (the last three); "
        "naming none runs all of Spark",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the previous results.json's runs of the cases and Spark "
        "parts this run leaves out, and write the report of both",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT, help="folder for BENCHMARKS.md (default: the repo root)"
    )
    return parser.parse_args(argv)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _command_output(command: list[str]) -> str:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=10, cwd=ROOT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"
    return (done.stdout or done.stderr).strip()


def filesystem_of(path: Path) -> str:
    """The type of the file system ``path`` lives on (the longest mount point above it)."""
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) < 3:
                continue
            mount = fields[1]
            inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
            if inside and len(mount) > len(best):
                best, kind = mount, fields[2]
    except OSError:
        pass
    return kind


def machine_info(server_binary: str, store_dir: Path) -> dict[str, str]:
    """What the numbers were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "CPU": cpu,
        "cores": str(os.cpu_count()),
        "OS": platform.platform(),
        "Python": platform.python_version(),
        "nats-server": _command_output([server_binary, "--version"]).removeprefix("nats-server: "),
        "nats_sync": _version("nats-sync"),
        "nats-py": _version("nats-py"),
        "pyspark": _version("pyspark"),
        # A tmpfs store would flatter JetStream; say where the file store really was.
        "JetStream store": f"{store_dir} ({filesystem_of(store_dir.parent)}), file storage",
        "load average at start (1/5/15 min)": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "git commit": _command_output(["git", "rev-parse", "--short", "HEAD"])
        + " (plus any uncommitted changes in the working tree)",
    }


def run_worker(client: str, case: Case, args: dict[str, Any]) -> dict[str, Any]:
    """One measurement in a fresh process; never raises."""
    started = time.perf_counter()
    outcome = run_streaming(
        python_command(
            ENTRY_MODULES.get(client, "benchmarks.worker"),
            client,
            case.scenario,
            json.dumps(args),
            python=python_for(client),
        ),
        WORKER_TIMEOUT,
    )
    wall = time.perf_counter() - started
    result: dict[str, Any] = {"ok": False}
    for line in reversed(outcome.lines):
        if line.startswith("{"):
            result = json.loads(line)
            break
    else:
        reason = (
            f"timed out after {WORKER_TIMEOUT:.0f}s"
            if outcome.timed_out
            else (f"exit code {outcome.returncode}")
        )
        result["error"] = f"worker {reason}: {outcome.stderr.strip()[-300:]}"
    result.update(case=case.key, client=client, process_s=round(wall, 3))
    return result


def add_peer_cpu(result: dict[str, Any], server_s: float, responder_s: float) -> None:
    """Adds the server's and the responder's CPU per message/request during the run.

    Counted over the worker's whole life (connect and warm-up included), divided by
    the measured count: it shows what the other processes on the machine's two cores
    spent for each unit of work the client did. A worker that measured the server over
    its timed section itself (the JetStream cases) keeps its own figure.
    """
    metrics = result.get("metrics")
    if not result.get("ok") or not metrics or "elapsed_s" not in metrics:
        return
    rate = metrics.get("reqs_per_s") or metrics.get("msgs_per_s") or metrics.get("acks_per_s")
    if not rate:
        return
    count = rate * metrics["elapsed_s"]
    metrics.setdefault("server_cpu_us", server_s / count * 1e6)
    metrics["responder_cpu_us"] = responder_s / count * 1e6


def describe(result: dict[str, Any], case: Case) -> str:
    if not result.get("ok"):
        return "FAILED: " + str(result.get("error", ""))[:200]
    metrics = result["metrics"]
    parts = []
    for key, unit in HEADLINE_UNITS.items():
        if key in metrics:
            parts.append(
                f"{metrics[key]:>12,.0f} {unit}"
                if key not in ("p50_us", "mib_per_s")
                else f"{metrics[key]:>8,.1f} {unit}"
            )
    if case.key == "pubsub":
        parts.append(
            f"lost {metrics['lost']:,.0f} dup {metrics['duplicates']:,.0f} "
            f"ooo {metrics['out_of_order']:,.0f}"
        )
    return "  ".join(parts) + f"  ({result['process_s']:.1f}s)"


def run_clients(
    cases: list[Case],
    reps: int,
    quick: bool,
    url: str,
    responder: Responder,
    server_pid: int,
) -> list[dict[str, Any]]:
    """Every case, every client, ``reps`` times, interleaved.

    natsio runs where its interpreter is found; elsewhere it is left out, saying why.
    """
    no_natsio = why_no_natsio() if any(NATSIO in case.clients for case in cases) else None
    if no_natsio:
        print(f"natsio skipped: {no_natsio}", flush=True)
    total = (
        sum(len([c for c in case.clients if c != NATSIO or not no_natsio]) for case in cases) * reps
    )
    done = 0
    runs: list[dict[str, Any]] = []
    for rep in range(reps):
        for case in cases:
            pair = [case.lead, NATSPY] if rep % 2 == 0 else [NATSPY, case.lead]
            # The raw socket (or the WSGI case's app without NATS, or nats_sync's threads
            # beside its greenlets) after both clients.
            others = [
                client for client in case.clients if client not in (case.lead, NATSPY, NATSIO)
            ]
            order = pair + others + [NATSIO] * (NATSIO in case.clients and not no_natsio)
            for client in order:
                try:
                    if responder.restart_if_dead():
                        print("  (the echo responder had died: restarted it)", flush=True)
                    server_before = cpu_seconds(server_pid)
                    responder_before = cpu_seconds(responder.process.pid)
                    args = {**case.args(quick), "url": url}
                    if case.jetstream:
                        args["server_pid"] = server_pid
                    result = run_worker(client, case, args)
                    # The curve's workers make a second, untimed round for perf: the
                    # peers' CPU over the worker's life would be about twice theirs.
                    if not case.threads:
                        add_peer_cpu(
                            result,
                            cpu_seconds(server_pid) - server_before,
                            cpu_seconds(responder.process.pid) - responder_before,
                        )
                except RuntimeError as error:  # the responder could not be restarted
                    result = {
                        "ok": False,
                        "error": str(error),
                        "case": case.key,
                        "client": client,
                        "process_s": 0.0,
                    }
                result["rep"] = rep
                result["load1"] = os.getloadavg()[0]
                runs.append(result)
                done += 1
                print(
                    f"[{done:>3}/{total}] rep {rep + 1}/{reps} {case.title:<26} "
                    f"{client:<9} {describe(result, case)}",
                    flush=True,
                )
    return runs


def run_spark(
    quick: bool, reps: int, url: str, server_pid: int, parts: list[str]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The Spark parts in their own process; returns (request_udf, JetStream) results,
    None for a side not run, an error document for one that did not finish."""
    args: dict[str, Any] = {"url": url, "server_pid": server_pid}
    js_parts = [part for part in SPARK_JS_PARTS if part in parts]
    if SPARK_KEY in parts:
        args["udf"] = dict(SPARK_QUICK if quick else {**SPARK_FULL, "reps": reps})
        print(
            f"Spark: request_udf on {args['udf']['vector_rows']:,} rows vs row UDF on "
            f"{args['udf']['row_rows']:,} rows, {args['udf']['reps']} repetition(s)",
            flush=True,
        )
    if js_parts:
        args["js"] = {
            **(SPARK_JS_QUICK if quick else {**SPARK_JS_FULL, "reps": reps}),
            "js_parts": js_parts,
        }
        print(
            f"Spark JetStream: {', '.join(js_parts)}, {args['js']['reps']} repetition(s)",
            flush=True,
        )

    def echo(line: str) -> None:
        if not line.startswith("RESULT"):
            print(line, flush=True)

    timeout = sum(SPARK_TIMEOUTS[part] for part in parts)
    outcome = run_streaming(
        python_command("benchmarks.spark_bench", json.dumps(args)), timeout, echo
    )
    found: dict[str, dict[str, Any]] = {}
    for line in outcome.lines:
        head, _, body = line.partition(" ")
        if head in ("RESULT", "RESULT_JS"):
            found[head] = json.loads(body)
    reason = (
        f"timed out after {timeout:.0f}s"
        if outcome.timed_out
        else (f"exit code {outcome.returncode}")
    )
    missing = [
        head
        for head, key in (("RESULT", "udf"), ("RESULT_JS", "js"))
        if key in args and head not in found
    ]
    if missing:
        print(f"Spark FAILED: {reason}\n{outcome.stderr[-1500:]}", flush=True)
    error = f"spark run {reason}: {outcome.stderr[-300:]}"
    udf = found.get("RESULT", {"runs": [], "args": args.get("udf"), "error": error})
    js = found.get("RESULT_JS", {"runs": [], "args": args.get("js"), "error": error})
    return (udf if "udf" in args else None), (js if "js" in args else None)


def spark_parts(wanted: set[str], no_spark: bool) -> list[str]:
    """The Spark parts ``--only`` names (all of them when it names none)."""
    if no_spark:
        return []
    if SPARK_JS_ALL in wanted:
        wanted = wanted | set(SPARK_JS_PARTS)
    named = [part for part in SPARK_PARTS if part in wanted]
    return named or list(SPARK_PARTS)


def merge(results: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """``results`` plus the runs of ``previous`` for what ``results`` did not run.

    The earlier run's command, date and machine stay on top (it is the bulk of the
    report); this run's are listed under ``merged``.
    """
    ran = {run["case"] for run in results["runs"]}
    js_ran = {run["case"] for run in (results.get("spark_js") or {}).get("runs", [])}
    merged = dict(previous)
    merged["runs"] = [run for run in previous["runs"] if run["case"] not in ran]
    merged["runs"] += results["runs"]
    merged["args_by_case"] = {**previous.get("args_by_case", {}), **results["args_by_case"]}
    if results.get("spark") is not None:
        merged["spark"] = results["spark"]
    if results.get("spark_js") is not None:
        old = previous.get("spark_js") or {"runs": [], "args": None}
        kept = [run for run in old["runs"] if run["case"] not in js_ran]
        merged["spark_js"] = {**results["spark_js"], "runs": kept + results["spark_js"]["runs"]}
    rows = sorted(ran | js_ran | ({SPARK_KEY} if results.get("spark") else set()))
    merged["merged"] = [
        *previous.get("merged", []),
        {
            "command": results["command"],
            "date": results["date"],
            "rows": rows,
            "duration_s": results["duration_s"],
            "machine": results["machine"],
        },
    ]
    return merged


def main(argv: list[str] | None = None) -> int:
    """Runs the suite and writes the report; returns the exit code."""
    options = parse_args(argv)
    started = time.perf_counter()
    reps = options.reps or (1 if options.quick else 3)
    wanted = {key for key in options.only.split(",") if key}
    cases = [case for case in CASES if not wanted or case.key in wanted]
    parts = spark_parts(wanted, options.no_spark)
    command = "make bench" + (f" BENCH_ARGS='{' '.join(sys.argv[1:])}'" if sys.argv[1:] else "")
    print(
        f"{command}: {len(cases)} cases x {reps} repetition(s)"
        f"{' + Spark (' + ', '.join(parts) + ')' if parts else ''}",
        flush=True,
    )
    # JetStream on for the whole run, so its cases share the server with the core ones
    # (an idle JetStream adds no traffic on the core subjects); the store is a file store
    # in the server's temp folder, removed at the end.
    with NatsServer(jetstream=True) as server:
        machine = machine_info(server.binary, server.store_dir)
        print(
            f"nats-server {server.url} ({machine['nats-server']}); CPU {machine['CPU']}, "
            f"{machine['cores']} cores",
            flush=True,
        )
        responder = Responder(server.url)
        try:
            runs = run_clients(cases, reps, options.quick, server.url, responder, server.pid)
            spark, spark_js = (
                run_spark(options.quick, reps, server.url, server.pid, parts)
                if parts
                else (None, None)
            )
        finally:
            responder.stop()
    machine["load average at end (1/5/15 min)"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    machine["peak 1-min load average between runs"] = (
        f"{max((run['load1'] for run in runs), default=0.0):.2f} (the suite itself keeps "
        "about 1-2 busy; more means something else was running)"
    )
    results: dict[str, Any] = {
        "command": command,
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "duration_s": time.perf_counter() - started,
        "reps": reps,
        "quick": options.quick,
        "machine": machine,
        "args_by_case": {case.key: case.args(options.quick) for case in cases},
        "runs": runs,
        "spark": spark,
        "spark_js": spark_js,
    }
    if options.merge and (HERE / "results.json").exists():
        results = merge(results, json.loads((HERE / "results.json").read_text()))
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    chart.draw(results, HERE / "ratios.png")
    chart.draw_scale(results, HERE / "scaling.png")
    chart.draw_gevent(results, HERE / "greenlets.png")
    chart.draw_services(results, HERE / "services.png")
    options.out.mkdir(parents=True, exist_ok=True)  # --out may name a folder not made yet
    out = options.out / "BENCHMARKS.md"
    out.write_text(report.markdown(results))
    print(
        f"\nwrote {out}, {HERE / 'results.json'}, {HERE / 'ratios.png'} "
        f"in {results['duration_s'] / 60:.1f} min\n",
        flush=True,
    )
    verdicts = verdicts_of(results)
    for verdict in verdicts:
        print(
            f"  {verdict.target.label:<38} {measured_text(verdict):>16}  "
            f"{verdict.target.text:<36} {verdict.status}",
            flush=True,
        )
    return 0

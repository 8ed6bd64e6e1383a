"""The WSGI case (``wsgi_t16``): a gunicorn app whose every HTTP request makes one NATS request.

How it works: the worker (nats_sync's, nats-py's, or this module's own for the variant
with no NATS call) calls :func:`drive`, which starts gunicorn (``-k gthread -w 1
--threads T``; for ``wsgi_gevent_t16``, ``-k gevent -w 1``) serving
``benchmarks.wsgi_app:app`` on a free local port, the variant chosen by the environment
(see ``wsgi_app.py``). Once ``GET /pid`` answers, ApacheBench (``ab``, Debian's
apache2-utils; ``make bench`` installs it where it is missing) sends an untimed warm-up,
then the timed run: ``ab -k -c C -n N`` on keep-alive connections. HTTP req/s and the
latency percentiles (whole request, ms) are ab's; the app's CPU is the gunicorn worker's
over the timed run, from ``/proc``. nats-server, the raw echo responder, gunicorn and ab
share the machine's cores.

Also a worker module itself (``python -m benchmarks.worker "no NATS" wsgi ARGS``): its
``SCENARIOS`` runs the app without any NATS call, the ceiling the other two are held to.
"""

from __future__ import annotations

import csv
import ctypes
import importlib.util
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from functools import partial
from pathlib import Path
from typing import IO

from benchmarks import common as c
from benchmarks.procs import ROOT, child_env
from benchmarks.scenarios import NATSPY, NO_NATS, SYNC

READY_TIMEOUT = 20.0
#: ab's own per-request timeout (seconds) and the deadline of one ab run.
AB_REQUEST_TIMEOUT = 10
AB_RUN_TIMEOUT = 60.0
#: The app's variant (BENCH_WSGI_VARIANT) for each client of the case.
VARIANTS = {SYNC: "nats_sync", NATSPY: "nats-py", NO_NATS: "none"}
PR_SET_PDEATHSIG = 1
#: The latency percentiles reported, from ab's ``-e`` table (whole request, ms).
PERCENTILES = (50, 90, 99)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-1500:]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the worker dies (Linux's PR_SET_PDEATHSIG),
    so a worker killed at its timeout leaves no gunicorn holding a port and a connection."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the timeout path may leave it running
        pass


def _worker_args(worker_class: str, threads: int) -> list[str]:
    """gunicorn's worker options: one worker, ``threads`` threads (gthread) or gevent's
    greenlets (``-k gevent``: as many as there are connections, up to its default 1,000)."""
    if worker_class == "gthread":
        return ["-k", "gthread", "-w", "1", "--threads", str(threads)]
    if worker_class == "gevent":
        if importlib.util.find_spec("gevent") is None:
            raise RuntimeError("gevent is not installed: it is in the bench extra")
        return ["-k", "gevent", "-w", "1"]
    raise ValueError(f"worker_class must be gthread or gevent, not {worker_class!r}")


def _start_gunicorn(
    variant: str,
    url: str,
    size: int,
    workers: list[str],
    port: int,
    log: IO[bytes],
) -> subprocess.Popen[bytes]:
    if importlib.util.find_spec("gunicorn") is None:
        raise RuntimeError(
            "gunicorn is not installed: it is in the bench extra (`make bench` installs it)"
        )
    env = {
        **child_env(),
        "BENCH_WSGI_VARIANT": variant,
        "BENCH_NATS_URL": url,
        "BENCH_WSGI_SIZE": str(size),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            *workers,
            "-b",
            f"127.0.0.1:{port}",
            "--graceful-timeout",
            "5",
            "benchmarks.wsgi_app:app",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        cwd=ROOT,
        env=env,
        preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, no locks taken
    )


def _worker_pid(server: subprocess.Popen[bytes], port: int, log: IO[bytes]) -> int:
    """Waits (bounded) until the app answers ``/pid``; returns the gunicorn worker's pid."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {server.returncode}: {_tail(log)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/pid", timeout=2) as answer:
                return int(answer.read())
        except (OSError, urllib.error.URLError):
            time.sleep(0.1)
    raise RuntimeError(f"the app did not answer within {READY_TIMEOUT:.0f}s: {_tail(log)}")


def _stop_gunicorn(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.terminate()  # graceful: the worker finishes and exits
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=5)


def _field(output: str, label: str) -> float:
    """The number after ``label:`` in ab's report; 0 where ab left the line out."""
    found = re.search(rf"^{re.escape(label)}:\s+([\d.]+)", output, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def run_ab(port: int, concurrency: int, count: int) -> dict[str, float]:
    """One ``ab -k`` run against the app: req/s, latency percentiles, failures."""
    ab = shutil.which("ab")
    if ab is None:
        raise RuntimeError(
            "ab (ApacheBench, Debian's apache2-utils) not found: `make bench` "
            "installs it with apt-get where it can"
        )
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "percentiles.csv"
        done = subprocess.run(
            [
                ab,
                "-q",
                "-k",
                "-c",
                str(concurrency),
                "-n",
                str(count),
                "-s",
                str(AB_REQUEST_TIMEOUT),
                "-e",
                str(table),
                f"http://127.0.0.1:{port}/",
            ],
            capture_output=True,
            text=True,
            timeout=AB_RUN_TIMEOUT,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"ab failed ({done.returncode}): {done.stderr[-500:]}")
        with table.open(newline="") as rows:
            by_percent = {
                int(row[0]): float(row[1]) for row in csv.reader(rows) if row and row[0].isdigit()
            }
    output = done.stdout
    complete = _field(output, "Complete requests")
    taken = _field(output, "Time taken for tests")
    keep_alive = _field(output, "Keep-Alive requests")
    if not complete or not taken:
        raise RuntimeError(f"could not read ab's report: {output[-500:]}")
    if keep_alive < complete * 0.99:
        raise RuntimeError(
            f"only {keep_alive:,.0f} of {complete:,.0f} requests were on "
            "keep-alive connections: the figures would measure connecting"
        )
    # "ab_s", not "elapsed_s": run.add_peer_cpu would charge the server's and the
    # responder's CPU over the whole worker (gunicorn's start, the warm-up) to this run.
    metrics = {
        "reqs_per_s": complete / taken,
        "ab_s": taken,
        # A bad reply (500) counts under both of ab's lines; a lost request under
        # neither, hence the shortfall.
        "errors": max(_field(output, "Failed requests"), _field(output, "Non-2xx responses"))
        + (count - complete),
    }
    for percent in PERCENTILES:
        metrics[f"p{percent}_ms"] = by_percent[percent]
    return metrics


def drive(
    client: str,
    url: str,
    size: int,
    concurrency: int,
    count: int,
    warmup: int,
    threads: int = 16,
    worker_class: str = "gthread",
) -> dict[str, float]:
    """HTTP req/s and latency of the app in ``client``'s variant under ``ab -k``, served
    by gunicorn's ``worker_class`` (gthread with ``threads``, or gevent)."""
    workers = _worker_args(worker_class, threads)
    port = _free_port()
    with tempfile.TemporaryFile() as log:
        server = _start_gunicorn(VARIANTS[client], url, size, workers, port, log)
        try:
            worker = _worker_pid(server, port, log)
            run_ab(port, concurrency, warmup)
            watch = c.Stopwatch(peer_pid=worker).start()
            metrics = run_ab(port, concurrency, count)
            watch.stop()
        finally:
            _stop_gunicorn(server)
    metrics["app_cpu_us"] = watch.peer_cpu / count * 1e6
    return metrics


#: This module as the worker of the variant with no NATS call (benchmarks.worker).
SCENARIOS = {"wsgi": partial(drive, NO_NATS)}


# A quick look by hand: python -m benchmarks.wsgi_bench CLIENT URL [gthread|gevent]
if __name__ == "__main__":
    worker_class = sys.argv[3] if len(sys.argv) > 3 else "gthread"
    print(
        json.dumps(drive(sys.argv[1], sys.argv[2], 64, 16, 2_000, 200, 16, worker_class), indent=1)
    )

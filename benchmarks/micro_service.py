"""The services case: one service process, one echo endpoint, one pipelined driver.

How it works: the worker (either client's) calls :func:`drive`, which starts this module
as a child process, ``python -m benchmarks.micro_service LIB URL WORKERS SUBJECT``. The
child connects with LIB (``nats_sync`` or ``nats-py``), adds a service ``bench`` 1.0.0
with one endpoint ``echo`` on SUBJECT whose handler responds with the request's data,
flushes (so the endpoint's subscription is live on the server) and prints ``ready``.
It serves until its stdin closes (the worker ends it, or dies), then stops.

The driver is the same for both services: nats_sync's ``request_batch`` (1,024 in
flight, its default) of sequence-number payloads, a warm-up batch first; every reply
is checked against its own payload. The service process's CPU over the timed section
comes from ``/proc/<pid>/stat``; its context switches and futex calls per request from
``perf stat -p`` over a second, untimed round (where perf can count).

Why one ``request_batch`` and not T requester threads: it keeps 1,024 requests in
flight (many concurrent callers, as far as the service can tell: each has its own
reply subject) for 6-9 µs of driver CPU per request, a quarter to a sixth of what
16 requester threads on one connection spend (37 µs, issue 33), so on two shared
cores most of the machine is left to the service. The driver, the service and the server
still share those two cores: the service's own CPU per request is the figure that
compares the services most directly.

SUBJECT carries the worker's pid, so neither the raw responder on ``bench.echo`` nor a
service left behind by a killed run can answer these requests.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import subprocess
import sys
import threading
from typing import Any

import nats_sync
from benchmarks import common as c
from benchmarks.procs import ROOT, child_env, python_command

READY_TIMEOUT = 15.0
SERVICE_NAME = "bench"
SERVICE_VERSION = "1.0.0"
ENDPOINT = "echo"
#: Requests of the second round, counted by ``perf stat -p`` on the service process.
SWITCH_ROUND = 20_000


# --- the service (child process) --------------------------------------------------------


def _wait_stdin_closed() -> None:
    """Blocks until the parent closes our stdin (or exits)."""
    while os.read(0, 4096):
        pass


def serve_sync(url: str, workers: int, subject: str) -> None:
    import nats_sync.micro  # noqa: PLC0415 - the service child imports its own library only

    def handler(req: Any) -> None:
        req.respond(req.data)

    with nats_sync.connect(url) as nc:
        svc = nats_sync.micro.add_service(nc, name=SERVICE_NAME, version=SERVICE_VERSION)
        svc.add_endpoint(ENDPOINT, handler, subject=subject, max_workers=workers)
        nc.flush()
        print("ready", flush=True)
        _wait_stdin_closed()
        svc.stop()


def serve_natspy(url: str, workers: int, subject: str) -> None:
    """nats-py's service has no worker pool: ``workers`` is ignored (one event loop)."""
    import nats  # noqa: PLC0415 - the service child imports its own library only
    import nats.micro  # noqa: PLC0415

    async def handler(req: Any) -> None:
        await req.respond(req.data)

    async def main() -> None:
        async def ignore(error: Exception) -> None:
            pass

        nc = await nats.connect(url, error_cb=ignore)
        svc = await nats.micro.add_service(nc, name=SERVICE_NAME, version=SERVICE_VERSION)
        await svc.add_endpoint(name=ENDPOINT, subject=subject, handler=handler)
        await nc.flush()
        print("ready", flush=True)
        closed = asyncio.Event()
        loop = asyncio.get_running_loop()

        def watch_stdin() -> None:
            _wait_stdin_closed()
            loop.call_soon_threadsafe(closed.set)

        threading.Thread(target=watch_stdin, daemon=True).start()
        await closed.wait()
        await svc.stop()
        await nc.close()

    asyncio.run(main())


def main() -> None:
    """Entry point of the service child."""
    lib, url, workers, subject = sys.argv[1:5]
    serve = {"nats_sync": serve_sync, "nats-py": serve_natspy}[lib]
    serve(url, int(workers), subject)


# --- the driver (inside the worker) -----------------------------------------------------


def _start_service(lib: str, url: str, workers: int, subject: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        python_command("benchmarks.micro_service", lib, url, str(workers), subject),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=child_env(),
    )
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        ready = bool(selector.select(READY_TIMEOUT))
    line = process.stdout.readline().strip() if ready else b""
    if line != b"ready":
        _stop_service(process)
        raise RuntimeError(f"{lib} service not ready after {READY_TIMEOUT}s: {line!r}")
    return process


def _stop_service(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None:
        process.stdin.close()  # the service stops and exits
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
    if process.stdout is not None:
        process.stdout.close()


def _wrong(payloads: list[bytes], results: list[Any]) -> int:
    return sum(
        1
        for data, reply in zip(payloads, results, strict=True)
        if not isinstance(reply, nats_sync.Msg) or reply.data != data
    )


def drive(lib: str, url: str, size: int, count: int, warmup: int, workers: int) -> dict[str, float]:
    """Requests/s one ``lib`` service process answers, and its CPU per request."""
    subject = f"benchmicro.{os.getpid()}.{ENDPOINT}"
    warm = [c.seq_payload(n, size) for n in range(warmup)]
    payloads = [c.seq_payload(n, size) for n in range(count)]
    service = _start_service(lib, url, workers, subject)
    try:
        with nats_sync.connect(url) as nc:
            errors = _wrong(warm, nc.request_batch(subject, warm, timeout=c.BATCH_TIMEOUT))
            watch = c.Stopwatch(peer_pid=service.pid).start()
            results = nc.request_batch(subject, payloads, timeout=c.BATCH_TIMEOUT)
            watch.stop()
            errors += _wrong(payloads, results)
            # A second, untimed round under perf: tracing futex calls slows a threaded
            # service, so req/s and CPU come from the first.
            counted = payloads[:SWITCH_ROUND]
            switches = c.SwitchCounter(service.pid).start()
            errors += _wrong(counted, nc.request_batch(subject, counted, timeout=c.BATCH_TIMEOUT))
            counts = switches.metrics(len(counted))
    finally:
        _stop_service(service)
    metrics = c.throughput_metrics(count, watch, "reqs")
    metrics["service_cpu_us"] = watch.peer_cpu / count * 1e6
    metrics.update({f"service_{name}": value for name, value in counts.items()})
    metrics["errors"] = errors
    return metrics


if __name__ == "__main__":
    main()

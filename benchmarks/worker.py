"""One measurement in a fresh process: ``python -m benchmarks.worker CLIENT SCENARIO JSON``.

CLIENT is ``nats_sync``, ``nats-py``, ``natsio`` (on its own interpreter), ``raw``,
``no NATS`` (the WSGI case's app without a NATS call, ``wsgi_bench.py``) or
``nats_sync gevent`` (nats_sync's scenarios in a gevent-patched process: run through
``python -m benchmarks.worker_gevent``, which patches before importing this module);
JSON holds the scenario's keyword arguments. Prints one JSON line:
``{"ok": true, "metrics": {...}}`` or ``{"ok": false, "error": "..."}``. Only the chosen
client's module is imported, so the other client's import cost and threads never touch
the measurement.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from typing import Any

MODULES = {
    "nats_sync": "benchmarks.worker_sync",
    "nats-py": "benchmarks.worker_natspy",
    "raw": "benchmarks.worker_raw",
    "natsio": "benchmarks.worker_natsio",
    # nats_sync's own scenarios, in a process benchmarks.worker_gevent patched first.
    "nats_sync gevent": "benchmarks.worker_sync",
    # The WSGI case's app without any NATS call: its driver is its own worker.
    "no NATS": "benchmarks.wsgi_bench",
}


def run(client: str, scenario: str, args: dict[str, Any]) -> dict[str, Any]:
    """Runs one scenario and returns the JSON-able outcome."""
    try:
        if client == "nats_sync gevent" and not _patched():
            raise RuntimeError(
                "not a gevent-patched process: run this client through "
                "`python -m benchmarks.worker_gevent`"
            )
        module = importlib.import_module(MODULES[client])
        metrics = module.SCENARIOS[scenario](**args)
    except Exception as error:  # reported to the parent, which records it and goes on
        return {
            "ok": False,
            "error": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc(),
        }
    return {"ok": True, "metrics": metrics}


def _patched() -> bool:
    """Whether gevent patched threading and socket in this process (never imports gevent)."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and all(
        monkey.is_module_patched(name) for name in ("threading", "socket")
    )


def main() -> None:
    """Entry point."""
    client, scenario, raw_args = sys.argv[1:4]
    print(json.dumps(run(client, scenario, json.loads(raw_args))), flush=True)


if __name__ == "__main__":
    main()

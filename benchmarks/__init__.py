"""Benchmarks: nats_sync against nats-py (the official asyncio client) on one nats-server.

``make bench`` (or ``python -m benchmarks``) runs every scenario in fresh worker
subprocesses, interleaving the two clients, and writes ``BENCHMARKS.md``,
``benchmarks/results.json`` and ``benchmarks/ratios.png``. See ``run.py``.
"""

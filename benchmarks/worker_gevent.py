"""nats_sync in a gevent-patched process: ``python -m benchmarks.worker_gevent CLIENT ...``.

The arguments are ``benchmarks.worker``'s: CLIENT SCENARIO JSON.

The greenlet curve's worker (issue 41): ``gevent.monkey.patch_all()`` runs first, before
anything imports nats_sync, ``threading`` or ``socket`` users; then it is
``benchmarks.worker`` as usual, with CLIENT ``nats_sync gevent``, whose scenarios are
nats_sync's own (``worker_sync.py``): in the patched process their threads, the
client's and the requesters', are greenlets on the one OS thread, as in a program that
Locust or gunicorn ``-k gevent`` patched.
"""

from gevent import monkey

monkey.patch_all()

from benchmarks import worker  # noqa: E402 - only once the process is patched

if __name__ == "__main__":
    worker.main()

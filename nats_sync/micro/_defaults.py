"""The defaults and limits of NATS services (micro), as named constants.

No logic lives here, and nothing of the core: each extension keeps its own facts
(the core's are in ``nats_sync._defaults``). Times are in seconds, sizes in bytes.
"""

from __future__ import annotations

#: Requests a worker of a micro endpoint with ``max_workers`` > 1 takes from the
#: subscription at once, at most: its share of those waiting (pending / workers).
MICRO_WORKER_BATCH = 64
#: ... unless its handlers take longer than this on average (nanoseconds): then one at a
#: time, so that a request never waits behind a slow handler while a worker is idle
#: (the lock round a batch saves, ~0.2 µs per request, is nothing beside them).
MICRO_BATCH_HANDLER_NS = 50_000
#: Seconds ``stop()`` waits for running handlers unless told otherwise.
MICRO_STOP_TIMEOUT = 5.0
#: Seconds to wait for the first answer.
MICRO_DISCOVERY_TIMEOUT = 2.0
#: Seconds without a new answer after which the others are taken as all there are.
MICRO_DISCOVERY_QUIET = 0.25

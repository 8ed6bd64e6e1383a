"""The defaults and limits of the ``nats-sync`` command, as named constants.

No logic lives here, and nothing of the core: each extension keeps its own facts
(the core's are in ``nats_sync._defaults``). Times are in seconds, sizes in bytes.
"""

from __future__ import annotations

#: Seconds for connecting and for each request: one knob, longer than the library's
#: request default because a person at a terminal would rather wait than retry.
CLI_TIMEOUT = 2.0
#: ``pub --js`` awaits at most this many acks (below the context's max_pending_acks).
CLI_JS_PUBLISH_WINDOW = 1000

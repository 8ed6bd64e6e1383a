"""The defaults and limits of partitioned consumer groups (orbit.go's pcgroups), as named constants.

No logic lives here, and nothing of the core: each extension keeps its own facts
(the core's are in ``nats_sync._defaults``). Times are in seconds, sizes in bytes.
"""

from __future__ import annotations

#: The key-value buckets the group configs live in (orbit.go's names, shared with it).
PCG_STATIC_BUCKET = "static-consumer-groups"
PCG_ELASTIC_BUCKET = "elastic-consumer-groups"
#: The priority group (ADR-42 pinned_client) of every member's consumer.
PCG_PRIORITY_GROUP = "PCG"
#: A member's ack_wait when its consumer config gives none; the pin's timeout and the
#: pulls' expiry follow from it (orbit.go: pinned TTL = ack_wait, expiry = ack_wait / 2,
#: both at least 1 s).
PCG_DEFAULT_ACK_WAIT = 5.0
PCG_MIN_PULL_EXPIRY = 1.0
#: How often a member's thread looks at its group's config between messages.
PCG_CONFIG_POLL = 0.25
#: Elastic: a standby instance waits this long (plus up to as much again, at random)
#: before remaking the member's consumer, so the pinned instance goes first.
PCG_STANDBY_BACKOFF = 0.4
#: ... and how long it waits for a change when it has messages to hand over (the watch's
#: reader does not look at what it holds when asked with no time at all).
PCG_CONFIG_PEEK = 0.001

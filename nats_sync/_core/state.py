"""The client's life-cycle states, shared by the handler and the parts it composes (plain data)."""

from __future__ import annotations

import enum


class State(enum.Enum):
    """Where the client is in its life."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    #: Subscriptions are draining: no new subscriptions or requests; publishing works
    #: (callbacks may still respond to what they received).
    DRAINING_SUBS = "draining subscriptions"
    #: Pending publishes are being flushed: nothing new is accepted.
    DRAINING_PUBS = "draining publishes"
    CLOSED = "closed"


DRAINING = (State.DRAINING_SUBS, State.DRAINING_PUBS)

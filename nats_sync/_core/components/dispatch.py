"""The reader's dispatch: routes the ops of each read, and counts what arrived.

How it works: the thread reading the live connection (its reader, or a requester reading
its own reply while the reader stepped aside; one at a time, by the connection's read
token) hands ``Dispatcher.on_ops`` the ops of one read. Messages go by sid to the request
mux (the inbox's sid) or to their subscription's queue; a PING is answered with a PONG,
a PONG goes to the pings, an INFO and an ``-ERR`` to the handler's callbacks, as does a
subscription that got its last message. Nothing here runs user code or takes a lock.

Threads and state: the reading thread alone writes ``in_msgs``, ``in_bytes`` and
``errors_received``. It reads the session's ``subscriptions`` and ``inbox`` without the
handler's lock (a dict lookup and an attribute read are atomic); the handler sets
``inbox`` once, under its lock, before the inbox's SUB is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from nats_sync import _defaults as d
from nats_sync._core import proto
from nats_sync._core.components.reply_mux import RequestMux
from nats_sync._core.components.subscription import Subscription
from nats_sync._core.session import Subscriptions
from nats_sync._core.threads.outbox import Outbox
from nats_sync.msg import Msg


class Dispatcher:
    """Routes a connection's server ops; see the module docstring.

    Args:
        subscriptions: the session's sid registry.
        outbox: where the PONG answering a PING goes.
        on_pong: a PONG arrived (the pings' ``on_pong``).
        on_info: an INFO arrived on the live connection.
        on_server_error: an ``-ERR`` arrived; its text.
        on_finished: a subscription received its last message (``max_msgs``).
    """

    def __init__(
        self,
        subscriptions: Subscriptions[Subscription],
        outbox: Outbox,
        on_pong: Callable[[], None],
        on_info: Callable[[dict[str, Any]], None],
        on_server_error: Callable[[str], None],
        on_finished: Callable[[Subscription], None],
    ) -> None:
        self._subscriptions = subscriptions
        self._outbox = outbox
        self._on_pong = on_pong
        self._on_info = on_info
        self._on_server_error = on_server_error
        self._on_finished = on_finished
        #: The request multiplexer whose inbox subscription (the session's) we route.
        self.inbox: RequestMux | None = None
        self.in_msgs = 0
        self.in_bytes = 0
        self.errors_received = 0

    def may_park(self) -> bool:
        """Whether requesters may read their own replies for a while.

        Only while requests are being made and nothing else needs the reader: no
        subscription, no request or flush waiting (their replies come unasked).
        """
        mux = self.inbox
        return (
            mux is not None
            and not mux
            and not self._subscriptions
            and not self._outbox.pong_waiters
            and time.monotonic() - mux.last_request < d.READER_LEAD_IDLE
        )

    def on_ops(self, ops: list[Any]) -> None:  # ServerOps, with messages as Msg
        """Acts on the ops of one read, in order.

        The request inbox is read once per batch: replies in it were asked for before
        the read, so an inbox made meanwhile cannot have any.
        """
        subs = self._subscriptions.by_sid
        mux = self.inbox
        mux_sid = self._subscriptions.inbox_sid if mux is not None else -1
        received = 0
        received_bytes = 0
        try:
            for op in ops:
                if type(op) is Msg:
                    received += 1
                    received_bytes += len(op.data)
                    sid = op.sid
                    if sid == mux_sid:
                        mux.resolve(op)  # type: ignore[union-attr]  # set: see mux_sid
                        continue
                    sub = subs.get(sid)
                    if sub is not None and not sub._deliver(op):
                        self._on_finished(sub)
                else:
                    self._on_op(op)
        finally:
            self.in_msgs += received
            self.in_bytes += received_bytes

    def _on_op(self, op: proto.ServerOp) -> None:
        if op is proto.PING_OP:
            self._outbox.put_control(proto.PONG)
        elif op is proto.PONG_OP:
            self._on_pong()
        elif type(op) is proto.InfoOp:
            self._on_info(op.info)
        elif type(op) is proto.ErrOp:
            self.errors_received += 1
            self._on_server_error(op.message)

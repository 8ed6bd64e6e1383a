"""What the batch publishers (fast ingest, atomic batches) share about their replies.

How it works: each batch publisher subscribes a private inbox of its own for the
server's answers to its messages (:func:`subscribe_replies`); :func:`status_error` is
the error a status answer stands for (no responders: no stream stores the subject); the
core's ``unsubscribe_quietly`` ends the inbox however the batch ended. No state, no
thread: called on the thread using the publisher.
"""

from __future__ import annotations

from nats_sync._core.components.subscription import Subscription
from nats_sync.jetstream._streams.wire import CoreClient
from nats_sync.jetstream.errors import JetStreamError, NoStreamResponseError
from nats_sync.msg import Msg


def subscribe_replies(client: CoreClient, subject: str, pending_msgs_limit: int) -> Subscription:
    """The subscription of a batch's private inbox (``subject``: the inbox and its
    wildcard): no callback, so the client's reader thread only queues the answers and
    the batch's own thread reads them.

    Args:
        client: the batch's client.
        subject: ``<inbox>.*`` or ``<inbox>.>``, the inbox new for this batch.
        pending_msgs_limit: answers queued at most (0: no limit).
    """
    return client.subscribe(subject, pending_msgs_limit=pending_msgs_limit)


def status_error(
    msg: Msg, subject: str, what: str, no_stream: str, after: str = ""
) -> JetStreamError:
    """The error of a status answer (``msg.status`` set) to a batch message.

    Args:
        msg: the answer.
        subject: the subject the message went to.
        what: names it for any other status ("fast batch X", "message 3 of atomic
            batch X").
        no_stream: said in brackets after "no stream stores <subject>".
        after: said after those brackets (what became of the batch).
    """
    if msg.is_no_responders:
        return NoStreamResponseError(f"no stream stores {subject!r} ({no_stream}){after}")
    return JetStreamError(f"{what} was answered with status {msg.status} {msg.description!r}")

"""JetStream publishing: ``publish`` (one acknowledged message), ``publish_batch``
(pipelined), and the context's door to ``publish_async`` (``acks.AsyncPublisher``).

How it works:

- ``publish`` is a core ``request`` to the message's subject on the caller's thread; the
  stream answers with a PubAck (or an API error). No responders (503) means no stream
  stores the subject yet (or its leader is changing): it is retried ``retry_attempts``
  times, ``retry_wait`` apart. A publish whose ack did not come in time is NOT retried:
  the stream may have stored it, and without a ``msg_id`` a retry would store it twice
  (nats.go does the same).
- ``publish_batch`` is the client's ``request_batch`` (pipelined on the core) on the
  caller's thread, at most ``max_pending_acks`` unanswered at once; each item gets its
  ack or its error, and nothing is retried (a late retry would reorder the stream).
- ``publish_async``, ``publish_async_pending`` and ``publish_async_completed`` are the
  methods of the context's :class:`~nats_sync.jetstream._publishing.acks.AsyncPublisher`, bound here
  (its module docstring says how the acks are settled and by which threads).

Nothing here starts a thread or keeps state between calls: ``publish`` and
``publish_batch`` run on the caller's thread.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nats_sync._core.components.port import port_of
from nats_sync._core.validate import check_timeout
from nats_sync.errors import InvalidArgumentError, NoRespondersError, TimeoutError
from nats_sync.jetstream._publishing.ack_future import ack_timeout, decode_ack, no_stream
from nats_sync.jetstream._publishing.acks import AsyncPublisher, check_retries
from nats_sync.jetstream._streams.wire import Headers
from nats_sync.jetstream.api import PubAck
from nats_sync.jetstream.errors import JetStreamError
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

__all__ = ["JsPublisher", "decode_ack"]


class JsPublisher:
    """Publishes for one context; ``publish_async`` and its window are its
    :class:`AsyncPublisher`'s.

    Args:
        js: the context (``js.client``, ``js.timeout``).
        max_pending_acks: ``publish_async`` acks awaited at most.
        stall_wait: seconds ``publish_async`` waits for room before it raises.
    """

    def __init__(self, js: JsContext, max_pending_acks: int, stall_wait: float) -> None:
        self._js = js
        self._client = js.client
        self._port = port_of(js.client)
        self._max_pending_acks = max_pending_acks
        self.window = AsyncPublisher(js, max_pending_acks, stall_wait)
        # Bound, not wrapped: publish_async runs per message.
        self.publish_async = self.window.publish_async
        self.pending = self.window.pending
        self.completed = self.window.completed

    # --- publish ---------------------------------------------------------------------

    def check_options(self, timeout: float | None, retry_attempts: int, retry_wait: float) -> float:
        """Checks ``publish``'s timeout and retries; returns the timeout in seconds (the
        context's when None).

        Raises:
            InvalidArgumentError: one of them has a value it cannot take.
        """
        timeout = self._timeout(timeout)
        check_retries(retry_attempts, retry_wait)
        return timeout

    def publish(
        self,
        subject: str,
        payload: bytes,
        merged: Headers,
        timeout: float,
        retry_attempts: int,
        retry_wait: float,
    ) -> PubAck:
        """``JetStream.publish`` once its options are checked (``check_options``) and
        its keywords merged into ``merged`` (``js_headers``); ``timeout`` applies to
        each attempt."""
        otel = self._port.instrumentation
        if otel is None:
            return self._publish(subject, payload, merged, timeout, retry_attempts, retry_wait)
        try:
            ack = self._publish(subject, payload, merged, timeout, retry_attempts, retry_wait)
        except Exception as err:
            otel.js_acked(subject, err)
            raise
        otel.js_acked(subject, None)
        return ack

    def _publish(
        self,
        subject: str,
        payload: bytes,
        merged: Headers,
        timeout: float,
        retry_attempts: int,
        retry_wait: float,
    ) -> PubAck:
        attempt = 0
        while True:
            try:
                reply = self._client.request(subject, payload, timeout=timeout, headers=merged)
            except NoRespondersError:
                if attempt >= retry_attempts:
                    raise no_stream(subject) from None
                attempt += 1
                time.sleep(retry_wait)
                continue
            except TimeoutError:
                raise ack_timeout(subject, timeout) from None
            return decode_ack(reply, subject)

    # --- publish_batch ---------------------------------------------------------------

    def publish_batch(
        self,
        subject: str,
        payloads: Sequence[bytes],
        *,
        headers: Headers = None,
        timeout: float | None = None,
    ) -> list[PubAck | Exception]:
        """See ``JetStream.publish_batch``."""
        timeout = self._timeout(timeout)
        if isinstance(payloads, (bytes, bytearray, memoryview, str)):
            raise InvalidArgumentError(
                f"payloads must be a sequence of payloads, got one {type(payloads).__name__}"
            )
        replies = self._client.request_batch(
            subject,
            payloads,
            timeout=timeout,
            headers=headers,
            max_in_flight=self._max_pending_acks,
        )
        results: list[PubAck | Exception] = []
        for reply in replies:
            if isinstance(reply, Msg):
                try:
                    results.append(decode_ack(reply, subject))
                except JetStreamError as err:
                    results.append(err)
            elif isinstance(reply, NoRespondersError):
                results.append(no_stream(subject))
            elif isinstance(reply, TimeoutError):
                results.append(ack_timeout(subject, timeout))
            elif isinstance(reply, Exception):
                results.append(reply)
            else:
                raise reply  # KeyboardInterrupt and the like are not an item's result
        otel = self._port.instrumentation
        if otel is not None:
            for result in results:
                otel.js_acked(subject, result if isinstance(result, Exception) else None)
        return results

    # --- helpers -----------------------------------------------------------------------

    def _timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return self._js.timeout
        check_timeout(timeout)
        return float(timeout)

"""What the parts of ``jetstream/`` use of their context: the :class:`JsContext` protocol.

How it works: streams, consumers, key-value and object store buckets are made by the
context (``context.JetStream``) and call back into it. They name its type as this
protocol, not as the class, as the context names the client ``wire.CoreClient``: so no
part imports ``context``, which imports them all, and the imports of ``jetstream/`` run
one way (``docs/ARCHITECTURE.md``). The members are those the parts call, with the
context's signatures (publishing with the keywords the parts pass). None makes a
stream, consumer or publisher: the parts make those with the function of the module
that defines them (``stream.put_stream``, ``consumer.put_consumer``, ...), so this module
imports no part, even for types. Nothing here runs and nothing is shared: it holds
types only, so it has no thread and no state.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Protocol

from nats_sync.jetstream._streams.wire import CoreClient, Headers, JsApi
from nats_sync.jetstream.api import ConsumerInfo, PubAck, StreamInfo


class JsContext(Protocol):
    """What the JetStream parts use of :class:`nats_sync.jetstream.JetStream`."""

    @property
    def client(self) -> CoreClient:
        """The connection."""
        ...

    @property
    def timeout(self) -> float:
        """The default seconds per API call."""
        ...

    @property
    def api(self) -> JsApi:
        """The API requests (``api.request``, ``api.subject``)."""
        ...

    def api_level(self, timeout: float | None = None) -> int:
        """The server's JetStream API level."""
        ...

    # --- streams ----------------------------------------------------------------------

    def stream_info(
        self,
        name: str,
        subjects_filter: str | None = None,
        deleted_details: bool = False,
        *,
        timeout: float | None = None,
    ) -> StreamInfo:
        """A stream's config and state."""
        ...

    def delete_stream(self, name: str, timeout: float | None = None) -> None:
        """Deletes a stream."""

    def stream_names(
        self, subject: str | None = None, timeout: float | None = None
    ) -> Iterator[str]:
        """The names of the streams (those storing ``subject`` when given)."""
        ...

    def list_streams(
        self, subject: str | None = None, timeout: float | None = None
    ) -> Iterator[StreamInfo]:
        """Every stream's info (those storing ``subject`` when given)."""
        ...

    def stream_name_by_subject(self, subject: str, timeout: float | None = None) -> str:
        """The stream that stores ``subject``."""
        ...

    # --- consumers --------------------------------------------------------------------

    def consumer_info(
        self, stream: str, name: str, *, timeout: float | None = None
    ) -> ConsumerInfo:
        """A consumer's config and position."""
        ...

    def delete_consumer(self, stream: str, name: str, timeout: float | None = None) -> None:
        """Deletes a consumer."""

    def consumer_names(self, stream: str, timeout: float | None = None) -> Iterator[str]:
        """The names of a stream's consumers."""
        ...

    def list_consumers(self, stream: str, timeout: float | None = None) -> Iterator[ConsumerInfo]:
        """Every consumer's info on a stream."""
        ...

    # --- publishing -------------------------------------------------------------------

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: Headers = None,
        timeout: float | None = None,
        expected_last_subject_seq: int | None = None,
        ttl: float | str | None = None,
    ) -> PubAck:
        """Publishes to a stream and waits for its acknowledgement."""
        ...

    def publish_async(self, subject: str, payload: bytes = b"") -> Future[PubAck]:
        """Publishes without waiting; the future gets the acknowledgement."""
        ...

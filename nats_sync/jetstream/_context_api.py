"""What the parts of ``jetstream/`` use of their context: the :class:`JsContext` protocol.

How it works: streams, consumers, key-value and object store buckets are made by the
context (``context.JetStream``) and call back into it. They name its type as this
protocol, not as the class, as the context names the client ``_api.CoreClient``: so no
part imports ``context``, which imports them all, and the imports of ``jetstream/`` run
one way (``docs/ARCHITECTURE.md``). The members are those the parts call, with the
context's signatures (publishing with the keywords the parts pass). Nothing here runs
and nothing is shared: it holds types only, so it has no thread and no state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

from nats_sync.jetstream._api import CoreClient, Headers, JsApi
from nats_sync.jetstream.api import ConsumerConfig, ConsumerInfo, PubAck, StreamConfig, StreamInfo
from nats_sync.jetstream.errors import JetStreamError

if TYPE_CHECKING:
    # The objects the context makes, as return types only.
    from nats_sync.jetstream.consumer import PullConsumer
    from nats_sync.jetstream.fast import FastPublisher
    from nats_sync.jetstream.ordered import OrderedConsumer
    from nats_sync.jetstream.stream import Stream


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

    def create_stream(self, config: StreamConfig | None = None, *,
                      timeout: float | None = None, **fields: Any) -> Stream:
        """Creates a stream."""
        ...

    def update_stream(self, config: StreamConfig | None = None, *,
                      timeout: float | None = None, **fields: Any) -> Stream:
        """Changes a stream's config."""
        ...

    def stream(self, name: str, timeout: float | None = None) -> Stream:
        """Binds to an existing stream."""
        ...

    def stream_info(self, name: str, subjects_filter: str | None = None,
                    deleted_details: bool = False, *, timeout: float | None = None
                    ) -> StreamInfo:
        """A stream's config and state."""
        ...

    def delete_stream(self, name: str, timeout: float | None = None) -> None:
        """Deletes a stream."""

    def stream_names(self, subject: str | None = None, timeout: float | None = None
                     ) -> Iterator[str]:
        """The names of the streams (those storing ``subject`` when given)."""
        ...

    def list_streams(self, subject: str | None = None, timeout: float | None = None
                     ) -> Iterator[StreamInfo]:
        """Every stream's info (those storing ``subject`` when given)."""
        ...

    def stream_name_by_subject(self, subject: str, timeout: float | None = None) -> str:
        """The stream that stores ``subject``."""
        ...

    # --- consumers --------------------------------------------------------------------

    def create_consumer(self, stream: str, config: ConsumerConfig | None = None, *,
                        timeout: float | None = None, **fields: Any) -> PullConsumer:
        """Creates a consumer."""
        ...

    def update_consumer(self, stream: str, config: ConsumerConfig | None = None, *,
                        timeout: float | None = None, **fields: Any) -> PullConsumer:
        """Changes a consumer's config."""
        ...

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig | None = None,
                                  *, timeout: float | None = None, **fields: Any
                                  ) -> PullConsumer:
        """Creates the consumer, or updates it when it exists."""
        ...

    def consumer(self, stream: str, name: str, timeout: float | None = None) -> PullConsumer:
        """Binds to an existing consumer."""
        ...

    def consumer_info(self, stream: str, name: str, *, timeout: float | None = None
                      ) -> ConsumerInfo:
        """A consumer's config and position."""
        ...

    def delete_consumer(self, stream: str, name: str, timeout: float | None = None) -> None:
        """Deletes a consumer."""

    def consumer_names(self, stream: str, timeout: float | None = None) -> Iterator[str]:
        """The names of a stream's consumers."""
        ...

    def list_consumers(self, stream: str, timeout: float | None = None
                       ) -> Iterator[ConsumerInfo]:
        """Every consumer's info on a stream."""
        ...

    def ordered_consumer(
        self, stream: str, *, filter_subjects: Sequence[str] | None = None,
        deliver_policy: str = "all", opt_start_seq: int | None = None,
        opt_start_time: Any = None, headers_only: bool = False,
    ) -> OrderedConsumer:
        """An ordered consumer of ``stream``."""
        ...

    # --- publishing -------------------------------------------------------------------

    def publish(self, subject: str, payload: bytes = b"", *, headers: Headers = None,
                timeout: float | None = None, expected_last_subject_seq: int | None = None,
                ttl: float | str | None = None) -> PubAck:
        """Publishes to a stream and waits for its acknowledgement."""
        ...

    def publish_async(self, subject: str, payload: bytes = b"") -> Future[PubAck]:
        """Publishes without waiting; the future gets the acknowledgement."""
        ...

    def fast_publisher(self, *, flow: int = 100, max_outstanding_acks: int = 2,
                       error_cb: Callable[[JetStreamError], None] | None = None
                       ) -> FastPublisher:
        """A fast-ingest batch (ADR-50)."""
        ...

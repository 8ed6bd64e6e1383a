"""Load tests of NATS services with Locust (the optional ``locust`` extra).

`NatsUser` is a ``locust.User`` whose ``self.client`` makes NATS calls and reports each
one to Locust as a request: ``request_type`` ``"NATS"`` for core calls (``request``,
``publish``, ``flush``) and ``"JS"`` for JetStream ones (``publish``,
``publish_async``, a key-value bucket's ``get`` and ``put``), ``name`` the subject (the
bucket for key-value calls, ``"flush"`` for a flush; ``name=`` on any call groups
subjects that vary), the response time in milliseconds, the payload's size in bytes,
and the exception of a failed call. A failed call is counted as a failure in Locust's
statistics and then raised to the task, as the plain client raises it: a task that
expects failures catches them (``except nats_sync.TimeoutError``), or Locust logs the
error and moves on to the next task.

```python
from locust import task

from nats_sync.locust import NatsUser


class Lookup(NatsUser):
    host = "nats://127.0.0.1:4222"  # or --host

    @task
    def lookup(self) -> None:
        self.client.request("lookup.price", b"sku-42", timeout=2.0)
```

How it works: importing ``locust`` monkey-patches the process with gevent
(``gevent.monkey.patch_all()``), so every Locust user is a greenlet, and so are the
client's threads. Every user of a process (a Locust worker, or a standalone run) shares
one connection per server URL and set of ``connect_options``: the first call of any user
makes it (``_Shared.client``, under its lock, so concurrent first calls connect once),
and the environment's ``test_stop`` and ``quitting`` events close it, once the
``publish_async`` acknowledgements still in flight have come (the next test, in the web
UI, connects again). One JetStream context per connection is shared too, so all
users' ``publish_async`` share one window of acknowledgements and one ack greenlet.
Greenlets and state: users' greenlets call the wrappers; ``publish_async``'s done
callback fires its event on the client's callback greenlet. ``_SHARED`` (this module's
connections, by environment, then URL and options) is read and changed under
``_SHARED_LOCK``;
each ``_Shared``'s client under its own ``lock``. Locust's request event is fired on the
calling greenlet, or the callback greenlet for ``publish_async``.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import locust
from locust.exception import LocustError

from nats_sync import _defaults as d
from nats_sync.client import Client, connect
from nats_sync.errors import Error as NatsError

if TYPE_CHECKING:
    from locust.env import Environment

    from nats_sync._core.components.publishing import HeadersArg
    from nats_sync.jetstream import Entry, JetStream, KeyValue, PubAck
    from nats_sync.msg import Msg

__all__ = ["NatsClient", "NatsJetStream", "NatsKeyValue", "NatsUser"]

#: ``request_type`` of core NATS calls in Locust's statistics.
CORE = "NATS"
#: ``request_type`` of JetStream calls (key-value included).
JETSTREAM = "JS"

T = TypeVar("T")


class _Shared:
    """One process's connection to one server URL with one set of options."""

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        self.url = url
        self.options = dict(options)
        self.lock = threading.Lock()
        self.nc: Client | None = None
        self.js: JetStream | None = None
        #: How many times this process connected (the tests count it).
        self.connects = 0

    def client(self) -> Client:
        """The connection, made on first use."""
        nc = self.nc
        if nc is not None and not nc.is_closed:
            return nc
        with self.lock:
            if self.nc is None or self.nc.is_closed:
                self.nc = connect(self.url, **self.options)
                self.js = None
                self.connects += 1
            return self.nc

    def jetstream(self) -> JetStream:
        """The connection's one JetStream context, made on first use."""
        nc = self.client()
        with self.lock:
            if self.js is None:
                self.js = nc.jetstream()
            return self.js

    def close(self) -> None:
        """Closes the connection, if made (the next call connects again), once the
        ``publish_async`` acknowledgements in flight settled (``LOCUST_CLOSE_ACK_WAIT``
        at most): closing fails those still awaited, which would count as failures."""
        with self.lock:
            nc, self.nc, js, self.js = self.nc, None, self.js, None
        if nc is None:
            return
        try:
            if js is not None and not nc.is_closed:
                js.publish_async_completed(timeout=d.LOCUST_CLOSE_ACK_WAIT)
        except NatsError:
            pass  # reported as failures when the close fails them
        finally:
            nc.close()


_SHARED_LOCK = threading.Lock()
#: Each environment's shared connections, by URL and options (an environment is one
#: test run's; a process running several, as tests do, keeps them apart).
_SHARED: weakref.WeakKeyDictionary[Environment, dict[tuple[str, str], _Shared]] = (
    weakref.WeakKeyDictionary()
)


def _shared_for(environment: Environment, url: str, options: Mapping[str, Any]) -> _Shared:
    """The shared connection of ``environment``'s users to ``url`` with ``options``;
    the environment's first closes them all at its test's end."""
    key = (url, repr(sorted(options.items())))
    with _SHARED_LOCK:
        mine = _SHARED.get(environment)
        first = mine is None
        if mine is None:
            mine = _SHARED[environment] = {}
        shared = mine.get(key)
        if shared is None:
            shared = mine[key] = _Shared(url, options)
    if first:

        def close_all(**_: Any) -> None:
            with _SHARED_LOCK:
                made = list(mine.values())
            for each in made:
                each.close()

        events: Any = environment.events  # Locust's EventHook methods are untyped
        events.test_stop.add_listener(close_all)
        events.quitting.add_listener(close_all)
    return shared


class _Reporter:
    """Times a call and fires Locust's request event for it."""

    def __init__(self, environment: Environment) -> None:
        self._fire: Callable[..., Any] = environment.events.request.fire

    def call(
        self,
        request_type: str,
        name: str,
        work: Callable[[], T],
        length: Callable[[T], int],
    ) -> T:
        """Runs ``work``, reports it (its result's ``length``, or its exception), returns
        its result or raises its exception."""
        start_time = time.time()
        started = time.perf_counter()
        try:
            result = work()
        except Exception as err:
            self.fire(request_type, name, start_time, started, 0, err, None)
            raise
        self.fire(request_type, name, start_time, started, length(result), None, result)
        return result

    def fire(
        self,
        request_type: str,
        name: str,
        start_time: float,
        started: float,
        response_length: int,
        exception: BaseException | None,
        response: object,
    ) -> None:
        """Reports one call that began at ``started`` (``time.perf_counter()``)."""
        self._fire(
            request_type=request_type,
            name=name,
            response_time=(time.perf_counter() - started) * 1000.0,
            response_length=response_length,
            exception=exception,
            context={},
            start_time=start_time,
            response=response,
        )


class NatsKeyValue:
    """A key-value bucket whose ``get`` and ``put`` are reported to Locust (``"JS"``,
    the bucket's name unless ``name=`` is given). Made by `NatsJetStream.key_value`."""

    def __init__(self, reporter: _Reporter, shared: _Shared, bucket: str) -> None:
        self._reporter = reporter
        self._shared = shared
        self.bucket = bucket
        self._made: tuple[JetStream, KeyValue] | None = None

    def _bucket(self) -> KeyValue:
        # Bound again after the shared connection was closed and made anew.
        js = self._shared.jetstream()
        made = self._made
        if made is None or made[0] is not js:
            made = self._made = (js, js.key_value(self.bucket))
        return made[1]

    def get(
        self, key: str, revision: int | None = None, *, timeout: float | None = None, name: str = ""
    ) -> Entry:
        """`KeyValue.get`, reported with the value's size.

        Raises:
            KeyNotFoundError: the key has no value (reported as a failure too).
        """
        return self._reporter.call(
            JETSTREAM,
            name or self.bucket,
            lambda: self._bucket().get(key, revision, timeout=timeout),
            lambda entry: len(entry.value or b""),
        )

    def put(self, key: str, value: bytes, *, timeout: float | None = None, name: str = "") -> int:
        """`KeyValue.put`, reported with the value's size; returns the revision."""
        return self._reporter.call(
            JETSTREAM,
            name or self.bucket,
            lambda: self._bucket().put(key, value, timeout=timeout),
            lambda _: len(value),
        )


class NatsJetStream:
    """JetStream calls reported to Locust as ``"JS"`` requests named by their subject.

    Every user of a process shares the connection's one JetStream context. Made by
    `NatsClient.jetstream`.
    """

    def __init__(self, reporter: _Reporter, shared: _Shared) -> None:
        self._reporter = reporter
        self._shared = shared

    def publish(
        self, subject: str, payload: bytes = b"", *, name: str = "", **options: Any
    ) -> PubAck:
        """`JetStream.publish` (its keyword options as they are), reported with the
        payload's size once the stream acknowledged it."""
        return self._reporter.call(
            JETSTREAM,
            name or subject,
            lambda: self._shared.jetstream().publish(subject, payload, **options),
            lambda _: len(payload),
        )

    def publish_async(
        self, subject: str, payload: bytes = b"", *, name: str = "", **options: Any
    ) -> Future[PubAck]:
        """`JetStream.publish_async` (its keyword options as they are): returns its
        future at once; the request is reported when the acknowledgement or the error
        arrives, its response time from the call to then.

        Raises:
            TooManyStalledMsgsError: no room in the acknowledgement window in time
                (reported as a failure too, as is any error raised at once).
        """
        reporter = self._reporter
        label = name or subject
        start_time = time.time()
        started = time.perf_counter()
        try:
            future = self._shared.jetstream().publish_async(subject, payload, **options)
        except Exception as err:
            reporter.fire(JETSTREAM, label, start_time, started, 0, err, None)
            raise

        def settled(done: Future[PubAck]) -> None:
            error = done.exception()
            if error is None:
                reporter.fire(JETSTREAM, label, start_time, started, len(payload), None, None)
            else:
                reporter.fire(JETSTREAM, label, start_time, started, 0, error, None)

        future.add_done_callback(settled)
        return future

    def key_value(self, bucket: str) -> NatsKeyValue:
        """The bucket ``bucket`` (which must exist), its calls reported to Locust."""
        return NatsKeyValue(self._reporter, self._shared, bucket)


class NatsClient:
    """`NatsUser.client`: NATS calls, each reported to Locust as a ``"NATS"`` request.

    The connection behind it is the process's shared one, made by the first call of any
    user.
    """

    def __init__(self, environment: Environment, shared: _Shared) -> None:
        self._reporter = _Reporter(environment)
        self._shared = shared

    @property
    def nc(self) -> Client:
        """The shared `nats_sync.Client` itself, for calls that are not to be reported
        (set-up in ``on_start``, subscriptions); connects on first use."""
        return self._shared.client()

    def request(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float = d.DEFAULT_REQUEST_TIMEOUT,
        headers: HeadersArg = None,
        *,
        name: str = "",
    ) -> Msg:
        """`Client.request`, reported with the reply's size.

        Raises:
            NoRespondersError: nobody is subscribed to ``subject`` (reported as a failure).
            TimeoutError: no reply within ``timeout`` seconds (reported as a failure).
        """
        return self._reporter.call(
            CORE,
            name or subject,
            lambda: self._shared.client().request(subject, payload, timeout, headers),
            lambda reply: len(reply.data),
        )

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str = "",
        headers: HeadersArg = None,
        *,
        name: str = "",
    ) -> None:
        """`Client.publish`, reported with the payload's size. It returns once the
        message is queued: its response time is the client's, not the server's (add a
        `flush` to measure the round trip)."""
        self._reporter.call(
            CORE,
            name or subject,
            lambda: self._shared.client().publish(subject, payload, reply, headers),
            lambda _: len(payload),
        )

    def flush(self, timeout: float = d.DEFAULT_FLUSH_TIMEOUT, *, name: str = "flush") -> None:
        """`Client.flush`, reported under ``name`` with a size of 0.

        Raises:
            FlushTimeoutError: no answer within ``timeout`` seconds (reported as a failure).
        """
        self._reporter.call(CORE, name, lambda: self._shared.client().flush(timeout), lambda _: 0)

    def jetstream(self) -> NatsJetStream:
        """JetStream calls on the shared connection's one context, reported as ``"JS"``."""
        return NatsJetStream(self._reporter, self._shared)


class NatsUser(locust.User):
    """A Locust user whose ``client`` makes NATS calls reported to Locust.

    Subclass it with tasks. The server is ``host`` (a class attribute, or Locust's
    ``--host``), a URL as `nats_sync.connect` takes it (several comma-separated);
    ``connect_options`` are further keyword arguments of `nats_sync.connect` (``name``,
    ``user_credentials``, ...). Every user of one process with the same URL and options
    shares one connection, made by the first call and closed when the test stops.

    Example:
        ```python
        from locust import between, task

        from nats_sync.locust import NatsUser


        class Orders(NatsUser):
            wait_time = between(0.01, 0.05)

            @task(3)
            def lookup(self) -> None:
                self.client.request("lookup.price", b"sku-42", timeout=2.0)

            @task
            def order(self) -> None:
                self.client.jetstream().publish("orders.new", b"{}")
        ```
    """

    abstract = True
    #: Further keyword arguments of `nats_sync.connect` for the shared connection.
    connect_options: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        host = self.host
        if not host:
            raise LocustError(
                f"{type(self).__name__}: no NATS server: set its host attribute or "
                "give --host (e.g. nats://127.0.0.1:4222)"
            )
        #: This user's NATS calls, reported to Locust.
        self.client = NatsClient(environment, _shared_for(environment, host, self.connect_options))

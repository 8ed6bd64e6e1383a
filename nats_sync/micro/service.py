"""A NATS service (:class:`Service`): endpoints, groups, discovery and statistics.

How it works: everything goes through the client's public API. Each endpoint is one
queue subscription on its subject:

- ``max_workers=1`` (the default) subscribes with a callback, so the client's own
  delivery thread of that subscription (``nats_sync-sub-<sid>``) runs the handler, one
  request at a time, in arrival order.
- ``max_workers=N`` subscribes without a callback and starts N threads
  ``nats_sync-micro-<service>-<endpoint>-<i>`` that all read the same subscription,
  each taking its share of the requests waiting at once (``next_msgs``: one lock
  round per batch); when none is waiting, one of them sleeps on the subscription
  (each arrival wakes every thread asleep there) and the others on a lock. There is
  no queue in between: a busy pool simply leaves requests in the subscription's own
  bounded queue (backpressure, nothing dropped by the pool), and each thread ends
  when the subscription does (stop, drain, the client closing).

Discovery is three callback subscriptions, ``$SRV.*``, ``$SRV.*.<name>`` and
``$SRV.*.<name>.<id>`` (no queue group: every instance answers), whose delivery threads
answer PING, INFO and STATS apart from the endpoints, so a busy endpoint does not
silence its service.

State: the statistics of every endpoint, ``_started`` and ``_stopped`` belong to the
service and are read and written under its ``_lock``, taken once per request, after
the handler. The endpoint list only grows, under the lock, before or while serving.
``stop()`` needs no count of running handlers: draining a callback subscription waits
for its delivery thread's callbacks, and it joins the worker threads itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any

from nats_sync._core.components.port import port_of
from nats_sync._core.nuid import Nuid
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    Error,
    InvalidArgumentError,
    PermissionsViolationError,
    SlowConsumerError,
)
from nats_sync.micro import _defaults as md
from nats_sync.micro._api import (
    DEFAULT_QUEUE_GROUP,
    VERBS,
    EndpointInfo,
    EndpointStats,
    ServiceInfo,
    ServicePing,
    ServiceStats,
    check_metadata,
    check_name,
    check_queue_group,
    check_subject,
    check_version,
    encode,
)
from nats_sync.micro.request import Request, ServiceError
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync._core.components.instrumentation import Instrumentation
    from nats_sync._core.components.subscription import Subscription
    from nats_sync.client import Client

log = logging.getLogger("nats_sync")

#: ``handler(request)``: answers with ``request.respond`` or ``request.respond_error``.
RequestHandler = Callable[[Request], None]
#: ``stats_handler(endpoint)``: the endpoint's own statistics (any JSON value), put in
#: its ``data`` in each STATS reply.
StatsHandler = Callable[[EndpointInfo], Any]
#: ``error_handler(service, error)``: an asynchronous error on one of the service's
#: subscriptions (a slow consumer, a permissions violation); the service then stops.
ServiceErrorHandler = Callable[["Service", BaseException], None]
#: ``done_handler(service)``: the service stopped (``stop()``, an error, its client closing).
DoneHandler = Callable[["Service"], None]
_ids = Nuid()


@dataclass(frozen=True)
class ServiceHandlers:
    """The service's own callbacks (each optional), as nats.go's micro has them."""

    stats_handler: StatsHandler | None = None
    error_handler: ServiceErrorHandler | None = None
    done_handler: DoneHandler | None = None


def _subject_of(error: BaseException) -> str | None:
    """The subscription subject an asynchronous error is about, if it names one."""
    if isinstance(error, SlowConsumerError):
        return error.subject
    if isinstance(error, PermissionsViolationError) and error.operation == "subscription":
        return error.subject
    return None


class _Endpoint:
    """One endpoint: its configuration, subscription, worker threads and counters.

    The counters are written under the service's lock only.
    """

    def __init__(
        self,
        service: Service,
        name: str,
        subject: str,
        queue_group: str,
        metadata: dict[str, str],
        handler: RequestHandler,
        max_workers: int,
    ) -> None:
        self.service = service
        self.name = name
        self.subject = subject
        self.queue_group = queue_group
        self.metadata = metadata
        self.handler = handler
        self.max_workers = max_workers
        self.sub: Subscription | None = None
        self.workers: list[threading.Thread] = []
        self.num_requests = 0
        self.num_errors = 0
        self.last_error = ""
        self.processing_time = 0
        #: The client's instrumentation (tracing), or None.
        self.otel: Instrumentation | None = None

    def start(self, nc: Client) -> None:
        self.otel = otel = port_of(nc).instrumentation
        handle: Callable[[Msg], None] = self.handle
        if otel is not None:
            handle = otel.wrap_service_handler(self.name, self.subject, handle)
        if self.max_workers == 1:
            self.sub = nc.subscribe(self.subject, queue=self.queue_group, cb=handle)
            return
        self.sub = nc.subscribe(self.subject, queue=self.queue_group)
        if otel is not None:
            otel.serving(self.sub)
        # Held by the one worker asleep on the subscription (see _work).
        waiting = threading.Lock()
        for index in range(self.max_workers):
            worker = threading.Thread(
                target=self._work,
                args=(self.sub, handle, waiting),
                daemon=True,
                name=f"nats_sync-micro-{self.service.name}-{self.name}-{index}",
            )
            self.workers.append(worker)
            worker.start()

    def _work(
        self, sub: Subscription, handle: Callable[[Msg], None], waiting: threading.Lock
    ) -> None:
        """Worker thread: handles requests until the subscription ends.

        It takes one request; when none is queued it waits for one holding
        ``waiting``, so only one worker sleeps on the subscription (an arrival wakes
        every thread asleep there: 16 idle workers made 1.2 context switches per
        request at 64 in flight, one makes 0.17) and the others sleep on the lock.
        Then it takes its share of those queued behind it in one lock round
        (``next_msgs``): the pending count split over the workers, at most
        ``MICRO_WORKER_BATCH`` in all, so that under load a worker pays a lock round
        per batch rather than per request, and slow handlers still run side by side.
        A request in a share waits for the handlers before it even if another worker
        goes idle, so when the endpoint's handlers take more than
        ``MICRO_BATCH_HANDLER_NS`` on average (where a lock round saved is nothing
        and such a wait is long) it takes one request at a time. Requests it took are
        handled whatever happens to the subscription.
        """
        workers = self.max_workers
        most = md.MICRO_WORKER_BATCH - 1
        slow = md.MICRO_BATCH_HANDLER_NS
        try:
            while True:
                if sub.pending_msgs:
                    batch = [sub.next_msg(timeout=None)]
                else:
                    with waiting:
                        batch = [sub.next_msg(timeout=None)]
                # Its share of the waiting ones, this one included, rounded up; none
                # for slow handlers (the stats read without the lock: a hint).
                share = min(-(-(sub.pending_msgs + 1) // workers) - 1, most)
                if share and self.processing_time <= slow * self.num_requests:
                    try:
                        batch += sub.next_msgs(share, timeout=0)
                    except Error:  # another worker took them, or the end: next turn
                        pass
                for msg in batch:
                    handle(msg)
        except (BadSubscriptionError, ConnectionClosedError):
            return  # the subscription ended: stop, drain, the client closing
        except Error as err:  # e.g. the server refused the subscription
            log.error(
                "nats_sync: endpoint %r of service %r stopped: %s",
                self.name,
                self.service.name,
                err,
            )

    def handle(self, msg: Msg) -> None:
        """Runs the handler for one request and counts it (a handler thread)."""
        otel = self.otel
        request = Request(msg, otel)
        start = time.perf_counter_ns()
        try:
            self.handler(request)
        except Exception as err:  # a handler's failure is the caller's answer, not ours
            if otel is not None:
                otel.failed(err)
            self._answer_failure(request, err)
        else:
            if otel is not None and request._error is not None:
                otel.failed(request._error)
        elapsed = time.perf_counter_ns() - start
        with self.service._lock:
            self.num_requests += 1
            self.processing_time += elapsed
            if request._error is not None:
                self.num_errors += 1
                self.last_error = request._error

    def _answer_failure(self, request: Request, err: Exception) -> None:
        if isinstance(err, ServiceError):
            code, description = err.code or 500, err.description or err.detail
        else:
            log.exception(
                "nats_sync: handler of endpoint %r of service %r raised",
                self.name,
                self.service.name,
            )
            code, description = 500, f"{type(err).__name__}: {err}"
        if request.responded or not request.reply:
            request._error = f"{code}:{description}"
            return
        try:
            request.respond_error(code, description)
        except Error as failure:  # the client closed meanwhile: nobody to tell
            request._error = f"{code}:{description}"
            log.warning("nats_sync: could not answer a failed request: %s", failure)

    def info(self) -> EndpointInfo:
        return EndpointInfo(self.name, self.subject, self.queue_group, dict(self.metadata))

    def stats(self) -> EndpointStats:
        average = self.processing_time // self.num_requests if self.num_requests else 0
        return EndpointStats(
            self.name,
            self.subject,
            self.queue_group,
            self.num_requests,
            self.num_errors,
            self.last_error,
            self.processing_time,
            average,
        )

    def reset(self) -> None:
        self.num_requests = self.num_errors = self.processing_time = 0
        self.last_error = ""


class Group:
    """A subject prefix (and queue group) that endpoints added through it share.

    Made by :meth:`Service.add_group` or :meth:`Group.add_group`.
    """

    def __init__(
        self, service: Service, prefix: str, queue_group: str, queue_group_disabled: bool = False
    ) -> None:
        self._service = service
        self._prefix = prefix
        self._queue_group = queue_group
        self._queue_group_disabled = queue_group_disabled

    @property
    def prefix(self) -> str:
        """The subject prefix of this group's endpoints."""
        return self._prefix

    @property
    def queue_group(self) -> str:
        """The queue group this group's endpoints join unless told otherwise ("" where
        the group has queue groups disabled)."""
        return "" if self._queue_group_disabled else self._queue_group

    def add_endpoint(
        self,
        name: str,
        handler: RequestHandler,
        subject: str | None = None,
        queue_group: str | None = None,
        metadata: dict[str, str] | None = None,
        *,
        max_workers: int = 1,
        queue_group_disabled: bool = False,
    ) -> None:
        """Adds an endpoint on ``<prefix>.<subject or name>``; see
        :meth:`Service.add_endpoint`."""
        self._service._add(
            self._prefix,
            name,
            handler,
            subject,
            resolve_queue_group(
                queue_group, self._queue_group, queue_group_disabled, self._queue_group_disabled
            ),
            metadata,
            max_workers,
        )

    def add_group(
        self, name: str, queue_group: str | None = None, *, queue_group_disabled: bool = False
    ) -> Group:
        """A nested group on ``<prefix>.<name>``; see :meth:`Service.add_group`."""
        check_subject(name, "group name", wildcards=False)
        group_queue = resolve_queue_group(
            queue_group, self._queue_group, queue_group_disabled, self._queue_group_disabled
        )
        return Group(
            self._service,
            f"{self._prefix}.{name}",
            group_queue or self._queue_group,
            not group_queue,
        )


def resolve_queue_group(
    given: str | None, parent: str, disabled: bool, parent_disabled: bool
) -> str:
    """The queue group an endpoint or group joins ("": none), as nats.go's micro decides
    it: disabled here wins, then a queue group given here, then the parent's choice.

    Raises:
        InvalidArgumentError: ``given`` cannot be a queue group name.
    """
    if disabled:
        return ""
    if given:
        return check_queue_group(given, "queue_group")
    return "" if parent_disabled else parent


class Service:
    """A running service; made by :func:`add_service`.

    Attributes are read-only: ``name``, ``id``, ``version``, ``description``,
    ``metadata``, ``queue_group``. A context manager: leaving the block stops it.
    """

    def __init__(
        self,
        nc: Client,
        name: str,
        version: str,
        description: str,
        metadata: dict[str, str],
        queue_group: str,
        queue_group_disabled: bool = False,
        handlers: ServiceHandlers | None = None,
    ) -> None:
        self._nc = nc
        self.name = name
        self.id = _ids.next()
        self.version = version
        self.description = description
        self.metadata = metadata
        self.queue_group = queue_group
        self.queue_group_disabled = queue_group_disabled
        self._handlers = handlers or ServiceHandlers()
        self._lock = threading.Lock()
        self._stopped = False
        self._done = False
        self._endpoints: list[_Endpoint] = []
        self._started = datetime.now(timezone.utc)
        self._discovery: list[Subscription] = []
        self._unlisten: list[Callable[[], None]] = []

    def _start_discovery(self) -> None:
        port = port_of(self._nc)
        self._unlisten = [
            port.add_error_listener(self._on_async_error),
            port.add_status_listener(self._on_status),
        ]
        for subject in ("$SRV.*", f"$SRV.*.{self.name}", f"$SRV.*.{self.name}.{self.id}"):
            self._discovery.append(self._nc.subscribe(subject, cb=self._answer_discovery))

    # --- events: asynchronous errors and the client closing ---------------------------

    def _on_async_error(self, error: BaseException) -> None:
        """Any thread that saw an error: one on this service's subscriptions stops it,
        after ``error_handler`` (as nats.go's micro), on a thread of its own."""
        subject = _subject_of(error)
        if subject is None or self._stopped:
            return
        with self._lock:
            endpoint = next((e for e in self._endpoints if e.subject == subject), None)
        if endpoint is None and subject not in {sub.subject for sub in self._discovery}:
            return
        if endpoint is not None:
            with self._lock:
                endpoint.num_errors += 1
                endpoint.last_error = str(error)
        self._in_own_thread("error", self._fail, error)

    def _on_status(self, event: str) -> None:
        """Any thread: the client closed, so the service is stopped (``done_handler``)."""
        if event == "closed" and not self._done:
            self._in_own_thread("closed", self.stop)

    def _fail(self, error: BaseException) -> None:
        error_handler = self._handlers.error_handler
        if error_handler is not None:
            try:
                error_handler(self, error)
            except Exception:
                log.exception("nats_sync: error_handler of service %r raised", self.name)
        self.stop()

    def _in_own_thread(self, why: str, fn: Callable[..., None], *args: Any) -> None:
        threading.Thread(
            target=fn, args=args, daemon=True, name=f"nats_sync-micro-{self.name}-{why}"
        ).start()

    def _answer_discovery(self, msg: Msg) -> None:
        """A discovery subscription's delivery thread: answers PING, INFO or STATS."""
        verb = msg.subject.split(".", 2)[1]
        if verb not in VERBS or not msg.reply:
            return
        record: ServicePing | ServiceInfo | ServiceStats
        if verb == "PING":
            record = ServicePing(self.name, self.id, self.version, dict(self.metadata))
        elif verb == "INFO":
            record = self.info()
        else:
            record = self.stats()
        try:
            msg.respond(encode(record))
        except Error as err:  # closing meanwhile: the asker times out, as it would anyway
            log.debug("nats_sync: service %r could not answer %s: %s", self.name, verb, err)

    # --- endpoints ---------------------------------------------------------------------

    def add_endpoint(
        self,
        name: str,
        handler: RequestHandler,
        subject: str | None = None,
        queue_group: str | None = None,
        metadata: dict[str, str] | None = None,
        *,
        max_workers: int = 1,
        queue_group_disabled: bool = False,
    ) -> None:
        """Adds an endpoint and starts serving it at once.

        Args:
            name: the endpoint's name (letters, digits, ``-``, ``_``).
            handler: ``handler(request)``, answering with ``request.respond(...)`` or
                ``request.respond_error(...)``. An exception it raises is answered as
                a 500 error (a :class:`ServiceError`, with its code) and counted.
            subject: the subject to listen on (wildcards allowed); default ``name``.
            queue_group: default the service's (or the group's).
            metadata: the endpoint's metadata (str -> str).
            max_workers: handler threads; 1 keeps the requests' order, more run
                handlers concurrently.
            queue_group_disabled: subscribe without a queue group, so every instance
                of the service gets every request (ADR-32); wins over ``queue_group``.

        Raises:
            InvalidArgumentError: a bad name, subject, queue group, metadata or
                ``max_workers``, or the service is stopped.
        """
        self._add(
            "",
            name,
            handler,
            subject,
            resolve_queue_group(
                queue_group, self.queue_group, queue_group_disabled, self.queue_group_disabled
            ),
            metadata,
            max_workers,
        )

    def add_group(
        self, name: str, queue_group: str | None = None, *, queue_group_disabled: bool = False
    ) -> Group:
        """A group: endpoints added through it listen on ``<name>.<subject>``.

        Args:
            name: the subject prefix (tokens without wildcards).
            queue_group: the group's default queue group (else the service's).
            queue_group_disabled: the group's endpoints subscribe without a queue group
                unless one is given to them.

        Raises:
            InvalidArgumentError: a bad name or queue group.
        """
        check_subject(name, "group name", wildcards=False)
        group_queue = resolve_queue_group(
            queue_group, self.queue_group, queue_group_disabled, self.queue_group_disabled
        )
        return Group(self, name, group_queue or self.queue_group, not group_queue)

    def _add(
        self,
        prefix: str,
        name: str,
        handler: RequestHandler,
        subject: str | None,
        queue_group: str,
        metadata: dict[str, str] | None,
        max_workers: int,
    ) -> None:
        check_name(name, "endpoint name")
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {handler!r}")
        local = check_subject(
            subject if subject is not None else name, "endpoint subject", wildcards=True
        )
        full = f"{prefix}.{local}" if prefix else local
        if queue_group:  # "": no queue group (disabled)
            check_queue_group(queue_group, "queue_group")
        check_int(max_workers, "max_workers", 1)
        endpoint = _Endpoint(
            self,
            name,
            full,
            queue_group,
            check_metadata(metadata, "endpoint metadata"),
            handler,
            max_workers,
        )
        with self._lock:
            if self._stopped:
                raise InvalidArgumentError(f"service {self.name!r} is stopped")
            self._endpoints.append(endpoint)
        endpoint.start(self._nc)
        self._flush()

    def _flush(self) -> None:
        """Waits until the server has the new subscriptions, so a caller may use them as
        soon as this returns; offline, they are sent on reconnect, so that is no error."""
        try:
            self._nc.flush()
        except Error as err:
            log.debug("nats_sync: service %r: flush: %s", self.name, err)

    # --- monitoring --------------------------------------------------------------------

    def info(self) -> ServiceInfo:
        """What ``$SRV.INFO`` answers: the service and its endpoints."""
        with self._lock:
            endpoints = [endpoint.info() for endpoint in self._endpoints]
        return ServiceInfo(
            self.name, self.id, self.version, self.description, dict(self.metadata), endpoints
        )

    def stats(self) -> ServiceStats:
        """What ``$SRV.STATS`` answers: each endpoint's counters since the start or the
        last :meth:`reset`."""
        with self._lock:
            endpoints = [endpoint.stats() for endpoint in self._endpoints]
            started = self._started
        stats_handler = self._handlers.stats_handler
        if stats_handler is not None:
            for stats in endpoints:
                info = EndpointInfo(stats.name, stats.subject, stats.queue_group)
                try:
                    stats.data = stats_handler(info)
                except Exception:
                    log.exception(
                        "nats_sync: stats_handler of service %r raised for %r",
                        self.name,
                        stats.name,
                    )
        return ServiceStats(
            self.name, self.id, self.version, started, dict(self.metadata), endpoints
        )

    def reset(self) -> None:
        """Sets every endpoint's counters to zero and ``started`` to now."""
        with self._lock:
            for endpoint in self._endpoints:
                endpoint.reset()
            self._started = datetime.now(timezone.utc)

    # --- stopping ----------------------------------------------------------------------

    @property
    def stopped(self) -> bool:
        """Whether the service stopped (``stop()``, or its client closed)."""
        return self._stopped or self._nc.is_closed

    def stop(self, timeout: float = md.MICRO_STOP_TIMEOUT) -> None:
        """Stops serving: unsubscribes everything, then waits for running handlers.

        Requests already received are still handled (each subscription is drained);
        callers that come later get ``NoRespondersError``. Calling it again does
        nothing. Safe from a handler (it does not wait for its own thread).

        Args:
            timeout: seconds to wait for the drain and the running handlers.

        Raises:
            InvalidArgumentError: ``timeout`` is not a positive number.
        """
        check_timeout(timeout)
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            endpoints = list(self._endpoints)
        for unlisten in self._unlisten:
            unlisten()
        try:
            self._stop_serving(endpoints, timeout)
        finally:
            self._done = True
            done_handler = self._handlers.done_handler
            if done_handler is not None:
                try:
                    done_handler(self)
                except Exception:
                    log.exception("nats_sync: done_handler of service %r raised", self.name)

    def _stop_serving(self, endpoints: list[_Endpoint], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for sub in self._discovery:
            self._end(sub, None)
        for endpoint in endpoints:
            if endpoint.sub is not None:
                self._end(endpoint.sub, deadline)
        me = threading.current_thread()
        for endpoint in endpoints:
            for worker in endpoint.workers:
                if worker is not me:
                    worker.join(max(deadline - time.monotonic(), 0.0))
                    if worker.is_alive():
                        log.warning(
                            "nats_sync: service %r stopped with a handler of %r still running",
                            self.name,
                            endpoint.name,
                        )

    def _end(self, sub: Subscription, deadline: float | None) -> None:
        """Ends one subscription: drained (its queued requests answered) when it has a
        deadline, else unsubscribed; a closed client or a late drain is no failure."""
        if self._nc.is_closed:
            return
        try:
            if deadline is None:
                sub.unsubscribe()
            else:
                sub.drain(max(deadline - time.monotonic(), 0.001))
        except Error as err:
            log.debug("nats_sync: service %r: ending %r: %s", self.name, sub, err)
            try:
                sub.unsubscribe()
            except Error:
                pass

    def __enter__(self) -> Service:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "running"
        return f"<Service {self.name} {self.version} id={self.id} {state}>"


def add_service(
    nc: Client,
    name: str,
    version: str,
    description: str = "",
    metadata: dict[str, str] | None = None,
    queue_group: str = DEFAULT_QUEUE_GROUP,
    *,
    queue_group_disabled: bool = False,
    stats_handler: StatsHandler | None = None,
    error_handler: ServiceErrorHandler | None = None,
    done_handler: DoneHandler | None = None,
) -> Service:
    """Starts a service on ``nc``: it answers discovery at once; add endpoints to serve.

    Example:
        ```python
        svc = nats_sync.micro.add_service(nc, "lookup", "1.0.0")
        svc.add_endpoint("get", lambda req: req.respond(table[req.data]))
        ```

    Args:
        nc: a connected client.
        name: the service's name (letters, digits, ``-``, ``_``), shared by its
            instances.
        version: a semantic version, e.g. ``"1.0.0"``.
        description: what it does.
        metadata: str -> str, shown by discovery.
        queue_group: the queue group endpoints join unless told otherwise, so that
            instances share the load.
        queue_group_disabled: endpoints subscribe without a queue group unless one is
            given to them (every instance gets every request).
        stats_handler: ``stats_handler(endpoint)`` (an `EndpointInfo`) returns that
            endpoint's own statistics, any JSON value, sent as its ``data`` in each
            STATS reply; called on the thread answering STATS (one that raises is
            logged, and ``data`` stays null).
        error_handler: ``error_handler(service, error)`` on an asynchronous error of
            one of the service's subscriptions (a slow consumer dropping requests, a
            subscribe refused): the endpoint counts it, and the service stops after
            the call, as nats.go's micro does; called on a thread of its own.
        done_handler: ``done_handler(service)`` once the service stopped: ``stop()``
            (on the thread that called it, before it returns), an error as above, or
            the client closing (on a thread of its own).

    Raises:
        InvalidArgumentError: a bad name, version, metadata or queue group.
        ConnectionClosedError: the client is closed.
    """
    check_name(name, "service name")
    check_version(version)
    if not isinstance(description, str):
        raise InvalidArgumentError(f"description must be a str, got {description!r}")
    for what, given in (
        ("stats_handler", stats_handler),
        ("error_handler", error_handler),
        ("done_handler", done_handler),
    ):
        if given is not None and not callable(given):
            raise TypeError(f"{what} must be callable, got {given!r}")
    service = Service(
        nc,
        name,
        version,
        description,
        check_metadata(metadata, "service metadata"),
        check_queue_group(queue_group, "queue_group"),
        queue_group_disabled,
        ServiceHandlers(stats_handler, error_handler, done_handler),
    )
    service._start_discovery()
    service._flush()
    return service

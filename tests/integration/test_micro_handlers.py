"""A service's own callbacks and endpoints without a queue group (ADR-32, as nats.go's
micro), against a real nats-server: ``stats_handler`` fills each endpoint's ``data``,
``error_handler`` hears of an endpoint's subscription refused and the service stops,
``done_handler`` is called once however the service stops, and ``queue_group_disabled``
makes every instance answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync import micro
from nats_sync.errors import PermissionsViolationError
from nats_sync.micro import EndpointInfo, Request, Service
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(30)

ClientFactory = Callable[..., nats_sync.Client]


def _wait_for(check: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_stats_handler_fills_each_endpoints_data(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    asked: list[str] = []

    def own_stats(endpoint: EndpointInfo) -> object:
        asked.append(endpoint.name)
        return {"cache_hits": len(endpoint.name), "subject": endpoint.subject}

    with micro.add_service(nc, "stats-own", "1.0.0", stats_handler=own_stats) as svc:
        svc.add_endpoint("get", lambda req: req.respond(b"ok"))
        svc.add_group("admin").add_endpoint("wipe", lambda req: req.respond(b"ok"))
        replies = micro.stats(caller, "stats-own", timeout=2.0)
    assert len(replies) == 1
    data = {endpoint.name: endpoint.data for endpoint in replies[0].endpoints}
    assert data == {
        "get": {"cache_hits": 3, "subject": "get"},
        "wipe": {"cache_hits": 4, "subject": "admin.wipe"},
    }
    assert sorted(asked) == ["get", "wipe"]


def test_a_stats_handler_that_raises_leaves_data_null(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()

    def broken(endpoint: EndpointInfo) -> object:
        raise RuntimeError("no stats today")

    with micro.add_service(nc, "stats-broken", "1.0.0", stats_handler=broken) as svc:
        svc.add_endpoint("get", lambda req: req.respond(b"ok"))
        replies = micro.stats(caller, "stats-broken", timeout=2.0)
    assert [endpoint.data for endpoint in replies[0].endpoints] == [None]


def test_a_refused_endpoint_calls_error_handler_counts_it_and_stops_the_service(
    nats_server_factory: Callable[..., NatsServer], connect: ClientFactory
) -> None:
    """The server refuses the endpoint's subscription (no permission): an asynchronous
    error on one of the service's subscriptions, as a slow consumer would be."""
    server = nats_server_factory(
        config=(
            "authorization { users = [ {user: svc, password: pw, "
            'permissions: { subscribe: { deny: ["work"] } } } ] }'
        )
    )
    nc = connect(servers=server.url, user="svc", password="pw", error_cb=lambda error: None)
    heard: list[tuple[Service, BaseException]] = []
    done: list[Service] = []
    svc = micro.add_service(
        nc,
        "refused",
        "1.0.0",
        error_handler=lambda service, error: heard.append((service, error)),
        done_handler=done.append,
    )
    svc.add_endpoint("work", lambda req: req.respond(b"ok"))
    _wait_for(lambda: svc.stopped and bool(done), "the service to stop")
    service, error = heard[0]
    assert service is svc
    assert isinstance(error, PermissionsViolationError) and error.subject == "work"
    assert done == [svc]
    stats = svc.stats().endpoints[0]
    assert stats.num_errors == 1 and "work" in stats.last_error


def test_an_error_on_another_subscription_leaves_the_service_alone(
    connect: ClientFactory,
) -> None:
    nc, caller = connect(error_cb=lambda error: None), connect()
    heard: list[BaseException] = []
    svc = micro.add_service(nc, "bystander", "1.0.0", error_handler=lambda s, e: heard.append(e))
    svc.add_endpoint("get", lambda req: req.respond(b"ok"))
    other = nc.subscribe("elsewhere", pending_msgs_limit=1)
    nc.flush()  # the SUB is at the server before the other connection publishes
    for _ in range(50):
        caller.publish("elsewhere", b"x")
    caller.flush()
    _wait_for(lambda: other.dropped > 0, "the other subscription to drop")
    assert caller.request("get", b"", timeout=5).data == b"ok"
    assert heard == [] and not svc.stopped
    svc.stop()


def test_done_handler_is_called_once_by_stop(connect: ClientFactory) -> None:
    nc = connect()
    done: list[Service] = []
    svc = micro.add_service(nc, "done-once", "1.0.0", done_handler=done.append)
    svc.add_endpoint("get", lambda req: req.respond(b"ok"))
    svc.stop()
    svc.stop()
    nc.close()
    time.sleep(0.2)  # a "closed" event would call it again on a thread of its own
    assert done == [svc]


def test_done_handler_is_called_when_the_client_closes(connect: ClientFactory) -> None:
    nc = connect()
    done: list[Service] = []
    svc = micro.add_service(nc, "done-closed", "1.0.0", done_handler=done.append)
    svc.add_endpoint("get", lambda req: req.respond(b"ok"))
    nc.close()
    _wait_for(lambda: done == [svc], "done_handler after close")
    assert svc.stopped


def test_queue_group_disabled_makes_every_instance_answer(connect: ClientFactory) -> None:
    first, second, caller = connect(), connect(), connect()
    heard: list[bytes] = []
    lock = threading.Lock()

    def answer(name: bytes) -> Callable[[Request], None]:
        def handler(req: Request) -> None:
            with lock:
                heard.append(name)
            req.respond(name)

        return handler

    one = micro.add_service(first, "everyone", "1.0.0")
    two = micro.add_service(second, "everyone", "1.0.0")
    one.add_endpoint("hello", answer(b"one"), queue_group_disabled=True)
    two.add_endpoint("hello", answer(b"two"), queue_group_disabled=True)
    inbox = caller.new_inbox()
    replies = caller.subscribe(inbox)
    caller.publish("hello", b"", reply=inbox)
    got = sorted(replies.next_msg(timeout=5).data for _ in range(2))
    assert got == [b"one", b"two"]
    assert one.info().endpoints[0].queue_group == ""
    one.stop()
    two.stop()


def test_queue_group_disabled_on_a_service_and_a_group(connect: ClientFactory) -> None:
    nc = connect()
    with micro.add_service(nc, "qg-off", "1.0.0", queue_group_disabled=True) as svc:
        svc.add_endpoint("plain", lambda req: req.respond(b"ok"))
        svc.add_endpoint("shared", lambda req: req.respond(b"ok"), queue_group="workers")
        on = svc.add_group("on", queue_group="g")
        on.add_endpoint("a", lambda req: req.respond(b"ok"))
        off = svc.add_group("off", queue_group="g", queue_group_disabled=True)
        off.add_endpoint("b", lambda req: req.respond(b"ok"))
        off.add_endpoint("c", lambda req: req.respond(b"ok"), queue_group="own")
        groups = {e.name: e.queue_group for e in svc.info().endpoints}
    assert groups == {"plain": "", "shared": "workers", "a": "g", "b": "", "c": "own"}


def test_handlers_that_are_not_callable_are_refused(connect: ClientFactory) -> None:
    nc = connect()
    with pytest.raises(TypeError, match="done_handler must be callable"):
        micro.add_service(nc, "bad-handler", "1.0.0", done_handler="not a function")  # type: ignore[arg-type]

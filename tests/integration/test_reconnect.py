"""Reconnect and resilience against real servers: restarts, clusters, lame duck, stale
connections, the disconnect buffer, force_reconnect and retry_on_failed_connect."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import nats_sync
from nats_sync.testing import NatsCluster, NatsServer

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]

pytestmark = pytest.mark.timeout(60)


class Events:
    """Callback recorder: one Event per callback name, plus every error."""

    def __init__(self) -> None:
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.closed = threading.Event()
        self.discovered = threading.Event()
        self.lame_duck = threading.Event()
        self.errors: list[BaseException] = []

    def options(self) -> dict[str, Any]:
        return {
            "disconnected_cb": self.disconnected.set,
            "reconnected_cb": self.reconnected.set,
            "closed_cb": self.closed.set,
            "discovered_server_cb": self.discovered.set,
            "lame_duck_mode_cb": self.lame_duck.set,
            "error_cb": self.errors.append,
        }


def gated_delay(
    gate: threading.Event, first_pass_failed: threading.Event | None = None
) -> Callable[[int], float]:
    """A reconnect_delay_cb that holds every pass after the first until ``gate`` is set.

    The first pass starts at once; ``first_pass_failed`` (if given) is set when it has
    failed, so that a test can restart the server only then: without the GIL the test
    thread may otherwise restart it before that first pass runs, which then reconnects.
    """

    def delay(attempt: int) -> float:
        if first_pass_failed is not None:
            first_pass_failed.set()
        assert gate.wait(30), "the test never opened the reconnect gate"
        return 0.0

    return delay


def fast_delay(attempt: int) -> float:
    return 0.02


def receive(sub: nats_sync.Subscription, count: int) -> list[bytes]:
    """Exactly ``count`` payloads, then checks nothing more is there."""
    payloads = [sub.next_msg(timeout=10).data for _ in range(count)]
    with pytest.raises(nats_sync.TimeoutError):
        sub.next_msg(timeout=0.3)
    return payloads


# --- restart on the same port ----------------------------------------------------------


def test_restart_keeps_subscriptions_and_delivers_every_buffered_publish(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    receiver_events, sender_events = Events(), Events()
    receiver = connect(reconnect_delay_cb=fast_delay, **receiver_events.options())
    sub = receiver.subscribe("r.data", pending_msgs_limit=100_000)
    receiver.flush()
    gate, first_pass_failed = threading.Event(), threading.Event()
    sender = connect(
        reconnect_delay_cb=gated_delay(gate, first_pass_failed), **sender_events.options()
    )

    nats_server.kill()
    assert sender_events.disconnected.wait(10) and receiver_events.disconnected.wait(10)
    assert sender.is_reconnecting
    sent = [b"%06d" % n for n in range(2_000)]
    for payload in sent:
        sender.publish("r.data", payload)  # buffered in the outbox
    assert sender.pending_data_size > 0

    assert first_pass_failed.wait(10)  # the sender now waits for the gate
    nats_server.start()
    assert receiver_events.reconnected.wait(15), "the receiver never reconnected"
    receiver.flush()  # its SUB is replayed before the sender's buffer flows
    gate.set()
    assert sender_events.reconnected.wait(15), "the sender never reconnected"
    sender.flush()

    assert receive(sub, len(sent)) == sent  # all of them, once, in order
    assert sender.stats["reconnects"] == 1 and receiver.stats["reconnects"] == 1
    sender.publish("r.data", b"after")
    assert sub.next_msg(timeout=5).data == b"after"


def test_a_full_disconnect_buffer_raises_and_keeps_what_it_holds(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    receiver_events, sender_events = Events(), Events()
    receiver = connect(reconnect_delay_cb=fast_delay, **receiver_events.options())
    sub = receiver.subscribe("r.overflow")
    receiver.flush()
    gate, first_pass_failed = threading.Event(), threading.Event()
    sender = connect(
        pending_size=1_000,
        reconnect_delay_cb=gated_delay(gate, first_pass_failed),
        **sender_events.options(),
    )
    nats_server.kill()
    assert sender_events.disconnected.wait(10)
    accepted: list[bytes] = []
    with pytest.raises(nats_sync.OutboundBufferLimitError):
        for n in range(1_000):
            payload = b"%04d" % n
            sender.publish("r.overflow", payload)
            accepted.append(payload)
    assert 10 < len(accepted) < 100  # ~30-byte frames in a 1,000-byte buffer

    assert first_pass_failed.wait(10)  # the sender now waits for the gate
    nats_server.start()
    assert receiver_events.reconnected.wait(15)
    receiver.flush()
    gate.set()
    assert sender_events.reconnected.wait(15)
    sender.flush()
    assert receive(sub, len(accepted)) == accepted


def test_pending_size_zero_refuses_publishes_while_disconnected(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    events = Events()
    gate = threading.Event()
    nc = connect(pending_size=0, reconnect_delay_cb=gated_delay(gate), **events.options())
    nc.publish("r.zero", b"connected: fine")
    nc.flush()
    nats_server.kill()
    assert events.disconnected.wait(10)
    with pytest.raises(nats_sync.OutboundBufferLimitError):
        nc.publish("r.zero", b"x")
    gate.set()


def test_auto_unsubscribe_is_replayed_with_what_is_left(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    events = Events()
    nc = connect(reconnect_delay_cb=fast_delay, **events.options())
    sub = nc.subscribe("r.limit", max_msgs=5)
    done = nc.subscribe("r.done", max_msgs=1)
    other = connect()
    for n in range(3):
        other.publish("r.limit", b"%d" % n)
    other.publish("r.done", b"only")
    other.flush()
    assert [sub.next_msg(5).data for _ in range(3)] == [b"0", b"1", b"2"]
    assert done.next_msg(5).data == b"only"

    nats_server.kill()
    assert events.disconnected.wait(10)
    nats_server.start()
    assert events.reconnected.wait(15)
    nc.flush()
    other = connect()
    for n in range(3, 10):
        other.publish("r.limit", b"%d" % n)
    other.flush()
    assert [msg.data for msg in sub] == [b"3", b"4"]  # 5 in total, then it ends
    assert done.is_closed


# --- giving up -----------------------------------------------------------------------


def test_max_reconnect_attempts_then_closed_with_last_error(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    events = Events()
    attempts: list[int] = []

    def delay(attempt: int) -> float:
        attempts.append(attempt)
        return 0.01

    nc = connect(max_reconnect_attempts=2, reconnect_delay_cb=delay, **events.options())
    nats_server.kill()
    assert events.closed.wait(15), "the client never gave up"
    assert nc.is_closed and not nc.is_reconnecting
    assert isinstance(nc.last_error, nats_sync.NoServersError)
    assert attempts == [1]  # two passes over the one server, one wait between them
    with pytest.raises(nats_sync.ConnectionClosedError):
        nc.publish("r.x", b"")


def test_allow_reconnect_false_closes_on_the_first_loss(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    events = Events()
    nc = connect(allow_reconnect=False, **events.options())
    nats_server.kill()
    assert events.closed.wait(10)
    assert events.disconnected.is_set() and not events.reconnected.is_set()
    assert nc.is_closed


def test_close_while_reconnecting_stops_the_reconnect_thread(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    events = Events()
    nc = connect(reconnect_time_wait=30.0, **events.options())
    nats_server.kill()
    assert events.disconnected.wait(10)
    waiting_flush: list[BaseException] = []

    def flush() -> None:
        try:
            nc.flush(timeout=30)
        except BaseException as err:
            waiting_flush.append(err)

    flusher = threading.Thread(target=flush)
    flusher.start()
    time.sleep(0.2)
    nc.close()
    flusher.join(10)
    assert not flusher.is_alive()
    assert len(waiting_flush) == 1
    assert isinstance(waiting_flush[0], nats_sync.ConnectionClosedError)
    assert events.closed.wait(5)
    # the autouse fixture checks that the reconnect thread is gone


def test_drain_while_reconnecting_is_refused_and_leaves_the_client_usable(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    """As nats.go and nats-py: draining needs the server's answers, so it is refused
    while reconnecting instead of racing the reconnect."""
    events = Events()
    nc = connect(reconnect_time_wait=0.05, **events.options())
    sub = nc.subscribe("drain.while.down")
    nats_server.kill()
    assert events.disconnected.wait(10)
    with pytest.raises(nats_sync.ConnectionReconnectingError):
        nc.drain(timeout=5)
    assert nc.is_reconnecting
    nats_server.restart()
    assert events.reconnected.wait(10)
    nc.publish("drain.while.down", b"after")
    assert sub.next_msg(timeout=5).data == b"after"
    nc.drain(timeout=5)
    assert nc.is_closed


def test_a_flush_waiting_across_the_outage_completes_after_reconnect(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    events = Events()
    gate = threading.Event()
    nc = connect(reconnect_delay_cb=gated_delay(gate), **events.options())
    nats_server.kill()
    assert events.disconnected.wait(10)
    outcome: list[BaseException | None] = []

    def flush() -> None:
        try:
            nc.flush(timeout=30)
            outcome.append(None)
        except BaseException as err:
            outcome.append(err)

    flusher = threading.Thread(target=flush)
    flusher.start()
    nats_server.start()
    gate.set()
    flusher.join(20)
    assert outcome == [None]
    assert nc.is_connected


# --- clusters ---------------------------------------------------------------------------


def test_servers_are_discovered_and_failover_keeps_subscriptions(
    nats_cluster: NatsCluster, connect: ClientFactory
) -> None:
    first, second, third = nats_cluster.servers
    events = Events()
    nc = connect(servers=first.url, reconnect_delay_cb=fast_delay, **events.options())
    assert sorted(nc.discovered_servers) == sorted([second.url, third.url])
    sub = nc.subscribe("c.fail")
    nc.flush()

    started = time.monotonic()
    first.kill()
    assert events.reconnected.wait(10), "the client did not move to another node"
    recovered = time.monotonic() - started
    assert nc.connected_url in (second.url, third.url)
    nc.flush()
    other = connect(servers=third.url)
    deadline = time.monotonic() + 10
    while True:  # interest crosses the route asynchronously
        other.publish("c.fail", b"ping")
        other.flush()
        try:
            assert sub.next_msg(timeout=0.2).data == b"ping"
            break
        except nats_sync.TimeoutError:
            assert time.monotonic() < deadline, "the subscription did not survive failover"
    assert recovered < 10


def test_a_new_cluster_member_is_announced(
    nats_cluster: NatsCluster, connect: ClientFactory
) -> None:
    events = Events()
    nc = connect(servers=nats_cluster.servers[0].url, **events.options())
    seed = f"nats://127.0.0.1:{nats_cluster.servers[0].cluster_port}"
    args = [
        "--cluster_name",
        nats_cluster.name,
        "--cluster",
        "nats://127.0.0.1:-1",
        "--routes",
        seed,
    ]
    with NatsServer(args=args) as extra:
        assert events.discovered.wait(15), "discovered_server_cb never ran"
        # The first announcement may be of the cluster's other members (gossip can reach
        # the client after it connected); the new server's comes by itself soon after.
        deadline = time.monotonic() + 15
        while extra.url not in nc.discovered_servers and time.monotonic() < deadline:
            time.sleep(0.01)
        assert extra.url in nc.discovered_servers


def test_ignore_discovered_servers(nats_cluster: NatsCluster, connect: ClientFactory) -> None:
    nc = connect(servers=nats_cluster.servers[0].url, ignore_discovered_servers=True)
    assert nc.discovered_servers == []
    assert nc.servers == [nats_cluster.servers[0].url]


def test_lame_duck_mode_moves_the_client_to_another_node(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    # A short grace period: the server announces lame duck mode at once.
    seed = nats_server_factory(
        config='lame_duck_grace_period: "200ms"',
        args=["--cluster_name", "ldm", "--cluster", "nats://127.0.0.1:-1"],
    )
    peer = nats_server_factory(
        args=[
            "--cluster_name",
            "ldm",
            "--cluster",
            "nats://127.0.0.1:-1",
            "--routes",
            f"nats://127.0.0.1:{seed.cluster_port}",
        ],
    )
    events = Events()
    nc = connect(
        servers=[seed.url, peer.url],
        dont_randomize=True,
        reconnect_delay_cb=fast_delay,
        **events.options(),
    )
    assert nc.connected_url == seed.url
    seed.signal_lame_duck()
    assert events.lame_duck.wait(10), "lame_duck_mode_cb never ran"
    assert events.reconnected.wait(10), "the client stayed on the lame duck server"
    assert nc.connected_url == peer.url
    nc.flush()


def test_a_paused_server_is_detected_stale_and_left_for_another_node(
    nats_cluster: NatsCluster, connect: ClientFactory
) -> None:
    first = nats_cluster.servers[0]
    events = Events()
    nc = connect(
        servers=first.url,
        ping_interval=0.2,
        max_outstanding_pings=2,
        reconnect_delay_cb=fast_delay,
        **events.options(),
    )
    with first.paused():
        assert events.reconnected.wait(10), "a stale connection was not replaced"
        assert nc.connected_url != first.url
        assert any(isinstance(e, nats_sync.StaleConnectionError) for e in events.errors)
        nc.flush(timeout=5)


# --- on demand and in the background ---------------------------------------------------


def test_force_reconnect_keeps_subscriptions_and_buffered_publishes(
    nats_server: NatsServer, connect: ClientFactory
) -> None:
    events = Events()
    nc = connect(**events.options())
    sub = nc.subscribe("f.data")
    nc.flush()
    nc.force_reconnect()
    for n in range(100):
        nc.publish("f.data", b"%03d" % n)
    assert events.reconnected.wait(10)
    nc.flush()
    assert receive(sub, 100) == [b"%03d" % n for n in range(100)]
    assert nc.stats["reconnects"] == 1
    assert not any(isinstance(e, nats_sync.Error) for e in events.errors), events.errors


def test_retry_on_failed_connect_returns_at_once_and_connects_later(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory()
    port = server.port
    server.kill()
    events = Events()
    gate = threading.Event()
    nc = connect(
        servers=f"nats://127.0.0.1:{port}",
        retry_on_failed_connect=True,
        reconnect_delay_cb=gated_delay(gate),
        **events.options(),
    )
    assert nc.is_reconnecting and not nc.is_connected
    sub = nc.subscribe("late.data")
    nc.publish("late.data", b"buffered before any connection")
    server.start()
    gate.set()
    assert events.reconnected.wait(15)
    nc.flush()
    assert sub.next_msg(timeout=5).data == b"buffered before any connection"


def test_without_retry_on_failed_connect_a_dead_pool_raises(
    nats_server_factory: ServerFactory,
) -> None:
    server = nats_server_factory()
    url = server.url
    server.kill()
    with pytest.raises(nats_sync.NoServersError) as caught:
        nats_sync.connect(url, connect_timeout=1.0)
    assert caught.value.__cause__ is not None


# --- server errors ----------------------------------------------------------------------

PERMISSIONS = """
authorization {
  users = [
    {user: limited, password: secret, permissions: {
      publish: {allow: ["ok.>", "_INBOX.>"]},
      subscribe: {allow: ["ok.>", "_INBOX.>"]}
    }}
  ]
}
"""


def test_subscribe_permission_violation_ends_that_subscription_only(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(config=PERMISSIONS)
    events = Events()
    nc = connect(servers=server.url, user="limited", password="secret", **events.options())
    allowed = nc.subscribe("ok.data")
    denied = nc.subscribe("denied.data")
    with pytest.raises(nats_sync.PermissionsViolationError) as caught:
        denied.next_msg(timeout=5)
    assert caught.value.operation == "subscription" and caught.value.subject == "denied.data"
    assert denied.is_closed
    deadline = time.monotonic() + 5  # error_cb runs on the callback thread
    while not any(isinstance(e, nats_sync.PermissionsViolationError) for e in events.errors):
        assert time.monotonic() < deadline, events.errors
        time.sleep(0.01)
    nc.publish("ok.data", b"still fine")
    assert allowed.next_msg(timeout=5).data == b"still fine"
    assert nc.is_connected


def test_publish_permission_violation_reports_and_fails_the_request_at_once(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(config=PERMISSIONS)
    events = Events()
    nc = connect(servers=server.url, user="limited", password="secret", **events.options())
    nc.publish("denied.pub", b"x")
    nc.flush()
    deadline = time.monotonic() + 5
    while not events.errors:
        assert time.monotonic() < deadline, "no permissions error reached error_cb"
        time.sleep(0.01)
    error = events.errors[0]
    assert isinstance(error, nats_sync.PermissionsViolationError)
    assert (error.operation, error.subject) == ("publish", "denied.pub")

    started = time.monotonic()
    with pytest.raises(nats_sync.PermissionsViolationError):
        nc.request("denied.req", b"?", timeout=20)
    assert time.monotonic() - started < 10  # failed by the -ERR, not by the 20 s timeout
    assert nc.is_connected


def test_credentials_refused_twice_on_every_server_close_the_client(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    auth = "authorization {{ user: app, password: {} }}"
    server = nats_server_factory(config=auth.format("first"))
    events = Events()
    nc = connect(
        servers=server.url,
        user="app",
        password="first",
        reconnect_delay_cb=fast_delay,
        **events.options(),
    )
    server.reload(config=auth.format("second"))  # the server drops the old credentials
    assert events.closed.wait(20), "the client kept retrying credentials that cannot work"
    assert isinstance(nc.last_error, nats_sync.AuthorizationError)
    refused = [e for e in events.errors if isinstance(e, nats_sync.AuthorizationError)]
    assert len(refused) >= 2
    assert "second" not in str(refused) and "first" not in str(refused)


def test_ignore_auth_error_abort_keeps_trying_until_the_credentials_work_again(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    auth = "authorization {{ user: app, password: {} }}"
    server = nats_server_factory(config=auth.format("first"))
    events = Events()
    nc = connect(
        servers=server.url,
        user="app",
        password="first",
        ignore_auth_error_abort=True,
        reconnect_delay_cb=fast_delay,
        **events.options(),
    )
    server.reload(config=auth.format("second"))
    deadline = time.monotonic() + 20
    while sum(isinstance(e, nats_sync.AuthorizationError) for e in events.errors) < 3:
        assert time.monotonic() < deadline, events.errors
        time.sleep(0.02)
    assert not nc.is_closed
    server.reload(config=auth.format("first"))
    assert events.reconnected.wait(20)
    nc.flush()


def test_force_reconnect_is_refused_when_reconnecting_is_not_allowed(
    connect: ClientFactory,
) -> None:
    nc = connect(allow_reconnect=False)
    with pytest.raises(nats_sync.Error, match="allow_reconnect"):
        nc.force_reconnect()
    assert nc.is_connected

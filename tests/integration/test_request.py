"""Request-reply against a real nats-server: request, request_future, request_batch."""

from __future__ import annotations

import builtins
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

import nats_sync
from nats_sync._core import proto
from nats_sync.msg import Msg
from nats_sync.pytest_plugin import ServerFactory
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]


def _echo_responder(nc: nats_sync.Client, subject: str, prefix: bytes = b"") -> None:
    """Subscribes ``nc`` to ``subject`` with a callback answering ``prefix + data``."""
    nc.subscribe(subject, cb=lambda msg: msg.respond(prefix + msg.data))
    nc.flush(5)


def _mux_size(nc: nats_sync.Client) -> int:
    """Requests the client's multiplexer still holds a waiter for."""
    snapshot = nc._handler.debug_snapshot()
    assert snapshot["request_inbox"] is not None, "the client has made no request yet"
    return int(snapshot["requests_in_flight"])


@pytest.mark.timeout(20)
def test_request_returns_the_reply(client: nats_sync.Client, connect: ClientFactory) -> None:
    _echo_responder(connect(), "svc.echo", b"re:")

    reply = client.request("svc.echo", b"hello", timeout=5)

    assert isinstance(reply, Msg)
    assert reply.data == b"re:hello"
    assert reply.subject.startswith("_INBOX.")
    assert reply.status is None


@pytest.mark.timeout(20)
def test_request_without_responders_raises_at_once(client: nats_sync.Client) -> None:
    start = time.monotonic()
    with pytest.raises(nats_sync.NoRespondersError):
        client.request("nobody.listens.here", b"ping", timeout=5)
    elapsed = time.monotonic() - start
    # A behaviour check: the 503 comes back on the round trip, not when the timeout ends.
    assert elapsed < 2, f"NoRespondersError took {elapsed:.2f}s with timeout=5"
    assert _mux_size(client) == 0


@pytest.mark.timeout(20)
def test_request_times_out_when_the_responder_never_answers(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    responder = connect()
    silent = responder.subscribe("svc.silent")
    responder.flush(5)

    with pytest.raises(nats_sync.TimeoutError) as info:
        client.request("svc.silent", b"anyone?", timeout=0.3)

    assert isinstance(info.value, builtins.TimeoutError)
    assert not isinstance(info.value, nats_sync.NoRespondersError)
    assert silent.next_msg(5).data == b"anyone?", "the request did reach the responder"
    with pytest.raises(builtins.TimeoutError):
        client.request("svc.silent", b"again", timeout=0.2)


@pytest.mark.timeout(20)
def test_late_reply_to_a_timed_out_request_is_dropped_and_not_kept(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    responder = connect()
    slow = responder.subscribe("svc.late")
    responder.flush(5)

    with pytest.raises(nats_sync.TimeoutError):
        client.request("svc.late", b"late", timeout=0.3)
    assert _mux_size(client) == 0, "the timed-out request left its waiter behind"

    request = slow.next_msg(5)
    request.respond(b"too late")
    responder.flush(5)
    client.flush(5)  # the late reply has reached the client's reader by now

    snapshot = client._handler.debug_snapshot()
    assert snapshot["requests_in_flight"] == 0
    assert snapshot["late_replies"] == 1
    # The request path still works after the dropped reply.
    _echo_responder(responder, "svc.fine")
    assert client.request("svc.fine", b"ok", timeout=5).data == b"ok"
    assert _mux_size(client) == 0


@pytest.mark.timeout(20)
def test_request_headers_round_trip(client: nats_sync.Client, connect: ClientFactory) -> None:
    responder = connect()

    def answer(msg: Msg) -> None:
        assert msg.headers is not None
        headers: dict[str, str | list[str]] = dict(msg.headers)
        headers["Seen-By"] = "responder"
        msg.respond(msg.data[::-1], headers=headers)

    responder.subscribe("svc.headers", cb=answer)
    responder.flush(5)

    reply = client.request(
        "svc.headers", b"abc", timeout=5, headers={"Trace-Id": "t-1", "Multi": ["1", "2"]}
    )

    assert reply.data == b"cba"
    assert reply.headers == {"Trace-Id": "t-1", "Multi": ["1", "2"], "Seen-By": "responder"}


@pytest.mark.timeout(20)
def test_request_future_resolves_to_the_reply(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _echo_responder(connect(), "svc.future", b"f:")

    futures = [client.request_future("svc.future", str(i).encode(), timeout=5) for i in range(10)]

    assert all(isinstance(future, Future) for future in futures)
    replies = [future.result(timeout=5) for future in futures]
    assert all(isinstance(reply, Msg) for reply in replies)
    assert [reply.data for reply in replies] == [f"f:{i}".encode() for i in range(10)]
    assert _mux_size(client) == 0


@pytest.mark.timeout(20)
def test_request_future_fails_with_no_responders_and_timeout(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    responder = connect()
    responder.subscribe("svc.mute")
    responder.flush(5)

    nobody = client.request_future("nobody.here", b"", timeout=5)
    mute = client.request_future("svc.mute", b"", timeout=0.3)

    assert isinstance(nobody.exception(timeout=2), nats_sync.NoRespondersError)
    error = mute.exception(timeout=5)
    assert isinstance(error, nats_sync.TimeoutError)
    assert isinstance(error, builtins.TimeoutError)
    assert _mux_size(client) == 0


@pytest.mark.timeout(20)
def test_request_future_fails_with_connection_closed_on_close(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    responder = connect()
    silent = responder.subscribe("svc.never")
    responder.flush(5)
    future = client.request_future("svc.never", b"", timeout=30)
    called = threading.Event()
    future.add_done_callback(lambda _: called.set())
    silent.next_msg(5)

    client.close()

    assert isinstance(future.exception(timeout=5), nats_sync.ConnectionClosedError)
    assert called.wait(5), "a done-callback added before close did not run"


@pytest.mark.timeout(20)
def test_request_future_done_callbacks_run_when_added_late(client: nats_sync.Client) -> None:
    future = client.request_future("nobody.home", b"", timeout=5)
    assert isinstance(future.exception(timeout=5), nats_sync.NoRespondersError)

    while_open = threading.Event()
    future.add_done_callback(lambda _: while_open.set())
    assert while_open.wait(5), "a done-callback added to a done future did not run"

    client.close()
    after_close = threading.Event()
    future.add_done_callback(lambda _: after_close.set())
    # concurrent.futures runs a callback added to a done future at once; a closed
    # client has no callback thread left, but the callback must still run.
    assert after_close.wait(5), "a done-callback added after close() never ran"


@pytest.mark.timeout(20)
def test_request_batch_mixes_replies_and_errors_in_input_order(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    # The responder answers payloads starting with b"ok" and ignores the rest, and the
    # server removes its interest after 4 messages (max_msgs): requests 5 and 6 then
    # find no responder at all. One batch thus holds all three outcomes.
    responder = connect()

    def answer(msg: Msg) -> None:
        if msg.data.startswith(b"ok"):
            msg.respond(b"re:" + msg.data)

    responder.subscribe("svc.mixed", cb=answer, max_msgs=4)
    responder.flush(5)
    payloads = [b"ok-0", b"drop-1", b"ok-2", b"drop-3", b"ok-4", b"drop-5"]

    results = client.request_batch("svc.mixed", payloads, timeout=1.0)

    assert len(results) == len(payloads)
    first, second, third, fourth, fifth, sixth = results
    assert isinstance(first, Msg) and first.data == b"re:ok-0"
    assert isinstance(second, nats_sync.TimeoutError)
    assert isinstance(third, Msg) and third.data == b"re:ok-2"
    assert isinstance(fourth, nats_sync.TimeoutError)
    assert isinstance(fifth, nats_sync.NoRespondersError)
    assert isinstance(sixth, nats_sync.NoRespondersError)
    assert _mux_size(client) == 0


@pytest.mark.timeout(20)
def test_request_batch_to_a_subject_without_responders_never_raises(
    client: nats_sync.Client,
) -> None:
    results = client.request_batch("nobody.at.all", [b"a", b"b", b"c"], timeout=5)

    assert len(results) == 3
    assert all(isinstance(result, nats_sync.NoRespondersError) for result in results)


@pytest.mark.timeout(20)
def test_request_batch_reports_a_payload_too_large_as_that_items_error(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _echo_responder(connect(), "svc.sizes")
    too_big = b"x" * (client.max_payload + 1)

    results = client.request_batch("svc.sizes", [b"small", too_big, b"tiny"], timeout=5)

    first, second, third = results
    assert isinstance(first, Msg) and first.data == b"small"
    assert isinstance(second, nats_sync.MaxPayloadError)
    assert isinstance(third, Msg) and third.data == b"tiny"
    assert _mux_size(client) == 0


@pytest.mark.timeout(20)
def test_request_batch_with_a_payload_of_the_wrong_type_leaks_no_request(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    _echo_responder(connect(), "svc.types")
    payloads: list[Any] = [b"a", "not bytes", b"c"]

    try:
        results = client.request_batch("svc.types", payloads, timeout=2)
    except TypeError:
        pass  # refusing a programming error outright is acceptable ...
    else:  # ... and so is reporting it as that item's failure.
        assert isinstance(results[0], Msg) and results[0].data == b"a"
        assert isinstance(results[1], TypeError)
        assert isinstance(results[2], Msg) and results[2].data == b"c"

    # Either way nothing may stay registered once the replies to what was sent came
    # back: a request nobody will ever settle is a leak that grows with every batch.
    deadline = time.monotonic() + 3
    while _mux_size(client) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _mux_size(client) == 0


@pytest.mark.timeout(20)
def test_request_batch_keeps_at_most_max_in_flight_requests(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    responder = connect()
    in_flight_seen: list[int] = []

    def answer(msg: Msg) -> None:
        # The requester registers a request before sending it and forgets it once the
        # reply came, so its multiplexer size is the number of requests in flight.
        in_flight_seen.append(_mux_size(client))
        msg.respond(msg.data)

    responder.subscribe("svc.window", cb=answer)
    responder.flush(5)
    payloads = [f"req-{i}".encode() for i in range(60)]

    results = client.request_batch("svc.window", payloads, timeout=5, max_in_flight=4)

    assert [r.data if isinstance(r, Msg) else r for r in results] == payloads
    assert len(in_flight_seen) == 60
    assert 1 <= max(in_flight_seen) <= 4
    assert _mux_size(client) == 0


@pytest.mark.timeout(20)
def test_status_messages_expose_status_and_description(
    client: nats_sync.Client, nats_server: NatsServer
) -> None:
    inbox = client.new_inbox()
    sub = client.subscribe(inbox)
    client.flush(5)

    # 503: the server's answer to a publish with a reply subject that nobody hears.
    client.publish("nobody.listens", b"", reply=inbox)
    no_responders = sub.next_msg(5)
    assert no_responders.status == 503
    assert no_responders.is_no_responders
    assert no_responders.data == b""

    # A status line with a description, sent by a raw client as a header block.
    with socket.create_connection(("127.0.0.1", nats_server.port), timeout=5) as raw:
        raw.sendall(proto.encode_connect(proto.connect_fields(version="raw")))
        block = b"NATS/1.0 408 Request Timeout\r\n\r\n"
        raw.sendall(
            f"HPUB {inbox} {len(block)} {len(block)}\r\n".encode() + block + b"\r\n" + proto.PING
        )
        assert b"PONG" in _read_until(raw, b"PONG")

    timeout_status = sub.next_msg(5)
    assert timeout_status.status == 408
    assert timeout_status.description == "Request Timeout"
    assert not timeout_status.is_no_responders


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        try:
            chunk = sock.recv(65536)
        except OSError as err:  # say what came before, which the raise would lose
            raise type(err)(f"{err} before {marker!r} arrived; read: {data[-200:]!r}") from err
        assert chunk, f"the server closed the connection before {marker!r}; read: {data!r}"
        data += chunk
    return data


@pytest.mark.timeout(30)
def test_many_requests_share_one_inbox_subscription(
    nats_server_factory: ServerFactory, connect: ClientFactory
) -> None:
    server = nats_server_factory(monitoring=True)
    _echo_responder(connect(servers=server.url, name="responder"), "svc.one")
    requester = connect(servers=server.url, name="requester")

    for i in range(20):
        assert requester.request("svc.one", str(i).encode(), timeout=5).data == str(i).encode()
    futures = [requester.request_future("svc.one", b"f", timeout=5) for _ in range(20)]
    for future in futures:
        assert future.result(timeout=5).data == b"f"
    batch = requester.request_batch("svc.one", [b"b"] * 20, timeout=5)
    assert all(isinstance(result, Msg) for result in batch)
    requester.flush(5)

    connz = server.monitor("connz?subs=1")
    (conn,) = [c for c in connz["connections"] if c.get("name") == "requester"]
    assert conn["subscriptions"] == 1
    (inbox_subject,) = conn["subscriptions_list"]
    assert inbox_subject.startswith("_INBOX.") and inbox_subject.endswith(".*")
    assert requester._handler.debug_snapshot()["subscriptions"] == 0, (
        "the inbox is not a user subscription"
    )


@pytest.mark.timeout(20)
def test_request_is_answered_while_another_waits(
    client: nats_sync.Client, connect: ClientFactory
) -> None:
    # Two blocking requests from two threads on one client: each gets its own reply.
    responder = connect()
    slow_requests = responder.subscribe("svc.slow")
    _echo_responder(responder, "svc.fast")
    outcome: list[Msg | BaseException] = []

    def wait_for_slow() -> None:
        try:
            outcome.append(client.request("svc.slow", b"slow", timeout=10))
        except BaseException as err:
            outcome.append(err)

    thread = threading.Thread(target=wait_for_slow)
    thread.start()
    pending = slow_requests.next_msg(5)
    assert client.request("svc.fast", b"fast", timeout=5).data == b"fast"
    pending.respond(b"slow reply")
    thread.join(5)

    assert not thread.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], Msg) and outcome[0].data == b"slow reply"

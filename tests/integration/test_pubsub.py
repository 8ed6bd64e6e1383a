"""Publishing and subscribing against a real nats-server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]
ServerFactory = Callable[..., NatsServer]


def collect(sub: nats_sync.Subscription, count: int, timeout: float = 5.0) -> list[nats_sync.Msg]:
    """Reads exactly ``count`` messages (each within ``timeout``)."""
    return [sub.next_msg(timeout=timeout) for _ in range(count)]


def test_plain_pub_sub(client: nats_sync.Client) -> None:
    sub = client.subscribe("greet.joe")
    client.publish("greet.joe", b"hello")
    client.publish("greet.other", b"not for joe")
    client.publish("greet.joe", b"again")
    client.flush(timeout=5)
    first, second = collect(sub, 2)
    assert (first.subject, first.data, first.reply, first.headers) == (
        "greet.joe",
        b"hello",
        "",
        None,
    )
    assert first.sid == sub.sid
    assert second.data == b"again"
    assert sub.pending_msgs == 0


def test_publish_accepts_bytearray_and_memoryview(client: nats_sync.Client) -> None:
    sub = client.subscribe("kinds")
    client.publish("kinds", bytearray(b"ba"))  # type: ignore[arg-type]
    client.publish("kinds", memoryview(b"xmvx")[1:3])  # type: ignore[arg-type]
    got = collect(sub, 2)
    assert [m.data for m in got] == [b"ba", b"mv"]
    assert all(type(m.data) is bytes for m in got)


def test_publish_str_payload_is_a_type_error(client: nats_sync.Client) -> None:
    with pytest.raises(TypeError, match="encode"):
        client.publish("kinds", "text")  # type: ignore[arg-type]


def test_star_wildcard(client: nats_sync.Client) -> None:
    sub = client.subscribe("wild.*.end")
    for subject in ("wild.a.end", "wild.b.end", "wild.a.b.end", "wild.end", "wild.c.other"):
        client.publish(subject, subject.encode())
    client.flush(timeout=5)
    assert [m.subject for m in collect(sub, 2)] == ["wild.a.end", "wild.b.end"]
    assert sub.pending_msgs == 0


def test_full_wildcard(client: nats_sync.Client) -> None:
    sub = client.subscribe("tree.>")
    for subject in ("tree.a", "tree.a.b.c", "tree", "other.a", "tree.z"):
        client.publish(subject, b"")
    client.flush(timeout=5)
    assert [m.subject for m in collect(sub, 3)] == ["tree.a", "tree.a.b.c", "tree.z"]
    assert sub.pending_msgs == 0


def test_wildcard_and_plain_subscriptions_both_get_the_message(client: nats_sync.Client) -> None:
    plain = client.subscribe("both.x")
    wild = client.subscribe("both.*")
    client.publish("both.x", b"1")
    assert plain.next_msg(timeout=5).sid == plain.sid
    assert wild.next_msg(timeout=5).sid == wild.sid
    assert plain.sid != wild.sid


@pytest.mark.timeout(30)
def test_queue_group_shares_messages_without_loss_or_doubles(client: nats_sync.Client) -> None:
    members = [client.subscribe("work", queue="workers") for _ in range(2)]
    outsider = client.subscribe("work")
    sent = {f"job-{index}".encode() for index in range(1000)}
    for payload in sorted(sent):
        client.publish("work", payload)
    client.flush(timeout=10)
    counts = [member.pending_msgs for member in members]
    assert sum(counts) == 1000
    assert all(count > 0 for count in counts), counts
    got: list[bytes] = []
    for member, count in zip(members, counts, strict=True):
        got += [m.data for m in collect(member, count)]
        assert member.pending_msgs == 0
    assert len(got) == 1000
    assert set(got) == sent
    assert outsider.pending_msgs == 1000, "a plain subscription gets every message"
    assert all(member.queue == "workers" for member in members)


def test_headers_round_trip_with_repeated_keys(client: nats_sync.Client) -> None:
    sub = client.subscribe("hdr")
    headers = {"X-One": "1", "X-Many": ["a", "b", "c"], "Empty-Value": ""}
    client.publish("hdr", b"body", headers=headers)
    msg = sub.next_msg(timeout=5)
    assert msg.data == b"body"
    assert msg.headers is not None
    assert msg.headers["X-One"] == "1"
    assert msg.headers["X-Many"] == ["a", "b", "c"]
    assert msg.headers.get("Empty-Value") == ""
    assert msg.status is None


def test_headers_with_empty_payload_and_list_of_one(client: nats_sync.Client) -> None:
    sub = client.subscribe("hdr.one")
    client.publish("hdr.one", headers={"K": ["only"], "Tuple": ("x", "y")})
    msg = sub.next_msg(timeout=5)
    assert msg.data == b""
    assert msg.headers == {"K": "only", "Tuple": ["x", "y"]}


def test_bad_header_raises_before_sending(client: nats_sync.Client) -> None:
    sub = client.subscribe("hdr.bad")
    with pytest.raises(nats_sync.BadHeaderError):
        client.publish("hdr.bad", b"x", headers={"Bad:Name": "v"})
    with pytest.raises(nats_sync.BadHeaderError):
        client.publish("hdr.bad", b"x", headers={"K": "line\r\nbreak"})
    client.publish("hdr.bad", b"ok")
    assert sub.next_msg(timeout=5).data == b"ok"
    assert sub.pending_msgs == 0


def test_binary_payloads(client: nats_sync.Client) -> None:
    sub = client.subscribe("bin")
    every_byte = bytes(range(256))
    payloads = [
        b"\r\n",
        b"MSG fake 1 3\r\nabc\r\n",
        every_byte,
        every_byte * 64 + b"\r\n",
        b"\x00" * 10,
        b"PING\r\nPONG\r\n",
    ]
    for payload in payloads:
        client.publish("bin", payload)
    client.publish("bin", every_byte, headers={"K": "v"})
    assert [m.data for m in collect(sub, len(payloads))] == payloads
    with_headers = sub.next_msg(timeout=5)
    assert with_headers.data == every_byte
    assert with_headers.headers == {"K": "v"}


def test_empty_payload(client: nats_sync.Client) -> None:
    sub = client.subscribe("empty")
    client.publish("empty")
    client.publish("empty", b"")
    first, second = collect(sub, 2)
    assert first.data == second.data == b""
    assert sub.pending_bytes == 0


@pytest.mark.timeout(30)
def test_one_mebibyte_payload(client: nats_sync.Client) -> None:
    sub = client.subscribe("big")
    payload = bytes(range(256)) * 4096
    assert len(payload) == 1024 * 1024 == client.max_payload
    client.publish("big", payload)
    client.publish("big", b"after")
    got = sub.next_msg(timeout=10)
    assert len(got.data) == len(payload)
    assert got.data == payload
    assert sub.next_msg(timeout=5).data == b"after"


def test_max_payload_error_before_sending(nats_server_factory: ServerFactory) -> None:
    server = nats_server_factory(config="max_payload: 1024")
    errors: list[BaseException] = []
    with nats_sync.connect(server.url, error_cb=errors.append) as nc:
        sub = nc.subscribe("limit")
        with pytest.raises(nats_sync.MaxPayloadError) as caught:
            nc.publish("limit", b"x" * 1025)
        assert "1024" in str(caught.value)
        assert isinstance(caught.value, ValueError)
        with pytest.raises(nats_sync.MaxPayloadError):
            nc.publish("limit", b"x" * 1000, headers={"Padding": "p" * 100})
        nc.publish("limit", b"y" * 1024)
        nc.flush(timeout=5)
        assert nc.is_connected
        got = sub.next_msg(timeout=5)
        assert got.data == b"y" * 1024
        assert sub.pending_msgs == 0
        assert nc.stats["out_msgs"] == 1
    assert errors == []


@pytest.mark.parametrize(
    "subject", ["", "a b", "a..b", ".a", "a.", "a.*", "a.>", ">", "a\tb", "a\r\nb"]
)
def test_bad_subject_on_publish(client: nats_sync.Client, subject: str) -> None:
    with pytest.raises(nats_sync.BadSubjectError):
        client.publish(subject, b"x")
    with pytest.raises(nats_sync.BadSubjectError):
        client.publish("ok.subject", b"x", reply=subject or "a b")
    assert client.stats["out_msgs"] == 0
    client.flush(timeout=5)
    assert client.is_connected


@pytest.mark.parametrize("subject", ["", "a b", "a..b", ".a", "a.", "a.>.b", "a\nb", ">.a"])
def test_bad_subject_on_subscribe(client: nats_sync.Client, subject: str) -> None:
    with pytest.raises(nats_sync.BadSubjectError):
        client.subscribe(subject)
    client.flush(timeout=5)
    assert client.is_connected


def test_bad_queue_group_on_subscribe(client: nats_sync.Client) -> None:
    with pytest.raises(nats_sync.BadSubjectError):
        client.subscribe("q", queue="has space")
    client.flush(timeout=5)
    assert client.is_connected


def test_publish_with_reply_subject(client: nats_sync.Client) -> None:
    sub = client.subscribe("ask")
    client.publish("ask", b"question", reply="answers.here")
    msg = sub.next_msg(timeout=5)
    assert msg.reply == "answers.here"
    assert msg.data == b"question"


def test_msg_respond(client: nats_sync.Client) -> None:
    service = client.subscribe("svc.echo")
    inbox = client.new_inbox()
    assert inbox.startswith("_INBOX.")
    replies = client.subscribe(inbox)
    client.publish("svc.echo", b"ping", reply=inbox)
    request = service.next_msg(timeout=5)
    assert request.reply == inbox
    request.respond(b"pong", headers={"Served-By": "test"})
    reply = replies.next_msg(timeout=5)
    assert reply.subject == inbox
    assert reply.data == b"pong"
    assert reply.headers == {"Served-By": "test"}
    assert reply.reply == ""


def test_msg_respond_works_from_a_callback_for_request(client: nats_sync.Client) -> None:
    client.subscribe("svc.upper", cb=lambda msg: msg.respond(msg.data.upper()))
    assert client.request("svc.upper", b"shout", timeout=5).data == b"SHOUT"


def test_msg_respond_without_reply_raises(client: nats_sync.Client) -> None:
    sub = client.subscribe("noreply")
    client.publish("noreply", b"x")
    msg = sub.next_msg(timeout=5)
    assert msg.reply == ""
    with pytest.raises(nats_sync.Error, match="reply"):
        msg.respond(b"nobody hears this")


def test_new_inbox_is_unique_and_uses_prefix(connect: ClientFactory) -> None:
    nc = connect(inbox_prefix="_MY.INBOX")
    inboxes = {nc.new_inbox() for _ in range(100)}
    assert len(inboxes) == 100
    assert all(inbox.startswith("_MY.INBOX.") for inbox in inboxes)


def test_no_echo(connect: ClientFactory) -> None:
    quiet = connect(no_echo=True)
    loud = connect()
    quiet_sub = quiet.subscribe("echo")
    loud_sub = loud.subscribe("echo")
    quiet.flush(timeout=5)
    loud.flush(timeout=5)
    quiet.publish("echo", b"from-quiet")
    quiet.flush(timeout=5)  # an echo would be queued for `quiet` before this PONG
    loud.publish("echo", b"from-loud")
    loud.flush(timeout=5)
    assert quiet_sub.next_msg(timeout=5).data == b"from-loud"
    assert quiet_sub.pending_msgs == 0
    assert sorted(m.data for m in collect(loud_sub, 2)) == [b"from-loud", b"from-quiet"]


def test_stats_count_a_known_exchange(client: nats_sync.Client) -> None:
    before = client.stats
    assert before == {
        "in_msgs": 0,
        "out_msgs": 0,
        "in_bytes": 0,
        "out_bytes": 0,
        "reconnects": 0,
        "errors_received": 0,
    }
    sub = client.subscribe("stats.>")
    client.publish("stats.a", b"1")
    client.publish("stats.b", b"22")
    client.publish("stats.c", b"333", headers={"Not-Counted": "as payload bytes"})
    client.publish("elsewhere", b"4444")
    client.flush(timeout=5)
    collect(sub, 3)
    # The reader adds a read's messages to the counts once it has dispatched them all:
    # without the GIL this thread can look in between.
    deadline = time.monotonic() + 5
    while client.stats["in_msgs"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stats = client.stats
    assert stats["out_msgs"] == 4
    assert stats["out_bytes"] == 1 + 2 + 3 + 4
    assert stats["in_msgs"] == 3
    assert stats["in_bytes"] == 1 + 2 + 3
    assert stats["errors_received"] == 0
    assert stats["reconnects"] == 0


def test_stats_count_both_sides_between_two_clients(connect: ClientFactory) -> None:
    receiver, sender = connect(), connect()
    sub = receiver.subscribe("two.sides")
    receiver.flush(timeout=5)
    for _ in range(10):
        sender.publish("two.sides", b"abcde")
    sender.flush(timeout=5)
    collect(sub, 10)
    assert (sender.stats["out_msgs"], sender.stats["out_bytes"]) == (10, 50)
    assert (sender.stats["in_msgs"], sender.stats["in_bytes"]) == (0, 0)
    assert (receiver.stats["in_msgs"], receiver.stats["in_bytes"]) == (10, 50)
    assert (receiver.stats["out_msgs"], receiver.stats["out_bytes"]) == (0, 0)


def test_publish_after_close_raises(connect: ClientFactory) -> None:
    nc = connect()
    nc.close()
    with pytest.raises(nats_sync.ConnectionClosedError):
        nc.publish("closed", b"x")
    with pytest.raises(nats_sync.ConnectionClosedError):
        nc.subscribe("closed")
    with pytest.raises(nats_sync.ConnectionClosedError):
        nc.flush(timeout=1)
    with pytest.raises(nats_sync.ConnectionClosedError):
        nc.request("closed", b"x", timeout=1)


def test_publishes_queued_before_close_are_sent(connect: ClientFactory) -> None:
    receiver, sender = connect(), connect()
    sub = receiver.subscribe("last.words")
    receiver.flush(timeout=5)
    for index in range(100):
        sender.publish("last.words", str(index).encode())
    sender.close()
    assert [m.data for m in collect(sub, 100)] == [str(i).encode() for i in range(100)]


def test_messages_arrive_in_publish_order(client: nats_sync.Client) -> None:
    sub = client.subscribe("order")
    for index in range(2000):
        client.publish("order", index.to_bytes(4, "big"))
    client.flush(timeout=10)
    got = [int.from_bytes(m.data, "big") for m in collect(sub, 2000)]
    assert got == list(range(2000))


@pytest.mark.timeout(30)
def test_publish_from_many_threads(client: nats_sync.Client) -> None:
    sub = client.subscribe("threads.*")
    per_thread = 500
    errors: list[BaseException] = []

    def publisher(name: str) -> None:
        try:
            for index in range(per_thread):
                client.publish(f"threads.{name}", index.to_bytes(4, "big"))
        except BaseException as err:
            errors.append(err)

    workers = [
        threading.Thread(target=publisher, args=(f"t{n}",), name=f"test-pub-{n}") for n in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert not any(worker.is_alive() for worker in workers)
    assert errors == []
    client.flush(timeout=10)
    by_thread: dict[str, list[int]] = {}
    for msg in collect(sub, 4 * per_thread):
        by_thread.setdefault(msg.subject, []).append(int.from_bytes(msg.data, "big"))
    assert sorted(by_thread) == [f"threads.t{n}" for n in range(4)]
    for received in by_thread.values():
        assert received == list(range(per_thread)), "each thread's messages stay in order"
    assert sub.pending_msgs == 0

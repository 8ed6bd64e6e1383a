"""The sans-IO WebSocket layer against a wsproto server end, with no sockets."""

from __future__ import annotations

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    Request,
    TextMessage,
)

from nats_sync._core.transport.websocket import WebSocket
from nats_sync.errors import NatsConnectionError


def open_pair(after_accept: bytes = b"") -> tuple[WebSocket, WSConnection]:
    client = WebSocket("example.com:8080")
    server = WSConnection(ConnectionType.SERVER)
    server.receive_data(client.upgrade_request())
    request = next(iter(server.events()))
    assert isinstance(request, Request)
    assert (request.host, request.target) == ("example.com:8080", "/")
    assert client.receive_upgrade(server.send(AcceptConnection()) + after_accept)
    return client, server


def drain(client: WebSocket, size: int) -> bytes:
    out = b""
    buffer = bytearray(size)
    while count := client.read_into(buffer):
        out += bytes(buffer[:count])
    return out


def test_bytes_after_the_accept_are_kept_as_data() -> None:
    server = WSConnection(ConnectionType.SERVER)
    client = WebSocket("h")
    server.receive_data(client.upgrade_request())
    list(server.events())
    accept = server.send(AcceptConnection())
    info = server.send(BytesMessage(data=b"INFO {}\r\n"))
    assert client.receive_upgrade(accept + info)
    assert drain(client, 64) == b"INFO {}\r\n"


def test_messages_larger_than_the_buffer_come_out_in_pieces_in_order() -> None:
    client, server = open_pair()
    payload = bytes(range(256)) * 40
    client.receive(
        server.send(BytesMessage(data=payload)) + server.send(TextMessage(data="PING\r\n"))
    )
    assert drain(client, 7) == payload + b"PING\r\n"
    assert client.read_into(bytearray(7)) == 0
    assert not client.closed


def test_a_frame_split_over_many_reads_is_reassembled() -> None:
    client, server = open_pair()
    frame = server.send(BytesMessage(data=b"MSG a 1 5\r\nhello\r\n"))
    out = b""
    for index in range(len(frame)):
        client.receive(frame[index : index + 1])
        out += drain(client, 4)
    assert out == b"MSG a 1 5\r\nhello\r\n"


def test_messages_are_masked_binary_frames_the_server_reads() -> None:
    client, server = open_pair()
    server.receive_data(client.message(b"PUB a 2\r\nhi\r\n") + client.message(memoryview(b"x")))
    events = list(server.events())
    assert [type(event) for event in events] == [BytesMessage, BytesMessage]
    assert [bytes(event.data) for event in events] == [b"PUB a 2\r\nhi\r\n", b"x"]


def test_a_ping_queues_a_pong() -> None:
    client, server = open_pair()
    client.receive(server.send(Ping(payload=b"p1")))
    assert client.has_control
    server.receive_data(client.take_control())
    assert not client.has_control
    assert [(type(e), bytes(e.payload)) for e in server.events()] == [(Pong, b"p1")]


def test_a_close_frame_ends_the_data_and_is_answered() -> None:
    client, server = open_pair()
    client.receive(
        server.send(BytesMessage(data=b"last"))
        + server.send(CloseConnection(code=1001, reason="bye"))
    )
    assert client.closed
    assert drain(client, 64) == b"last"  # data before the close is still read
    server.receive_data(client.take_control())
    assert [type(event) for event in server.events()] == [CloseConnection]
    with pytest.raises(NatsConnectionError, match="closed the WebSocket"):
        client.message(b"PUB a 0\r\n\r\n")


def test_the_end_of_the_stream_closes() -> None:
    client, _ = open_pair()
    client.receive(None)
    assert client.closed and not client.has_control
    client.receive(b"ignored")  # nothing more is read after the end


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", "HTTP 403"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: bm9wZQ==\r\n\r\n",
            "accept",
        ),
        (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n", "Upgrade"),
        (b"\x00\x01garbage\r\n\r\n", "bad answer"),
    ],
)
def test_a_refused_or_malformed_upgrade_raises(answer: bytes, words: str) -> None:
    client = WebSocket("h:1")
    with pytest.raises(NatsConnectionError, match=words) as caught:
        client.receive_upgrade(answer)
    assert "h:1" in str(caught.value)


def test_a_partial_answer_waits_for_more() -> None:
    client = WebSocket("h")
    assert client.receive_upgrade(b"HTTP/1.1 101 Switching") is False

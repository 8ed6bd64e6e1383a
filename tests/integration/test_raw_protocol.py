"""A raw socket speaks to a real nats-server using only the sans-IO encoder and parser."""

from __future__ import annotations

import socket

import pytest

from nats_sync._core import proto
from nats_sync.testing import NatsServer


def _read_op(
    sock: socket.socket, parser: proto.Parser, *, skip_info: bool = True
) -> proto.ServerOp:
    """The next op; asynchronous INFO updates (servers send one after CONNECT) are skipped."""
    while True:
        while (op := parser.next_op()) is None:
            data = sock.recv(65536)
            assert data, "server closed the connection"
            parser.feed(data)
        if not (skip_info and isinstance(op, proto.InfoOp)):
            return op


@pytest.mark.timeout(20)
def test_handshake_pub_sub_round_trip_with_encoder_and_parser(nats_server: NatsServer) -> None:
    with socket.create_connection(("127.0.0.1", nats_server.port), timeout=5) as sock:
        parser = proto.Parser()
        info = _read_op(sock, parser, skip_info=False)
        assert isinstance(info, proto.InfoOp)
        assert info.info["port"] == nats_server.port
        assert info.info["headers"] is True

        fields = proto.connect_fields(version="test", name="raw")
        sock.sendall(proto.encode_connect(fields) + proto.PING)
        assert _read_op(sock, parser) is proto.PONG_OP

        sock.sendall(
            proto.encode_sub("raw.>", 7)
            + proto.encode_pub("raw.a", b"one\r\ntwo", reply="back")
            + proto.encode_hpub("raw.b", b"", {"k": ["1", "2"]})
            + proto.PING
        )
        first = _read_op(sock, parser)
        second = _read_op(sock, parser)
        assert _read_op(sock, parser) is proto.PONG_OP
        assert isinstance(first, proto.MsgOp) and isinstance(second, proto.MsgOp)
        assert (first.subject, first.sid, first.reply, first.payload) == (
            "raw.a",
            7,
            "back",
            b"one\r\ntwo",
        )
        assert (second.subject, second.payload, second.headers) == ("raw.b", b"", {"k": ["1", "2"]})

        sock.sendall(proto.encode_unsub(7) + proto.encode_pub("raw.c", b"x") + proto.PING)
        assert _read_op(sock, parser) is proto.PONG_OP, "no message may arrive after UNSUB"


@pytest.mark.timeout(20)
def test_server_ping_is_answered_and_errors_parse(nats_server: NatsServer) -> None:
    with socket.create_connection(("127.0.0.1", nats_server.port), timeout=5) as sock:
        parser = proto.Parser()
        assert isinstance(_read_op(sock, parser, skip_info=False), proto.InfoOp)
        sock.sendall(proto.encode_connect(proto.connect_fields(version="t")) + proto.PING)
        assert _read_op(sock, parser) is proto.PONG_OP
        sock.sendall(b"FOO bar\r\n")
        err = _read_op(sock, parser)
        assert isinstance(err, proto.ErrOp)
        assert "unknown protocol operation" in err.message.lower()

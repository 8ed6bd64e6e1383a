"""The NATS wire protocol, sans-IO: a parser of server ops and encoders of client ops.

Nothing in this package does I/O, reads a clock or starts a thread (a unit test holds
it to that), so every byte sequence can be tested by feeding it in.
"""

from nats_sync._core.proto.encoder import (
    CRLF,
    PING,
    PONG,
    connect_fields,
    encode_connect,
    encode_hpub,
    encode_hpub_line,
    encode_pub,
    encode_sub,
    encode_unsub,
    pub_line,
    pub_prefix,
    publish_subject,
    queue_group,
    reply_subject,
    subscribe_subject,
)
from nats_sync._core.proto.headers import HeadersInput, decode_headers, encode_headers
from nats_sync._core.proto.ops import (
    OK,
    ErrOp,
    Headers,
    InfoOp,
    MsgOp,
    OkOp,
    PingOp,
    PongOp,
    ServerOp,
)
from nats_sync._core.proto.ops import PING as PING_OP
from nats_sync._core.proto.ops import PONG as PONG_OP
from nats_sync._core.proto.parser import Parser

__all__ = [
    "CRLF",
    "OK",
    "PING",
    "PING_OP",
    "PONG",
    "PONG_OP",
    "ErrOp",
    "Headers",
    "HeadersInput",
    "InfoOp",
    "MsgOp",
    "OkOp",
    "Parser",
    "PingOp",
    "PongOp",
    "ServerOp",
    "connect_fields",
    "decode_headers",
    "encode_connect",
    "encode_headers",
    "encode_hpub",
    "encode_hpub_line",
    "encode_pub",
    "encode_sub",
    "encode_unsub",
    "pub_line",
    "pub_prefix",
    "publish_subject",
    "queue_group",
    "reply_subject",
    "subscribe_subject",
]

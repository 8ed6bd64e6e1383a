"""nats_sync keeps nats-py's names, minus ``await``: checked against the installed nats-py.

Every parameter of nats-py's ``Client.connect`` (what ``nats.connect(**options)``
forwards to) is a parameter of ``nats_sync.connect``; every public name of nats-py's
``Client``, ``Msg``, ``JetStreamContext`` and ``JetStreamManager`` is a name of
``nats_sync.Client``, ``nats_sync.Msg`` and the JetStream context (what both
``nc.jetstream()`` and ``nc.jsm()`` return), except the deliberate differences listed
below, each with its reason. The guide docs/guides/from-nats-py.md promises exactly this
and names each difference; the last tests hold the lists and the guide to that.

A name nats-py adds in a later version fails here until it is built or listed.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsPyClient
from nats.aio.msg import Msg as NatsPyMsg
from nats.js.client import JetStreamContext
from nats.js.manager import JetStreamManager

import nats_sync
from nats_sync._core.transport.pool import parse_server_url
from nats_sync.client import Server
from nats_sync.jetstream import JetStream
from nats_sync.jetstream._consumers.msg import JsMsg

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "from-nats-py.md"

#: Parameters of nats-py's connect that nats_sync.connect does not take: none.
CONNECT_DIFFERENCES: dict[str, str] = {}

#: Public names of nats-py's Client that nats_sync.Client does not have, and why.
CLIENT_DIFFERENCES = {
    # nats-py makes a Client() and then awaits its connect(); here connect() is the only
    # way to a client, and it returns one already connected.
    "connect": "nats_sync.connect() returns a connected client; no unconnected Client()",
    # Messages are tuples the parser builds in one allocation on the reader thread; a
    # user class per message would cost every message its own construction.
    "msg_class": "messages are built by the parser as nats_sync.Msg, not a chosen class",
    # nats-py's state before and between its first connection attempts. A nats_sync
    # client exists only once connected, and retry_on_failed_connect's background
    # attempts are RECONNECTING (is_connecting tells them apart).
    "DISCONNECTED": "no such state: a client is connected, reconnecting, draining or closed",
}

#: Public names of nats-py's JetStreamContext and JetStreamManager missing on the
#: JetStream context, and why.
JETSTREAM_DIFFERENCES = {
    # nats-py's own helper that reads the Status header of a message.
    "is_status_msg": "an internal helper of nats-py; Msg.status carries the status",
}

#: Public names of nats-py's Msg that nats_sync.Msg does not have, and why.
MSG_DIFFERENCES = {
    # nats-py's Msg is also its JetStream message. Here JetStream consumers hand out a
    # JsMsg, which has these; a core message has nothing to acknowledge (nats-py raises
    # NotJSMessageError on them).
    "ack": "on JetStream messages (JsMsg) only",
    "ack_sync": "on JetStream messages (JsMsg) only",
    "nak": "on JetStream messages (JsMsg) only",
    "in_progress": "on JetStream messages (JsMsg) only",
    "term": "on JetStream messages (JsMsg) only",
    "is_acked": "on JetStream messages (JsMsg) only",
    "metadata": "on JetStream messages (JsMsg) only",
    # nats-py's constants of the ack payloads and its metadata class, both nested in Msg.
    "Ack": "ack payloads are JsMsg's business (ack, nak, in_progress, term)",
    "Metadata": "the metadata type is nats_sync.jetstream.MsgMetadata (JsMsg.metadata)",
}
#: The names of MSG_DIFFERENCES that JetStream messages have.
ON_JS_MSG = ("ack", "ack_sync", "nak", "in_progress", "term", "is_acked", "metadata")


def public(names: object) -> set[str]:
    return {name for name in dir(names) if not name.startswith("_")}


def nats_py_connect_parameters() -> set[str]:
    return set(inspect.signature(NatsPyClient.connect).parameters) - {"self"}


def nats_py_client_names() -> set[str]:
    # ``options`` and ``stats`` are set on the instance in nats-py's __init__.
    instance_names = {name for name in vars(NatsPyClient()) if not name.startswith("_")}
    return public(NatsPyClient) | instance_names


def nats_py_jetstream_names() -> set[str]:
    return public(JetStreamContext) | public(JetStreamManager)


def nats_py_msg_names() -> set[str]:
    return public(NatsPyMsg)


def missing(theirs: set[str], ours: set[str], differences: dict[str, str]) -> list[str]:
    return sorted(theirs - ours - set(differences))


def test_connect_takes_every_parameter_of_nats_py() -> None:
    ours = set(inspect.signature(nats_sync.connect).parameters)
    assert missing(nats_py_connect_parameters(), ours, CONNECT_DIFFERENCES) == []


def test_the_client_has_every_public_name_of_nats_py() -> None:
    assert missing(nats_py_client_names(), public(nats_sync.Client), CLIENT_DIFFERENCES) == []


def test_the_jetstream_context_has_every_name_of_nats_py_context_and_manager() -> None:
    assert missing(nats_py_jetstream_names(), public(JetStream), JETSTREAM_DIFFERENCES) == []


def test_msg_has_every_public_name_of_nats_py() -> None:
    assert missing(nats_py_msg_names(), public(nats_sync.Msg), MSG_DIFFERENCES) == []


def test_jetstream_messages_have_the_acknowledgement_names() -> None:
    assert set(ON_JS_MSG) <= public(JsMsg)
    assert set(ON_JS_MSG) <= nats_py_msg_names()


@pytest.mark.parametrize(
    ("theirs", "ours", "differences"),
    [
        (
            nats_py_connect_parameters,
            lambda: set(inspect.signature(nats_sync.connect).parameters),
            CONNECT_DIFFERENCES,
        ),
        (nats_py_client_names, lambda: public(nats_sync.Client), CLIENT_DIFFERENCES),
        (nats_py_jetstream_names, lambda: public(JetStream), JETSTREAM_DIFFERENCES),
        (nats_py_msg_names, lambda: public(nats_sync.Msg), MSG_DIFFERENCES),
    ],
    ids=["connect", "Client", "JetStream", "Msg"],
)
def test_every_difference_is_still_one(
    theirs: object, ours: object, differences: dict[str, str]
) -> None:
    """A listed name must be nats-py's and not ours: once built, it leaves the list."""
    assert callable(theirs) and callable(ours)
    their_names, our_names = theirs(), ours()
    assert sorted(set(differences) - their_names) == [], "not a nats-py name (any more)"
    assert sorted(set(differences) & our_names) == [], "built here: remove from the list"
    assert all(reason.strip() for reason in differences.values())


def guide_text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def test_the_guide_promises_this_and_names_each_difference() -> None:
    section = guide_text()
    assert "tests/unit/test_nats_py_parity.py" in section
    named = set(re.findall(r"`([A-Za-z_]+)`", section))
    every = {*CONNECT_DIFFERENCES, *CLIENT_DIFFERENCES, *JETSTREAM_DIFFERENCES, *MSG_DIFFERENCES}
    assert sorted(every - named) == []


def test_the_new_names_behave_as_nats_py_names_do() -> None:
    """The names that need no server: Msg.header, the state constants, Server views."""
    msg = nats_sync.Msg("s", headers={"k": "v"})
    assert msg.header is msg.headers
    assert {
        nats_sync.Client.CONNECTED,
        nats_sync.Client.CLOSED,
        nats_sync.Client.RECONNECTING,
    } <= set(type(nats_sync.Client.CONNECTED))
    server = Server.of(parse_server_url("nats://user:pw@host:4333"), 2)
    assert (server.uri.hostname, server.uri.port, server.reconnects) == ("host", 4333, 2)
    assert "pw" not in server.uri.geturl()

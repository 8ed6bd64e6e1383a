"""Fork safety: a child never uses the parent's client; process_client connects afresh."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync._process import close_process_clients
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(30)


def _in_child(body: Callable[[], bool]) -> int:
    """Runs ``body()`` in a forked child; returns its exit status (0 = its checks held)."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        status = 1
        try:
            status = 0 if body() else 2
        finally:
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wait_status)


def test_the_child_gets_a_clear_error_and_the_parent_keeps_its_connection(
    nats_server: NatsServer,
) -> None:
    nc = nats_sync.connect(nats_server.url)
    sub = nc.subscribe("fork.data")
    nc.flush()

    def child() -> bool:
        try:
            nc.publish("fork.data", b"from the child")
        except nats_sync.ConnectionClosedError as err:
            refused = "after the fork" in str(err)
        else:
            refused = False
        nc.close()  # must not touch the parent's socket
        try:
            sub.next_msg(timeout=0.1)
        except nats_sync.ConnectionClosedError:
            return refused
        return False

    assert _in_child(child) == 0
    nc.publish("fork.data", b"from the parent")
    assert sub.next_msg(timeout=5).data == b"from the parent"
    assert nc.is_connected
    nc.close()


def test_process_client_connects_again_in_the_child(nats_server: NatsServer) -> None:
    parent = nats_sync.process_client(nats_server.url, name="fork-test")
    assert nats_sync.process_client(nats_server.url, name="fork-test") is parent
    sub = parent.subscribe("fork.pc")
    parent.flush()

    def child() -> bool:
        own = nats_sync.process_client(nats_server.url, name="fork-test")
        own.publish("fork.pc", b"child via process_client")
        own.flush(timeout=5)
        own.close()
        return own is not parent

    assert _in_child(child) == 0
    assert sub.next_msg(timeout=5).data == b"child via process_client"
    parent.close()
    assert nats_sync.process_client(nats_server.url, name="fork-test") is not parent
    close_process_clients()


def test_the_nats_client_fixture_is_connected(nats_client: nats_sync.Client) -> None:
    nats_client.subscribe("greet", cb=lambda msg: msg.respond(b"hi"))
    assert nats_client.request("greet", timeout=2).data == b"hi"

"""A direct-send claim left held by a thread no longer writing never stops the writer.

A Ctrl-C can cut the give-back of a claim where no retry reaches (on entering
``Outbox.give_back_direct``, or in its own ``except``): seen in CI as an interrupt storm
leaving a CONNECTED client whose requests all timed out and whose writer outlived
``close()``. The writer then looks, every ``DIRECT_CLAIM_CHECK``, whether the claim's
thread is still inside ``Connection.send_direct``. Socketpairs, no server.
"""

from __future__ import annotations

import socket
import threading

import pytest

from nats_sync._core.proto import Parser
from nats_sync._core.threads.connection import Connection, _sending_directly
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.transport.streams import TcpStream

pytestmark = pytest.mark.timeout(30)


def _claimed_outbox() -> tuple[Outbox, int]:
    """A connected outbox whose claim another thread took (and kept), with one frame
    queued behind it; and that thread's ident."""
    outbox = Outbox(limit=1024, full_wait=0.1)
    outbox.set_connected(True)
    outbox.writer_waiting = True  # as when the writer waits in take()
    claimer = threading.Thread(target=outbox.claim_direct, args=(5,))
    claimer.start()
    claimer.join(10)
    assert outbox.sending == claimer.ident
    assert outbox.queue_behind_direct(b"PUB b 1\r\nx\r\n", 1)
    outbox.writer_waiting = False
    return outbox, outbox.sending


def test_the_writer_ends_a_claim_whose_thread_left_its_write() -> None:
    outbox, _ = _claimed_outbox()
    assert outbox.take(claim_is_live=lambda ident: False) == [b"PUB b 1\r\nx\r\n"]
    assert outbox.sending == 0
    assert outbox.stale_claims == 1


def test_the_writer_waits_for_a_claim_still_being_written() -> None:
    outbox, claimer = _claimed_outbox()
    asked: list[int] = []
    taken: list[object] = []

    def live(ident: int) -> bool:
        asked.append(ident)
        return True

    writer = threading.Thread(target=lambda: taken.append(outbox.take(claim_is_live=live)))
    writer.start()
    writer.join(0.8)  # past three looks at the claim
    assert writer.is_alive() and taken == []
    assert asked and set(asked) == {claimer}
    outbox.release_direct()  # as the claimer does: wakes the writer for the frame behind
    writer.join(5)
    assert taken == [[b"PUB b 1\r\nx\r\n"]]
    assert outbox.stale_claims == 0


def test_nothing_queues_behind_the_main_threads_claim() -> None:
    outbox = Outbox(limit=1024, full_wait=0.1)
    outbox.set_connected(True)
    outbox.writer_waiting = True
    assert threading.current_thread() is threading.main_thread()  # as pytest runs tests
    assert outbox.claim_direct(5)
    assert not outbox.queue_behind_direct(b"PUB b 1\r\nx\r\n", 1)


class _HeldSend(TcpStream):
    """A stream whose ``send_nowait`` waits until told to go on (a write in progress)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self.inside = threading.Event()
        self.go_on = threading.Event()

    def send_nowait(self, data: bytes) -> int:
        self.inside.set()
        self.go_on.wait(10)
        return super().send_nowait(data)


def test_a_thread_is_sending_directly_only_inside_send_direct() -> None:
    ours, theirs = socket.socketpair()
    stream = _HeldSend(ours)
    outbox = Outbox(limit=1024, full_wait=0.1)
    outbox.set_connected(True)
    outbox.writer_waiting = True
    conn = Connection(stream, Parser(), outbox, lambda ops: None, lambda c, e: None)
    sender = threading.Thread(target=conn.send_direct, args=(b"PUB a 0\r\n\r\n", 0))
    try:
        sender.start()
        assert stream.inside.wait(10)
        assert sender.ident is not None
        assert _sending_directly(sender.ident)
        assert not _sending_directly(threading.get_ident())
        stream.go_on.set()
        sender.join(10)
        assert not _sending_directly(sender.ident)  # ended: no frames at all
        assert outbox.sending == 0
        assert theirs.recv(100) == b"PUB a 0\r\n\r\n"
    finally:
        stream.go_on.set()
        ours.close()
        theirs.close()


def test_a_claim_left_by_an_interrupted_caller_does_not_stop_the_writer_thread() -> None:
    ours, theirs = socket.socketpair()
    outbox = Outbox(limit=1024, full_wait=0.1)
    conn = Connection(TcpStream(ours), Parser(), outbox, lambda ops: None, lambda c, e: None)
    writer = threading.Thread(target=conn.run_writer)
    try:
        outbox.set_connected(True)
        writer.start()
        while not outbox.writer_waiting:
            threading.Event().wait(0.01)
        # What a Ctrl-C after the claim and before its give-back leaves: the claim is
        # held by the main thread, which is no longer in send_direct.
        assert outbox.claim_direct(5)
        request = b"PUB req 2\r\nhi\r\n"
        assert not conn.send_direct(request, 2)  # not behind the claim: queued instead
        outbox.put_messages([request], len(request), 2)  # as Publisher.publish does then
        theirs.settimeout(10)
        assert theirs.recv(100) == request
        assert outbox.sending == 0
        assert outbox.stale_claims == 1
        outbox.stop_writer(discard=False)
        writer.join(10)
        assert not writer.is_alive()
    finally:
        outbox.stop_writer(discard=True)
        ours.close()
        theirs.close()

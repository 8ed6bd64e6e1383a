"""The outbox's bookkeeping for a direct send the socket took only in part."""

from __future__ import annotations

from nats_sync._core.threads.outbox import ControlFrame, Outbox, remainder


def test_an_unsent_tail_goes_out_before_anything_queued_meanwhile() -> None:
    outbox = Outbox(limit=1024, full_wait=0.1)
    outbox.set_connected(True)
    outbox.writer_waiting = True  # as when the writer thread waits in take()
    assert outbox.claim_direct(5)
    outbox.put_messages([b"PUB b 1\r\nx\r\n"], 12, 1)  # queued while the caller writes
    whole = b"PUB a 5\r\nhello\r\n"
    outbox.release_direct(remainder(whole[7:], whole))
    outbox.writer_waiting = False
    assert outbox.take() == [b"\r\nhello\r\n", b"PUB b 1\r\nx\r\n"]
    assert outbox.size == 0


def test_after_a_loss_the_whole_message_replaces_its_tail() -> None:
    outbox = Outbox(limit=1024, full_wait=0.1)
    whole = b"PUB a 5\r\nhello\r\n"
    outbox.requeue([remainder(whole[3:], whole), ControlFrame(b"SUB x 1\r\n"), b"PUB c 0\r\n\r\n"])
    outbox.keep_messages_only()
    assert outbox.frames == [whole, b"PUB c 0\r\n\r\n"]
    assert outbox.size == len(whole) + len(b"PUB c 0\r\n\r\n")

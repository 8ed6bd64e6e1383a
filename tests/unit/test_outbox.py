"""The outbox's bookkeeping for a direct send: the part the socket did not take, and
the claim given back whatever interrupts it."""

from __future__ import annotations

import threading

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


class _InterruptedOnce:
    """A lock whose first ``with`` raises KeyboardInterrupt before it is taken, as a
    SIGINT does to a thread waiting in a lock's acquire (interruptible on POSIX)."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.interrupted = False

    def __enter__(self) -> bool:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


def test_a_claim_given_back_under_a_second_interrupt_is_still_released() -> None:
    outbox = Outbox(limit=1024, full_wait=0.1)
    outbox.set_connected(True)
    outbox.writer_waiting = True
    assert outbox.claim_direct(5)
    outbox.put_messages([b"PUB b 1\r\nx\r\n"], 12, 1)  # queued behind the claim
    flaky = _InterruptedOnce(outbox.lock)
    outbox.lock = flaky  # type: ignore[assignment]
    outbox.give_back_direct()
    assert flaky.interrupted
    assert outbox.sending == 0  # the writer may take the queued frame again
    outbox.lock = flaky._lock
    outbox.writer_waiting = False
    assert outbox.take() == [b"PUB b 1\r\nx\r\n"]


def test_giving_back_a_claim_this_thread_does_not_hold_changes_nothing() -> None:
    outbox = Outbox(limit=1024, full_wait=0.1)
    outbox.set_connected(True)
    outbox.writer_waiting = True
    claimed = threading.Thread(target=outbox.claim_direct, args=(5,))
    claimed.start()
    claimed.join()
    holder = outbox.sending
    assert holder not in (0, threading.get_ident())
    outbox.give_back_direct()
    assert outbox.sending == holder

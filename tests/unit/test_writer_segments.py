"""The writer's pure helpers: what goes to the socket (`_segments`) and what goes back to
the outbox after a failed send (`_unsent`), at every byte the socket may stop at.

The rule (nats_sync/_core/threads/connection.py): a failed send puts back every message not fully
handed to the kernel, whole, ahead of newer ones; the server drops a partial frame with
the connection, so a partly written frame (a large payload's list included) is re-sent
from its first byte, and a frame written to its last byte is not.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nats_sync._core.proto import Parser
from nats_sync._core.threads.connection import Connection, _segments, _unsent
from nats_sync._core.threads.outbox import ControlFrame, Frame, Outbox, frame_size
from nats_sync._core.transport.streams import Buffer
from nats_sync.errors import Error, NatsConnectionError

LARGE_PAYLOAD = bytes(range(256)) * 2


def wire(frames: Sequence[Frame]) -> bytes:
    """The bytes ``frames`` put on the wire, in order."""
    return b"".join(b"".join(frame) if isinstance(frame, list) else frame for frame in frames)


def mixed_frames() -> list[Frame]:
    """Small frames around a large payload's list frame, and one at each end."""
    return [
        ControlFrame(b"SUB a 1\r\n"),
        b"PUB a 2\r\nhi\r\n",
        [b"PUB big 512\r\n", LARGE_PAYLOAD, b"\r\n"],
        b"PUB b 0\r\n\r\n",
        [b"HPUB c 12 14\r\n", b"NATS/1.0\r\n\r\nok", b"\r\n"],
    ]


def expected_unsent(frames: list[Frame], sent: int) -> list[Frame]:
    """Independently of `_unsent`: the frames whose last byte is past ``sent``."""
    end = 0
    for index, frame in enumerate(frames):
        end += frame_size(frame)
        if end > sent:
            return frames[index:]
    return []


# --- _segments ------------------------------------------------------------------------


def test_small_frames_become_one_buffer() -> None:
    frames: list[Frame] = [b"PUB a 1\r\nx\r\n", ControlFrame(b"PING\r\n"), b"PUB b 0\r\n\r\n"]
    assert _segments(frames) == [wire(frames)]


def test_a_large_payload_is_sent_as_it_is_between_joined_runs() -> None:
    frames = mixed_frames()
    segments = _segments(frames)
    assert b"".join(bytes(segment) for segment in segments) == wire(frames)
    large = frames[2]
    assert isinstance(large, list)
    # Not copied: the very payload object is one of the buffers.
    assert any(segment is large[1] for segment in segments)
    # Small frames next to each other go out as one buffer, not one each.
    assert any(b"SUB a 1\r\nPUB a 2\r\nhi\r\n" in bytes(segment) for segment in segments)


def test_nothing_to_send_gives_no_bytes() -> None:
    assert b"".join(bytes(segment) for segment in _segments([])) == b""


# --- _unsent --------------------------------------------------------------------------


def test_after_every_byte_the_unsent_frames_are_those_not_fully_sent() -> None:
    frames = mixed_frames()
    data = wire(frames)
    for sent in range(len(data) + 1):
        unsent = _unsent(frames, sent)
        assert unsent == expected_unsent(frames, sent), f"after {sent} bytes"
        # The unsent frames are the original objects: a list frame goes back whole.
        assert all(a is b for a, b in zip(unsent, frames[len(frames) - len(unsent) :], strict=True))
        # Re-sending them delivers exactly what had not gone, after the part of the
        # first one that had (the server dropped it with the connection).
        resend = wire(unsent)
        assert resend.endswith(data[sent:])
        already = len(resend) - (len(data) - sent)
        assert 0 <= already < (frame_size(unsent[0]) if unsent else 1)


@pytest.mark.parametrize("boundary", ["start", "inside", "end"])
def test_a_partly_written_list_frame_is_put_back_whole(boundary: str) -> None:
    frames = mixed_frames()
    before = sum(frame_size(frame) for frame in frames[:2])
    size = frame_size(frames[2])
    sent = {"start": before, "inside": before + 20, "end": before + size}[boundary]
    unsent = _unsent(frames, sent)
    if boundary == "end":  # its last byte went: not sent again
        assert unsent == frames[3:]
    else:
        assert unsent[0] is frames[2]
        assert unsent == frames[2:]


def test_nothing_is_unsent_once_every_byte_went() -> None:
    frames = mixed_frames()
    assert _unsent(frames, len(wire(frames))) == []


# --- the writer loop with a socket that stops ------------------------------------------


class StoppingTransport:
    """The writer's view of a transport: takes at most ``step`` bytes per send and fails
    once ``budget`` bytes went out (None: never)."""

    is_tls = False  # as a plain stream (Connection may look at these)
    is_websocket = False

    def __init__(self, step: int, budget: int | None) -> None:
        self.step, self.budget = step, budget
        self.received = bytearray()
        self.shut = False

    def send(self, buffers: Sequence[Buffer]) -> int:
        data = b"".join(bytes(buffer) for buffer in buffers)
        room = len(data) if self.budget is None else self.budget - len(self.received)
        if room <= 0:
            raise NatsConnectionError("write failed: connection reset")
        taken = data[: min(self.step, room, len(data))]
        self.received += taken
        return len(taken)

    def shutdown(self) -> None:
        self.shut = True

    def close(self) -> None:
        self.shut = True


def run_writer_once(
    frames: list[Frame], transport: StoppingTransport
) -> tuple[Outbox, list[Error]]:
    """Queues ``frames`` and runs the writer thread's body on this thread until it
    returns (the outbox is told to stop once it is empty)."""
    outbox = Outbox(limit=1 << 20, full_wait=1.0)
    outbox.set_connected(True)
    outbox.requeue(frames)
    outbox.stop_writer(discard=False)
    lost: list[Error] = []
    connection = Connection(
        transport,  # type: ignore[arg-type]  # the writer uses send, shutdown, close
        Parser(),
        outbox,
        on_ops=lambda ops: None,
        on_lost=lambda conn, error: lost.append(error),
    )
    connection.run_writer()
    return outbox, lost


@pytest.mark.parametrize("step", [1, 5, 64, 10_000])
def test_a_send_failing_at_any_byte_puts_back_exactly_the_frames_not_fully_sent(step: int) -> None:
    frames = mixed_frames()
    data = wire(frames)
    for budget in range(len(data)):
        transport = StoppingTransport(step, budget)
        outbox, lost = run_writer_once(frames, transport)
        assert bytes(transport.received) == data[:budget]
        assert len(lost) == 1 and transport.shut
        assert outbox.frames == expected_unsent(frames, budget), f"failed at byte {budget}"
        assert outbox.size == sum(frame_size(frame) for frame in outbox.frames)


@pytest.mark.parametrize("step", [1, 7, 10_000])
def test_a_writer_whose_sends_all_succeed_delivers_every_byte_once(step: int) -> None:
    frames = mixed_frames()
    transport = StoppingTransport(step, None)
    outbox, lost = run_writer_once(frames, transport)
    assert bytes(transport.received) == wire(frames)
    assert lost == [] and outbox.frames == []

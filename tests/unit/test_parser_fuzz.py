"""Property tests of the parser against hostile input: a bounded `make fuzz`.

Whatever bytes arrive, the parser returns ops (None: it needs more) or raises
``ProtocolError``, nothing else; its drain loop ends; it holds no more than it was fed;
a stream without CRLF raises once past the 4,096-byte control line limit; and how the
bytes are cut into reads changes nothing. The generators and the checks live in
tools/fuzz.py (`check`), shared with the long run.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nats_sync._core.proto import PING_OP, Parser, ServerOp
from nats_sync._defaults import MAX_CONTROL_LINE
from nats_sync.errors import ProtocolError

EXAMPLES = settings(max_examples=300, deadline=None)
TOOL = Path(__file__).resolve().parents[2] / "tools" / "fuzz.py"


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nats_sync_fuzz_tool", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fuzz = _load_tool()


def cuts(data: st.DataObject, size: int) -> list[int]:
    return fuzz.draw_cuts(data, size)


@EXAMPLES
@given(st.data(), st.binary(max_size=2_000))
def test_random_bytes_give_ops_or_a_protocol_error(data: st.DataObject, raw: bytes) -> None:
    fuzz.check(raw, cuts(data, len(raw)))


@EXAMPLES
@given(
    st.data(),
    st.lists(
        st.sampled_from(
            [*fuzz.TOKENS, *fuzz.CONTROLS, *fuzz.NUMBERS, b"PUB", b"MSG", b"HMSG", b"a", b"1", b"5"]
        ),
        max_size=40,
    ).map(b"".join),
)
def test_protocol_shaped_garbage_gives_ops_or_a_protocol_error(
    data: st.DataObject, raw: bytes
) -> None:
    fuzz.check(raw, cuts(data, len(raw)))


@EXAMPLES
@given(st.data())
def test_valid_streams_parse_completely_however_they_are_cut(data: st.DataObject) -> None:
    pick = fuzz.DrawPick(data)
    frames = [fuzz.frame(pick) for _ in range(1 + pick(6))]
    wire = b"".join(frames)
    outcome = fuzz.check(wire, cuts(data, len(wire)))
    assert outcome.error is None
    assert len(outcome.ops) == len(frames)


@EXAMPLES
@given(st.data())
def test_mutated_streams_give_ops_or_a_protocol_error(data: st.DataObject) -> None:
    pick = fuzz.DrawPick(data)
    wire = fuzz.mutate(fuzz.stream(pick), pick)
    fuzz.check(wire, cuts(data, len(wire)))


@EXAMPLES
@given(
    st.data(),
    st.sampled_from(["MSG", "HMSG"]),
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([-1, 0, 2**63, 2**64, 10**300, Parser().max_message_size + 1]),
)
def test_size_fields_replaced_by_huge_or_negative_numbers(
    data: st.DataObject, op: str, size: int
) -> None:
    body = b"NATS/1.0\r\n\r\nhello" if op == "HMSG" else b"hello"
    sizes = f"12 {size}" if op == "HMSG" else f"{size}"
    line = f"{op} a.b 1 {sizes}\r\n".encode()
    wire = line + body + b"\r\nPING\r\n"
    outcome = fuzz.check(wire, cuts(data, len(wire)))
    limit = Parser().max_message_size
    if size < 0 or size > limit or (op == "HMSG" and size < 12):
        # refused at the control line: the body is never waited for
        assert outcome.error is not None and outcome.ops == []
        early = fuzz.feed(line)
        assert early.error is not None
    elif size == len(body):
        assert outcome.error is None and len(outcome.ops) == 2
    else:
        rest = wire[len(line) :]
        if rest[size : size + 2] == b"\r\n":
            # the wrong size still lands on a CRLF (e.g. 11 takes "hello\r\nPING"): a
            # valid frame of that size, which the parser must deliver byte for byte
            assert outcome.error is None and outcome.ops
            assert outcome.ops[0].size == size
        else:
            assert outcome.error is not None or outcome.ops == []  # no CRLF after it


@EXAMPLES
@given(
    st.data(),
    st.sampled_from([b"", b"MSG a 1 ", b"INFO {", b"HMSG a 1 1", b"-ERR '"]),
    st.binary(min_size=1, max_size=64).map(lambda b: b.replace(b"\n", b"") or b"x"),
    st.integers(min_value=1, max_value=3 * MAX_CONTROL_LINE),
)
def test_a_stream_without_crlf_raises_once_past_the_line_limit(
    data: st.DataObject, head: bytes, pattern: bytes, size: int
) -> None:
    wire = (head + pattern * (size // len(pattern) + 1))[:size]
    assert b"\n" not in wire
    cut_points = cuts(data, size)
    outcome = fuzz.check(wire, cut_points)  # raises if the limit is not enforced
    assert outcome.ops == []
    longest = size - (1 if wire.endswith(b"\r") else 0)
    assert (outcome.error is not None) == (longest > MAX_CONTROL_LINE)
    # fed in reads, the parser holds at most the limit (+ a possible CR) at any time
    parser = Parser()
    for chunk in fuzz.chunks(wire, cut_points):
        parser.feed(chunk)
        try:
            assert parser.next_op() is None
        except ProtocolError:
            break
        assert parser.buffered <= MAX_CONTROL_LINE + 1


def test_the_generators_reach_both_ops_and_errors() -> None:
    """The fuzzer is not only feeding valid streams, nor only garbage."""
    pick = fuzz.RandomPick(random.Random(7))
    errors = with_ops = 0
    for _ in range(2_000):
        wire = fuzz.fuzz_input(pick)
        outcome = fuzz.check(wire, fuzz.cuts_for(wire))
        errors += outcome.error is not None
        with_ops += bool(outcome.ops)
    assert errors > 400
    assert with_ops > 1_000


class _EndlessParser(Parser):
    __slots__ = ()

    def next_op(self) -> ServerOp | None:
        return PING_OP  # never consumes anything


class _HoardingParser(Parser):
    __slots__ = ()

    @property
    def buffered(self) -> int:
        return 1 << 40


class _CrashingParser(Parser):
    __slots__ = ()

    def next_op(self) -> ServerOp | None:
        raise IndexError("planted")


class _LimitlessParser(Parser):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(max_control_line=1 << 20)


@pytest.mark.parametrize(
    ("broken", "wire", "expected"),
    [
        (_EndlessParser, b"PING\r\n", fuzz.PropertyViolationError),
        (_HoardingParser, b"PING\r\n", fuzz.PropertyViolationError),
        (_CrashingParser, b"PING\r\n", IndexError),
        (_LimitlessParser, b"x" * (MAX_CONTROL_LINE + 1), fuzz.PropertyViolationError),
    ],
)
def test_the_checks_catch_a_broken_parser(
    monkeypatch: pytest.MonkeyPatch, broken: type[Parser], wire: bytes, expected: type
) -> None:
    monkeypatch.setattr(fuzz, "Parser", broken)
    with pytest.raises(expected):
        fuzz.check(wire, [3])


def test_a_saved_input_replays(tmp_path: Path) -> None:
    saved = fuzz.save_crash(b"MSG a 1 -1\r\n", [4], "example", tmp_path)
    assert fuzz.replay(saved) == 0  # the real parser handles it: ProtocolError, no failure

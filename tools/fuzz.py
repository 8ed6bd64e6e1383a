"""Long fuzzing run of the sans-IO parser (``make fuzz``); writes its figures to
docs/RELIABILITY.md (section ``fuzz``).

Inputs: valid server streams built from the encoder (MSG, HMSG with headers, INFO,
PING, PONG, +OK, -ERR), then mutated (byte flips, insertions, deletions, truncation,
size fields swapped for huge or negative numbers, random bytes), each fed whole and in
random splits. The only acceptable failure is ``ProtocolError``; every drain loop must
end; the parser must never hold more than it was fed. Any other outcome is saved under
fuzz-crashes/ and makes the run fail.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import sys
import time
import traceback
from pathlib import Path

from _reliability_doc import write_section  # tools/ is on sys.path when run

from nats_sync import _proto as proto
from nats_sync.errors import ProtocolError

ROOT = Path(__file__).resolve().parents[1]
CRASHES = ROOT / "fuzz-crashes"
MAX_OPS_PER_INPUT = 100_000


def valid_frame(rng: random.Random) -> bytes:
    kind = rng.randrange(7)
    subject = rng.choice(["a", "orders.new", "_INBOX.x.1", "é.ü"]).encode()
    payload = rng.randbytes(rng.choice([0, 1, 5, 64, 300]))
    if kind == 0:
        return b"MSG %b %d %d\r\n%b\r\n" % (subject, rng.randrange(1, 99), len(payload), payload)
    if kind == 1:
        block = proto.encode_headers({"k": ["1", "2"], "X": "y"})
        return b"HMSG %b 1 r %d %d\r\n%b%b\r\n" % (subject, len(block), len(block) + len(payload),
                                                    block, payload)
    if kind == 2:
        return b"INFO " + json.dumps({"server_id": "x", "max_payload": 1048576}).encode() + b"\r\n"
    controls = [b"PING\r\n", b"PONG\r\n", b"+OK\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"]
    return controls[kind - 3]


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        choice = rng.randrange(6)
        position = rng.randrange(len(buf) + 1)
        if choice == 0 and buf:
            buf[min(position, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1:
            buf[position:position] = rng.randbytes(rng.randrange(1, 8))
        elif choice == 2 and buf:
            del buf[position:position + rng.randrange(1, 8)]
        elif choice == 3:
            del buf[position:]
        elif choice == 4:
            number = rng.choice([b"999999999999", b"-1", b"18446744073709551616", b"0x10"])
            digits = [i for i, byte in enumerate(buf) if 48 <= byte <= 57]
            if digits:
                at = rng.choice(digits)
                buf[at:at + 1] = number
        else:
            buf[position:position] = b"\r\n"
    return bytes(buf)


def one_input(rng: random.Random) -> bytes:
    if rng.random() < 0.1:
        return rng.randbytes(rng.randrange(1, 512))
    stream = b"".join(valid_frame(rng) for _ in range(rng.randrange(1, 6)))
    return mutate(stream, rng) if rng.random() < 0.9 else stream


def run_input(data: bytes, rng: random.Random) -> None:
    parser = proto.Parser()
    fed = 0
    count = min(max(len(data) - 1, 0), rng.randrange(0, 4))
    cuts = sorted(rng.sample(range(1, len(data)), count)) if count else []
    try:
        for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
            parser.feed(data[start:end])
            fed += end - start
            for _ in range(MAX_OPS_PER_INPUT):
                if parser.next_op() is None:
                    break
            else:
                raise AssertionError("the drain loop did not end")
            if parser.buffered > fed:
                raise AssertionError(f"parser holds {parser.buffered} bytes of {fed} fed")
    except ProtocolError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "RELIABILITY.md")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    started = time.monotonic()
    tried = crashes = 0
    while time.monotonic() - started < args.seconds:
        data = one_input(rng)
        tried += 1
        try:
            run_input(data, rng)
        except Exception:
            crashes += 1
            CRASHES.mkdir(exist_ok=True)
            (CRASHES / f"crash-{tried}.bin").write_bytes(data)
            (CRASHES / f"crash-{tried}.txt").write_text(traceback.format_exc())
        if tried % 50_000 == 0:
            print(f"  {tried:,} inputs, {crashes} crashes", flush=True)
    elapsed = time.monotonic() - started
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    write_section(args.output, "fuzz", f"""## Parser fuzzing (`make fuzz`)

{tried:,} inputs in {elapsed:.0f} s (seed {seed}): valid server streams from the encoder,
mutated (bit flips, insertions, deletions, truncation, size fields replaced by huge or
negative numbers) or random bytes, each fed in random splits. Outcomes other than ops or
`ProtocolError`, drain loops that do not end, or a parser holding more than it was fed:
**{crashes}**. Run on {when}, Python {platform.python_version()}; the property tests in
tests/unit/test_roundtrip.py run a bounded version in `make test`.
""")
    print(f"{tried:,} inputs, {crashes} crashes in {elapsed:.0f} s; wrote {args.output}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())

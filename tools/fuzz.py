#!/usr/bin/env python3
"""Fuzzes the sans-IO parser for a bounded time (``make fuzz``); writes section ``fuzz`` of
docs/RELIABILITY.md.

What is checked, for every input (`check`): the input is fed to a fresh
``nats_sync._core.proto.Parser`` whole, and again cut into chunks at a few points, draining
after every chunk (``next_op()`` until it returns None) as the reader thread does. Then:

- the only exception that may come out is ``ProtocolError``;
- every drain loop ends (a cap of one call per byte fed is never reached);
- ``parser.buffered`` never exceeds the number of bytes fed so far;
- a stream that has no CRLF at all raises once it is longer than the 4,096-byte control
  line limit (a trailing CR may be the first half of a CRLF and does not count);
- the ops returned, and whether a ``ProtocolError`` came, do not depend on the cuts.

Inputs: streams of valid server frames (MSG, HMSG with headers and status lines, INFO,
PING, PONG, +OK, -ERR), mutated (bit flips, inserted random bytes or protocol tokens,
deletions, truncation, size fields replaced by huge or negative numbers, duplicated
slices), plus plain random bytes.

Engines: ``atheris`` (coverage-guided libFuzzer, in a child process, with the mutations
above as a custom mutator next to libFuzzer's own) when it is installed, else a long
``hypothesis`` run. An input that breaks a property is saved under fuzz-crashes/ (with
its traceback) and makes the run exit 1; ``--replay FILE`` runs a saved input again.

The generators and `check` are shared with tests/unit/test_parser_fuzz.py, which runs a
bounded version of this in ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from nats_sync._core.proto import Parser, ServerOp, encode_headers
from nats_sync._defaults import MAX_CONTROL_LINE
from nats_sync.errors import ProtocolError

CRASHES = Path(__file__).resolve().parent.parent / "fuzz-crashes"
DEFAULT_SECONDS = 300.0
#: Largest input libFuzzer builds (room for lines past the control line limit).
MAX_INPUT = 16_384
#: Crashing inputs saved per run at most (a deterministic bug is found again and again).
MAX_SAVED = 50

_CRLF = b"\r\n"

# --- the properties -------------------------------------------------------------------


class PropertyViolationError(AssertionError):
    """The parser did something other than return ops or raise ProtocolError."""


@dataclass
class Outcome:
    """What one feeding of an input gave: the ops, then possibly a ProtocolError."""

    ops: list[ServerOp] = field(default_factory=list)
    error: ProtocolError | None = None


def chunks(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (any order, duplicates and out-of-range points ignored)."""
    points = sorted({cut for cut in cuts if 0 < cut < len(data)})
    return [data[a:b] for a, b in itertools.pairwise([0, *points, len(data)])]


def feed(data: bytes, cuts: Sequence[int] = ()) -> Outcome:
    """Feeds ``data`` in chunks, draining after each, and checks the per-chunk bounds.

    Returns at the first ProtocolError. Any other exception propagates; a broken bound
    raises `PropertyViolationError`.
    """
    parser = Parser()
    outcome = Outcome()
    first_crlf = data.find(_CRLF)
    fed = 0
    for chunk in chunks(data, cuts):
        parser.feed(chunk)
        fed += len(chunk)
        cap = fed + 2  # every op consumes at least 3 bytes: one call per byte is plenty
        for _ in range(cap):
            try:
                op = parser.next_op()
            except ProtocolError as err:
                outcome.error = err
                _check_buffered(parser, fed)
                return outcome
            if op is None:
                break
            outcome.ops.append(op)
        else:
            raise PropertyViolationError(
                f"the drain loop did not end after {cap} next_op() calls ({fed} bytes fed)"
            )
        _check_buffered(parser, fed)
        if first_crlf < 0 or first_crlf + 2 > fed:
            line = fed - (1 if data[fed - 1 : fed] == b"\r" else 0)
            if line > MAX_CONTROL_LINE:
                raise PropertyViolationError(
                    f"{fed} bytes without a CRLF and no ProtocolError (limit {MAX_CONTROL_LINE})"
                )
    return outcome


def _check_buffered(parser: Parser, fed: int) -> None:
    held = parser.buffered
    if not 0 <= held <= fed:
        raise PropertyViolationError(f"parser.buffered is {held} after {fed} bytes fed")


def feed_batches(data: bytes, cuts: Sequence[int] = ()) -> Outcome:
    """As :func:`feed`, but drains with ``next_ops`` (the reader thread's way), which
    must return exactly what ``next_op`` returns, the error after the ops before it."""
    parser = Parser()
    outcome = Outcome()
    fed = 0
    for chunk in chunks(data, cuts):
        parser.feed(chunk)
        fed += len(chunk)
        for _ in range(fed + 2):
            try:
                batch = parser.next_ops()
            except ProtocolError as err:
                outcome.error = err
                return outcome
            if not batch:
                break
            outcome.ops.extend(batch)
        else:
            raise PropertyViolationError(f"next_ops() kept returning ops ({fed} bytes fed)")
        _check_buffered(parser, fed)
    return outcome


def check(data: bytes, cuts: Sequence[int]) -> Outcome:
    """Every property, on ``data`` fed whole and cut at ``cuts``; returns the whole run."""
    whole = feed(data)
    split = feed(data, cuts)
    if whole.ops != split.ops or (whole.error is None) != (split.error is None):
        raise PropertyViolationError(
            f"cutting the input at {sorted(set(cuts))} changed the result: whole gave "
            f"{len(whole.ops)} ops and {whole.error!r}, cut gave {len(split.ops)} ops and "
            f"{split.error!r}"
        )
    for batched in (feed_batches(data), feed_batches(data, cuts)):
        if batched.ops != whole.ops or (batched.error is None) != (whole.error is None):
            raise PropertyViolationError(
                f"next_ops() and next_op() disagree (cuts {sorted(set(cuts))}): "
                f"{len(batched.ops)} ops and {batched.error!r} against {len(whole.ops)} ops "
                f"and {whole.error!r}"
            )
    return whole


def cuts_for(data: bytes) -> list[int]:
    """A few cut points derived from the bytes themselves (reproducible from a file)."""
    rng = random.Random(zlib.crc32(data))
    if len(data) < 2:
        return []
    return sorted(rng.randrange(1, len(data)) for _ in range(rng.randrange(1, 9)))


# --- inputs ---------------------------------------------------------------------------
# One set of generators serves both random.Random (atheris seeds and mutator) and
# hypothesis (tests, fallback engine): they take a `Pick`.


class Pick:
    """The choices a generator makes: ``pick(n)`` is a number in ``range(n)``."""

    def __call__(self, n: int) -> int:
        raise NotImplementedError

    def bytes(self, max_size: int) -> bytes:
        """Up to ``max_size`` arbitrary bytes."""
        raise NotImplementedError


class RandomPick(Pick):
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def __call__(self, n: int) -> int:
        return self.rng.randrange(n) if n > 1 else 0

    def bytes(self, max_size: int) -> bytes:
        return self.rng.randbytes(self.rng.randrange(max_size + 1))


class DrawPick(Pick):
    """Draws from hypothesis: shrinks towards 0, the first and simplest choice."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def __call__(self, n: int) -> int:
        return self.data.draw(st.integers(0, n - 1)) if n > 1 else 0

    def bytes(self, max_size: int) -> bytes:
        return self.data.draw(st.binary(max_size=max_size))


SUBJECTS = [b"a", b"orders.new", b"_INBOX.9xIr2Rn1Yz.17", "é.ü".encode(), b"s" * 200]
PAYLOADS = [b"", b"hello", b"\r\n", b"MSG a 1 0\r\n", b"NATS/1.0\r\n\r\n", bytes(range(256))]
HEADER_BLOCKS = [
    encode_headers({"k": "v"}),
    encode_headers({"k": ["1", "2"], "X-Trace": "é"}),
    encode_headers({}, status=503),
    encode_headers({"Nats-Pending-Messages": "1"}, status=408, description="Request Timeout"),
    b"NATS/1.0\r\n\r\n",
]
INFOS = [
    {
        "server_id": "NCXYZ",
        "version": "2.10.0",
        "proto": 1,
        "max_payload": 1048576,
        "headers": True,
    },
    {},
    {"connect_urls": ["10.0.0.1:4222", "[::1]:4222"], "ldm": True},
    {"nonce": "abc", "auth_required": True, "tls_required": False, "xkey": None},
]
CONTROLS = [
    b"PING\r\n",
    b"PONG\r\n",
    b"+OK\r\n",
    b"-ERR 'Unknown Protocol Operation'\r\n",
    b"-ERR 'Permissions Violation for Subscription to \"x\"'\r\n",
    b"-ERR\r\n",
    b"ping\r\n",
]
#: Replacements for a run of digits (a size, a sid): huge, negative, not a number.
NUMBERS = [
    b"-1",
    b"0",
    b"-0",
    b"+5",
    b"4294967296",
    b"18446744073709551616",
    b"99999999999999999999999999999999",
    b"1" + b"0" * 400,
    b"0x10",
    b"1e3",
    b"",
    b"1114113",
    b"9223372036854775808",
]
#: Bytes worth inserting: line ends, separators, op names, the header version line.
TOKENS = [
    b"\r\n",
    b"\r",
    b"\n",
    b" ",
    b"\t",
    b"MSG ",
    b"HMSG ",
    b"INFO ",
    b"NATS/1.0\r\n",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"{",
    b"'",
]
_DIGITS = re.compile(rb"\d+")


def payload(pick: Pick) -> bytes:
    kind = pick(3)
    if kind == 0:
        return PAYLOADS[pick(len(PAYLOADS))]
    if kind == 1:
        return pick.bytes(48)
    return b"x" * pick(6000)  # bodies past the control line limit, and past a read


def frame(pick: Pick) -> bytes:
    """One valid server frame."""
    kind = pick(5)
    subject = SUBJECTS[pick(len(SUBJECTS))]
    reply = b"" if pick(2) == 0 else b" " + SUBJECTS[pick(len(SUBJECTS))]
    sid = b"%d" % (1 + pick(2**64 - 1) if pick(4) == 0 else 1 + pick(99))
    if kind == 0:
        body = payload(pick)
        return b"MSG %b %b%b %d\r\n%b\r\n" % (subject, sid, reply, len(body), body)
    if kind == 1:
        block = HEADER_BLOCKS[pick(len(HEADER_BLOCKS))]
        body = payload(pick)
        return b"HMSG %b %b%b %d %d\r\n%b%b\r\n" % (
            subject,
            sid,
            reply,
            len(block),
            len(block) + len(body),
            block,
            body,
        )
    if kind == 2:
        return b"INFO %b\r\n" % json.dumps(INFOS[pick(len(INFOS))]).encode()
    return CONTROLS[pick(len(CONTROLS))]


def stream(pick: Pick) -> bytes:
    """One to six valid frames."""
    return b"".join(frame(pick) for _ in range(1 + pick(6)))


def mutate(data: bytes, pick: Pick) -> bytes:
    """One to four mutations of ``data``."""
    buf = bytearray(data)
    for _ in range(1 + pick(4)):
        kind = pick(8)
        at = pick(len(buf) + 1)
        if kind == 0 and buf:  # flip a bit
            buf[min(at, len(buf) - 1)] ^= 1 << pick(8)
        elif kind == 1:  # insert random bytes
            buf[at:at] = pick.bytes(8) or b"\x00"
        elif kind == 2:  # insert a protocol token
            buf[at:at] = TOKENS[pick(len(TOKENS))]
        elif kind == 3:  # delete a few bytes
            del buf[at : at + 1 + pick(8)]
        elif kind == 4:  # truncate
            del buf[at:]
        elif kind == 5:  # a size field (or any number) becomes huge, negative, not a number
            runs = list(_DIGITS.finditer(buf))
            if runs:
                run = runs[pick(len(runs))]
                buf[run.start() : run.end()] = NUMBERS[pick(len(NUMBERS))]
        elif kind == 6:  # duplicate a slice
            buf[at:at] = buf[at : at + 1 + pick(64)]
        elif buf:  # overwrite one byte
            buf[min(at, len(buf) - 1)] = pick(256)
    return bytes(buf)


def fuzz_input(pick: Pick) -> bytes:
    """What the fuzzers feed: mostly mutated streams, some valid ones and random bytes."""
    kind = pick(10)
    if kind == 0:
        return stream(pick)
    if kind == 1:
        return pick.bytes(600)
    return mutate(stream(pick), pick)


def draw_cuts(data: st.DataObject, size: int) -> list[int]:
    return data.draw(st.lists(st.integers(0, size), max_size=8), label="cuts")


# --- crashes --------------------------------------------------------------------------


def save_crash(data: bytes, cuts: Sequence[int], error: str, folder: Path = CRASHES) -> Path:
    """Writes the input (``crash-<sha1>.bin``) and how it failed (``.json``)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = "crash-" + hashlib.sha1(data).hexdigest()[:16]
    (folder / f"{name}.bin").write_bytes(data)
    (folder / f"{name}.json").write_text(
        json.dumps(
            {
                "cuts": list(cuts),
                "error": error,
                "replay": f"python -m tools.fuzz --replay fuzz-crashes/{name}.bin",
            },
            indent=1,
        )
        + "\n"
    )
    return folder / f"{name}.bin"


def replay(path: Path) -> int:
    data = path.read_bytes()
    sidecar = path.with_suffix(".json")
    cuts = json.loads(sidecar.read_text())["cuts"] if sidecar.exists() else cuts_for(data)
    print(f"{path}: {len(data)} bytes, cuts {cuts}")
    outcome = check(data, cuts)  # raises what the fuzzer saw
    print(f"no failure: {len(outcome.ops)} ops, then {outcome.error!r}")
    return 0


@dataclass
class Result:
    engine: str
    seconds: float = 0.0
    tried: int = 0
    crashes: int = 0
    saved: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)
    details: list[str] = field(default_factory=list)


def crash_kind(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(error).__name__} at {where}"


# --- engine: hypothesis ---------------------------------------------------------------


def run_hypothesis(seconds: float, seed: int) -> Result:
    """Batches of hypothesis examples until ``seconds`` have passed."""
    result = Result("hypothesis")
    rng = random.Random(seed)
    stop = time.monotonic() + seconds
    last: dict[str, Any] = {}

    @settings(
        max_examples=500,
        deadline=None,
        database=None,
        phases=(Phase.generate, Phase.shrink),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        text = fuzz_input(DrawPick(data))
        cuts = draw_cuts(data, len(text))
        result.tried += 1
        last["input"] = (text, cuts)
        check(text, cuts)

    started = time.monotonic()
    while time.monotonic() < stop:
        last.clear()
        hypothesis_seed(rng.randrange(2**32))(prop)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                prop()
        except Exception as error:  # the shrunk example was replayed last
            result.crashes += 1
            kind = crash_kind(error)
            text, cuts = last["input"]
            if kind not in result.kinds and len(result.saved) < MAX_SAVED:
                path = save_crash(text, cuts, "".join(traceback.format_exception(error)))
                result.saved.add(path.name)
                print(f"  crash: {kind}: saved {path}", flush=True)
            result.kinds.add(kind)
        print(
            f"  {result.tried:,} inputs, {result.crashes} crashes, "
            f"{time.monotonic() - started:.0f} s",
            flush=True,
        )
    result.seconds = time.monotonic() - started
    return result


# --- engine: atheris (libFuzzer) ------------------------------------------------------


def atheris_available() -> bool:
    try:
        import atheris  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _instrument_parser(atheris: Any) -> None:
    """Adds coverage feedback to the parser's code (and the header decoder's)."""
    from nats_sync._core.proto import headers, parser  # noqa: PLC0415

    for module in (parser, headers):
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) != module.__name__:
                continue
            members = vars(value).values() if isinstance(value, type) else [value]
            for member in members:
                function = getattr(member, "__func__", member)
                if hasattr(function, "__code__"):
                    atheris.instrument_func(function)
                elif isinstance(member, property) and member.fget is not None:
                    atheris.instrument_func(member.fget)


def atheris_worker(crash_log: Path, crash_dir: Path, libfuzzer_args: list[str]) -> None:
    """Runs inside the child: libFuzzer calls `one_input` until -max_total_time."""
    import atheris  # noqa: PLC0415

    _instrument_parser(atheris)
    seen: set[str] = set()

    def one_input(data: bytes) -> None:
        cuts = cuts_for(data)
        try:
            check(data, cuts)
        except Exception as error:
            kind = crash_kind(error)
            saved = ""
            if kind not in seen and len(seen) < MAX_SAVED:
                seen.add(kind)
                saved = save_crash(
                    data, cuts, "".join(traceback.format_exception(error)), crash_dir
                ).name
            with crash_log.open("a") as log:
                log.write(json.dumps({"kind": kind, "saved": saved}) + "\n")

    def mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        roll = rng.random()
        if roll < 0.3:
            data = mutate(data, RandomPick(rng))
        elif roll < 0.4:  # splice a fresh valid frame in
            at = rng.randrange(len(data) + 1)
            data = data[:at] + frame(RandomPick(rng)) + data[at:]
        else:
            data = atheris.Mutate(data, max_size)
        return data[:max_size]

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input, custom_mutator=mutator)
    atheris.Fuzz()


def _dictionary(path: Path) -> None:
    words = {
        *TOKENS,
        b"PING",
        b"PONG",
        b"+OK",
        b"-ERR",
        b"NATS/1.0",
        b"503",
        b"\r\n\r\n",
        b"max_payload",
        b"connect_urls",
        b"ldm",
    }
    lines = ['"' + "".join(f"\\x{byte:02X}" for byte in word) + '"' for word in sorted(words)]
    path.write_text("\n".join(lines) + "\n")


def run_atheris(seconds: float, seed: int) -> Result:
    """libFuzzer in a child process (it exits the process when done), restarted after a
    crash libFuzzer itself catches (a hang, running out of memory) until time is up."""
    result = Result("atheris")
    work = Path(tempfile.mkdtemp(prefix="nats-sync-fuzz-"))
    corpus, artifacts, crash_log = work / "corpus", work / "artifacts", work / "crashes.jsonl"
    corpus.mkdir()
    artifacts.mkdir()
    rng = random.Random(seed)
    pick = RandomPick(rng)
    for index in range(300):
        sample = stream(pick) if index < 200 else mutate(stream(pick), pick)
        (corpus / f"seed-{index}").write_bytes(sample[:MAX_INPUT])
    _dictionary(work / "nats.dict")
    started = time.monotonic()
    coverage = ""
    try:
        for run in itertools.count():
            left = seconds - (time.monotonic() - started)
            if left < 1 or run >= 20:
                break
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--atheris-worker",
                str(crash_log),
                str(CRASHES),
                "--",
                str(corpus),
                f"-max_total_time={max(1, int(left))}",
                f"-max_len={MAX_INPUT}",
                f"-dict={work / 'nats.dict'}",
                "-timeout=20",
                "-rss_limit_mb=2048",
                f"-artifact_prefix={artifacts}/",
                "-print_final_stats=1",
                f"-seed={rng.randrange(1, 2**31)}",
                "-reload=0",
            ]
            log_path = work / f"libfuzzer-{run}.log"
            with log_path.open("wb") as log:
                try:
                    code = subprocess.run(
                        command,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        timeout=left + 120,
                        check=False,
                    ).returncode
                except subprocess.TimeoutExpired:
                    code = -1
                    result.details.append("a libFuzzer child overran its time and was killed")
            text = log_path.read_text(errors="replace")
            executed = re.findall(r"stat::number_of_executed_units:\s*(\d+)", text)
            progress = re.findall(r"^#(\d+)\s", text, re.M)
            result.tried += (
                int(executed[-1]) if executed else (int(progress[-1]) if progress else 0)
            )
            if found := re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", text):
                coverage = "coverage at the end: {} edges, {} features, {} corpus inputs".format(
                    *found[-1]
                )
            if code != 0:  # libFuzzer caught something Python could not (hang, OOM, signal)
                result.crashes += 1
                summary = re.findall(r"SUMMARY: libFuzzer: (.+)", text)
                result.kinds.add(f"libFuzzer: {summary[-1].strip() if summary else code}")
                CRASHES.mkdir(exist_ok=True)
                for artifact in artifacts.iterdir():
                    culprit = artifact.read_bytes()
                    for entry in corpus.iterdir():  # the next child must not start on it
                        if entry.read_bytes() == culprit:
                            entry.unlink()
                    shutil.move(str(artifact), CRASHES / artifact.name)
                    result.saved.add(artifact.name)
                shutil.copy(log_path, CRASHES / f"libfuzzer-exit-{code}-{run}.log")
                print(text[-3000:], file=sys.stderr)
            else:
                break
        if crash_log.exists():
            for line in crash_log.read_text().splitlines():
                entry = json.loads(line)
                result.crashes += 1
                result.kinds.add(entry["kind"])
                if entry["saved"]:
                    result.saved.add(entry["saved"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if coverage:
        result.details.append(coverage)
    result.seconds = time.monotonic() - started
    return result


# --- the page -------------------------------------------------------------------------


def section(result: Result, requested: float, seed: int, when: str) -> str:
    shortened = (
        f" This was a shortened run ({requested:.0f} s); `make fuzz` runs "
        f"{DEFAULT_SECONDS / 60:.0f} minutes by default."
        if requested < DEFAULT_SECONDS
        else ""
    )
    engine = (
        "atheris (libFuzzer, coverage-guided on the parser's code; libFuzzer's "
        "mutations plus the ones above as a custom mutator), seeded with 300 valid "
        "and mutated streams"
        if result.engine == "atheris"
        else "hypothesis (atheris not installed): batches of generated inputs"
    )
    found = (
        "none"
        if not result.crashes
        else f"**{result.crashes:,}** ({len(result.kinds)} distinct: "
        + "; ".join(sorted(result.kinds))
        + "; inputs in fuzz-crashes/)"
    )
    details = "".join(f"\n- {detail}" for detail in result.details)
    return f"""## Parser fuzzing (`make fuzz`)

Every input goes to a fresh `Parser` whole and again cut at a few points, draining
after every chunk as the reader thread does. Checked: only `ProtocolError` comes out;
every drain loop ends (capped at one `next_op()` call per byte fed, never reached);
`parser.buffered` never exceeds the bytes fed; a stream with no CRLF raises once it is
past the 4,096-byte control line limit; cutting the input changes neither the ops
returned nor whether an error came. Inputs: streams of valid server frames (MSG, HMSG
with headers and status lines, INFO, PING, PONG, +OK, -ERR) with bit flips, inserted
bytes and protocol tokens, deletions, truncation, size fields replaced by huge or
negative numbers, duplicated slices; and random bytes.

| figure | value |
|---|---:|
| engine | {result.engine} |
| run time | {result.seconds:.0f} s |
| inputs tried (each fed whole and cut) | {result.tried:,} |
| inputs per second | {result.tried / max(result.seconds, 1e-9):,.0f} |
| **inputs breaking a property** | **{result.crashes:,}** |

- Engine: {engine}.{details}
- Failures found: {found}.
- Run on {when}, Python {platform.python_version()}, seed {seed}.{shortened}

`tests/unit/test_parser_fuzz.py` checks the same properties with hypothesis in
`make test` (a few seconds). A saved input is replayed with
`.venv/bin/python -m tools.fuzz --replay fuzz-crashes/crash-....bin`.
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--atheris-worker"]:
        atheris_worker(Path(argv[1]), Path(argv[2]), argv[4:])
        return 0
    # Imported here, not at the top: tests/unit/test_parser_fuzz.py loads this file by its
    # path, outside the tools package, and the atheris worker above runs it as a script.
    from tools._reliability_doc import DEFAULT_PAGE, run_date, write_section  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--seconds", type=float, default=DEFAULT_SECONDS, help="how long to fuzz (default: 300)"
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "atheris", "hypothesis"),
        default="auto",
        help="auto: atheris when installed, else hypothesis",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_PAGE,
        help="page whose `fuzz` section is written (default: docs/RELIABILITY.md)",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        default=None,
        help="run one saved input (fuzz-crashes/crash-*.bin) and exit",
    )
    args = parser.parse_args(argv)
    if args.replay is not None:
        return replay(args.replay)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if atheris_available() else "hypothesis"
    when = run_date()
    print(f"fuzzing the parser with {engine} for {args.seconds:.0f} s (seed {seed})", flush=True)
    if engine == "atheris":
        result = run_atheris(args.seconds, seed)
    else:
        result = run_hypothesis(args.seconds, seed)

    write_section("fuzz", section(result, args.seconds, seed, when), args.output)
    print(
        f"{result.tried:,} inputs in {result.seconds:.0f} s, {result.crashes} breaking a "
        f"property{': ' + ', '.join(sorted(result.kinds)) if result.kinds else ''}; "
        f"wrote section fuzz of {args.output}"
    )
    return 1 if result.crashes else 0


if __name__ == "__main__":
    sys.exit(main())

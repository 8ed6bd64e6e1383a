"""A bounded run of the parser fuzzer behind `make fuzz` (fixed seeds, ~20,000 inputs)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _fuzz_module() -> ModuleType:
    sys.path.insert(0, str(TOOLS))  # fuzz.py imports its sibling _reliability_doc
    try:
        spec = importlib.util.spec_from_file_location("nats_sync_fuzz_tool", TOOLS / "fuzz.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(TOOLS))


@pytest.mark.parametrize("seed", range(4))
def test_mutated_streams_give_ops_or_protocol_errors_only(seed: int) -> None:
    fuzz = _fuzz_module()
    rng = random.Random(seed)
    for _ in range(5_000):
        # run_input raises anything but ProtocolError, or an AssertionError on a bound
        fuzz.run_input(fuzz.one_input(rng), rng)


def test_the_mutator_really_produces_protocol_errors() -> None:
    fuzz = _fuzz_module()
    rng = random.Random(7)
    from nats_sync._proto import Parser
    from nats_sync.errors import ProtocolError

    errors = 0
    for _ in range(2_000):
        parser = Parser()
        parser.feed(fuzz.one_input(rng))
        try:
            while parser.next_op() is not None:
                pass
        except ProtocolError:
            errors += 1
    assert errors > 100  # the fuzzer is not just feeding valid streams

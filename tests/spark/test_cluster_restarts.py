"""A streaming query rides through kill -9s of the nodes of its 3-node JetStream
cluster: row ``spark_kill_async`` of ``make reliability`` (the same harness,
tools/_sparkfaults.py) with 45 s of input.

IN -> OUT (both R3) on the session's ``local[2]`` while a random node gets kill -9
every 6 s and starts again on its ports 3 s later: the query must never die (the
harness restarts a dead query from its checkpoint and counts the death), and OUT must
hold every message of IN once, none left behind.

One publish mode keeps it short: async. Under this fault fast dies as often (most
deaths come from the source's driver-side calls and its read tasks, which both modes
share); async's deaths are only server calls timing out on a killed node, the thing a
retry policy is for.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools._sparkfaults import run_spark_row, spark_row, summary  # noqa: E402

#: The row's own bound: ~15 s of set-up, 45 s of input, up to 30 s of publishing the
#: rest and of catching up, the read-back; the query's stop is bounded at 60 s.
pytestmark = pytest.mark.timeout(180)

INPUT_SECONDS = 45.0


def test_a_streaming_query_rides_through_node_kills_without_dying_losing_or_doubling(
    spark: Any,
) -> None:
    result = run_spark_row(
        spark, spark_row("spark_kill_async"), input_seconds=INPUT_SECONDS, seed=1
    )
    figures = summary(result)
    assert result.error is None, figures
    assert len(result.faults) >= 4, f"too few kills to mean anything: {figures}"
    assert result.tally.stored_in >= 0.8 * 300 * INPUT_SECONDS, figures
    deaths = [death.summary for death in result.deaths]
    assert not deaths, f"the query died {len(deaths)} times:\n" + "\n".join(deaths) + f"\n{figures}"
    assert result.tally.missing == [], figures
    assert result.tally.duplicated == 0, figures
    assert result.tally.lag == 0, figures
    assert spark.streams.active == [], "the row left a query running"

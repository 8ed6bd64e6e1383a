"""examples/demo.py, what ``make demo`` runs (the lookup job of examples/spark_lookup.py,
then the pipeline of examples/spark_jetstream_pipeline.py on the same session), runs end
to end on a small dataset and says nothing on stderr.

One subprocess for both jobs: Spark starts once, as in ``make demo``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nats_sync.spark._jetstream import source

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"
#: The pipeline's line after its first run.
STOPPED = r"query stopped between micro-batches: ([\d,]+) orders read, next to read seq (\d+)"

#: What stderr must not hold: a Python traceback (pyspark's source runner cut off by a
#: stop), a Spark error or a Java stack (a task aborted by a stop), any exception; and
#: nothing a user would take for a problem: JVM, log4j, Spark start-up or pandas warnings
#: (examples/spark_session.py, examples/log4j2.properties, setup.cfg's pandas cap).
NOISE = ("Traceback", "ERROR", "\tat ", "Exception", "WARN", "Warning", "log4j", "log level")


# The pipeline reads with maxOffsetsPerTrigger (admission control, new in pyspark 4.2).
@pytest.mark.skipif(
    source.ReadMaxRows is None, reason="the demo's maxOffsetsPerTrigger needs pyspark >= 4.2"
)
@pytest.mark.timeout(330)
def test_the_demo_runs_both_jobs_and_stops_its_query_quietly(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(DEMO),
            "--rows",
            "3000",
            "--orders",
            "3000",
            "--master",
            "local[2]",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    out = done.stdout
    noise = [line for line in done.stderr.splitlines() if any(word in line for word in NOISE)]
    assert noise == [], "\n".join(noise[:40])
    assert "Traceback" not in out

    # The lookup job.
    assert "rows enriched      3,000" in out
    assert "failed lookups     30 " in out  # 1 in 100 SKUs is unknown by design
    assert "summary on NATS    8 messages" in out
    assert "  category   orders       revenue" in out  # the summary has headings
    assert re.search(r"\s0 / [\d,]+ lookups served", out) is None  # no line of zeros
    assert any((tmp_path / "lookup" / "enriched").glob("*.parquet"))

    # The pipeline: 1,800 orders, a fifth of the 3,000 per micro-batch; stopped between
    # two micro-batches (whole ones: 600 sequences each), then restarted where it stopped.
    assert "stored 1,800 orders in stream ORDERS" in out
    stopped = re.search(STOPPED, out)
    assert stopped, out
    read = int(stopped[1].replace(",", ""))
    assert read in (600, 1200, 1800)
    assert int(stopped[2]) == read + 1  # the stream has no gaps: sequences 1 .. read
    assert f"restarted from its checkpoint at seq {read + 1}," in out
    assert "3,000 orders published, 3,000 rows landed, 0 missing, 0 duplicated" in out
    assert any((tmp_path / "pipeline" / "orders").glob("*.parquet"))

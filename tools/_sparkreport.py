"""The ``spark`` section of docs/RELIABILITY.md: the Spark rows' table, notes and method
(the rows themselves run in ``tools/_sparkfaults.py``)."""

from __future__ import annotations

from collections import Counter

from tools._reliability_doc import MergedRows, kept_sentence, row_notes
from tools._sparkfaults import (
    CATCH_UP,
    DUPLICATE_WINDOW,
    GAP_LIMIT,
    INPUT_SECONDS,
    KILL_DOWN,
    KILL_EVERY,
    MAX_OFFSETS,
    RATE,
    STEPDOWN_EVERY,
    TRIGGER,
    WORKER_KILL_EVERY,
    SparkResult,
)

SECTION = "spark"


def table_header() -> list[str]:
    return [
        "| fault | input | faults | in | out | **missing** | **duplicated** "
        "| **query restarts** | longest gap | lag at the end |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]


def fmt_gap(r: SparkResult) -> str:
    gap = r.longest_gap
    return "-" if gap is None else f"{gap[0]:.1f} s"


def table_row(r: SparkResult) -> str:
    t = r.tally
    return (
        f"| {r.title} | {r.input_seconds:.0f} s | {len(r.faults)} "
        f"| {t.stored_in:,} | {t.stored_out:,} | **{len(t.missing):,}** "
        f"| **{t.duplicated:,}** | **{r.restarts}** | {fmt_gap(r)} | {t.lag:,} |"
    )


def note_line(r: SparkResult) -> str | None:
    """The row's notes: why the query died, what the longest gap spanned, the rest."""
    items: list[str] = []
    if r.deaths:
        causes = Counter(d.summary for d in r.deaths)
        items.append(
            "the query died: "
            + "; ".join(f"{n} x {cause}" if n > 1 else cause for cause, n in causes.items())
        )
    gap = r.longest_gap
    if gap is not None:
        during = Counter(r.faults_during(gap[1], gap[2]))
        dead = sum(1 for d in r.deaths if gap[1] <= d.at <= gap[2])
        spans = ", ".join(f"{n} x {what}" if n > 1 else what for what, n in during.items())
        items.append(
            f"the longest gap ({gap[0]:.1f} s) spanned "
            + (spans or "no fault")
            + (f" and {dead} death{'s' * (dead > 1)} of the query" if dead else "")
        )
    t = r.tally
    if t.missing:
        items.append(f"**missing** IN sequences: {len(t.missing):,}, first {t.missing[:10]}")
    if t.foreign:
        items.append(f"**{t.foreign} messages in OUT without an IN:<seq> id**")
    if r.caught_up_after is None:
        items.append(
            f"the query had not reached IN's last sequence {CATCH_UP:.0f} s after the input stopped"
        )
    else:
        items.append(f"caught up {r.caught_up_after:.0f} s after the input stopped")
    items.append(f"{sum(1 for b in r.batches if b.rows):,} micro-batches with rows")
    if r.publish_retries:
        items.append(f"the publisher retried {r.publish_retries:,} publishes into IN (same id)")
    items += r.notes
    return row_notes(r.title, items, r.error)


def intro() -> list[str]:
    """The section's heading, promise and method (up to its results)."""
    return [
        "## Spark streaming through cluster faults",
        "",
        "What the `jetstream` source and sink aim for when the NATS cluster (or Spark's",
        "Python worker) fails under a running streaming query:",
        "",
        "- **The query rides through**: it does not die (0 query restarts), and",
        f"  micro-batches resume within {GAP_LIMIT:.0f} s while a node is down.",
        "- **Every message once**: what the source reads lands in the sink's stream",
        "  once, none missing, none twice (message ids and the sink's commit log).",
        "",
        "### Method",
        "",
        "A 3-node JetStream cluster (`nats_sync.testing.NatsCluster(3, jetstream=True)`,",
        f"file storage) with R3 streams `IN` and `OUT` ({DUPLICATE_WINDOW:.0f} s duplicate",
        "window; `OUT` with `allow_batched` for `publishMode` `fast`) and the sink's commit",
        "bucket `spark_commits`, R3. A publisher stores numbered messages in `IN` with",
        f"`js.publish` (8 threads) and a message id each, ~{RATE} a second, and publishes",
        "again with the same id what was not acknowledged. One streaming query on",
        '`local[2]`: `spark.readStream.format("jetstream")` (stream `IN`,',
        f'`maxOffsetsPerTrigger` {MAX_OFFSETS}, `processingTime="{TRIGGER}"`) into',
        '`writeStream.format("jetstream")` (subject `out.all`, `msgIdColumns`',
        "`stream,seq`), every node's URL in the connect options, in both publish modes.",
        "The harness restarts the query from its checkpoint whenever it dies (as a job",
        "scheduler would), counting each death and keeping its error.",
        "",
        "The publisher starts before the query; the input goes on for the row's input",
        f"time (**input**, {INPUT_SECONDS:.0f} s by default) from the query's first",
        "micro-batch, and the fault runs from 3 s after that micro-batch until the input",
        "stops:",
        "",
        f"1. **kill -9** of a random node every {KILL_EVERY:.0f} s, down {KILL_DOWN:.0f} s,",
        "   then started again on its ports and store.",
        "2. **rolling restart**: node after node, lame duck mode (SIGUSR2,",
        "   `lame_duck_duration` 30 s, grace 1 s) until it exits, then started again; the",
        "   next node waits until it is a current replica of `IN` and `OUT`.",
        f"3. **leader step-downs** of `IN` and `OUT` every {STEPDOWN_EVERY:.0f} s",
        "   (`$JS.API.STREAM.LEADER.STEPDOWN.<name>`).",
        f"4. **a Spark Python worker killed -9** every {WORKER_KILL_EVERY:.0f} s while a task",
        "   of a micro-batch runs (Spark's status tracker): of the children of the JVM's",
        "   `pyspark.daemon` for `pyspark.worker` (the tasks' workers), the one making",
        "   read and write calls (`/proc/<pid>/io`; one between tasks makes none).",
        "   On `local[N]` Spark runs a task once (`local[N,F]`: up to F times), so there a",
        "   worker killed in a task fails its micro-batch's job, whatever the source and",
        "   sink do; the rows run on `local[2,4]` (task retries, as on a cluster), and",
        '   `--spark-master "local[2]"` shows the row without them.',
        "",
        "Then every node is up, every message of `IN` acknowledged, and the query has up",
        f"to {CATCH_UP:.0f} s to reach `IN`'s last sequence. `OUT` is read back and",
        "compared with `IN` by the `IN:<seq>` message ids of its messages:",
        "",
        "- **faults**: faults injected (a step-down of `IN` and one of `OUT` are two).",
        "- **in**, **out**: messages stored in `IN`, in `OUT`.",
        "- **missing**: sequences of `IN` up to the highest `OUT` holds that `OUT` lacks;",
        "  **duplicated**: copies beyond the first of one id. Must be 0.",
        "- **query restarts**: deaths of the query (their errors are in the notes). Must",
        "  be 0.",
        "- **longest gap**: the longest time between the ends of two micro-batches that",
        "  read rows, across restarts (from `recentProgress`); the notes say what was",
        f"  under way. Must be under {GAP_LIMIT:.0f} s.",
        "- **lag at the end**: `IN`'s last sequence minus the highest `OUT` holds, once",
        f"  the query had its {CATCH_UP:.0f} s. Must be 0.",
        "",
    ]


def outro() -> list[str]:
    """What ends the section after the reproduce command."""
    return [
        "(`tools/_sparkfaults.py`, run by `tools/reliability.py`; `--spark-seconds N` gives",
        "each row N seconds of input for a shorter try, `--spark-option KEY=VALUE` passes an",
        "option to the source and the sink, `--spark-master` picks another master. The run",
        "exits non-zero when a Spark row misses a target above. The eight rows take about",
        "10 minutes on 2 cores, each 70-85 s with the default input.",
        "`tests/spark/test_cluster_restarts.py` runs the kill -9 row, in `publishMode`",
        "async with 45 s of input, in `make test`.)",
    ]


def no_rows() -> list[str]:
    """What the results say before any run has been recorded."""
    return [
        "No run of these rows is recorded here yet. Run them with the command below; the",
        "table and its notes then appear here.",
        "",
    ]


def markdown(
    rows: MergedRows, titles: dict[str, str], ok: bool, run_line: str | None, command: str
) -> str:
    """The whole section: ``rows`` (none: `no_rows`), the run and the way to repeat it."""
    out = [*intro(), "### Results", ""]
    if rows.lines:
        ok = ok and rows.ok
        out += [
            f"Result of the last run: **{'all targets met' if ok else 'FAILED'}**.",
            "",
            *table_header(),
            *rows.lines,
            "",
            *kept_sentence(rows, titles),
        ]
        if rows.notes:
            out += ["Notes:", "", *rows.notes, ""]
        if run_line:
            out += [run_line]
    else:
        out += no_rows()
    out += ["Reproduce with:", "", "```", command, "```", "", *outro()]
    if rows.lines:
        out += ["", rows.comment]
    return "\n".join(out)

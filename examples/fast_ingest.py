"""Storing a lot, fast: a fast-ingest batch of sensor readings, an atomic order, and how
to carry on after a batch ends early.

- Readings go into a stream with ``allow_batched`` as one fast-ingest batch (ADR-50,
  nats-server 2.14+): the server acknowledges every ``flow`` messages, not each one,
  and with gap "fail" the stream holds them in order with no hole.
- A batch that ends early (here: a reading that fails its ``expected_last_subject_seq``
  check) is carried on from what the server acknowledged, in a new batch, with
  ``msg_id``s so that nothing is stored twice.
- An order and its lines go into a stream with ``allow_atomic`` as one atomic batch:
  stored together or not at all.

Run against a server:      python examples/fast_ingest.py --server nats://127.0.0.1:4222
Run with an embedded one:  python examples/fast_ingest.py
"""

from __future__ import annotations

import argparse
import json
import time

import nats_sync
from nats_sync.jetstream import BatchClosedError, JetStream, WrongLastSequenceError
from nats_sync.testing import server_url


def store_readings(js: JetStream, count: int) -> None:
    """``count`` readings as one batch, committed with the last one."""
    readings = [json.dumps({"sensor": n % 16, "value": n}).encode() for n in range(count)]
    started = time.perf_counter()
    with js.fast_publisher() as batch:
        for n, reading in enumerate(readings[:-1]):
            batch.add(f"readings.s{n % 16}", reading, msg_id=f"reading-{n}")
        final = batch.commit(
            f"readings.s{(count - 1) % 16}", readings[-1], msg_id=f"reading-{count - 1}"
        )
    seconds = time.perf_counter() - started
    print(
        f"stored {final.count:,} readings in one fast batch in {seconds:.2f} s "
        f"({final.count / seconds:,.0f} msgs/s), last at seq {final.seq}"
    )


def carry_on_after_an_early_end(js: JetStream) -> None:
    """A batch that the server ends early, and the next batch that finishes the job."""
    js.create_stream(name="LEDGER", subjects=["ledger.>"], allow_batched=True)
    entries = [f"entry {n}".encode() for n in range(10)]
    problems: list[nats_sync.Error] = []  # what ended it (also the next add's cause)
    with js.fast_publisher(error_cb=problems.append) as batch:
        for n, entry in enumerate(entries):
            # Entry 5 claims the subject's last sequence is 99: the server refuses it
            # and, with gap "fail", ends the batch there (seen a few adds later, or here).
            check = 99 if n == 5 else None
            try:
                batch.add("ledger.a", entry, msg_id=f"ledger-{n}", expected_last_subject_seq=check)
            except BatchClosedError:
                break
        final = batch.close()  # the server's count of what it stored
    print(f"the batch ended early: {problems[0]}")
    print(f"the server stored {final.count} of them, in order")
    with js.fast_publisher() as batch:  # carry on from what was stored, same msg ids
        for n in range(final.count, len(entries)):
            batch.add("ledger.a", entries[n], msg_id=f"ledger-{n}")
        rest = batch.close()
    stored = js.stream_info("LEDGER").state.messages
    print(f"a second batch stored the other {rest.count}: {stored} entries in all")


def store_an_order(js: JetStream) -> None:
    """An order and its lines, all stored or none."""
    js.create_stream(name="ORDERS", subjects=["orders.>"], allow_atomic=True)
    ack = js.publish_atomic(
        [
            ("orders.17.line", b'{"sku": "A-1", "qty": 2}'),
            ("orders.17.line", b'{"sku": "B-7", "qty": 1}'),
            ("orders.17.total", b'{"eur": 42.5}'),
        ]
    )
    print(f"order 17 stored atomically: {ack.count} messages, last at seq {ack.seq}")
    try:
        with js.atomic_batch() as batch:
            batch.add("orders.18.line", b'{"sku": "C-3", "qty": 5}')
            batch.add("orders.18.total", b'{"eur": 10}', expected_last_subject_seq=99)
            batch.commit()
    except WrongLastSequenceError:
        stored = js.stream_info("ORDERS").state.messages
        print(f"order 18 failed its check: nothing of it stored ({stored} messages in all)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", help="NATS URL (default: start an embedded JetStream server)")
    parser.add_argument("--readings", type=int, default=200_000, help="readings to store")
    args = parser.parse_args()
    with server_url(args.server, jetstream=True) as url, nats_sync.connect(url) as nc:
        js = nc.jetstream()
        js.create_stream(name="READINGS", subjects=["readings.>"], allow_batched=True)
        store_readings(js, args.readings)
        carry_on_after_an_early_end(js)
        store_an_order(js)


if __name__ == "__main__":
    main()

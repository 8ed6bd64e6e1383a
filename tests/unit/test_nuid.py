"""NUID tests: unique, fixed-length, base62 ids, also when shared between threads."""

from __future__ import annotations

import string
import threading

from nats_sync._core.nuid import PREFIX_LENGTH, SEQUENCE_LENGTH, Nuid

BASE62 = frozenset(string.digits + string.ascii_uppercase + string.ascii_lowercase)
ID_LENGTH = 22


def test_lengths() -> None:
    assert PREFIX_LENGTH + SEQUENCE_LENGTH == ID_LENGTH


def test_unique_fixed_length_base62_over_100k_ids() -> None:
    nuid = Nuid()
    ids = [nuid.next() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    assert {len(value) for value in ids} == {ID_LENGTH}
    assert set().union(*ids) <= BASE62


def test_instances_use_different_prefixes() -> None:
    prefixes = {Nuid().next()[:PREFIX_LENGTH] for _ in range(50)}
    assert len(prefixes) == 50


def test_ids_of_one_prefix_increase() -> None:
    nuid = Nuid()
    nuid._sequence = 0  # far from the end of the sequence: no prefix change ahead
    ids = [nuid.next() for _ in range(1000)]
    assert len({value[:PREFIX_LENGTH] for value in ids}) == 1
    # The base62 alphabet is in ASCII order, so the ids sort like the sequence.
    assert ids == sorted(ids)


def test_sequence_rollover_draws_a_new_prefix() -> None:
    nuid = Nuid()
    before = nuid.next()
    nuid._sequence = 62**SEQUENCE_LENGTH - 1  # the next step overflows
    after = nuid.next()
    assert after[:PREFIX_LENGTH] != before[:PREFIX_LENGTH]
    assert len(after) == ID_LENGTH
    assert set(after) <= BASE62
    following = [nuid.next() for _ in range(100)]
    assert len({after, *following}) == 101


def test_largest_sequence_is_all_z() -> None:
    nuid = Nuid()
    nuid._sequence = 62**SEQUENCE_LENGTH - 2
    nuid._increment = 1
    assert nuid.next().endswith("z" * SEQUENCE_LENGTH)


def test_shared_between_threads_without_duplicates() -> None:
    nuid = Nuid()
    threads_count = 8
    per_thread = 10_000
    start = threading.Barrier(threads_count)
    results: list[list[str]] = [[] for _ in range(threads_count)]

    def work(out: list[str]) -> None:
        start.wait()
        out.extend(nuid.next() for _ in range(per_thread))

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    every = [value for out in results for value in out]
    assert len(every) == threads_count * per_thread
    assert len(set(every)) == len(every)
    assert {len(value) for value in every} == {ID_LENGTH}

"""The partition plan and the config rules of partitioned consumer groups, with the
expectations of orbit.go's own pcgroups test (TestBaseFunctions), and the stored JSON
read back."""

from __future__ import annotations

import pytest

from nats_sync.jetstream.pcgroups import (
    ConsumerGroupConfigError,
    ElasticConfig,
    MemberMapping,
    PartitioningFilter,
)
from nats_sync.jetstream.pcgroups._config import (
    check_elastic,
    elastic_from_json,
    partition_filters,
    static_from_json,
    strip_partition,
    transform_destination,
)

FILTER = "foo.*.*.>"


def filters_of(max_members: int, member: str) -> list[str]:
    return partition_filters(["m1", "m2", "m3"], max_members, [], member, [FILTER])


def test_the_transform_puts_the_partition_first() -> None:
    assert transform_destination(PartitioningFilter(FILTER, (1, 2)), 4) == (
        "{{Partition(4,1,2)}}.foo.{{Wildcard(1)}}.{{Wildcard(2)}}.>"
    )
    assert transform_destination(PartitioningFilter(">"), 3) == "{{Partition(3)}}.>"


@pytest.mark.parametrize(
    ("max_members", "expected"),
    [
        (6, {"m1": [0, 1], "m2": [2, 3], "m3": [4, 5]}),
        (7, {"m1": [0, 1, 6], "m2": [2, 3], "m3": [4, 5]}),
        (8, {"m1": [0, 1, 6], "m2": [2, 3, 7], "m3": [4, 5]}),
    ],
)
def test_balanced_partitions_as_orbit_go(max_members: int, expected: dict[str, list[int]]) -> None:
    for member, partitions in expected.items():
        assert filters_of(max_members, member) == [f"{p}.{FILTER}" for p in partitions]


def test_members_are_deduplicated_sorted_and_capped() -> None:
    plan = {m: partition_filters(["b", "a", "b", "c"], 2, [], m, []) for m in "abc"}
    assert plan == {"a": ["0.>"], "b": ["1.>"], "c": []}


def test_mappings_give_whole_partitions_once() -> None:
    mappings = [MemberMapping("m1", (0, 2)), MemberMapping("m2", (1,))]
    assert partition_filters([], 3, mappings, "m1", ["a.*", "b.*"]) == ["0.>", "2.>"]
    assert partition_filters([], 3, mappings, "zz", ["a.*"]) == []


def _elastic(
    max_members: int = 2, members: tuple[str, ...] = (), mappings: tuple[MemberMapping, ...] = ()
) -> ElasticConfig:
    return ElasticConfig(
        max_members, (PartitioningFilter("foo.*", (1,)),), members=members, member_mappings=mappings
    )


M = MemberMapping  # short, for the tables below


@pytest.mark.parametrize(
    "config",
    [
        _elastic(members=("m1", "m2")),
        _elastic(mappings=(M("m1", (0, 1)),)),
        _elastic(mappings=(M("m1", (0,)), M("m2", (1,)))),
        _elastic(3, mappings=(M("m1", (0, 2)), M("m2", (1,)))),
    ],
)
def test_valid_configs(config: ElasticConfig) -> None:
    check_elastic(config)


@pytest.mark.parametrize(
    "config",
    [
        _elastic(members=("m1",), mappings=(M("m1", (0, 1)),)),  # both
        _elastic(mappings=(M("m1", (1, 1)),)),  # a partition twice
        _elastic(mappings=(M("m1", (1,)),)),  # not every partition
        _elastic(mappings=(M("m1", (0, 1, 2)),)),  # too many
        _elastic(mappings=(M("m1", (0, 2)),)),  # out of range
        _elastic(mappings=(M("m1", (0, 1)), M("m1", (0, 1)))),  # a member twice
        _elastic(mappings=(M("m1", (0, 1)), M("m2", (0, 1)))),  # overlap
        _elastic(mappings=(M("m1", (0, 1)), M("m2", (2, 3)))),  # out of range
        _elastic(3, mappings=(M("m1", (0,)), M("m2", (1,)))),  # partition 2 to nobody
        _elastic(3, mappings=(M("m1", (0, 2)), M("m2", (1, 2)))),  # partial overlap
        ElasticConfig(2, (PartitioningFilter("foo.*", (1, 1)),)),  # a wildcard twice
        ElasticConfig(2, (PartitioningFilter("foo", ()),)),  # nothing to partition on
        ElasticConfig(0, None),  # no partitions
    ],
)
def test_invalid_configs(config: ElasticConfig) -> None:
    with pytest.raises(ConsumerGroupConfigError):
        check_elastic(config)


def test_stored_json_reads_back_and_bad_values_are_named() -> None:
    config = _elastic(members=("x", "y"))
    assert elastic_from_json(config.to_json(), "g") == config
    go = (
        b'{"max_members":4,"partitioning_filters":null,"max_buffered_bytes":10,'
        b'"member_mappings":[{"member":"a","partitions":[0,1,2,3]}]}'
    )
    read = elastic_from_json(go, "g")
    assert read.partitioning_filters is None and read.max_buffered_bytes == 10
    assert read.to_json() == go
    assert static_from_json(b'{"max_members":2,"members":["a"]}', "g").members == ("a",)
    with pytest.raises(ConsumerGroupConfigError, match="not valid JSON"):
        static_from_json(b"{", "static group 'g'")
    with pytest.raises(ConsumerGroupConfigError, match="max_members must be an integer"):
        static_from_json(b'{"max_members":"2"}', "g")
    assert strip_partition("3.foo.bar") == "foo.bar" and strip_partition("foo") == "foo"

"""Partitioned consumer groups, as orbit.go's ``pcgroups`` and interoperable with it.

A group splits a stream's messages into ``max_members`` partitions by a key in their
subjects and shares the partitions out among named *members*: each member reads its
partitions in order, one member per key, and several instances of one member run as
one active and its standbys (ADR-42 ``pinned_client``). Static groups read a stream
whose subjects already start with the partition number (its subject transform puts it
there) and keep their members for life; elastic groups read any stream through a
work-queue stream of their own and take members in and out while running. Groups live
in the key-value buckets ``static-consumer-groups`` and ``elastic-consumer-groups``,
stored as orbit.go stores them, so Go and Python members share one group.
"""

from __future__ import annotations

from nats_sync.jetstream.pcgroups._config import (
    ElasticConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConfig,
)
from nats_sync.jetstream.pcgroups.elastic import (
    add_members,
    create_elastic,
    delete_elastic,
    delete_member_mappings,
    delete_members,
    elastic_consume,
    elastic_member_step_down,
    get_elastic,
    list_elastic,
    list_members,
    set_member_mappings,
)
from nats_sync.jetstream.pcgroups.errors import (
    ConsumerGroupConfigError,
    ConsumerGroupError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    GroupConfigChangedError,
    MemberNotInGroupError,
)
from nats_sync.jetstream.pcgroups.static import (
    create_static,
    delete_static,
    get_static,
    list_static,
    static_consume,
    static_member_step_down,
)

__all__ = [
    "ConsumerGroupConfigError",
    "ConsumerGroupError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "ElasticConfig",
    "GroupConfigChangedError",
    "MemberMapping",
    "MemberNotInGroupError",
    "PartitioningFilter",
    "StaticConfig",
    "add_members",
    "create_elastic",
    "create_static",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "delete_static",
    "elastic_consume",
    "elastic_member_step_down",
    "get_elastic",
    "get_static",
    "list_elastic",
    "list_members",
    "list_static",
    "set_member_mappings",
    "static_consume",
    "static_member_step_down",
]

"""The stream config fields of nats-server 2.11-2.15 round-tripped by create, update and
info against a real 2.15 server: allow_atomic, allow_batched, allow_msg_ttl,
subject_delete_marker_ttl, allow_msg_counter, allow_msg_schedules, allow_direct and
persist_mode.

The server leaves most of these out of its JSON when they are off (``omitempty``), so an
off field reads back as None (the server's default) rather than False; the tests check
the meaning, ``not value``, there."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.jetstream import APIError, JetStream, StreamConfig
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]

BATCH_AND_TTL_FIELDS = {
    "allow_atomic": True,
    "allow_batched": True,
    "allow_msg_ttl": True,
    "subject_delete_marker_ttl": 2.5,
    "allow_msg_schedules": True,
    "allow_direct": True,
}


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


def fields_of(config: StreamConfig, names: object) -> dict[str, object]:
    return {name: getattr(config, name) for name in names}  # type: ignore[attr-defined]


def test_create_and_info_round_trip_the_batch_and_ttl_fields(js: JetStream) -> None:
    created = js.create_stream(name="NEW", subjects=["new.>"], **BATCH_AND_TTL_FIELDS)
    assert fields_of(created.cached_info.config, BATCH_AND_TTL_FIELDS) == BATCH_AND_TTL_FIELDS
    read = js.stream("NEW").info().config
    assert fields_of(read, BATCH_AND_TTL_FIELDS) == BATCH_AND_TTL_FIELDS
    # Listed streams decode them the same way.
    listed = next(info for info in js.list_streams() if info.config.name == "NEW")
    assert fields_of(listed.config, BATCH_AND_TTL_FIELDS) == BATCH_AND_TTL_FIELDS
    # On the wire the marker TTL is integer nanoseconds, as every duration.
    raw = js.api.request("STREAM.INFO.NEW")["config"]
    assert raw["subject_delete_marker_ttl"] == 2_500_000_000
    assert raw["allow_atomic"] is True and raw["allow_batched"] is True


def test_a_counter_stream_round_trips_allow_msg_counter(js: JetStream) -> None:
    created = js.create_stream(
        name="HITS", subjects=["hits.>"], allow_msg_counter=True, allow_direct=True
    )
    assert created.cached_info.config.allow_msg_counter is True
    read = js.stream("HITS").info().config
    assert (read.allow_msg_counter, read.allow_direct) == (True, True)
    # The server's rule, reported as its error: counters and message TTLs do not mix.
    with pytest.raises(APIError, match="TTL"):
        js.create_stream(name="BAD", subjects=["bad.>"], allow_msg_counter=True, allow_msg_ttl=True)


def test_persist_mode_round_trips_and_async_refuses_atomic_batches(js: JetStream) -> None:
    created = js.create_stream(
        name="FAST", subjects=["fast.>"], persist_mode="async", allow_batched=True
    )
    assert created.cached_info.config.persist_mode == "async"
    read = js.stream("FAST").info().config
    assert (read.persist_mode, read.allow_batched) == ("async", True)
    # ADR-50: an async-persisted stream cannot take atomic batches.
    with pytest.raises(APIError, match="atomic"):
        js.update_stream(read.replace(allow_atomic=True))
    assert not js.stream("FAST").info().config.allow_atomic

    default = js.create_stream(name="SAFE", subjects=["safe.>"], persist_mode="default")
    # "default" is the server's default: it leaves the field out of its reply.
    assert default.cached_info.config.persist_mode in (None, "default")


def test_update_turns_the_fields_on_and_off(js: JetStream) -> None:
    js.create_stream(name="LATER", subjects=["later.>"])
    before = js.stream("LATER").info().config
    assert not any(
        (
            before.allow_atomic,
            before.allow_batched,
            before.allow_msg_ttl,
            before.allow_msg_schedules,
            before.allow_direct,
        )
    )
    assert before.subject_delete_marker_ttl is None

    turned_on = js.update_stream(before.replace(**BATCH_AND_TTL_FIELDS)).cached_info.config
    assert fields_of(turned_on, BATCH_AND_TTL_FIELDS) == BATCH_AND_TTL_FIELDS
    assert fields_of(js.stream("LATER").info().config, BATCH_AND_TTL_FIELDS) == BATCH_AND_TTL_FIELDS

    # An update sends a whole config: start from what the server holds.
    current = js.stream("LATER").info().config
    changed = js.update_stream(
        current.replace(
            allow_atomic=False,
            allow_batched=False,
            allow_direct=False,
            subject_delete_marker_ttl=5.0,
        )
    ).cached_info.config
    assert not changed.allow_atomic and not changed.allow_batched
    assert not changed.allow_direct
    assert changed.subject_delete_marker_ttl == 5.0
    assert changed.allow_msg_schedules is True  # untouched
    read = js.stream("LATER").info().config
    assert (
        bool(read.allow_atomic),
        bool(read.allow_batched),
        bool(read.allow_direct),
        read.subject_delete_marker_ttl,
    ) == (False, False, False, 5.0)


def test_the_server_refuses_a_marker_ttl_under_a_second(js: JetStream) -> None:
    with pytest.raises(APIError, match="at least 1 second"):
        js.create_stream(
            name="SHORT", subjects=["short.>"], allow_msg_ttl=True, subject_delete_marker_ttl=0.5
        )


# --- the command line's stream add ------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_stream_add_sets_the_feature_fields(
    jetstream_server: NatsServer, js: JetStream, capsys: pytest.CaptureFixture[str]
) -> None:
    url = jetstream_server.url
    status, out, err = cli(
        capsys,
        "stream",
        "add",
        "ALL",
        "--subjects",
        "all.>",
        "--allow-atomic",
        "--allow-batched",
        "--allow-msg-ttl",
        "--subject-delete-marker-ttl",
        "90",
        "--allow-msg-schedules",
        "--allow-direct",
        "-s",
        url,
    )
    assert status == 0, err
    assert "stream ALL stores all.>" in out
    config = js.stream("ALL").info().config
    assert fields_of(config, BATCH_AND_TTL_FIELDS) == {
        **BATCH_AND_TTL_FIELDS,
        "subject_delete_marker_ttl": 90.0,
    }

    status, _, err = cli(
        capsys, "stream", "add", "COUNT", "--subjects", "count.>", "--allow-msg-counter", "-s", url
    )
    assert status == 0, err
    assert js.stream("COUNT").info().config.allow_msg_counter is True

    status, _, err = cli(
        capsys,
        "stream",
        "add",
        "QUICK",
        "--subjects",
        "quick.>",
        "--persist-mode",
        "async",
        "-s",
        url,
    )
    assert status == 0, err
    assert js.stream("QUICK").info().config.persist_mode == "async"


def test_stream_add_without_feature_options_leaves_them_off(
    jetstream_server: NatsServer, js: JetStream, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = cli(
        capsys, "stream", "add", "PLAIN", "--subjects", "plain.>", "-s", jetstream_server.url
    )
    assert status == 0, err
    config = js.stream("PLAIN").info().config
    assert not any(getattr(config, name) for name in (*BATCH_AND_TTL_FIELDS, "allow_msg_counter"))
    assert config.persist_mode in (None, "default")


def test_stream_add_reports_the_servers_refusal_of_a_feature_mix(
    jetstream_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = cli(
        capsys,
        "stream",
        "add",
        "MIX",
        "--subjects",
        "mix.>",
        "--allow-atomic",
        "--persist-mode",
        "async",
        "-s",
        jetstream_server.url,
    )
    assert status == 1 and "atomic" in err
    with pytest.raises(SystemExit) as exited:  # argparse's own refusal
        main(
            [
                "stream",
                "add",
                "MIX",
                "--subjects",
                "mix.>",
                "--persist-mode",
                "sometimes",
                "-s",
                jetstream_server.url,
            ]
        )
    assert exited.value.code == 2 and "invalid choice" in capsys.readouterr().err

"""``nats_sync.locust.NatsUser`` run by a real Locust runner against a real nats-server:
what Locust's statistics record, and one connection for all users of the process.

Run by ``tests/under_gevent/test_patched_runs.py`` in a child that gevent patched (as
Locust itself patches the process it runs in).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import ClassVar

import gevent
import pytest
from locust import constant, task
from locust.env import Environment

import nats_sync
from nats_sync import locust as nats_locust
from nats_sync.locust import NatsUser
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

#: How long each runner swarms, and with how many users.
RUN_FOR = 2.0
USERS = 5


@pytest.fixture
def service(jetstream_server: NatsServer) -> Iterator[NatsServer]:
    """The server with an echo responder, a stream ``ORDERS`` and a bucket ``prices``."""
    with nats_sync.connect(jetstream_server.url) as responder:
        responder.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
        js = responder.jetstream()
        js.add_stream(name="ORDERS", subjects=["orders.>"], storage="memory")
        js.create_key_value(bucket="prices", storage="memory").put("sku", b"42")
        responder.flush(5)
        yield jetstream_server


def swarm(user: type[NatsUser], users: int = USERS) -> Environment:
    """Runs ``users`` of ``user`` on a local runner for ``RUN_FOR`` seconds, then stops
    them (the test's end: the shared connection closes); their environment."""
    env = Environment(user_classes=[user])
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=100)
    gevent.sleep(RUN_FOR)
    runner.quit()
    return env


def stats(env: Environment) -> dict[tuple[str, str], tuple[int, int]]:
    """(request type, name) -> (requests, failures)."""
    return {
        (entry.method, entry.name): (entry.num_requests, entry.num_failures)
        for entry in env.stats.entries.values()
    }


def test_every_call_is_reported_and_good_calls_do_not_fail(service: NatsServer) -> None:
    class Calls(NatsUser):
        host = service.url
        wait_time = constant(0.01)

        @task
        def everything(self) -> None:
            assert self.client.request("echo", b"hello", timeout=5).data == b"hello"
            self.client.publish("events", b"abc")
            self.client.flush(5)
            js = self.client.jetstream()
            assert js.publish("orders.new", b"{}").stream == "ORDERS"
            js.publish_async("orders.async", b"{1}")
            prices = js.key_value("prices")
            prices.put("sku", b"43")
            assert prices.get("sku").value == b"43"

    env = swarm(Calls)
    recorded = stats(env)
    expected = {
        ("NATS", "echo"),
        ("NATS", "events"),
        ("NATS", "flush"),
        ("JS", "orders.new"),
        ("JS", "orders.async"),
        ("JS", "prices"),
    }
    assert set(recorded) == expected, recorded
    for key, (requests, failures) in recorded.items():
        assert requests > 0, key
        assert failures == 0, (key, env.stats.errors)
    # get and put of one bucket share its row (the name is the bucket); a user stopped
    # in the middle of its task may have published without its put and get
    assert recorded[("JS", "prices")][0] >= 2 * (recorded[("JS", "orders.new")][0] - USERS)
    echo = env.stats.entries[("echo", "NATS")]
    assert echo.total_content_length == 5 * echo.num_requests  # the reply's bytes
    assert echo.avg_response_time > 0
    assert env.stats.total.num_failures == 0


def test_a_request_nobody_answers_is_a_failure_with_its_exception(
    service: NatsServer,
) -> None:
    class Unanswered(NatsUser):
        host = service.url
        wait_time = constant(0.01)

        @task
        def ask(self) -> None:
            self.client.request("echo", b"fine", timeout=5)
            try:
                self.client.request("nobody.home", b"?", timeout=5, name="nobody")
            except nats_sync.NoRespondersError:
                pass  # raised to the task, after it was recorded as a failure

    env = swarm(Unanswered)
    recorded = stats(env)
    requests, failures = recorded[("NATS", "nobody")]
    assert requests > 0 and failures == requests
    assert recorded[("NATS", "echo")][1] == 0
    errors = [e for e in env.stats.errors.values() if e.name == "nobody"]
    assert len(errors) == 1, errors
    assert isinstance(errors[0].error, nats_sync.NoRespondersError), errors[0].error
    assert errors[0].occurrences == failures


def test_an_uncaught_failure_is_recorded_once_and_the_user_goes_on(
    service: NatsServer,
) -> None:
    class Uncaught(NatsUser):
        host = service.url
        wait_time = constant(0.01)

        @task
        def ask(self) -> None:
            self.client.jetstream().publish("no.stream.here", b"x", retry_attempts=0)

    env = swarm(Uncaught, users=2)
    requests, failures = stats(env)[("JS", "no.stream.here")]
    assert requests > 1 and failures == requests  # the users kept running their task


def test_all_users_of_a_process_share_one_connection() -> None:
    with NatsServer(monitoring=True) as server, nats_sync.connect(server.url) as responder:
        responder.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
        responder.flush(5)
        _swarm_of_ten_on_one_connection(server)


def _swarm_of_ten_on_one_connection(service: NatsServer) -> None:
    class Sharing(NatsUser):
        host = service.url
        wait_time = constant(0.01)
        connect_options: ClassVar[dict[str, str]] = {"name": "locust-shared"}

        @task
        def ask(self) -> None:
            self.client.request("echo", b"x", timeout=5)

    before = service.monitor("connz")["num_connections"]
    env = Environment(user_classes=[Sharing])
    runner = env.create_local_runner()
    runner.start(10, spawn_rate=100)
    gevent.sleep(RUN_FOR)
    named = [c for c in service.monitor("connz")["connections"] if c.get("name") == "locust-shared"]
    assert len(runner.user_greenlets) == 10
    assert len(named) == 1, named  # ten users, one connection
    assert service.monitor("connz")["num_connections"] == before + 1
    shared = list(nats_locust._SHARED[env].values())
    assert len(shared) == 1 and shared[0].connects == 1
    runner.quit()  # the test's end closes it
    assert shared[0].nc is None
    deadline = time.monotonic() + 5
    while service.monitor("connz")["num_connections"] != before:
        assert time.monotonic() < deadline, "the shared connection was left open"
        gevent.sleep(0.05)
    assert stats(env)[("NATS", "echo")][0] > 0


def test_a_user_without_a_host_is_refused_with_the_fix() -> None:
    class Nowhere(NatsUser):
        @task
        def ask(self) -> None:
            self.client.request("echo")

    with pytest.raises(Exception, match="--host"):
        Nowhere(Environment(user_classes=[Nowhere]))


def test_natsuser_is_abstract() -> None:
    assert NatsUser.abstract is True

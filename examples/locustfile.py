"""Load-testing a NATS lookup service and a JetStream stream with Locust.

Run it against a nats-server with JetStream (``nats-sync server`` starts one on
127.0.0.1:4222), headless for 30 seconds with 50 users started 10 a second:

    pip install 'nats-sync[locust]'
    locust -f examples/locustfile.py --headless -u 50 -r 10 -t 30s --host nats://127.0.0.1:4222

Without ``--headless`` Locust serves its web UI on http://localhost:8089. The process
that runs the test (a standalone run, or the master of a distributed one) starts the
service under test itself: a ``lookup`` micro service answering ``lookup.price`` with a
price, and the stream ``ORDERS`` (memory, subjects ``orders.>``); to load-test your own
service instead, drop ``start_the_service_under_test`` and point the tasks at it. Each
Locust process's users share one NATS connection; Locust's statistics show one row per
subject (``NATS lookup.price``, ``JS orders.new``).
"""

from __future__ import annotations

import json
import random
from typing import Any

from locust import between, events, task
from locust.env import Environment
from locust.runners import WorkerRunner

import nats_sync
from nats_sync import micro
from nats_sync.locust import NatsUser

PRICES = {f"sku-{n}": round(1.0 + n * 0.25, 2) for n in range(100)}
#: The service's own connection (in the process that started it).
service_client: list[nats_sync.Client] = []


@events.test_start.add_listener
def start_the_service_under_test(environment: Environment, **_: Any) -> None:
    """In a standalone run or on the master: the lookup service and the stream."""
    if isinstance(environment.runner, WorkerRunner) or service_client:
        return
    nc = nats_sync.connect(environment.host or Shopper.host, name="lookup-service")
    service_client.append(nc)

    def price(request: micro.Request) -> None:
        sku = request.data.decode()
        if sku in PRICES:
            request.respond(json.dumps({"sku": sku, "price": PRICES[sku]}).encode())
        else:
            request.respond_error("404", f"no such sku {sku!r}")

    service = micro.add_service(nc, "lookup", "1.0.0")
    service.add_endpoint("price", price, subject="lookup.price")
    nc.jetstream().create_or_update_stream(name="ORDERS", subjects=["orders.>"], storage="memory")
    nc.flush()


@events.test_stop.add_listener
def stop_the_service_under_test(environment: Environment, **_: Any) -> None:
    """Closes the service's connection (which stops the service) at the test's end."""
    while service_client:
        service_client.pop().close()


class Shopper(NatsUser):
    """Looks prices up five times as often as it orders."""

    host = "nats://127.0.0.1:4222"  # --host overrides it
    wait_time = between(0.01, 0.1)

    @task(5)
    def look_up_a_price(self) -> None:
        sku = random.choice(list(PRICES))
        reply = self.client.request("lookup.price", sku.encode(), timeout=2.0)
        assert json.loads(reply.data)["sku"] == sku

    @task(1)
    def place_an_order(self) -> None:
        order = {"sku": random.choice(list(PRICES)), "quantity": random.randint(1, 5)}
        self.client.jetstream().publish("orders.new", json.dumps(order).encode())

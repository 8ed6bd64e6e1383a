"""The core, subscription, request, JetStream, key-value and reconnect tests pass in a
process that gevent monkey-patched, where the client's threads are greenlets.

Each group is one child pytest (``gevent_runs.run_patched_pytest``) over existing test
files, their slow tests left out, and ``group "gevent"`` runs this folder's own
``patched/`` tests (the hub never blocked, callbacks on greenlets, reconnect, Locust's
``NatsUser``). The files are a representative subset that runs in about two minutes in
all: connecting, publish and subscribe, requests (``request``, ``request_future``,
``request_batch``, ``request_many`` in ``test_request``), subscription callbacks and
their end, JetStream publish (``publish``, ``publish_async``) and pull consumers
(``fetch``, ``messages``, ``consume``), a key-value bucket, and reconnects (a server
killed and restarted on its port, failover in a cluster, a paused server).
"""

from __future__ import annotations

from importlib import metadata

import pytest
from gevent_runs import check_patched_run, run_patched_pytest

INTEGRATION = "tests/integration/"
GROUPS: dict[str, list[str]] = {
    "core": [
        f"{INTEGRATION}test_connect.py",
        f"{INTEGRATION}test_pubsub.py",
        f"{INTEGRATION}test_request.py",
        f"{INTEGRATION}test_subscriptions.py",
        f"{INTEGRATION}test_callback_end.py",
    ],
    "jetstream": [f"{INTEGRATION}test_js_publish.py", f"{INTEGRATION}test_js_pull.py"],
    "key-value": [f"{INTEGRATION}test_kv_basic.py"],
    "reconnect": [f"{INTEGRATION}test_reconnect.py"],
    "gevent": ["tests/under_gevent/patched"],
}
#: A group's child runs at most this long (the slowest, core, takes ~40 s on a busy
#: 2-core machine).
GROUP_TIMEOUT = 300.0


def test_gevent_and_locust_are_installed() -> None:
    """This folder needs both (``make test-gevent`` installs them): fail, never skip.
    Looked up, not imported: importing Locust would patch this plain process."""
    for package in ("gevent", "locust"):
        try:
            assert metadata.version(package)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{package} is not installed: make test-gevent installs it")


@pytest.mark.timeout(GROUP_TIMEOUT + 30)
@pytest.mark.parametrize("group", list(GROUPS))
def test_the_group_passes_in_a_patched_process(group: str) -> None:
    counts = check_patched_run(
        run_patched_pytest(["-m", "not slow", *GROUPS[group]], GROUP_TIMEOUT)
    )
    # No test of a group may pass by surprise: a known gap closed must lose its xfail.
    assert not counts.get("xpassed"), counts

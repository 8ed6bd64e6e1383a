"""nats_sync.sys.SystemClient against real servers with a system account: each endpoint
decoded, one server by id or every server gathered, filters sent and checked, the
server's errors raised, users outside the system account, a three-server cluster; and
``nats-sync server-info``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nats_sync
from nats_sync.sys import SystemClient
from nats_sync.testing import NatsCluster, NatsServer

pytestmark = pytest.mark.timeout(60)

#: A system account with one user, and an application account with JetStream.
ACCOUNTS = """
accounts {
  SYS { users = [{user: sys, password: sys}] }
  APP { users = [{user: app, password: app}], jetstream: enabled }
}
system_account: SYS
"""

#: Where each endpoint's data is, and a key it always has.
ENDPOINT_KEYS = {
    "varz": ("data", "server_id"),
    "statsz": ("statsz", "connections"),
    "connz": ("data", "num_connections"),
    "routez": ("data", "num_routes"),
    "gatewayz": ("data", "server_id"),
    "leafz": ("data", "leafnodes"),
    "subsz": ("data", "num_subscriptions"),
    "jsz": ("data", "memory"),
    "accountz": ("data", "accounts"),
    "healthz": ("data", "status"),
}


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(config=ACCOUNTS, jetstream=True, name="sys-one") as started:
        yield started


@pytest.fixture
def system(server: NatsServer) -> Iterator[SystemClient]:
    with nats_sync.connect(server.url, user="sys", password="sys") as nc:
        yield SystemClient(nc)


@pytest.fixture(scope="module")
def server_id(server: NatsServer) -> str:
    with nats_sync.connect(server.url, user="sys", password="sys") as nc:
        return str(SystemClient(nc).varz()[0]["server"]["id"])


@pytest.mark.parametrize("endpoint", sorted(ENDPOINT_KEYS))
def test_each_endpoint_of_one_server_by_id(
    system: SystemClient, server_id: str, endpoint: str
) -> None:
    reply = getattr(system, endpoint)(server_id=server_id)

    assert reply["server"]["id"] == server_id
    assert reply["server"]["name"] == "sys-one"
    section, key = ENDPOINT_KEYS[endpoint]
    assert key in reply[section], reply
    assert "error" not in reply


@pytest.mark.parametrize("endpoint", sorted(ENDPOINT_KEYS))
def test_each_endpoint_of_every_server_is_a_list(
    system: SystemClient, server_id: str, endpoint: str
) -> None:
    start = time.monotonic()
    replies = getattr(system, endpoint)()

    assert [reply["server"]["id"] for reply in replies] == [server_id]
    assert time.monotonic() - start < 3, "the stall after the only reply should end it"


def test_healthz_is_ok_and_varz_names_the_server(system: SystemClient, server_id: str) -> None:
    assert system.healthz(server_id=server_id)["data"]["status"] == "ok"
    varz = system.varz(server_id=server_id)["data"]
    assert (varz["server_name"], varz["server_id"]) == ("sys-one", server_id)


def test_connz_filters_reach_the_server(
    system: SystemClient, server: NatsServer, server_id: str
) -> None:
    with nats_sync.connect(server.url, user="app", password="app", name="app-one") as app:
        app.subscribe("orders.new")
        app.flush()
        connz = system.connz(server_id=server_id, acc="APP", subscriptions=True)["data"]
        assert [conn["name"] for conn in connz["connections"]] == ["app-one"]
        assert connz["connections"][0]["subscriptions_list"] == ["orders.new"]

        limited = system.connz(server_id=server_id, state="all", limit=1, sort="cid")["data"]
        assert (limited["limit"], len(limited["connections"])) == (1, 1)

        subsz = system.subsz(
            server_id=server_id, account="APP", test="orders.new", subscriptions=True
        )["data"]
        assert [sub["subject"] for sub in subsz["subscriptions_list"]] == ["orders.new"]
    # The server files the connection as closed once it has seen the socket close.
    deadline = time.monotonic() + 5
    while True:
        closed = system.connz(server_id=server_id, state="closed", acc="APP", auth=True)
        names = [conn.get("name") for conn in closed["data"]["connections"] or []]
        if "app-one" in names or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert "app-one" in names


def test_accountz_and_jsz_filters(system: SystemClient, server: NatsServer, server_id: str) -> None:
    with nats_sync.connect(server.url, user="app", password="app") as app:
        app.jetstream().add_stream(name="SYSORDERS", subjects=["sysorders.>"])
    detail = system.accountz(server_id=server_id, account="APP")["data"]["account_detail"]
    assert detail["account_name"] == "APP"
    jsz = system.jsz(server_id=server_id, streams=True, account="APP")["data"]
    streams = [
        stream["name"]
        for account in jsz["account_details"]
        for stream in account.get("stream_detail") or []
    ]
    assert "SYSORDERS" in streams


def test_an_error_from_the_server_is_raised(system: SystemClient, server_id: str) -> None:
    with pytest.raises(nats_sync.MonitoringError, match="invalid sorting option: bogus") as info:
        system.connz(server_id=server_id, sort="bogus")
    assert (info.value.code, info.value.server_id) == (500, server_id)
    with pytest.raises(nats_sync.MonitoringError, match="NOPE"):
        system.accountz(account="NOPE")  # every server: raised too


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.connz(bogus=1), "connz\\(\\) takes no filter 'bogus'"),
        (lambda s: s.varz(sort="cid"), "varz\\(\\) takes no filter 'sort'"),
        (lambda s: s.connz(limit="10"), "filter limit must be an int"),
        (lambda s: s.connz(offset=-1), "filter offset must be an int >= 0"),
        (lambda s: s.connz(auth="yes"), "filter auth takes True or False"),
        (lambda s: s.connz(state="gone"), "filter state takes one of 'open', 'closed', 'all'"),
        (lambda s: s.varz(tags="a"), "filter tags takes a list of str"),
        (lambda s: s.varz(server_id="a.b"), "one subject token"),
        (lambda s: s.varz(server_id="PING"), "leave server_id out"),
        (lambda s: s.varz(timeout=0), "timeout"),
    ],
)
def test_bad_arguments_are_named(system: SystemClient, call: Any, message: str) -> None:
    with pytest.raises(nats_sync.InvalidArgumentError, match=message):
        call(system)


def test_client_settings_are_checked(server: NatsServer) -> None:
    with nats_sync.connect(server.url, user="sys", password="sys") as nc:
        for options in ({"timeout": 0}, {"stall": -1}, {"server_count": 0}):
            with pytest.raises(nats_sync.InvalidArgumentError):
                SystemClient(nc, **options)


def test_a_user_outside_the_system_account(server: NatsServer, server_id: str) -> None:
    with nats_sync.connect(server.url, user="app", password="app", name="app-two") as app:
        outside = SystemClient(app)
        with pytest.raises(nats_sync.NoRespondersError, match="system account"):
            outside.varz()
        with pytest.raises(nats_sync.NoRespondersError, match="system account"):
            outside.varz(server_id=server_id)
        # The server exports CONNZ to every account: it answers with the asker's own.
        connz = outside.connz()[0]["data"]
        assert [conn["name"] for conn in connz["connections"]] == ["app-two"]


def test_an_unknown_server_id_has_no_responders(system: SystemClient) -> None:
    with pytest.raises(nats_sync.NoRespondersError, match="no server has id 'NOSUCH'"):
        system.varz(server_id="NOSUCH")


def test_server_picking_filters(system: SystemClient, server_id: str) -> None:
    assert len(system.varz(server_name="sys-one", exact_match=True)) == 1
    assert system.varz(server_name="other", timeout=0.5) == []
    with pytest.raises(nats_sync.TimeoutError, match="server_name left it out"):
        system.varz(server_id=server_id, server_name="other", timeout=0.5)


# --- a cluster --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    config = tmp_path_factory.mktemp("sys-cluster") / "accounts.conf"
    config.write_text(ACCOUNTS)
    with NatsCluster(3, name="sys-mesh", args=["-c", str(config)]) as started:
        yield started


@pytest.fixture
def cluster_system(cluster: NatsCluster) -> Iterator[SystemClient]:
    with nats_sync.connect(cluster.servers[0].url, user="sys", password="sys") as nc:
        # A longer stall than the 0.3 s default: on a loaded test machine the replies of
        # the servers behind a route may come further apart.
        yield SystemClient(nc, stall=1.0)


@pytest.mark.slow
def test_every_server_of_the_cluster_answers(cluster_system: SystemClient) -> None:
    replies = cluster_system.varz()

    assert [reply["server"]["name"] for reply in replies] == [
        "sys-mesh-0",
        "sys-mesh-1",
        "sys-mesh-2",
    ]
    assert len({reply["server"]["id"] for reply in replies}) == 3
    assert {reply["server"]["cluster"] for reply in replies} == {"sys-mesh"}


@pytest.mark.slow
def test_server_count_ends_the_gathering_at_once(cluster: NatsCluster) -> None:
    with nats_sync.connect(cluster.servers[0].url, user="sys", password="sys") as nc:
        system = SystemClient(nc, server_count=3, stall=10, timeout=20)
        start = time.monotonic()
        assert len(system.statsz()) == 3
        assert time.monotonic() - start < 5


@pytest.mark.slow
def test_routez_shows_the_routes_to_the_others(cluster_system: SystemClient) -> None:
    replies = cluster_system.routez()
    ids = {reply["server"]["id"] for reply in replies}
    assert len(ids) == 3
    for reply in replies:
        own = reply["server"]["id"]
        remote = {route["remote_id"] for route in reply["data"]["routes"]}
        assert remote == ids - {own}, reply["data"]
        # A remote server is reached by id through the one connection.
        other = sorted(ids - {own})[0]
        assert cluster_system.routez(server_id=other)["server"]["id"] == other


@pytest.mark.slow
def test_picking_one_server_of_the_cluster(cluster_system: SystemClient) -> None:
    replies = cluster_system.healthz(server_name="sys-mesh-2", exact_match=True)
    assert [reply["server"]["name"] for reply in replies] == ["sys-mesh-2"]
    assert replies[0]["data"]["status"] == "ok"


# --- the command line -------------------------------------------------------------------


def _cli(server: NatsServer, *args: str, user: str = "sys") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "nats_sync",
            "-s",
            server.url,
            "--user",
            user,
            "--password",
            user,
            "server-info",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd=Path(nats_sync.__file__).parent.parent,
    )


def test_cli_prints_a_summary_per_server(server: NatsServer, server_id: str) -> None:
    done = _cli(server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"sys-one ({server_id}) v")
    assert "connections" in done.stdout

    health = _cli(server, "healthz", "--server-id", server_id)
    assert health.returncode == 0, health.stderr
    assert "status ok" in health.stdout


def test_cli_json_and_filters(server: NatsServer, server_id: str) -> None:
    done = _cli(server, "accountz", "--json", "--filter", "account=APP")
    assert done.returncode == 0, done.stderr
    replies = json.loads(done.stdout)
    assert replies[0]["data"]["account_detail"]["account_name"] == "APP"

    one = _cli(
        server,
        "connz",
        "--json",
        "--server-id",
        server_id,
        "--filter",
        "subscriptions=true",
        "--filter",
        "limit=5",
    )
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["data"]["limit"] == 5


@pytest.mark.parametrize(
    ("args", "user", "message"),
    [
        (("connz", "--filter", "sort=bogus"), "sys", "invalid sorting option: bogus"),
        (("connz", "--filter", "nope=1"), "sys", "connz takes no filter 'nope'"),
        (("connz", "--filter", "limit=x"), "sys", "--filter limit takes an integer"),
        (("varz",), "app", "system account"),
    ],
)
def test_cli_errors_are_one_line(
    server: NatsServer, args: tuple[str, ...], user: str, message: str
) -> None:
    done = _cli(server, *args, user=user)
    assert done.returncode == 1
    assert message in done.stderr
    assert "Traceback" not in done.stderr

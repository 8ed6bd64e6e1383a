"""Message tracing (ADR-41): ``Client.trace`` and ``nats-sync trace`` against real servers:
one server (delivered or not, stored or not, no subscriber, a subject mapping), a
three-server cluster (one report per server on the path) and two accounts joined by a
service import or a stream export."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

import nats_sync
from nats_sync.cli import main
from nats_sync.testing import NatsCluster, NatsServer, _free_port

pytestmark = pytest.mark.timeout(60)

Connect = Callable[..., nats_sync.Client]


@pytest.fixture
def clients() -> Iterator[Connect]:
    """``clients(url, **kwargs)``: a connected client, closed after the test."""
    made: list[nats_sync.Client] = []

    def factory(url: str, **kwargs: object) -> nats_sync.Client:
        nc = nats_sync.connect(url, **kwargs)  # type: ignore[arg-type]
        made.append(nc)
        return nc

    yield factory
    for nc in made:
        nc.close()


def types(trace: nats_sync.MessageTrace) -> list[str]:
    return [event["type"] for event in trace.events]


def nothing_arrives(sub: nats_sync.Subscription) -> bool:
    try:
        sub.next_msg(timeout=0.3)
    except nats_sync.TimeoutError:
        return True
    return False


# --- one server ---------------------------------------------------------------------


def test_trace_only_reports_the_subscriber_without_delivering(
    nats_server: NatsServer, clients: Connect
) -> None:
    nc = clients(nats_server.url, name="tracer")
    listener = clients(nats_server.url, name="listener")
    sub = listener.subscribe("orders.new")
    listener.flush(5)  # the subscription is registered before the trace
    trace = nc.trace("orders.new", b"{}", timeout=5)
    assert trace.complete and len(trace.reports) == 1
    [report] = trace.reports
    assert set(report) >= {"server", "request", "events"} and "hops" not in report
    assert report["request"]["header"]["Nats-Trace-Only"] == ["true"]
    ingress, egress = trace.events
    assert ingress["type"] == "in" and ingress["name"] == "tracer"
    assert ingress["acc"] == "$G" and ingress["subj"] == "orders.new"
    assert egress["type"] == "eg" and egress["kind"] == 0 and egress["name"] == "listener"
    assert egress["sub"] == "orders.new" and "error" not in egress
    assert {event["server"] for event in trace.events} == {report["server"]["name"]}
    assert nothing_arrives(sub)


def test_deliver_true_delivers_with_the_callers_headers(
    nats_server: NatsServer, clients: Connect
) -> None:
    nc = clients(nats_server.url)
    sub = nc.subscribe("orders.new")
    trace = nc.trace("orders.new", b"order 1", headers={"Order": "1"}, deliver=True, timeout=5)
    assert types(trace) == ["in", "eg"] and trace.complete
    assert "Nats-Trace-Only" not in trace.reports[0]["request"]["header"]
    msg = sub.next_msg(timeout=5)
    assert msg.data == b"order 1" and msg.headers is not None and msg.headers["Order"] == "1"


def test_no_subscriber_is_an_ingress_alone(nats_server: NatsServer, clients: Connect) -> None:
    started = time.monotonic()
    trace = clients(nats_server.url).trace("nobody.listens", timeout=5)
    assert types(trace) == ["in"] and trace.complete
    assert time.monotonic() - started < 2.5, "a complete path ends the wait early"


def test_jetstream_stores_only_when_delivered(
    jetstream_server: NatsServer, clients: Connect
) -> None:
    nc = clients(jetstream_server.url)
    js = nc.jetstream()
    js.add_stream(name="ORDERS", subjects=["orders.>"])
    trace = nc.trace("orders.new", b"not stored", timeout=5)
    [stored] = [event for event in trace.events if event["type"] == "js"]
    assert stored["stream"] == "ORDERS" and "error" not in stored
    assert js.stream_info("ORDERS").state.messages == 0
    trace = nc.trace("orders.new", b"stored", deliver=True, timeout=5)
    assert "js" in types(trace) and trace.complete
    assert js.stream_info("ORDERS").state.messages == 1
    assert js.get_msg("ORDERS", 1).data == b"stored"


def test_a_subject_mapping_is_reported(
    nats_server_factory: Callable[..., NatsServer], clients: Connect
) -> None:
    server = nats_server_factory(config='mappings { "old.>": "new.>" }\n')
    nc = clients(server.url)
    nc.subscribe("new.thing")
    trace = nc.trace("old.thing", timeout=5)
    assert types(trace) == ["in", "sm", "eg"]
    assert trace.events[1]["to"] == "new.thing" and trace.events[2]["sub"] == "new.thing"


@pytest.mark.parametrize(
    ("subject", "timeout", "wrong"),
    [
        ("", 1.0, "empty"),
        ("orders.*", 1.0, "wildcard"),
        ("orders.>", 1.0, "wildcard"),
        ("a..b", 1.0, "empty token"),
        ("orders", -1, "timeout"),
        ("orders", 0, "timeout"),
    ],
)
def test_bad_input_is_refused_before_publishing(
    nats_server: NatsServer, clients: Connect, subject: str, timeout: float, wrong: str
) -> None:
    nc = clients(nats_server.url)
    sub = nc.subscribe(">")
    with pytest.raises(nats_sync.InvalidArgumentError, match=wrong):
        nc.trace(subject, timeout=timeout)
    assert nothing_arrives(sub)


def test_trace_headers_of_the_caller_are_refused(nats_server: NatsServer, clients: Connect) -> None:
    nc = clients(nats_server.url)
    with pytest.raises(nats_sync.BadHeaderError, match=r"nats-trace-only.*sets the Nats-Trace-"):
        nc.trace("orders", headers={"nats-trace-only": "false"})
    with pytest.raises(nats_sync.BadHeaderError, match="snappy"):
        nc.trace("orders", headers={"Accept-Encoding": "snappy"})


def test_gzip_reports_are_read(nats_server: NatsServer, clients: Connect) -> None:
    nc = clients(nats_server.url)
    nc.subscribe("orders")
    trace = nc.trace("orders", headers={"Accept-Encoding": "gzip"}, timeout=5)
    assert types(trace) == ["in", "eg"] and trace.complete


# --- a cluster ------------------------------------------------------------------------


def test_one_report_per_server_on_the_path(nats_cluster: NatsCluster, clients: Connect) -> None:
    first, second, third = nats_cluster.servers
    nc = clients(first.url, name="origin")
    for server in (second, third):
        listener = clients(server.url, name=f"on-{server.name}")
        listener.subscribe("prices.eur")
        listener.flush(5)
    wait_for_interest(nc, "prices.eur", servers=2)
    started = time.monotonic()
    trace = nc.trace("prices.eur", timeout=10)
    assert time.monotonic() - started < 5, "the wait ends once every hop reported"
    assert trace.complete and len(trace.reports) == 3
    origin, *hops = trace.reports
    assert origin["server"]["name"] == first.name and origin["hops"] == 2
    assert sorted(report["request"]["header"]["Nats-Trace-Hop"][0] for report in hops) == ["1", "2"]
    assert {report["server"]["name"] for report in hops} == {second.name, third.name}
    routes = [event for event in origin["events"] if event["type"] == "eg"]
    assert sorted(event["kind"] for event in routes) == [1, 1]
    delivered = [event for event in trace.events if event["type"] == "eg" and event["kind"] == 0]
    assert sorted(event["server"] for event in delivered) == sorted(
        [str(second.name), str(third.name)]
    )
    assert all(
        event["type"] == "in" and event["kind"] == 1 for event in (hop["events"][0] for hop in hops)
    )


def wait_for_interest(nc: nats_sync.Client, subject: str, servers: int) -> None:
    """Until the origin's report names ``servers`` routes (interest crossed the mesh)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        trace = nc.trace(subject, timeout=2)
        if (
            sum(
                event["type"] == "eg" and event["kind"] == 1 for event in trace.reports[0]["events"]
            )
            == servers
        ):
            return
        time.sleep(0.05)
    pytest.fail(f"interest in {subject} did not reach the origin from {servers} servers")


def test_a_leafnode_chain_reports_hop_by_hop(
    nats_server_factory: Callable[..., NatsServer], clients: Connect
) -> None:
    hub_port, middle_port = _free_port(), _free_port()
    hub = nats_server_factory(name="hub", config=f'leafnodes {{ listen: "127.0.0.1:{hub_port}" }}')
    nats_server_factory(
        name="middle",
        config=(
            f'leafnodes {{ listen: "127.0.0.1:{middle_port}"\n'
            f'  remotes: [{{url: "nats-leaf://127.0.0.1:{hub_port}"}}] }}'
        ),
    )
    far = nats_server_factory(
        name="far",
        config=(f'leafnodes {{ remotes: [{{url: "nats-leaf://127.0.0.1:{middle_port}"}}] }}'),
    )
    listener = clients(far.url, name="far-listener")
    listener.subscribe("far.away")
    listener.flush(5)
    nc = clients(hub.url)
    deadline = time.monotonic() + 10
    while (trace := nc.trace("far.away", timeout=5)).events[-1].get("name") != "far-listener":
        assert time.monotonic() < deadline, f"interest never reached the hub: {trace.events}"
        time.sleep(0.05)
    assert trace.complete
    assert [report["server"]["name"] for report in trace.reports] == ["hub", "middle", "far"]
    assert [report.get("hops") for report in trace.reports] == [1, 1, None]
    assert [
        event["hop"] for event in trace.events if event["type"] == "eg" and event["kind"] == 4
    ] == ["1", "1.1"]


# --- accounts ---------------------------------------------------------------------------

ACCOUNTS = """
accounts {
  SVC {
    users: [{user: svc, password: svc}]
    exports: [{service: "svc.>", allow_trace: %(allow)s}, {stream: "ticks.>"}]
  }
  APP {
    users: [{user: app, password: app}]
    imports: [
      {service: {account: SVC, subject: "svc.>"}, to: "app.svc.>"}
      {stream: {account: SVC, subject: "ticks.>"}, allow_trace: %(allow)s}
    ]
  }
}
"""


@pytest.mark.parametrize("allow", ["true", "false"])
def test_a_service_import_crosses_accounts(
    nats_server_factory: Callable[..., NatsServer], clients: Connect, allow: str
) -> None:
    server = nats_server_factory(config=ACCOUNTS % {"allow": allow})
    service = clients(server.url, user="svc", password="svc", name="service")
    service.subscribe("svc.>")
    service.flush(5)
    app = clients(server.url, user="app", password="app", name="app")
    trace = app.trace("app.svc.add", timeout=5)
    assert trace.complete
    assert trace.events[0]["acc"] == "APP" and trace.events[0]["name"] == "app"
    imported = trace.events[1]
    assert imported["type"] == "si" and imported["acc"] == "SVC"
    assert (imported["from"], imported["to"]) == ("app.svc.add", "svc.add")
    if allow == "true":  # the exporter lets the trace follow into its account
        assert types(trace) == ["in", "si", "eg"]
        assert trace.events[2]["acc"] == "SVC" and trace.events[2]["name"] == "service"
    else:  # the trace ends at the account boundary
        assert types(trace) == ["in", "si"]


def test_a_stream_export_crosses_accounts(
    nats_server_factory: Callable[..., NatsServer], clients: Connect
) -> None:
    server = nats_server_factory(config=ACCOUNTS % {"allow": "true"})
    app = clients(server.url, user="app", password="app", name="app")
    app.subscribe("ticks.eur")
    app.flush(5)
    source = clients(server.url, user="svc", password="svc")
    trace = source.trace("ticks.eur", timeout=5)
    assert types(trace) == ["in", "se", "eg"] and trace.complete
    assert trace.events[1]["acc"] == "APP" and trace.events[2]["acc"] == "APP"


# --- the command line -------------------------------------------------------------------


def test_cli_prints_one_line_per_event(
    jetstream_server: NatsServer, clients: Connect, capsys: pytest.CaptureFixture[str]
) -> None:
    nc = clients(jetstream_server.url, name="listener")
    nc.subscribe("orders.*", queue="workers")
    nc.jetstream().add_stream(name="ORDERS", subjects=["orders.>"])
    status = main(["trace", "orders.new", "{}", "-s", jetstream_server.url])
    out, err = capsys.readouterr()
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == 3 and err == ""
    server = lines[0].split(":")[0]
    assert all(line.startswith(f"{server}: ") for line in lines)
    assert lines[0].endswith(
        'ingress from client "nats-sync cli" (cid '
        + lines[0].split("(cid ")[1].split(")")[0]
        + "), account $G, subject orders.new"
    )
    assert any(line.endswith(": JetStream stream ORDERS, subject orders.new") for line in lines)
    assert any(
        'egress to client "listener"' in line
        and line.endswith(", subscription orders.*, queue workers")
        for line in lines
    )
    assert nc.jetstream().stream_info("ORDERS").state.messages == 0

    assert main(["trace", "orders.new", "stored", "--deliver", "-s", jetstream_server.url]) == 0
    capsys.readouterr()
    assert nc.jetstream().stream_info("ORDERS").state.messages == 1


def test_cli_refuses_a_wildcard(
    nats_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "orders.*", "-s", nats_server.url]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "wildcard" in err and err.count("\n") == 1

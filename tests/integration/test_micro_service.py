"""nats_sync.micro services against a real nats-server: endpoints, groups, errors,
discovery, queue groups, stop, statistics and the handler pools."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync import micro
from nats_sync.micro import Request, ServiceError

pytestmark = pytest.mark.timeout(30)

ClientFactory = Callable[..., nats_sync.Client]


def echo(prefix: bytes) -> Callable[[Request], None]:
    def handler(req: Request) -> None:
        req.respond(prefix + req.data)

    return handler


def test_two_endpoints_and_a_group_answer(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    svc = micro.add_service(nc, "calc", "1.2.3", description="adds things", metadata={"team": "a"})
    svc.add_endpoint("upper", lambda req: req.respond(req.data.upper()))
    svc.add_endpoint("echo", echo(b"echo:"), subject="calc.echo", metadata={"k": "v"})
    group = svc.add_group("products")
    group.add_endpoint("price", echo(b"price:"))
    group.add_endpoint("stock", echo(b"stock:"), subject="level")
    nested = group.add_group("admin")
    nested.add_endpoint("wipe", echo(b"wipe:"))

    assert caller.request("upper", b"abc", timeout=5).data == b"ABC"
    assert caller.request("calc.echo", b"x", timeout=5).data == b"echo:x"
    assert caller.request("products.price", b"p", timeout=5).data == b"price:p"
    assert caller.request("products.level", b"s", timeout=5).data == b"stock:s"
    assert caller.request("products.admin.wipe", b"w", timeout=5).data == b"wipe:w"

    info = svc.info()
    assert (info.name, info.version, info.description) == ("calc", "1.2.3", "adds things")
    assert info.metadata == {"team": "a"}
    assert [(e.name, e.subject, e.queue_group) for e in info.endpoints] == [
        ("upper", "upper", "q"),
        ("echo", "calc.echo", "q"),
        ("price", "products.price", "q"),
        ("stock", "products.level", "q"),
        ("wipe", "products.admin.wipe", "q"),
    ]
    assert info.endpoints[1].metadata == {"k": "v"}
    svc.stop()


def test_queue_groups_per_service_group_and_endpoint(connect: ClientFactory) -> None:
    nc = connect()
    svc = micro.add_service(nc, "qs", "0.1.0", queue_group="svcq")
    svc.add_endpoint("a", echo(b""))
    svc.add_endpoint("b", echo(b""), queue_group="own")
    svc.add_group("g", queue_group="grpq").add_endpoint("c", echo(b""))
    assert [e.queue_group for e in svc.info().endpoints] == ["svcq", "own", "grpq"]
    svc.stop()


def test_error_replies_carry_the_headers_and_are_counted(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()

    def handler(req: Request) -> None:
        if req.data == b"bad":
            req.respond_error(400, "bad input", data=b"details", headers={"X-Extra": "1"})
        else:
            req.respond(b"ok")

    svc = micro.add_service(nc, "errs", "1.0.0")
    svc.add_endpoint("do", handler)
    reply = caller.request("do", b"bad", timeout=5)
    assert reply.headers is not None
    assert reply.headers["Nats-Service-Error"] == "bad input"
    assert reply.headers["Nats-Service-Error-Code"] == "400"
    assert reply.headers["X-Extra"] == "1"
    assert reply.data == b"details"
    with pytest.raises(ServiceError) as caught:
        micro.check(reply)
    assert caught.value.code == 400 and caught.value.description == "bad input"
    assert caught.value.data == b"details"
    good = caller.request("do", b"fine", timeout=5)
    assert micro.check(good) is good
    endpoint = svc.stats().endpoints[0]
    assert (endpoint.num_requests, endpoint.num_errors) == (2, 1)
    assert endpoint.last_error == "400:bad input"
    svc.stop()


@pytest.mark.parametrize(
    ("code", "sent", "parsed"),
    [
        ("404", "404", 404),  # nats-py's respond_error(code: str) and nats.go's Error
        ("E_NO_PRODUCT", "E_NO_PRODUCT", 0),  # a non-numeric code goes out as given
        (404, "404", 404),
    ],
)
def test_a_str_code_is_sent_as_given(
    connect: ClientFactory, code: int | str, sent: str, parsed: int
) -> None:
    nc, caller = connect(), connect()
    svc = micro.add_service(nc, "codes", "1.0.0")
    svc.add_endpoint("quote", lambda req: req.respond_error(code, "no such product"))
    reply = caller.request("quote", b"", timeout=5)
    assert reply.headers is not None
    assert reply.headers["Nats-Service-Error-Code"] == sent
    assert reply.headers["Nats-Service-Error"] == "no such product"
    with pytest.raises(ServiceError, match=sent) as caught:
        micro.check(reply)
    # ServiceError.code stays an int (0 when the code is not a number); the text keeps it.
    assert caught.value.code == parsed
    endpoint = svc.stats().endpoints[0]
    assert (endpoint.num_errors, endpoint.last_error) == (1, f"{sent}:no such product")
    svc.stop()


@pytest.mark.parametrize("code", ["", "40\r\n4", True, 4.04, None, b"404"])
def test_a_bad_code_is_refused_and_nothing_is_sent(connect: ClientFactory, code: object) -> None:
    nc, caller = connect(), connect()
    refused: list[BaseException] = []

    def handler(req: Request) -> None:
        try:
            req.respond_error(code, "x")  # type: ignore[arg-type]
        except nats_sync.InvalidArgumentError as err:
            refused.append(err)
            req.respond(b"refused")

    svc = micro.add_service(nc, "badcodes", "1.0.0")
    svc.add_endpoint("do", handler)
    reply = caller.request("do", b"", timeout=5)
    # The handler's own plain answer, not an error reply: respond_error sent nothing.
    assert reply.data == b"refused" and micro.check(reply) is reply
    assert len(refused) == 1
    svc.stop()


def test_a_raising_handler_is_answered_500_and_the_service_keeps_serving(
    connect: ClientFactory,
) -> None:
    nc, caller = connect(), connect()

    def handler(req: Request) -> None:
        if req.data == b"boom":
            raise RuntimeError("kaboom")
        if req.data == b"teapot":
            raise ServiceError(code=418, description="short and stout")
        req.respond(b"fine")

    svc = micro.add_service(nc, "fragile", "1.0.0")
    svc.add_endpoint("work", handler)
    svc.add_endpoint("pool", handler, max_workers=3)
    for subject in ("work", "pool"):
        with pytest.raises(ServiceError) as caught:
            micro.check(caller.request(subject, b"boom", timeout=5))
        assert caught.value.code == 500 and "kaboom" in caught.value.description
        with pytest.raises(ServiceError) as caught:
            micro.check(caller.request(subject, b"teapot", timeout=5))
        assert caught.value.code == 418
        assert caller.request(subject, b"x", timeout=5).data == b"fine"
    for endpoint in svc.stats().endpoints:
        assert (endpoint.num_requests, endpoint.num_errors) == (3, 2)
        assert endpoint.last_error == "418:short and stout"
    assert not svc.stopped
    svc.stop()


def _discover(nc: nats_sync.Client, subject: str, expect: int) -> list[dict[str, object]]:
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    nc.publish(subject, b"", reply=inbox)
    answers: list[dict[str, object]] = []
    while True:
        try:
            msg = sub.next_msg(timeout=5 if len(answers) < expect else 0.3)
        except nats_sync.TimeoutError:
            break
        if msg.is_no_responders:  # the server's word that nobody listens
            break
        answers.append(json.loads(msg.data))
    sub.unsubscribe()
    assert len(answers) == expect
    return answers


def test_discovery_subjects_with_and_without_name_and_id(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    one = micro.add_service(nc, "alpha", "1.0.0", metadata={"m": "1"})
    one.add_endpoint("a1", echo(b""))
    other = micro.add_service(nc, "beta", "2.0.0")
    caller.request("a1", b"", timeout=5)
    for verb in ("PING", "INFO", "STATS"):
        kind = f"io.nats.micro.v1.{verb.lower()}_response"
        both = _discover(caller, f"$SRV.{verb}", 2)
        assert sorted(str(a["name"]) for a in both) == ["alpha", "beta"]
        assert {a["type"] for a in both} == {kind}
        named = _discover(caller, f"$SRV.{verb}.alpha", 1)
        assert named[0]["id"] == one.id and named[0]["version"] == "1.0.0"
        assert named[0]["metadata"] == {"m": "1"}
        exact = _discover(caller, f"$SRV.{verb}.beta.{other.id}", 1)
        assert exact[0]["id"] == other.id
        assert _discover(caller, f"$SRV.{verb}.alpha.nosuchid", 0) == []
    info = _discover(caller, "$SRV.INFO.alpha", 1)[0]
    assert info["endpoints"] == [
        {"name": "a1", "subject": "a1", "queue_group": "q", "metadata": {}}
    ]
    assert info["description"] == ""
    stats = _discover(caller, f"$SRV.STATS.alpha.{one.id}", 1)[0]
    endpoint = stats["endpoints"][0]  # type: ignore[index]
    assert endpoint["num_requests"] == 1 and endpoint["num_errors"] == 0
    assert isinstance(endpoint["processing_time"], int) and endpoint["processing_time"] > 0
    assert endpoint["average_processing_time"] == endpoint["processing_time"]
    assert str(stats["started"]).endswith("Z")
    # The helpers read the same answers.
    assert [p.name for p in micro.ping(caller)] == ["alpha", "beta"]
    assert [i.id for i in micro.info(caller, "beta")] == [other.id]
    assert micro.stats(caller, "alpha", one.id)[0].endpoints[0].num_requests == 1
    assert micro.ping(caller, "gamma", timeout=0.5) == []
    one.stop()
    other.stop()


def test_two_instances_share_the_load_and_both_answer_ping(connect: ClientFactory) -> None:
    first_nc, second_nc, caller = connect(), connect(), connect()
    first = micro.add_service(first_nc, "shared", "1.0.0")
    second = micro.add_service(second_nc, "shared", "1.0.0")
    first.add_endpoint("work", echo(b"1"))
    second.add_endpoint("work", echo(b"2"))
    seen = {caller.request("work", b"", timeout=5).data for _ in range(200)}
    assert seen == {b"1", b"2"}
    totals = [s.stats().endpoints[0].num_requests for s in (first, second)]
    assert sum(totals) == 200 and min(totals) > 0
    assert sorted(p.id for p in micro.ping(caller, "shared")) == sorted([first.id, second.id])
    first.stop()
    second.stop()


def test_stop_leaves_callers_with_no_responders(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    with micro.add_service(nc, "brief", "1.0.0") as svc:
        svc.add_endpoint("hello", echo(b"hi "))
        svc.add_endpoint("pooled", echo(b"hi "), max_workers=2)
        assert caller.request("hello", b"you", timeout=5).data == b"hi you"
        assert not svc.stopped
    assert svc.stopped
    for subject in ("hello", "pooled", "$SRV.PING.brief"):
        with pytest.raises(nats_sync.NoRespondersError):
            caller.request(subject, b"", timeout=5)
    svc.stop()  # again: nothing happens
    with pytest.raises(nats_sync.InvalidArgumentError):
        svc.add_endpoint("late", echo(b""))


def test_stop_waits_for_a_running_handler(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    started, finished = threading.Event(), threading.Event()

    def slow(req: Request) -> None:
        started.set()
        time.sleep(0.5)
        req.respond(b"done")
        finished.set()

    svc = micro.add_service(nc, "slow", "1.0.0")
    svc.add_endpoint("slow", slow)
    future = caller.request_future("slow", b"", timeout=5)
    assert started.wait(5)
    svc.stop(timeout=5)
    assert finished.is_set()
    assert future.result(5).data == b"done"


def test_stats_counts_exactly_and_reset_clears(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    svc = micro.add_service(nc, "counted", "1.0.0")
    svc.add_endpoint("a", echo(b""))
    svc.add_endpoint("b", lambda req: req.respond_error(503, "busy"), max_workers=2)
    before = svc.stats().started
    replies = caller.request_batch("a", [b"%d" % n for n in range(37)], timeout=5)
    assert all(isinstance(r, nats_sync.Msg) for r in replies)
    failures = caller.request_batch("b", [b""] * 5, timeout=5)
    with pytest.raises(ServiceError):
        micro.check(failures[0])
    a, b = svc.stats().endpoints
    assert (a.num_requests, a.num_errors, a.last_error) == (37, 0, "")
    assert a.average_processing_time == a.processing_time // 37
    assert (b.num_requests, b.num_errors, b.last_error) == (5, 5, "503:busy")
    svc.reset()
    after = svc.stats()
    assert after.started >= before
    assert all(
        (e.num_requests, e.num_errors, e.processing_time, e.last_error) == (0, 0, 0, "")
        for e in after.endpoints
    )
    svc.stop()


def test_max_workers_4_runs_handlers_concurrently(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    lock = threading.Lock()
    running = 0
    peak = 0
    all_in = threading.Barrier(4, timeout=10)

    def handler(req: Request) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        all_in.wait()  # passes only if four handlers run at the same time
        with lock:
            running -= 1
        req.respond(req.data)

    svc = micro.add_service(nc, "wide", "1.0.0")
    svc.add_endpoint("work", handler, max_workers=4)
    replies = caller.request_batch("work", [b"%d" % n for n in range(8)], timeout=15)
    assert [micro.check(r).data for r in replies] == [b"%d" % n for n in range(8)]
    assert peak == 4
    svc.stop()


def test_max_workers_1_keeps_order(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    seen: list[bytes] = []

    def handler(req: Request) -> None:
        seen.append(req.data)
        req.respond(b"")

    svc = micro.add_service(nc, "ordered", "1.0.0")
    svc.add_endpoint("work", handler)
    payloads = [b"%d" % n for n in range(300)]
    replies = caller.request_batch("work", payloads, timeout=10)
    assert all(isinstance(r, nats_sync.Msg) for r in replies)
    assert seen == payloads
    svc.stop()


def test_a_slow_endpoint_does_not_block_another(connect: ClientFactory) -> None:
    nc, caller = connect(), connect()
    release = threading.Event()

    def stuck(req: Request) -> None:
        release.wait(10)
        req.respond(b"late")

    svc = micro.add_service(nc, "mixed", "1.0.0")
    svc.add_endpoint("stuck", stuck)
    svc.add_endpoint("quick", echo(b"q"))
    pending = caller.request_future("stuck", b"", timeout=10)
    assert caller.request("quick", b"", timeout=2).data == b"q"
    assert [p.name for p in micro.ping(caller, "mixed")] == ["mixed"]
    release.set()
    assert pending.result(10).data == b"late"
    svc.stop()


def test_closing_the_client_ends_the_pool_threads(connect: ClientFactory) -> None:
    nc = connect()
    svc = micro.add_service(nc, "closing", "1.0.0")
    svc.add_endpoint("work", echo(b""), max_workers=3)
    names = [t.name for t in threading.enumerate() if t.name.startswith("nats_sync-micro-")]
    assert len(names) == 3
    nc.close()
    assert svc.stopped
    deadline = time.monotonic() + 5
    while any(t.name.startswith("nats_sync-micro-closing") for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "has space"},
        {"name": ""},
        {"name": "dots.no"},
        {"version": "1.0"},
        {"version": "v1.0.0"},
        {"metadata": {"k": 1}},
        {"queue_group": "a b"},
    ],
)
def test_bad_service_arguments(connect: ClientFactory, bad: dict[str, object]) -> None:
    nc = connect()
    arguments: dict[str, object] = {"name": "ok", "version": "1.0.0", **bad}
    with pytest.raises(nats_sync.InvalidArgumentError) as caught:
        micro.add_service(nc, **arguments)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)
    field = next(iter(bad))
    assert field.split("_")[0] in str(caught.value)


def test_bad_endpoint_arguments(connect: ClientFactory) -> None:
    svc = micro.add_service(connect(), "args", "1.0.0")
    with pytest.raises(nats_sync.InvalidArgumentError, match="endpoint name"):
        svc.add_endpoint("a.b", echo(b""))
    with pytest.raises(nats_sync.InvalidArgumentError, match="subject"):
        svc.add_endpoint("a", echo(b""), subject="a..b")
    with pytest.raises(nats_sync.InvalidArgumentError, match="max_workers"):
        svc.add_endpoint("a", echo(b""), max_workers=0)
    with pytest.raises(nats_sync.InvalidArgumentError, match="group"):
        svc.add_group("g.*")
    with pytest.raises(TypeError):
        svc.add_endpoint("a", "not callable")  # type: ignore[arg-type]
    assert svc.info().endpoints == []
    svc.stop()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_handler_may_stop_its_own_service(connect: ClientFactory, workers: int) -> None:
    nc, caller = connect(), connect()
    svc = micro.add_service(nc, "selfstop", "1.0.0")
    returned = threading.Event()

    def shutdown(req: Request) -> None:
        req.respond(b"bye")
        svc.stop(timeout=3)
        returned.set()

    svc.add_endpoint("shutdown", shutdown, max_workers=workers)
    started = time.monotonic()
    assert caller.request("shutdown", b"", timeout=5).data == b"bye"
    assert returned.wait(5) and svc.stopped
    with pytest.raises(nats_sync.NoRespondersError):
        caller.request("$SRV.PING.selfstop", b"", timeout=5)
    assert time.monotonic() - started < 5

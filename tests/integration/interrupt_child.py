"""The child process of the Ctrl-C fuzz tests (``test_interrupts.py``).

Usage: ``python interrupt_child.py <family> <server url>``.

It connects, prints ``READY`` and then runs one call family in a loop, catching
``KeyboardInterrupt`` and going on (as a notebook user does cell after cell), while the
parent sends SIGINT at random moments. On SIGUSR1 it stops the loop, ignores SIGINT,
makes 20 calls of the family (each must succeed), closes the client and prints one JSON
line: the calls that worked, the errors, the interrupts caught and how long close() took.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import nats_sync
from nats_sync.errors import Error

FAMILY, URL = sys.argv[1], sys.argv[2]
stop = False
caught = 0
errors: dict[str, int] = {}


def on_usr1(signum: int, frame: Any) -> None:
    global stop  # noqa: PLW0603 - a signal handler has nowhere else to put it
    stop = True


signal.signal(signal.SIGUSR1, on_usr1)

responder = nats_sync.connect(URL, name="responder")
responder.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
responder.flush()
nc = nats_sync.connect(URL, name="interrupted", pending_size=1 << 20)


def request() -> None:
    assert nc.request("echo", b"hi", timeout=2.0).data == b"hi"
    nc.flush(timeout=2.0)


def request_batch() -> None:
    replies = nc.request_batch("echo", [b"a", b"b", b"c", b"d"], timeout=2.0)
    assert [getattr(reply, "data", reply) for reply in replies] == [b"a", b"b", b"c", b"d"]


def flush() -> None:
    nc.flush(timeout=2.0)


sub = nc.subscribe("feed") if FAMILY == "next_msg" else None


def next_msg() -> None:
    assert sub is not None
    nc.publish("feed", b"1")
    nc.publish("feed", b"2")
    sub.next_msg(timeout=2.0)
    sub.next_msgs(5, timeout=0.001)


BIG = b"x" * 300_000


def publish_full() -> None:
    # 1 MiB pending_size: the fourth big message in a row waits for room.
    for _ in range(8):
        nc.publish("sink", BIG)
    request()


#: The handler of every Client made (recorded as its __init__ starts): a Ctrl-C right
#: after connect() returns, before this script stores the client, loses it in the
#: script's own code, which no library can prevent (a handler left open and not in
#: here is a client that connect() itself leaked).
handed_out: list[Any] = []
_client_init = nats_sync.Client.__init__


def _recording_init(self: nats_sync.Client, handler: Any, *args: Any) -> None:
    handed_out.append(handler)
    _client_init(self, handler, *args)


nats_sync.Client.__init__ = _recording_init  # type: ignore[method-assign]


def drain_close() -> None:
    other = nats_sync.connect(URL, name="short-lived")
    try:
        other.request("echo", b"x", timeout=2.0)
        other.subscribe("feed")
        if time.monotonic_ns() % 2:
            other.drain(timeout=2.0)
    finally:
        other.close()
    request()


JS = FAMILY.startswith(("js_", "kv", "obj"))
js = nc.jetstream() if JS else None
if js is not None:
    # Made on the responder: the stream, bucket and consumer are not what is tested.
    setup = responder.jetstream()
    if FAMILY in ("js_publish", "js_publish_async", "js_fetch", "js_messages"):
        setup.create_stream(name=f"S{FAMILY}", subjects=[f"{FAMILY}.>"], storage="memory")
    if FAMILY in ("js_fetch", "js_messages"):
        setup.create_consumer(f"S{FAMILY}", durable_name="C", ack_policy="explicit")
        consumer = js.consumer(f"S{FAMILY}", "C")
    if FAMILY == "kv":
        setup.create_key_value(bucket="conf", storage="memory")
        kv = js.key_value("conf")
    if FAMILY == "obj":
        setup.create_object_store("docs", storage="memory")
        obs = js.object_store("docs")
stream = None


def js_publish() -> None:
    assert js is not None
    assert js.publish(f"{FAMILY}.a", b"x", timeout=2.0).seq > 0


def js_publish_async() -> None:
    assert js is not None
    for _ in range(5):
        js.publish_async(f"{FAMILY}.a", b"x")
    js.publish_async_completed(timeout=2.0)
    assert js.publish_async_pending() == 0


def js_fetch() -> None:
    assert js is not None
    js.publish(f"{FAMILY}.a", b"x", timeout=2.0)
    batch = consumer.fetch(1, max_wait=2.0)
    assert len(batch) == 1
    for msg in batch:
        msg.ack()


def js_messages() -> None:
    global stream  # noqa: PLW0603 - one stream across the loop's calls
    assert js is not None
    js.publish(f"{FAMILY}.a", b"x", timeout=2.0)
    if stream is None:
        stream = consumer.messages(max_messages=10)
    stream.next(timeout=2.0).ack()


def kv_get_put() -> None:
    kv.put("k", b"v")
    assert kv.get("k").value == b"v"


def obj_get_put() -> None:
    obs.put("o", b"object")
    assert obs.get("o").data == b"object"


if FAMILY == "micro":
    from nats_sync import micro

    service = micro.add_service(nc, "calc", "1.0.0")
    service.add_endpoint("upper", lambda req: req.respond(req.data.upper()))
    nc.flush()


def micro_respond() -> None:
    assert nc.request("upper", b"abc", timeout=2.0).data == b"ABC"


CALLS: dict[str, Callable[[], None]] = {
    "js_publish": js_publish,
    "js_publish_async": js_publish_async,
    "js_fetch": js_fetch,
    "js_messages": js_messages,
    "kv": kv_get_put,
    "obj": obj_get_put,
    "micro": micro_respond,
    "request": request,
    "request_batch": request_batch,
    "flush": flush,
    "next_msg": next_msg,
    "publish_full": publish_full,
    "drain_close": drain_close,
}
call = CALLS[FAMILY]
print("READY", flush=True)


in_call = False


def on_int(signum: int, frame: Any) -> None:
    # KeyboardInterrupt only inside the library call: one landing in this loop's own
    # lines would end the child, which proves nothing about the client.
    if in_call:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_int)
while not stop:
    try:
        in_call = True
        call()
    except KeyboardInterrupt:
        in_call = False  # first (no call before it): the harness is not under test
        caught += 1
    except (Error, AssertionError) as err:
        in_call = False
        errors[type(err).__name__] = errors.get(type(err).__name__, 0) + 1
    finally:
        in_call = False
signal.signal(signal.SIGINT, signal.SIG_IGN)

# An interrupt that lands while a requester reads the socket ends the connection on
# purpose (the stream position is lost); the client then reconnects on its own. Usable
# means usable once that is done: a loaded machine can still be reconnecting here.
reconnected_by = time.monotonic() + 10.0
while not nc.is_connected and not nc.is_closed and time.monotonic() < reconnected_by:
    time.sleep(0.01)

ok = 0
failures: list[str] = []
for _ in range(20):
    try:
        call()
        ok += 1
    except BaseException as err:  # reported to the parent
        failures.append(repr(err))
        if len(failures) >= 3:
            break  # broken: the rest would only time out too
snapshot = (
    {}
    if ok == 20
    else {key: repr(value)[:200] for key, value in nc._handler.debug_snapshot().items()}
)
conn = nc._handler.connection()
if conn is not None and ok < 20:
    snapshot["parked"] = repr(conn._parked)
    snapshot["token"] = repr(conn._token)
if stream is not None and ok < 20:
    snapshot["stream"] = (
        repr(
            {
                name: getattr(stream, name)
                for name in (
                    "_state",
                    "_connected",
                    "_pending_msgs",
                    "_pending_bytes",
                    "_unsent",
                    "_retry_at",
                    "_check_due",
                    "_heartbeat_due",
                )
            }
        )
        + f" now={time.monotonic()}"
    )
started = time.monotonic()
if stream is not None:
    stream.stop()
nc.close()
close_took = time.monotonic() - started
responder.close()
# Clients this script lost right after connect() returned: closed here, counted.
lost_by_script = 0
for handler in handed_out:
    if handler.state.name != "CLOSED":
        lost_by_script += 1
        handler.close()


def client_threads() -> list[str]:
    # is_alive(): Thread.start() cut by Ctrl-C before the thread began leaves the Thread
    # object listed by enumerate() (the stdlib's start() cleans up after Exception, not
    # KeyboardInterrupt), though no thread runs for it.
    return [
        t.name for t in threading.enumerate() if t.name.startswith("nats_sync-") and t.is_alive()
    ]


# A close that an interrupt cut short goes on on its own thread: give those a moment.
# (5 s: on a loaded machine, load average 30, 2 s once left the callback and timer threads
# of a close still joining.)
settle_by = time.monotonic() + 5.0
while client_threads() and time.monotonic() < settle_by:
    time.sleep(0.05)
alive = client_threads()
print(
    json.dumps(
        {
            "ok": ok,
            "failures": failures[:3],
            "caught": caught,
            "errors": errors,
            "close_took": close_took,
            "threads": alive,
            "snapshot": snapshot,
            "lost_by_script": lost_by_script,
        }
    ),
    flush=True,
)

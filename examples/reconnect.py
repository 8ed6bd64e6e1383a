"""Watch the client ride through a server restart: callbacks, buffering, resubscribing.

Runs an embedded nats-server, kills it, publishes while it is down (the messages wait
in the client's buffer), starts it again on the same port, and shows every callback
and every message arriving. Run: python examples/reconnect.py
"""

from __future__ import annotations

import threading
import time

import nats_sync
from nats_sync.testing import NatsServer


def main() -> None:
    events: list[str] = []
    reconnected = threading.Event()

    def note(event: str) -> None:
        events.append(event)
        print(f"  callback: {event}")

    with NatsServer() as server:
        listener = nats_sync.connect(
            server.url, name="listener", reconnect_delay_cb=lambda attempt: 0.1
        )
        sub = listener.subscribe("demo.restart")
        listener.flush()
        nc = nats_sync.connect(
            server.url,
            name="publisher",
            disconnected_cb=lambda: note("disconnected"),
            reconnected_cb=lambda: (note("reconnected"), reconnected.set()),
            error_cb=lambda error: note(f"error: {error}"),
            closed_cb=lambda: note("closed"),
            # hold the publisher's reconnect a moment so the listener resubscribes first
            reconnect_delay_cb=lambda attempt: 0.5,
        )
        print(f"connected to {nc.connected_url}; killing the server")
        server.kill()
        while not nc.is_reconnecting:
            time.sleep(0.01)
        for number in range(5):
            nc.publish("demo.restart", f"sent while down #{number}".encode())
        print(f"buffered {nc.pending_data_size} bytes while disconnected; restarting")
        server.start()
        if not reconnected.wait(15):
            raise SystemExit("the client did not reconnect")
        nc.flush()
        for _ in range(5):
            print(f"  listener got: {sub.next_msg(timeout=5).data.decode()}")
        print(f"reconnects: {nc.stats['reconnects']}; events: {', '.join(events)}")
        nc.close()
        listener.close()


if __name__ == "__main__":
    main()

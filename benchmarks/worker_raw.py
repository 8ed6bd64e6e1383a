"""The same publish and sequential-request work on a bare socket: Python's ceiling here.

Publish sends pre-encoded frames with ``sendall`` in ~64 KiB chunks and ends with a
PING/PONG round trip (what ``flush`` does). The request loop sends one PUB with a reply
subject it has subscribed to, then blocks on ``recv`` until the whole MSG is in.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks import common as c
from benchmarks.responder import CONNECT, open_socket, wait_pong

Metrics = dict[str, Any]
CHUNK_BYTES = 64 * 1024
INBOX = "_INBOX.raw.bench"


def publish(url: str, size: int, count: int) -> Metrics:
    """``count`` pre-encoded PUB frames in big ``sendall`` chunks, then PING/PONG."""
    frame = b"PUB %s %d\r\n%s\r\n" % (c.PUBLISH_SUBJECT.encode(), size, c.payload(size))
    per_chunk = max(1, CHUNK_BYTES // len(frame))
    chunk = frame * per_chunk
    full, rest = divmod(count, per_chunk)
    sock = open_socket(url)
    sock.sendall(CONNECT)
    wait_pong(sock)
    sendall = sock.sendall
    watch = c.Stopwatch().start()
    for _ in range(full):
        sendall(chunk)
    sendall(frame * rest)
    wait_pong(sock)
    watch.stop()
    sock.close()
    return c.throughput_metrics(count, watch, "msgs")


def request_seq(url: str, size: int, count: int, warmup: int) -> Metrics:
    """Sequential request/reply with minimal parsing: one MSG back per PUB sent."""
    sock = open_socket(url)
    sock.sendall(CONNECT + f"SUB {INBOX} 1\r\n".encode())
    wait_pong(sock)
    frame = b"PUB %s %s %d\r\n%s\r\n" % (
        c.ECHO_SUBJECT.encode(),
        INBOX.encode(),
        size,
        c.payload(size),
    )
    sendall = sock.sendall
    recv = sock.recv

    def one() -> None:
        sendall(frame)
        buf = recv(65536)
        while True:
            eol = buf.find(b"\r\n")
            if eol >= 0 and buf.startswith(b"MSG "):
                need = eol + 2 + int(buf[buf.rfind(b" ", 0, eol) + 1 : eol]) + 2
                if len(buf) >= need:
                    return
            elif eol >= 0:  # PING or +OK in front: answer / skip it
                if buf.startswith(b"PING"):
                    sendall(b"PONG\r\n")
                buf = buf[eol + 2 :]
                continue
            buf += recv(65536)

    for _ in range(warmup):
        one()
    clock = time.perf_counter_ns
    latencies: list[int] = []
    watch = c.Stopwatch().start()
    for _ in range(count):
        started = clock()
        one()
        latencies.append(clock() - started)
    watch.stop()
    sock.close()
    return c.latency_metrics(latencies, watch)


SCENARIOS = {"publish": publish, "request_seq": request_seq}

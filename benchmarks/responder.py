"""A raw-socket echo responder, shared by both clients' request benchmarks.

How it works: one blocking socket, no client library. It sends CONNECT and
``SUB bench.echo 1``, prints ``ready`` once a PING has come back as PONG (so the
subscription is live on the server), then answers every ``MSG`` that has a reply
subject by publishing the payload back. All replies produced by one ``recv`` go out in
one ``sendall``. The parser is a plain ``bytes.find`` loop over a growing buffer.

Run: ``python -m benchmarks.responder nats://127.0.0.1:4222 [subject]``.
"""

from __future__ import annotations

import socket
import sys
from urllib.parse import urlsplit

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":false,"protocol":1}\r\n'
RECV_SIZE = 1 << 18


def open_socket(url: str, timeout: float = 5.0) -> socket.socket:
    """Connects to ``nats://host:port`` and reads the server's INFO line."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 4222), timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while b"\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("server closed the connection before INFO")
        buf += chunk
    return sock


def wait_pong(sock: socket.socket) -> bytes:
    """Sends PING and reads until PONG; returns whatever came after it."""
    sock.sendall(b"PING\r\n")
    buf = b""
    while True:
        at = buf.find(b"PONG\r\n")
        if at >= 0:
            return buf[at + 6 :]
        if b"-ERR" in buf:
            raise ConnectionError(buf.decode(errors="replace"))
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk


def serve(url: str, subject: str = "bench.echo") -> None:
    """Answers requests on ``subject`` until the server closes the connection."""
    sock = open_socket(url)
    sock.sendall(CONNECT + f"SUB {subject} 1\r\n".encode())
    buf = wait_pong(sock)
    sock.settimeout(None)
    print("ready", flush=True)
    recv = sock.recv
    sendall = sock.sendall
    while True:
        chunk = recv(RECV_SIZE)
        if not chunk:
            return
        buf = buf + chunk if buf else chunk
        out: list[bytes] = []
        pos = 0
        end = len(buf)
        while pos < end:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            if buf.startswith(b"MSG ", pos):
                args = buf[pos + 4 : eol].split()
                size = int(args[-1])
                stop = eol + 2 + size
                if stop + 2 > end:
                    break  # payload not complete yet
                if len(args) == 4:  # subject sid reply size
                    payload = buf[eol + 2 : stop]
                    out.append(b"PUB %s %d\r\n%s\r\n" % (args[2], size, payload))
                pos = stop + 2
            elif buf.startswith(b"PING", pos):
                out.append(b"PONG\r\n")
                pos = eol + 2
            else:  # PONG, +OK, INFO: nothing to do; -ERR: say so
                if buf.startswith(b"-ERR", pos):
                    print(buf[pos:eol].decode(errors="replace"), file=sys.stderr, flush=True)
                pos = eol + 2
        buf = buf[pos:]
        if out:
            sendall(b"".join(out))


def main() -> None:
    """Entry point: ``python -m benchmarks.responder URL [SUBJECT]``."""
    serve(sys.argv[1], *(sys.argv[2:3]))


if __name__ == "__main__":
    main()

"""Fixtures shared by every test folder.

Fixtures:
    default_port: the docs' port 4222 on 127.0.0.1, held for the test alone. Every other
        test runs its servers on free ports (the kernel's ephemeral range, far above
        4222), so only the tests asking for this fixture bind 4222, one at a time even
        across processes (a lock file), and a test finding 4222 taken by something
        else on the machine is skipped, saying so.
"""

from __future__ import annotations

import fcntl
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nats_sync._defaults import DEFAULT_PORT

#: How long a test waits for another one (in another pytest process) to free 4222.
DEFAULT_PORT_LOCK_WAIT = 60.0


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``host:port`` now (as nats-server binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listener
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@pytest.fixture
def default_port() -> Iterator[int]:
    """Port 4222, free and held for this test (skipped, with the reason, when taken)."""
    lock_path = Path(tempfile.gettempdir()) / f"nats-sync-tests-port-{DEFAULT_PORT}.lock"
    with open(lock_path, "w") as lock:
        deadline = time.monotonic() + DEFAULT_PORT_LOCK_WAIT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test held port {DEFAULT_PORT} for more than "
                                f"{DEFAULT_PORT_LOCK_WAIT:.0f}s ({lock_path})")
                time.sleep(0.1)
        try:
            if not port_is_free(DEFAULT_PORT):
                pytest.skip(f"port {DEFAULT_PORT} on 127.0.0.1 is taken on this machine "
                            "(a nats-server running?), and this test is about that port")
            yield DEFAULT_PORT
            released = time.monotonic() + 5.0  # a server stopped at the test's end
            while not port_is_free(DEFAULT_PORT) and time.monotonic() < released:
                time.sleep(0.05)
            assert port_is_free(DEFAULT_PORT), f"the test left port {DEFAULT_PORT} in use"
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

"""The nats-sync command line, run as ``python -m nats_sync`` against a real server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import nats_sync
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> (
    subprocess.CompletedProcess[str]
):
    return subprocess.run([sys.executable, "-m", "nats_sync", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)


@contextmanager
def background(*args: str) -> Iterator[subprocess.Popen[str]]:
    """A CLI process whose first line of output has been printed (it is ready)."""
    process = subprocess.Popen([sys.executable, "-m", "nats_sync", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first, process.stderr.read() if process.stderr else "no output"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def test_pub_reaches_a_subscriber_with_headers(nats_server: NatsServer) -> None:
    with nats_sync.connect(nats_server.url) as nc:
        sub = nc.subscribe("cli.pub")
        nc.flush()
        done = run_cli("--server", nats_server.url, "pub", "cli.pub", "msg {n}",
                       "--count", "3", "--header", "k:v")
        assert done.returncode == 0, done.stderr
        assert "published 3 message(s)" in done.stdout
        received = [sub.next_msg(5) for _ in range(3)]
    assert [msg.data for msg in received] == [b"msg 1", b"msg 2", b"msg 3"]
    assert received[0].headers == {"k": "v"}


def test_sub_prints_what_arrives_and_stops_after_count(nats_server: NatsServer) -> None:
    with background("--server", nats_server.url, "sub", "cli.sub", "--count", "2") as process:
        with nats_sync.connect(nats_server.url) as nc:
            nc.publish("cli.sub", b"first", headers={"h": "1"})
            nc.publish("cli.sub", b"second")
            nc.flush()
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "[cli.sub]" in out and "  h: 1" in out
    assert out.index("first") < out.index("second")


def test_req_and_reply_echo(nats_server: NatsServer) -> None:
    with background("--server", nats_server.url, "reply", "cli.echo", "--count", "1"):
        done = run_cli("--server", nats_server.url, "req", "cli.echo", "hello")
    assert done.returncode == 0, done.stderr
    assert "hello" in done.stdout and "reply in" in done.stdout


def test_reply_with_a_command_and_nats_url_from_the_environment(
    nats_server: NatsServer,
) -> None:
    env = {**os.environ, "NATS_URL": nats_server.url}
    command = f'{sys.executable} -c "import sys; print(sys.stdin.read().upper(), end=str())"'
    with background("--server", nats_server.url, "reply", "cli.upper", "--command", command):
        done = run_cli("req", "cli.upper", "shout", env=env)
    assert done.returncode == 0, done.stderr
    assert "SHOUT" in done.stdout


def test_req_without_responders_fails_with_one_clear_line(nats_server: NatsServer) -> None:
    done = run_cli("--server", nats_server.url, "req", "cli.nobody", "x")
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0
    assert "no responders" in done.stderr


def test_an_unreachable_server_fails_with_one_clear_line() -> None:
    done = run_cli("--server", "nats://127.0.0.1:1", "--timeout", "1", "pub", "x", "y")
    assert done.returncode == 1
    assert done.stderr.startswith("nats-sync: ")
    assert "Traceback" not in done.stderr


def test_bad_header_is_refused(nats_server: NatsServer) -> None:
    done = run_cli("--server", nats_server.url, "pub", "x", "y", "--header", "novalue")
    assert done.returncode == 1 and "KEY:VALUE" in done.stderr


def test_bench_prints_a_summary(nats_server: NatsServer) -> None:
    done = run_cli("--server", nats_server.url, "bench", "--msgs", "2000", "--requests", "200",
                   "--size", "16")
    assert done.returncode == 0, done.stderr
    for row in ("publish", "pub -> sub", "request"):
        assert row in done.stdout
    assert "0 dropped" in done.stdout and "p50" in done.stdout


def test_server_command_runs_an_embedded_server() -> None:
    process = subprocess.Popen([sys.executable, "-m", "nats_sync", "server"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("nats-server running at nats://"), line
        url = line.split(" at ")[1].split(" ")[0]
        with nats_sync.connect(url) as nc:
            nc.flush()
            assert nc.is_connected
    finally:
        process.terminate()
        process.wait(10)
    # SIGTERM stops the embedded server with the command: nothing listens any more.
    with pytest.raises(nats_sync.NoServersError):
        nats_sync.connect(url, connect_timeout=1.0)
    deadline = time.monotonic() + 5
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.returncode is not None


@pytest.mark.parametrize("command", [["sub", "cli.int"], ["reply", "cli.int"]])
def test_ctrl_c_stops_cleanly(nats_server: NatsServer, command: list[str]) -> None:
    with background("--server", nats_server.url, *command) as process:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "Traceback" not in err

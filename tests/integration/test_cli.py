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
from nats_sync.cli import main
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nats_sync", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


@contextmanager
def background(*args: str) -> Iterator[subprocess.Popen[str]]:
    """A CLI process whose first line of output has been printed (it is ready)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "nats_sync", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
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
        done = run_cli(
            "--server",
            nats_server.url,
            "pub",
            "cli.pub",
            "msg {n}",
            "--count",
            "3",
            "--header",
            "k:v",
        )
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
    done = run_cli(
        "--server", nats_server.url, "bench", "--msgs", "2000", "--requests", "200", "--size", "16"
    )
    assert done.returncode == 0, done.stderr
    for row in ("publish", "pub -> sub", "request"):
        assert row in done.stdout
    assert "0 dropped" in done.stdout and "p50" in done.stdout


def test_server_command_runs_an_embedded_server() -> None:
    # --port 0: the default port 4222 is only for the tests that hold it (default_port).
    process = subprocess.Popen(
        [sys.executable, "-m", "nats_sync", "server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
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


CHILD = os.path.join(os.path.dirname(__file__), "cli_sigint_child.py")


def sigint_at_line(url: str, command: list[str], line: int) -> tuple[int, str]:
    """Runs the CLI with a SIGINT at its ``line``th line event after the ready line."""
    done = subprocess.run(
        [sys.executable, CHILD, str(line), "--server", url, *command],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.returncode, done.stderr


# Issue 24: on 3.10, 3.12 and 3.13 a Ctrl-C just after start could land inside
# threading.Condition.wait between the wait and the restore of its lock (a KeyboardInterrupt
# there leaves the lock released: "RuntimeError: release unlocked lock", exit status 1) or
# inside next_msg (then close hung). On 3.12.1 lines 14-53 after the ready line held such
# moments; the fast run walks one poll period of each command, the slow one two.
@pytest.mark.parametrize("command", [["sub", "cli.int"], ["reply", "cli.int"]])
@pytest.mark.parametrize(
    "lines",
    [
        range(12, 32),
        pytest.param(range(1, 62), marks=[pytest.mark.slow, pytest.mark.timeout(240)]),
    ],
)
def test_ctrl_c_at_each_moment_after_start_stops_cleanly(
    nats_server: NatsServer, command: list[str], lines: range
) -> None:
    fired = 0
    for line in lines:
        status, err = sigint_at_line(nats_server.url, command, line)
        fired += "[SIGINT at" in err
        assert status == 0 and "Traceback" not in err, f"SIGINT at line event {line}: {err}"
    # Every moment was reached: the loop runs until interrupted, so the Nth event comes.
    assert fired == len(lines)


# --- connection options on either side of the command (issue 13) -------------------

#: Every option that is accepted before and after the command.
GLOBAL_OPTIONS = (
    "--server",
    "-s",
    "--timeout",
    "--creds",
    "--user",
    "--password",
    "--token",
    "--tls-ca",
    "--context",
)
#: Nothing listens here: connecting fails at once.
UNREACHABLE = "nats://127.0.0.1:1"


@pytest.fixture
def echo(client: nats_sync.Client) -> str:
    """A subject answered with the request's own payload."""
    client.subscribe("cli.echo", cb=lambda msg: msg.respond(msg.data))
    client.flush()
    return "cli.echo"


@pytest.fixture
def silent(client: nats_sync.Client) -> str:
    """A subject with a subscriber that never answers: a request to it times out."""
    client.subscribe("cli.silent")
    client.flush()
    return "cli.silent"


def with_options(position: str, options: list[str], command: list[str]) -> list[str]:
    return [*options, *command] if position == "before" else [*command, *options]


@pytest.mark.parametrize("position", ["before", "after"])
def test_req_takes_server_and_timeout_on_either_side(
    nats_server: NatsServer,
    echo: str,
    position: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = with_options(
        position, ["-s", nats_server.url, "--timeout", "5"], ["req", echo, "ping-123"]
    )
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ping-123" in out and "reply in" in out


@pytest.mark.parametrize("position", ["before", "after"])
def test_timeout_on_either_side_is_the_one_the_request_uses(
    nats_server: NatsServer,
    silent: str,
    position: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 0.5 differs from the default (2.0): a command's parser that put its own default
    # back would show here.
    argv = with_options(
        position, ["--timeout", "0.5"], ["req", silent, "x", "--server", nats_server.url]
    )
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("nats-sync: ") and "within 0.5s" in err


def test_pub_takes_server_after_the_command(
    nats_server: NatsServer,
    client: nats_sync.Client,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sub = client.subscribe("cli.pub.after")
    client.flush()
    assert (
        main(["pub", "cli.pub.after", "hi {n}", "--count", "2", "--server", nats_server.url]) == 0
    )
    assert "published 2 message(s)" in capsys.readouterr().out
    assert [sub.next_msg(5).data for _ in range(2)] == [b"hi 1", b"hi 2"]


def test_sub_takes_server_after_the_command(nats_server: NatsServer) -> None:
    argv = ["sub", "cli.sub.after", "--count", "1", "--server", nats_server.url]
    with background(*argv) as process:
        with nats_sync.connect(nats_server.url) as nc:
            nc.publish("cli.sub.after", b"arrived")
            nc.flush()
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "[cli.sub.after]" in out and "arrived" in out


def test_options_split_around_the_command(nats_server: NatsServer) -> None:
    # A process, as a user types it: --timeout before, --server after.
    with background(
        "--timeout", "5", "reply", "cli.mixed", "--count", "1", "--server", nats_server.url
    ):
        done = run_cli("--server", nats_server.url, "req", "cli.mixed", "both", "--timeout", "5")
    assert done.returncode == 0, done.stderr
    assert "both" in done.stdout and "reply in" in done.stdout


def test_given_on_both_sides_the_one_after_the_command_wins(
    nats_server: NatsServer,
    echo: str,
    silent: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["-s", UNREACHABLE, "req", echo, "x", "-s", nats_server.url]) == 0
    assert "reply in" in capsys.readouterr().out

    assert main(["-s", nats_server.url, "req", echo, "x", "-s", UNREACHABLE, "--timeout", "1"]) == 1
    assert capsys.readouterr().err.startswith("nats-sync: ")

    assert (
        main(["--timeout", "5", "-s", nats_server.url, "req", silent, "x", "--timeout", "0.3"]) == 1
    )
    assert "within 0.3s" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["pub", "sub", "req", "reply", "bench", "server"])
def test_each_commands_help_lists_the_connection_options(
    command: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: nats-sync {command} ")
    words = " ".join(out.split())  # argparse wraps to the terminal's width
    for option in GLOBAL_OPTIONS:
        assert f"{option} " in words, option
    assert "default: $NATS_URL, else the nats context's url, else nats://" in words
    assert "(default 2.0)" in words
    assert "SUPPRESS" not in out


def test_a_bad_value_after_the_command_is_a_usage_error() -> None:
    done = run_cli("req", "cli.x", "--timeout", "abc", "--server", UNREACHABLE, timeout=20)
    assert done.returncode == 2
    assert "usage: nats-sync req " in done.stderr
    assert "argument --timeout: invalid float value: 'abc'" in done.stderr
    assert "Traceback" not in done.stderr

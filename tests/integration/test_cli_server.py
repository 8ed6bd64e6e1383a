"""``nats-sync server``, run as ``python -m nats_sync server``: the server the docs talk to.

Each test spawns the command, reads what it prints (bounded in time), talks to the server
it names and stops it with SIGINT or SIGTERM, as a terminal or a service manager would.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import nats_sync
from nats_sync.jetstream import JetStreamNotEnabledError

pytestmark = pytest.mark.timeout(60)

#: Seconds for the command to print its lines, and to exit once signalled.
START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0


@dataclass
class Running:
    """A running ``nats-sync server`` and the lines it printed at start."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        first = self.lines[0]
        assert first.startswith("nats-server running at nats://"), first
        return first.split(" at ", 1)[1].split(" ", 1)[0]

    @property
    def store(self) -> Path:
        line = next(line for line in self.lines if line.startswith("JetStream store: "))
        return Path(line.removeprefix("JetStream store: ").split(" (", 1)[0])

    def stop(self, signum: int = signal.SIGINT) -> str:
        """Signals the command; returns its stderr once it exited with 0."""
        self.process.send_signal(signum)
        _, err = self.process.communicate(timeout=STOP_TIMEOUT)
        assert self.process.returncode == 0, err
        return err


def _read_lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line.rstrip("\n"))


@contextmanager
def server_command(*args: str) -> Iterator[Running]:
    """``nats-sync server ARGS``, once it printed its URL and its JetStream line."""
    # A session of its own: a failed test kills the command with its nats-server child.
    process = subprocess.Popen(
        [sys.executable, "-m", "nats_sync", "server", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    running = Running(process)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True).start()
    try:
        while not any(line.startswith("JetStream") for line in running.lines):
            try:
                running.lines.append(lines.get(timeout=START_TIMEOUT))
            except queue.Empty:
                os.killpg(process.pid, signal.SIGKILL)
                pytest.fail(
                    f"no start lines within {START_TIMEOUT}s: {running.lines} "
                    f"{process.communicate(timeout=5)[1]}"
                )
        yield running
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT)


def run_server_command(*args: str) -> subprocess.CompletedProcess[str]:
    """``nats-sync server ARGS`` expected to exit by itself (a refused start)."""
    return subprocess.run(
        [sys.executable, "-m", "nats_sync", "server", *args],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )


def test_default_is_the_docs_url_with_jetstream(default_port: int) -> None:
    with server_command() as running:
        assert running.url == "nats://127.0.0.1:4222" == f"nats://127.0.0.1:{default_port}"
        with nats_sync.connect("nats://127.0.0.1:4222") as nc:
            js = nc.jetstream()
            js.create_stream(name="FIRST", subjects=["first.>"])
            assert js.publish("first.contact", b"hello").seq == 1
        store = running.store
        assert store.is_dir()
        running.stop(signal.SIGINT)
    assert not store.exists(), "the temporary store outlived the server"


def test_port_0_prints_a_url_that_serves() -> None:
    with server_command("--port", "0") as running:
        assert not running.url.endswith(":4222")
        assert any("NATS_URL=" + running.url in line for line in running.lines)
        with nats_sync.connect(running.url) as nc:
            sub = nc.subscribe("greet")
            nc.publish("greet", b"hi")
            assert sub.next_msg(timeout=2).data == b"hi"
            assert nc.jetstream().account_info().streams == 0
        running.stop(signal.SIGTERM)


def test_no_jetstream_runs_core_nats_only() -> None:
    with server_command("--port", "0", "--no-jetstream") as running:
        assert "JetStream: off (--no-jetstream)" in running.lines
        with nats_sync.connect(running.url) as nc, pytest.raises(JetStreamNotEnabledError):
            nc.jetstream().account_info()
        running.stop()


def test_temporary_store_is_removed_at_exit() -> None:
    with server_command("--port", "0") as running:
        store = running.store
        assert "removed at exit" in running.lines[-1]
        with nats_sync.connect(running.url) as nc:
            nc.jetstream().create_stream(name="GONE", subjects=["gone"])
        assert any(store.rglob("*")), "the stream is not in the store named"
        running.stop(signal.SIGTERM)
    assert not store.exists()


def test_store_dir_is_kept_and_reused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with server_command("--port", "0", "--store-dir", str(store)) as running:
        assert running.store == store.resolve()
        assert running.lines[-1].endswith("(kept)")
        with nats_sync.connect(running.url) as nc:
            js = nc.jetstream()
            js.create_stream(name="KEPT", subjects=["kept.>"])
            js.publish("kept.one", b"survives a restart")
        running.stop(signal.SIGTERM)
    assert store.is_dir() and any(store.rglob("*"))
    with server_command("--port", "0", "--store-dir", str(store)) as again:
        with nats_sync.connect(again.url) as nc:
            kept = nc.jetstream().stream("KEPT")
            assert kept.info().state.messages == 1
            assert kept.get_msg(1).data == b"survives a restart"
        again.stop()
    assert store.is_dir()


def test_a_port_in_use_is_one_line_and_a_non_zero_exit() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_server_command("--port", str(port))
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"nats-sync: port {port} on 127.0.0.1 is in use"), lines[0]
    assert "--port" in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--port", "70000"], "argument --port: 70000 is not a port"),
        (["--port", "x"], "argument --port: not a port number: 'x'"),
        (["--no-jetstream", "--store-dir", "d"], "not allowed with argument"),
    ],
)
def test_bad_options_are_usage_errors(args: list[str], words: str) -> None:
    done = run_server_command(*args)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


def test_store_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    done = run_server_command("--port", "0", "--store-dir", str(not_a_folder))
    assert done.returncode == 1
    assert (
        done.stderr == f"nats-sync: nats: invalid argument: --store-dir {not_a_folder}: "
        "not a folder\n"
    )


def test_config_keeps_working_and_its_jetstream_block_decides(tmp_path: Path) -> None:
    store = tmp_path / "configured"
    config = tmp_path / "server.conf"
    config.write_text(f'jetstream {{ store_dir: "{store}" }}\nmax_payload: 65536\n')
    with server_command("--port", "0", "--config", str(config)) as running:
        assert f"JetStream: as {config} sets it (store included)" in running.lines
        with nats_sync.connect(running.url) as nc:
            assert nc.max_payload == 65536
            nc.jetstream().create_stream(name="CONF", subjects=["conf"])
        running.stop()
    assert any(store.rglob("*")), "the config's store_dir was not used"

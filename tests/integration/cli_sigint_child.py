"""Runs the nats-sync CLI and sends it a real SIGINT at the Nth line event (``sys.settrace``)
after its ready line: ``python cli_sigint_child.py N ARGS...``.

Why: a Ctrl-C lands wherever the main thread happens to be, and a test that signals from
outside hits one moment at random; this walks the moments one by one. The signal is a real
one (``os.kill``), so the CLI's own handling runs, not a KeyboardInterrupt raised by hand.
Prints ``[SIGINT at file:line]`` on stderr when it fired.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Any

from nats_sync import cli

state = {"armed": False, "lines": 0}
target = int(sys.argv[1])


class ArmingStdout:
    """stdout that arms the tracer at the first flush: the ready line is out."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return int(self.stream.write(text))

    def flush(self) -> None:
        self.stream.flush()
        state["armed"] = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def tracer(frame: FrameType, event: str, arg: object) -> Any:
    if event == "line" and state["armed"]:
        state["lines"] += 1
        if state["lines"] == target:
            state["armed"] = False
            sys.stderr.write(f"[SIGINT at {frame.f_code.co_filename}:{frame.f_lineno}]\n")
            os.kill(os.getpid(), signal.SIGINT)
    return tracer


sys.stdout = ArmingStdout(sys.stdout)
sys.settrace(tracer)  # the main thread only: the client's threads are not traced
status = cli.main(sys.argv[2:])
sys.settrace(None)
sys.exit(status)

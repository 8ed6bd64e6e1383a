"""The ``nats-sync`` command's subcommands, one module per family (``jetstream``,
``object``, ``counter``, ``micro``, ``pcgroups``, ``server``, ``trace``, ``sys``); the
parser and ``main`` are in ``nats_sync.cli``. Built on the public client only; runs on
the command's main thread.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TextIO

import nats_sync

#: ``connect(args)``: the client a subcommand works with, from the common options.
Connect = Callable[[argparse.Namespace], nats_sync.Client]
#: ``handler(args, out)``: what a subcommand runs, writing to ``out``.
Handler = Callable[[argparse.Namespace, TextIO], None]
#: ``add_options(parser)``: adds the common options (servers, credentials...) to a parser.
AddOptions = Callable[[argparse.ArgumentParser], None]

__all__ = ["AddOptions", "Connect", "Handler"]

"""The protocol core stays sans-IO: no module of nats_sync._core.proto imports an I/O module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import nats_sync._core.proto

PROTO_DIR = Path(nats_sync._core.proto.__file__).parent
PROTO_PACKAGE = "nats_sync._core.proto"
FORBIDDEN = frozenset({"socket", "ssl", "threading", "time", "select", "selectors", "asyncio"})
ALLOWED_OWN = ("nats_sync._core.proto", "nats_sync.errors", "nats_sync._defaults")


def _allowed_own(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in ALLOWED_OWN)


def imported_modules(source: str, package: str = PROTO_PACKAGE) -> list[str]:
    """Every module an import statement in ``source`` names, relative ones resolved.

    ``from pkg import name`` yields both ``pkg`` and ``pkg.name``: ``name`` may be a module.
    """
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append(module)
            found.extend(f"{module}.{alias.name}" for alias in node.names)
    return found


def violations(source: str) -> list[str]:
    """The imports in ``source`` that break the sans-IO rule."""
    bad: list[str] = []
    for module in imported_modules(source):
        top = module.split(".")[0]
        if top in FORBIDDEN:
            bad.append(f"imports I/O module {module}")
        elif top == "nats_sync" and not _allowed_own(module):
            # "from nats_sync import errors" names nats_sync itself and nats_sync.errors:
            # only the second one says what is really imported.
            if module == "nats_sync":
                continue
            bad.append(f"imports {module} from outside the protocol core")
    return bad


PROTO_MODULES = sorted(PROTO_DIR.glob("*.py"))


def test_proto_modules_found() -> None:
    names = {path.name for path in PROTO_MODULES}
    assert {"__init__.py", "parser.py", "encoder.py", "headers.py", "ops.py"} <= names


@pytest.mark.parametrize("path", PROTO_MODULES, ids=[path.name for path in PROTO_MODULES])
def test_proto_module_is_sans_io(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "import socket",
        "import ssl as _ssl",
        "import os, threading",
        "from time import monotonic",
        "import select",
        "from selectors import DefaultSelector",
        "import asyncio.events",
        "def f():\n    import time\n",
        "try:\n    import ssl\nexcept ImportError:\n    pass\n",
        "from nats_sync import client",
        "from nats_sync._core.threads.connection import Connection",
        "import nats_sync.client",
        "from ... import client",
        "from ...msg import Msg",
    ],
)
def test_checker_catches_forbidden_imports(source: str) -> None:
    assert violations(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "import json",
        "from collections.abc import Mapping",
        "from nats_sync.errors import ProtocolError",
        "from nats_sync import errors",
        "from nats_sync._defaults import MAX_CONTROL_LINE",
        "from nats_sync._core.proto.ops import PING",
        "from . import ops",
        "from .headers import decode_headers",
        "from ... import errors",
        "from ...errors import ProtocolError",
    ],
)
def test_checker_allows_pure_imports(source: str) -> None:
    assert violations(source) == []

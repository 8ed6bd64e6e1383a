"""Every ``nats-sync ...`` the docs show names commands and options the CLI has.

The walk (test_docs_walk.py) runs the shell lines of the pages a new user follows first;
this checks the rest without a server: each inline ```nats-sync ...``` and each
``nats-sync`` line of a shell block, on every docs page, against the CLI's own parser.
Commands and actions must exist (``kv add|ls|get`` names several), and so must every
option given after them; a complete line (no placeholder such as ``COMMAND`` or
``...``, no ``|`` list) must also parse as it is written.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from doc_blocks import ROOT, doc_pages, steps

from nats_sync.cli import _parser

_INLINE = re.compile(r"`(nats-sync [^`]+)`")


def mentions(page: Path) -> list[tuple[int, str]]:
    """The page's ``nats-sync`` command lines with their line numbers."""
    text = page.read_text(encoding="utf-8")
    found = [
        (text.count("\n", 0, m.start()) + 1, " ".join(m.group(1).split()))
        for m in _INLINE.finditer(text)
    ]
    for block in steps(page):
        if block.lang == "shell":
            for offset, line in enumerate(block.code.splitlines()):
                if line.strip().startswith("nats-sync "):
                    found.append((block.line + offset, line.split(" #", 1)[0].strip()))
    return found


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def problems(command: str) -> list[str]:
    """What in ``command`` (``nats-sync ...``) the CLI does not have (empty: nothing)."""
    try:
        words = shlex.split(command)[1:]
    except ValueError:
        words = command.split()[1:]
    parser = _parser()
    found: list[str] = []
    position = 0
    while position < len(words):
        word = words[position]
        choices = _subcommands(parser)
        if not choices:
            break
        if word.startswith("-"):  # a global option before the command
            position += 1
            continue
        if word.isupper() or word == "...":  # a placeholder: COMMAND, ACTION
            return found
        names = word.split("|")
        found += [f"no command or action {name!r}" for name in names if name not in choices]
        if len(names) > 1 or found:
            return found
        parser = choices[word]
        position += 1
    options = parser._option_string_actions
    for word in words:
        if word.startswith("-") and word.split("=", 1)[0] not in options:
            found.append(f"no option {word!r} for `nats-sync {' '.join(words[:position])}`")
    complete = not any(w.isupper() or "..." in w or "|" in w for w in words)
    if complete and not found:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                _parser().parse_args(words)
            except SystemExit:
                found.append(f"does not parse: {err.getvalue().strip().splitlines()[-1]}")
    return found


def _pages() -> list[Path]:
    return list(dict.fromkeys([*doc_pages(), *sorted((ROOT / "docs").rglob("*.md"))]))


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_cli_mentions_match_the_cli(page: Path) -> None:
    wrong = [
        f"{page.relative_to(ROOT)}:{line}: `{command}`: {problem}"
        for line, command in mentions(page)
        for problem in problems(command)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_check_finds_drift() -> None:
    """A renamed command, action or option, or a missing argument, is reported."""
    assert problems("nats-sync stream ls") == []
    assert problems("nats-sync kv add|ls|get|put") == []
    assert problems("nats-sync COMMAND --help") == []
    assert problems("nats-sync streams ls") == ["no command or action 'streams'"]
    assert problems("nats-sync kv add|list") == ["no command or action 'list'"]
    assert problems("nats-sync server --store DIR")[0].startswith("no option '--store'")
    assert problems("nats-sync kv get flags")[0].startswith("does not parse: ")

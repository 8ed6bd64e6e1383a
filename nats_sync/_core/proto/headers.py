"""The NATS/1.0 header block codec (used by HPUB and HMSG).

How it works: pure functions over bytes and str, no I/O. A block is the version line
``NATS/1.0[ <status>[ <description>]]``, then ``Name: value`` lines, then an empty line.
Lines starting with a space or tab continue the previous value (folded lines).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nats_sync._core.proto.ops import Headers
from nats_sync.errors import BadHeaderError, ProtocolError

VERSION_LINE = b"NATS/1.0"
_VERSION_TEXT = "NATS/1.0"
_FORBIDDEN_IN_NAME = frozenset(":\x7f" + "".join(chr(c) for c in range(33)))
#: What the decoder trims around names and values: only the spaces and tabs the encoder
#: writes, so values ending in other (Unicode) whitespace survive a round trip.
_BLANKS = " \t"

HeadersInput = Mapping[str, "str | Sequence[str]"]


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise BadHeaderError(f"header name must be a str, got {type(name).__name__}")
    if not name:
        raise BadHeaderError("header name is empty")
    if not _FORBIDDEN_IN_NAME.isdisjoint(name):
        raise BadHeaderError(
            f"header name {name!r} contains ':', whitespace or a control character"
        )
    return name


def _check_value(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise BadHeaderError(
            f"header {name!r} value must be a str or a list of str, got {type(value).__name__}"
        )
    if "\r" in value or "\n" in value:
        raise BadHeaderError(f"header {name!r} value contains CR or LF: {value!r}")
    return value


def encode_headers(
    headers: HeadersInput, status: int | None = None, description: str = ""
) -> bytes:
    """Encodes headers as a NATS/1.0 block, ending with the empty line.

    Args:
        headers: name -> value, or name -> list of values for a repeated name.
        status: an optional status code for the version line (servers send these).
        description: the status description, after the code.

    Returns:
        The block, ready to be counted as HPUB's header size.

    Raises:
        BadHeaderError: a name or value that cannot be written.
    """
    version = _VERSION_TEXT
    if status is not None:
        version = f"{version} {status:03d}"
        if description:
            version = f"{version} {_check_value('status description', description)}"
    lines = [version]
    for name, value in headers.items():
        _check_name(name)
        given: object = value  # callers are not type-checked: bytes or None must not pass
        if isinstance(given, (list, tuple)):
            for item in given:
                lines.append(f"{name}: {_check_value(name, item)}")
        else:
            lines.append(f"{name}: {_check_value(name, given)}")
    lines.append("\r\n")
    try:
        return "\r\n".join(lines).encode()
    except UnicodeEncodeError as err:
        raise BadHeaderError(
            f"header block holds {err.object[err.start : err.end]!r}, which UTF-8 cannot encode"
        ) from None


def decode_headers(block: bytes) -> tuple[Headers | None, int | None, str]:
    """Decodes a NATS/1.0 header block.

    Args:
        block: the header bytes of an HMSG (its header-size prefix of the body).

    Returns:
        ``(headers, status, description)``; ``headers`` is None when the block has no
        header lines, ``status`` None when the version line carries no code.

    Raises:
        ProtocolError: the block does not start with ``NATS/1.0``, has a bad status
            code, a line without ``:``, or a continuation line with nothing to continue.
    """
    if not block.startswith(VERSION_LINE):
        raise ProtocolError(f"header block does not start with NATS/1.0: {block[:32]!r}")
    # Undecodable bytes become U+FFFD: the message is still delivered, never dropped.
    lines = block.decode("utf-8", "replace").split("\r\n")
    status: int | None = None
    description = ""
    rest = lines[0][len(_VERSION_TEXT) :]
    if rest:
        if rest[0] not in " \t":
            raise ProtocolError(f"bad header version line {lines[0]!r}")
        code, _, text = rest.strip(_BLANKS).partition(" ")
        if code:
            if len(code) != 3 or not code.isdigit() or not code.isascii():
                raise ProtocolError(f"bad status code {code!r} in header version line")
            status = int(code)
            description = text.strip(_BLANKS)
    headers: Headers = {}
    last_name = ""
    for line in lines[1:]:
        if not line:
            break
        if line[0] in " \t":
            if not last_name:
                raise ProtocolError(f"header continuation line with no header before: {line!r}")
            previous = headers[last_name]
            if isinstance(previous, list):
                previous[-1] = f"{previous[-1]} {line.strip(_BLANKS)}"
            else:
                headers[last_name] = f"{previous} {line.strip(_BLANKS)}"
            continue
        name, colon, value = line.partition(":")
        name = name.strip(_BLANKS)
        if not colon or not name:
            raise ProtocolError(f"bad header line {line!r}")
        value = value.strip(_BLANKS)
        existing = headers.get(name)
        if existing is None:
            headers[name] = value
        elif isinstance(existing, list):
            existing.append(value)
        else:
            headers[name] = [existing, value]
        last_name = name
    return (headers or None), status, description

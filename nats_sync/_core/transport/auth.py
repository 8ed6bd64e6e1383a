"""Credentials for CONNECT: nkey seeds (files or strings), ``.creds`` files (JWT + seed),
user callbacks.

How it works: pure functions, run on the thread that connects (the caller of
``connect()`` or the reconnect thread) for each handshake, so rotated files are picked
up on the next reconnect. They read credential files and sign the server's nonce with
the ``nkeys`` package (the ``nkeys`` extra, imported only when needed); they touch no
client state. Secrets never reach an error message or a log record: errors name the
file and what is wrong with it (a secret passed where a path belongs is not echoed).
Every failure, including an exception from the user's callbacks, is raised as
:class:`BadCredentialsError`, so the reconnect loop treats it as one failed attempt.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nats_sync.errors import BadCredentialsError

_BLOCK = re.compile(
    r"-{3,}[^\n]*BEGIN[^\n]*?-{3,}\s*\n\s*(?P<body>\S+?)\s*\n\s*-{3,}[^\n]*END[^\n]*?-{3,}",
)
#: nkeys' prefix byte of user keys, as the first character of a seed ("SU...").
_USER_SEED_PREFIX = "SU"
_SEED_KINDS = {
    "SA": "an account seed",
    "SO": "an operator seed",
    "SN": "a server seed",
    "SC": "a cluster seed",
}
#: A seed, a JWT or a ``.creds`` block: what a secret given instead of a path looks like.
_SECRET_LIKE = re.compile(r"S[A-Z2-7]{40,}|eyJ|-----BEGIN|[\r\n]")

#: The size of a raw ed25519 signature, what ``signature_cb`` must return.
_SIGNATURE_SIZE = 64

SignatureCallback = Callable[[bytes], bytes]
JwtCallback = Callable[[], str]
#: A user name, password or token: the text, or a callable giving it at each handshake.
Credential = str | Callable[[], str]


def _nkeys() -> Any:
    try:
        import nkeys  # noqa: PLC0415 - an optional extra, needed only for these credentials
    except ImportError as err:
        # Name what failed: nkeys may be there but broken (0.2.0 lacks its pynacl dependency).
        raise BadCredentialsError(
            "nkey and .creds authentication need the nkeys package: "
            f"pip install 'nats-sync[nkeys]' (import failed: {err})"
        ) from None
    return nkeys


def _shown(path: str) -> str:
    """``path`` as error messages show it (only called once it proved to be a path)."""
    return repr(os.fspath(path))


def _read(path: str, what: str) -> str:
    """The text of a credential file; its path, never its content, in any error."""
    text = os.fspath(path)
    if _SECRET_LIKE.search(text):
        # The seed or the .creds content given where its file's path belongs: say so,
        # without echoing it.
        raise BadCredentialsError(
            f"expected the path of a {what}, got a value that looks like the secret itself "
            f"(not shown); write it to a file and pass the file's path"
        )
    try:
        return Path(text).read_text()
    except (OSError, ValueError) as err:  # ValueError: not UTF-8, or a NUL in the path
        raise BadCredentialsError(
            f"cannot read {what} {text!r}: {err.__class__.__name__}"
        ) from None


def _check_user_seed(seed: str, source: str) -> bytes:
    if not seed.startswith("S") or len(seed) < 50:
        raise BadCredentialsError(f"{source} holds no nkey seed")
    if not seed.startswith(_USER_SEED_PREFIX):
        kind = _SEED_KINDS.get(seed[:2], "not a user seed")
        raise BadCredentialsError(f"{source} holds {kind}; a user seed (SU...) is needed")
    nkeys = _nkeys()
    try:
        raw = base64.b32decode(seed + "=" * (-len(seed) % 8))
        valid = nkeys.crc16_checksum(raw[:-2]) == raw[-2:]  # nkeys does not check it
        nkeys.from_seed(seed.encode())
    except Exception:  # base32 and nkeys raise their own error types
        valid = False
    if not valid:
        raise BadCredentialsError(f"{source} holds a malformed nkey seed")
    return seed.encode()


def _seed_in_text(text: str, source: str) -> bytes:
    """The user seed in the text of a seed file (the first ``SU...`` word; the rest is
    ignored); ``source`` names where the text came from in errors."""
    words = re.findall(r"\bS[A-Z2-7]{20,}\b", text)
    user = [word for word in words if word.startswith(_USER_SEED_PREFIX)]
    return _check_user_seed((user or words or [""])[0], source)


def read_seed_file(path: str) -> bytes:
    """The user seed in an nkey seed file (the first ``SU...`` word; other lines ignored).

    Raises:
        BadCredentialsError: unreadable, no seed, or a seed of another kind.
    """
    return _seed_in_text(_read(path, "nkey seed file"), f"nkey seed file {_shown(path)}")


def seed_from_string(seed: str) -> bytes:
    """The user seed given as a string (``nkeys_seed_str``: from an environment variable
    or a vault), read as the text of a seed file would be.

    Raises:
        BadCredentialsError: not a str, no seed, or a seed of another kind (the value is
            never shown).
    """
    if not isinstance(seed, str):
        raise BadCredentialsError(f"nkeys_seed_str must be a str, got {type(seed).__name__}")
    return _seed_in_text(seed, "nkeys_seed_str")


def read_creds_file(path: str) -> tuple[str, bytes]:
    """The user JWT and seed of a standard ``.creds`` file.

    Raises:
        BadCredentialsError: unreadable, or not two BEGIN/END blocks (JWT, then seed).
    """
    text = _read(path, ".creds file")
    blocks = [match.group("body") for match in _BLOCK.finditer(text)]
    if len(blocks) < 2:
        raise BadCredentialsError(
            f".creds file {_shown(path)} does not hold a JWT block and an nkey seed block"
        )
    jwt, seed = blocks[0], blocks[1]
    if jwt.count(".") != 2:
        raise BadCredentialsError(f".creds file {_shown(path)}: its first block is not a JWT")
    return jwt, _check_user_seed(seed, f".creds file {_shown(path)}")


def sign(seed: bytes, nonce: bytes) -> bytes:
    """The raw ed25519 signature of ``nonce`` by the key of ``seed``."""
    signature: bytes = _nkeys().from_seed(seed).sign(nonce)
    return signature


def _encode_signature(signature: bytes) -> str:
    return base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


def credential(value: Credential | None, name: str) -> str | None:
    """A user name, password or token for one handshake: ``value`` itself, or what the
    user's callable returns now (so rotated credentials are picked up at a reconnect).

    Raises:
        BadCredentialsError: the callable raised (the original as ``__cause__``, and
            the value is never shown) or did not return a str.
    """
    if value is None or isinstance(value, str):
        return value
    try:
        given: object = value()
    except Exception as err:
        raise BadCredentialsError(f"the {name} callable raised {type(err).__name__}") from err
    if not isinstance(given, str):
        raise BadCredentialsError(
            f"the {name} callable must return a str, got {type(given).__name__}"
        )
    return given


def _call_user_jwt_cb(user_jwt_cb: JwtCallback) -> str:
    """The JWT from the user's callback (str, or ASCII bytes as nats-py's returns).

    Whatever the callback raises becomes a BadCredentialsError (the original as
    ``__cause__``), so a failing vault fails one handshake, not the reconnect thread.
    """
    try:
        jwt: object = user_jwt_cb()
    except Exception as err:
        raise BadCredentialsError(f"user_jwt_cb raised {type(err).__name__}") from err
    if isinstance(jwt, bytes | bytearray):
        try:
            jwt = bytes(jwt).decode("ascii")
        except UnicodeDecodeError:
            raise BadCredentialsError("user_jwt_cb returned bytes that are not ASCII") from None
    if not isinstance(jwt, str):
        raise BadCredentialsError(
            f"user_jwt_cb must return the JWT as str, got {type(jwt).__name__}"
        )
    jwt = jwt.strip()
    if jwt.count(".") != 2:
        raise BadCredentialsError("user_jwt_cb returned something that is not a JWT")
    return jwt


def _call_signature_cb(signature_cb: SignatureCallback, nonce: bytes) -> bytes:
    """The raw signature from the user's callback; errors as in ``_call_user_jwt_cb``."""
    try:
        signature: object = signature_cb(nonce)
    except Exception as err:
        raise BadCredentialsError(f"signature_cb raised {type(err).__name__}") from err
    if not isinstance(signature, bytes | bytearray) or len(signature) != _SIGNATURE_SIZE:
        got = (
            f"{len(signature)} bytes"
            if isinstance(signature, bytes | bytearray)
            else type(signature).__name__
        )
        raise BadCredentialsError(
            f"signature_cb must return the raw {_SIGNATURE_SIZE}-byte ed25519 signature "
            f"(not base64), got {got}"
        )
    return bytes(signature)


def connect_auth(
    info: dict[str, Any],
    *,
    nkeys_seed: str | None,
    user_credentials: str | None,
    user_jwt_cb: JwtCallback | None,
    signature_cb: SignatureCallback | None,
    nkeys_seed_str: str | None = None,
) -> dict[str, Any]:
    """The CONNECT fields for nkey or JWT authentication ({} when none is configured).

    ``user_jwt_cb`` (with ``signature_cb``) replaces a ``.creds`` file for users who keep
    credentials in a vault: the first returns the JWT, the second signs the nonce.
    Precedence: the callbacks, then ``user_credentials``, then ``nkeys_seed_str``, then
    ``nkeys_seed`` (the options check refuses the combinations).

    Raises:
        BadCredentialsError: a file cannot be used, or a callback raised or returned
            something unusable (its exception as ``__cause__``).
    """
    nonce = str(info.get("nonce", "")).encode()
    if user_jwt_cb is not None:
        if signature_cb is None:
            raise BadCredentialsError("user_jwt_cb needs signature_cb to sign the nonce")
        return {
            "jwt": _call_user_jwt_cb(user_jwt_cb),
            "sig": _encode_signature(_call_signature_cb(signature_cb, nonce)),
        }
    if user_credentials is not None:
        jwt, seed = read_creds_file(user_credentials)
        return {"jwt": jwt, "sig": _encode_signature(sign(seed, nonce))}
    if nkeys_seed_str is not None:
        seed = seed_from_string(nkeys_seed_str)
    elif nkeys_seed is not None:
        seed = read_seed_file(nkeys_seed)
    else:
        return {}
    public_key = _nkeys().from_seed(seed).public_key.decode()
    return {"nkey": public_key, "sig": _encode_signature(sign(seed, nonce))}

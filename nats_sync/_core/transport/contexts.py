"""``nats`` CLI contexts (ADR-21): the servers and credentials ``nats context save`` keeps.

How it works: a context is a JSON file ``<config>/nats/context/<name>.json``, where
``<config>`` is ``$XDG_CONFIG_HOME`` or else ``~/.config``; ``<config>/nats/context.txt``
names the selected one (what ``nats context select`` writes). ``connect()`` calls
:func:`resolve` with its ``servers`` and ``context`` arguments; it picks the context and
the server URLs in this order:

1. ``servers`` given: they are used; a context is read only if ``context`` names one.
2. ``context`` given: that context (its ``url``, else ``$NATS_URL``, else the default).
3. ``$NATS_URL`` set: it is used and no context is read.
4. ``$NATS_CONTEXT``, else the selected context, if any: its ``url``.
5. ``nats://127.0.0.1:4222`` (``_defaults.DEFAULT_URL``).

:func:`apply_context` then fills in connect's keywords from the context, only where the
caller left them at their defaults: an explicit argument always wins. The credential
fields count as one: any credential given to ``connect()`` leaves all the context's
aside, and ``tls=`` leaves ``ca``/``cert``/``key`` aside. Of the context's credentials
the first set one is used: ``user`` (with ``password``), ``creds``, ``user_jwt`` (signed
with the ``nkey`` seed file), ``nkey``, ``token``. Paths may start with ``~``. The
JetStream fields (``jetstream_domain``, ``jetstream_api_prefix``) are kept on the
:class:`NatsContext` for ``Client.jetstream()``. Empty strings mean "not set" (the CLI
writes every key). Fields this client has no use for (``description``,
``jetstream_event_prefix``, ``color_scheme``, ``windows_cert_*``) are ignored; ``nsc``
(which runs the ``nsc`` tool) is refused unless ``url`` and ``creds`` replace it, and a
``socks_proxy`` is refused (connecting past it would reach other servers than asked).
Every error names the file it is about.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nats_sync import _defaults as d
from nats_sync._core.transport.auth import read_seed_file, sign
from nats_sync.errors import BadCredentialsError, InvalidArgumentError, NotSupportedError

#: Environment variables read when ``connect()`` is given no servers.
NATS_URL_ENV = "NATS_URL"
NATS_CONTEXT_ENV = "NATS_CONTEXT"

#: The string fields of a context file this client uses.
_STRING_FIELDS = (
    "url",
    "user",
    "password",
    "creds",
    "nkey",
    "token",
    "cert",
    "key",
    "ca",
    "inbox_prefix",
    "jetstream_domain",
    "jetstream_api_prefix",
    "user_jwt",
    "nsc",
)
#: Fields holding a file path (``~`` expanded).
_PATH_FIELDS = ("creds", "nkey", "cert", "key", "ca")
#: connect()'s credential keywords: any of them given leaves the context's aside.
CREDENTIAL_OPTIONS = (
    "user",
    "password",
    "token",
    "user_credentials",
    "nkeys_seed",
    "nkeys_seed_str",
    "user_jwt_cb",
    "signature_cb",
)


@dataclass(frozen=True)
class NatsContext:
    """One context file, read and checked; empty fields are None.

    Attributes:
        name: the context's name (its file name without ``.json``).
        path: the file it was read from.
    """

    name: str
    path: Path
    url: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    creds: str | None = None
    nkey: str | None = None
    token: str | None = field(default=None, repr=False)
    cert: str | None = None
    key: str | None = None
    ca: str | None = None
    inbox_prefix: str | None = None
    jetstream_domain: str | None = None
    jetstream_api_prefix: str | None = None
    user_jwt: str | None = field(default=None, repr=False)
    nsc: str | None = None
    tls_first: bool = False


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``<config>/nats``: ``$XDG_CONFIG_HOME/nats``, else ``~/.config/nats``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "nats"


def context_path(name: str, environ: Mapping[str, str] | None = None) -> Path:
    """The file of the context ``name``.

    Raises:
        InvalidArgumentError: a name that is empty or is not a plain file name.
    """
    if (
        not isinstance(name, str)
        or not name
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or os.sep in name
    ):
        raise InvalidArgumentError(
            f"a nats context name must be a plain name (no '/', not starting with '.'), "
            f"got {name!r}"
        )
    return config_dir(environ) / "context" / f"{name}.json"


def selected_name(environ: Mapping[str, str] | None = None) -> str | None:
    """``$NATS_CONTEXT``, else the name in ``<config>/nats/context.txt``, else None.

    Raises:
        InvalidArgumentError: ``context.txt`` exists but cannot be read.
    """
    env = os.environ if environ is None else environ
    if env.get(NATS_CONTEXT_ENV):
        return env[NATS_CONTEXT_ENV]
    selected = config_dir(env) / "context.txt"
    try:
        name = selected.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidArgumentError(
            f"cannot read the selected nats context {selected}: {err}"
        ) from err
    return name or None


def load(name: str, environ: Mapping[str, str] | None = None) -> NatsContext:
    """Reads and checks the context ``name``.

    Raises:
        InvalidArgumentError: no such context, an unreadable file, malformed JSON, not a
            JSON object, or a field of the wrong type; the message names the file.
        NotSupportedError: the context needs ``nsc`` (and has no ``url`` and ``creds``),
            or a SOCKS proxy (``socks_proxy``).
    """
    path = context_path(name, environ)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidArgumentError(
            f"unknown nats context {name!r}: {path} does not exist"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidArgumentError(f"cannot read nats context {name!r} ({path}): {err}") from err
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidArgumentError(
            f"nats context {name!r}: {path} is not valid JSON: {err}"
        ) from None
    if not isinstance(data, dict):
        raise InvalidArgumentError(
            f"nats context {name!r}: {path} must hold a JSON object, got {type(data).__name__}"
        )
    values: dict[str, Any] = {}
    for key in _STRING_FIELDS:
        value = data.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise InvalidArgumentError(
                f"nats context {name!r} ({path}): {key} must be a string, got "
                f"{type(value).__name__}"
            )
        values[key] = os.path.expanduser(value) if key in _PATH_FIELDS else value
    tls_first = data.get("tls_first", False)
    if not isinstance(tls_first, bool):
        raise InvalidArgumentError(
            f"nats context {name!r} ({path}): tls_first must be true or false, got {tls_first!r}"
        )
    context = NatsContext(name=name, path=path, tls_first=tls_first, **values)
    socks_proxy = data.get("socks_proxy")
    if socks_proxy:
        raise NotSupportedError(
            f"nats context {name!r} ({path}) connects through the SOCKS proxy "
            f"{socks_proxy!r}, which nats_sync does not speak: remove socks_proxy from the "
            "context where the servers are reachable directly (or through a tunnel that "
            "the url names)"
        )
    if context.nsc and not (context.url and context.creds):
        raise NotSupportedError(
            f"nats context {name!r} ({path}) uses nsc ({context.nsc}), which nats_sync "
            "does not run: set url and creds in the context instead"
        )
    return context


def resolve(
    servers: str | Sequence[str] | None,
    context: str | None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str | Sequence[str], NatsContext | None]:
    """The servers ``connect()`` uses and the context it reads (see the module header).

    Args:
        servers: ``connect()``'s ``servers`` (None: not given).
        context: ``connect()``'s ``context`` (None: not given).
        environ: the environment (default ``os.environ``).

    Returns:
        The servers (as ``connect()`` takes them) and the context, or None.

    Raises:
        InvalidArgumentError: the named or selected context cannot be used (the message
            names its file).
        NotSupportedError: the context needs ``nsc``.
    """
    env = os.environ if environ is None else environ
    found: NatsContext | None = None
    if context is not None:
        found = load(context, env)
    elif servers is None and not env.get(NATS_URL_ENV):
        name = selected_name(env)
        found = load(name, env) if name is not None else None
    if servers is not None:
        return servers, found
    if found is not None and found.url:
        return found.url, found
    return env.get(NATS_URL_ENV) or d.DEFAULT_URL, found


def apply_context(
    context: NatsContext, keywords: MutableMapping[str, Any], defaults: Mapping[str, Any]
) -> None:
    """Fills ``keywords`` (connect's, by name) from ``context`` where they are at their
    defaults (see the module header).

    Args:
        context: the context read.
        keywords: connect's keywords; changed in place.
        defaults: each keyword's default.

    Raises:
        InvalidArgumentError: the TLS files cannot be loaded.
        BadCredentialsError: ``user_jwt`` without an ``nkey`` seed file.
    """

    def unset(name: str) -> bool:
        return bool(keywords.get(name, defaults[name]) == defaults[name])

    if context.inbox_prefix and unset("inbox_prefix"):
        keywords["inbox_prefix"] = context.inbox_prefix
    if context.tls_first and unset("tls_handshake_first"):
        keywords["tls_handshake_first"] = True
    if (context.ca or context.cert or context.key) and unset("tls"):
        keywords["tls"] = tls_context(context)
    if all(unset(name) for name in CREDENTIAL_OPTIONS):
        keywords.update(_credentials(context))


def tls_context(context: NatsContext) -> ssl.SSLContext:
    """A verifying TLS context trusting the context's ``ca`` (else the system's CAs),
    with its ``cert``/``key`` as the client certificate.

    Raises:
        InvalidArgumentError: a file that cannot be loaded, or a ``key`` without ``cert``.
    """
    where = f"nats context {context.name!r} ({context.path})"
    if context.key and not context.cert:
        raise InvalidArgumentError(f"{where}: key is set without cert")
    try:
        tls = ssl.create_default_context(cafile=context.ca)
    except (OSError, ssl.SSLError) as err:
        raise InvalidArgumentError(f"{where}: cannot load ca {context.ca}: {err}") from err
    if context.cert:
        try:
            tls.load_cert_chain(context.cert, context.key)
        except (OSError, ssl.SSLError) as err:
            raise InvalidArgumentError(
                f"{where}: cannot load cert {context.cert} / key {context.key}: {err}"
            ) from err
    return tls


def _credentials(context: NatsContext) -> dict[str, Any]:
    """connect's credential keywords for the first credential the context sets."""
    if context.user:
        return {"user": context.user, "password": context.password}
    if context.creds:
        return {"user_credentials": context.creds}
    if context.user_jwt:
        if not context.nkey:
            raise BadCredentialsError(
                f"nats context {context.name!r} ({context.path}): user_jwt needs nkey, "
                "the seed file that signs for it"
            )
        return _jwt_callbacks(context.user_jwt, context.nkey)
    if context.nkey:
        return {"nkeys_seed": context.nkey}
    if context.token:
        return {"token": context.token}
    return {}


def _jwt_callbacks(jwt: str, seed_file: str) -> dict[str, Callable[..., Any]]:
    """``user_jwt_cb``/``signature_cb`` for a JWT given as text, signed with a seed file
    (read on each handshake, as ``nkeys_seed`` is)."""
    read_seed_file(seed_file)  # fail now, not at the first handshake

    def user_jwt() -> str:
        return jwt

    def signature(nonce: bytes) -> bytes:
        return sign(read_seed_file(seed_file), nonce)

    return {"user_jwt_cb": user_jwt, "signature_cb": signature}

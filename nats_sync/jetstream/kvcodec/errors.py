"""The errors of key and value codecs: all ``CodecError``, a ``KeyValueError`` (so a
``JetStreamError`` and a ``nats_sync.Error``).

A key or value that cannot be encoded is bad input (also an ``InvalidKeyError`` or
``InvalidArgumentError``, so a builtin ``ValueError``); one that cannot be decoded was
stored by something else than this codec, and is never handed over as if it were.
"""

from __future__ import annotations

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream.errors import InvalidKeyError, KeyValueError

__all__ = [
    "CodecError",
    "KeyDecodeError",
    "KeyEncodeError",
    "ValueDecodeError",
    "ValueEncodeError",
    "WildcardNotSupportedError",
]


class CodecError(KeyValueError):
    """Root of the key and value codec errors."""

    label = "codec error"


class KeyEncodeError(CodecError, InvalidKeyError):
    """A key (or key filter) cannot be encoded, or encodes to something that is not a
    valid key; the message names the key as given."""

    label = "cannot encode key"


class KeyDecodeError(CodecError):
    """A stored key is not in the key codec's encoding (written by something else)."""

    label = "cannot decode key"


class ValueEncodeError(CodecError, InvalidArgumentError):
    """A value cannot be encoded by the value codec."""

    label = "cannot encode value"


class ValueDecodeError(CodecError):
    """A stored value is not in the value codec's encoding (written by something else,
    or damaged)."""

    label = "cannot decode value"


class WildcardNotSupportedError(CodecError, InvalidKeyError):
    """A key filter with ``*`` or ``>`` went through a key codec that cannot keep
    wildcards (it has no ``encode_filter``, or a codec in its chain has none)."""

    label = "wildcards not supported by the key codec"

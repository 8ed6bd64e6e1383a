"""The subject check's fast path (``_core.proto.encoder._check_subject``) against the subject
rules applied token by token. A file of its own: it needs hypothesis, which the
free-threaded run lacks, and test_encoder.py should still run there."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nats_sync._core.proto import encoder
from nats_sync.errors import BadSubjectError


def _token_rules(subject: str, wildcards: bool) -> str | None:
    """What the token rules find wrong with a framed ``subject``, or None."""
    tokens = subject.split(".")
    for index, token in enumerate(tokens):
        if not token:
            return "empty token"
        if token in {">", "*"} and (not wildcards or (token == ">" and index != len(tokens) - 1)):
            return "wildcard"
    return None


def _agrees(subject: str, wildcards: bool) -> None:
    wrong = _token_rules(subject, wildcards)
    try:
        encoded = encoder._check_subject(subject, wildcards=wildcards)
    except BadSubjectError:
        assert wrong is not None, subject
    else:
        assert wrong is None, (subject, wrong)
        assert encoded == subject.encode()


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=".*>ab_-$Ωé", min_size=1, max_size=12), st.booleans())
def test_the_fast_path_accepts_and_refuses_what_the_token_rules_do(
    subject: str, wildcards: bool
) -> None:
    """Subjects without a wildcard character, ``..`` or a dot at either end skip the
    token loop: the verdict must be the loop's."""
    _agrees(subject, wildcards)


@pytest.mark.parametrize(
    "subject",
    [
        "_INBOX.AbCdEf.1",
        "a",
        "a.b",
        "a*b.c",
        "a>b",
        ".a",
        "a.",
        "a..b",
        "*",
        ">",
        "a.*",
        "a.>",
        "a.>.b",
        "*.a",
        "a.**",
        ">>",
    ],
)
@pytest.mark.parametrize("wildcards", [False, True])
def test_the_edges(subject: str, wildcards: bool) -> None:
    _agrees(subject, wildcards)

"""Credential files and nonce signatures (no sockets; keys made with nkeys per test)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import nkeys
import pytest

from nats_sync._auth import connect_auth, read_creds_file, read_seed_file, sign
from nats_sync.errors import BadCredentialsError

FAKE_JWT = "eyJ0eXAiOiJKV1QifQ.eyJzdWIiOiJVQUJDIn0.c2lnbmF0dXJl"


def new_seed(prefix: int = nkeys.PREFIX_BYTE_USER) -> bytes:
    seed: bytes = nkeys.encode_seed(os.urandom(32), prefix)
    return seed


def creds_text(jwt: str, seed: bytes) -> str:
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed.decode()}\n"
        "------END USER NKEY SEED------\n"
    )


def test_seed_file_with_comments(tmp_path: Path) -> None:
    seed = new_seed()
    path = tmp_path / "user.nk"
    path.write_text(f"# my user\n{seed.decode()}\n")
    assert read_seed_file(str(path)) == seed


def test_creds_file_round_trip(tmp_path: Path) -> None:
    seed = new_seed()
    path = tmp_path / "user.creds"
    path.write_text(creds_text(FAKE_JWT, seed))
    assert read_creds_file(str(path)) == (FAKE_JWT, seed)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("garbage", "does not hold a JWT block"),
        (creds_text("not-a-jwt", b"SUAAAA"), "not a JWT"),
    ],
)
def test_bad_creds_files(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "bad.creds"
    path.write_text(content)
    with pytest.raises(BadCredentialsError, match=words):
        read_creds_file(str(path))


def test_missing_file_names_the_path_only(tmp_path: Path) -> None:
    with pytest.raises(BadCredentialsError, match=r"nope\.creds"):
        read_creds_file(str(tmp_path / "nope.creds"))


@pytest.mark.parametrize(
    ("prefix", "kind"),
    [(nkeys.PREFIX_BYTE_ACCOUNT, "account"), (nkeys.PREFIX_BYTE_OPERATOR, "operator")],
)
def test_seeds_of_the_wrong_kind_are_refused_without_showing_them(
    tmp_path: Path, prefix: int, kind: str
) -> None:
    seed = new_seed(prefix)
    path = tmp_path / "wrong.nk"
    path.write_text(seed.decode())
    with pytest.raises(BadCredentialsError, match=kind) as caught:
        read_seed_file(str(path))
    assert seed.decode() not in str(caught.value)
    creds = tmp_path / "wrong.creds"
    creds.write_text(creds_text(FAKE_JWT, seed))
    with pytest.raises(BadCredentialsError, match=kind) as caught:
        read_creds_file(str(creds))
    assert seed.decode() not in str(caught.value) and FAKE_JWT not in str(caught.value)


def test_a_malformed_seed_is_refused(tmp_path: Path) -> None:
    seed = bytearray(new_seed())
    seed[10] = ord("A") if seed[10] != ord("A") else ord("B")  # breaks the checksum
    path = tmp_path / "broken.nk"
    path.write_text(seed.decode())
    with pytest.raises(BadCredentialsError, match="malformed"):
        read_seed_file(str(path))


def test_the_nonce_signature_verifies_with_the_public_key(tmp_path: Path) -> None:
    seed = new_seed()
    path = tmp_path / "user.nk"
    path.write_text(seed.decode())
    fields = connect_auth({"nonce": "abc123"}, nkeys_seed=str(path), user_credentials=None,
                          user_jwt_cb=None, signature_cb=None)
    public = nkeys.from_seed(seed).public_key
    assert fields["nkey"] == public.decode()
    raw = base64.urlsafe_b64decode(fields["sig"] + "=" * (-len(fields["sig"]) % 4))
    assert raw == sign(seed, b"abc123")
    assert nkeys.from_seed(seed).verify(b"abc123", raw)


def test_callbacks_replace_the_creds_file() -> None:
    seed = new_seed()
    fields = connect_auth({"nonce": "n0nce"}, nkeys_seed=None, user_credentials=None,
                          user_jwt_cb=lambda: FAKE_JWT,
                          signature_cb=lambda nonce: sign(seed, nonce))
    assert fields["jwt"] == FAKE_JWT
    with pytest.raises(BadCredentialsError, match="signature_cb"):
        connect_auth({}, nkeys_seed=None, user_credentials=None, user_jwt_cb=lambda: "x",
                     signature_cb=None)
    assert connect_auth({}, nkeys_seed=None, user_credentials=None, user_jwt_cb=None,
                        signature_cb=None) == {}

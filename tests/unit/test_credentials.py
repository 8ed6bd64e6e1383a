"""Credential files and nonce signatures (no sockets; keys made with nkeys per test)."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Any

import nkeys
import pytest
from nacl.signing import VerifyKey

from nats_sync._core.transport import auth as _auth
from nats_sync._core.transport.auth import connect_auth, read_creds_file, read_seed_file, sign
from nats_sync._core.transport.options import build_options
from nats_sync.errors import BadCredentialsError, Error

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
    fields = connect_auth(
        {"nonce": "abc123"},
        nkeys_seed=str(path),
        user_credentials=None,
        user_jwt_cb=None,
        signature_cb=None,
    )
    public = nkeys.from_seed(seed).public_key
    assert fields["nkey"] == public.decode()
    raw = base64.urlsafe_b64decode(fields["sig"] + "=" * (-len(fields["sig"]) % 4))
    assert raw == sign(seed, b"abc123")
    assert nkeys.from_seed(seed).verify(b"abc123", raw)


def test_callbacks_replace_the_creds_file() -> None:
    seed = new_seed()
    fields = connect_auth(
        {"nonce": "n0nce"},
        nkeys_seed=None,
        user_credentials=None,
        user_jwt_cb=lambda: FAKE_JWT,
        signature_cb=lambda nonce: sign(seed, nonce),
    )
    assert fields["jwt"] == FAKE_JWT
    with pytest.raises(BadCredentialsError, match="signature_cb"):
        connect_auth(
            {}, nkeys_seed=None, user_credentials=None, user_jwt_cb=lambda: "x", signature_cb=None
        )
    assert (
        connect_auth(
            {}, nkeys_seed=None, user_credentials=None, user_jwt_cb=None, signature_cb=None
        )
        == {}
    )


# --- more file shapes -------------------------------------------------------------------


def test_seed_file_prefers_the_user_seed_among_other_lines(tmp_path: Path) -> None:
    user, account = new_seed(), new_seed(nkeys.PREFIX_BYTE_ACCOUNT)
    path = tmp_path / "mixed.nk"
    path.write_text(f"# SOME COMMENT\r\naccount: {account.decode()}\r\nuser: {user.decode()}\r\n")
    assert read_seed_file(str(path)) == user
    assert read_seed_file(path) == user  # type: ignore[arg-type]  # a Path works too


def test_creds_file_with_windows_line_ends(tmp_path: Path) -> None:
    seed = new_seed()
    path = tmp_path / "user.creds"
    path.write_bytes(creds_text(FAKE_JWT, seed).replace("\n", "\r\n").encode())
    assert read_creds_file(str(path)) == (FAKE_JWT, seed)


def test_a_creds_file_missing_a_block_is_refused(tmp_path: Path) -> None:
    seed = new_seed()
    whole = creds_text(FAKE_JWT, seed)
    jwt_only = whole[: whole.index("****")]
    seed_only = whole[whole.index("-----BEGIN USER") :]
    for name, content in (("jwt-only", jwt_only), ("seed-only", seed_only)):
        path = tmp_path / f"{name}.creds"
        path.write_text(content)
        with pytest.raises(BadCredentialsError, match="JWT block and an nkey seed") as caught:
            read_creds_file(str(path))
        assert seed.decode() not in str(caught.value) and FAKE_JWT not in str(caught.value)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "hello world",
        "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4",
        "SUshort",
        "S" + "U" * 60,
    ],
    ids=["empty", "words", "a-public-key", "too-short", "not-base32-seed"],
)
def test_files_without_a_usable_seed_are_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "user.nk"
    path.write_text(content)
    with pytest.raises(BadCredentialsError, match=r"user\.nk"):
        read_seed_file(str(path))


def test_a_secret_given_instead_of_a_path_is_not_echoed(tmp_path: Path) -> None:
    seed = new_seed()
    creds = creds_text(FAKE_JWT, seed)
    for reader, value in (
        (read_seed_file, seed.decode()),
        (read_creds_file, creds),
        (read_creds_file, FAKE_JWT),
    ):
        with pytest.raises(BadCredentialsError, match="looks like the secret") as caught:
            reader(value)
        shown = f"{caught.value} {caught.value!r}"
        assert seed.decode() not in shown and FAKE_JWT not in shown


def test_an_impossible_path_is_a_bad_credentials_error(tmp_path: Path) -> None:
    with pytest.raises(BadCredentialsError, match="cannot read"):
        read_seed_file(str(tmp_path / "nul\x00byte.nk"))
    binary = tmp_path / "binary.creds"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BadCredentialsError, match="cannot read"):
        read_creds_file(str(binary))


# --- signatures -------------------------------------------------------------------------


def _verify_key(public_key: str) -> VerifyKey:
    """The ed25519 key inside an nkey public key (prefix byte + 32 bytes + CRC16)."""
    raw = base64.b32decode(public_key + "=" * (-len(public_key) % 8))
    assert raw[0] == nkeys.PREFIX_BYTE_USER
    return VerifyKey(raw[1:33])


def test_the_signature_verifies_with_the_public_key_alone(tmp_path: Path) -> None:
    """What nats-server does: it knows only the public key sent in CONNECT (or the JWT's
    subject) and decodes ``sig`` as unpadded URL-safe base64."""
    path = tmp_path / "user.nk"
    for _ in range(20):  # some signatures hold '-' or '_' in URL-safe base64
        path.write_text(new_seed().decode())
        nonce = base64.urlsafe_b64encode(os.urandom(11)).decode()
        fields = connect_auth(
            {"nonce": nonce},
            nkeys_seed=str(path),
            user_credentials=None,
            user_jwt_cb=None,
            signature_cb=None,
        )
        assert "=" not in fields["sig"] and "+" not in fields["sig"] and "/" not in fields["sig"]
        signature = base64.urlsafe_b64decode(fields["sig"] + "=" * (-len(fields["sig"]) % 4))
        _verify_key(fields["nkey"]).verify(nonce.encode(), signature)


def test_creds_sign_with_the_seed_of_the_file(tmp_path: Path) -> None:
    seed = new_seed()
    path = tmp_path / "user.creds"
    path.write_text(creds_text(FAKE_JWT, seed))
    fields = connect_auth(
        {"nonce": "xyz"},
        nkeys_seed=None,
        user_credentials=str(path),
        user_jwt_cb=None,
        signature_cb=None,
    )
    assert fields.keys() == {"jwt", "sig"} and fields["jwt"] == FAKE_JWT
    public = nkeys.from_seed(seed).public_key.decode()
    _verify_key(public).verify(b"xyz", base64.urlsafe_b64decode(fields["sig"] + "=="))


def test_the_file_is_read_again_on_each_handshake(tmp_path: Path) -> None:
    """Rotated credentials are picked up by the next (re)connect."""
    path = tmp_path / "user.nk"
    first, second = new_seed(), new_seed()
    path.write_text(first.decode())
    auth = {
        "nkeys_seed": str(path),
        "user_credentials": None,
        "user_jwt_cb": None,
        "signature_cb": None,
    }
    assert connect_auth({}, **auth)["nkey"] == nkeys.from_seed(first).public_key.decode()
    path.write_text(second.decode())
    assert connect_auth({}, **auth)["nkey"] == nkeys.from_seed(second).public_key.decode()


# --- callbacks --------------------------------------------------------------------------


def _with_callbacks(jwt_cb: Any, sig_cb: Any) -> dict[str, Any]:
    return connect_auth(
        {"nonce": "n"},
        nkeys_seed=None,
        user_credentials=None,
        user_jwt_cb=jwt_cb,
        signature_cb=sig_cb,
    )


def test_callbacks_may_return_a_bytes_jwt() -> None:
    seed = new_seed()
    fields = _with_callbacks(FAKE_JWT.encode, lambda nonce: sign(seed, nonce))
    assert fields["jwt"] == FAKE_JWT


def _vault_down() -> str:
    raise ConnectionError(f"vault down; it held {FAKE_JWT}")


@pytest.mark.parametrize(
    ("jwt_cb", "sig_cb", "words"),
    [
        (_vault_down, lambda nonce: b"x" * 64, "user_jwt_cb raised ConnectionError"),
        (lambda: FAKE_JWT, lambda nonce: 1 / 0, "signature_cb raised ZeroDivisionError"),
        (lambda: 42, lambda nonce: b"x" * 64, "must return the JWT as str, got int"),
        (lambda: "opaque-token", lambda nonce: b"x" * 64, "not a JWT"),
        (lambda: b"\xff.\xff.\xff", lambda nonce: b"x" * 64, "not ASCII"),
        (lambda: FAKE_JWT, lambda nonce: "c2ln", "64-byte ed25519 signature.*got str"),
        # nats-py's signature_cb returns base64; ours returns the raw signature
        (lambda: FAKE_JWT, lambda nonce: base64.b64encode(b"x" * 64), "got 88 bytes"),
    ],
    ids=[
        "jwt-raises",
        "sig-raises",
        "jwt-int",
        "jwt-garbage",
        "jwt-bytes-not-ascii",
        "sig-str",
        "sig-base64",
    ],
)
def test_callback_failures_become_bad_credentials_errors(
    jwt_cb: Any, sig_cb: Any, words: str
) -> None:
    with pytest.raises(BadCredentialsError, match=words) as caught:
        _with_callbacks(jwt_cb, sig_cb)
    assert FAKE_JWT not in str(caught.value)


# --- options ------------------------------------------------------------------------


def test_options_check_the_credential_combinations(tmp_path: Path) -> None:
    seed = tmp_path / "user.nk"
    seed.write_text(new_seed().decode())
    creds = tmp_path / "user.creds"
    creds.write_text(creds_text(FAKE_JWT, new_seed()))
    signer = lambda nonce: b"x" * 64  # noqa: E731
    with pytest.raises(BadCredentialsError, match="go together"):
        build_options(None, user_jwt_cb=lambda: FAKE_JWT)
    with pytest.raises(BadCredentialsError, match="go together"):
        build_options(None, signature_cb=signer)
    with pytest.raises(BadCredentialsError, match="cannot be combined"):
        build_options(None, nkeys_seed=str(seed), user_credentials=str(creds))
    with pytest.raises(BadCredentialsError, match="cannot be combined"):
        build_options(None, nkeys_seed=str(seed), user_jwt_cb=lambda: FAKE_JWT, signature_cb=signer)
    with pytest.raises(Error, match="user_credentials must be a file path, got int"):
        build_options(None, user_credentials=3)
    with pytest.raises(Error, match="signature_cb must be callable"):
        build_options(None, user_jwt_cb=lambda: FAKE_JWT, signature_cb=b"sig")
    # The callbacks replace the file, which is then neither needed nor read.
    options = build_options(
        None,
        user_credentials=str(tmp_path / "absent.creds"),
        user_jwt_cb=lambda: FAKE_JWT,
        signature_cb=signer,
    )
    assert options.user_jwt_cb is not None


def test_options_repr_shows_paths_but_no_secret(tmp_path: Path) -> None:
    seed = new_seed()
    path = tmp_path / "user.nk"
    path.write_text(seed.decode())
    options = build_options(
        "nats://u:hunter2@h:4222", nkeys_seed=str(path), password="pw-1", token="tok-1"
    )
    shown = repr(options)
    assert str(path) in shown
    for secret in (seed.decode(), "hunter2", "pw-1", "tok-1"):
        assert secret not in shown


def test_a_broken_nkeys_install_is_named_with_its_import_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes `import nkeys` raise ImportError, as a broken install does
    # (nkeys 0.2.0 without pynacl): the message must say why, not only "install nkeys".
    monkeypatch.setitem(sys.modules, "nkeys", None)
    with pytest.raises(BadCredentialsError, match=r"nats-sync\[nkeys\].*import failed: .*nkeys"):
        _auth._nkeys()
